//! `bind-operator local -f DIR`: one process that serves real DNS from a
//! manifest directory. It wires the pieces of local mode together: an API
//! (the in-memory one with our kinds registered, or a real API server with
//! `--kubeconfig`), the local runtime that plays kubelet, the controllers
//! with the runtime's executor and network, and the session that keeps the
//! API in step with DIR and prints the table / writes `status.json`.
//!
//! [`LocalMode`] is the library form (tests drive it in-process and reach
//! the runtime through [`LocalMode::runtime`]); [`run_blocking`] is what the
//! binary calls: flags in, exit code out, stopping on SIGINT/SIGTERM.
//!
//! # Choices
//! - State directory: by default a fresh temporary directory, removed on
//!   exit. The in-memory API starts empty on every run (generated keys are
//!   new), so named's data from an earlier run would not match it; a fresh
//!   directory keeps both in step. `--state-dir D` keeps everything
//!   (status.json, named.log, zone files) in D after exit.
//! - `--kubeconfig`: the runtime runs the BIND pods of that API server
//!   (label `app.kubernetes.io/name=bind`, managed by bind-operator), plays
//!   no StatefulSet controller (the cluster has one) and binds nothing to a
//!   node. The controllers run here as well, with the local executor and
//!   network: where no kubelet exists, pods/exec has nowhere to go, so an
//!   operator elsewhere could never reconfig or update these pods (and its
//!   own Deployment could not run either). Do not also run `bind-operator
//!   run` against the same API server.
//!
//! Touches the cluster through the session (applies DIR), the controllers
//! and the runtime (Pods and their status). Never prints or logs key
//! material; the state directory holds keys and is created owner-only.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::memapi::MemApi;
use super::report::{OnceOutcome, PodEndpoint, Snapshot};
use super::runtime::{LocalRuntime, RuntimeConfig, RuntimeError};
use super::session::{LocalSession, SessionError, register_kinds};
use crate::controller::names::{APP_NAME, LABEL_MANAGED_BY, LABEL_NAME, MANAGER};

/// First DNS port handed out when `--base-port` is not given (each pod takes
/// a DNS and a control port; taken ports are skipped).
pub const DEFAULT_BASE_PORT: u16 = 5300;
/// How long `--once` waits for convergence when `--timeout` is not given.
pub const DEFAULT_ONCE_TIMEOUT: Duration = Duration::from_secs(180);
/// Exit code when local mode could not run at all (distinct from the
/// `--once` verdicts 0, 1 and 2, so CI can tell bad manifests from a broken
/// setup).
pub const EXIT_FAILED: u8 = 3;

/// Which API server local mode works against.
pub enum Backend {
    /// A fresh in-memory API inside this process.
    InMemory,
    /// A real API server: its StatefulSet controller makes the Pods, the
    /// runtime runs them.
    Cluster(Client),
}

/// What one local-mode process serves.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The manifest directory kept in sync with the API.
    pub dir: PathBuf,
    /// Where pods' files and `status.json` go.
    pub state_dir: PathBuf,
    /// The first DNS port handed out.
    pub base_port: u16,
}

/// Why local mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("failed to read manifest directory {path}")]
    ManifestDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to create a temporary state directory")]
    TempDir(#[source] std::io::Error),
    #[error("failed to create state directory {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to start the local runtime")]
    Runtime(#[from] RuntimeError),
    #[error("failed to start the session")]
    Session(#[from] SessionError),
    #[error("failed to start the async runtime")]
    AsyncRuntime(#[source] std::io::Error),
    #[error("failed to parse the log filter {filter:?}: {message}")]
    LogFilter { filter: String, message: String },
    #[error("failed to serve metrics")]
    Metrics(#[from] crate::operator::health::HealthError),
    #[error("failed to read kubeconfig {path}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No `#[source]`: kube's message already repeats its causes.
    #[error(
        "failed to find a Kubernetes API server (KUBECONFIG, ~/.kube/config or in-cluster): {detail}"
    )]
    InferConfig { detail: String },
    #[error("failed to build a Kubernetes client")]
    Client(#[source] kube::Error),
    #[error(transparent)]
    Signal(#[from] crate::operator::ServeError),
}

/// The label selector of the pods local mode runs for a real API server.
pub fn cluster_pod_selector() -> String {
    format!("{LABEL_NAME}={APP_NAME},{LABEL_MANAGED_BY}={MANAGER}")
}

/// A started local mode: runtime running, the session ready to sync DIR;
/// the controllers start after its first pass. Run it with
/// [`LocalMode::serve`] or [`LocalMode::once`];
/// both stop everything they started before returning. Dropped unrun, the
/// runtime kills every named it started.
pub struct LocalMode {
    session: LocalSession,
    mem: Option<MemApi>,
    pods: watch::Receiver<Vec<PodEndpoint>>,
    services: Services,
    state_dir: PathBuf,
    metrics: crate::telemetry::Metrics,
}

/// What runs beside the session and must be stopped after it.
struct Services {
    runtime: Arc<LocalRuntime>,
    feed: JoinHandle<()>,
    controllers: Controllers,
    stop_controllers: CancellationToken,
}

/// The controllers, started once the session's first pass has put all of
/// DIR into the API.
enum Controllers {
    Ready(Box<dyn FnOnce() -> JoinHandle<()> + Send>),
    Running(JoinHandle<()>),
}

impl LocalMode {
    /// Starts the runtime against `backend` (the controllers start with
    /// [`LocalMode::serve`] or [`LocalMode::once`]). `tweak`
    /// adjusts the runtime's settings (tests shorten grace periods).
    pub async fn start(
        config: LocalConfig,
        backend: Backend,
        tweak: impl FnOnce(&mut RuntimeConfig),
    ) -> Result<Self, LocalError> {
        // A missing DIR is a typo, not an empty repository: say so up front
        // rather than serving nothing.
        std::fs::read_dir(&config.dir).map_err(|source| LocalError::ManifestDir {
            path: config.dir.clone(),
            source,
        })?;
        let mut runtime_config = RuntimeConfig::new(&config.state_dir, config.base_port);
        let (client, mem) = match backend {
            Backend::InMemory => {
                let mem = MemApi::new();
                register_kinds(&mem);
                (mem.client(), Some(mem))
            }
            Backend::Cluster(client) => {
                runtime_config.run_statefulsets = false;
                runtime_config.pod_selector = Some(cluster_pod_selector());
                runtime_config.delete_pods_on_shutdown = true;
                (client, None)
            }
        };
        tweak(&mut runtime_config);
        let session = match &mem {
            Some(mem) => {
                LocalSession::new(mem.clone(), client.clone(), &config.dir, &config.state_dir)?
            }
            None => LocalSession::with_client(client.clone(), &config.dir, &config.state_dir)?,
        }
        .with_serving_check();
        let runtime = Arc::new(LocalRuntime::start(client.clone(), runtime_config).await?);
        let (pods, feed) = feed_pods(runtime.clone());

        let stop_controllers = CancellationToken::new();
        let metrics = crate::telemetry::Metrics::new();
        let controllers = Controllers::Ready(Box::new({
            let (exec, network) = (runtime.executor(), runtime.network());
            let stop = stop_controllers.clone();
            let metrics = metrics.clone();
            move || {
                tokio::spawn(crate::controller::run_scoped(
                    client,
                    Arc::new(exec),
                    Arc::new(network),
                    metrics,
                    crate::telemetry::Readiness::new(),
                    crate::controller::scope::Scope::cluster(),
                    stop.cancelled_owned(),
                ))
            }
        }));
        Ok(LocalMode {
            session,
            mem,
            pods,
            services: Services {
                runtime,
                feed,
                controllers,
                stop_controllers,
            },
            state_dir: config.state_dir,
            metrics,
        })
    }

    /// The controllers' metrics (what `--metrics-addr` serves).
    pub fn metrics(&self) -> crate::telemetry::Metrics {
        self.metrics.clone()
    }

    /// The runtime, to inspect or disturb pods (tests kill named through
    /// it). Drop the handle before [`LocalMode::serve`] returns, so the
    /// runtime can be shut down gracefully.
    pub fn runtime(&self) -> Arc<LocalRuntime> {
        self.services.runtime.clone()
    }

    /// The in-memory API, when local mode runs one (tests count its
    /// requests).
    pub fn memapi(&self) -> Option<&MemApi> {
        self.mem.as_ref()
    }

    /// Prints the full table whenever the process receives SIGUSR1.
    pub fn with_table_on_sigusr1(mut self) -> Self {
        self.session = self.session.with_table_on_sigusr1();
        self
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Where the session writes its JSON status.
    pub fn status_path(&self) -> &Path {
        self.session.status_path()
    }

    /// Prints the table somewhere else than stdout.
    pub fn with_output(mut self, out: impl Write + Send + Sync + 'static) -> Self {
        self.session = self.session.with_output(out);
        self
    }

    /// Serves until `shutdown` resolves, then stops controllers and pods;
    /// returns the last snapshot (also in `status.json`).
    pub async fn serve(mut self, shutdown: impl Future<Output = ()>) -> Snapshot {
        self.first_pass().await;
        let snapshot = self.session.run(self.pods, shutdown).await;
        self.services.stop().await;
        snapshot
    }

    /// Runs until everything has converged (or `timeout`, or `shutdown`),
    /// then stops controllers and pods; returns the verdict.
    pub async fn once(
        mut self,
        timeout: Duration,
        shutdown: impl Future<Output = ()>,
    ) -> OnceOutcome {
        self.first_pass().await;
        let outcome = self.session.run_once(self.pods, timeout, shutdown).await;
        self.services.stop().await;
        outcome
    }

    /// Puts all of DIR into the API, then starts the controllers: they
    /// first see the whole directory, as an operator restarted on a
    /// synced cluster does, so what they decide between objects (which of
    /// two keys sharing a keyName is refused) does not depend on the order
    /// the files were applied in.
    async fn first_pass(&mut self) {
        self.session.first_pass().await;
        self.services.start_controllers();
    }
}

impl Services {
    fn start_controllers(&mut self) {
        let placeholder = Controllers::Running(tokio::spawn(async {}));
        if let Controllers::Ready(start) = std::mem::replace(&mut self.controllers, placeholder) {
            self.controllers = Controllers::Running(start());
        }
    }

    /// Controllers first (so no reconcile execs into a stopping pod), then
    /// every pod.
    async fn stop(self) {
        self.stop_controllers.cancel();
        if let Controllers::Running(task) = self.controllers
            && let Err(e) = task.await
        {
            tracing::warn!(error = %e, "controllers ended abnormally");
        }
        self.feed.abort();
        let _ = self.feed.await;
        match Arc::try_unwrap(self.runtime) {
            Ok(runtime) => runtime.shutdown().await,
            // Someone still holds a handle: the last drop kills the pods
            // (SIGKILL rather than a clean stop).
            Err(_) => tracing::warn!("runtime still referenced at exit; pods stop on its drop"),
        }
    }
}

/// Republishes the runtime's pod list on every change, as the session
/// wants it. The task holds a runtime handle until aborted.
fn feed_pods(runtime: Arc<LocalRuntime>) -> (watch::Receiver<Vec<PodEndpoint>>, JoinHandle<()>) {
    let mut changed = runtime.pods_changed();
    let (tx, rx) = watch::channel(runtime.pods());
    let task = tokio::spawn(async move {
        while changed.changed().await.is_ok() {
            let pods = runtime.pods();
            tx.send_if_modified(|current| {
                let moved = *current != pods;
                if moved {
                    *current = pods;
                }
                moved
            });
        }
    });
    (rx, task)
}

/// Flags of `bind-operator local`.
#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    /// None: a temporary directory removed on exit.
    pub state_dir: Option<PathBuf>,
    pub base_port: u16,
    /// `Some(timeout)`: `--once`.
    pub once: Option<Duration>,
    /// `Some(None)`: `--kubeconfig` without a path (KUBECONFIG,
    /// ~/.kube/config, in-cluster).
    pub kubeconfig: Option<Option<PathBuf>>,
    /// tracing EnvFilter directives (logs go to stderr); RUST_LOG wins.
    pub log_filter: String,
    /// Serve `/metrics` (and `/healthz`, `/readyz`) here, as the
    /// operator does in a cluster.
    pub metrics_addr: Option<std::net::SocketAddr>,
}

/// Runs `bind-operator local` on a fresh multi-threaded runtime; returns
/// the process exit code (0 after a clean stop; with `--once`, the
/// verdict's code).
pub fn run_blocking(opts: Options) -> Result<u8, LocalError> {
    init_logging(&opts.log_filter)?;
    let rt = tokio::runtime::Runtime::new().map_err(LocalError::AsyncRuntime)?;
    rt.block_on(run(opts))
}

/// `bind-operator local` on the current runtime.
pub async fn run(opts: Options) -> Result<u8, LocalError> {
    // Installed before anything starts, so a signal during startup still
    // stops the pods cleanly.
    let shutdown = shutdown_signal()?.shared();
    // Everything local mode and its named processes write (keys, zone
    // files, status.json) is for the invoking user only.
    // SAFETY: umask(2) cannot fail and touches no memory.
    unsafe {
        libc::umask(PRIVATE_UMASK);
    }
    let backend = match &opts.kubeconfig {
        None => Backend::InMemory,
        Some(path) => Backend::Cluster(cluster_client(path.as_deref()).await?),
    };
    let temp;
    let state_dir = match &opts.state_dir {
        Some(d) => {
            create_private_dir(d)?;
            // Pods run with their data directory as working directory: a
            // relative path would not resolve there.
            std::path::absolute(d).map_err(|source| LocalError::StateDir {
                path: d.clone(),
                source,
            })?
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("bind-operator-local-")
                .tempdir()
                .map_err(LocalError::TempDir)?;
            create_private_dir(temp.path())?;
            temp.path().to_owned()
        }
    };
    let mode = LocalMode::start(
        LocalConfig {
            dir: opts.dir.clone(),
            state_dir,
            base_port: opts.base_port,
        },
        backend,
        |_| {},
    )
    .await?
    .with_table_on_sigusr1();
    let kept = if opts.state_dir.is_some() {
        "kept after exit"
    } else {
        "removed on exit; --state-dir keeps it"
    };
    println!(
        "bind-operator local: serving {} ({}); state in {} ({kept}); status in {}",
        opts.dir.display(),
        if opts.kubeconfig.is_some() {
            "kubeconfig API server"
        } else {
            "in-memory API"
        },
        mode.state_dir().display(),
        mode.status_path().display(),
    );
    let stop_metrics = CancellationToken::new();
    if let Some(addr) = opts.metrics_addr {
        let readiness = crate::telemetry::Readiness::new();
        readiness.set_ready(true);
        let server = crate::operator::HealthServer::bind(addr, readiness, mode.metrics()).await?;
        println!(
            "bind-operator local: metrics on http://{}/metrics",
            server.local_addr()
        );
        tokio::spawn(server.serve(stop_metrics.clone()));
    }
    let _stop_metrics = stop_metrics.drop_guard();
    match opts.once {
        None => {
            mode.serve(shutdown).await;
            Ok(0)
        }
        Some(timeout) => {
            let outcome = mode.once(timeout, shutdown).await;
            print!("{}", outcome.summary());
            let _ = std::io::stdout().flush();
            Ok(outcome.code)
        }
    }
}

/// The umask of local mode: no bits for group and others.
const PRIVATE_UMASK: libc::mode_t = 0o077;
/// Mode of the state directory (it holds keys).
const PRIVATE_DIR_MODE: u32 = 0o700;

/// SIGTERM, SIGINT and SIGHUP (the terminal closed) all stop local mode
/// cleanly: its named processes go with it.
fn shutdown_signal() -> Result<impl Future<Output = ()>, LocalError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen =
        |kind| signal(kind).map_err(|e| LocalError::Signal(crate::operator::ServeError::Signal(e)));
    let mut term = listen(SignalKind::terminate())?;
    let mut interrupt = listen(SignalKind::interrupt())?;
    let mut hangup = listen(SignalKind::hangup())?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
            _ = hangup.recv() => "SIGHUP",
        };
        tracing::info!(signal = name, "shutting down");
    })
}

/// Creates the state directory readable by the owner only (it will hold
/// keys); an existing one is made owner-only too, since what this run
/// writes there is as secret.
fn create_private_dir(path: &Path) -> Result<(), LocalError> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    let result = if path.is_dir() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(PRIVATE_DIR_MODE))
    } else {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR_MODE)
            .create(path)
    };
    result.map_err(|source| LocalError::StateDir {
        path: path.to_owned(),
        source,
    })
}

/// A client for the API server of `path`, or of the inferred config.
async fn cluster_client(path: Option<&Path>) -> Result<Client, LocalError> {
    let config = match path {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                LocalError::Kubeconfig {
                    path: path.to_owned(),
                    source,
                }
            })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|source| LocalError::Kubeconfig {
                    path: path.to_owned(),
                    source,
                })?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| LocalError::InferConfig {
                detail: e.to_string(),
            })?,
    };
    crate::operator::manager::client_for(config).map_err(LocalError::Client)
}

/// Logs to stderr, so stdout carries only the table and the verdict.
fn init_logging(filter: &str) -> Result<(), LocalError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => env,
        _ => filter.to_string(),
    };
    let env_filter =
        tracing_subscriber::EnvFilter::try_new(&filter).map_err(|e| LocalError::LogFilter {
            filter: filter.clone(),
            message: e.to_string(),
        })?;
    use std::io::IsTerminal as _;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in a file.
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
    Ok(())
}
