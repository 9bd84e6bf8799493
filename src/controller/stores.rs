//! The caches reconcilers read instead of listing the API on every
//! reconcile, and the one pattern that fills them: for every kind, one
//! watch, reflected into one shared [`Store`] and fanned out to any number
//! of subscribers ([`Feed::subscribe`]). Controllers take their triggers
//! from subscribers (`for_shared_stream`, `owns_shared_stream`,
//! `watches_shared_stream`), so no kind is watched twice and a pod change
//! reaches both the BindCluster controller and the zones of its cluster.
//!
//! A subscriber yields every object the store holds when it subscribes, then
//! every change, each only once the store has it: applied objects, deleted
//! ones (as last seen), and after a re-list every object plus those that
//! vanished meanwhile. (kube's own `store_shared` fans out applied objects
//! only, so a deleted child or pod would wake nobody.) Its queue is
//! unbounded: one slow subscriber never holds up a watch or the others.
//!
//! The indexes of [`crate::controller::index`] are observers of a feed:
//! told of each change after the store and before any subscriber, so a
//! reconcile woken by an object finds it through them.
//!
//! Readiness ("every store has seen its initial list") is one shared
//! future built here from a signal of our own per kind, set when the
//! initial list is in the store. A kube store's own `wait_until_ready` is a
//! oneshot that keeps a single waker, so when several tasks await it only
//! the last one is woken; that lost wake-up once left objects existing at
//! start unreconciled on a real API server. The kube controllers await
//! their main store themselves (one waiter each); nothing else may await a
//! store of [`Stores`] directly: use [`Stores::wait_until_ready`].
//!
//! The custom kinds are watched through kube's `DeserializeGuard`: an
//! object that does not deserialise (e.g. written under an older CRD
//! version) is logged, reported by a Warning Event on it, and skipped, so
//! it cannot stall the watch of its kind (a failed list would be retried
//! forever and the store would never be ready). If an earlier version of it
//! was valid, the store keeps that version (across re-lists too) until the
//! object is fixed or deleted.
//!
//! Touches the cluster (list/watch; Events for undeserialisable objects).
//! Holds Secret *metadata* only: key material is read on demand and never
//! cached here.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::channel::{mpsc, oneshot};
use futures::future::{BoxFuture, Shared};
use futures::stream::BoxStream;
use futures::{FutureExt as _, StreamExt as _, future};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::PartialObjectMeta;
use kube::core::DeserializeGuard;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use super::events::Events;
use super::index::{Indexes, Observer};
use super::names::managed_selector;
use super::scope::{EventStream, Scope};
use crate::api::{BindCluster, BindTSIGKey, BindZone, DNSRecord};

/// Event reason (and log label) for an object that does not deserialise.
pub const REASON_INVALID_OBJECT: &str = "InvalidObject";

/// A subscriber's stream: objects as they change, each already in the store.
pub type Subscriber<K> = BoxStream<'static, Arc<K>>;

/// Read-only caches shared by every reconciler (through the context), and
/// the feeds to subscribe to their changes.
#[derive(Clone)]
pub struct Stores {
    pub clusters: Store<BindCluster>,
    pub keys: Store<BindTSIGKey>,
    pub zones: Store<BindZone>,
    pub records: Store<DNSRecord>,
    /// Pods labelled as ours (BIND pods of every cluster).
    pub pods: Store<Pod>,
    /// Operator-managed children (labelled `app.kubernetes.io/managed-by`).
    pub statefulsets: Store<StatefulSet>,
    pub configmaps: Store<ConfigMap>,
    pub services: Store<Service>,
    pub pdbs: Store<PodDisruptionBudget>,
    /// Metadata of every Secret in scope (ours, and users' TSIG secrets).
    pub secrets: Store<PartialObjectMeta<Secret>>,
    /// The change feeds of the same stores.
    pub feeds: Feeds,
    /// Lookups by reference (records of a zone, zones of a cluster), kept
    /// by the feeds.
    pub index: Indexes,
    /// The one future that waits for every store's initial list; every
    /// waiter clones it (a `Shared` wakes all of them).
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

/// One feed per store of [`Stores`].
#[derive(Clone)]
pub struct Feeds {
    pub clusters: Feed<BindCluster>,
    pub keys: Feed<BindTSIGKey>,
    pub zones: Feed<BindZone>,
    pub records: Feed<DNSRecord>,
    pub pods: Feed<Pod>,
    pub statefulsets: Feed<StatefulSet>,
    pub configmaps: Feed<ConfigMap>,
    pub services: Feed<Service>,
    pub pdbs: Feed<PodDisruptionBudget>,
    pub secrets: Feed<PartialObjectMeta<Secret>>,
}

type Senders<K> = Arc<Mutex<Vec<mpsc::UnboundedSender<Arc<K>>>>>;

/// The changes of one store, for any number of subscribers.
pub struct Feed<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    subscribers: Senders<K>,
    ready: Shared<BoxFuture<'static, ()>>,
}

impl<K: Resource<DynamicType = ()> + 'static> Clone for Feed<K> {
    fn clone(&self) -> Self {
        Feed {
            store: self.store.clone(),
            subscribers: self.subscribers.clone(),
            ready: self.ready.clone(),
        }
    }
}

impl<K> Feed<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    /// Every object in the store now, then every change (see the module
    /// docs). Subscribe anywhere, any time; the stream must be polled (or
    /// dropped), as its queue is unbounded.
    pub fn subscribe(&self) -> Subscriber<K> {
        let (tx, rx) = mpsc::unbounded();
        let mut subscribers = self.subscribers.lock().expect("feed lock");
        // Under the lock: a change is either in this snapshot or sent after
        // this subscriber is registered (or both; a repeat is harmless).
        for obj in self.store.state() {
            let _ = tx.unbounded_send(obj);
        }
        subscribers.push(tx);
        rx.boxed()
    }

    /// The store this feed follows.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }
}

/// Keeps the stores current and feeds the subscribers. Must be polled (by
/// [`Streams::drive`]) for anything to happen.
pub struct Streams {
    watches: Vec<BoxFuture<'static, ()>>,
}

impl Streams {
    /// Runs every watch until they end (they retry with backoff, so: until
    /// dropped).
    pub async fn drive(self) {
        future::join_all(self.watches).await;
    }
}

/// Sends what the reflector applied on to the subscribers.
struct Dispatch<K: Resource<DynamicType = ()> + 'static> {
    kind: String,
    store: Store<K>,
    subscribers: Senders<K>,
    ready: Option<oneshot::Sender<()>>,
    /// The store as it was when a re-list began: what vanished in it is
    /// sent as deleted when the list is done.
    before_list: Option<Vec<Arc<K>>>,
    /// Told of each change before the subscribers.
    observers: Vec<Arc<dyn Observer<K>>>,
}

impl<K> Dispatch<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    fn send(&self, objs: impl IntoIterator<Item = Arc<K>>) {
        let mut subscribers = self.subscribers.lock().expect("feed lock");
        for obj in objs {
            subscribers.retain(|tx| tx.unbounded_send(obj.clone()).is_ok());
        }
    }

    fn on(&mut self, event: Result<watcher::Event<K>, watcher::Error>) {
        match event {
            Ok(watcher::Event::Apply(obj)) => {
                let stored = self.store.get(&ObjectRef::from_obj(&obj));
                let stored = stored.unwrap_or_else(|| Arc::new(obj));
                self.observers.iter().for_each(|o| o.applied(&stored));
                self.send([stored]);
            }
            Ok(watcher::Event::Delete(obj)) => {
                self.observers.iter().for_each(|o| o.deleted(&obj));
                self.send([Arc::new(obj)]);
            }
            Ok(watcher::Event::Init) => self.before_list = Some(self.store.state()),
            Ok(watcher::Event::InitApply(_)) => {}
            Ok(watcher::Event::InitDone) => {
                let now = self.store.state();
                let vanished: Vec<Arc<K>> = match self.before_list.take() {
                    Some(before) => {
                        let live: HashSet<ObjectRef<K>> = now
                            .iter()
                            .map(|o| ObjectRef::from_obj(o.as_ref()))
                            .collect();
                        before
                            .into_iter()
                            .filter(|o| !live.contains(&ObjectRef::from_obj(o.as_ref())))
                            .collect()
                    }
                    None => Vec::new(),
                };
                self.observers.iter().for_each(|o| o.relisted(&now));
                self.send(now.into_iter().chain(vanished));
                if let Some(ready) = self.ready.take() {
                    let _ = ready.send(());
                }
            }
            Err(e) => tracing::warn!(kind = %self.kind, error = %e, "watch failed; retrying"),
        }
    }
}

/// A store of `K` filled by `events` (built from the store's reader), its
/// feed, and the future that drives both.
fn feed<K>(
    events: impl FnOnce(Store<K>) -> EventStream<K>,
) -> (Store<K>, Feed<K>, BoxFuture<'static, ()>)
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    observed_feed(store, writer, events, Vec::new())
}

/// [`feed`] into a given store, whose `observers` are told of each change
/// before the subscribers.
fn observed_feed<K>(
    store: Store<K>,
    writer: reflector::store::Writer<K>,
    events: impl FnOnce(Store<K>) -> EventStream<K>,
    observers: Vec<Arc<dyn Observer<K>>>,
) -> (Store<K>, Feed<K>, BoxFuture<'static, ()>)
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let subscribers: Senders<K> = Arc::default();
    let (ready_tx, ready_rx) = oneshot::channel::<()>();
    let mut dispatch = Dispatch {
        kind: K::kind(&()).into_owned(),
        store: store.clone(),
        subscribers: subscribers.clone(),
        ready: Some(ready_tx),
        before_list: None,
        observers,
    };
    let driver = events(store.clone())
        .reflect(writer)
        .for_each(move |event| {
            dispatch.on(event);
            future::ready(())
        })
        .boxed();
    let feed = Feed {
        store: store.clone(),
        subscribers,
        // A dropped driver (never polled) counts as ready, as kube's own
        // readiness does when its writer is dropped.
        ready: ready_rx.map(|_| ()).boxed().shared(),
    };
    (store, feed, driver)
}

/// A watch of a built-in kind.
fn plain<K>(
    client: &Client,
    scope: &Scope,
    config: watcher::Config,
) -> impl FnOnce(Store<K>) -> EventStream<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (client, scope) = (client.clone(), scope.clone());
    move |_| scope.watch(&client, config)
}

/// A watch of a custom kind through `DeserializeGuard` (see the module
/// docs): undeserialisable objects are reported and skipped.
fn guarded<K>(
    client: &Client,
    scope: &Scope,
    events: &Events,
) -> impl FnOnce(Store<K>) -> EventStream<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (client, scope, events) = (client.clone(), scope.clone(), events.clone());
    move |store| {
        let mut reported: HashSet<(Option<String>, Option<String>)> = HashSet::new();
        scope
            .watch::<DeserializeGuard<K>>(&client, watcher::Config::default())
            .filter_map(move |event| {
                let event = match event {
                    Ok(event) => event,
                    Err(e) => return future::ready(Some(Err(e))),
                };
                let mut valid = |guard: DeserializeGuard<K>| match guard.0 {
                    Ok(obj) => Some(obj),
                    Err(invalid) => {
                        let key = (
                            invalid.metadata.uid.clone(),
                            invalid.metadata.resource_version.clone(),
                        );
                        if reported.insert(key) {
                            report_invalid::<K>(&events, &invalid);
                        }
                        None
                    }
                };
                let last_valid = |g: &DeserializeGuard<K>| {
                    let meta = g.meta();
                    let name = meta.name.clone().unwrap_or_default();
                    store.get(
                        &ObjectRef::<K>::new(&name)
                            .within(meta.namespace.as_deref().unwrap_or_default()),
                    )
                };
                let out = match event {
                    // Skipped: the store keeps the last valid version.
                    watcher::Event::Apply(g) => valid(g).map(watcher::Event::Apply),
                    // A re-list must not drop the last valid version either.
                    watcher::Event::InitApply(g) => {
                        let kept = g.0.is_err().then(|| last_valid(&g)).flatten();
                        valid(g)
                            .or_else(|| kept.map(|o| o.as_ref().clone()))
                            .map(watcher::Event::InitApply)
                    }
                    // Deleted while invalid: forget the last valid version.
                    watcher::Event::Delete(g) => {
                        let kept = g.0.is_err().then(|| last_valid(&g)).flatten();
                        match g.0 {
                            Ok(obj) => Some(watcher::Event::Delete(obj)),
                            Err(_) => kept.map(|o| watcher::Event::Delete(o.as_ref().clone())),
                        }
                    }
                    watcher::Event::Init => Some(watcher::Event::Init),
                    watcher::Event::InitDone => Some(watcher::Event::InitDone),
                };
                future::ready(out.map(Ok))
            })
            .boxed()
    }
}

/// Logs an object of kind `K` that does not deserialise and publishes a
/// Warning Event on it (in the background: a watch never waits for it).
fn report_invalid<K: Resource<DynamicType = ()>>(
    events: &Events,
    invalid: &kube::core::error_boundary::InvalidObject,
) {
    let meta = &invalid.metadata;
    let kind = K::kind(&()).into_owned();
    tracing::warn!(
        kind = %kind,
        namespace = meta.namespace.as_deref().unwrap_or_default(),
        name = meta.name.as_deref().unwrap_or_default(),
        reason = REASON_INVALID_OBJECT,
        error = %invalid.error,
        "skipping an object that does not deserialise"
    );
    let regarding = ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(kind.clone()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..Default::default()
    };
    let note = format!(
        "the operator cannot read this {kind} and skips it until it is fixed: {}",
        invalid.error
    );
    let events = events.clone();
    tokio::spawn(async move {
        events
            .publish(
                &regarding,
                None,
                EventType::Warning,
                REASON_INVALID_OBJECT,
                "Read",
                note,
            )
            .await;
    });
}

/// Starts (lazily: nothing runs until [`Streams::drive`] is polled) the
/// watches behind every store, cluster-wide.
pub fn watch_all(client: &Client) -> (Stores, Streams) {
    watch_scoped(client, &Scope::cluster())
}

/// [`watch_all`] over `scope` only.
pub fn watch_scoped(client: &Client, scope: &Scope) -> (Stores, Streams) {
    let events = Events::new(client.clone());
    let managed = || watcher::Config::default().labels(&managed_selector());
    let all = watcher::Config::default;
    let (clusters, clusters_f, w1) = feed(guarded(client, scope, &events));
    let (keys, keys_f, w2) = feed(guarded(client, scope, &events));
    let (zones, zones_w) = reflector::store();
    let (records, records_w) = reflector::store();
    let index = Indexes::new(&zones, &records);
    let (zones, zones_f, w3) = observed_feed(
        zones,
        zones_w,
        guarded(client, scope, &events),
        index.zone_observers(),
    );
    let (records, records_f, w4) = observed_feed(
        records,
        records_w,
        guarded(client, scope, &events),
        index.record_observers(),
    );
    let (pods, pods_f, w5) = feed(plain(client, scope, managed()));
    let (statefulsets, sts_f, w6) = feed(plain(client, scope, managed()));
    let (configmaps, cm_f, w7) = feed(plain(client, scope, managed()));
    let (services, svc_f, w8) = feed(plain(client, scope, managed()));
    let (pdbs, pdbs_f, w9) = feed(plain(client, scope, managed()));
    // Metadata only: `Api<PartialObjectMeta<_>>` asks for metadata, so no
    // key material is ever cached.
    let (secrets, secrets_f, w10) = feed(plain::<PartialObjectMeta<Secret>>(client, scope, all()));
    let ready = future::join_all([
        clusters_f.ready.clone(),
        keys_f.ready.clone(),
        zones_f.ready.clone(),
        records_f.ready.clone(),
        pods_f.ready.clone(),
        sts_f.ready.clone(),
        cm_f.ready.clone(),
        svc_f.ready.clone(),
        pdbs_f.ready.clone(),
        secrets_f.ready.clone(),
    ])
    .map(|_| ())
    .boxed()
    .shared();
    (
        Stores {
            clusters,
            keys,
            zones,
            records,
            pods,
            statefulsets,
            configmaps,
            services,
            pdbs,
            secrets,
            feeds: Feeds {
                clusters: clusters_f,
                keys: keys_f,
                zones: zones_f,
                records: records_f,
                pods: pods_f,
                statefulsets: sts_f,
                configmaps: cm_f,
                services: svc_f,
                pdbs: pdbs_f,
                secrets: secrets_f,
            },
            index,
            ready,
        },
        Streams {
            watches: vec![w1, w2, w3, w4, w5, w6, w7, w8, w9, w10],
        },
    )
}
