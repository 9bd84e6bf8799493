//! One pod worker per pod name: kubelet's pod lifecycle for a local pod.
//!
//! Level-driven: on every cache change, timer or command it looks at the
//! Pod object as it is now and converges — a new uid is a new pod (old
//! process stopped, fresh volume, data kept only if the data volume is a
//! claim or the policy keeps it); no container yet means mount the config
//! volume and start `sh entrypoint.sh`; a changed ConfigMap/Secret is
//! re-materialised after the propagation delay; probes decide Ready; an
//! exited named is restarted with backoff on the same data directory. The
//! status it reports is patched only when it changed.
//!
//! Writes only `pods/status`. Never logs volume contents. Stops its
//! process before it exits, and exits only when its Pod is gone (removing
//! itself from the worker table under that table's lock) or the runtime
//! shuts down.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::atomic_writer::AtomicWriter;
use super::container::{Container, ContainerSpec};
use super::kubelet::{PodKey, Stores};
use super::pod_status::{self, Conditions, ContainerPhase, StatusInput, Terminated};
use super::statefulset::{POD_INDEX_LABEL, trailing_ordinal};
use super::table::{PodDirs, PodEndpoint};
use super::volume::{self, Payload};
use super::{DataDirPolicy, RestartData, Shared};
use crate::bind::layout::mount;
use crate::controller::names::{LABEL_CLUSTER, LABEL_INSTANCE};

/// Probe period until a started named first answers.
const STARTUP_PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// A named that ran this long without exiting resets the restart backoff.
const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(10);
/// Retry delay for a failed status write.
const STATUS_RETRY: Duration = Duration::from_secs(1);

/// Requests from the runtime handle.
#[derive(Debug)]
pub(crate) enum WorkerCmd {
    KillNamed { data: RestartData },
}

/// The runtime's handle on a worker.
pub(crate) struct WorkerHandle {
    pub(crate) cmds: mpsc::UnboundedSender<WorkerCmd>,
    pub(crate) join: JoinHandle<()>,
}

pub(crate) fn spawn(
    shared: Arc<Shared>,
    stores: Stores,
    key: PodKey,
    changes: watch::Receiver<u64>,
) -> WorkerHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let dirs = shared.dirs(&key.0, &key.1);
    let w = Worker {
        backoff: shared.config.restart_backoff,
        shared,
        stores,
        key,
        dirs,
        changes,
        cmds: rx,
        pod: PodState::default(),
    };
    WorkerHandle {
        cmds: tx,
        join: tokio::spawn(w.run()),
    }
}

/// Everything about the current Pod object (reset when the uid changes).
struct PodState {
    uid: Option<String>,
    start_time: Timestamp,
    container: Option<Container>,
    started_at: Option<(Instant, Timestamp)>,
    started_once: bool,
    waiting: (String, String),
    restarts: u32,
    last_terminated: Option<Terminated>,
    restart_at: Option<Instant>,
    empty_data_next: bool,
    ready: bool,
    probe_failures: u32,
    next_probe: Instant,
    mounted: Option<Payload>,
    pending_since: Option<Instant>,
    conditions: Conditions,
    published: Option<Value>,
    status_retry_at: Option<Instant>,
}

impl Default for PodState {
    fn default() -> Self {
        PodState {
            uid: None,
            start_time: Timestamp::now(),
            container: None,
            started_at: None,
            started_once: false,
            waiting: ("ContainerCreating".into(), String::new()),
            restarts: 0,
            last_terminated: None,
            restart_at: None,
            empty_data_next: false,
            ready: false,
            probe_failures: 0,
            next_probe: Instant::now(),
            mounted: None,
            pending_since: None,
            conditions: Conditions::default(),
            published: None,
            status_retry_at: None,
        }
    }
}

struct Worker {
    shared: Arc<Shared>,
    stores: Stores,
    key: PodKey,
    dirs: PodDirs,
    changes: watch::Receiver<u64>,
    cmds: mpsc::UnboundedReceiver<WorkerCmd>,
    backoff: Duration,
    pod: PodState,
}

async fn wait_exit(c: &mut Option<Container>) -> std::io::Result<std::process::ExitStatus> {
    match c {
        Some(c) => c.wait().await,
        None => std::future::pending().await,
    }
}

impl Worker {
    async fn run(mut self) {
        loop {
            if self.shared.cancel.is_cancelled() || !self.sync().await {
                break;
            }
            let deadline = self.next_deadline();
            tokio::select! {
                _ = self.shared.cancel.cancelled() => break,
                r = self.changes.changed() => if r.is_err() { break },
                Some(cmd) = self.cmds.recv() => self.command(cmd),
                st = wait_exit(&mut self.pod.container) => self.exited(st),
                _ = sleep_until(deadline) => {}
            }
        }
        self.stop_container().await;
    }

    fn ns(&self) -> &str {
        &self.key.0
    }

    fn name(&self) -> &str {
        &self.key.1
    }

    /// Converges on the Pod as cached now. False: the worker is done.
    async fn sync(&mut self) -> bool {
        self.changes.borrow_and_update();
        let pod = loop {
            if let Some(p) = self.stores.pod(&self.key) {
                break p;
            }
            self.stop_container().await;
            let mut workers = self.shared.workers();
            if self.stores.pod(&self.key).is_none() {
                workers.remove(&self.key);
                self.shared.table.remove(self.ns(), self.name());
                return false;
            }
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if self.pod.uid.as_deref() != Some(uid.as_str()) {
            self.new_pod(&pod, uid).await;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            self.stop_container().await;
            self.pod.waiting = ("Terminating".into(), String::new());
        } else {
            self.converge_volume_and_container(&pod);
            self.probe().await;
        }
        self.publish(&pod).await;
        true
    }

    /// A Pod object we have not run yet: stop the previous one's process and
    /// start from a fresh volume (and data, unless it is kept).
    async fn new_pod(&mut self, pod: &Pod, uid: String) {
        self.stop_container().await;
        let keep = self.shared.config.data_dir == DataDirPolicy::Keep
            || volume::data_volume_is_persistent(pod);
        if !keep {
            self.empty_dir(&self.dirs.data);
        }
        let _ = std::fs::remove_dir_all(&self.dirs.config);
        tracing::info!(pod = %self.name(), namespace = %self.ns(), uid = %uid, kept_data = keep, "running new pod");
        self.pod = PodState {
            uid: Some(uid),
            ..PodState::default()
        };
        self.backoff = self.shared.config.restart_backoff;
    }

    fn empty_dir(&self, dir: &std::path::Path) {
        let _ = std::fs::remove_dir_all(dir);
        if let Err(e) = std::fs::create_dir_all(dir) {
            tracing::warn!(pod = %self.name(), error = %e, "failed to create data directory");
        }
    }

    fn converge_volume_and_container(&mut self, pod: &Pod) {
        let now = Instant::now();
        let wanted = volume::config_volume(pod).and_then(|v| volume::resolve(pod, v, &self.stores));
        if self.pod.container.is_none() {
            if self.pod.restart_at.is_some_and(|t| now < t) {
                return;
            }
            self.pod.restart_at = None;
            match wanted {
                Err(e) => self.pod.waiting = ("ContainerCreating".into(), e.to_string()),
                Ok(payload) => {
                    if self.mount(payload) {
                        self.start_container(pod);
                    }
                }
            }
            return;
        }
        // A source that vanished leaves the last content in place, as
        // kubelet does.
        let Ok(payload) = wanted else { return };
        if self.pod.mounted.as_ref() == Some(&payload) {
            self.pod.pending_since = None;
            return;
        }
        let since = *self.pod.pending_since.get_or_insert(now);
        if now >= since + self.shared.config.propagation_delay {
            self.mount(payload);
        }
    }

    /// Writes the config volume; false (and a waiting reason) on failure.
    fn mount(&mut self, payload: Payload) -> bool {
        let writer = AtomicWriter::new(&self.dirs.config);
        match writer.write(&payload) {
            Ok(changed) => {
                if changed {
                    tracing::debug!(pod = %self.name(), "config volume updated");
                }
                self.pod.mounted = Some(payload);
                self.pod.pending_since = None;
                true
            }
            Err(e) => {
                tracing::warn!(pod = %self.name(), error = %e, "failed to write config volume");
                self.pod.waiting = (
                    "ContainerCreating".into(),
                    format!("failed to write config volume: {e}"),
                );
                self.pod.restart_at = Some(Instant::now() + self.shared.config.restart_backoff);
                false
            }
        }
    }

    fn ordinal(&self, pod: &Pod) -> u32 {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_INDEX_LABEL))
            .and_then(|v| v.parse().ok())
            .or_else(|| trailing_ordinal(self.name()))
            .unwrap_or(0)
    }

    fn env(&self, pod: &Pod, ordinal: u32) -> Result<Vec<(String, String)>, String> {
        let layout = self
            .shared
            .layout(self.ns(), self.name())
            .map_err(|e| e.to_string())?;
        let path = std::env::var("PATH").unwrap_or_else(|_| {
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
        });
        let mut env = vec![
            ("PATH".to_string(), path),
            ("HOSTNAME".to_string(), self.name().to_string()),
        ];
        // The template's literal values first; the local seam's overrides win.
        let container = pod.spec.as_ref().and_then(|s| s.containers.first());
        for e in container.and_then(|c| c.env.as_ref()).into_iter().flatten() {
            if let Some(v) = &e.value {
                env.push((e.name.clone(), v.clone()));
            }
        }
        env.extend(layout.entrypoint_env(ordinal, IpAddr::V4(Ipv4Addr::LOCALHOST)));
        env.push((
            crate::bind::layout::env::NAMED_BIN.into(),
            self.shared.named.clone(),
        ));
        Ok(env)
    }

    fn start_container(&mut self, pod: &Pod) {
        let ordinal = self.ordinal(pod);
        let script = self.dirs.config.join(mount::ENTRYPOINT);
        let env = match self.env(pod, ordinal) {
            Ok(env) => env,
            Err(e) => {
                self.pod.waiting = ("CreateContainerError".into(), e);
                return;
            }
        };
        if !script.exists() {
            self.pod.waiting = (
                "CreateContainerError".into(),
                format!("failed to find {} in the config volume", mount::ENTRYPOINT),
            );
            return;
        }
        if let Err(e) = std::fs::create_dir_all(&self.dirs.data) {
            self.pod.waiting = ("CreateContainerError".into(), e.to_string());
            return;
        }
        let spec = ContainerSpec {
            script,
            cwd: self.dirs.data.clone(),
            env,
            log: self.dirs.log.clone(),
        };
        let header = format!(
            "{} pod {}/{} uid {} restart {}",
            Timestamp::now(),
            self.ns(),
            self.name(),
            self.pod.uid.as_deref().unwrap_or_default(),
            self.pod.restarts
        );
        match Container::start(&spec, &header, &self.shared.pids) {
            Ok(c) => {
                tracing::info!(pod = %self.name(), namespace = %self.ns(), pid = c.pid(), "named started");
                self.pod.container = Some(c);
                self.pod.started_at = Some((Instant::now(), Timestamp::now()));
                self.pod.started_once = true;
                self.pod.probe_failures = 0;
                self.pod.next_probe = Instant::now() + STARTUP_PROBE_INTERVAL;
            }
            Err(e) => {
                tracing::warn!(pod = %self.name(), error = %e, "failed to start named");
                self.pod.waiting = ("CreateContainerError".into(), e.to_string());
                self.pod.restart_at = Some(Instant::now() + self.next_backoff());
            }
        }
    }

    fn next_backoff(&mut self) -> Duration {
        let b = self.backoff;
        self.backoff = (self.backoff * 2).min(self.shared.config.max_restart_backoff);
        b
    }

    fn command(&mut self, cmd: WorkerCmd) {
        match cmd {
            WorkerCmd::KillNamed { data } => {
                if let Some(c) = &self.pod.container {
                    tracing::info!(pod = %self.name(), ?data, "killing named on request");
                    self.pod.empty_data_next = data == RestartData::Empty;
                    // A requested kill is no crash loop: restart promptly.
                    self.backoff = self.shared.config.restart_backoff;
                    c.kill();
                }
            }
        }
    }

    fn exited(&mut self, status: std::io::Result<std::process::ExitStatus>) {
        use std::os::unix::process::ExitStatusExt;
        let Some(_c) = self.pod.container.take() else {
            return;
        };
        let (exit_code, signal) = match &status {
            Ok(st) => (
                st.code().unwrap_or(128 + st.signal().unwrap_or(0)),
                st.signal(),
            ),
            Err(_) => (-1, None),
        };
        let (ran, started) = self
            .pod
            .started_at
            .take()
            .map(|(i, t)| (i.elapsed(), t))
            .unwrap_or((Duration::ZERO, Timestamp::now()));
        if ran >= BACKOFF_RESET_AFTER {
            self.backoff = self.shared.config.restart_backoff;
        }
        self.pod.restarts += 1;
        self.pod.ready = false;
        self.pod.last_terminated = Some(Terminated {
            exit_code,
            signal,
            started_at: started,
            finished_at: Timestamp::now(),
        });
        if std::mem::take(&mut self.pod.empty_data_next) || self.shared.config.empty_data_on_exit {
            self.empty_dir(&self.dirs.data);
        }
        let delay = self.next_backoff();
        self.pod.restart_at = Some(Instant::now() + delay);
        self.pod.waiting = (
            "CrashLoopBackOff".into(),
            format!("back-off {delay:?} restarting failed container"),
        );
        tracing::info!(pod = %self.name(), namespace = %self.ns(), exit_code, ?signal, restarts = self.pod.restarts, "named exited; restarting");
    }

    async fn stop_container(&mut self) {
        if let Some(c) = self.pod.container.take() {
            tracing::info!(pod = %self.name(), namespace = %self.ns(), pid = c.pid(), "stopping named");
            c.stop(self.shared.config.stop_grace).await;
        }
        self.pod.started_at = None;
        self.pod.ready = false;
    }

    async fn probe(&mut self) {
        let now = Instant::now();
        if self.pod.container.is_none() || now < self.pod.next_probe {
            return;
        }
        let Ok(ports) = self.shared.ports.ports(self.ns(), self.name()) else {
            return;
        };
        let cfg = &self.shared.config;
        let addr = (Ipv4Addr::LOCALHOST, ports.dns).into();
        if super::probe::dns_answers(addr, cfg.probe_timeout).await {
            self.pod.ready = true;
            self.pod.probe_failures = 0;
        } else {
            self.pod.probe_failures += 1;
            if self.pod.probe_failures >= cfg.probe_failure_threshold {
                self.pod.ready = false;
            }
        }
        let period = if self.pod.ready {
            cfg.probe_interval
        } else {
            STARTUP_PROBE_INTERVAL.min(cfg.probe_interval)
        };
        self.pod.next_probe = Instant::now() + period;
    }

    fn next_deadline(&self) -> Option<Instant> {
        let p = &self.pod;
        [
            p.container.as_ref().map(|_| p.next_probe),
            p.pending_since
                .map(|s| s + self.shared.config.propagation_delay),
            p.restart_at.filter(|_| p.container.is_none()),
            p.status_retry_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn cluster(&self, pod: &Pod) -> String {
        let sts = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "StatefulSet")
            .map(|o| o.name.clone());
        let owner = sts
            .as_deref()
            .and_then(|s| self.stores.statefulset(self.ns(), s))
            .and_then(|s| {
                s.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .find(|o| o.kind == "BindCluster")
                    .map(|o| o.name.clone())
            });
        let label = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_CLUSTER).or_else(|| l.get(LABEL_INSTANCE)))
            .cloned();
        owner.or(label).or(sts).unwrap_or_else(|| {
            self.name()
                .rsplit_once('-')
                .map_or(self.name(), |(s, _)| s)
                .to_string()
        })
    }

    /// Updates the runtime's table and, when it changed, the Pod's status.
    async fn publish(&mut self, pod: &Pod) {
        let ordinal = self.ordinal(pod);
        if let Ok(ports) = self.shared.ports.ports(self.ns(), self.name()) {
            let mut entry = PodEndpoint::new(
                self.ns(),
                self.name(),
                &self.cluster(pod),
                ordinal,
                ports,
                self.dirs.log.clone(),
            );
            entry.running = self.pod.container.is_some();
            entry.ready = self.pod.ready;
            entry.restarts = self.pod.restarts;
            entry.uid = self.pod.uid.clone().unwrap_or_default();
            self.shared.table.set(entry);
        }

        let now = Timestamp::now();
        let running = self.pod.container.is_some();
        let p = &mut self.pod;
        p.conditions.set("PodScheduled", true, p.start_time);
        p.conditions.set("Initialized", true, p.start_time);
        p.conditions.set("ContainersReady", running && p.ready, now);
        p.conditions.set("Ready", running && p.ready, now);
        let phase = match (&p.container, p.started_at) {
            (Some(c), Some((_, since))) => ContainerPhase::Running {
                since,
                pid: c.pid(),
            },
            _ => ContainerPhase::Waiting {
                reason: p.waiting.0.clone(),
                message: p.waiting.1.clone(),
            },
        };
        let container = pod.spec.as_ref().and_then(|s| s.containers.first());
        let status = pod_status::build(&StatusInput {
            container_name: container.map_or("bind", |c| c.name.as_str()),
            image: container
                .and_then(|c| c.image.as_deref())
                .unwrap_or_default(),
            start_time: p.start_time,
            started_once: p.started_once,
            phase: &phase,
            ready: running && p.ready,
            restarts: p.restarts,
            last_terminated: p.last_terminated.as_ref(),
            conditions: &p.conditions,
        });
        if p.published.as_ref() == Some(&status) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.shared.client.clone(), &self.key.0);
        let patch = json!({ "status": status });
        match api
            .patch_status(&self.key.1, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.pod.published = Some(status);
                self.pod.status_retry_at = None;
            }
            Err(e) => {
                tracing::debug!(pod = %self.key.1, error = %e, "failed to write pod status; retrying");
                self.pod.status_retry_at = Some(Instant::now() + STATUS_RETRY);
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
