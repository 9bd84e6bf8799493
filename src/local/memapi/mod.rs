//! In-memory Kubernetes API server: a `kube::Client` over an in-process
//! tower service that keeps objects in memory and speaks the REST semantics
//! our controllers and kube-runtime rely on. Local mode runs on it; so do the
//! reconciler tests.
//!
//! # Contract
//! - Any registered kind, built-in (core, apps, coordination, events, ...)
//!   or custom (`register_crd` / `register_custom`, or by creating a
//!   CustomResourceDefinition through the API), under the URL paths
//!   `kube::Api` produces; discovery documents for the same table. A path
//!   for an unregistered kind is a 404.
//! - get / list / create / replace / patch / delete, namespaced and
//!   cluster-scoped. Failures are real `metav1.Status` bodies: 404
//!   NotFound, 409 AlreadyExists, 409 Conflict (stale resourceVersion,
//!   failed precondition, apply conflict), 422 Invalid (names, labels,
//!   failed JSON-patch `test`, new finalizers on a deleting object), 400,
//!   405, 410, 415.
//! - The server owns uid, resourceVersion (one global counter, bumped only
//!   by real changes: a no-op write keeps it and emits no event),
//!   creationTimestamp, generation (bumped only when something outside
//!   metadata and status changes) and deletionTimestamp.
//! - Kinds with a status subresource: writes to the main resource keep the
//!   stored status, writes to `/status` change only status; create drops
//!   status.
//! - Patches: JSON merge, JSON patch (a `test` for null on a missing path
//!   passes, as kube's finalizer helper expects), server-side apply (creates
//!   when absent; one manager's later apply removes fields it no longer
//!   sets; another manager's differing value is a 409 unless `force`).
//!   Strategic merge on built-ins is approximated by a merge patch (lists
//!   replaced, except `conditions`, merged by `type` as the real server
//!   does, so a readiness gate's owner and the kubelet can each patch their
//!   own); on custom kinds it is a 415.
//! - Finalizers hold a deleted object (deletionTimestamp set) until the last
//!   one is removed. Owner references cascade: Background (default) and
//!   Foreground delete dependents, Orphan drops the references; dependents
//!   of dependents follow. GC runs synchronously when an owner disappears.
//!   Deleting a Namespace deletes its contents.
//! - Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!`) and field
//!   selectors on any dotted path (`metadata.name=x`), for list and watch.
//! - Watch: initial ADDED events (no resourceVersion, `0`, or
//!   `sendInitialEvents` ending with the initial-events-end BOOKMARK), or a
//!   replay from a resourceVersion (410 in an ERROR event when the history
//!   was dropped), then ADDED / MODIFIED / DELETED live, periodic BOOKMARKs
//!   when `allowWatchBookmarks`; `timeoutSeconds` ends the stream. List
//!   honours `limit`/`continue`. Metadata-only (`PartialObjectMetadata`)
//!   requests are served.
//! - Test hooks: per-verb request counters, injected faults, raw object
//!   access, a change notifier.
//!
//! Not emulated: graceful deletion (a Pod without finalizers is removed at
//! once; no kubelet), pods/exec, pods/log and other subresources than status,
//! deleteCollection, admission/defaulting/schema validation, field
//! ownership for non-apply writes, namespace existence checks, real
//! authentication. It holds no BIND knowledge and must never do network I/O.

mod faults;
mod gc;
mod meta;
mod ops;
mod patch;
mod path;
mod registry;
mod selector;
mod service;
mod status;
mod store;
mod watch;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;
use kube::core::crd::v1::CustomResourceExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use faults::{Fault, Verb};
pub use registry::ResourceInfo;
pub use service::{MemService, ResponseBody};

use store::{State, obj_key};

/// Tuning for a [`MemApi`]; the defaults suit tests and local mode.
#[derive(Clone, Debug)]
pub struct MemApiConfig {
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// How many changes are kept for watches resuming from an older
    /// resourceVersion; older ones get 410 Gone and relist.
    pub history_limit: usize,
    /// The namespace `kube::Client::default_namespace` reports.
    pub default_namespace: String,
}

impl Default for MemApiConfig {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(5),
            history_limit: 20_000,
            default_namespace: "default".into(),
        }
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    bookmark_interval: Duration,
    default_namespace: String,
    changes: tokio::sync::watch::Receiver<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent JSON behind
        // (every mutation is a whole-object swap), so keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Handle to one in-memory API server. Clones share the same objects.
#[derive(Clone)]
pub struct MemApi {
    shared: Arc<Shared>,
}

impl Default for MemApi {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MemApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemApi")
            .field("resource_version", &self.resource_version())
            .finish_non_exhaustive()
    }
}

impl MemApi {
    pub fn new() -> Self {
        Self::with_config(MemApiConfig::default())
    }

    pub fn with_config(config: MemApiConfig) -> Self {
        let (tx, rx) = tokio::sync::watch::channel(0);
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::new(config.history_limit, tx)),
                bookmark_interval: config.bookmark_interval.max(Duration::from_millis(1)),
                default_namespace: config.default_namespace,
                changes: rx,
            }),
        }
    }

    /// A `kube::Client` talking to this server. Must be called inside a
    /// Tokio runtime (the client spawns its request buffer there).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), self.shared.default_namespace.clone())
    }

    /// The raw tower service, for callers that build their own client.
    pub fn service(&self) -> MemService {
        MemService {
            shared: self.shared.clone(),
        }
    }

    /// Serves another kind (for built-ins not in the default table).
    pub fn register(&self, info: ResourceInfo) {
        self.shared.lock().registry.insert(info);
    }

    /// Serves every version a CustomResourceDefinition declares.
    pub fn register_crd(&self, crd: &CustomResourceDefinition) -> Result<(), String> {
        let json =
            serde_json::to_value(crd).map_err(|e| format!("failed to serialise crd: {e}"))?;
        let infos = ResourceInfo::from_crd_json(&json)?;
        let mut state = self.shared.lock();
        for i in infos {
            state.registry.insert(i);
        }
        Ok(())
    }

    /// What is served for `kind` in `api_version` (`v1`/`ConfigMap`,
    /// `bind.unkin.net/v1alpha1`/`BindZone`): the URL plural and scope a
    /// manifest loader needs for a `DynamicObject` request.
    pub fn resource(&self, api_version: &str, kind: &str) -> Option<ResourceInfo> {
        self.shared
            .lock()
            .registry
            .by_kind(api_version, kind)
            .cloned()
    }

    /// Serves a `#[derive(CustomResource)]` type.
    pub fn register_custom<K: CustomResourceExt>(&self) {
        self.register_crd(&K::crd())
            .expect("a derived CRD always has group, names, scope and versions");
    }

    /// Fails the next requests matching `fault` (see [`Fault`]).
    pub fn fail_next(&self, fault: Fault) {
        self.shared.lock().hooks.add_fault(fault);
    }

    pub fn clear_faults(&self) {
        self.shared.lock().hooks.clear_faults();
    }

    /// Injected failures not yet consumed.
    pub fn pending_faults(&self) -> usize {
        self.shared.lock().hooks.pending_faults()
    }

    /// Requests seen for `verb` on `resource` (URL plural), faults included.
    pub fn count(&self, verb: Verb, resource: &str) -> u64 {
        self.shared.lock().hooks.count(Some(verb), Some(resource))
    }

    /// Requests seen for `verb` on any resource.
    pub fn count_verb(&self, verb: Verb) -> u64 {
        self.shared.lock().hooks.count(Some(verb), None)
    }

    /// Create, update, patch and delete requests on any resource.
    pub fn writes(&self) -> u64 {
        self.shared.lock().hooks.writes()
    }

    pub fn reset_counts(&self) {
        self.shared.lock().hooks.reset_counts();
    }

    /// Drops every object, the change history and every watch now, on
    /// this thread, even while clients still hold the service (their
    /// watches end). The bench calls it when a scenario is over, so that
    /// freeing one scenario's objects never runs inside the next one's
    /// measurement (clients' request tasks can hold the service a while).
    pub fn release(&self) {
        let contents = self.shared.lock().take_contents();
        drop(contents);
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv()
    }

    /// Receives the latest resourceVersion after every committed change.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.changes.clone()
    }

    /// One stored object as JSON. `api_version` is `v1` or `group/version`.
    pub fn raw(
        &self,
        api_version: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let group = api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or_default();
        let state = self.shared.lock();
        state
            .get(
                &(group.to_owned(), plural.to_owned()),
                &obj_key(namespace, name),
            )
            .map(|e| (*e.obj).clone())
    }

    /// Every stored object of one collection (all namespaces), key order.
    pub fn raw_list(&self, api_version: &str, plural: &str) -> Vec<Value> {
        let group = api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or_default();
        let state = self.shared.lock();
        state
            .iter(&(group.to_owned(), plural.to_owned()), None)
            .map(|(_, e)| (*e.obj).clone())
            .collect()
    }

    /// A typed object straight from the store (no request, not counted).
    pub fn get<K>(&self, namespace: Option<&str>, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let v = self.raw(&K::api_version(&()), &K::plural(&()), namespace, name)?;
        serde_json::from_value(v).ok()
    }

    /// Every object of a type straight from the store (not counted).
    pub fn list<K>(&self) -> Vec<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.raw_list(&K::api_version(&()), &K::plural(&()))
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    }

    /// Drops the watch history: watches resuming from any earlier
    /// resourceVersion get 410 Gone and must relist.
    pub fn compact_history(&self) {
        self.shared.lock().compact();
    }

    /// Ends every open watch stream, as an API server restart would.
    pub fn close_watches(&self) {
        self.shared.lock().close_watches();
    }

    /// Open watch streams.
    pub fn open_watches(&self) -> usize {
        let mut state = self.shared.lock();
        state.watchers.retain(|w| w.is_open());
        state.watchers.len()
    }
}
