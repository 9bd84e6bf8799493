//! The `latency` scenario: how long one user change takes to be answered,
//! on a converged cluster with nothing else going on. N DNSRecords are
//! created one after another (each only once the previous one answers
//! everywhere), then deleted the same way; each change is timed from the
//! API call returning until the primary and each secondary answer it (the
//! A record for a create, NXDOMAIN for a delete). A create is also timed
//! until its DNSRecord says Ready at its generation, and at that moment
//! every pod is asked once: what a user who waits for Ready and then asks
//! any pod gets. A Ready seen while some pod does not answer yet counts as
//! early (the rule: Ready means every server answers).
//!
//! Why its own UDP prober and not `dig`: a dig process costs ~5-10 ms to
//! start, the size of what is measured. The prober asks each pod every
//! `POLL` over UDP (a plain non-recursive query; no key: the bench's
//! zones answer anyone), so the resolution is about a millisecond.
//!
//! Touches only the scenario's in-memory API and its named processes.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams};
use serde::Serialize;

use super::BenchError;
use super::check::PodTarget;
use super::env::{BenchEnv, NAMESPACE, zone_object};
use crate::api::{DNSRecord, DNSRecordSpec, RecordType as ApiRecordType};
use crate::bind::ZoneName;
use crate::local::runtime::PodRole;

/// How often each pod is asked while a change is pending.
const POLL: Duration = Duration::from_millis(1);
/// How long one query waits for its reply before asking again.
const QUERY_TIMEOUT: Duration = Duration::from_millis(50);
/// A change not answered on some pod within this is counted as missed.
const CHANGE_DEADLINE: Duration = Duration::from_secs(10);

/// What one phase (creates or deletes) measured on one pod.
#[derive(Debug, Clone, Serialize)]
pub struct PodLatency {
    pub pod: String,
    pub role: String,
    /// Per change, milliseconds from the API call returning to the answer
    /// (None: not answered within `CHANGE_DEADLINE`).
    pub samples_ms: Vec<Option<f64>>,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub missed: usize,
}

/// One phase: "create" or "delete".
#[derive(Debug, Clone, Serialize)]
pub struct LatencyPhase {
    pub phase: &'static str,
    pub pods: Vec<PodLatency>,
}

/// When each create said Ready, and what the pods answered then.
#[derive(Debug, Clone, Serialize)]
pub struct ReadyLatency {
    /// Per create, milliseconds from the API call returning to the
    /// DNSRecord's Ready at its generation (None: not within
    /// `CHANGE_DEADLINE`).
    pub samples_ms: Vec<Option<f64>>,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub missed: usize,
    /// Creates whose Ready was seen while some pod, asked once right
    /// then, did not answer them.
    pub early: usize,
}

/// What the scenario measured.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyResult {
    /// Changes per phase.
    pub changes: usize,
    pub phases: Vec<LatencyPhase>,
    /// The creates' Ready.
    pub ready: ReadyLatency,
}

impl LatencyResult {
    /// Whether every change answered on every pod.
    pub fn complete(&self) -> bool {
        self.phases
            .iter()
            .flat_map(|p| &p.pods)
            .all(|p| p.missed == 0)
    }
}

/// The nearest-rank percentile `q` (0..=1) of sorted `v`.
fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// p50, p90, p99, max and how many are missing, of `samples`.
struct Stats {
    p50: Option<f64>,
    p90: Option<f64>,
    p99: Option<f64>,
    max: Option<f64>,
    missed: usize,
}

fn stats(samples: &[Option<f64>]) -> Stats {
    let mut got: Vec<f64> = samples.iter().flatten().copied().collect();
    got.sort_by(f64::total_cmp);
    // A missed change counts as the worst: percentiles only over answers
    // would flatter a pod that lost some.
    let missed = samples.len() - got.len();
    let complete = missed == 0;
    let pct = |q| percentile(&got, q).filter(|_| complete);
    Stats {
        p50: pct(0.50),
        p90: pct(0.90),
        p99: pct(0.99),
        max: got.last().copied().filter(|_| complete),
        missed,
    }
}

fn summarise(pod: &PodTarget, samples: Vec<Option<f64>>) -> PodLatency {
    let st = stats(&samples);
    PodLatency {
        pod: pod.pod.name.clone(),
        role: match pod.role {
            PodRole::Primary => "primary".into(),
            PodRole::Secondary => "secondary".into(),
        },
        p50_ms: st.p50,
        p90_ms: st.p90,
        p99_ms: st.p99,
        max_ms: st.max,
        samples_ms: samples,
        missed: st.missed,
    }
}

/// The DNSRecord of change `i`: `lat<i>` in zone `i % zones`.
fn record(i: usize, zones: usize) -> DNSRecord {
    DNSRecord::new(
        &format!("lat-{i}"),
        DNSRecordSpec {
            zone_ref: zone_object(i % zones),
            zone_namespace: None,
            name: format!("lat{i}"),
            type_: ApiRecordType::A,
            ttl: None,
            values: vec![ip(i).to_string()],
        },
    )
}

fn ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 250, (i / 256 % 256) as u8, (i % 256) as u8)
}

/// Runs the creates, then the deletes, over `pods` (primary first).
pub async fn run(
    env: &BenchEnv,
    pods: &[PodTarget],
    zones: &[ZoneName],
    changes: usize,
) -> Result<LatencyResult, BenchError> {
    let api: Api<DNSRecord> = Api::namespaced(env.client.clone(), NAMESPACE);
    let name = |i: usize| format!("lat{i}.{}", zones[i % zones.len()]);
    let mut created: Vec<Vec<Option<f64>>> = vec![Vec::new(); pods.len()];
    let (mut ready, mut early) = (Vec::new(), 0);
    for i in 0..changes {
        env.create(record(i, zones.len())).await?;
        let t = Instant::now();
        let (want, fqdn, obj) = (Want::Address(ip(i)), name(i), format!("lat-{i}"));
        let (took, said) = tokio::join!(
            answered(pods, &fqdn, want, t),
            ready_then_asked(&api, &obj, pods, &fqdn, want, t)
        );
        for (p, d) in took.into_iter().enumerate() {
            created[p].push(d);
        }
        early += usize::from(said.is_some_and(|(_, all)| !all));
        ready.push(said.map(|(ms, _)| ms));
    }
    let mut deleted: Vec<Vec<Option<f64>>> = vec![Vec::new(); pods.len()];
    for i in 0..changes {
        let obj = format!("lat-{i}");
        api.delete(&obj, &DeleteParams::default())
            .await
            .map_err(|source| BenchError::Api {
                action: format!("delete DNSRecord {obj}"),
                source,
            })?;
        let t = Instant::now();
        let took = answered(pods, &name(i), Want::NxDomain, t).await;
        for (p, d) in took.into_iter().enumerate() {
            deleted[p].push(d);
        }
    }
    let phase = |phase, samples: Vec<Vec<Option<f64>>>| LatencyPhase {
        phase,
        pods: pods
            .iter()
            .zip(samples)
            .map(|(p, s)| summarise(p, s))
            .collect(),
    };
    let st = stats(&ready);
    Ok(LatencyResult {
        changes,
        phases: vec![phase("create", created), phase("delete", deleted)],
        ready: ReadyLatency {
            samples_ms: ready,
            p50_ms: st.p50,
            p90_ms: st.p90,
            p99_ms: st.p99,
            max_ms: st.max,
            missed: st.missed,
            early,
        },
    })
}

/// Milliseconds from `t` until DNSRecord `obj` says Ready at its
/// generation, and whether every pod, asked once right then, answered
/// `name` as wanted.
async fn ready_then_asked(
    api: &Api<DNSRecord>,
    obj: &str,
    pods: &[PodTarget],
    name: &str,
    want: Want,
    t: Instant,
) -> Option<(f64, bool)> {
    loop {
        let ready = api.get_opt(obj).await.ok().flatten().is_some_and(|r| {
            r.status.as_ref().is_some_and(|s| {
                s.phase == Some(crate::api::Phase::Ready)
                    && s.observed_generation == r.metadata.generation
            })
        });
        if ready {
            let ms = (t.elapsed().as_secs_f64() * 1e4).round() / 10.0;
            let asked = futures::future::join_all(pods.iter().map(|p| async move {
                let sock = tokio::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
                    .await
                    .ok()?;
                sock.connect(p.dns).await.ok()?;
                Some(ask(&sock, name, want).await)
            }))
            .await;
            return Some((ms, asked.into_iter().all(|a| a == Some(true))));
        }
        if t.elapsed() >= CHANGE_DEADLINE {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[derive(Clone, Copy)]
enum Want {
    Address(Ipv4Addr),
    NxDomain,
}

/// Milliseconds from `t` until each pod answers `name` as wanted.
async fn answered(pods: &[PodTarget], name: &str, want: Want, t: Instant) -> Vec<Option<f64>> {
    let each = pods.iter().map(|p| async move {
        let sock = tokio::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .ok()?;
        sock.connect(p.dns).await.ok()?;
        loop {
            if ask(&sock, name, want).await {
                return Some((t.elapsed().as_secs_f64() * 1e4).round() / 10.0);
            }
            if t.elapsed() >= CHANGE_DEADLINE {
                return None;
            }
            tokio::time::sleep(POLL).await;
        }
    });
    futures::future::join_all(each).await
}

/// One query: whether the reply says what is wanted.
async fn ask(sock: &tokio::net::UdpSocket, name: &str, want: Want) -> bool {
    let id: u16 = rand::random();
    let Some(query) = query(id, name) else {
        return false;
    };
    if sock.send(&query).await.is_err() {
        return false;
    }
    let mut buf = [0u8; 1500];
    let deadline = tokio::time::Instant::now() + QUERY_TIMEOUT;
    loop {
        let n = match tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await {
            Ok(Ok(n)) => n,
            _ => return false,
        };
        // A late reply to an earlier query: wait for ours.
        if n < 12 || u16::from_be_bytes([buf[0], buf[1]]) != id {
            continue;
        }
        return judge(&buf[..n], want);
    }
}

/// A non-recursive query for `name` A IN (the check's probe encoding).
fn query(id: u16, name: &str) -> Option<Vec<u8>> {
    super::probe::encode(id, name, false)
}

/// Whether a reply answers as wanted: NOERROR with the address among its
/// answers, or NXDOMAIN.
fn judge(reply: &[u8], want: Want) -> bool {
    let rcode = reply[3] & 0x0f;
    let answers = u16::from_be_bytes([reply[6], reply[7]]);
    match want {
        Want::NxDomain => rcode == 3,
        Want::Address(ip) => {
            // The answer's RDATA (4 bytes) ends an A RR: look for it after
            // the question. Unique per change, so a match is the record.
            rcode == 0
                && answers > 0
                && reply
                    .windows(4)
                    .skip(12)
                    .any(|w| w == ip.octets().as_slice())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=50).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(25.0));
        assert_eq!(percentile(&v, 0.9), Some(45.0));
        assert_eq!(percentile(&v, 0.99), Some(50.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn a_query_names_its_labels() {
        let q = query(7, "a.bc.").unwrap();
        assert_eq!(&q[..2], &[0, 7]);
        assert_eq!(&q[12..], &[1, b'a', 2, b'b', b'c', 0, 0, 1, 0, 1]);
        assert!(query(1, "a..b").is_none());
    }

    #[test]
    fn replies_are_judged_by_rcode_and_address() {
        let mut r = vec![0u8; 12];
        r[3] = 3;
        assert!(judge(&r, Want::NxDomain));
        assert!(!judge(&r, Want::Address(Ipv4Addr::new(10, 0, 0, 1))));
        let mut ok = vec![0u8; 12];
        ok[7] = 1;
        ok.extend_from_slice(&[0, 0, 1, 0, 1, 10, 0, 0, 1]);
        assert!(judge(&ok, Want::Address(Ipv4Addr::new(10, 0, 0, 1))));
        assert!(!judge(&ok, Want::Address(Ipv4Addr::new(10, 0, 0, 2))));
        assert!(!judge(&ok, Want::NxDomain));
    }
}
