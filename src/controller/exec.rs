//! The executor seam: "run this command in pod P". Reconcilers build every
//! command from the pod's [`PodLayout`] (which the executor supplies), hand
//! it to [`PodExecutor::exec`], and get stdout back; so the in-cluster
//! pods/exec executor here and the local executor (local mode) run the very
//! same commands: an executor runs the argv it is given unchanged (a
//! reconciler may compose builders' commands before, as zonesync's
//! update-then-SOA `sh -c` does, but never an executor after).
//!
//! [`KubeExecutor`] execs only into pods this operator made for BIND: it
//! reads the pod first and refuses one without our labels and StatefulSet
//! owner ([`check_bind_pod`]). RBAC cannot say that: a Role grants
//! `pods/exec` on every pod of a namespace (resourceNames cannot follow
//! pods a StatefulSet creates, and there is no label selector in RBAC), so
//! the operator holds itself to it.
//!
//! Touches the cluster (pods/exec through the API server's websocket).
//! Never logs or returns stdin (it may carry TSIG key material) and never
//! puts stdout into `Debug` output (`cat keys.conf` prints key material).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::Client;
use kube::api::{Api, AttachParams};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::kube_message::KubeMessage;
use super::names::{
    APP_NAME, BIND_CONTAINER, LABEL_CLUSTER, LABEL_MANAGED_BY, LABEL_NAME, MANAGER,
    statefulset_name,
};
use crate::bind::commands::Command;
use crate::bind::layout::PodLayout;
use crate::bind::wire::{self, UpdateMessage, WireError};
use crate::bind::{TsigKey, ZoneName};
use crate::telemetry::Metrics;

/// A command that runs longer than this is abandoned (a wedged named must
/// not wedge a reconcile forever).
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest stderr excerpt kept in an error (status messages have a budget).
const MAX_STDERR_IN_ERROR: usize = 2048;

/// A pod, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

impl PodRef {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        PodRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a command that exited 0 printed. `Debug` shows sizes only: stdout
/// can hold key material (`cat keys.conf`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: String,
    pub stderr: String,
}

impl fmt::Debug for ExecOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecOutput")
            .field("stdout_bytes", &self.stdout.len())
            .field("stderr_bytes", &self.stderr.len())
            .finish()
    }
}

/// A command that could not run or exited non-zero. The message names the
/// pod, the program, the exit code and stderr; never stdin. `stdout` is
/// kept for parsers (named-checkconf reports on stdout) but left out of
/// `Display` and `Debug`.
#[derive(Clone, thiserror::Error)]
pub enum ExecError {
    #[error("failed to run {program} in pod {pod}: exit code {code}: {stderr}")]
    Exited {
        pod: String,
        program: String,
        code: i32,
        stdout: String,
        stderr: String,
    },
    #[error("failed to exec {program} in pod {pod}: {reason}")]
    Transport {
        pod: String,
        program: String,
        reason: String,
    },
}

impl fmt::Debug for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Display already leaves out stdout and stdin.
        write!(f, "ExecError({self})")
    }
}

impl ExecError {
    /// A non-zero exit. Trims stderr to a bounded excerpt.
    pub fn exited(pod: &PodRef, cmd: &Command, code: i32, stdout: String, stderr: &str) -> Self {
        ExecError::Exited {
            pod: pod.to_string(),
            program: program_name(cmd),
            code,
            stdout,
            stderr: excerpt(stderr),
        }
    }

    /// The command could not be started or its result not read.
    pub fn transport(pod: &PodRef, cmd: &Command, reason: impl fmt::Display) -> Self {
        ExecError::Transport {
            pod: pod.to_string(),
            program: program_name(cmd),
            reason: excerpt(&reason.to_string()),
        }
    }

    /// The exit code, when the command ran.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            ExecError::Exited { code, .. } => Some(*code),
            ExecError::Transport { .. } => None,
        }
    }

    /// stdout of a command that exited non-zero (empty otherwise).
    pub fn stdout(&self) -> &str {
        match self {
            ExecError::Exited { stdout, .. } => stdout,
            ExecError::Transport { .. } => "",
        }
    }

    /// stderr excerpt of a command that exited non-zero (empty otherwise).
    pub fn stderr(&self) -> &str {
        match self {
            ExecError::Exited { stderr, .. } => stderr,
            ExecError::Transport { .. } => "",
        }
    }
}

/// The program's base name, for messages (`rndc`, `sh`, `named-checkconf`).
pub fn program_name(cmd: &Command) -> String {
    cmd.argv
        .first()
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
        .unwrap_or_default()
}

fn excerpt(text: &str) -> String {
    let t = text.trim();
    if t.len() <= MAX_STDERR_IN_ERROR {
        return t.to_string();
    }
    let mut end = MAX_STDERR_IN_ERROR;
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &t[..end])
}

/// Runs commands inside BIND pods. Object safe: the context holds an
/// `Arc<dyn PodExecutor>`.
pub trait PodExecutor: Send + Sync {
    /// Where BIND lives in that pod (data dir, config dir, ports, tools).
    /// Every command for the pod is built from this.
    fn layout(&self, pod: &PodRef) -> PodLayout;

    /// Runs `cmd` (argv, optional stdin) in the pod's BIND container.
    /// Ok: it exited 0. Err: it exited non-zero (code and stderr inside) or
    /// could not run.
    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>>;

    /// Where the operator reaches the pod's DNS port: the one seam between
    /// a cluster (the pod IP and the container's DNS port,
    /// [`crate::bind::layout::defaults::DNS_PORT`]; see
    /// [`KubeExecutor`]) and the local runtime (127.0.0.1 and the pod's own
    /// port, which is what its layout says, the default here).
    fn dns_addr<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<SocketAddr, WireError>> {
        let layout = self.layout(pod);
        async move { Ok(SocketAddr::new(layout.server_addr, layout.dns_port)) }.boxed()
    }

    /// Sends a zone's UPDATE messages to the pod's DNS port, in order,
    /// signed with `key` (operations in, typed replies out). The one
    /// production implementation is this default: the operator's DNS
    /// client ([`crate::bind::wire`]) over TCP to [`Self::dns_addr`]; a
    /// test fake applies the same typed messages to its model. Ok: the
    /// messages sent.
    fn dns_update<'a>(
        &'a self,
        pod: &'a PodRef,
        messages: &'a [UpdateMessage],
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<usize, WireError>> {
        async move {
            let addr = self.dns_addr(pod).await?;
            wire::Client::new(addr).update(messages, key).await
        }
        .boxed()
    }

    /// SOA serials of `zones` as the pod serves them: pipelined queries on
    /// one TCP connection to [`Self::dns_addr`], each signed with `key`
    /// when given (the key decides which view answers, and lets the query
    /// past `allow-query`). A zone missing from the result is not served.
    /// A test fake answers from its model.
    fn dns_serials<'a>(
        &'a self,
        pod: &'a PodRef,
        zones: &'a [ZoneName],
        key: Option<&'a TsigKey>,
    ) -> BoxFuture<'a, Result<BTreeMap<ZoneName, u32>, WireError>> {
        async move {
            let addr = self.dns_addr(pod).await?;
            wire::Client::new(addr).serials(zones, key).await
        }
        .boxed()
    }

    /// A TSIG-signed AXFR of `zone` from the pod: every record (rdata in
    /// canonical wire form), the closing SOA dropped, every message's
    /// signature checked. A test fake answers from its model.
    fn dns_transfer<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<wire::Record>, WireError>> {
        async move {
            let addr = self.dns_addr(pod).await?;
            wire::Client::new(addr).axfr(zone, key).await
        }
        .boxed()
    }

    /// A TSIG-signed NOTIFY of `zone` (RFC 1996) sent by the operator to
    /// the pod's DNS port: a secondary that lags refreshes from its
    /// primaries at once. An answer refusing it (the pod does not serve the
    /// zone) is an error carrying that code. A test fake records it.
    fn dns_notify<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), WireError>> {
        async move {
            let addr = self.dns_addr(pod).await?;
            wire::Client::new(addr).notify(zone, key).await
        }
        .boxed()
    }

    /// A TSIG-signed IXFR of `zone` from `serial` (see
    /// [`wire::Client::ixfr`]).
    fn dns_ixfr<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        serial: u32,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<wire::client::Ixfr, WireError>> {
        async move {
            let addr = self.dns_addr(pod).await?;
            wire::Client::new(addr).ixfr(zone, serial, key).await
        }
        .boxed()
    }
}

/// What an [`ObservedExecutor`] is told after each command: the pod, the
/// command, its result and how long it took.
pub type Observer =
    dyn Fn(&PodRef, &Command, &Result<ExecOutput, ExecError>, Duration) + Send + Sync;

/// Runs every command through `inner` and tells an observer about it
/// afterwards: the one wrapper behind exec metrics, the bench's exec log
/// and the tests' exec counters.
pub struct ObservedExecutor {
    inner: Arc<dyn PodExecutor>,
    observe: Box<Observer>,
}

impl ObservedExecutor {
    pub fn new(
        inner: Arc<dyn PodExecutor>,
        observe: impl Fn(&PodRef, &Command, &Result<ExecOutput, ExecError>, Duration)
        + Send
        + Sync
        + 'static,
    ) -> Self {
        ObservedExecutor {
            inner,
            observe: Box::new(observe),
        }
    }

    /// Counts every command in `metrics` by verb ([`Command::verb`]) and
    /// outcome; [`super::Context`] wraps the executor it is given in one,
    /// so a cluster and local mode are counted alike.
    pub fn metered(inner: Arc<dyn PodExecutor>, metrics: Metrics) -> Self {
        Self::new(inner, move |_, cmd, result, _| {
            metrics.exec(cmd.verb(), result.is_ok())
        })
    }
}

impl PodExecutor for ObservedExecutor {
    fn layout(&self, pod: &PodRef) -> PodLayout {
        self.inner.layout(pod)
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        async move {
            let started = std::time::Instant::now();
            let result = self.inner.exec(pod, cmd).await;
            (self.observe)(pod, cmd, &result, started.elapsed());
            result
        }
        .boxed()
    }

    fn dns_addr<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<SocketAddr, WireError>> {
        self.inner.dns_addr(pod)
    }

    fn dns_update<'a>(
        &'a self,
        pod: &'a PodRef,
        messages: &'a [UpdateMessage],
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<usize, WireError>> {
        let exchange = self.inner.dns_update(pod, messages, key);
        self.told(pod, DNS_UPDATE, exchange).boxed()
    }

    fn dns_serials<'a>(
        &'a self,
        pod: &'a PodRef,
        zones: &'a [ZoneName],
        key: Option<&'a TsigKey>,
    ) -> BoxFuture<'a, Result<BTreeMap<ZoneName, u32>, WireError>> {
        let exchange = self.inner.dns_serials(pod, zones, key);
        self.told(pod, DNS_SOA, exchange).boxed()
    }

    fn dns_transfer<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<wire::Record>, WireError>> {
        let exchange = self.inner.dns_transfer(pod, zone, key);
        self.told(pod, DNS_AXFR, exchange).boxed()
    }

    fn dns_ixfr<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        serial: u32,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<wire::client::Ixfr, WireError>> {
        let exchange = self.inner.dns_ixfr(pod, zone, serial, key);
        self.told(pod, DNS_IXFR, exchange).boxed()
    }

    fn dns_notify<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), WireError>> {
        let exchange = self.inner.dns_notify(pod, zone, key);
        self.told(pod, DNS_NOTIFY, exchange).boxed()
    }
}

impl ObservedExecutor {
    /// Runs a DNS exchange and tells the observer about it as the
    /// pseudo-command `program` (no process ran), so metrics, the bench
    /// and tests see the operator's DNS traffic beside its execs.
    async fn told<T>(
        &self,
        pod: &PodRef,
        program: &str,
        exchange: BoxFuture<'_, Result<T, WireError>>,
    ) -> Result<T, WireError> {
        let started = std::time::Instant::now();
        let result = exchange.await;
        let cmd = Command {
            argv: vec![program.into()],
            stdin: None,
        };
        let told = match &result {
            Ok(_) => Ok(ExecOutput::default()),
            Err(e) => Err(ExecError::transport(pod, &cmd, e)),
        };
        (self.observe)(pod, &cmd, &told, started.elapsed());
        result
    }
}

/// The program name an [`ObservedExecutor`]'s observer sees for a DNS
/// UPDATE exchange ([`PodExecutor::dns_update`]).
pub const DNS_UPDATE: &str = "dns-update";
/// ... for SOA serial queries ([`PodExecutor::dns_serials`]).
pub const DNS_SOA: &str = "dns-soa";
/// ... for a zone transfer ([`PodExecutor::dns_transfer`]).
pub const DNS_AXFR: &str = "dns-axfr";
/// The verb of a signed IXFR from the operator.
pub const DNS_IXFR: &str = "dns-ixfr";
/// ... for a NOTIFY the operator sends a secondary
/// ([`PodExecutor::dns_notify`]).
pub const DNS_NOTIFY: &str = "dns-notify";

/// The in-cluster executor: the pods/exec subresource over a websocket.
#[derive(Clone)]
pub struct KubeExecutor {
    client: Client,
    timeout: Duration,
}

impl KubeExecutor {
    pub fn new(client: Client) -> Self {
        KubeExecutor {
            client,
            timeout: EXEC_TIMEOUT,
        }
    }

    async fn run(&self, pod: &PodRef, cmd: &Command) -> Result<ExecOutput, ExecError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        // Read now, not from a cache: the pod execed into is the one checked.
        let current = api
            .get(&pod.name)
            .await
            .map_err(|e| ExecError::transport(pod, cmd, KubeMessage(&e)))?;
        check_bind_pod(&current)
            .map_err(|why| ExecError::transport(pod, cmd, format!("refusing to exec: {why}")))?;
        let params = AttachParams::default()
            .container(BIND_CONTAINER)
            .stdin(cmd.stdin.is_some())
            .stdout(true)
            .stderr(true);
        let mut proc = api
            .exec(&pod.name, cmd.argv.clone(), &params)
            .await
            .map_err(|e| ExecError::transport(pod, cmd, KubeMessage(&e)))?;
        let status = proc.take_status();
        let stdin = proc.stdin();
        let stdout = proc.stdout();
        let stderr = proc.stderr();
        let feed = async {
            if let (Some(mut w), Some(text)) = (stdin, cmd.stdin.as_deref()) {
                // Errors surface as a failed command; their text never has stdin.
                let _ = w.write_all(text.as_bytes()).await;
                let _ = w.shutdown().await;
            }
        };
        let read_out = read_all(stdout);
        let read_err = read_all(stderr);
        let ((), out, err) = tokio::join!(feed, read_out, read_err);
        let status = match status {
            Some(s) => s.await,
            None => None,
        };
        let _ = proc.join().await;
        match status {
            Some(s) if s.status.as_deref() == Some("Success") => Ok(ExecOutput {
                stdout: out,
                stderr: err,
            }),
            Some(s) => match exit_code(&s) {
                Some(code) => Err(ExecError::exited(pod, cmd, code, out, &err)),
                None => Err(ExecError::transport(
                    pod,
                    cmd,
                    s.message.unwrap_or_else(|| "command failed".into()),
                )),
            },
            None => Err(ExecError::transport(
                pod,
                cmd,
                "the connection closed without an exit status",
            )),
        }
    }
}

/// Whether `pod` is a BIND pod this operator made: our labels, a cluster
/// label, controlled by that cluster's StatefulSet, with the BIND
/// container. Err says what is missing.
pub fn check_bind_pod(pod: &Pod) -> Result<(), String> {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).map(String::as_str);
    if label(LABEL_MANAGED_BY) != Some(MANAGER) || label(LABEL_NAME) != Some(APP_NAME) {
        return Err(format!(
            "the pod does not carry {LABEL_MANAGED_BY}={MANAGER} and {LABEL_NAME}={APP_NAME}"
        ));
    }
    let Some(cluster) = label(LABEL_CLUSTER) else {
        return Err(format!("the pod does not carry the {LABEL_CLUSTER} label"));
    };
    let owned = pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.kind == "StatefulSet"
            && o.api_version == "apps/v1"
            && o.name == statefulset_name(cluster)
    });
    if !owned {
        return Err(format!(
            "the pod is not controlled by StatefulSet {}",
            statefulset_name(cluster)
        ));
    }
    let has_bind = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == BIND_CONTAINER));
    if !has_bind {
        return Err(format!("the pod has no {BIND_CONTAINER} container"));
    }
    Ok(())
}

async fn read_all(reader: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let Some(r) = reader else {
        return String::new();
    };
    let mut r = r;
    let mut buf = Vec::new();
    let _ = r.read_to_end(&mut buf).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// The exit code from a pods/exec `Status` (`NonZeroExitCode`, cause
/// `ExitCode`).
fn exit_code(status: &Status) -> Option<i32> {
    status
        .details
        .as_ref()?
        .causes
        .as_ref()?
        .iter()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))
        .and_then(|c| c.message.as_deref()?.parse().ok())
}

impl PodExecutor for KubeExecutor {
    fn layout(&self, _pod: &PodRef) -> PodLayout {
        PodLayout::in_cluster()
    }

    /// The pod IP (read now, like exec's check) and the container's DNS
    /// port: the operator must be allowed to reach it (deploy/README.md,
    /// NetworkPolicy).
    fn dns_addr<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<SocketAddr, WireError>> {
        async move {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
            let unknown = |why: String| WireError::NoAddress {
                pod: pod.to_string(),
                why,
            };
            let current = api
                .get(&pod.name)
                .await
                .map_err(|e| unknown(KubeMessage(&e).to_string()))?;
            check_bind_pod(&current).map_err(unknown)?;
            let ip = current
                .status
                .and_then(|s| s.pod_ip)
                .ok_or_else(|| unknown("the pod has no IP yet".into()))?;
            let ip = ip
                .parse()
                .map_err(|_| unknown(format!("the pod IP {ip} is not an address")))?;
            Ok(SocketAddr::new(ip, crate::bind::layout::defaults::DNS_PORT))
        }
        .boxed()
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        async move {
            match tokio::time::timeout(self.timeout, self.run(pod, cmd)).await {
                Ok(r) => r,
                Err(_) => Err(ExecError::transport(
                    pod,
                    cmd,
                    format!("timed out after {}s", self.timeout.as_secs()),
                )),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_and_output_hide_stdout_and_stdin() {
        let pod = PodRef::new("ns", "c-0");
        let cmd = Command {
            argv: vec!["/usr/bin/nsupdate".into(), "-v".into()],
            stdin: Some("key hmac-sha256:k c2VjcmV0".into()),
        };
        let e = ExecError::exited(&pod, &cmd, 2, "c2VjcmV0 out".into(), "update failed");
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
        assert!(shown.contains("nsupdate") && shown.contains("exit code 2"));
        assert_eq!(e.exit_code(), Some(2));
        assert_eq!(e.stdout(), "c2VjcmV0 out");
        let out = ExecOutput {
            stdout: "secret \"c2VjcmV0\";".into(),
            stderr: String::new(),
        };
        assert!(!format!("{out:?}").contains("c2VjcmV0"));
    }

    fn bind_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "c-0",
                "namespace": "ns",
                "labels": {
                    "app.kubernetes.io/managed-by": "bind-operator",
                    "app.kubernetes.io/name": "bind",
                    "bind.unkin.net/cluster": "c",
                },
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "c",
                    "uid": "u", "controller": true,
                }],
            },
            "spec": {"containers": [{"name": "bind", "image": "bind"}]},
        }))
        .unwrap()
    }

    #[test]
    fn only_our_bind_pods_may_be_execed_into() {
        assert_eq!(check_bind_pod(&bind_pod()), Ok(()));
        let mut unlabelled = bind_pod();
        unlabelled.metadata.labels = None;
        assert!(
            check_bind_pod(&unlabelled)
                .unwrap_err()
                .contains("managed-by")
        );
        let mut no_cluster = bind_pod();
        no_cluster
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove("bind.unkin.net/cluster");
        assert!(check_bind_pod(&no_cluster).is_err());
        // Our labels copied onto a pod of someone else's controller.
        let mut foreign = bind_pod();
        foreign.metadata.owner_references.as_mut().unwrap()[0].name = "other".into();
        assert!(
            check_bind_pod(&foreign)
                .unwrap_err()
                .contains("StatefulSet c")
        );
        let mut no_bind = bind_pod();
        no_bind.spec.as_mut().unwrap().containers[0].name = "shell".into();
        assert!(check_bind_pod(&no_bind).is_err());
    }

    #[test]
    fn long_stderr_is_trimmed() {
        let pod = PodRef::new("ns", "c-0");
        let cmd = Command {
            argv: vec!["rndc".into()],
            stdin: None,
        };
        let e = ExecError::exited(&pod, &cmd, 1, String::new(), &"é".repeat(4000));
        assert!(e.stderr().len() <= MAX_STDERR_IN_ERROR + 3);
    }

    #[test]
    fn exit_code_comes_from_the_status_cause() {
        let s: Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "reason": "NonZeroExitCode",
            "message": "command terminated with non-zero exit code",
            "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}
        }))
        .unwrap();
        assert_eq!(exit_code(&s), Some(3));
    }
}
