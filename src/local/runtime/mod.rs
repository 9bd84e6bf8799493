//! The local runtime: plays the StatefulSet controller and kubelet for BIND
//! pods on one machine, against any `kube::Client` (the in-memory API in
//! local mode and tests; a real API server with `--kubeconfig`).
//!
//! # Contract
//! - StatefulSet controller (when [`RuntimeConfig::run_statefulsets`]):
//!   for every StatefulSet, creates Pods `<sts>-<ordinal>` for ordinals
//!   below `replicas` (template labels and annotations,
//!   `statefulset.kubernetes.io/pod-name`, `controller-revision-hash`, the
//!   StatefulSet as controlling owner), deletes pods at or above
//!   `replicas` and pods of an older template (so they are re-created), and
//!   writes the StatefulSet's status (replicas, readyReplicas, revisions).
//! - Kubelet: for every Pod (matching [`RuntimeConfig::pod_selector`]), a
//!   directory `<state>/<namespace>/<pod>/` with the config volume
//!   materialised by kubelet's `..data` symlink swap (re-materialised when
//!   its ConfigMap/Secrets change, after [`RuntimeConfig::propagation_delay`],
//!   or at once when the Pod's labels or annotations change, as kubelet
//!   syncs an updated pod),
//!   a data directory, and the pod's `entrypoint.sh` run with `sh` and the
//!   env of [`PodLayout::entrypoint_env`] so named runs as `named -g` on
//!   127.0.0.1 with the pod's own DNS and control ports. named's output goes
//!   to `named.log`. The Pod's containers are ready only while named
//!   answers DNS queries, and the Pod is Ready only when they are AND every
//!   `spec.readinessGates` condition (set by the gate's owner, kept by the
//!   runtime's strategic-merge status writes) is True, as kubelet does; a named that exits is restarted (restartCount counts it) on
//!   the same data directory; a new Pod object (deleted and re-created, or a
//!   new template) gets a new process and, unless its data volume is a
//!   claim or [`DataDirPolicy::Keep`] is set, an empty data directory.
//! - Networking is the one seam that differs from a cluster: every pod
//!   listens on 127.0.0.1 with ports from [`ports::PortAllocator`], stable
//!   for the runtime's life; [`LocalNetwork`] says where pods and primaries
//!   are, [`LocalExecutor`] runs pod commands as local processes.
//! - Every named it starts is stopped by [`LocalRuntime::shutdown`], killed
//!   when the runtime is dropped, and killed by the kernel when the process
//!   dies (parent-death signal): no process outlives it. A start on a state
//!   directory first stops what an earlier run left there (pid files).
//!
//! - Users: run as root, it runs each pod's processes (named and every
//!   exec'd command) as the pod's runAsUser / runAsGroup with its fsGroup,
//!   and gives the volumes to the fsGroup as kubelet does
//!   (`identity`); run as anyone else, everything runs as that user.
//! - Termination messages: with `terminationMessagePolicy:
//!   FallbackToLogsOnError`, a named that exits with an error leaves the
//!   tail of its log in `lastState.terminated.message`, as kubelet does.
//!
//! It never writes anything but Pods, `pods/status` and `statefulsets/status`
//! (and Pods only as the StatefulSet controller), never logs volume
//! contents or command stdin (both may hold keys), and needs no root.

mod atomic_writer;
mod container;
mod controller;
mod executor;
mod identity;
mod kubelet;
mod network;
mod pod_status;
mod ports;
mod probe;
mod statefulset;
mod table;
mod volume;
mod watches;
mod worker;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use atomic_writer::{AtomicWriter, DATA_DIR_LINK};
pub use executor::LocalExecutor;
pub use identity::RunAs;
pub use network::LocalNetwork;
pub use ports::{PodPorts, PortAllocator, PortsExhausted};
pub use probe::dns_answers;
pub use statefulset::{POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL};
pub use table::{PodDirs, PodEndpoint, PodRole};

use crate::bind::PodLayout;
use crate::bind::layout::{Tools, locate_tool};
use kubelet::Workers;
use table::PodTable;

/// What happens to a pod's data directory when its Pod object is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataDirPolicy {
    /// As the volume would be in a cluster: a claim survives the pod, an
    /// emptyDir (the default storage) starts empty. Container restarts
    /// keep the data either way.
    #[default]
    FollowVolume,
    /// Always keep the data directory.
    Keep,
}

/// What the data directory holds when a killed named comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartData {
    /// Same data, like a container restart.
    Keep,
    /// An empty data directory, like a pod rescheduled onto a new emptyDir.
    Empty,
}

/// Runtime settings; [`RuntimeConfig::new`] has defaults for local mode.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Root of every pod's files.
    pub state_dir: PathBuf,
    /// The first DNS port handed out; each pod takes two (DNS, control).
    pub base_port: u16,
    /// Also play the StatefulSet controller (the in-memory API has none;
    /// a real API server does).
    pub run_statefulsets: bool,
    /// Only run Pods matching this label selector.
    pub pod_selector: Option<String>,
    /// How long a changed ConfigMap/Secret takes to reach a running pod's
    /// volume (kubelet's sync delay); zero applies it at once.
    pub propagation_delay: Duration,
    pub data_dir: DataDirPolicy,
    /// Every named that exits comes back on an empty data directory.
    pub empty_data_on_exit: bool,
    /// Probe period while Ready (faster until the first success).
    pub probe_interval: Duration,
    pub probe_timeout: Duration,
    /// Consecutive failed probes that make a Ready pod NotReady.
    pub probe_failure_threshold: u32,
    /// SIGTERM to SIGKILL.
    pub stop_grace: Duration,
    /// First restart delay after named exits; doubles up to the max.
    pub restart_backoff: Duration,
    pub max_restart_backoff: Duration,
    /// Longest a command run by [`LocalExecutor`] may take.
    pub exec_timeout: Duration,
    /// The named binary (default: found on PATH or in the sbin dirs).
    pub named: Option<PathBuf>,
    /// Volumes are written owner-only (they hold keys); pod directories
    /// are created 0700 either way.
    pub private_files: bool,
    /// [`LocalRuntime::shutdown`] deletes the Pods it ran from the API. For
    /// a real API server: no kubelet runs them afterwards, so left alone
    /// they would stay Running and Ready there. Deleted, the StatefulSet
    /// controller re-creates them Pending and unscheduled, which is the
    /// truth, and a later run starts them afresh. (Marking them Failed
    /// would make the StatefulSet controller do the same, one step later.)
    pub delete_pods_on_shutdown: bool,
}

impl RuntimeConfig {
    pub fn new(state_dir: impl Into<PathBuf>, base_port: u16) -> Self {
        RuntimeConfig {
            state_dir: state_dir.into(),
            base_port,
            run_statefulsets: true,
            pod_selector: None,
            propagation_delay: Duration::ZERO,
            data_dir: DataDirPolicy::FollowVolume,
            empty_data_on_exit: false,
            probe_interval: Duration::from_millis(500),
            probe_timeout: Duration::from_secs(1),
            probe_failure_threshold: 2,
            stop_grace: Duration::from_secs(5),
            restart_backoff: Duration::from_millis(200),
            max_restart_backoff: Duration::from_secs(10),
            exec_timeout: crate::controller::exec::EXEC_TIMEOUT,
            named: None,
            private_files: true,
            delete_pods_on_shutdown: false,
        }
    }
}

/// Runtime failures callers see.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("failed to create state directory {path}: {source}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Ports(#[from] PortsExhausted),
    #[error("failed to find pod {namespace}/{name} in the local runtime")]
    NoSuchPod { namespace: String, name: String },
    #[error("failed to reach pod {namespace}/{name}: its container is not running")]
    NotRunning { namespace: String, name: String },
}

/// State shared by the runtime's tasks and handles.
pub(crate) struct Shared {
    pub(crate) config: RuntimeConfig,
    pub(crate) client: kube::Client,
    pub(crate) ports: PortAllocator,
    pub(crate) pids: Arc<container::PidSet>,
    pub(crate) table: PodTable,
    pub(crate) workers: Mutex<Workers>,
    pub(crate) tools: Tools,
    pub(crate) named: String,
    pub(crate) cancel: CancellationToken,
}

impl Shared {
    pub(crate) fn dirs(&self, namespace: &str, pod: &str) -> PodDirs {
        PodDirs::new(&self.config.state_dir, namespace, pod)
    }

    pub(crate) fn layout(&self, namespace: &str, pod: &str) -> Result<PodLayout, PortsExhausted> {
        let ports = self.ports.ports(namespace, pod)?;
        let dirs = self.dirs(namespace, pod);
        Ok(PodLayout {
            data_dir: dirs.data,
            config_dir: dirs.config,
            server_addr: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            dns_port: ports.dns,
            control_port: ports.control,
            stats_port: ports.stats,
            tools: self.tools.clone(),
        })
    }

    pub(crate) fn workers(&self) -> std::sync::MutexGuard<'_, Workers> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running local runtime. Stop it with [`LocalRuntime::shutdown`];
/// dropping it kills every named it started.
pub struct LocalRuntime {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for LocalRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRuntime")
            .field("state_dir", &self.shared.config.state_dir)
            .field("pods", &self.shared.table.list().len())
            .finish_non_exhaustive()
    }
}

impl LocalRuntime {
    /// Starts watching `client` and running pods. Must be called inside a
    /// Tokio runtime.
    pub async fn start(client: kube::Client, config: RuntimeConfig) -> Result<Self, RuntimeError> {
        std::fs::create_dir_all(&config.state_dir)
            .and_then(|()| {
                if !config.private_files {
                    return Ok(());
                }
                // Nobody else may even look inside: pods' volumes hold keys.
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&config.state_dir, std::fs::Permissions::from_mode(0o700))
            })
            .and_then(|()| {
                if identity::is_root() {
                    // Pods may run as other users: they must reach their
                    // volumes (search only: nobody else can list them).
                    identity::make_traversable(&config.state_dir)?;
                }
                Ok(())
            })
            .map_err(|source| RuntimeError::StateDir {
                path: config.state_dir.clone(),
                source,
            })?;
        // A run on a state directory that an earlier run left named
        // processes in (it was SIGKILLed before the kernel's death signal
        // existed here, or a pod's pid was reused): stop them first, they
        // hold the ports and files this run is about to use.
        let dir = config.state_dir.clone();
        let stale = tokio::task::spawn_blocking(move || container::stop_stale(&dir))
            .await
            .unwrap_or_default();
        if stale > 0 {
            tracing::warn!(count = stale, "stopped named processes of an earlier run");
        }
        let named = config
            .named
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| locate_tool("named"));
        let shared = Arc::new(Shared {
            ports: PortAllocator::new(config.base_port),
            pids: Arc::new(container::PidSet::default()),
            table: PodTable::default(),
            workers: Mutex::new(Workers::default()),
            tools: Tools::locate(),
            named,
            cancel: CancellationToken::new(),
            client,
            config,
        });
        // The watches, then what runs off them (the StatefulSet controller
        // only where no real API server runs its own).
        let watches::Watches {
            mut tasks,
            stores,
            ready,
            changes,
        } = watches::start_watches(&shared);
        if shared.config.run_statefulsets {
            tasks.push(tokio::spawn(controller::run(
                shared.clone(),
                stores.clone(),
                ready.clone(),
                changes.clone(),
            )));
        }
        tasks.push(kubelet::start_kubelet(&shared, stores, ready, changes));
        Ok(LocalRuntime { shared, tasks })
    }

    /// Stops every pod (SIGTERM, then SIGKILL after the grace period) and
    /// every watch; returns when no named started here is left.
    pub async fn shutdown(mut self) {
        let ran = self.shared.table.list();
        self.shared.cancel.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        let workers: Vec<_> = std::mem::take(&mut *self.shared.workers())
            .into_values()
            .collect();
        for w in workers {
            let _ = w.join.await;
        }
        self.shared.pids.kill_all();
        if self.shared.config.delete_pods_on_shutdown {
            delete_pods(&self.shared.client, &ran).await;
        }
    }

    /// Runs pod commands against the local pods.
    pub fn executor(&self) -> LocalExecutor {
        LocalExecutor::new(self.shared.clone())
    }

    /// Where local pods and primaries are reached.
    pub fn network(&self) -> LocalNetwork {
        LocalNetwork::new(self.shared.clone())
    }

    /// Every pod the runtime runs (or waits to run), sorted.
    pub fn pods(&self) -> Vec<PodEndpoint> {
        self.shared.table.list()
    }

    /// One pod, if the runtime has it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<PodEndpoint> {
        self.shared.table.get(namespace, name)
    }

    /// Moves whenever [`LocalRuntime::pods`] changes.
    pub fn pods_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.table.subscribe()
    }

    /// A pod's ports (allocated on first use, stable afterwards), also for
    /// pods that do not exist yet: the primary's port is needed to render
    /// the secondaries' config before the pod runs.
    pub fn ports(&self, namespace: &str, pod: &str) -> Result<PodPorts, PortsExhausted> {
        self.shared.ports.ports(namespace, pod)
    }

    /// A pod's layout (its dirs, ports and tools).
    pub fn layout(&self, namespace: &str, pod: &str) -> Result<PodLayout, PortsExhausted> {
        self.shared.layout(namespace, pod)
    }

    /// Where a pod's files live.
    pub fn dirs(&self, namespace: &str, pod: &str) -> PodDirs {
        self.shared.dirs(namespace, pod)
    }

    /// Kills a pod's named (SIGKILL, like a crash or OOM kill). The runtime
    /// restarts it like a container restart, on the same data or, with
    /// [`RestartData::Empty`], on an empty data directory.
    pub fn kill_named(
        &self,
        namespace: &str,
        name: &str,
        data: RestartData,
    ) -> Result<(), RuntimeError> {
        let workers = self.shared.workers();
        let running = self
            .shared
            .table
            .get(namespace, name)
            .is_some_and(|p| p.running);
        match workers.get(&(namespace.to_string(), name.to_string())) {
            Some(w) if running => {
                let _ = w.cmds.send(worker::WorkerCmd::KillNamed { data });
                Ok(())
            }
            Some(_) => Err(RuntimeError::NotRunning {
                namespace: namespace.into(),
                name: name.into(),
            }),
            None => Err(RuntimeError::NoSuchPod {
                namespace: namespace.into(),
                name: name.into(),
            }),
        }
    }

    /// named processes started and not yet reaped.
    pub fn running_processes(&self) -> usize {
        self.shared.pids.len()
    }
}

/// Deletes `pods` from the API at once (nothing runs them any more).
async fn delete_pods(client: &kube::Client, pods: &[PodEndpoint]) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams};
    for p in pods {
        let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace);
        match api
            .delete(&p.name, &DeleteParams::default().grace_period(0))
            .await
        {
            Ok(_) => {
                tracing::info!(pod = %p.name, namespace = %p.namespace, "deleted pod: local mode no longer runs it")
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::warn!(pod = %p.name, namespace = %p.namespace, error = %e, "failed to delete pod at exit; it may still show Ready")
            }
        }
    }
}

impl Drop for LocalRuntime {
    fn drop(&mut self) {
        // Safety net for a runtime dropped without shutdown (a failing test,
        // a panic): no named may outlive it.
        self.shared.cancel.cancel();
        self.shared.pids.kill_all();
        for t in &self.tasks {
            t.abort();
        }
    }
}
