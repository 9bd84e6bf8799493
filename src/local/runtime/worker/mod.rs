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

mod publish;
mod start;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::container::{self, Container};
use super::identity::RunAs;
use super::pod_status::{Conditions, Terminated};
use super::table::PodDirs;
use super::volume::{self, Payload};
use super::watches::{PodKey, Stores};
use super::{DataDirPolicy, RestartData, Shared};

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
    /// The Pod's labels and annotations (hashed) when the pending change
    /// was first seen: a change to them ends the propagation delay, as a
    /// Pod update makes kubelet sync the pod and remount at once.
    pending_meta: u64,
    conditions: Conditions,
    published: Option<Value>,
    status_retry_at: Option<Instant>,
    /// Who the container runs as (from the Pod, at its last start).
    run_as: RunAs,
    /// The container asks for its log tail as the termination message.
    fallback_to_logs: bool,
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
            pending_meta: 0,
            conditions: Conditions::default(),
            published: None,
            status_retry_at: None,
            run_as: RunAs::default(),
            fallback_to_logs: false,
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
            self.pod.run_as = RunAs::of_pod(pod, super::identity::is_root());
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
        let meta = pod_meta_hash(pod);
        if self.pod.pending_since.is_none() {
            self.pod.pending_meta = meta;
        }
        let since = *self.pod.pending_since.get_or_insert(now);
        let pod_updated = meta != self.pod.pending_meta;
        if pod_updated || now >= since + self.shared.config.propagation_delay {
            if pod_updated {
                tracing::debug!(pod = %self.name(), "pod updated; remounting its config now");
            }
            self.mount(payload);
        }
    }

    /// Writes the config volume; false (and a waiting reason) on failure.
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
        let failed = exit_code != 0;
        let message = (failed && self.pod.fallback_to_logs)
            .then(|| container::termination_message(&self.dirs.log))
            .flatten();
        self.pod.last_terminated = Some(Terminated {
            message,
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
}

/// A hash of the Pod's labels and annotations.
fn pod_meta_hash(pod: &Pod) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pod.metadata.labels.hash(&mut h);
    pod.metadata.annotations.hash(&mut h);
    h.finish()
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
