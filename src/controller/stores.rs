//! The caches reconcilers read instead of listing the API on every
//! reconcile, and the watch streams that fill them. Each stream is
//! reflected into its store *before* it yields, and the same stream is what
//! triggers the controller (`for_stream`, `owns_stream`, `watches_stream`),
//! so a reconcile woken by a change always sees that change in the store.
//!
//! Readiness ("every store has seen its initial list") is one shared
//! future built here: a kube store's own `wait_until_ready` is a oneshot
//! that keeps a single waker, so when several tasks await it (the readiness
//! probe, the zone controllers, each BindCluster reconcile) only the last
//! one is woken and the others wait forever. That lost wake-up is what left
//! objects existing at start unreconciled on a real API server. Nothing may
//! await a store of [`Stores`] directly; use [`Stores::wait_until_ready`].
//!
//! Touches the cluster (list/watch). Holds Secret *metadata* only: key
//! material is read on demand and never cached here.

use futures::future::{BoxFuture, Shared};
use futures::stream::BoxStream;
use futures::{FutureExt as _, StreamExt as _, future};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::names::managed_selector;
use super::scope::Scope;
use crate::api::{BindCluster, BindTSIGKey};

/// A trigger stream: objects as they change (reflected already).
pub type Trigger<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// Read-only caches shared by every reconciler (through the context).
#[derive(Clone)]
pub struct Stores {
    pub clusters: Store<BindCluster>,
    pub keys: Store<BindTSIGKey>,
    /// Pods labelled as ours (BIND pods of every cluster).
    pub pods: Store<Pod>,
    /// Operator-managed children (labelled `app.kubernetes.io/managed-by`).
    pub statefulsets: Store<StatefulSet>,
    pub configmaps: Store<ConfigMap>,
    pub services: Store<Service>,
    pub pdbs: Store<PodDisruptionBudget>,
    /// Metadata of every Secret in scope (ours, and users' TSIG secrets).
    pub secrets: Store<PartialObjectMeta<Secret>>,
    /// The one future that polls the stores' readiness; every waiter
    /// clones it (a `Shared` wakes all of them).
    ready: Shared<BoxFuture<'static, ()>>,
}

impl Stores {
    /// Waits until every store has seen its initial list, so a reconcile
    /// never renders from a half-filled cache (e.g. keys.conf without keys).
    /// Any number of tasks may wait at once; each is woken.
    pub async fn wait_until_ready(&self) {
        self.ready.clone().await;
    }
}

/// The streams that fill [`Stores`]; each must be polled by exactly one
/// consumer (a controller, or [`Streams::drive`]).
pub struct Streams {
    pub clusters: Trigger<BindCluster>,
    pub keys: Trigger<BindTSIGKey>,
    pub pods: Trigger<Pod>,
    pub statefulsets: Trigger<StatefulSet>,
    pub configmaps: Trigger<ConfigMap>,
    pub services: Trigger<Service>,
    pub pdbs: Trigger<PodDisruptionBudget>,
    pub secrets: Trigger<PartialObjectMeta<Secret>>,
}

impl Streams {
    /// Polls every stream until they end, only to keep the stores current:
    /// for callers that invoke reconcile functions directly (tests).
    pub async fn drive(self) {
        let all = futures::stream::select_all([
            self.clusters.map(|_| ()).boxed(),
            self.keys.map(|_| ()).boxed(),
            self.pods.map(|_| ()).boxed(),
            self.statefulsets.map(|_| ()).boxed(),
            self.configmaps.map(|_| ()).boxed(),
            self.services.map(|_| ()).boxed(),
            self.pdbs.map(|_| ()).boxed(),
            self.secrets.map(|_| ()).boxed(),
        ]);
        all.for_each(|_| future::ready(())).await;
    }
}

/// Resolves once every store is ready. It must be the only poller of
/// each store's readiness (see the module docs).
fn all_ready(waits: Vec<BoxFuture<'static, ()>>) -> Shared<BoxFuture<'static, ()>> {
    future::join_all(waits).map(|_| ()).boxed().shared()
}

/// One store's readiness, as an input of [`all_ready`].
fn ready_of<K>(store: &Store<K>) -> BoxFuture<'static, ()>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let store = store.clone();
    async move {
        let _ = store.wait_until_ready().await;
    }
    .boxed()
}

fn reflected<K>(
    client: &Client,
    scope: &Scope,
    config: watcher::Config,
    deletes: bool,
) -> (Store<K>, Trigger<K>)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let events = scope.watch(client, config).reflect(writer);
    let stream = if deletes {
        events.touched_objects().boxed()
    } else {
        events.applied_objects().boxed()
    };
    (reader, stream)
}

/// Starts (lazily: nothing runs until polled) the watches behind every
/// store, cluster-wide.
pub fn watch_all(client: &Client) -> (Stores, Streams) {
    watch_scoped(client, &Scope::cluster())
}

/// [`watch_all`] over `scope` only.
pub fn watch_scoped(client: &Client, scope: &Scope) -> (Stores, Streams) {
    let managed = || watcher::Config::default().labels(&managed_selector());
    let all = watcher::Config::default;
    let (clusters, clusters_s) = reflected(client, scope, all(), false);
    let (keys, keys_s) = reflected(client, scope, all(), true);
    let (pods, pods_s) = reflected(client, scope, managed(), true);
    let (statefulsets, sts_s) = reflected(client, scope, managed(), true);
    let (configmaps, cm_s) = reflected(client, scope, managed(), true);
    let (services, svc_s) = reflected(client, scope, managed(), true);
    let (pdbs, pdbs_s) = reflected(client, scope, managed(), true);
    // Metadata only: `Api<PartialObjectMeta<_>>` asks for metadata, so no
    // key material is ever cached.
    let (secrets, secrets_s) = reflected::<PartialObjectMeta<Secret>>(client, scope, all(), true);
    (
        Stores {
            ready: all_ready(vec![
                ready_of(&clusters),
                ready_of(&keys),
                ready_of(&pods),
                ready_of(&statefulsets),
                ready_of(&configmaps),
                ready_of(&services),
                ready_of(&pdbs),
                ready_of(&secrets),
            ]),
            clusters,
            keys,
            pods,
            statefulsets,
            configmaps,
            services,
            pdbs,
            secrets,
        },
        Streams {
            clusters: clusters_s,
            keys: keys_s,
            pods: pods_s,
            statefulsets: sts_s,
            configmaps: cm_s,
            services: svc_s,
            pdbs: pdbs_s,
            secrets: secrets_s,
        },
    )
}
