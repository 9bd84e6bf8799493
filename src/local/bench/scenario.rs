//! One scenario from start to stop: bring up a fresh [`BenchEnv`], wait
//! until the cluster serves every zone (at-once: create the cluster, zones
//! and records together instead), then write the records (through the API
//! for the batched path, one nsupdate run per record for the baseline)
//! while the [`Checker`] and a status watcher time when every record
//! answers and reports Ready; collect exec calls, API writes and memory;
//! for a converged scenario hold the cluster and list what ran; shut
//! everything down.
//!
//! Touches only the scenario's own in-memory API and named processes.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt as _, TryStreamExt as _};
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

use super::alloc::{self, Side};
use super::check::{Checker, Expected, PlannedRecord, PodTarget};
use super::env::{BenchEnv, NAMESPACE, zone_object};
use super::progress::RecordProgress;
use super::report::{HoldResult, RestartResult, ScenarioKind, ScenarioResult};
use super::{BenchError, BenchOptions, CONVERGED_CHECK_PERIOD, MAX_LISTED_UPDATES, rss};
use crate::api::{DNSRecord, DNSRecordSpec, RecordType as ApiRecordType};
use crate::bind::commands::{local_server, nsupdate};
use crate::bind::nsupdate::{RrsetChange, UpdateBatch, build_script};
use crate::bind::{DomainName, Rdata, RecordType, Ttl};
use crate::controller::exec::PodExecutor;
use crate::local::memapi::Verb;

/// DNSRecord creates in flight at once ("all at once", as `kubectl apply`
/// of a big directory would send them, bounded so the client queue stays
/// sane).
const CREATE_CONCURRENCY: usize = 32;
/// The transfer key file the checks use, in the scenario's state dir.
const TRANSFER_KEY_FILE: &str = "transfer.key";
/// TTL of the baseline's records (the zones' default TTL).
const BASELINE_TTL: i64 = 3600;
/// How often the at-once scenario looks for the cluster's pods.
const POD_POLL: Duration = Duration::from_millis(50);
/// A converged cluster's hold starts once the operator has done nothing
/// (no exec, no API write) for this long after everything answered ...
const SETTLE_QUIET: Duration = Duration::from_secs(5);
/// ... or after this long regardless (a busy operator is then caught by
/// the hold itself).
const SETTLE_MAX: Duration = Duration::from_secs(60);
const SETTLE_POLL: Duration = Duration::from_millis(250);
/// The latency scenario starts once the operator has done nothing for
/// this long (zone setup's last writes and checks are over).
const LATENCY_QUIET: Duration = Duration::from_secs(2);
/// A restarted operator counts as quiet again after this long without
/// activity.
const RESTART_QUIET: Duration = Duration::from_secs(3);
/// Lines of "what ran" kept for a converged hold.
const MAX_LISTED_RAN: usize = 50;
/// The DNSRecord resource (its plural in API paths).
const RECORD_RESOURCE: &str = "dnsrecords";

/// Which scenario to run, and where.
#[derive(Debug, Clone)]
pub struct Setup {
    pub kind: ScenarioKind,
    pub records: usize,
    pub zones: usize,
    pub state_dir: PathBuf,
    pub base_port: u16,
}

/// Removes a file when dropped (the key file, whatever way `measure` ends).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

fn kib(bytes: Option<u64>) -> Option<u64> {
    bytes.map(|b| b.div_ceil(1024))
}

/// Runs one scenario on a fresh environment and stops it again.
pub async fn run(opts: &BenchOptions, setup: &Setup) -> Result<ScenarioResult, BenchError> {
    let say = |msg: String| {
        if opts.verbose {
            eprintln!("bench: {msg}");
        }
    };
    say(format!(
        "{} {} records over {} zones: starting the cluster",
        setup.kind.as_str(),
        setup.records,
        setup.zones
    ));
    let started = Instant::now();
    let env = BenchEnv::start(&setup.state_dir, setup.base_port, setup.zones).await?;
    let result = measure(opts, setup, &env, started, &say).await;
    say("stopping".into());
    env.shutdown().await;
    result
}

/// Waits until the runtime has created every pod of the cluster (the
/// at-once scenario checks them while the operator still sets them up).
async fn wait_for_pods(
    env: &BenchEnv,
    replicas: i32,
    deadline: Instant,
) -> Result<Vec<PodTarget>, BenchError> {
    let want = usize::try_from(replicas).unwrap_or_default();
    loop {
        let pods = env.targets();
        if pods.len() >= want {
            return Ok(pods);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: format!("see the cluster's {want} pods created"),
                secs: deadline.saturating_duration_since(Instant::now()).as_secs(),
            });
        }
        tokio::time::sleep(POD_POLL).await;
    }
}

async fn measure(
    opts: &BenchOptions,
    setup: &Setup,
    env: &BenchEnv,
    started: Instant,
    say: &impl Fn(String),
) -> Result<ScenarioResult, BenchError> {
    let at_once = setup.kind == ScenarioKind::AtOnce;
    let pods = if at_once {
        Vec::new()
    } else {
        env.seed_cluster(opts.replicas).await?;
        env.create_zones().await?;
        env.bring_up(opts.replicas, opts.timeout, &|m| {
            say(format!("waiting: {m}"))
        })
        .await?
    };
    let setup_secs = secs(started.elapsed());
    if setup.kind == ScenarioKind::Latency {
        return measure_latency(opts, setup, env, &pods, setup_secs, say).await;
    }
    if at_once {
        say(format!(
            "runtime up in {setup_secs:.1}s; creating the cluster, {} zones and {} records at once",
            setup.zones, setup.records
        ));
    } else {
        say(format!(
            "cluster ready in {setup_secs:.1}s; writing {} records",
            setup.records
        ));
    }
    let expected = Expected::new(env.zones.clone(), setup.records);
    let key_file = setup.state_dir.join(TRANSFER_KEY_FILE);
    env.write_transfer_key(&key_file)?;
    let _remove_key = RemoveOnDrop(key_file.clone());
    let activity = || env.log.finished();
    let peak_reset = rss::reset_peak();
    env.mem.reset_counts();
    alloc::reset_peak(Side::Operator);
    alloc::reset_peak(Side::Other);

    let load_before = rss::load_average();
    let t0 = Instant::now();
    let deadline = t0 + opts.timeout;
    let writer = async {
        match setup.kind {
            // (Latency was measured above and returned.)
            ScenarioKind::Batched
            | ScenarioKind::Converged
            | ScenarioKind::Latency
            | ScenarioKind::PrimaryRestart
            | ScenarioKind::Restart => create_records(env, &expected).await?,
            ScenarioKind::AtOnce => {
                env.seed_cluster(opts.replicas).await?;
                create_all(env, &expected).await?
            }
            ScenarioKind::Baseline => per_record_updates(env, &pods[0], &expected).await?,
            // Never planned here: it runs on its own (`super::consumer`).
            ScenarioKind::CatalogConsumer => {
                return Err(BenchError::Options(
                    "catalog-consumer is not a records scenario".into(),
                ));
            }
        }
        Ok::<_, BenchError>(t0.elapsed())
    };
    let dns = async {
        let pods = if at_once {
            wait_for_pods(env, opts.replicas, deadline).await?
        } else {
            pods.clone()
        };
        let checker = Checker {
            activity: &activity,
            key_file: &key_file,
            expected: &expected,
            pods: pods.clone(),
        };
        Ok((checker.wait(t0, deadline, opts.poll_interval).await, pods))
    };
    let statuses = async {
        Ok(match setup.kind {
            ScenarioKind::Baseline => (None, None),
            _ => watch_statuses(env, setup.records, t0, deadline).await,
        })
    };
    let (applied, (progress, pods), (finalized, ready)) = tokio::try_join!(writer, dns, statuses)?;
    let t_end = Instant::now();
    let load_after = rss::load_average();
    // Live before peak: the peak is a running maximum, so live <= peak.
    let operator_live = kib(alloc::live_bytes(Side::Operator));
    let other_live = kib(alloc::live_bytes(Side::Other));
    let operator_peak = kib(alloc::peak_bytes(Side::Operator));
    let other_peak = kib(alloc::peak_bytes(Side::Other));
    say(format!(
        "done after {:.1}s; sampling {} names per pod",
        t0.elapsed().as_secs_f64(),
        opts.samples
    ));

    let checker = Checker {
        activity: &activity,
        key_file: &key_file,
        expected: &expected,
        pods: pods.clone(),
    };
    let (sampled, sampled_ok) = checker.sample(opts.samples).await;
    let exec = env.log.summary(t0, t_end);
    // BENCH_EXEC_TIMELINE=1: every exec of the window on stderr, for
    // finding which rounds can merge.
    if std::env::var_os("BENCH_EXEC_TIMELINE").is_some() {
        let mut calls = env.log.window(t0, t_end);
        calls.sort_by_key(|c| c.started);
        for c in calls {
            eprintln!(
                "exec {:>8.3}s {:>7.3}s {:<12} {:<10} {}{}",
                c.started.duration_since(t0).as_secs_f64(),
                c.took.as_secs_f64(),
                c.pod,
                c.tool,
                c.verb,
                if c.ok { "" } else { " FAILED" }
            );
        }
    }
    let mut updates: Vec<_> = env
        .log
        .window(t0, t_end)
        .into_iter()
        // An nsupdate exec (the baseline) or the operator's own UPDATE
        // over DNS (the batched path).
        .filter(|c| c.tool == "nsupdate" || c.tool == "dns-update")
        .collect();
    updates.sort_by_key(|c| c.started);
    let first_update = updates.iter().map(|c| c.started).min();
    let last_update = updates.iter().map(|c| c.started + c.took).max();
    let primary = progress
        .iter()
        .find(|p| p.role == "primary")
        .and_then(|p| p.all_secs);
    let secondaries: Vec<Option<f64>> = progress
        .iter()
        .filter(|p| p.role == "secondary")
        .map(|p| p.all_secs)
        .collect();
    let secondary = secondaries
        .iter()
        .copied()
        .collect::<Option<Vec<f64>>>()
        .and_then(|v| v.into_iter().reduce(f64::max));
    let by_verb: BTreeMap<String, u64> = [
        (Verb::Create, "create"),
        (Verb::Update, "update"),
        (Verb::Patch, "patch"),
        (Verb::Delete, "delete"),
    ]
    .into_iter()
    .map(|(v, name)| (name.to_string(), env.mem.count_verb(v)))
    .filter(|(_, n)| *n > 0)
    .collect();
    let operator_writes = env.writes.window(t0, t_end);
    let mut result = ScenarioResult {
        kind: setup.kind,
        records: setup.records,
        zones: setup.zones,
        replicas: opts.replicas,
        setup_secs,
        applied_secs: secs(applied),
        primary_secs: primary,
        secondary_secs: secondary,
        finalized_secs: finalized.map(secs),
        records_ready_secs: ready.map(secs),
        first_update_secs: first_update.map(|t| secs(t.saturating_duration_since(t0))),
        last_update_secs: last_update.map(|t| secs(t.saturating_duration_since(t0))),
        update_runs: updates
            .iter()
            .take(MAX_LISTED_UPDATES)
            .map(|c| (secs(c.started.saturating_duration_since(t0)), secs(c.took)))
            .collect(),
        pods: progress,
        exec,
        api_writes: env.mem.writes(),
        api_writes_by_verb: by_verb,
        records_created: match setup.kind {
            ScenarioKind::Baseline => 0,
            _ => setup.records as u64,
        },
        operator_writes: operator_writes.len() as u64,
        operator_record_writes: operator_writes
            .iter()
            .filter(|w| w.resource.split('/').next() == Some(RECORD_RESOURCE))
            .count() as u64,
        operator_writes_by_kind: env.writes.by_kind(t0, t_end),
        operator_heap_peak_kib: operator_peak,
        operator_heap_live_kib: operator_live,
        other_heap_peak_kib: other_peak,
        other_heap_live_kib: other_live,
        hold: None,
        latency: None,
        primary_restart: None,
        restart: None,
        sampled,
        sampled_ok,
        process_peak_rss_kib: rss::peak_kib(),
        process_peak_reset: peak_reset,
        named_peak_rss_kib: env.named_peaks(&pods),
        load_average: [load_before, load_after],
    };
    if setup.kind == ScenarioKind::Converged {
        if result.complete() {
            result.hold = Some(hold(opts, env, &pods, say).await);
        } else {
            say("not converged: the hold is skipped".into());
        }
    }
    if setup.kind == ScenarioKind::PrimaryRestart {
        if result.complete() {
            result.primary_restart = Some(
                super::primary_restart::run(opts, env, &pods, &expected, &key_file, say).await?,
            );
        } else {
            say("not converged: the restart is skipped".into());
        }
    }
    if setup.kind == ScenarioKind::Restart {
        if result.complete() {
            result.restart = Some(restart(opts, env, setup, say).await);
        } else {
            say("not converged: the restart is skipped".into());
        }
    }
    Ok(result)
}

/// Waits until the operator has been quiet (no exec or DNS exchange, no
/// API write) for `quiet`, at most until `deadline`. Returns when its last
/// activity was, if it went quiet.
async fn until_quiet(env: &BenchEnv, quiet: Duration, deadline: Instant) -> Option<Instant> {
    let mut seen = (env.log.finished(), env.writes.count());
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < quiet {
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(SETTLE_POLL).await;
        let now = (env.log.finished(), env.writes.count());
        if now != seen {
            seen = now;
            quiet_since = Instant::now();
        }
    }
    Some(quiet_since)
}

/// Lets the converged cluster settle, restarts the controllers against
/// the same API and pods, and counts what they do until quiet again.
async fn restart(
    opts: &BenchOptions,
    env: &BenchEnv,
    setup: &Setup,
    say: &impl Fn(String),
) -> RestartResult {
    let _ = until_quiet(env, SETTLE_QUIET, Instant::now() + SETTLE_MAX).await;
    say("converged; restarting the controllers".into());
    let t0 = Instant::now();
    env.restart_controllers().await;
    // Quiet counts only once the new controllers made their first move.
    let first = Instant::now() + opts.timeout;
    while env.log.window(t0, Instant::now()).is_empty() && Instant::now() < first {
        tokio::time::sleep(SETTLE_POLL).await;
    }
    let last = until_quiet(env, RESTART_QUIET, t0 + opts.timeout).await;
    let t1 = Instant::now();
    let calls = env.log.window(t0, t1);
    let summary = env.log.summary(t0, t1);
    let count = |tools: &[&str]| calls.iter().filter(|c| tools.contains(&c.tool)).count() as u64;
    RestartResult {
        quiet_secs: last.map(|l| secs(l.saturating_duration_since(t0))),
        dns_writes: count(&["dns-update", "nsupdate"]),
        transfers: count(&["dns-axfr", "dns-ixfr"])
            + calls.iter().filter(|c| c.verb == "dig_axfr").count() as u64,
        exec_calls: count(&["sh", "rndc", "named-checkconf", "dig", "nsupdate"]),
        exec_by_tool: summary.by_tool,
        operator_writes: env.writes.window(t0, t1).len() as u64,
        objects: (setup.records + setup.zones) as u64,
    }
}

/// Waits until the operator has been quiet (no exec, no API write) for
/// [`SETTLE_QUIET`] (at most [`SETTLE_MAX`]), then holds the converged
/// cluster for `opts.converged_hold` and reports what ran in the hold.
async fn hold(
    opts: &BenchOptions,
    env: &BenchEnv,
    pods: &[PodTarget],
    say: &impl Fn(String),
) -> HoldResult {
    let settle_start = Instant::now();
    wait_quiet(env, SETTLE_QUIET).await;
    let settle_secs = secs(settle_start.elapsed());
    say(format!(
        "converged; holding for {}s",
        opts.converged_hold.as_secs()
    ));
    let h0 = Instant::now();
    tokio::time::sleep(opts.converged_hold).await;
    let h1 = Instant::now();
    let execs = env.log.window(h0, h1);
    let writes = env.writes.window(h0, h1);
    // One periodic check per pod per started period.
    let dig_allowance = (opts.converged_hold.as_secs_f64() / CONVERGED_CHECK_PERIOD.as_secs_f64())
        .ceil()
        .max(1.0) as u64;
    let mut digs: BTreeMap<&str, u64> = pods.iter().map(|p| (p.pod.name.as_str(), 0)).collect();
    let mut beyond = 0;
    for c in &execs {
        // The periodic check's serial reads (over DNS since issue 30).
        if c.tool == "dig" || c.tool == "dns-soa" {
            *digs.entry(c.pod.as_str()).or_default() += 1;
        } else {
            beyond += 1;
        }
    }
    beyond += digs
        .values()
        .map(|&n| n.saturating_sub(dig_allowance))
        .sum::<u64>();
    let since = |t: Instant| t.saturating_duration_since(h0).as_secs_f64();
    let mut ran: Vec<(f64, String)> = execs
        .iter()
        .map(|c| (since(c.started), format!("exec {} on {}", c.tool, c.pod)))
        .chain(
            writes
                .iter()
                .map(|w| (since(w.at), format!("{} {}", w.kind(), w.name))),
        )
        .collect();
    ran.sort_by(|a, b| a.0.total_cmp(&b.0));
    HoldResult {
        settle_secs,
        hold_secs: secs(h1.saturating_duration_since(h0)),
        exec_calls: execs.len() as u64,
        exec_by_tool: env.log.summary(h0, h1).by_tool,
        dig_allowance_per_pod: dig_allowance,
        exec_beyond_check: beyond,
        operator_writes: writes.len() as u64,
        ran: ran
            .into_iter()
            .take(MAX_LISTED_RAN)
            .map(|(t, what)| format!("{t:.1}s {what}"))
            .collect(),
    }
}

/// Waits until the operator has done nothing (no exec, no API write) for
/// `quiet`, at most [`SETTLE_MAX`].
async fn wait_quiet(env: &BenchEnv, quiet: Duration) {
    let settle_start = Instant::now();
    let mut seen = (env.log.finished(), env.writes.count());
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < quiet && settle_start.elapsed() < SETTLE_MAX {
        tokio::time::sleep(SETTLE_POLL).await;
        let now = (env.log.finished(), env.writes.count());
        if now != seen {
            seen = now;
            quiet_since = Instant::now();
        }
    }
}

/// The latency scenario on a ready cluster: once the operator is quiet,
/// one change at a time ([`super::latency`]).
async fn measure_latency(
    opts: &BenchOptions,
    setup: &Setup,
    env: &BenchEnv,
    pods: &[PodTarget],
    setup_secs: f64,
    say: &impl Fn(String),
) -> Result<ScenarioResult, BenchError> {
    say(format!(
        "cluster ready in {setup_secs:.1}s; waiting for the operator to go quiet"
    ));
    wait_quiet(env, LATENCY_QUIET).await;
    // Primary first, as the report lists them.
    let mut pods = pods.to_vec();
    pods.sort_by_key(|p| !BenchEnv::is_primary(p));
    say(format!(
        "creating {} DNSRecords one at a time, then deleting them",
        setup.records
    ));
    let peak_reset = rss::reset_peak();
    env.mem.reset_counts();
    alloc::reset_peak(Side::Operator);
    alloc::reset_peak(Side::Other);
    let load_before = rss::load_average();
    let t0 = Instant::now();
    let latency = super::latency::run(env, &pods, &env.zones, setup.records).await?;
    let t_end = Instant::now();
    let operator_writes = env.writes.window(t0, t_end);
    Ok(ScenarioResult {
        kind: setup.kind,
        records: setup.records,
        zones: setup.zones,
        replicas: opts.replicas,
        setup_secs,
        applied_secs: secs(t_end - t0),
        primary_secs: None,
        secondary_secs: None,
        finalized_secs: None,
        records_ready_secs: None,
        first_update_secs: None,
        last_update_secs: None,
        update_runs: Vec::new(),
        pods: Vec::new(),
        exec: env.log.summary(t0, t_end),
        api_writes: env.mem.writes(),
        api_writes_by_verb: BTreeMap::new(),
        records_created: 0,
        operator_writes: operator_writes.len() as u64,
        operator_record_writes: operator_writes
            .iter()
            .filter(|w| w.resource.split('/').next() == Some(RECORD_RESOURCE))
            .count() as u64,
        operator_writes_by_kind: env.writes.by_kind(t0, t_end),
        operator_heap_peak_kib: kib(alloc::peak_bytes(Side::Operator)),
        operator_heap_live_kib: kib(alloc::live_bytes(Side::Operator)),
        other_heap_peak_kib: kib(alloc::peak_bytes(Side::Other)),
        other_heap_live_kib: kib(alloc::live_bytes(Side::Other)),
        hold: None,
        latency: Some(latency),
        primary_restart: None,
        restart: None,
        sampled: 0,
        sampled_ok: 0,
        process_peak_rss_kib: rss::peak_kib(),
        process_peak_reset: peak_reset,
        named_peak_rss_kib: env.named_peaks(&pods),
        load_average: [load_before, rss::load_average()],
    })
}

/// The DNSRecord of a planned record.
fn record_object(r: &PlannedRecord) -> DNSRecord {
    DNSRecord::new(
        &r.object,
        DNSRecordSpec {
            zone_ref: zone_object(r.zone),
            zone_namespace: None,
            name: r.owner.clone(),
            type_: ApiRecordType::A,
            ttl: None,
            values: vec![r.ip.to_string()],
        },
    )
}

/// The batched path: every DNSRecord created through the API at once.
async fn create_records(env: &BenchEnv, expected: &Expected) -> Result<(), BenchError> {
    futures::stream::iter(&expected.records)
        .map(|r| env.create(record_object(r)))
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The at-once path: every BindZone and every DNSRecord in one stream of
/// creates (zones first, as a directory applies in order, but without
/// waiting for any of them).
async fn create_all(env: &BenchEnv, expected: &Expected) -> Result<(), BenchError> {
    let zones = env
        .zone_objects()
        .into_iter()
        .map(|z| env.create(z).boxed());
    let records = expected
        .records
        .iter()
        .map(|r| env.create(record_object(r)).boxed());
    futures::stream::iter(zones.chain(records))
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The naive design: one nsupdate run per record, one after another,
/// through the same executor the controllers use, each script built by the
/// BIND layer for a batch of one change signed with the zone's update key.
async fn per_record_updates(
    env: &BenchEnv,
    primary: &PodTarget,
    expected: &Expected,
) -> Result<(), BenchError> {
    let layout = env.exec.layout(&primary.pod);
    let ttl = Ttl::new(BASELINE_TTL).expect("a valid TTL");
    let failed = |reason: String| BenchError::Exec {
        what: "the per-record baseline".into(),
        reason,
    };
    for r in &expected.records {
        let zone = &expected.zones[r.zone];
        let name = DomainName::resolve(&r.owner, zone).map_err(|e| failed(e.to_string()))?;
        let batch = UpdateBatch {
            zone: zone.clone(),
            changes: vec![RrsetChange::Replace {
                name,
                rtype: RecordType::A,
                ttl,
                values: vec![Rdata::A(r.ip)],
            }],
            apex_ns: None,
        };
        let script = build_script(&batch, local_server(&layout), &env.update_key)
            .map_err(|e| failed(e.to_string()))?
            .ok_or_else(|| failed("an empty batch".into()))?;
        env.exec
            .exec(&primary.pod, &nsupdate(&layout, &script))
            .await
            .map_err(|e| failed(e.to_string()))?;
    }
    Ok(())
}

/// When every DNSRecord first carried the finalizer, and when every one
/// first reported Ready (since t0), from a watch on DNSRecords (as any
/// client would see it; a watch costs per change, not per look).
async fn watch_statuses(
    env: &BenchEnv,
    n: usize,
    t0: Instant,
    deadline: Instant,
) -> (Option<Duration>, Option<Duration>) {
    // Only names, finalizers and phases are read (see `super::progress`).
    let api: Api<RecordProgress> = Api::namespaced(env.client.clone(), NAMESPACE);
    let mut finalized: HashSet<String> = HashSet::new();
    let mut ready: HashSet<String> = HashSet::new();
    let mut finalized_at = None;
    let work = async {
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) => {
                    let name = r.name().to_string();
                    if r.finalized() {
                        finalized.insert(name.clone());
                    } else {
                        finalized.remove(&name);
                    }
                    if r.ready() {
                        ready.insert(name);
                    } else {
                        ready.remove(&name);
                    }
                }
                Ok(watcher::Event::Delete(r)) => {
                    finalized.remove(r.name());
                    ready.remove(r.name());
                }
                _ => {}
            }
            if finalized_at.is_none() && finalized.len() == n {
                finalized_at = Some(t0.elapsed());
            }
            if ready.len() == n {
                return Some(t0.elapsed());
            }
        }
        None
    };
    let ready_at = tokio::time::timeout_at(deadline.into(), work)
        .await
        .ok()
        .flatten();
    (finalized_at, ready_at)
}
