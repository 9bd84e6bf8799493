//! Wiring of the two zone controllers: the BindZone and DNSRecord caches
//! (shared reflectors: each feeds both controllers, and an object is in the
//! cache before any controller hears of it), the trigger filters, the pod
//! poller, and [`run`].
//!
//! Triggers, and why:
//! - BindZone changes wake the zone, but only spec (generation), deletion
//!   and finalizer changes: the zone's own status and applied annotation
//!   writes must not wake it again.
//! - DNSRecord spec, deletion and finalizer changes wake the record's zone,
//!   coalesced per zone ([`coalesce`]: after a quiet moment, or a bounded
//!   wait): the zone is the unit of write, so 1,000 new DNSRecords make one
//!   or two zone flushes, not 1,000.
//! - The same DNSRecord changes wake the DNSRecord controller (finalizer,
//!   zone-not-found status).
//! - The pod poller compares each cluster's pods, object and loaded keys
//!   (with their readiness) on every tick (cache reads only) and wakes the
//!   cluster's zones when they change: a primary restarted on an empty
//!   volume is repaired at once, new secondaries get their secondary zones,
//!   a zone waiting for a key goes on. It also wakes a zone when the set of
//!   BindZones naming the same zone changes (a duplicate removed).
//!
//! Touches the cluster (list/watch of BindZones and DNSRecords).

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::{StreamExt as _, future};
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Resource, ResourceExt as _};

use crate::api::{BindCluster, BindZone, CONDITION_READY, DNSRecord, is_condition_true};
use crate::controller::bindcluster::read::loaded_keys;
use crate::controller::context::Context;
use crate::controller::{Shutdown, bindzone, dnsrecord};

use super::plan::has_record_finalizer;
use super::state::ObjKey;
use super::survey::{cluster_pods, pods_fingerprint};
use super::{Settings, ZoneContext};

/// Zone reconciles running at once: each may exec into the primary, and a
/// cluster with 1,000 zones must not open 1,000 pods/exec streams at once
/// (after an operator restart every zone is checked).
const ZONE_CONCURRENCY: u16 = 8;

/// Zone reconciles running at once when zone operations are batched per
/// pod ([`super::batch`]): their execs join one round per pod, and the
/// commands that are not batched are bounded there, so the bound here only
/// keeps memory in check. High, so a first sync of many zones reaches each
/// step together.
const BATCHED_ZONE_CONCURRENCY: u16 = 2048;

/// Events a shared cache may buffer per subscriber before its watch waits.
const SUBSCRIBER_BUFFER: usize = 8192;

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

/// Objects between prunes of a [`changed`] filter's memory.
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
        if since_prune >= PRUNE_EVERY {
            since_prune = 0;
            let live: HashSet<String> = store.state().iter().map(|o| id(o)).collect();
            seen.retain(|k, _| live.contains(k));
        }
        let k = key(obj);
        future::ready(seen.insert(id(obj), k) != Some(k))
    }
}

/// The BindZone of a DNSRecord.
fn zone_of(r: Arc<DNSRecord>) -> Option<ObjectRef<BindZone>> {
    Some(ObjectRef::new(&r.spec.zone_ref).within(&r.namespace()?))
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

/// Forwards zone wake-ups coalesced per zone: a zone is woken once its
/// triggers paused for `quiet`, or `max_wait` after the first one, whichever
/// comes first (a trailing debounce with a cap).
async fn coalesce(
    input: impl futures::Stream<Item = ObjectRef<BindZone>>,
    wake: mpsc::UnboundedSender<ObjectRef<BindZone>>,
    quiet: Duration,
    max_wait: Duration,
) {
    let mut input = std::pin::pin!(input);
    // zone -> (first pending trigger, latest trigger)
    let mut pending: HashMap<ObjectRef<BindZone>, (Instant, Instant)> = HashMap::new();
    loop {
        let next_due = pending
            .values()
            .map(|(first, last)| (*last + quiet).min(*first + max_wait))
            .min();
        let sleep = async {
            match next_due {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => future::pending().await,
            }
        };
        tokio::select! {
            item = input.next() => {
                let Some(zone) = item else { return };
                let now = Instant::now();
                pending.entry(zone).and_modify(|e| e.1 = now).or_insert((now, now));
            }
            () = sleep => {
                let now = Instant::now();
                let due: Vec<_> = pending
                    .iter()
                    .filter(|(_, (first, last))| *last + quiet <= now || *first + max_wait <= now)
                    .map(|(k, _)| k.clone())
                    .collect();
                for zone in due {
                    pending.remove(&zone);
                    let _ = wake.unbounded_send(zone);
                }
            }
        }
    }
}

/// Namespace, cluster, view and normalised zone name: BindZones with the
/// same key name one zone.
type GroupKey = (Option<String>, String, Option<String>, String);

fn group_key(z: &BindZone) -> GroupKey {
    (
        z.namespace(),
        z.spec.cluster_ref.clone(),
        z.spec.view.clone(),
        z.spec.zone_name.trim_end_matches('.').to_ascii_lowercase(),
    )
}

/// The live BindZones of each group, by name (one pass, not zones x zones).
fn zone_groups(zones: &[Arc<BindZone>]) -> HashMap<GroupKey, Vec<String>> {
    let mut out: HashMap<GroupKey, Vec<String>> = HashMap::new();
    for z in zones
        .iter()
        .filter(|z| z.metadata.deletion_timestamp.is_none())
    {
        out.entry(group_key(z)).or_default().push(z.name_any());
    }
    for names in out.values_mut() {
        names.sort();
    }
    out
}

/// Wakes the zones of a cluster whose pods or object changed. A cluster
/// seen for the first time wakes its zones too: a restart that happened
/// before the first look must not go unnoticed (a zone that is current
/// answers from memory, with no exec).
async fn poll_pods(ctx: Arc<ZoneContext>, wake: mpsc::UnboundedSender<ObjectRef<BindZone>>) {
    let mut last: HashMap<ObjKey, u64> = HashMap::new();
    // Zone -> the other BindZones naming the same zone: a duplicate waiting
    // for the others to go is woken when one goes.
    let mut last_peers: HashMap<ObjKey, Vec<String>> = HashMap::new();
    loop {
        tokio::time::sleep(ctx.settings.pod_poll).await;
        let zones = ctx.zones.state();
        let mut now: HashMap<ObjKey, u64> = HashMap::new();
        let mut now_peers: HashMap<ObjKey, Vec<String>> = HashMap::new();
        let groups = zone_groups(&zones);
        let peers_of = |_: &Arc<ZoneContext>, z: &Arc<BindZone>| -> Vec<String> {
            groups.get(&group_key(z)).cloned().unwrap_or_default()
        };
        for z in &zones {
            let key = (
                z.namespace().unwrap_or_default(),
                z.spec.cluster_ref.clone(),
            );
            if let std::collections::hash_map::Entry::Vacant(e) = now.entry(key) {
                let fp = cluster_fingerprint(&ctx, e.key());
                e.insert(fp);
            }
        }
        for z in &zones {
            let key = (
                z.namespace().unwrap_or_default(),
                z.spec.cluster_ref.clone(),
            );
            let zkey = (z.namespace().unwrap_or_default(), z.name_any());
            let peers = peers_of(&ctx, z);
            let peers_changed = last_peers.get(&zkey).is_some_and(|before| *before != peers);
            now_peers.insert(zkey, peers);
            if last.get(&key) != now.get(&key) || peers_changed {
                tracing::debug!(cluster = %key.1, zone = %z.name_any(), "cluster, pods, keys or duplicates changed; waking zone");
                let _ = wake.unbounded_send(ObjectRef::from_obj(z.as_ref()));
            }
        }
        last = now;
        last_peers = now_peers;
    }
}

/// Runs the BindZone and DNSRecord controllers (and the caches they share)
/// until `shutdown`; in-flight reconciles finish first. `ctx.stores` must be
/// driven by the caller (see [`crate::controller::run`]).
pub async fn run(ctx: Arc<Context>, settings: Settings, shutdown: Shutdown) {
    let client = ctx.client.clone();
    let (zones, zone_writer) = reflector::store_shared::<BindZone>(SUBSCRIBER_BUFFER);
    let (records, record_writer) = reflector::store_shared::<DNSRecord>(SUBSCRIBER_BUFFER);
    let zone_sub = zone_writer
        .subscribe()
        .expect("a shared store can subscribe");
    let record_sub_zone = record_writer
        .subscribe()
        .expect("a shared store can subscribe");
    let record_sub_self = record_writer
        .subscribe()
        .expect("a shared store can subscribe");
    let zones_main = ctx
        .scope
        .watch::<BindZone>(&client, watcher::Config::default())
        .reflect_shared(zone_writer)
        .for_each(|_| future::ready(()));
    let records_main = ctx
        .scope
        .watch::<DNSRecord>(&client, watcher::Config::default())
        .reflect_shared(record_writer)
        .for_each(|_| future::ready(()));

    let batcher = settings
        .batch_gather
        .map(|g| Arc::new(super::batch::Batcher::new(g)));
    let concurrency = if batcher.is_some() {
        BATCHED_ZONE_CONCURRENCY
    } else {
        ZONE_CONCURRENCY
    };
    let zctx = Arc::new(ZoneContext {
        base: ctx,
        zones: zones.clone(),
        records: records.clone(),
        state: Default::default(),
        settings,
        batcher,
    });
    let (wake_tx, wake_rx) = mpsc::unbounded();

    let controllers = {
        let zctx = zctx.clone();
        let shutdown = shutdown.clone();
        async move {
            // Reconcile only from full caches: a half-filled pod or record
            // cache would read as "primary gone" or "no records".
            let _ = futures::join!(
                zctx.zones.wait_until_ready(),
                zctx.records.wait_until_ready()
            );
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
                record_sub_self.filter(changed(record_trigger, zctx.records.clone())),
                records,
            )
            .graceful_shutdown_on(shutdown)
            .run(dnsrecord::reconcile, dnsrecord::error_policy, zctx.clone())
            .for_each(|_| future::ready(()));
            futures::join!(zone_ctrl, record_ctrl);
        }
    };
    let record_wakes = record_sub_zone
        .filter(changed(record_trigger, zctx.records.clone()))
        .filter_map(|r| future::ready(zone_of(r)));
    let background = async {
        futures::join!(
            zones_main,
            records_main,
            poll_pods(zctx.clone(), wake_tx.clone()),
            coalesce(
                record_wakes,
                wake_tx,
                zctx.settings.record_quiet,
                zctx.settings.record_max_wait
            ),
        );
    };
    tokio::select! {
        () = controllers => {},
        () = background => {},
    }
    tracing::info!("zone controllers stopped");
}
