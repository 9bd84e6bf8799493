//! One `bind-operator local -f DIR` session, minus the controllers and the
//! runtime (the caller starts those on the same in-memory API): keeps the
//! API in sync with DIR, and whenever the objects, the pods or the manifest
//! errors change, prints the table and rewrites `STATE_DIR/status.json`.
//! [`LocalSession::run`] goes on until shutdown; [`LocalSession::run_once`]
//! stops once the snapshot has stayed converged for [`ONCE_SETTLE`] (or at
//! a timeout) and returns the `--once` verdict.
//!
//! Touches the cluster only through the sync (writes) and by reading the
//! in-memory store (or listing through the client when there is no
//! in-memory API). It must never block on the runtime: pods arrive through
//! a `watch` channel the runtime owns.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use tokio::sync::watch;

use super::manifests::ManifestError;
use super::memapi::MemApi;
use super::render::{StatusFile, render_table};
use super::report::{OnceOutcome, PodEndpoint, Snapshot, build_snapshot, observe, observe_memapi};
use super::sync::{ManifestSync, POLL_INTERVAL};
use crate::api::{BindCluster, BindTSIGKey, BindZone, DNSRecord};

/// Shortest gap between two reports, so a burst of API writes (thousands
/// of records) costs one snapshot per gap rather than one per write.
pub const REPORT_INTERVAL: Duration = Duration::from_millis(200);
/// A report may take at most 1/this of the session's time: with tens of
/// thousands of objects a snapshot costs milliseconds, and reporting must
/// not slow down the controllers sharing the machine.
const REPORT_TIME_SHARE: u32 = 10;
/// How long `--once` waits with a converged snapshot before it believes it
/// (a controller may still be between two status writes).
pub const ONCE_SETTLE: Duration = Duration::from_secs(1);

/// Why a session could not run.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("failed to create state directory {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Serves our four kinds on an in-memory API (before loading manifests).
pub fn register_kinds(api: &MemApi) {
    api.register_custom::<BindCluster>();
    api.register_custom::<BindTSIGKey>();
    api.register_custom::<BindZone>();
    api.register_custom::<DNSRecord>();
}

/// A manifest directory, the API it is loaded into, and the state
/// directory the status goes to.
pub struct LocalSession {
    client: Client,
    mem: Option<MemApi>,
    sync: ManifestSync,
    status: StatusFile,
    out: Box<dyn Write + Send + Sync>,
    last_table: Option<String>,
    last_errors: Vec<ManifestError>,
    last_pending: bool,
}

impl LocalSession {
    /// A session on the in-memory API `mem` (`client` talks to it). The
    /// state directory is created if needed. The table goes to stdout.
    pub fn new(
        mem: MemApi,
        client: Client,
        dir: impl Into<PathBuf>,
        state_dir: &Path,
    ) -> Result<Self, SessionError> {
        let mut session = Self::with_client(client, dir, state_dir)?;
        session.mem = Some(mem);
        Ok(session)
    }

    /// A session on any API server (objects are listed through `client`).
    pub fn with_client(
        client: Client,
        dir: impl Into<PathBuf>,
        state_dir: &Path,
    ) -> Result<Self, SessionError> {
        let status = StatusFile::new(state_dir).map_err(|source| SessionError::StateDir {
            path: state_dir.to_owned(),
            source,
        })?;
        Ok(Self {
            client,
            mem: None,
            sync: ManifestSync::new(dir),
            status,
            out: Box::new(std::io::stdout()),
            last_table: None,
            last_errors: Vec::new(),
            last_pending: true,
        })
    }

    /// Sends the table somewhere else than stdout.
    pub fn with_output(mut self, out: impl Write + Send + Sync + 'static) -> Self {
        self.out = Box::new(out);
        self
    }

    /// Replaces the sync (e.g. one with a shorter resync interval).
    pub fn with_sync(mut self, sync: ManifestSync) -> Self {
        self.sync = sync;
        self
    }

    pub fn status_path(&self) -> &Path {
        self.status.path()
    }

    /// One pass over the directory; returns whether the report may have
    /// changed (something was written, or the errors or pending state moved).
    pub async fn sync(&mut self) -> bool {
        let report = self.sync.sync_once(&self.client).await;
        let moved = report.changed()
            || report.errors != self.last_errors
            || report.pending != self.last_pending;
        self.last_errors = report.errors;
        self.last_pending = report.pending;
        moved
    }

    /// The snapshot now, with the pods the runtime reported.
    pub async fn snapshot(&self, pods: &[PodEndpoint]) -> Snapshot {
        let objects = match &self.mem {
            Some(mem) => observe_memapi(mem),
            None => match observe(&self.client).await {
                Ok(objects) => objects,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to list objects for the report");
                    Vec::new()
                }
            },
        };
        build_snapshot(objects, pods, self.sync.errors(), self.sync.pending())
    }

    /// Writes `status.json` and prints the table, each only if it changed.
    pub fn publish(&mut self, snapshot: &Snapshot) {
        if let Err(e) = self.status.write(snapshot) {
            tracing::warn!(path = %self.status.path().display(), error = %e, "failed to write status file");
        }
        let table = render_table(snapshot);
        if self.last_table.as_deref() != Some(table.as_str()) {
            // A closed stdout must not stop DNS from being served.
            let _ = writeln!(self.out, "{table}").and_then(|()| self.out.flush());
            self.last_table = Some(table);
        }
    }

    /// Syncs and reports until `shutdown` resolves; returns the last
    /// snapshot (also written to `status.json`).
    pub async fn run(
        self,
        pods: watch::Receiver<Vec<PodEndpoint>>,
        shutdown: impl Future<Output = ()>,
    ) -> Snapshot {
        self.drive(pods, shutdown, None).await.0
    }

    /// Syncs and reports until the snapshot has been converged for
    /// [`ONCE_SETTLE`], `timeout` passed, or `shutdown` resolved; returns the
    /// verdict (print its [`OnceOutcome::summary`], exit with its code).
    pub async fn run_once(
        self,
        pods: watch::Receiver<Vec<PodEndpoint>>,
        timeout: Duration,
        shutdown: impl Future<Output = ()>,
    ) -> OnceOutcome {
        let deadline = tokio::time::sleep(timeout);
        let stop = async move {
            tokio::select! {
                () = deadline => {}
                () = shutdown => {}
            }
        };
        let (snapshot, settled) = self.drive(pods, stop, Some(ONCE_SETTLE)).await;
        let mut outcome = snapshot.once_outcome();
        if !settled {
            // Stopped early: whatever the last snapshot said, it did not hold
            // long enough to be trusted.
            outcome = Snapshot {
                converged: false,
                ..snapshot
            }
            .once_outcome();
        }
        outcome
    }

    /// The loop behind `run` and `run_once`. With `settle`, returns as soon as
    /// the snapshot has been converged that long (second value true).
    async fn drive(
        mut self,
        mut pods: watch::Receiver<Vec<PodEndpoint>>,
        shutdown: impl Future<Output = ()>,
        settle: Option<Duration>,
    ) -> (Snapshot, bool) {
        let mut changes = self.mem.as_ref().map(MemApi::changes);
        let mut pods_open = true;
        let mut sync_tick = tokio::time::interval(POLL_INTERVAL);
        sync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut report_tick = tokio::time::interval(REPORT_INTERVAL);
        report_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut dirty = true;
        let mut converged_since: Option<Instant> = None;
        let mut last: Option<Snapshot> = None;
        let mut next_report = Instant::now();
        tokio::pin!(shutdown);

        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                _ = sync_tick.tick() => {
                    // Without change notifications, every pass may have moved
                    // what the objects report.
                    dirty |= self.sync().await || changes.is_none();
                }
                r = wait_changed(changes.as_mut()), if changes.is_some() => {
                    if r.is_err() { changes = None; }
                    dirty = true;
                }
                r = pods.changed(), if pods_open => {
                    pods_open = r.is_ok();
                    dirty = true;
                }
                _ = report_tick.tick() => {
                    if (dirty && Instant::now() >= next_report) || last.is_none() {
                        dirty = false;
                        let started = Instant::now();
                        let current = pods.borrow().clone();
                        let snapshot = self.snapshot(&current).await;
                        self.publish(&snapshot);
                        last = Some(snapshot);
                        next_report = Instant::now() + started.elapsed() * REPORT_TIME_SHARE;
                    }
                    let converged = last.as_ref().is_some_and(|s| s.converged);
                    if !converged {
                        converged_since = None;
                    } else if let Some(settle) = settle {
                        let since = *converged_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= settle {
                            return (last.expect("converged implies a snapshot"), true);
                        }
                    }
                }
            }
        }
        // Final report, so status.json holds the state at exit.
        let current = pods.borrow().clone();
        let snapshot = self.snapshot(&current).await;
        self.publish(&snapshot);
        (snapshot, false)
    }
}

async fn wait_changed(
    changes: Option<&mut watch::Receiver<u64>>,
) -> Result<(), watch::error::RecvError> {
    match changes {
        Some(rx) => rx.changed().await,
        None => std::future::pending().await,
    }
}
