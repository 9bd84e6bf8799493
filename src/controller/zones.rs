//! Wiring of the two zone controllers: their triggers (subscribers of the
//! shared BindZone and DNSRecord stores: an object is in the cache before
//! any controller hears of it), the trigger filters, the cluster watcher,
//! and [`run`].
//!
//! Triggers, and why:
//! - BindZone changes wake the zone, but only spec (generation), deletion
//!   and finalizer changes: the zone's own status and applied annotation
//!   writes must not wake it again.
//! - DNSRecord spec, deletion and finalizer changes wake the record's zone
//!   at once, but only for records the zone writes (with our finalizer, or
//!   being deleted): a new record's first event (no finalizer yet) would
//!   wake a reconcile with nothing to write, which then holds back the one
//!   its finalizer wakes. Group commit, not a quiet: the controller runs
//!   one reconcile of a zone at a time, and wakes arriving while one runs
//!   merge into the next, so an idle zone writes a lone change at once and
//!   1,000 new DNSRecords still make a few zone flushes, not 1,000.
//! - DNSRecord spec and deletion changes, and any change of a record
//!   without the finalizer, wake the DNSRecord controller (finalizer,
//!   zone-not-found status); the finalizer's own arrival does not, since
//!   the reconcile that added it went on to the rest.
//! - Changes of pods, BindClusters and BindTSIGKeys (subscribers of the
//!   shared stores, each mapped to its cluster through the stores) wake the
//!   cluster's zones when the cluster's pods, object or loaded keys (with
//!   their readiness) changed: a primary restarted on an empty volume is
//!   repaired at once, new secondaries get their secondary zones, a zone
//!   waiting for a key goes on. A BindZone change wakes the zones whose set
//!   of BindZones naming the same zone changed (a duplicate removed).
//!
//! Reads the shared stores ([`crate::controller::stores`]) and their
//! indexes ([`crate::controller::index`]: a zone or cluster change looks up
//! its zones, never scans every zone); watches nothing itself.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::channel::mpsc;
use futures::{StreamExt as _, future, stream};
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt as _};
use tokio_util::task::AbortOnDropHandle;

use crate::api::{BindCluster, BindZone, CONDITION_READY, DNSRecord, is_condition_true};
use crate::controller::bindcluster::read::loaded_keys;
use crate::controller::bindcluster::{cluster_of_pod, clusters_loading};
use crate::controller::context::Context;
use crate::controller::index::{ZoneGroup, zone_group};
use crate::controller::{Shutdown, bindzone, dnsrecord};

use super::zonesync::plan::has_record_finalizer;
use super::zonesync::server::exec_port::ExecServers;
use super::zonesync::server::port::ZoneServers;
use super::zonesync::state::ObjKey;
use super::zonesync::survey::{cluster_pods, pods_fingerprint};
use super::zonesync::{Settings, ZoneContext};

/// Zone reconciles running at once: zone operations join one round per
/// pod ([`super::zonesync::server::batch`]), and the operations that are
/// not batched are bounded there, so the bound here only keeps memory in
/// check. High, so a first sync of many zones reaches each step together.
const ZONE_CONCURRENCY: u16 = 2048;

fn hash_of<T: Hash>(t: &T) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    t.hash(&mut h);
    h.finish()
}

/// What wakes a zone about itself.
fn zone_trigger(z: &BindZone) -> u64 {
    hash_of(&(
        z.metadata.generation,
        z.metadata.deletion_timestamp.is_some(),
        &z.metadata.finalizers,
    ))
}

/// What wakes a zone (and the DNSRecord controller) about a DNSRecord.
fn record_trigger(r: &DNSRecord) -> u64 {
    hash_of(&(
        r.metadata.generation,
        r.metadata.deletion_timestamp.is_some(),
        has_record_finalizer(r),
    ))
}

/// What wakes the DNSRecord controller about a DNSRecord: a spec change or
/// a deletion, and any change while the record lacks the finalizer. Not
/// the finalizer's own arrival: the reconcile that added it went on to the
/// record's other checks, and a wake for each of 100,000 new records would
/// double the controller's work while they arrive. A new record of a zone
/// not applied yet is noted as a first sync arriving as soon as it is seen
/// (new zones wait for the rest of it).
fn record_self_trigger(
    zctx: Arc<ZoneContext>,
) -> impl FnMut(&Arc<DNSRecord>) -> future::Ready<bool> + Send + 'static {
    let store = zctx.records.clone();
    let mut spec_changed = changed(
        |r: &DNSRecord| {
            hash_of(&(
                r.metadata.generation,
                r.metadata.deletion_timestamp.is_some(),
            ))
        },
        store,
    );
    move |r| {
        let moved = spec_changed(r).into_inner();
        let new = !has_record_finalizer(r);
        if new && r.metadata.deletion_timestamp.is_none() {
            let zone = dnsrecord::zone_of(&zctx, r);
            super::zonesync::note_if_first_sync(&zctx, zone.as_deref());
        }
        future::ready(moved || new)
    }
}

/// Objects between prunes of a [`changed`] filter's memory, at least (and
/// at least as many as it remembers, so a prune, which reads the whole
/// store, costs O(1) per object however large the store: 100k records made
/// ~15% of the operator's CPU at a prune per 4,096 objects).
const PRUNE_EVERY: usize = 4096;

/// A stream filter passing an object only when `key` changed since its last
/// pass (or on its first). Deleted objects are forgotten now and then (the
/// store says which still exist), so churn does not grow the memory.
fn changed<K>(
    key: fn(&K) -> u64,
    store: Store<K>,
) -> impl FnMut(&Arc<K>) -> future::Ready<bool> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut since_prune = 0usize;
    let id = |obj: &K| {
        obj.meta()
            .uid
            .clone()
            .unwrap_or_else(|| obj.meta().name.clone().unwrap_or_default())
    };
    move |obj| {
        since_prune += 1;
        if since_prune >= PRUNE_EVERY.max(seen.len()) {
            since_prune = 0;
            let live: HashSet<String> = store.state().iter().map(|o| id(o)).collect();
            seen.retain(|k, _| live.contains(k));
        }
        let k = key(obj);
        future::ready(seen.insert(id(obj), k) != Some(k))
    }
}

/// Whether the record's zone has something to write for this change: the
/// record carries our finalizer or is being deleted. A record without it
/// is never written (`Verdict::Unmanaged`); its finalizer's arrival wakes
/// the zone.
fn zone_writes(r: &Arc<DNSRecord>) -> bool {
    has_record_finalizer(r) || r.metadata.deletion_timestamp.is_some()
}

/// The BindZone of a DNSRecord.
fn zone_of(r: Arc<DNSRecord>) -> Option<ObjectRef<BindZone>> {
    Some(ObjectRef::new(&r.spec.zone_ref).within(&r.zone_namespace()?))
}

/// What about a cluster wakes its zones: the cluster object (generation,
/// status) and its pods.
fn cluster_fingerprint(ctx: &ZoneContext, key: &ObjKey) -> u64 {
    let cluster = ctx
        .base
        .stores
        .clusters
        .get(&ObjectRef::<BindCluster>::new(&key.1).within(&key.0));
    let Some(c) = cluster else {
        return 0;
    };
    let applied = c.status.as_ref().map(|s| &s.applied_config);
    // The keys it loads: a zone waiting for a key (or blocked by a failed
    // one) goes on once the key is there and Ready.
    let keys: Vec<_> = loaded_keys(&ctx.base.stores.keys, &c)
        .iter()
        .map(|k| {
            (
                k.metadata.uid.clone(),
                k.metadata.generation,
                k.status
                    .as_ref()
                    .map(|s| is_condition_true(&s.conditions, CONDITION_READY)),
            )
        })
        .collect();
    hash_of(&(
        &c.metadata.uid,
        c.metadata.generation,
        applied,
        pods_fingerprint(&cluster_pods(ctx, &c)),
        keys,
    ))
}

/// What the cluster watcher hears: a cluster to look at, or a BindZone.
enum Change {
    Cluster(ObjKey),
    Zone(Arc<BindZone>),
}

/// Wakes the zones of a cluster whose pods, object or loaded keys changed
/// (by [`cluster_fingerprint`]), and the zones whose duplicates changed.
/// Event-driven: pods, clusters and keys come from subscribers of the
/// shared stores, mapped to their cluster through the stores. A cluster
/// seen for the first time wakes its zones too: a restart that happened
/// before the first look must not go unnoticed (a zone that is current
/// answers from memory, with no exec).
async fn watch_clusters(ctx: Arc<ZoneContext>, wake: mpsc::UnboundedSender<ObjectRef<BindZone>>) {
    let stores = &ctx.base.stores;
    let key_of =
        |r: ObjectRef<BindCluster>| Change::Cluster((r.namespace.unwrap_or_default(), r.name));
    let clusters_store = stores.clusters.clone();
    let changes = stream::select_all([
        stores
            .feeds
            .pods
            .subscribe()
            .filter_map(move |p| future::ready(cluster_of_pod(&p).map(key_of)))
            .boxed(),
        stores
            .feeds
            .clusters
            .subscribe()
            .map(|c| Change::Cluster((c.namespace().unwrap_or_default(), c.name_any())))
            .boxed(),
        stores
            .feeds
            .keys
            .subscribe()
            .flat_map(move |k| stream::iter(clusters_loading(&clusters_store, &k)).map(key_of))
            .boxed(),
        // Only what can change a zone's group: spec (generation), deletion.
        stores
            .feeds
            .zones
            .subscribe()
            .filter(changed(zone_trigger, ctx.zones.clone()))
            .map(Change::Zone)
            .boxed(),
    ]);
    let mut changes = std::pin::pin!(changes);
    let mut last: HashMap<ObjKey, u64> = HashMap::new();
    // The live BindZones of each group: a duplicate waiting for the others
    // to go is woken when one goes.
    let mut last_peers: HashMap<ZoneGroup, Vec<String>> = HashMap::new();
    while let Some(change) = changes.next().await {
        match change {
            Change::Cluster(key) => {
                let fp = cluster_fingerprint(&ctx, &key);
                if last.insert(key.clone(), fp) == Some(fp) {
                    continue;
                }
                for z in stores.index.zones_of_cluster(&key.0, &key.1) {
                    tracing::debug!(cluster = %key.1, zone = %z.name_any(), "cluster, pods or keys changed; waking zone");
                    let _ = wake.unbounded_send(ObjectRef::from_obj(z.as_ref()));
                }
            }
            Change::Zone(zone) => {
                // By name (the index's order), from the index: the zone
                // feed told it before this subscriber.
                let group = zone_group(&zone);
                let mut members = stores.index.zones_naming(&zone);
                members.retain(|z| z.metadata.deletion_timestamp.is_none());
                let peers: Vec<String> = members.iter().map(|z| z.name_any()).collect();
                let before = last_peers.insert(group, peers.clone());
                if before.is_some_and(|before| before != peers) {
                    for z in &members {
                        tracing::debug!(zone = %z.name_any(), "zones naming the same zone changed; waking zone");
                        let _ = wake.unbounded_send(ObjectRef::from_obj(z.as_ref()));
                    }
                }
            }
        }
    }
}

/// Runs the BindZone and DNSRecord controllers until `shutdown`; in-flight
/// reconciles finish first. `ctx.stores` must be driven by the caller (see
/// [`crate::controller::run`]). The BIND pods are reached through
/// `ctx.executor` ([`ExecServers`]).
pub async fn run(ctx: Arc<Context>, settings: Settings, shutdown: Shutdown) {
    let servers = Arc::new(ExecServers::new(ctx.executor.clone()));
    run_on(ctx, servers, settings, shutdown).await;
}

/// [`run`], reaching the BIND pods through `servers` (the controller tests
/// give a model of named here).
pub async fn run_on(
    ctx: Arc<Context>,
    servers: Arc<dyn ZoneServers>,
    settings: Settings,
    shutdown: Shutdown,
) {
    let zones = ctx.stores.zones.clone();
    let records = ctx.stores.records.clone();
    let zone_sub = ctx.stores.feeds.zones.subscribe();
    let record_sub_zone = ctx.stores.feeds.records.subscribe();
    let record_sub_self = ctx.stores.feeds.records.subscribe();

    let batcher = Arc::new(super::zonesync::server::batch::Batcher::new());
    let concurrency = ZONE_CONCURRENCY;
    let (wake_tx, wake_rx) = mpsc::unbounded();
    let namespaces = crate::controller::zonesync::namespaces::NamespaceWatch::new(
        ctx.client.clone(),
        zones.clone(),
        wake_tx.clone(),
    );
    let zctx = Arc::new(ZoneContext {
        base: ctx,
        zones: zones.clone(),
        records: records.clone(),
        state: Default::default(),
        settings,
        servers,
        batcher,
        namespaces,
        wake: wake_tx.clone(),
    });

    let controllers = {
        let zctx = zctx.clone();
        let shutdown = shutdown.clone();
        async move {
            // Reconcile only from full caches: a half-filled pod or record
            // cache would read as "primary gone" or "no records".
            zctx.base.stores.wait_until_ready().await;
            let zone_ctrl = Controller::for_shared_stream(
                zone_sub.filter(changed(zone_trigger, zctx.zones.clone())),
                zones,
            )
            .reconcile_on(wake_rx)
            .with_config(Config::default().concurrency(concurrency))
            .graceful_shutdown_on(shutdown.clone())
            .run(bindzone::reconcile, bindzone::error_policy, zctx.clone())
            .for_each(|_| future::ready(()));
            let record_ctrl = Controller::for_shared_stream(
                record_sub_self.filter(record_self_trigger(zctx.clone())),
                records,
            )
            .graceful_shutdown_on(shutdown)
            .run(dnsrecord::reconcile, dnsrecord::error_policy, zctx.clone())
            .for_each(|_| future::ready(()));
            // Each controller on a task of its own: a busy zone controller
            // must not hold back the DNSRecord controller's finalizers (one
            // task is polled by one thread at a time). Aborted when this
            // future is dropped (a lost Lease stops the controllers at once).
            let (zones, records) = futures::join!(
                AbortOnDropHandle::new(tokio::spawn(zone_ctrl)),
                AbortOnDropHandle::new(tokio::spawn(record_ctrl))
            );
            for ended in [zones, records] {
                if let Err(e) = ended {
                    tracing::error!(error = %e, "a zone controller ended abnormally");
                }
            }
        }
    };
    let record_wakes = record_sub_zone
        .filter(changed(record_trigger, zctx.records.clone()))
        .filter(|r| future::ready(zone_writes(r)))
        .filter_map(|r| future::ready(zone_of(r)));
    let background = async {
        futures::join!(
            watch_clusters(zctx.clone(), wake_tx.clone()),
            // The pods' readiness gates.
            super::zones_served::run(zctx.clone(), shutdown.clone()),
            // No delay: see the module doc (group commit).
            record_wakes.for_each(|zone| {
                let _ = wake_tx.unbounded_send(zone);
                future::ready(())
            }),
        );
    };
    tokio::select! {
        () = controllers => {},
        () = background => {},
    }
    tracing::info!("zone controllers stopped");
}
