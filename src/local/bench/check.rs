//! "Does every record answer?", asked of real named processes. The bench
//! knows which A record each name must hold ([`Expected`]); [`Checker`]
//! polls each pod until every zone it serves holds every expected record:
//!
//! - a cheap probe first, over UDP from the bench itself (over the
//!   network, as a user would ask; see [`super::probe`]): every unfinished
//!   zone's SOA serial plus one A query for the last record in creation
//!   order the zone was last seen missing, each answer stamped when it
//!   arrived. Only when the probe answers and the serial moved is the zone
//!   transferred. A pod is probed only when a writer did something since
//!   (or it is still catching up), so the check takes little CPU from what
//!   it measures; the end of a writer's exec is looked at within a few ms
//!   when the pod's last look is a poll interval old (at most one look per
//!   interval either way); each pod is looked at on its own schedule, and
//!   transfers run as tasks of their own, a bounded number at once, so a
//!   pod's probes go on while they run;
//! - then a TSIG-signed AXFR of the zone, compared name by name with the
//!   expected set; the zones due on a pod are transferred many per `dig`
//!   run (one AXFR query each, the key applies to every one), so a
//!   thousand zones cost a handful of processes on the cores the operator
//!   runs on. A zone counts only when its transfer ran from SOA to SOA and
//!   held every expected record. A complete zone is complete since the end
//!   of the probe answer that first gave the transferred serial (a
//!   serial names one content: every change moves it), else since its
//!   transfer started (bounded by the dig run's start for its first zone,
//!   by its end for a later one); so the check's own transfers do not
//!   count, only the probes' cadence. `BENCH_CHECK_TRACE=1` prints each
//!   look (when it probed, what it found, what it transferred).
//!
//! After a scenario, [`Checker::sample`] asks random names directly.
//!
//! No cluster access; the transfer key is read by dig from a key file
//! (mode 0600) the caller writes, never passed on a command line.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use rand::seq::IndexedRandom as _;
use serde::Serialize;
use tokio::task::JoinHandle;

use std::path::Path;

use crate::bind::parse::{parse_axfr, parse_dig_soa};
use crate::bind::{PodLayout, ZoneName};
use crate::controller::exec::PodRef;
use crate::local::runtime::PodRole;

use super::probe::{Ask, probe};

/// Most records a scenario may have (each gets its own 10.x.y.z address).
pub const MAX_RECORDS: usize = 1 << 24;
/// Queries per `dig` when sampling names after a scenario.
const MAX_SAMPLE_QUERIES: usize = 400;
/// Transfer `dig` runs per look at one pod, at most.
const MAX_TRANSFER_RUNS: usize = 2 * TRANSFER_CONCURRENCY;
/// How often a waiting pod's loop asks whether a writer finished an exec.
const WAKE_STEP: Duration = Duration::from_millis(5);
/// Longest a pod with unfinished zones goes unprobed.
const IDLE_LOOK: Duration = Duration::from_secs(1);
/// Transfer `dig` processes in flight at once per pod.
const TRANSFER_CONCURRENCY: usize = 2;
/// Zones per transfer `dig` (one AXFR query each, all in one run: a
/// thousand zones cost a few dig processes, not a thousand, on the cores
/// the operator is measured on).
const ZONES_PER_TRANSFER: usize = 100;
/// Expected records per transfer `dig`, at most (a bigger zone goes alone).
const RECORDS_PER_TRANSFER: usize = 20_000;
/// Longest one transfer `dig` may run (a server that stops answering must
/// not hold the check for two seconds per queried zone).
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(30);

/// One record the bench writes: `owner` (relative) in zone `zone` (an
/// index into [`Expected::zones`]) holds exactly `ip`.
#[derive(Debug, Clone)]
pub struct PlannedRecord {
    /// The DNSRecord's object name.
    pub object: String,
    pub zone: usize,
    pub owner: String,
    /// Lowercase, with the trailing dot.
    pub fqdn: String,
    pub ip: Ipv4Addr,
}

/// Every record of a scenario, by zone.
#[derive(Debug, Clone)]
pub struct Expected {
    pub zones: Vec<ZoneName>,
    pub records: Vec<PlannedRecord>,
    /// Record indexes per zone, in creation order.
    by_zone: Vec<Vec<usize>>,
}

impl Expected {
    /// `n` records `h<i>` spread round-robin over `zones`, record i holding
    /// 10.x.y.z with x.y.z = i.
    pub fn new(zones: Vec<ZoneName>, n: usize) -> Self {
        let mut by_zone = vec![Vec::new(); zones.len()];
        let records = (0..n.min(MAX_RECORDS))
            .map(|i| {
                let zone = i % zones.len();
                by_zone[zone].push(i);
                let owner = format!("h{i}");
                PlannedRecord {
                    object: format!("rec-{i}"),
                    zone,
                    fqdn: format!("{owner}.{}", zones[zone].fqdn()),
                    owner,
                    ip: Ipv4Addr::new(10, (i >> 16) as u8, (i >> 8) as u8, i as u8),
                }
            })
            .collect();
        Expected {
            zones,
            records,
            by_zone,
        }
    }

    /// Records of zone `z`, in creation order.
    pub fn of_zone(&self, z: usize) -> &[usize] {
        &self.by_zone[z]
    }
}

/// One pod to check.
#[derive(Debug, Clone)]
pub struct PodTarget {
    pub pod: PodRef,
    pub role: PodRole,
    pub dns: SocketAddr,
    pub layout: PodLayout,
}

/// How far a pod got.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PodProgress {
    pub pod: String,
    pub role: String,
    /// Since t0, when every record of every zone answered (None: not
    /// within the deadline).
    pub all_secs: Option<f64>,
    /// Since t0, when the first zone was complete.
    pub first_zone_secs: Option<f64>,
    pub zones_complete: usize,
    /// Expected records the last look found missing, summed over zones.
    pub missing: usize,
    pub probes: u64,
    pub transfers: u64,
}

/// Per pod and zone: what the last look saw.
#[derive(Debug, Clone)]
struct ZoneLook {
    /// A record index the zone lacked when last transferred.
    probe: Option<usize>,
    /// The serial of the last transfer.
    serial: Option<u32>,
    /// The latest serial a probe saw, and when (since `t0`) a probe first
    /// answered with it: the end of that probe's `dig` run.
    seen: Option<(u32, Duration)>,
    done: Option<Duration>,
    missing: usize,
}

/// What the checker knows about one pod between looks.
#[derive(Debug, Clone)]
struct PodState {
    zones: Vec<ZoneLook>,
    /// The writers' activity count when it was last probed.
    activity: Option<u64>,
    last_probe: Option<Instant>,
    /// The latest SOA serial probed per zone.
    serials: BTreeMap<ZoneName, u32>,
    /// The last look saw a serial move or transferred a zone.
    moving: bool,
    /// Zones whose transfer run is in flight.
    transferring: HashSet<usize>,
}

/// One finished transfer `dig` run: its zones, when it started and ended,
/// and dig's output.
struct TransferRun {
    zones: Vec<usize>,
    started: Instant,
    ended: Instant,
    out: String,
}

/// Polls pods until they serve every expected record.
pub struct Checker<'a> {
    /// A count that moves whenever a writer may have changed a zone (exec
    /// calls made); a pod is probed again only when it moved, when the pod
    /// was still catching up, or after `IDLE_LOOK`, so checking costs the
    /// machine little while the system under test works.
    pub activity: &'a (dyn Fn() -> u64 + Sync),
    /// The transfer key as a BIND key file (for `dig -k`).
    pub key_file: &'a Path,
    pub expected: &'a Expected,
    pub pods: Vec<PodTarget>,
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Runs `dig` against `dns` with `args` (queries and options) after the
/// common options; stdout, or empty when dig failed to run at all.
async fn dig(tool: &str, dns: SocketAddr, args: &[String]) -> String {
    let mut cmd = tokio::process::Command::new(tool);
    cmd.args([
        "-p".to_string(),
        dns.port().to_string(),
        format!("@{}", dns.ip()),
        "+time=2".into(),
        "+tries=1".into(),
        "+noall".into(),
        "+answer".into(),
    ])
    .args(args)
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .stdin(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .kill_on_drop(true);
    match cmd.output().await {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(_) => String::new(),
    }
}

/// Plain queries (no recursion), `(name, type)` pairs.
async fn query(tool: &str, dns: SocketAddr, queries: &[(String, &str)]) -> String {
    let mut args = vec!["+norecurse".to_string()];
    for (name, rtype) in queries {
        args.push(name.clone());
        args.push((*rtype).to_string());
    }
    dig(tool, dns, &args).await
}

/// The output of one `dig` run of AXFR queries, cut per queried zone (in
/// `zones` order): a zone's part runs from its opening SOA to its closing
/// one (dig prints a transfer's SOA first and last; without `+onesoa`), so a
/// transfer that failed (`; Transfer failed.`) or stopped halfway has no
/// part. A zone's SOA owner is the zone itself, so another zone's lines
/// never open or close it.
fn split_transfers<'o>(out: &'o str, zones: &[&ZoneName]) -> Vec<Option<&'o str>> {
    // Byte offsets of each line's start and end, with its SOA owner if any.
    let mut lines: Vec<(usize, usize, Option<&str>)> = Vec::new();
    let mut at = 0;
    for line in out.split_inclusive('\n') {
        let f: Vec<&str> = line.split_whitespace().take(4).collect();
        let soa = match f.as_slice() {
            [owner, _ttl, "IN", "SOA"] => Some(*owner),
            _ => None,
        };
        lines.push((at, at + line.len(), soa));
        at += line.len();
    }
    let is_soa_of = |l: &(usize, usize, Option<&str>), fqdn: &str| {
        l.2.is_some_and(|o| o.eq_ignore_ascii_case(fqdn))
    };
    let mut cursor = 0;
    zones
        .iter()
        .map(|zone| {
            let fqdn = zone.fqdn();
            let open = cursor + lines[cursor..].iter().position(|l| is_soa_of(l, &fqdn))?;
            let close = open + 1 + lines[open + 1..].iter().position(|l| is_soa_of(l, &fqdn))?;
            cursor = close + 1;
            Some(&out[lines[open].0..lines[close].1])
        })
        .collect()
}

/// `owner -> A addresses` from `dig +noall +answer` output.
fn a_answers(stdout: &str) -> HashMap<String, BTreeSet<String>> {
    let mut out: HashMap<String, BTreeSet<String>> = HashMap::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [owner, _ttl, "IN", "A", ip] = f.as_slice() {
            out.entry(owner.to_ascii_lowercase())
                .or_default()
                .insert((*ip).to_string());
        }
    }
    out
}

impl Checker<'_> {
    /// The expected records of zone `z` that `axfr` (dig output) lacks or
    /// holds with other data, in creation order.
    fn missing(&self, z: usize, axfr: &str) -> Option<Vec<usize>> {
        let zone = &self.expected.zones[z];
        let sets = parse_axfr(axfr, zone).ok()?;
        if !sets.iter().any(|s| s.rtype == "SOA") {
            return None;
        }
        let served: HashMap<String, &BTreeSet<String>> = sets
            .iter()
            .filter(|s| s.rtype == "A")
            .map(|s| (s.name.fqdn(), &s.values))
            .collect();
        Some(
            self.expected
                .of_zone(z)
                .iter()
                .copied()
                .filter(|&i| {
                    let r = &self.expected.records[i];
                    served
                        .get(&r.fqdn)
                        .is_none_or(|v| v.len() != 1 || !v.contains(&r.ip.to_string()))
                })
                .collect(),
        )
    }

    /// Starts one signed AXFR `dig` run of `zones` from pod `p` (all in one
    /// process) as a task of its own, so the pod's probes go on while it
    /// runs: a run of a hundred zones can take most of a second on a loaded
    /// machine, and only probes stamp when a zone was served.
    fn start_transfer(&self, p: &PodTarget, zones: Vec<usize>) -> JoinHandle<TransferRun> {
        let mut args = vec![
            "-k".to_string(),
            self.key_file.to_string_lossy().into_owned(),
        ];
        for &z in &zones {
            args.push(self.expected.zones[z].fqdn());
            args.push("AXFR".to_string());
        }
        let (tool, dns) = (p.layout.tools.dig.clone(), p.dns);
        tokio::spawn(async move {
            let started = Instant::now();
            let out = tokio::time::timeout(TRANSFER_TIMEOUT, dig(&tool, dns, &args))
                .await
                .unwrap_or_default();
            TransferRun {
                zones,
                started,
                ended: Instant::now(),
                out,
            }
        })
    }

    /// Per zone of a finished run: the served serial and the expected
    /// records it lacks, or None when its transfer failed or did not
    /// finish.
    fn read_transfer(&self, run: &TransferRun) -> Vec<Option<(u32, Vec<usize>)>> {
        let names: Vec<&ZoneName> = run.zones.iter().map(|&z| &self.expected.zones[z]).collect();
        split_transfers(&run.out, &names)
            .into_iter()
            .zip(&run.zones)
            .map(|(part, &z)| {
                let part = part?;
                let serial = parse_dig_soa(part).get(&self.expected.zones[z]).copied()?;
                Some((serial, self.missing(z, part)?))
            })
            .collect()
    }

    /// Takes a finished transfer run into the pod's state: a zone that held
    /// every expected record is complete since a probe first answered with
    /// the transferred serial (same contents then), else since its transfer
    /// started (the dig's start for its first zone, its end for a later
    /// one: the run does not say when that one's transfer began); a zone
    /// still lacking records is probed next for the last one it lacks.
    fn take_transfer(&self, st: &mut PodState, t0: Instant, run: TransferRun) {
        let results = self.read_transfer(&run);
        for (k, (&z, result)) in run.zones.iter().zip(results).enumerate() {
            st.transferring.remove(&z);
            let Some((serial, missing)) = result else {
                continue;
            };
            let look = &mut st.zones[z];
            look.serial = Some(serial);
            look.missing = missing.len();
            match missing.last() {
                None => {
                    look.done = Some(match look.seen {
                        Some((s, at)) if s == serial => at,
                        _ if k == 0 => run.started.saturating_duration_since(t0),
                        _ => run.ended.saturating_duration_since(t0),
                    });
                }
                Some(&i) => look.probe = Some(i),
            }
        }
        st.moving = true;
    }

    /// `due` cut into the zone lists of transfer `dig` runs: at most
    /// [`ZONES_PER_TRANSFER`] zones and [`RECORDS_PER_TRANSFER`] expected
    /// records each (a bigger zone alone).
    fn transfer_chunks(&self, due: Vec<usize>) -> Vec<Vec<usize>> {
        let mut chunks: Vec<Vec<usize>> = Vec::new();
        let mut records = 0;
        for z in due {
            let n = self.expected.of_zone(z).len();
            match chunks.last_mut() {
                Some(c) if c.len() < ZONES_PER_TRANSFER && records + n <= RECORDS_PER_TRANSFER => {
                    records += n;
                    c.push(z);
                }
                _ => {
                    records = n;
                    chunks.push(vec![z]);
                }
            }
        }
        chunks
    }

    /// One probe of pod `p`: every unfinished zone's SOA serial and the A
    /// record it was last seen lacking, all at once; each zone's serial is
    /// stamped with when its answer arrived. Returns the zones worth a
    /// transfer: the probe record answers, the serial moved since the last
    /// transfer, and none of the zone's transfers is running.
    async fn probe_pod(&self, p: &PodTarget, st: &mut PodState, t0: Instant) -> Vec<usize> {
        let open: Vec<usize> = (0..st.zones.len())
            .filter(|&z| st.zones[z].done.is_none())
            .collect();
        let mut asks: Vec<Ask> = Vec::new();
        for &z in &open {
            asks.push((self.expected.zones[z].fqdn(), true));
            if let Some(i) = st.zones[z].probe {
                asks.push((self.expected.records[i].fqdn.clone(), false));
            }
        }
        st.activity = Some((self.activity)());
        st.last_probe = Some(Instant::now());
        let heard = probe(p.dns, &asks).await;
        let mut serials = BTreeMap::new();
        for &z in &open {
            let zone = &self.expected.zones[z];
            let Some(&(serial, arrived)) = heard.serials.get(&zone.fqdn()) else {
                continue;
            };
            // A serial names one content of the zone (every change moves
            // it), so a zone later transferred complete at this serial was
            // complete when this answer arrived.
            let look = &mut st.zones[z];
            if look.seen.is_none_or(|(s, _)| s != serial) {
                look.seen = Some((serial, arrived.saturating_duration_since(t0)));
            }
            serials.insert(zone.clone(), serial);
        }
        let due = open
            .into_iter()
            .filter(|&z| {
                let Some(&serial) = serials.get(&self.expected.zones[z]) else {
                    return false;
                };
                let look = &st.zones[z];
                let probe_ok = look.probe.is_none_or(|i| {
                    let r = &self.expected.records[i];
                    heard
                        .a
                        .get(&r.fqdn)
                        .is_some_and(|v| v.contains(&r.ip.to_string()))
                });
                probe_ok && look.serial != Some(serial) && !st.transferring.contains(&z)
            })
            .collect();
        st.moving = serials.iter().any(|(z, s)| st.serials.get(z) != Some(s));
        st.serials.extend(serials);
        due
    }

    /// Whether pod `st` needs a look now: never looked at, the writers
    /// did something since, it was still moving, (a secondary) it serves
    /// other serials than the primary last did, or its last look is old.
    fn due(&self, st: &PodState, role: PodRole, primary: &BTreeMap<ZoneName, u32>) -> bool {
        if st.zones.iter().all(|z| z.done.is_some()) {
            return false;
        }
        let (Some(activity), Some(last)) = (st.activity, st.last_probe) else {
            return true;
        };
        let behind = role == PodRole::Secondary
            && st.zones.iter().enumerate().any(|(z, look)| {
                let zone = &self.expected.zones[z];
                look.done.is_none() && st.serials.get(zone) != primary.get(zone)
            });
        activity != (self.activity)() || st.moving || behind || last.elapsed() >= IDLE_LOOK
    }

    /// Sleeps until `next`, or until a writer's exec ended since the pod's
    /// last look, once that look is `poll` old: the end of a write is
    /// looked at within [`WAKE_STEP`] instead of up to `poll` later (which
    /// was a tenth of a 0.5 s scenario), and a busy writer still gets at
    /// most one look per `poll`, as before.
    async fn until_due(&self, st: &PodState, next: Instant, poll: Duration) {
        loop {
            let now = Instant::now();
            if now >= next {
                return;
            }
            let wrote = st.activity.is_some_and(|a| a != (self.activity)());
            if wrote && st.last_probe.is_none_or(|t| now >= t + poll) {
                return;
            }
            tokio::time::sleep(WAKE_STEP.min(next - now)).await;
        }
    }

    /// Polls every `poll` until each pod serves every expected record or
    /// `deadline` passes; times are since `t0`. Each pod is looked at on
    /// its own schedule: a slow look at one pod never delays the next look
    /// at another (which stamps the zones that completed there meanwhile).
    pub async fn wait(&self, t0: Instant, deadline: Instant, poll: Duration) -> Vec<PodProgress> {
        let fresh = PodState {
            zones: (0..self.expected.zones.len())
                .map(|z| {
                    let last = self.expected.of_zone(z).last().copied();
                    ZoneLook {
                        probe: last,
                        serial: None,
                        seen: None,
                        // A zone with no records is complete from the start.
                        done: last.is_none().then_some(Duration::ZERO),
                        missing: 0,
                    }
                })
                .collect(),
            activity: None,
            last_probe: None,
            serials: BTreeMap::new(),
            moving: false,
            transferring: HashSet::new(),
        };
        // The primary's latest serials, which tell a secondary it is behind.
        let primary_serials: std::sync::Mutex<BTreeMap<ZoneName, u32>> = Default::default();
        let primary_serials = &primary_serials;
        futures::future::join_all(self.pods.iter().map(|p| {
            let mut st = fresh.clone();
            async move {
                let mut pr = PodProgress {
                    pod: p.pod.name.clone(),
                    role: match p.role {
                        PodRole::Primary => "primary".into(),
                        PodRole::Secondary => "secondary".into(),
                    },
                    ..Default::default()
                };
                // Transfer runs in flight: each its own task, so probes
                // (which stamp) never wait for a transfer (which confirms).
                let mut runs: FuturesUnordered<JoinHandle<TransferRun>> = FuturesUnordered::new();
                loop {
                    let round = Instant::now();
                    while let Some(Some(finished)) = runs.next().now_or_never() {
                        if let Ok(run) = finished {
                            self.take_transfer(&mut st, t0, run);
                        }
                    }
                    let primary = primary_serials
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone();
                    if self.due(&st, p.role, &primary) {
                        let looked = Instant::now();
                        let due = self.probe_pod(p, &mut st, t0).await;
                        pr.probes += 1;
                        let probed = Instant::now();
                        // A bounded number of runs at once, so a pod's
                        // transfers never crowd out what is measured; the
                        // rest go at a later look.
                        let free = MAX_TRANSFER_RUNS.saturating_sub(runs.len());
                        let mut started = 0;
                        for chunk in self.transfer_chunks(due).into_iter().take(free) {
                            started += chunk.len();
                            st.transferring.extend(chunk.iter().copied());
                            runs.push(self.start_transfer(p, chunk));
                        }
                        pr.transfers += started as u64;
                        st.moving |= started > 0;
                        if p.role == PodRole::Primary {
                            *primary_serials.lock().unwrap_or_else(|e| e.into_inner()) =
                                st.serials.clone();
                        }
                        if std::env::var_os("BENCH_CHECK_TRACE").is_some() {
                            // What each look cost and found, to judge the
                            // check's own lag.
                            let since = |i: Instant| i.saturating_duration_since(t0).as_secs_f64();
                            eprintln!(
                                "check {} look {:.3} probed {:.3} serials {} transferring {} complete {}",
                                p.pod.name,
                                since(looked),
                                since(probed),
                                st.serials.len(),
                                st.transferring.len(),
                                st.zones.iter().filter(|l| l.done.is_some()).count()
                            );
                        }
                    }
                    let done: Vec<Duration> = st.zones.iter().filter_map(|l| l.done).collect();
                    pr.zones_complete = done.len();
                    pr.missing = st
                        .zones
                        .iter()
                        .filter(|l| l.done.is_none())
                        .map(|l| if l.serial.is_some() { l.missing } else { 1 })
                        .sum();
                    pr.first_zone_secs = done.iter().min().map(|d| secs(*d));
                    pr.all_secs = (done.len() == st.zones.len())
                        .then(|| done.iter().max().map(|d| secs(*d)).unwrap_or(0.0));
                    if pr.all_secs.is_some() || Instant::now() >= deadline {
                        for run in &runs {
                            run.abort();
                        }
                        return pr;
                    }
                    let finished = tokio::select! {
                        Some(finished) = runs.next(), if !runs.is_empty() => Some(finished),
                        () = self.until_due(&st, round + poll, poll) => None,
                    };
                    if let Some(Ok(run)) = finished {
                        self.take_transfer(&mut st, t0, run);
                    }
                }
            }
        }))
        .await
    }

    /// Asks every pod for `n` random records directly; (asked, answered
    /// with the expected address) summed over pods.
    pub async fn sample(&self, n: usize) -> (usize, usize) {
        let picks: Vec<&PlannedRecord> = {
            let mut rng = rand::rng();
            let all: Vec<&PlannedRecord> = self.expected.records.iter().collect();
            all.choose_multiple(&mut rng, n).copied().collect()
        };
        let queries: Vec<(String, &str)> = picks.iter().map(|r| (r.fqdn.clone(), "A")).collect();
        let (mut asked, mut ok) = (0, 0);
        for p in &self.pods {
            for chunk in queries.chunks(MAX_SAMPLE_QUERIES) {
                let answers = a_answers(&query(&p.layout.tools.dig, p.dns, chunk).await);
                asked += chunk.len();
                ok += chunk
                    .iter()
                    .filter(|(name, _)| {
                        let r = picks.iter().find(|r| &r.fqdn == name);
                        r.is_some_and(|r| {
                            answers
                                .get(name)
                                .is_some_and(|v| v.len() == 1 && v.contains(&r.ip.to_string()))
                        })
                    })
                    .count();
            }
        }
        (asked, ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zones(n: usize) -> Vec<ZoneName> {
        (0..n)
            .map(|i| ZoneName::parse(&format!("z{i}.bench.test")).unwrap())
            .collect()
    }

    #[test]
    fn records_spread_round_robin_with_distinct_names_and_addresses() {
        let e = Expected::new(zones(3), 70_000);
        assert_eq!(e.of_zone(0).len(), 23_334);
        assert_eq!(e.of_zone(2).len(), 23_333);
        let r = &e.records[65_537];
        assert_eq!(r.fqdn, "h65537.z2.bench.test.");
        assert_eq!(r.ip, Ipv4Addr::new(10, 1, 0, 1));
        let names: BTreeSet<&str> = e.records.iter().map(|r| r.fqdn.as_str()).collect();
        let ips: BTreeSet<Ipv4Addr> = e.records.iter().map(|r| r.ip).collect();
        assert_eq!((names.len(), ips.len()), (70_000, 70_000));
    }

    #[test]
    fn answers_and_transfers_are_compared_by_name_and_address() {
        let e = Expected::new(zones(1), 3);
        let out =
            "h0.z0.bench.test. 300 IN A 10.0.0.0\nH1.z0.bench.test. 300 IN A 10.0.0.1\n;; x\n";
        let a = a_answers(out);
        assert!(a["h1.z0.bench.test."].contains("10.0.0.1"));
        let c = Checker {
            activity: &|| 0,
            key_file: Path::new("/nonexistent"),
            expected: &e,
            pods: Vec::new(),
        };
        let axfr = "z0.bench.test. 300 IN SOA ns. h. 5 1 1 1 1\n\
                    h0.z0.bench.test. 300 IN A 10.0.0.0\n\
                    h1.z0.bench.test. 300 IN A 10.9.9.9\n";
        assert_eq!(c.missing(0, axfr), Some(vec![1, 2]));
        assert_eq!(c.missing(0, "; Transfer failed."), None);
    }

    #[test]
    fn one_dig_of_many_transfers_is_cut_per_zone_from_soa_to_soa() {
        let e = Expected::new(zones(4), 8);
        let c = Checker {
            activity: &|| 0,
            key_file: Path::new("/nonexistent"),
            expected: &e,
            pods: Vec::new(),
        };
        // What `dig -k key z0 AXFR z1 AXFR z2 AXFR z3 AXFR` prints: z0
        // whole, z1 refused, z2 whole but lacking h6, z3 cut off halfway.
        let out = "z0.bench.test. 300 IN SOA ns. h. 7 1 1 1 1\n\
                   h0.z0.bench.test. 300 IN A 10.0.0.0\n\
                   h4.z0.bench.test. 300 IN A 10.0.0.4\n\
                   z0.bench.test. 300 IN SOA ns. h. 7 1 1 1 1\n\
                   ; Transfer failed.\n\
                   z2.bench.test. 300 IN SOA ns. h. 9 1 1 1 1\n\
                   h2.z2.bench.test. 300 IN A 10.0.0.2\n\
                   Z2.bench.test. 300 IN SOA ns. h. 9 1 1 1 1\n\
                   z3.bench.test. 300 IN SOA ns. h. 3 1 1 1 1\n\
                   h3.z3.bench.test. 300 IN A 10.0.0.3\n\
                   h7.z3.bench.test. 300 IN A 10.0.0.7\n\
                   ;; communications error: end of file\n";
        let names: Vec<&ZoneName> = e.zones.iter().collect();
        let parts = split_transfers(out, &names);
        assert_eq!(parts.len(), 4);
        let (z0, z2) = (parts[0].unwrap(), parts[2].unwrap());
        assert!(z0.starts_with("z0.") && z0.ends_with("7 1 1 1 1\n"), "{z0}");
        assert!(!z0.contains("z2."), "{z0}");
        assert_eq!(parts[1], None, "a failed transfer has no part");
        assert_eq!(
            parts[3], None,
            "a transfer without its closing SOA has no part"
        );
        // Each part is judged alone: z0 complete, z2 missing h6.
        assert_eq!(c.missing(0, z0), Some(vec![]));
        assert_eq!(c.missing(2, z2), Some(vec![6]));
        assert_eq!(parse_dig_soa(z2).get(&e.zones[2]), Some(&9));
        // A zone asked twice in a row takes the next transfer each time.
        let z0_twice = z0.repeat(2);
        let twice = split_transfers(&z0_twice, &[&e.zones[0], &e.zones[0]]);
        assert!(twice.iter().all(Option::is_some), "{twice:?}");
    }

    #[test]
    fn zones_are_transferred_in_runs_bounded_by_zones_and_records() {
        let e = Expected::new(zones(250), 250 * 10);
        let c = Checker {
            activity: &|| 0,
            key_file: Path::new("/nonexistent"),
            expected: &e,
            pods: Vec::new(),
        };
        let sizes: Vec<usize> = c
            .transfer_chunks((0..250).collect())
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(sizes, [ZONES_PER_TRANSFER, ZONES_PER_TRANSFER, 50]);
        let big = Expected::new(zones(3), 3 * 15_000);
        let c = Checker {
            expected: &big,
            ..c
        };
        let sizes: Vec<usize> = c
            .transfer_chunks(vec![0, 1, 2])
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(sizes, [1, 1, 1], "15,000 records each: one zone per run");
    }
}
