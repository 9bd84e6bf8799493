//! One `bind-operator local -f DIR` session, minus the controllers and the
//! runtime (the caller starts those on the same API): keeps the API in
//! sync with DIR, keeps `STATE_DIR/status.json` current, and tells the user
//! what happens. [`LocalSession::run`] goes on until shutdown;
//! [`LocalSession::run_once`] stops once the snapshot has stayed converged
//! for [`ONCE_SETTLE`] (or at a timeout) and returns the `--once` verdict.
//!
//! # Output
//! Quiet: one line per change (a document applied or deleted, with its
//! file; an object or pod moving from one state to another, with the
//! reason), and the full table only when everything has settled (or on
//! SIGUSR1, when enabled). `status.json` follows every change.
//!
//! # Idle costs nothing
//! Nothing here polls: the directory is read when the file system reports
//! a change ([`DirWatch`](crate::local::manifest_dir::DirWatch)), objects are read from the in-memory store or
//! from watches (never LISTed per report), pods arrive on a channel, and a
//! timer runs only while something is due (a report, a retry, a serving
//! check, the `--once` settle time).
//!
//! Touches the cluster only through the sync (writes) and its watches. It
//! must never block on the runtime: pods arrive through a `watch` channel
//! the runtime owns.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::manifests::{ManifestError, ManifestKind};
use super::memapi::MemApi;
use super::render::{StatusFile, describe, one_line, render_table};
use super::report::{
    ObjectStatus, OnceOutcome, PodEndpoint, Snapshot, build_snapshot, classify, observe_memapi,
};
use super::serving;
use super::sync::{ManifestSync, RETRY_INTERVAL, SyncReport};
use crate::api::{BindCluster, BindTSIGKey, BindZone, DNSRecord, Phase};

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
/// How soon the pods are asked again while one does not yet serve a zone.
const SERVING_RECHECK: Duration = Duration::from_millis(250);
/// Most change lines printed for one report; a burst of thousands of
/// records gets a count instead.
const MAX_CHANGE_LINES: usize = 20;

/// The kinds whose objects the report shows.
const WATCHED_KINDS: [ManifestKind; 4] = [
    ManifestKind::BindCluster,
    ManifestKind::BindTSIGKey,
    ManifestKind::BindZone,
    ManifestKind::DNSRecord,
];

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

/// Where the session reads objects from.
enum Objects {
    /// The in-memory store itself (no requests).
    Memory(MemApi),
    /// Watches on a real API server, one store per kind.
    Watched(Watches),
}

/// Watches of the reported kinds on any API server: a reflector store per
/// kind and a counter that moves on every event.
struct Watches {
    stores: Vec<(ManifestKind, Store<DynamicObject>)>,
    changes: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Watches {
    fn start(client: &Client) -> Self {
        let (tx, changes) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let mut stores = Vec::new();
        let mut tasks = Vec::new();
        for kind in WATCHED_KINDS {
            let resource = kind.api_resource();
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let writer = reflector::store::Writer::new(resource);
            stores.push((kind, writer.as_reader()));
            let tx = tx.clone();
            let stream = kube::runtime::reflector(
                writer,
                watcher(api, watcher::Config::default()).default_backoff(),
            );
            tasks.push(tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    if let Err(e) = event {
                        tracing::warn!(kind = kind.as_str(), error = %e, "watch for the report failed; retrying");
                    }
                    tx.send_modify(|n| *n += 1);
                }
            }));
        }
        Watches {
            stores,
            changes,
            tasks,
        }
    }

    fn objects(&self, kind: ManifestKind) -> Vec<Value> {
        self.stores
            .iter()
            .filter(|(k, _)| *k == kind)
            .flat_map(|(_, store)| store.state())
            .filter_map(|o| serde_json::to_value(&*o).ok())
            .collect()
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Objects {
    fn rows(&self) -> Vec<ObjectStatus> {
        match self {
            Objects::Memory(mem) => observe_memapi(mem),
            Objects::Watched(w) => WATCHED_KINDS
                .into_iter()
                .flat_map(|kind| w.objects(kind).into_iter().map(move |o| classify(kind, &o)))
                .collect(),
        }
    }

    fn of(&self, kind: ManifestKind) -> Vec<Value> {
        match self {
            Objects::Memory(mem) => {
                let r = kind.api_resource();
                mem.raw_list(&r.api_version, &r.plural)
            }
            Objects::Watched(w) => w.objects(kind),
        }
    }

    fn changes(&self) -> watch::Receiver<u64> {
        match self {
            Objects::Memory(mem) => mem.changes(),
            Objects::Watched(w) => w.changes.clone(),
        }
    }
}

/// A manifest directory, the API it is loaded into, and the state
/// directory the status goes to.
pub struct LocalSession {
    client: Client,
    objects: Objects,
    sync: ManifestSync,
    status: StatusFile,
    out: Box<dyn Write + Send + Sync>,
    printer: Printer,
    last_errors: Vec<ManifestError>,
    last_pending: bool,
    check_serving: bool,
    table_on_sigusr1: bool,
}

impl LocalSession {
    /// A session on the in-memory API `mem` (`client` talks to it). The
    /// state directory is created if needed. Output goes to stdout.
    pub fn new(
        mem: MemApi,
        client: Client,
        dir: impl Into<PathBuf>,
        state_dir: &Path,
    ) -> Result<Self, SessionError> {
        Self::build(client, Objects::Memory(mem), dir, state_dir)
    }

    /// A session on any API server (objects are watched through `client`).
    pub fn with_client(
        client: Client,
        dir: impl Into<PathBuf>,
        state_dir: &Path,
    ) -> Result<Self, SessionError> {
        let objects = Objects::Watched(Watches::start(&client));
        Self::build(client, objects, dir, state_dir)
    }

    fn build(
        client: Client,
        objects: Objects,
        dir: impl Into<PathBuf>,
        state_dir: &Path,
    ) -> Result<Self, SessionError> {
        let status = StatusFile::new(state_dir).map_err(|source| SessionError::StateDir {
            path: state_dir.to_owned(),
            source,
        })?;
        Ok(Self {
            client,
            objects,
            sync: ManifestSync::new(dir),
            status,
            out: Box::new(std::io::stdout()),
            printer: Printer::default(),
            last_errors: Vec::new(),
            last_pending: true,
            check_serving: false,
            table_on_sigusr1: false,
        })
    }

    /// Sends the output somewhere else than stdout.
    pub fn with_output(mut self, out: impl Write + Send + Sync + 'static) -> Self {
        self.out = Box::new(out);
        self
    }

    /// Replaces the sync (e.g. one with a resync interval).
    pub fn with_sync(mut self, sync: ManifestSync) -> Self {
        self.sync = sync;
        self
    }

    /// Converged also requires the pods to answer for their zones (see
    /// `serving`); for pods that really run named.
    pub fn with_serving_check(mut self) -> Self {
        self.check_serving = true;
        self
    }

    /// Prints the full table whenever the process receives SIGUSR1.
    pub fn with_table_on_sigusr1(mut self) -> Self {
        self.table_on_sigusr1 = true;
        self
    }

    pub fn status_path(&self) -> &Path {
        self.status.path()
    }

    /// One pass over the directory; returns whether the report may have
    /// changed (something was written, or the errors or pending state
    /// moved). Prints a line per applied or deleted object.
    pub async fn sync(&mut self) -> bool {
        let report = self.sync.sync_once(&self.client).await;
        let lines = self.applied_lines(&report);
        self.print_lines(&lines);
        let moved = report.changed()
            || report.errors != self.last_errors
            || report.pending != self.last_pending;
        self.last_errors = report.errors;
        self.last_pending = report.pending;
        moved
    }

    /// The first pass over the directory, before anything else runs (local
    /// mode starts the controllers after it). Prints as the first pass of
    /// [`LocalSession::run`] would.
    pub async fn first_pass(&mut self) {
        self.sync().await;
        self.printer.started = true;
    }

    fn applied_lines(&self, report: &SyncReport) -> Vec<String> {
        if !self.printer.started {
            // The first pass loads everything: one line, not one per object.
            let files: std::collections::BTreeSet<_> = report
                .created
                .iter()
                .filter_map(|k| self.sync.location(k).map(|at| at.file.clone()))
                .collect();
            return vec![format!(
                "loaded {} objects from {} files in {}",
                report.created.len(),
                files.len(),
                self.sync.dir().display()
            )];
        }
        let at = |k| {
            self.sync
                .location(k)
                .map(|at| at.file.display().to_string())
                .unwrap_or_default()
        };
        let mut lines: Vec<String> = report
            .created
            .iter()
            .map(|k| format!("{}: {k} created", at(k)))
            .chain(
                report
                    .updated
                    .iter()
                    .map(|k| format!("{}: {k} updated", at(k))),
            )
            .chain(
                report
                    .deleted
                    .iter()
                    .map(|k| format!("{k} deleted: its document is gone")),
            )
            .collect();
        for e in &report.errors {
            if !self.last_errors.contains(e) {
                lines.push(format!("{e}"));
            }
        }
        lines
    }

    fn print_lines(&mut self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let mut text = String::new();
        for l in lines.iter().take(MAX_CHANGE_LINES) {
            text.push_str(l);
            text.push('\n');
        }
        if lines.len() > MAX_CHANGE_LINES {
            text.push_str(&format!(
                "... and {} more changes\n",
                lines.len() - MAX_CHANGE_LINES
            ));
        }
        // A closed stdout must not stop DNS from being served.
        let _ = self
            .out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush());
    }

    /// The snapshot now, with the pods the runtime reported (and, with the
    /// serving check, what the pods answer).
    pub async fn snapshot(&self, pods: &[PodEndpoint]) -> Snapshot {
        let snapshot = build_snapshot(
            self.objects.rows(),
            pods,
            self.sync.errors(),
            self.sync.pending(),
        );
        if !self.check_serving || !snapshot.converged {
            return snapshot;
        }
        // A cluster failed for good (an invalid spec) gets no pods: nothing
        // to wait for, its row already says why.
        let failed = |c: &&serde_json::Value| {
            let s = |p: &str| c.pointer(p).and_then(|v| v.as_str()).unwrap_or_default();
            snapshot.objects.iter().any(|o| {
                o.kind == ManifestKind::BindCluster.as_str()
                    && o.namespace == s("/metadata/namespace")
                    && o.name == s("/metadata/name")
                    && o.settled
                    && !o.ready
            })
        };
        let clusters = self.objects.of(ManifestKind::BindCluster);
        let mut waiting = serving::missing_pods(clusters.iter().filter(|c| !failed(c)), pods);
        if waiting.is_empty() {
            let duties = serving::duties(&self.objects.of(ManifestKind::BindZone));
            waiting = serving::unserved(&duties, pods).await;
        }
        snapshot.waiting_for(waiting)
    }

    /// Writes `status.json`, prints a line per change and the table when
    /// everything has just settled.
    pub fn publish(&mut self, snapshot: &Snapshot) {
        if let Err(e) = self.status.write(snapshot) {
            tracing::warn!(path = %self.status.path().display(), error = %e, "failed to write status file");
        }
        let lines = self.printer.changes(snapshot);
        self.print_lines(&lines);
        let settled_now = snapshot.converged && !self.printer.converged;
        self.printer.converged = snapshot.converged;
        if settled_now {
            self.print_table(snapshot);
        }
    }

    fn print_table(&mut self, snapshot: &Snapshot) {
        let table = render_table(snapshot);
        let _ = writeln!(self.out, "\n{table}").and_then(|()| self.out.flush());
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
        let mut files = super::manifest_dir::DirWatch::new(self.sync.dir());
        let mut changes = Some(self.objects.changes());
        let mut usr1 = if self.table_on_sigusr1 {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
                .map_err(|e| tracing::warn!(error = %e, "failed to listen for SIGUSR1"))
                .ok()
        } else {
            None
        };
        let mut pods_open = true;
        let mut files_due = true;
        let mut dirty = true;
        let mut next_report = Instant::now();
        let mut retry_at: Option<Instant> = None;
        let mut converged_since: Option<Instant> = None;
        let mut last: Option<Snapshot> = None;
        tokio::pin!(shutdown);

        loop {
            if files_due || retry_at.is_some_and(|t| t <= Instant::now()) {
                files_due = false;
                dirty |= self.sync().await;
                retry_at = self.sync.pending().then(|| Instant::now() + RETRY_INTERVAL);
                self.printer.started = true;
            }
            if dirty && Instant::now() >= next_report {
                dirty = false;
                let started = Instant::now();
                let current = pods.borrow().clone();
                let snapshot = self.snapshot(&current).await;
                self.publish(&snapshot);
                next_report = Instant::now() + started.elapsed() * REPORT_TIME_SHARE;
                if !snapshot.waiting_for.is_empty() {
                    // The pods catch up on their own; ask again soon.
                    dirty = true;
                    next_report = next_report.max(Instant::now() + SERVING_RECHECK);
                }
                if !snapshot.converged {
                    converged_since = None;
                } else if converged_since.is_none() {
                    converged_since = Some(Instant::now());
                }
                last = Some(snapshot);
            }
            if let (Some(settle), Some(since)) = (settle, converged_since)
                && since.elapsed() >= settle
                && !dirty
            {
                return (last.expect("converged implies a snapshot"), true);
            }

            // The next moment something is due without an event.
            let wake = [
                dirty.then_some(next_report),
                retry_at,
                settle.zip(converged_since).map(|(s, since)| since + s),
            ]
            .into_iter()
            .flatten()
            .min();
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = files.changed() => files_due = true,
                r = wait_changed(changes.as_mut()), if changes.is_some() => {
                    if r.is_err() { changes = None; }
                    dirty = true;
                }
                r = pods.changed(), if pods_open => {
                    pods_open = r.is_ok();
                    dirty = true;
                }
                Some(()) = recv_signal(usr1.as_mut()), if usr1.is_some() => {
                    let current = pods.borrow().clone();
                    let snapshot = self.snapshot(&current).await;
                    self.print_table(&snapshot);
                }
                () = sleep_until(wake) => {}
            }
        }
        // Final report, so status.json holds the state at exit.
        let current = pods.borrow().clone();
        let snapshot = self.snapshot(&current).await;
        if let Err(e) = self.status.write(&snapshot) {
            tracing::warn!(path = %self.status.path().display(), error = %e, "failed to write status file");
        }
        (snapshot, false)
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn recv_signal(signal: Option<&mut tokio::signal::unix::Signal>) -> Option<()> {
    match signal {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
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

/// What the user has been told so far, to print only what changed.
#[derive(Default)]
struct Printer {
    /// The first sync has been reported.
    started: bool,
    /// The last snapshot printed was converged.
    converged: bool,
    rows: BTreeMap<String, (String, String, String)>,
    pods: BTreeMap<String, (bool, u32)>,
}

impl Printer {
    /// A line per object or pod whose state moved since the last call.
    fn changes(&mut self, s: &Snapshot) -> Vec<String> {
        let mut lines = Vec::new();
        let mut rows = BTreeMap::new();
        for o in &s.objects {
            let who = describe(&ObjectStatus {
                reason: String::new(),
                ..o.clone()
            });
            // Documents that name no object are told apart by message.
            let key = if o.kind.is_empty() {
                format!("{who} {}", o.message)
            } else {
                who.clone()
            };
            let now = (o.phase.clone(), o.reason.clone(), o.message.clone());
            let before = self.rows.get(&key);
            if before != Some(&now) {
                let from = before.map_or("(new)", |b| b.0.as_str());
                // An error's location is often at the end of its message:
                // never cut it.
                let message = if o.phase == Phase::Error.as_str() {
                    o.message.split_whitespace().collect::<Vec<_>>().join(" ")
                } else {
                    one_line(&o.message)
                };
                let why = match (o.reason.is_empty(), message.is_empty()) {
                    (true, true) => String::new(),
                    (false, true) => format!(" ({})", o.reason),
                    (true, false) => format!(" ({message})"),
                    (false, false) => format!(" ({}: {message})", o.reason),
                };
                lines.push(format!("{who}: {from} -> {}{why}", o.phase));
            }
            rows.insert(key, now);
        }
        for (gone, before) in self.rows.iter().filter(|(k, _)| !rows.contains_key(*k)) {
            let who = if gone.starts_with("manifest ") {
                format!("manifest ({})", one_line(&before.2))
            } else {
                gone.clone()
            };
            lines.push(format!("{who}: {} -> (gone)", before.0));
        }
        self.rows = rows;

        let mut pods = BTreeMap::new();
        for p in &s.pods {
            let who = format!(
                "pod {}/{} ({}, dns {})",
                p.namespace,
                p.name,
                p.role.as_str(),
                p.dns
            );
            let state = |ready: bool| if ready { "ready" } else { "not ready" };
            match self.pods.get(&who) {
                None => lines.push(format!("{who}: (new) -> {}", state(p.ready))),
                Some(&(ready, restarts)) if ready != p.ready || restarts != p.restarts => {
                    let why = if restarts != p.restarts {
                        format!(" (named restarted, {} restarts)", p.restarts)
                    } else {
                        String::new()
                    };
                    lines.push(format!(
                        "{who}: {} -> {}{why}",
                        state(ready),
                        state(p.ready)
                    ));
                }
                Some(_) => {}
            }
            pods.insert(who, (p.ready, p.restarts));
        }
        for (gone, (ready, _)) in self.pods.iter().filter(|(k, _)| !pods.contains_key(*k)) {
            let was = if *ready { "ready" } else { "not ready" };
            lines.push(format!("{gone}: {was} -> (gone)"));
        }
        self.pods = pods;
        lines
    }
}
