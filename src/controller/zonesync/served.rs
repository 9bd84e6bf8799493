//! Waiting for a pod to serve a zone at a serial: what a DNSRecord's Ready
//! waits for on every secondary (see `bindzone::confirm`).
//!
//! One watch per pod, shared by every zone that waits on it: each look is
//! one round of signed SOA queries for all zones waiting there (one
//! pipelined exchange per signing key, through the pod's group commit), so
//! a first sync of 1,000 zones costs a few exchanges, not one per zone.
//! Looks follow the oldest wait: soon after a write (a lone change
//! reaches a secondary in ~10 ms: NOTIFY, SOA query, IXFR), then further
//! apart while it goes on (half its age: a secondary that takes seconds is
//! asked a few times a second at most), never closer than the number of
//! zones waiting allows (a secondary taking a first sync of 1,000 zones in
//! is asked for all of them at most twice a second, so that costs a
//! handful of exchanges). The first look comes one such pause after the
//! first wait: a secondary needs that long at least (its NOTIFY, SOA query
//! and transfer). A change that arrives while a long wait runs
//! (a secondary that lags for good) is looked at within [`MAX_PAUSE`].
//!
//! A serial names the primary's content at that serial, so a pod serving
//! serial S or later (RFC 1982 order) serves what the primary served at S.
//!
//! Touches the pods (SOA queries) only; never the API server.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot};

use crate::bind::{TsigKey, ZoneName};
use crate::controller::exec::PodRef;

use super::server::Target;
use super::server::batch::Batcher;
use super::server::port::ZoneServers;

/// Closest two looks at a pod with one zone waiting.
pub const MIN_PAUSE: Duration = Duration::from_millis(2);
/// What each waiting zone adds to the closest two looks may be (1,000
/// zones: half a second).
pub const PAUSE_PER_ZONE: Duration = Duration::from_micros(500);
/// Farthest two looks at a pod are apart.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);

/// What a wait ends with when the pod does not serve the serial in time:
/// the serial it served at the last look (`None`: it did not answer for
/// the zone, or could not be asked).
pub type Lag = Option<u32>;

/// Every pod's watch (see the module docs), and each BindZone's own wait
/// for its generation to be served (by zone uid).
#[derive(Debug, Default)]
pub struct ServedWatch {
    pods: Mutex<HashMap<PodRef, Arc<PodWatch>>>,
    zones: Mutex<HashMap<String, ZoneWait>>,
}

/// Where a BindZone's wait for its secondaries stands, for one generation
/// of the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneWait {
    /// Started at `serial`, the first serial that served the generation.
    Waiting {
        generation: Option<i64>,
        serial: u32,
    },
    /// Every secondary served the generation.
    Served { generation: Option<i64> },
    /// Some did not within the first wait (each with the serial it served
    /// last); the wait goes on.
    Lagging {
        generation: Option<i64>,
        serial: u32,
        lag: Vec<(PodRef, Lag)>,
    },
}

impl ZoneWait {
    pub fn generation(&self) -> Option<i64> {
        match self {
            ZoneWait::Waiting { generation, .. }
            | ZoneWait::Served { generation }
            | ZoneWait::Lagging { generation, .. } => *generation,
        }
    }
}

#[derive(Debug, Default)]
struct PodWatch {
    inner: Mutex<PodInner>,
    /// A new wait: the watch recomputes when it looks next.
    arrived: Notify,
}

#[derive(Debug, Default)]
struct PodInner {
    waiters: Vec<Waiter>,
    /// The id the next wait gets (ids tell which waits a look asked for).
    next_id: u64,
    /// Whether the pod's watch task runs.
    running: bool,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    zone: ZoneName,
    key: TsigKey,
    serial: u32,
    since: Instant,
    until: Instant,
    last: Lag,
    reply: oneshot::Sender<Result<(), Lag>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data behind the lock: a panic elsewhere leaves it usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether `served` is `wanted` or later in serial number arithmetic
/// (RFC 1982).
pub fn serves(served: u32, wanted: u32) -> bool {
    served.wrapping_sub(wanted) < (1 << 31)
}

/// How long the watch of a pod waits before its next look: half as long
/// as the oldest wait has lasted (so a wait that just began is looked at
/// within milliseconds, and one that has gone on for seconds about once a
/// second), within [`MIN_PAUSE`] plus [`PAUSE_PER_ZONE`] per zone waiting
/// and [`MAX_PAUSE`].
pub fn pause(waiting: usize, oldest: Duration) -> Duration {
    let floor = (MIN_PAUSE + PAUSE_PER_ZONE * waiting as u32).min(MAX_PAUSE);
    (oldest / 2).clamp(floor, MAX_PAUSE)
}

impl ServedWatch {
    /// The zone's wait, if one was made.
    pub fn zone_wait(&self, uid: &str) -> Option<ZoneWait> {
        lock(&self.zones).get(uid).cloned()
    }

    /// Sets the zone's wait; `only_for`: only while the zone's entry is
    /// still for that generation (a wait of an older generation must not
    /// overwrite a newer one's). Returns whether it was set.
    pub fn set_zone_wait(&self, uid: &str, wait: ZoneWait, only_for: Option<Option<i64>>) -> bool {
        let mut zones = lock(&self.zones);
        if let Some(generation) = only_for
            && zones.get(uid).map(ZoneWait::generation) != Some(generation)
        {
            return false;
        }
        zones.insert(uid.to_string(), wait);
        true
    }

    /// Drops the zone's wait (the zone is gone, or a wait gave up while
    /// still for `generation`).
    pub fn forget_zone(&self, uid: &str, generation: Option<Option<i64>>) {
        let mut zones = lock(&self.zones);
        if generation.is_none_or(|g| zones.get(uid).map(ZoneWait::generation) == Some(g)) {
            zones.remove(uid);
        }
    }

    /// Waits until `pod` serves `zone` at `serial` or later (asked with
    /// SOA queries signed with `key`, which steers them into the zone's
    /// view), or until `until`: then `Err` with the serial seen last.
    /// `since`: when the caller began to wait for this serial (a wait that
    /// goes on after an earlier one ended keeps the looks as far apart as
    /// its age wants).
    #[allow(clippy::too_many_arguments)]
    pub async fn wait(
        &self,
        servers: &Arc<dyn ZoneServers>,
        batcher: &Arc<Batcher>,
        pod: &PodRef,
        zone: &ZoneName,
        key: &TsigKey,
        serial: u32,
        since: Instant,
        until: Instant,
    ) -> Result<(), Lag> {
        let watch = lock(&self.pods).entry(pod.clone()).or_default().clone();
        let (reply, rx) = oneshot::channel();
        let start = {
            let mut w = lock(&watch.inner);
            let id = w.next_id;
            w.next_id += 1;
            w.waiters.push(Waiter {
                id,
                zone: zone.clone(),
                key: key.clone(),
                serial,
                since,
                until,
                last: None,
                reply,
            });
            !std::mem::replace(&mut w.running, true)
        };
        if start {
            let (servers, batcher, pod) = (servers.clone(), batcher.clone(), pod.clone());
            tokio::spawn(watch_pod(watch, servers, batcher, pod));
        } else {
            watch.arrived.notify_one();
        }
        rx.await.unwrap_or(Err(None))
    }
}

/// One pod's watch: looks while any wait is left, then ends (a later wait
/// starts it again).
async fn watch_pod(
    watch: Arc<PodWatch>,
    servers: Arc<dyn ZoneServers>,
    batcher: Arc<Batcher>,
    pod: PodRef,
) {
    let target = Target::new(&servers, &batcher, &pod);
    let mut look_at = {
        let w = lock(&watch.inner);
        Instant::now() + pause(w.waiters.len(), Duration::ZERO)
    };
    loop {
        // Until the next look: waits that reach their end meanwhile end
        // with what the last look saw (an end never brings a look of its
        // own: the ends of a first sync's waits are spread out).
        loop {
            let end = {
                let mut w = lock(&watch.inner);
                expire(&mut w.waiters, Instant::now());
                let Some(end) = w.waiters.iter().map(|x| x.until).min() else {
                    w.running = false;
                    return;
                };
                end
            };
            if Instant::now() >= look_at {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(look_at.min(end).into()) => {}
                _ = watch.arrived.notified() => {}
            }
        }
        // What to ask: the waiting zones per signing key.
        let (asked, asks): (u64, Vec<(TsigKey, Vec<ZoneName>)>) = {
            let w = lock(&watch.inner);
            let mut by_key: BTreeMap<String, (TsigKey, BTreeSet<ZoneName>)> = BTreeMap::new();
            for x in &w.waiters {
                by_key
                    .entry(x.key.name.to_string())
                    .or_insert_with(|| (x.key.clone(), BTreeSet::new()))
                    .1
                    .insert(x.zone.clone());
            }
            let asks = by_key
                .into_values()
                .map(|(key, zones)| (key, zones.into_iter().collect()))
                .collect();
            (w.next_id, asks)
        };
        let answers = futures::future::join_all(asks.iter().map(|(key, zones)| async {
            let got = target.serials(zones, Some(key)).await;
            if let Err(e) = &got {
                tracing::debug!(pod = %pod, error = %e, "failed to read serials for the served watch");
            }
            (key.name.to_string(), got.ok())
        }))
        .await;
        let served: HashMap<String, Option<BTreeMap<ZoneName, u32>>> =
            answers.into_iter().collect();
        let looked = Instant::now();
        let mut w = lock(&watch.inner);
        // A wait that arrived after this look's questions went out is not
        // answered by them.
        for x in w.waiters.iter_mut().filter(|x| x.id < asked) {
            if let Some(answer) = served.get(x.key.name.as_str()) {
                x.last = answer.as_ref().and_then(|m| m.get(&x.zone).copied());
            }
        }
        let answered = |x: &mut Waiter| x.id < asked && x.last.is_some_and(|s| serves(s, x.serial));
        for x in w.waiters.extract_if(.., answered) {
            let _ = x.reply.send(Ok(()));
        }
        let oldest = w.waiters.iter().map(|x| x.since).min().unwrap_or(looked);
        look_at = looked + pause(w.waiters.len(), looked.saturating_duration_since(oldest));
    }
}

/// Ends the waits that reached their end by `now` (with the serial seen
/// last) and drops those nobody waits for any more.
fn expire(waiters: &mut Vec<Waiter>, now: Instant) {
    waiters.retain(|x| !x.reply.is_closed());
    for x in waiters.extract_if(.., |x| now >= x.until) {
        let _ = x.reply.send(Err(x.last));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_order_wraps() {
        assert!(serves(7, 7));
        assert!(serves(8, 7));
        assert!(!serves(6, 7));
        assert!(serves(2, u32::MAX - 1));
        assert!(!serves(u32::MAX - 1, 2));
    }

    #[test]
    fn looks_follow_the_oldest_wait_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(pause(1, Duration::ZERO), ms(2) + PAUSE_PER_ZONE);
        assert_eq!(pause(1, ms(40)), ms(20));
        assert_eq!(pause(1, ms(5_000)), MAX_PAUSE);
        // A thousand zones waiting: no closer than ~half a second.
        assert_eq!(pause(1_000, ms(3)), ms(502));
        assert_eq!(pause(100_000, Duration::ZERO), MAX_PAUSE);
    }
}
