//! What the operator remembers between reconciles, in memory only: per zone,
//! the contents it last saw or wrote on the primary ([`Snapshot`], trusted
//! only while the primary's SOA serial still matches) and a failure count
//! for backoff; per cluster, the last SOA survey of its pods and the
//! catalog "epoch" (bumped whenever the operator re-creates the catalog, so
//! every zone re-registers); per zone also its plan memo (validated
//! DNSRecords and the last plan, [`PlanMemo`]). Losing all of it (an operator restart) costs
//! one AXFR per zone, never correctness.
//!
//! Pure bookkeeping: no API, no exec. Holds no key material.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bind::ZoneName;

use super::diff::Served;
use super::plan::PlanMemo;

/// (namespace, name) of a BindZone or BindCluster.
pub type ObjKey = (String, String);

/// A zone's contents on the primary as last read or written.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Shared, not copied, with the pass that reads it (it holds every
    /// RRset of the zone); a write copies it only when it changes it.
    pub served: Arc<Served>,
    /// Fingerprint of the plan last applied against `served`.
    pub applied: Option<u64>,
    /// When the primary's serial last matched `served.serial`.
    pub verified_at: Instant,
    /// When a pass last wrote the zone (kept by the passes after it that
    /// wrote nothing), so a pass right after a write still schedules the
    /// recheck after that write.
    pub written_at: Option<Instant>,
    /// The primary pod's identity then: a restarted or replaced primary
    /// may have lost everything, so the snapshot no longer counts.
    pub primary: u64,
}

#[derive(Debug, Default)]
struct ZoneMemory {
    snapshot: Option<Snapshot>,
    failures: u32,
    /// The applied annotation this process last wrote, with the object's
    /// uid: the cache may not show our own write yet when the zone is
    /// reconciled again at once (and would undo and redo its clause).
    applied: Option<(String, String)>,
    /// Catalog epoch at which this zone last joined its catalog (kept when
    /// the snapshot is dropped: membership does not change with a failed
    /// write).
    member_epoch: u64,
    /// The zone's validated DNSRecords and last plan ([`PlanMemo`]): a
    /// reconcile validates and decides again only what changed.
    plan: Arc<Mutex<PlanMemo>>,
    /// When this process first planned the zone.
    first_seen: Option<Instant>,
}

/// SOA serials every pod of a cluster served at one moment.
#[derive(Debug, Clone)]
pub struct Survey {
    pub taken: Instant,
    /// Fingerprint of the cluster's pods when taken: a pod restart or
    /// readiness change makes the survey stale at once.
    pub pods_fingerprint: u64,
    /// The zones asked (a zone not asked is unknown, not missing).
    pub asked: BTreeSet<ZoneName>,
    /// Pod name -> zone -> serial. A pod whose dig failed is absent.
    pub pods: BTreeMap<String, BTreeMap<ZoneName, u32>>,
}

/// Per-cluster memory and locks.
#[derive(Debug, Default)]
pub struct ClusterMemory {
    /// Held while creating a catalog zone, so two zones never write its file
    /// at once (a second write would drop the first one's journal).
    pub catalog_lock: tokio::sync::Mutex<()>,
    /// Held while surveying, so concurrent zone reconciles share one run.
    pub survey_lock: tokio::sync::Mutex<()>,
    inner: Mutex<ClusterInner>,
}

/// How many NOTIFY and missing-zone entries a cluster's memory holds
/// before the ones older than [`NOTIFY_MEMORY`] are dropped (zones come
/// and go; their entries must not pile up).
const NOTIFY_MEMORY_PRUNE_AT: usize = 4096;
/// How long those entries matter: a NOTIFY is repeated at most once per
/// recheck interval (seconds); a zone missing longer than this only has
/// its count start again.
const NOTIFY_MEMORY: Duration = Duration::from_secs(600);

#[derive(Debug, Default)]
struct ClusterInner {
    catalog_epoch: u64,
    /// Per catalog zone: how often a zone holding `catalog_lock` saw it on
    /// the primary (created it or found it).
    catalog_seen: HashMap<ZoneName, u64>,
    /// Shared, not copied, with every zone that reads it: it holds every
    /// zone of the cluster, and each zone reconcile reads it.
    survey: Option<Arc<Survey>>,
    /// The NOTIFYs the operator sent a secondary itself, by pod and zone:
    /// the serial it was told to catch up to, and when.
    notified: HashMap<(String, ZoneName), (u32, Instant)>,
    /// When the operator first saw a secondary lack a zone its catalog
    /// lists, by pod and zone (see [`ClusterMemory::missing_for`]).
    missing: HashMap<(String, ZoneName), Instant>,
}

impl ClusterMemory {
    /// Incremented each time this process creates a catalog zone.
    pub fn catalog_epoch(&self) -> u64 {
        lock(&self.inner).catalog_epoch
    }

    /// Records that the catalog was (re)created: every zone must rejoin.
    pub fn bump_catalog_epoch(&self) -> u64 {
        let mut i = lock(&self.inner);
        i.catalog_epoch += 1;
        i.catalog_epoch
    }

    /// How often the catalog was seen on the primary under `catalog_lock`
    /// ([`Self::saw_catalog`]): a zone that waited for the lock and finds
    /// this count moved knows the catalog is there without asking the pod
    /// (so a first sync of many zones does not read it once per zone, one
    /// after the other).
    pub fn catalog_sightings(&self, catalog: &ZoneName) -> u64 {
        lock(&self.inner)
            .catalog_seen
            .get(catalog)
            .copied()
            .unwrap_or_default()
    }

    /// Records that the catalog is on the primary (under `catalog_lock`).
    pub fn saw_catalog(&self, catalog: &ZoneName) {
        *lock(&self.inner)
            .catalog_seen
            .entry(catalog.clone())
            .or_default() += 1;
    }

    /// The last survey, if taken under the same pods and younger than
    /// `max_age`.
    pub fn survey(&self, pods_fingerprint: u64, max_age: Duration) -> Option<Arc<Survey>> {
        lock(&self.inner)
            .survey
            .as_ref()
            .filter(|s| s.pods_fingerprint == pods_fingerprint && s.taken.elapsed() <= max_age)
            .cloned()
    }

    /// The last survey regardless of age (for status display).
    pub fn last_survey(&self) -> Option<Arc<Survey>> {
        lock(&self.inner).survey.clone()
    }

    pub fn store_survey(&self, survey: Arc<Survey>) {
        lock(&self.inner).survey = Some(survey);
    }

    /// Forgets the survey (after a zone was created, deleted or written).
    pub fn invalidate_survey(&self) {
        lock(&self.inner).survey = None;
    }

    /// Whether the operator should NOTIFY `pod` of `zone` at `serial` now,
    /// and if so records that it does: not when it did for this serial or
    /// a later one less than `every` ago. Every zone of a cluster shares its
    /// catalog, so a secondary behind on a first sync of 1,000 zones gets
    /// one catalog NOTIFY per `every`, not one per zone that looks.
    pub fn take_notify(&self, pod: &str, zone: &ZoneName, serial: u32, every: Duration) -> bool {
        self.take_notify_at(pod, zone, serial, every, Instant::now())
    }

    fn take_notify_at(
        &self,
        pod: &str,
        zone: &ZoneName,
        serial: u32,
        every: Duration,
        now: Instant,
    ) -> bool {
        let mut i = lock(&self.inner);
        let key = (pod.to_string(), zone.clone());
        if let Some((told, at)) = i.notified.get(&key)
            && *told >= serial
            && now.saturating_duration_since(*at) < every
        {
            return false;
        }
        if i.notified.len() >= NOTIFY_MEMORY_PRUNE_AT {
            i.notified
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < NOTIFY_MEMORY);
        }
        i.notified.insert(key, (serial, now));
        true
    }

    /// How long `pod` has lacked `zone` as far as this process saw (zero
    /// the first time it is asked); `missing: false` forgets it.
    pub fn missing_for(&self, pod: &str, zone: &ZoneName, missing: bool) -> Duration {
        self.missing_at(pod, zone, missing, Instant::now())
    }

    fn missing_at(&self, pod: &str, zone: &ZoneName, missing: bool, now: Instant) -> Duration {
        let mut i = lock(&self.inner);
        let key = (pod.to_string(), zone.clone());
        if !missing {
            i.missing.remove(&key);
            return Duration::ZERO;
        }
        if i.missing.len() >= NOTIFY_MEMORY_PRUNE_AT && !i.missing.contains_key(&key) {
            i.missing
                .retain(|_, at| now.saturating_duration_since(*at) < NOTIFY_MEMORY);
        }
        now.saturating_duration_since(*i.missing.entry(key).or_insert(now))
    }

    /// Records a serial the operator knows first-hand (after its own write).
    pub fn note_serial(&self, pod: &str, zone: &ZoneName, serial: Option<u32>) {
        let mut i = lock(&self.inner);
        if let Some(s) = i.survey.as_mut() {
            if !s.asked.contains(zone) {
                return;
            }
            // Copied only while a reader still holds the old one.
            let s = Arc::make_mut(s);
            let served = s.pods.entry(pod.to_string()).or_default();
            match serial {
                Some(v) => served.insert(zone.clone(), v),
                None => served.remove(zone),
            };
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data behind the lock: a panic elsewhere leaves it usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// All in-memory zone state of the process.
#[derive(Debug, Default)]
pub struct ServerState {
    zones: Mutex<HashMap<ObjKey, ZoneMemory>>,
    /// Statuses: the memo of the last status this process wrote per object
    /// uid (BindZones and DNSRecords alike: a flush that comes again before
    /// the cache shows that write does not write it again, a different
    /// report is written whatever the cache shows), and the DNSRecord
    /// reports queued for the background writer.
    pub statuses: Arc<super::writes::StatusQueue>,
    /// Waits for pods to serve a zone at a serial (DNSRecords' Ready).
    pub served: Arc<super::served::ServedWatch>,
    clusters: Mutex<HashMap<ObjKey, Arc<ClusterMemory>>>,
    /// When the DNSRecord controller last put the finalizer on a record of
    /// a zone not applied yet (or of no zone yet): a first sync still
    /// arriving (see `bindzone::primary::plan`).
    first_sync_record: Mutex<Option<Instant>>,
}

impl ServerState {
    /// Notes a DNSRecord of a zone not applied yet (or of a zone not there
    /// yet) taken in now.
    pub fn note_first_sync_record(&self) {
        *lock(&self.first_sync_record) = Some(Instant::now());
    }

    /// How long ago a DNSRecord of a zone not applied yet was last taken
    /// in (`None`: never).
    pub fn since_first_sync_record(&self) -> Option<Duration> {
        lock(&self.first_sync_record).map(|at| at.elapsed())
    }
    pub fn cluster(&self, key: &ObjKey) -> Arc<ClusterMemory> {
        lock(&self.clusters).entry(key.clone()).or_default().clone()
    }

    pub fn snapshot(&self, zone: &ObjKey) -> Option<Snapshot> {
        lock(&self.zones).get(zone)?.snapshot.clone()
    }

    pub fn set_snapshot(&self, zone: &ObjKey, snapshot: Option<Snapshot>) {
        lock(&self.zones).entry(zone.clone()).or_default().snapshot = snapshot;
    }

    /// The applied annotation last written for the object with `uid`.
    pub fn applied(&self, zone: &ObjKey, uid: &str) -> Option<String> {
        let zones = lock(&self.zones);
        let (u, text) = zones.get(zone)?.applied.as_ref()?;
        (u == uid).then(|| text.clone())
    }

    /// Records an applied annotation written for the object with `uid`.
    pub fn set_applied(&self, zone: &ObjKey, uid: &str, text: String) {
        lock(&self.zones).entry(zone.clone()).or_default().applied = Some((uid.to_string(), text));
    }

    /// The catalog epoch the zone last joined at (0: not in this process).
    pub fn member_epoch(&self, zone: &ObjKey) -> u64 {
        lock(&self.zones).get(zone).map_or(0, |m| m.member_epoch)
    }

    pub fn set_member_epoch(&self, zone: &ObjKey, epoch: u64) {
        lock(&self.zones)
            .entry(zone.clone())
            .or_default()
            .member_epoch = epoch;
    }

    /// The zone's plan memo (dropped with the zone: [`Self::forget`]).
    /// How long ago this process first asked this of the zone (its first
    /// plan): a precise age, where the object's creation timestamp is
    /// whole seconds.
    pub fn seen_for(&self, zone: &ObjKey) -> Duration {
        lock(&self.zones)
            .entry(zone.clone())
            .or_default()
            .first_seen
            .get_or_insert_with(Instant::now)
            .elapsed()
    }

    pub fn plan_memo(&self, zone: &ObjKey) -> Arc<Mutex<PlanMemo>> {
        lock(&self.zones)
            .entry(zone.clone())
            .or_default()
            .plan
            .clone()
    }

    /// Records a failure; returns how many in a row.
    pub fn failed(&self, zone: &ObjKey) -> u32 {
        let mut z = lock(&self.zones);
        let m = z.entry(zone.clone()).or_default();
        m.failures = m.failures.saturating_add(1);
        m.failures
    }

    pub fn succeeded(&self, zone: &ObjKey) {
        if let Some(m) = lock(&self.zones).get_mut(zone) {
            m.failures = 0;
        }
    }

    /// Forgets a released record.
    pub fn forget_report(&self, uid: &str) {
        self.statuses.forget(uid);
    }

    /// Forgets a deleted zone.
    pub fn forget(&self, zone: &ObjKey) {
        lock(&self.zones).remove(zone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secondary_is_notified_once_per_serial_per_interval() {
        let m = ClusterMemory::default();
        let (cat, zone) = (
            ZoneName::parse("catalog.example").unwrap(),
            ZoneName::parse("example.com").unwrap(),
        );
        let every = Duration::from_secs(3600);
        assert!(m.take_notify("c-1", &cat, 7, every));
        // The other zones of a first sync looking at the same lag.
        assert!(!m.take_notify("c-1", &cat, 7, every));
        assert!(!m.take_notify("c-1", &cat, 6, every));
        // Another secondary, another zone, a later serial: each its own.
        assert!(m.take_notify("c-2", &cat, 7, every));
        assert!(m.take_notify("c-1", &zone, 7, every));
        assert!(m.take_notify("c-1", &cat, 8, every));
        // Once the interval passed, the same serial again.
        assert!(m.take_notify("c-1", &cat, 8, Duration::ZERO));
    }

    #[test]
    fn notify_memory_drops_old_entries_once_it_is_large() {
        let m = ClusterMemory::default();
        let t0 = Instant::now();
        let every = Duration::from_secs(5);
        let zones: Vec<ZoneName> = (0..NOTIFY_MEMORY_PRUNE_AT)
            .map(|n| ZoneName::parse(&format!("z{n}.example")).unwrap())
            .collect();
        for z in &zones {
            assert!(m.take_notify_at("c-1", z, 1, every, t0));
            m.missing_at("c-1", z, true, t0);
        }
        let later = t0 + NOTIFY_MEMORY + Duration::from_secs(1);
        let fresh = ZoneName::parse("fresh.example").unwrap();
        assert!(m.take_notify_at("c-1", &fresh, 1, every, later));
        m.missing_at("c-1", &fresh, true, later);
        let i = lock(&m.inner);
        assert_eq!(i.notified.len(), 1);
        assert_eq!(i.missing.len(), 1);
    }

    #[test]
    fn how_long_a_secondary_lacked_a_zone_counts_from_the_first_look() {
        let m = ClusterMemory::default();
        let zone = ZoneName::parse("example.com").unwrap();
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(40);
        assert_eq!(m.missing_at("c-1", &zone, true, t0), Duration::ZERO);
        assert_eq!(
            m.missing_at("c-1", &zone, true, later),
            Duration::from_secs(40)
        );
        assert_eq!(m.missing_at("c-2", &zone, true, later), Duration::ZERO);
        // Served again: forgotten, so a later lack counts afresh.
        assert_eq!(m.missing_at("c-1", &zone, false, later), Duration::ZERO);
        assert_eq!(m.missing_at("c-1", &zone, true, later), Duration::ZERO);
    }
}
