//! Keeps a Kubernetes API in step with a manifest directory, as a repeated
//! `kubectl apply --server-side --force-conflicts` with pruning would: every
//! accepted document is applied (field manager [`FIELD_MANAGER`]), objects
//! whose document disappeared are deleted, and namespaces that objects need
//! are created.
//!
//! Talks to the cluster only through the `kube::Client` it is given (the
//! in-memory API in local mode). It must never delete an object it did not
//! apply itself, nor one whose source it could not read or parse this time
//! (a typo in a file must not take a serving record down), and never
//! deletes a namespace that objects of the directory still live in.
//! Objects are re-applied only when their document changed; a pass over an
//! unchanged directory makes no request at all. A periodic full re-apply
//! that repairs drift can be asked for ([`ManifestSync::with_resync_interval`]);
//! local mode does not: it owns its API and the controllers repair
//! children, so a resync would only cost requests while idle.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::manifest_dir::{DirWatch, Loaded, ManifestDir};
use super::manifests::{
    DocRef, Manifest, ManifestError, ManifestKind, ObjectKey, Problem, admission_message,
};
use crate::api::admission::admit;

/// Field manager of every apply made from the manifest directory.
pub const FIELD_MANAGER: &str = "bind-operator-local";
/// How soon a pass whose writes failed transiently is retried.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// Requests in flight at once while applying or deleting one kind.
const CONCURRENCY: usize = 8;

/// What one pass changed and what is wrong.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncReport {
    pub created: Vec<ObjectKey>,
    pub updated: Vec<ObjectKey>,
    pub deleted: Vec<ObjectKey>,
    /// Objects of the directory already as their document says.
    pub unchanged: usize,
    /// Every bad document and every refused write, in directory order.
    pub errors: Vec<ManifestError>,
    /// A write failed transiently or an object is still being deleted: the
    /// next pass retries, so the API does not yet match the directory.
    pub pending: bool,
}

impl SyncReport {
    /// Whether this pass wrote anything.
    pub fn changed(&self) -> bool {
        !(self.created.is_empty() && self.updated.is_empty() && self.deleted.is_empty())
    }
}

/// What was last applied for one object.
struct Tracked {
    hash: String,
    /// The applied object: `oldSelf` for the CEL transition rules of the
    /// next update.
    object: Value,
    at: DocRef,
    uid: Option<String>,
    generation: Option<i64>,
}

/// The sync state of one manifest directory against one API.
pub struct ManifestSync {
    dir: ManifestDir,
    tracked: BTreeMap<ObjectKey, Tracked>,
    /// Writes refused for good, by the document hash they were refused for:
    /// not retried until the document changes (or a resync).
    rejected: BTreeMap<ObjectKey, (String, ManifestError)>,
    /// Namespaces known to exist.
    namespaces: BTreeSet<String>,
    /// None: never re-apply unchanged documents.
    resync_interval: Option<Duration>,
    last_resync: Option<Instant>,
    retry: bool,
    errors: Vec<ManifestError>,
}

impl ManifestSync {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: ManifestDir::new(dir),
            tracked: BTreeMap::new(),
            rejected: BTreeMap::new(),
            namespaces: BTreeSet::new(),
            resync_interval: None,
            last_resync: None,
            retry: true,
            errors: Vec::new(),
        }
    }

    /// Re-applies every document at most this often, even unchanged
    /// (puts back what was changed or deleted behind the files' back).
    pub fn with_resync_interval(mut self, interval: Duration) -> Self {
        self.resync_interval = Some(interval);
        self
    }

    /// Where the document of an applied object was last seen.
    pub fn location(&self, key: &ObjectKey) -> Option<&DocRef> {
        self.tracked.get(key).map(|t| &t.at)
    }

    pub fn dir(&self) -> &Path {
        self.dir.root()
    }

    /// Problems found by the last pass (same as its report's `errors`).
    pub fn errors(&self) -> &[ManifestError] {
        &self.errors
    }

    /// Whether the API may not yet match the directory (before the first
    /// pass, or a write is to be retried).
    pub fn pending(&self) -> bool {
        self.retry
    }

    /// Objects this sync applied and still owns, in apply order.
    pub fn tracked(&self) -> impl Iterator<Item = &ObjectKey> {
        self.tracked.keys()
    }

    /// Reads the directory and brings the API in line with it.
    pub async fn sync_once(&mut self, client: &Client) -> SyncReport {
        let loaded = self.dir.load();
        let resync = self
            .resync_interval
            .is_some_and(|interval| self.last_resync.is_none_or(|t| t.elapsed() >= interval));
        if !loaded.changed && !resync && !self.retry {
            return SyncReport {
                unchanged: self.tracked.len(),
                errors: self.errors.clone(),
                ..SyncReport::default()
            };
        }
        if resync {
            self.last_resync = Some(Instant::now());
            self.namespaces.clear();
        }

        let mut report = SyncReport {
            errors: loaded.errors.clone(),
            ..SyncReport::default()
        };
        let desired: BTreeSet<&ObjectKey> = loaded.manifests.iter().map(|m| &m.key).collect();
        self.rejected.retain(|k, _| desired.contains(k));
        for kind in ManifestKind::ALL {
            let batch = self.due_for_apply(&loaded, kind, resync, &mut report);
            // Futures built by a plain iterator and owning their inputs: a
            // borrowing `StreamExt::map` closure makes the whole session
            // future fail the `Send` check that `tokio::spawn` needs.
            let applies = batch.into_iter().cloned().map(|m| {
                let client = client.clone();
                async move {
                    let result = apply(&client, &m).await;
                    (m, result)
                }
            });
            let results: Vec<_> = stream::iter(applies)
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
            for (m, result) in results {
                self.record_apply(&m, result, &mut report);
            }
            if kind == ManifestKind::Namespace {
                self.ensure_namespaces(client, &loaded, &mut report).await;
            }
        }
        self.prune(client, &loaded, &mut report).await;

        // Writes run concurrently; report them in a stable order.
        report.created.sort();
        report.updated.sort();
        report.deleted.sort();
        report.errors.sort_by(|a, b| a.at.cmp(&b.at));
        self.errors = report.errors.clone();
        self.retry = report.pending;
        report
    }

    /// Runs [`Self::sync_once`] now and whenever the directory changes (or
    /// a transient failure is due for a retry) until `shutdown` resolves,
    /// handing every report to `on_report`.
    pub async fn run(
        &mut self,
        client: &Client,
        shutdown: impl Future<Output = ()>,
        mut on_report: impl FnMut(&SyncReport),
    ) {
        let mut watch = DirWatch::new(self.dir());
        tokio::pin!(shutdown);
        loop {
            let report = self.sync_once(client).await;
            on_report(&report);
            let retry = async {
                if self.retry {
                    tokio::time::sleep(RETRY_INTERVAL).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                () = watch.changed() => {}
                () = retry => {}
            }
        }
    }

    /// The manifests of `kind` whose apply is due; the rest are counted as
    /// unchanged or re-reported as refused.
    fn due_for_apply<'a>(
        &mut self,
        loaded: &'a Loaded,
        kind: ManifestKind,
        resync: bool,
        report: &mut SyncReport,
    ) -> Vec<&'a Manifest> {
        let mut batch = Vec::new();
        for m in loaded.manifests.iter().filter(|m| m.key.kind == kind) {
            if !resync
                && let Some(t) = self.tracked.get_mut(&m.key)
                && t.hash == m.hash
            {
                // Same object, maybe moved to another file.
                t.at = m.at.clone();
                report.unchanged += 1;
                continue;
            }
            if let Some((hash, err)) = self.rejected.get(&m.key)
                && *hash == m.hash
                && !resync
            {
                // The document may have moved to another file meanwhile.
                let mut err = err.clone();
                err.at = m.at.clone();
                report.errors.push(err);
                continue;
            }
            // Transition rules (immutable fields) need the stored object;
            // the last applied one is what the API holds for our fields.
            if kind.is_custom()
                && let Some(t) = self.tracked.get(&m.key)
                && t.hash != m.hash
                && let Err(e) = admit(&m.object, Some(&t.object))
            {
                let err = refusal(
                    m.at.clone(),
                    &m.key,
                    Problem::Invalid,
                    format!(
                        "update refused, the object keeps its previous spec: {}",
                        admission_message(e)
                    ),
                );
                self.rejected
                    .insert(m.key.clone(), (m.hash.clone(), err.clone()));
                report.errors.push(err);
                continue;
            }
            batch.push(m);
        }
        batch
    }

    fn record_apply(
        &mut self,
        m: &Manifest,
        result: Result<DynamicObject, kube::Error>,
        report: &mut SyncReport,
    ) {
        let applied = match result {
            Ok(applied) => applied,
            Err(e) => {
                let transient = is_transient(&e);
                let message = format!(
                    "failed to apply{}: {}",
                    if transient { " (will retry)" } else { "" },
                    api_message(&e)
                );
                tracing::warn!(object = %m.key, at = %m.at, error = %message, "manifest not applied");
                let err = refusal(m.at.clone(), &m.key, Problem::Rejected, message);
                if transient {
                    report.pending = true;
                } else {
                    self.rejected
                        .insert(m.key.clone(), (m.hash.clone(), err.clone()));
                }
                report.errors.push(err);
                return;
            }
        };
        self.rejected.remove(&m.key);
        if applied.metadata.deletion_timestamp.is_some() {
            // The previous object is still finalizing; apply again once it
            // is gone so it comes back fresh.
            tracing::info!(object = %m.key, "waiting for the previous object to finish deleting");
            self.tracked.remove(&m.key);
            report.pending = true;
            return;
        }
        let uid = applied.metadata.uid.clone();
        let generation = applied.metadata.generation;
        match self.tracked.get(&m.key) {
            None => {
                tracing::info!(object = %m.key, at = %m.at, "created");
                report.created.push(m.key.clone());
            }
            Some(t) if t.hash != m.hash || t.uid != uid || t.generation != generation => {
                tracing::info!(object = %m.key, at = %m.at, "updated");
                report.updated.push(m.key.clone());
            }
            Some(_) => report.unchanged += 1,
        }
        self.tracked.insert(
            m.key.clone(),
            Tracked {
                hash: m.hash.clone(),
                object: m.object.clone(),
                at: m.at.clone(),
                uid,
                generation,
            },
        );
    }

    /// Creates the namespaces objects live in that no document defines.
    async fn ensure_namespaces(
        &mut self,
        client: &Client,
        loaded: &Loaded,
        report: &mut SyncReport,
    ) {
        let mut needed: BTreeMap<String, DocRef> = BTreeMap::new();
        for m in &loaded.manifests {
            if let Some(ns) = &m.key.namespace {
                needed.entry(ns.clone()).or_insert_with(|| m.at.clone());
            }
        }
        let api: Api<Namespace> = Api::all(client.clone());
        for (ns, at) in needed {
            let defined = self.tracked.contains_key(&ObjectKey {
                kind: ManifestKind::Namespace,
                namespace: None,
                name: ns.clone(),
            });
            if defined || self.namespaces.contains(&ns) {
                continue;
            }
            let mut object = Namespace::default();
            object.metadata.name = Some(ns.clone());
            match api.create(&PostParams::default(), &object).await {
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Ok(_) => tracing::info!(namespace = %ns, "created namespace"),
                Err(e) => {
                    report.pending = true;
                    report.errors.push(ManifestError::new(
                        at.clone(),
                        Problem::Rejected,
                        format!(
                            "failed to create namespace {ns:?} (will retry): {}",
                            api_message(&e)
                        ),
                    ));
                    continue;
                }
            }
            self.namespaces.insert(ns);
        }
    }

    /// Deletes what this sync applied and the directory no longer defines.
    async fn prune(&mut self, client: &Client, loaded: &Loaded, report: &mut SyncReport) {
        let desired: BTreeSet<&ObjectKey> = loaded.manifests.iter().map(|m| &m.key).collect();
        let erroneous = loaded.erroneous_keys();
        let in_use: BTreeSet<&str> = desired
            .iter()
            .filter_map(|k| k.namespace.as_deref())
            .collect();
        let mut gone: Vec<ObjectKey> = Vec::new();
        for (key, t) in &self.tracked {
            if desired.contains(key) || erroneous.contains(key) || loaded.is_uncertain(&t.at) {
                continue;
            }
            gone.push(key.clone());
        }
        for kind in ManifestKind::ALL.into_iter().rev() {
            let mut batch = Vec::new();
            for key in gone.iter().filter(|k| k.kind == kind) {
                if kind == ManifestKind::Namespace && in_use.contains(key.name.as_str()) {
                    // Still holds objects of the directory: keep it, as if
                    // it had been created for them.
                    self.tracked.remove(key);
                    self.namespaces.insert(key.name.clone());
                    continue;
                }
                batch.push(key);
            }
            let deletes = batch.into_iter().cloned().map(|key| {
                let client = client.clone();
                async move {
                    let result = delete(&client, &key).await;
                    (key, result)
                }
            });
            let results: Vec<_> = stream::iter(deletes)
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
            for (key, result) in results {
                let key = &key;
                match result {
                    Ok(()) => {
                        tracing::info!(object = %key, "deleted");
                        self.tracked.remove(key);
                        report.deleted.push(key.clone());
                    }
                    Err(e) => {
                        let at = self.tracked[key].at.clone();
                        let message = format!("failed to delete (will retry): {}", api_message(&e));
                        tracing::warn!(object = %key, error = %message, "object not deleted");
                        report.pending = true;
                        report
                            .errors
                            .push(refusal(at, key, Problem::Rejected, message));
                    }
                }
            }
        }
    }
}

fn dynamic_api(client: &Client, key: &ObjectKey) -> Api<DynamicObject> {
    let resource = key.kind.api_resource();
    match &key.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn apply(client: &Client, m: &Manifest) -> Result<DynamicObject, kube::Error> {
    // Forced: the directory is the source of truth for the fields it sets.
    let params = PatchParams::apply(FIELD_MANAGER).force();
    dynamic_api(client, &m.key)
        .patch(&m.key.name, &params, &Patch::Apply(&m.object))
        .await
}

async fn delete(client: &Client, key: &ObjectKey) -> Result<(), kube::Error> {
    match dynamic_api(client, key)
        .delete(&key.name, &DeleteParams::background())
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// Conflicts, throttling, server errors and transport failures may pass;
/// any other refusal stays until the document changes.
fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 409 || s.code == 429 || s.code >= 500,
        _ => true,
    }
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

fn refusal(at: DocRef, key: &ObjectKey, problem: Problem, message: String) -> ManifestError {
    let mut err = ManifestError::new(at, problem, message);
    err.kind = Some(key.kind.as_str().to_owned());
    err.namespace = key.namespace.clone();
    err.name = Some(key.name.clone());
    err
}
