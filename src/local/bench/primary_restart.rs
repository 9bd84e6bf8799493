//! The primary-restart scenario's second half: a converged cluster (every
//! record answered everywhere and Ready) loses its primary Pod, deleted
//! through the API as `kubectl delete pod` would; the runtime's StatefulSet
//! controller re-creates it on an empty data directory (the default
//! emptyDir). Measured: when the new primary's named is Ready, when it
//! serves every zone (one `dig` of every zone's SOA on it, polled), when
//! its Pod turns Ready (the readiness gate), whether the secondaries
//! answered every zone throughout, and what the operator wrote meanwhile —
//! DNSRecord status writes above all (target 0: their RRsets never stopped
//! being served).
//!
//! Touches only the scenario's own in-memory API and named processes.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};

use super::check::{Checker, Expected, PodTarget};
use super::env::{BenchEnv, NAMESPACE};
use super::report::PrimaryRestartResult;
use super::{BenchError, BenchOptions};
use crate::api::{BindZone, Phase, REASON_SERVED};
use crate::bind::commands::dig_soa;
use crate::bind::parse::parse_dig_soa;
use crate::controller::exec::PodExecutor;
use crate::controller::pods::{containers_ready, pod_ready};

/// How often the new primary and the secondaries are asked.
const POLL: Duration = Duration::from_millis(50);
/// The operator is done with the restart once it has written and exec'd
/// nothing for this long after the new primary served every zone ...
const QUIET: Duration = Duration::from_secs(3);
/// ... or after this long regardless.
const QUIET_MAX: Duration = Duration::from_secs(30);
/// The resource of DNSRecords in the write log.
const RECORD_RESOURCE: &str = "dnsrecords";

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Waits until the operator has been quiet for `quiet` (at most `max`).
pub async fn settle(env: &BenchEnv, quiet: Duration, max: Duration) -> Duration {
    let start = Instant::now();
    let mut seen = (env.log.finished(), env.writes.count());
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < quiet && start.elapsed() < max {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = (env.log.finished(), env.writes.count());
        if now != seen {
            seen = now;
            quiet_since = Instant::now();
        }
    }
    start.elapsed()
}

/// How many of `env.zones` the pod answers the SOA of (None: no answer).
async fn zones_served(env: &BenchEnv, t: &PodTarget) -> Option<usize> {
    let out = env
        .raw
        .exec(&t.pod, &dig_soa(&t.layout, &env.zones))
        .await
        .ok()?;
    let served = parse_dig_soa(&out.stdout);
    Some(env.zones.iter().filter(|z| served.contains_key(*z)).count())
}

/// The primary Pod object as the API has it.
fn primary_pod(env: &BenchEnv, name: &str) -> Option<Pod> {
    env.mem.list::<Pod>().into_iter().find(|p| {
        p.metadata.namespace.as_deref() == Some(NAMESPACE)
            && p.metadata.name.as_deref() == Some(name)
    })
}

/// Deletes the converged cluster's primary Pod and measures its return.
pub async fn run(
    opts: &BenchOptions,
    env: &BenchEnv,
    pods: &[PodTarget],
    expected: &Expected,
    key_file: &std::path::Path,
    say: &impl Fn(String),
) -> Result<PrimaryRestartResult, BenchError> {
    let settle_secs = secs(settle(env, QUIET, Duration::from_secs(60)).await);
    let primary = pods
        .iter()
        .find(|t| BenchEnv::is_primary(t))
        .expect("the cluster has a primary");
    let secondaries: Vec<&PodTarget> = pods.iter().filter(|t| !BenchEnv::is_primary(t)).collect();
    let name = primary.pod.name.clone();
    let old_uid = primary_pod(env, &name)
        .and_then(|p| p.metadata.uid)
        .unwrap_or_default();
    say(format!("converged; deleting the primary pod {name}"));
    let t0 = Instant::now();
    let deadline = t0 + opts.timeout;
    Api::<Pod>::namespaced(env.client.clone(), NAMESPACE)
        .delete(&name, &DeleteParams::default())
        .await
        .map_err(|source| BenchError::Api {
            action: format!("delete pod {name}"),
            source,
        })?;

    // The secondaries, polled until the new primary serves every zone.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let watch_secondaries = async {
        let (mut polls, mut short) = (0u64, 0u64);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            for t in &secondaries {
                polls += 1;
                if zones_served(env, t).await != Some(env.zones.len()) {
                    short += 1;
                }
            }
            tokio::time::sleep(POLL).await;
        }
        (polls, short)
    };
    let watch_primary = async {
        let mut named_ready = None;
        let mut pod_ready_at = None;
        let mut served = None;
        while Instant::now() < deadline {
            let now = Instant::now();
            let pod = primary_pod(env, &name)
                .filter(|p| p.metadata.uid.as_deref() != Some(old_uid.as_str()));
            if let Some(p) = &pod {
                if named_ready.is_none() && containers_ready(p) {
                    named_ready = Some(now);
                }
                if pod_ready_at.is_none() && pod_ready(p) {
                    pod_ready_at = Some(now);
                }
            }
            if named_ready.is_some() && served.is_none() {
                let target = env.targets().into_iter().find(|t| t.pod.name == name);
                if let Some(t) = target
                    && zones_served(env, &t).await == Some(env.zones.len())
                {
                    served = Some(Instant::now());
                }
            }
            if served.is_some() && pod_ready_at.is_some() {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (named_ready, pod_ready_at, served)
    };
    let ((polls, short), (named_ready, pod_ready_at, served)) =
        tokio::join!(watch_secondaries, watch_primary);
    say(format!(
        "new primary named Ready after {:.2}s, every zone served after {:.2}s",
        named_ready.map_or(f64::NAN, |t| t.duration_since(t0).as_secs_f64()),
        served.map_or(f64::NAN, |t| t.duration_since(t0).as_secs_f64())
    ));
    // Every record on every pod again (AXFR of every zone).
    let checker = Checker {
        activity: &|| env.log.finished(),
        key_file,
        expected,
        pods: env.targets(),
    };
    let progress = checker.wait(t0, deadline, opts.poll_interval).await;
    let all_records = progress
        .iter()
        .map(|p| p.all_secs)
        .collect::<Option<Vec<f64>>>()
        .and_then(|v| v.into_iter().reduce(f64::max));
    // Then until the operator is done and every zone says Served again.
    let zones_ready = loop {
        let zones: Vec<BindZone> = env.mem.list();
        let served_all = zones.iter().all(|z| {
            z.status.as_ref().is_some_and(|s| {
                s.phase == Some(Phase::Ready)
                    && s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.reason == REASON_SERVED)
            })
        });
        if served_all || Instant::now() >= deadline {
            break served_all.then(Instant::now);
        }
        tokio::time::sleep(POLL).await;
    };
    settle(env, QUIET, QUIET_MAX).await;
    let t_end = Instant::now();
    let writes = env.writes.window(t0, t_end);
    let record_status_writes = writes
        .iter()
        .filter(|w| w.resource == format!("{RECORD_RESOURCE}/status"))
        .count() as u64;
    let record_writes = writes
        .iter()
        .filter(|w| w.resource.split('/').next() == Some(RECORD_RESOURCE))
        .count() as u64;
    let since = |t: Option<Instant>| t.map(|t| secs(t.saturating_duration_since(t0)));
    Ok(PrimaryRestartResult {
        settle_secs,
        named_ready_secs: since(named_ready),
        served_secs: since(served),
        served_after_ready_secs: match (named_ready, served) {
            (Some(r), Some(s)) => Some(secs(s.saturating_duration_since(r))),
            _ => None,
        },
        pod_ready_secs: since(pod_ready_at),
        all_records_secs: all_records,
        zones_served_secs: since(zones_ready),
        secondary_polls: polls,
        secondary_polls_short: short,
        record_status_writes,
        record_writes,
        operator_writes: writes.len() as u64,
        operator_writes_by_kind: env.writes.by_kind(t0, t_end),
        exec_by_tool: env.log.summary(t0, t_end).by_tool,
        exec_calls: env.log.summary(t0, t_end).calls,
        window_secs: secs(t_end.duration_since(t0)),
        pods: progress,
    })
}
