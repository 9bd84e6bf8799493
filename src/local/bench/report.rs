//! What the bench measured and how it is shown: one [`ScenarioResult`] per
//! scenario, the batched-vs-baseline comparison, one [`Verdict`] per target
//! of issue 12 that the run measured (PASS/FAIL with the measured value),
//! a text table ([`BenchReport::table`]) and JSON ([`BenchReport::json`]).
//!
//! Pure formatting; no I/O.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::check::PodProgress;
use super::exec_log::ExecSummary;
use super::latency::LatencyResult;
use super::{
    BenchOptions, GOAL_AT_ONCE, TARGET_AT_ONCE, TARGET_AT_ONCE_EXECS, TARGET_BIG,
    TARGET_BIG_RECORDS, TARGET_BYTES_PER_RECORD, TARGET_LATENCY_P50_MS, TARGET_LATENCY_P99_MS,
    TARGET_PER_RECORD_GROWTH, TARGET_RESTART_QUIET, TARGET_RESTART_SERVED, TARGET_SECONDARY,
    TARGET_SECONDARY_RECORDS, TARGET_SPEAK_1K, TARGET_SPEAK_10K, TARGET_SPEAK_AT_ONCE_EXECS,
    TARGET_SPEAK_BIG, TARGET_SPEEDUP, TARGET_WRITES_PER_RECORD,
};

/// Which write path a scenario measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioKind {
    /// DNSRecords through the API into a ready cluster, written by the
    /// controllers.
    Batched,
    /// One nsupdate run per record, sequentially.
    Baseline,
    /// Cluster, zones and records created in one go (a GitOps first apply).
    AtOnce,
    /// Batched, then the converged cluster held and watched.
    Converged,
    /// One DNSRecord at a time into a converged cluster, then deleted one
    /// at a time: time to answer per change ([`super::latency`]).
    Latency,
    /// Batched, then the converged cluster's primary Pod deleted (see
    /// [`super::primary_restart`]).
    PrimaryRestart,
    /// Batched, then the controllers stopped and started again against
    /// the same API and pods (an operator restart).
    Restart,
    /// A second cluster consuming the first one's catalog (not in
    /// [`ScenarioKind::ALL`]: asked for by name).
    CatalogConsumer,
}

impl ScenarioKind {
    pub const ALL: [ScenarioKind; 7] = [
        ScenarioKind::Batched,
        ScenarioKind::Baseline,
        ScenarioKind::AtOnce,
        ScenarioKind::Converged,
        ScenarioKind::Latency,
        ScenarioKind::PrimaryRestart,
        ScenarioKind::Restart,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioKind::Batched => "batched",
            ScenarioKind::Baseline => "baseline",
            ScenarioKind::AtOnce => "at-once",
            ScenarioKind::Converged => "converged",
            ScenarioKind::Latency => "latency",
            ScenarioKind::PrimaryRestart => "primary-restart",
            ScenarioKind::Restart => "restart",
            ScenarioKind::CatalogConsumer => "catalog-consumer",
        }
    }
}

impl std::fmt::Display for ScenarioKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ScenarioKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ScenarioKind::ALL
            .into_iter()
            .chain([ScenarioKind::CatalogConsumer])
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown scenario {s:?} (batched, baseline, at-once, converged, latency, \
                     primary-restart, restart or catalog-consumer)"
                )
            })
    }
}

/// What ran while a converged cluster was held.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HoldResult {
    /// From "everything answers and is Ready" until the operator had been
    /// quiet for a moment (the hold starts then).
    pub settle_secs: f64,
    pub hold_secs: f64,
    pub exec_calls: u64,
    pub exec_by_tool: BTreeMap<String, u64>,
    /// Digs per pod the periodic check may run in the hold.
    pub dig_allowance_per_pod: u64,
    /// Exec calls beyond that allowance (any other tool counts whole).
    pub exec_beyond_check: u64,
    pub operator_writes: u64,
    /// What ran, seconds into the hold (the first 50).
    pub ran: Vec<String>,
}

/// What a primary Pod's deletion cost a converged cluster. Times are
/// seconds since the delete.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PrimaryRestartResult {
    /// From "everything answers and is Ready" until the operator had been
    /// quiet for a moment (the delete came then).
    pub settle_secs: f64,
    /// The new primary's named answered its probes (containers Ready).
    pub named_ready_secs: Option<f64>,
    /// The new primary answered the SOA of every zone.
    pub served_secs: Option<f64>,
    /// ... that long after its named was Ready.
    pub served_after_ready_secs: Option<f64>,
    /// The new primary Pod turned Ready (its readiness gate open).
    pub pod_ready_secs: Option<f64>,
    /// Every record answered on every pod again (AXFR of every zone).
    pub all_records_secs: Option<f64>,
    /// Every BindZone said Ready/Served again.
    pub zones_served_secs: Option<f64>,
    /// SOA checks of every zone on the secondaries until the new primary
    /// served every zone, and how many of them lacked a zone.
    pub secondary_polls: u64,
    pub secondary_polls_short: u64,
    /// Operator writes to DNSRecord status, and to DNSRecords at all, from
    /// the delete until the operator was quiet again.
    pub record_status_writes: u64,
    pub record_writes: u64,
    pub operator_writes: u64,
    pub operator_writes_by_kind: BTreeMap<String, u64>,
    pub exec_calls: u64,
    pub exec_by_tool: BTreeMap<String, u64>,
    /// From the delete until the operator was quiet again.
    pub window_secs: f64,
    /// Per pod, when every record answered again.
    pub pods: Vec<PodProgress>,
}

/// What a restart of the controllers cost (counted from the restart until
/// the operator was quiet again).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RestartResult {
    /// From the restart to the operator's last DNS exchange, exec or API
    /// write before it went quiet; `None`: never quiet within the timeout.
    pub quiet_secs: Option<f64>,
    /// DNS UPDATE exchanges (and nsupdate execs): writes to the zones.
    pub dns_writes: u64,
    /// Zone transfers the operator made.
    pub transfers: u64,
    pub exec_calls: u64,
    pub exec_by_tool: BTreeMap<String, u64>,
    pub operator_writes: u64,
    /// BindZones and DNSRecords the API holds.
    pub objects: u64,
}

/// One scenario's numbers. Times are seconds since the first write (t0).
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub kind: ScenarioKind,
    pub records: usize,
    pub zones: usize,
    pub replicas: i32,
    /// Cluster, keys and zones from nothing to Ready on every pod.
    pub setup_secs: f64,
    /// Batched: every DNSRecord create returned. Baseline: every nsupdate
    /// run returned.
    pub applied_secs: f64,
    /// Every record answered on the primary.
    pub primary_secs: Option<f64>,
    /// Every record answered on every secondary (the slowest one).
    pub secondary_secs: Option<f64>,
    /// Batched: every DNSRecord carried the operator's finalizer.
    pub finalized_secs: Option<f64>,
    /// Batched: every DNSRecord reported Ready.
    pub records_ready_secs: Option<f64>,
    /// First and last nsupdate exec (start / end) after t0.
    pub first_update_secs: Option<f64>,
    pub last_update_secs: Option<f64>,
    /// The nsupdate execs after t0 as (start, duration) in seconds, the
    /// first [`super::MAX_LISTED_UPDATES`] of them: the zone flushes.
    pub update_runs: Vec<(f64, f64)>,
    pub pods: Vec<PodProgress>,
    /// Exec calls from t0 until everything above was reached.
    pub exec: ExecSummary,
    /// API writes (create, update, patch, delete) in the same window, by
    /// everyone (the bench's creates, the runtime, the operator).
    pub api_writes: u64,
    pub api_writes_by_verb: BTreeMap<String, u64>,
    /// DNSRecords the bench created.
    pub records_created: u64,
    /// API writes the operator sent in the window, all kinds.
    pub operator_writes: u64,
    /// ... of them to DNSRecords (finalizer, status).
    pub operator_record_writes: u64,
    /// ... by "verb resource".
    pub operator_writes_by_kind: BTreeMap<String, u64>,
    /// The operator's heap (controllers' runtime): peak in the window and
    /// live at its end, KiB; None when the tagging allocator is not
    /// installed.
    pub operator_heap_peak_kib: Option<u64>,
    pub operator_heap_live_kib: Option<u64>,
    /// The rest of the process (in-memory API, runtime, bench), same.
    pub other_heap_peak_kib: Option<u64>,
    pub other_heap_live_kib: Option<u64>,
    /// Converged: what ran in the hold.
    pub hold: Option<HoldResult>,
    /// Latency: time to answer per change.
    pub latency: Option<LatencyResult>,
    /// Primary-restart: what the primary's deletion cost.
    pub primary_restart: Option<PrimaryRestartResult>,
    /// Restart: what the restart cost.
    pub restart: Option<RestartResult>,
    /// Direct queries for random records after the run, over all pods.
    pub sampled: usize,
    pub sampled_ok: usize,
    /// Peak RSS of this process (operator + in-memory API + bench) during
    /// the scenario, KiB.
    pub process_peak_rss_kib: Option<u64>,
    /// Whether the peak could be reset at the scenario's start (otherwise
    /// it is the peak since process start).
    pub process_peak_reset: bool,
    /// Peak RSS of each pod's named, KiB.
    pub named_peak_rss_kib: BTreeMap<String, Option<u64>>,
    /// The machine's 1-minute load average at t0 and at the end (other
    /// work on the machine skews every time above).
    pub load_average: [Option<f64>; 2],
}

impl ScenarioResult {
    /// Whether every record answered everywhere and every sample answered.
    pub fn complete(&self) -> bool {
        if self.kind == ScenarioKind::Latency {
            return self.latency.as_ref().is_some_and(LatencyResult::complete);
        }
        self.primary_secs.is_some()
            && self.secondary_secs.is_some()
            && self.sampled_ok == self.sampled
            && (self.kind == ScenarioKind::Baseline || self.records_ready_secs.is_some())
    }

    /// Operator writes to DNSRecords per DNSRecord created.
    pub fn record_writes_per_record(&self) -> Option<f64> {
        (self.records_created > 0)
            .then(|| self.operator_record_writes as f64 / self.records_created as f64)
    }

    /// All operator writes per DNSRecord created.
    pub fn writes_per_record(&self) -> Option<f64> {
        (self.records_created > 0)
            .then(|| self.operator_writes as f64 / self.records_created as f64)
    }

    /// Secondary time per record, microseconds.
    fn micros_per_record(&self) -> Option<f64> {
        self.secondary_secs
            .filter(|_| self.records > 0)
            .map(|t| t * 1e6 / self.records as f64)
    }

    fn label(&self) -> String {
        match self.kind {
            ScenarioKind::AtOnce => format!(
                "at-once {} zones x {} records",
                thousands(self.zones as u64),
                thousands((self.records / self.zones.max(1)) as u64)
            ),
            ScenarioKind::PrimaryRestart => format!(
                "primary-restart {} zones x {} records",
                thousands(self.zones as u64),
                thousands((self.records / self.zones.max(1)) as u64)
            ),
            k => format!("{k} {}", thousands(self.records as u64)),
        }
    }
}

/// One target and what this run measured for it.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub target: String,
    pub measured: String,
    /// None: not measured in this run.
    pub pass: Option<bool>,
}

fn verdict_word(pass: Option<bool>) -> &'static str {
    match pass {
        Some(true) => "PASS",
        Some(false) => "FAIL",
        None => "n/a",
    }
}

/// "12.34 s" or "not reached within the timeout".
fn reached(v: Option<f64>) -> String {
    v.map_or("not reached within the timeout".into(), |s| {
        format!("{s:.2} s")
    })
}

/// Every issue-12 target this run measured, in the order.
fn verdicts(scenarios: &[ScenarioResult], comparison: Option<&Comparison>) -> Vec<Verdict> {
    let mut out = Vec::new();
    let mut push = |target: String, measured: String, pass: Option<bool>| {
        out.push(Verdict {
            target,
            measured,
            pass,
        })
    };
    for s in scenarios.iter().filter(|s| s.kind == ScenarioKind::AtOnce) {
        let t = s.secondary_secs;
        push(
            format!(
                "{}: every zone and record on every secondary <= {:.0} s",
                s.label(),
                TARGET_AT_ONCE.as_secs_f64()
            ),
            reached(t),
            Some(t.is_some_and(|t| t <= TARGET_AT_ONCE.as_secs_f64())),
        );
        push(
            format!("{}: goal <= {:.0} s", s.label(), GOAL_AT_ONCE.as_secs_f64()),
            reached(t),
            Some(t.is_some_and(|t| t <= GOAL_AT_ONCE.as_secs_f64())),
        );
        push(
            format!("{}: exec calls <= {TARGET_AT_ONCE_EXECS}", s.label()),
            format!(
                "{}{}",
                thousands(s.exec.calls),
                if s.complete() {
                    ""
                } else {
                    " (incomplete run)"
                }
            ),
            Some(s.complete() && s.exec.calls <= TARGET_AT_ONCE_EXECS),
        );
        // Issue 30 counts pods/exec (each a kubelet hop on a real
        // cluster); the operator's own DNS exchanges are named beside it.
        let execs = s.exec.pod_execs();
        push(
            format!(
                "{}: pods/exec calls <= {TARGET_SPEAK_AT_ONCE_EXECS} (issue 30)",
                s.label()
            ),
            format!(
                "{} (and {} DNS exchanges from the operator)",
                thousands(execs),
                thousands(s.exec.calls - execs)
            ),
            Some(s.complete() && execs <= TARGET_SPEAK_AT_ONCE_EXECS),
        );
    }
    let batched = |n| {
        scenarios
            .iter()
            .find(|s| s.kind == ScenarioKind::Batched && s.records == n)
    };
    if let Some(s) = batched(TARGET_SECONDARY_RECORDS) {
        push(
            format!(
                "{}: every record on every secondary <= {:.0} s (issue 7)",
                s.label(),
                TARGET_SECONDARY.as_secs_f64()
            ),
            reached(s.secondary_secs),
            Some(
                s.secondary_secs
                    .is_some_and(|t| t <= TARGET_SECONDARY.as_secs_f64()),
            ),
        );
    }
    if let Some(s) = batched(TARGET_BIG_RECORDS) {
        push(
            format!(
                "{}: every record on every secondary <= {:.0} s",
                s.label(),
                TARGET_BIG.as_secs_f64()
            ),
            reached(s.secondary_secs),
            Some(
                s.secondary_secs
                    .is_some_and(|t| t <= TARGET_BIG.as_secs_f64()),
            ),
        );
    }
    for (n, limit) in [
        (1_000, TARGET_SPEAK_1K),
        (TARGET_SECONDARY_RECORDS, TARGET_SPEAK_10K),
        (TARGET_BIG_RECORDS, TARGET_SPEAK_BIG),
    ] {
        if let Some(s) = batched(n) {
            push(
                format!(
                    "{}: every record on every secondary <= {} s (issue 30)",
                    s.label(),
                    limit.as_secs_f64()
                ),
                reached(s.secondary_secs),
                Some(s.secondary_secs.is_some_and(|t| t <= limit.as_secs_f64())),
            );
        }
    }
    if let (Some(small), Some(big)) = (
        batched(TARGET_SECONDARY_RECORDS),
        batched(TARGET_BIG_RECORDS),
    ) {
        let (a, b) = (small.micros_per_record(), big.micros_per_record());
        let growth = ratio(b, a);
        push(
            format!(
                "time per record at {} <= {TARGET_PER_RECORD_GROWTH}x that at {}",
                thousands(TARGET_BIG_RECORDS as u64),
                thousands(TARGET_SECONDARY_RECORDS as u64)
            ),
            match (a, b, growth) {
                (Some(a), Some(b), Some(g)) => format!("{b:.0} us vs {a:.0} us: {g:.2}x"),
                _ => "a run did not finish".into(),
            },
            Some(growth.is_some_and(|g| g <= TARGET_PER_RECORD_GROWTH)),
        );
    }
    if let Some(c) = comparison {
        push(
            format!(
                "batched {} records >= {TARGET_SPEEDUP:.0}x faster than the per-record baseline",
                thousands(c.records as u64)
            ),
            match (
                c.batched_secondary_secs,
                c.baseline_secondary_secs,
                c.speedup,
            ) {
                (Some(a), Some(b), Some(x)) => format!("{a:.2} s vs {b:.2} s: {x:.1}x"),
                _ => "a run did not finish".into(),
            },
            Some(c.meets_target == Some(true)),
        );
    }
    for s in scenarios.iter().filter(|s| s.records_created > 0) {
        push(
            format!(
                "{}: operator API writes per created DNSRecord <= {TARGET_WRITES_PER_RECORD:.1}",
                s.label()
            ),
            format!(
                "{:.2} ({} writes to DNSRecords; all operator writes {}, {:.2} per record)",
                s.record_writes_per_record().unwrap_or(0.0),
                thousands(s.operator_record_writes),
                thousands(s.operator_writes),
                s.writes_per_record().unwrap_or(0.0),
            ),
            Some(
                s.complete()
                    && s.record_writes_per_record()
                        .is_some_and(|w| w <= TARGET_WRITES_PER_RECORD),
            ),
        );
    }
    if let Some(s) = batched(TARGET_BIG_RECORDS) {
        let target = format!(
            "{}: operator memory <= {} KiB per record",
            s.label(),
            TARGET_BYTES_PER_RECORD / 1024
        );
        match s.operator_heap_peak_kib {
            Some(peak) => {
                let per = peak as f64 * 1024.0 / s.records as f64;
                push(
                    target,
                    format!(
                        "{:.2} KiB per record (operator heap peak {}; in-memory API and \
                         bench {})",
                        per / 1024.0,
                        mib(peak),
                        s.other_heap_peak_kib.map_or("-".into(), mib)
                    ),
                    Some(per <= TARGET_BYTES_PER_RECORD as f64),
                )
            }
            None => push(
                target,
                "not measured (build with --features bench-alloc)".into(),
                None,
            ),
        }
    }
    for s in scenarios.iter().filter(|s| s.kind == ScenarioKind::Latency) {
        let Some(l) = &s.latency else { continue };
        for phase in &l.phases {
            for p in phase.pods.iter().filter(|p| p.role == "secondary") {
                let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} ms"));
                push(
                    format!(
                        "latency, {} of {} one at a time, secondary {}: p50 <= \
                         {TARGET_LATENCY_P50_MS:.0} ms, p99 <= {TARGET_LATENCY_P99_MS:.0} ms",
                        phase.phase, l.changes, p.pod
                    ),
                    format!(
                        "p50 {}, p99 {}{}",
                        ms(p.p50_ms),
                        ms(p.p99_ms),
                        if p.missed > 0 {
                            format!(" ({} not answered)", p.missed)
                        } else {
                            String::new()
                        }
                    ),
                    Some(
                        p.p50_ms.is_some_and(|v| v <= TARGET_LATENCY_P50_MS)
                            && p.p99_ms.is_some_and(|v| v <= TARGET_LATENCY_P99_MS),
                    ),
                );
            }
        }
        let r = &l.ready;
        push(
            format!(
                "latency, create of {}: Ready only once every pod answers (each pod asked once \
                 when Ready is seen) = 0 early",
                l.changes
            ),
            format!(
                "{} early, {} never Ready; Ready p50 {}",
                r.early,
                r.missed,
                r.p50_ms.map_or("-".into(), |v| format!("{v:.1} ms"))
            ),
            Some(r.early == 0 && r.missed == 0),
        );
    }
    for s in scenarios
        .iter()
        .filter(|s| s.kind == ScenarioKind::Converged)
    {
        let Some(h) = &s.hold else {
            push(
                format!("{}: converged hold", s.label()),
                "not converged, no hold".into(),
                Some(false),
            );
            continue;
        };
        push(
            format!(
                "converged {:.0} s: exec calls beyond the periodic check (<= 1 dig per pod per \
                 minute) = 0",
                h.hold_secs
            ),
            format!(
                "{} ({} exec calls: {})",
                h.exec_beyond_check,
                h.exec_calls,
                by_tool(&h.exec_by_tool)
            ),
            Some(h.exec_beyond_check == 0),
        );
        push(
            format!("converged {:.0} s: operator API writes = 0", h.hold_secs),
            thousands(h.operator_writes),
            Some(h.operator_writes == 0),
        );
    }
    for s in scenarios
        .iter()
        .filter(|s| s.kind == ScenarioKind::PrimaryRestart)
    {
        let Some(r) = &s.primary_restart else {
            push(
                format!("{}: primary restart", s.label()),
                "not converged before the restart".into(),
                Some(false),
            );
            continue;
        };
        push(
            format!(
                "{}: every zone on the new primary <= {:.0} s after its named is Ready",
                s.label(),
                TARGET_RESTART_SERVED.as_secs_f64()
            ),
            match (r.served_after_ready_secs, r.served_secs) {
                (Some(after), Some(total)) => {
                    format!("{after:.2} s ({total:.2} s after the delete)")
                }
                _ => "not reached within the timeout".into(),
            },
            Some(
                r.served_after_ready_secs
                    .is_some_and(|t| t <= TARGET_RESTART_SERVED.as_secs_f64()),
            ),
        );
        push(
            format!("{}: DNSRecord status writes = 0", s.label()),
            format!(
                "{} ({} operator writes: {})",
                thousands(r.record_status_writes),
                thousands(r.operator_writes),
                by_tool(&r.operator_writes_by_kind)
            ),
            Some(r.record_status_writes == 0),
        );
        push(
            format!(
                "{}: the secondaries answer every zone throughout",
                s.label()
            ),
            format!(
                "{} of {} checks lacked a zone",
                r.secondary_polls_short, r.secondary_polls
            ),
            Some(r.secondary_polls > 0 && r.secondary_polls_short == 0),
        );
    }
    for s in scenarios.iter().filter(|s| s.kind == ScenarioKind::Restart) {
        let Some(r) = &s.restart else {
            push(
                format!("{}: restart", s.label()),
                "not converged, no restart".into(),
                Some(false),
            );
            continue;
        };
        push(
            format!(
                "{}: quiet again <= {} s after the restart",
                s.label(),
                TARGET_RESTART_QUIET.as_secs()
            ),
            reached(r.quiet_secs),
            Some(
                r.quiet_secs
                    .is_some_and(|q| q <= TARGET_RESTART_QUIET.as_secs_f64()),
            ),
        );
        push(
            format!("{}: DNS writes = 0", s.label()),
            format!(
                "{} ({} transfers, {} exec calls: {})",
                r.dns_writes,
                r.transfers,
                r.exec_calls,
                by_tool(&r.exec_by_tool)
            ),
            Some(r.dns_writes == 0),
        );
        let allowed = r.objects / 1_000;
        push(
            format!(
                "{}: operator API writes <= 1 per 1,000 objects (<= {allowed})",
                s.label()
            ),
            format!("{} for {} objects", r.operator_writes, thousands(r.objects)),
            Some(r.operator_writes <= allowed),
        );
    }
    out
}

/// The batched and baseline scenarios of the same N side by side.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub records: usize,
    pub batched_primary_secs: Option<f64>,
    pub baseline_primary_secs: Option<f64>,
    pub batched_secondary_secs: Option<f64>,
    pub baseline_secondary_secs: Option<f64>,
    /// batched / baseline time to answer on the secondary (smaller is
    /// better for batched).
    pub ratio_batched_to_baseline: Option<f64>,
    /// baseline / batched on the secondary: how many times faster.
    pub speedup: Option<f64>,
    pub batched_exec_calls: u64,
    pub baseline_exec_calls: u64,
    /// speedup >= the target.
    pub meets_target: Option<bool>,
}

/// The targets, where this run measured them.
#[derive(Debug, Clone, Serialize)]
pub struct Targets {
    pub secondary_records: usize,
    pub secondary_limit_secs: f64,
    /// Measured time for that N on the secondary (None: not run or not
    /// reached).
    pub secondary_secs: Option<f64>,
    pub secondary_met: Option<bool>,
    pub speedup_min: f64,
    pub speedup_met: Option<bool>,
}

/// Everything one `bind-operator bench` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub zones: usize,
    pub replicas: i32,
    pub scenarios: Vec<ScenarioResult>,
    pub comparison: Option<Comparison>,
    pub targets: Targets,
    /// One line per target of issue 12 this run measured.
    pub verdicts: Vec<Verdict>,
    /// The catalog-consumer scenario, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_consumer: Option<super::consumer::ConsumerResult>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some((a / b * 1000.0).round() / 1000.0),
        _ => None,
    }
}

impl BenchReport {
    pub fn new(opts: &BenchOptions, scenarios: Vec<ScenarioResult>) -> Self {
        let find = |kind, n| scenarios.iter().find(|s| s.kind == kind && s.records == n);
        let comparison = find(ScenarioKind::Baseline, opts.baseline_records).and_then(|base| {
            let batched = find(ScenarioKind::Batched, base.records)?;
            let speedup = ratio(base.secondary_secs, batched.secondary_secs);
            Some(Comparison {
                records: base.records,
                batched_primary_secs: batched.primary_secs,
                baseline_primary_secs: base.primary_secs,
                batched_secondary_secs: batched.secondary_secs,
                baseline_secondary_secs: base.secondary_secs,
                ratio_batched_to_baseline: ratio(batched.secondary_secs, base.secondary_secs),
                speedup,
                batched_exec_calls: batched.exec.calls,
                baseline_exec_calls: base.exec.calls,
                meets_target: speedup.map(|s| s >= TARGET_SPEEDUP),
            })
        });
        let big = find(ScenarioKind::Batched, TARGET_SECONDARY_RECORDS);
        let secondary_secs = big.and_then(|s| s.secondary_secs);
        let targets = Targets {
            secondary_records: TARGET_SECONDARY_RECORDS,
            secondary_limit_secs: TARGET_SECONDARY.as_secs_f64(),
            secondary_secs,
            secondary_met: big.map(|s| {
                s.secondary_secs
                    .is_some_and(|t| t <= TARGET_SECONDARY.as_secs_f64())
            }),
            speedup_min: TARGET_SPEEDUP,
            speedup_met: comparison.as_ref().and_then(|c| c.meets_target),
        };
        let verdicts = verdicts(&scenarios, comparison.as_ref());
        BenchReport {
            zones: opts.zones,
            replicas: opts.replicas,
            scenarios,
            comparison,
            targets,
            verdicts,
            catalog_consumer: None,
        }
    }

    /// Adds the catalog-consumer scenario's result and its verdict.
    pub fn with_consumer(mut self, c: super::consumer::ConsumerResult) -> Self {
        self.verdicts.push(Verdict {
            target: format!(
                "catalog-consumer {} zones: a new zone on A served by B <= {:.0} s",
                thousands(c.zones as u64),
                super::consumer::TARGET_NEW_ZONE.as_secs_f64()
            ),
            measured: reached(c.new_zone_secs),
            pass: c.new_zone_met,
        });
        self.catalog_consumer = Some(c);
        self
    }

    /// Pretty JSON of the whole report.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("the report serialises")
    }

    /// The human-readable report.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "bind-operator bench: 1 BindCluster ({} pods) per scenario, one A record per name; \
             seconds since the first write",
            self.replicas
        );
        let _ = writeln!(t);
        let header = [
            "scenario",
            "records",
            "zones",
            "applied",
            "primary",
            "secondary",
            "all Ready",
            "exec",
            "nsupdate",
            "API writes",
            "op writes/rec",
            "op heap",
            "API heap",
            "peak RSS",
            "named RSS",
        ];
        let mut rows = vec![header.map(String::from).to_vec()];
        for s in &self.scenarios {
            let named: Vec<String> = s
                .named_peak_rss_kib
                .values()
                .map(|v| v.map_or("-".into(), mib))
                .collect();
            rows.push(vec![
                s.kind.as_str().to_string(),
                thousands(s.records as u64),
                thousands(s.zones as u64),
                format!("{:.2}", s.applied_secs),
                opt_secs(s.primary_secs),
                opt_secs(s.secondary_secs),
                match s.kind {
                    ScenarioKind::Baseline => "n/a".into(),
                    _ => opt_secs(s.records_ready_secs),
                },
                thousands(s.exec.calls),
                thousands(s.exec.by_tool.get("nsupdate").copied().unwrap_or(0)),
                thousands(s.api_writes),
                s.writes_per_record()
                    .map_or("n/a".into(), |w| format!("{w:.2}")),
                s.operator_heap_peak_kib.map_or("-".into(), mib),
                s.other_heap_peak_kib.map_or("-".into(), mib),
                s.process_peak_rss_kib.map_or("-".into(), mib),
                named.join(" / "),
            ]);
        }
        t.push_str(&columns(&rows));
        let _ = writeln!(
            t,
            "(applied: creates returned / baseline updates sent; primary, secondary: every \
             record answered there (AXFR of every zone checked); all Ready: every DNSRecord's \
             status; exec and API writes: from the first write until all of these; op \
             writes/rec: the operator's API writes per DNSRecord created; op heap / API heap: \
             peak live heap of the controllers / of the in-memory API, runtime and bench, \
             counted by allocation (- without the bench-alloc feature); peak RSS: this whole \
             process, reset per scenario; named RSS: peak per pod, primary / secondary)"
        );
        let _ = writeln!(t);
        for s in &self.scenarios {
            let _ = write!(
                t,
                "{} {}: setup {:.1}s; load average {} -> {}",
                s.kind.as_str(),
                thousands(s.records as u64),
                s.setup_secs,
                s.load_average[0].map_or("-".into(), |l| format!("{l:.2}")),
                s.load_average[1].map_or("-".into(), |l| format!("{l:.2}")),
            );
            if s.kind != ScenarioKind::Baseline {
                let _ = write!(
                    t,
                    "; finalizers on all at {}; operator writes {}",
                    opt_secs(s.finalized_secs),
                    by_tool(&s.operator_writes_by_kind)
                );
            }
            let _ = write!(
                t,
                "; nsupdate {}..{}; exec by tool {}; sampled queries {}/{} answered",
                opt_secs(s.first_update_secs),
                opt_secs(s.last_update_secs),
                by_tool(&s.exec.by_tool),
                s.sampled_ok,
                s.sampled
            );
            for p in &s.pods {
                let _ = write!(
                    t,
                    "; {} ({}): first zone {}, all {}",
                    p.pod,
                    p.role,
                    opt_secs(p.first_zone_secs),
                    opt_secs(p.all_secs)
                );
                if p.all_secs.is_none() {
                    let _ = write!(
                        t,
                        " ({} of {} zones, {} records missing)",
                        p.zones_complete, s.zones, p.missing
                    );
                }
            }
            let _ = writeln!(t);
        }
        if let Some(c) = &self.comparison {
            let _ = writeln!(
                t,
                "\nbatched vs baseline at {} records: secondary {} vs {} -> batched/baseline = {}, \
                 {}x faster (target >= {}x: {}); primary {} vs {}; exec calls {} vs {}",
                thousands(c.records as u64),
                opt_secs(c.batched_secondary_secs),
                opt_secs(c.baseline_secondary_secs),
                c.ratio_batched_to_baseline
                    .map_or("-".into(), |r| format!("{r:.3}")),
                c.speedup.map_or("-".into(), |r| format!("{r:.1}")),
                TARGET_SPEEDUP,
                verdict_word(c.meets_target),
                opt_secs(c.batched_primary_secs),
                opt_secs(c.baseline_primary_secs),
                thousands(c.batched_exec_calls),
                thousands(c.baseline_exec_calls),
            );
        }
        for s in &self.scenarios {
            if let Some(r) = &s.primary_restart {
                let _ = writeln!(
                    t,
                    "\nprimary restart ({} zones, {} records; after {:.1} s to settle): new named \
                     Ready {}, every zone served {}, Pod Ready {}, every record everywhere {}, \
                     every zone Served {} (s after the delete); secondaries short {} of {} \
                     checks; in {:.1} s: {} exec calls ({}), {} operator writes ({})",
                    thousands(s.zones as u64),
                    thousands(s.records as u64),
                    r.settle_secs,
                    opt_secs(r.named_ready_secs),
                    opt_secs(r.served_secs),
                    opt_secs(r.pod_ready_secs),
                    opt_secs(r.all_records_secs),
                    opt_secs(r.zones_served_secs),
                    r.secondary_polls_short,
                    r.secondary_polls,
                    r.window_secs,
                    r.exec_calls,
                    by_tool(&r.exec_by_tool),
                    r.operator_writes,
                    by_tool(&r.operator_writes_by_kind)
                );
            }
        }
        for s in &self.scenarios {
            if let Some(h) = &s.hold {
                let _ = writeln!(
                    t,
                    "\nconverged hold: {:.0} s after {:.1} s to settle; {} exec calls ({}), \
                     allowance {} dig per pod; {} operator API writes",
                    h.hold_secs,
                    h.settle_secs,
                    h.exec_calls,
                    by_tool(&h.exec_by_tool),
                    h.dig_allowance_per_pod,
                    h.operator_writes
                );
                if h.exec_beyond_check > 0 || h.operator_writes > 0 {
                    let _ = writeln!(t, "what ran in the hold:");
                    for line in &h.ran {
                        let _ = writeln!(t, "  {line}");
                    }
                }
            }
        }
        for s in &self.scenarios {
            if let Some(l) = &s.latency {
                let _ = writeln!(
                    t,
                    "\nlatency: {} DNSRecords created one at a time (each once the last \
                     answered everywhere), then deleted the same way; ms from the API call \
                     returning to the answer (NXDOMAIN for a delete); percentiles by nearest \
                     rank",
                    l.changes
                );
                let mut rows = vec![
                    [
                        "change", "pod", "role", "p50", "p90", "p99", "max", "missed",
                    ]
                    .map(String::from)
                    .to_vec(),
                ];
                let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
                for phase in &l.phases {
                    for p in &phase.pods {
                        rows.push(vec![
                            phase.phase.to_string(),
                            p.pod.clone(),
                            p.role.clone(),
                            ms(p.p50_ms),
                            ms(p.p90_ms),
                            ms(p.p99_ms),
                            ms(p.max_ms),
                            p.missed.to_string(),
                        ]);
                    }
                }
                let r = &l.ready;
                rows.push(vec![
                    "create".into(),
                    "(status)".into(),
                    "Ready".into(),
                    ms(r.p50_ms),
                    ms(r.p90_ms),
                    ms(r.p99_ms),
                    ms(r.max_ms),
                    r.missed.to_string(),
                ]);
                t.push_str(&columns(&rows));
                let _ = writeln!(
                    t,
                    "Ready: {} of {} creates said Ready while some pod, asked once right then, \
                     did not answer them",
                    r.early, l.changes
                );
            }
        }
        for s in &self.scenarios {
            if let Some(r) = &s.restart {
                let _ = writeln!(
                    t,
                    "\nrestart: quiet after {}; {} DNS writes, {} transfers, {} exec calls \
                     ({}), {} operator API writes for {} objects",
                    reached(r.quiet_secs),
                    r.dns_writes,
                    r.transfers,
                    r.exec_calls,
                    by_tool(&r.exec_by_tool),
                    r.operator_writes,
                    thousands(r.objects)
                );
            }
        }
        if let Some(c) = &self.catalog_consumer {
            let _ = writeln!(
                t,
                "\ncatalog-consumer: {} zones on A; B (2 pods) serves all of them {} after it is created; a new zone on A {} later",
                thousands(c.zones as u64),
                reached(c.all_secs),
                reached(c.new_zone_secs)
            );
        }
        if !self.verdicts.is_empty() {
            let _ = writeln!(t, "\ntargets (issues 12 and 30):");
            for v in &self.verdicts {
                let _ = writeln!(
                    t,
                    "  {:<4}  {}: {}",
                    verdict_word(v.pass),
                    v.target,
                    v.measured
                );
            }
        }
        t
    }
}

fn opt_secs(v: Option<f64>) -> String {
    v.map_or("-".into(), |s| format!("{s:.2}"))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn by_tool(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Left-aligned first column, right-aligned others, two spaces apart.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(kind: ScenarioKind, n: usize, secondary: Option<f64>) -> ScenarioResult {
        ScenarioResult {
            kind,
            records: n,
            zones: 10,
            replicas: 2,
            setup_secs: 3.0,
            applied_secs: 0.5,
            primary_secs: secondary.map(|s| s - 0.1),
            secondary_secs: secondary,
            finalized_secs: None,
            records_ready_secs: Some(2.0),
            first_update_secs: Some(0.4),
            last_update_secs: Some(0.9),
            update_runs: Vec::new(),
            pods: Vec::new(),
            exec: ExecSummary::default(),
            api_writes: 0,
            api_writes_by_verb: BTreeMap::new(),
            records_created: if kind == ScenarioKind::Baseline {
                0
            } else {
                n as u64
            },
            operator_writes: 2 * n as u64 + 10,
            operator_record_writes: 2 * n as u64,
            operator_writes_by_kind: BTreeMap::new(),
            operator_heap_peak_kib: Some(n as u64 * 4),
            operator_heap_live_kib: Some(n as u64 * 3),
            other_heap_peak_kib: Some(50_000),
            other_heap_live_kib: Some(40_000),
            hold: None,
            latency: None,
            primary_restart: None,
            restart: None,
            sampled: 10,
            sampled_ok: 10,
            process_peak_rss_kib: Some(102_400),
            process_peak_reset: true,
            named_peak_rss_kib: BTreeMap::from([("bench-0".into(), Some(40_960))]),
            load_average: [Some(1.0), None],
        }
    }

    #[test]
    fn the_comparison_and_targets_follow_the_numbers() {
        let opts = BenchOptions::default();
        let r = BenchReport::new(
            &opts,
            vec![
                result(ScenarioKind::Batched, 1_000, Some(1.0)),
                result(ScenarioKind::Baseline, 1_000, Some(45.0)),
                result(ScenarioKind::Batched, 10_000, Some(16.0)),
            ],
        );
        let c = r.comparison.as_ref().unwrap();
        assert_eq!(c.speedup, Some(45.0));
        assert_eq!(c.ratio_batched_to_baseline, Some(0.022));
        // 45x is short of issue 12's 50x.
        assert_eq!(c.meets_target, Some(false));
        assert_eq!(r.targets.secondary_met, Some(false));
        let table = r.table();
        assert!(table.contains("45.0x faster"), "{table}");
        assert!(table.contains("FAIL"), "{table}");
        assert!(table.contains("10,000"), "{table}");
        assert!(table.contains("100.0 MiB"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(json["scenarios"][1]["kind"], "baseline");
        assert_eq!(json["targets"]["speedup_met"], false);
        assert_eq!(json["verdicts"][0]["pass"], false);
    }

    fn pass_of(r: &BenchReport, target: &str) -> Vec<Option<bool>> {
        r.verdicts
            .iter()
            .filter(|v| v.target.contains(target))
            .map(|v| v.pass)
            .collect()
    }

    #[test]
    fn every_target_gets_a_verdict_from_its_numbers() {
        let opts = BenchOptions::default();
        let mut at_once = result(ScenarioKind::AtOnce, 10_000, Some(12.0));
        at_once.zones = 1_000;
        at_once.exec.calls = 21;
        // Issue 30 counts pods/exec only: 15 of the 21 here.
        at_once.exec.by_tool = [("rndc".to_string(), 15), ("dns-update".to_string(), 6)]
            .into_iter()
            .collect();
        let mut converged = result(ScenarioKind::Converged, 1_000, Some(1.0));
        converged.hold = Some(HoldResult {
            hold_secs: 300.0,
            exec_calls: 11,
            dig_allowance_per_pod: 5,
            exec_beyond_check: 1,
            ran: vec!["3.0s exec rndc on bench-0".into()],
            ..Default::default()
        });
        let mut big = result(ScenarioKind::Batched, 100_000, Some(29.0));
        big.operator_heap_peak_kib = Some(900_000);
        let r = BenchReport::new(
            &opts,
            vec![
                result(ScenarioKind::Batched, 1_000, Some(0.5)),
                result(ScenarioKind::Baseline, 1_000, Some(45.0)),
                result(ScenarioKind::Batched, 10_000, Some(2.0)),
                big,
                at_once,
                converged,
            ],
        );
        assert_eq!(
            pass_of(&r, "at-once 1,000 zones x 10 records"),
            vec![
                Some(true),
                Some(false),
                Some(false),
                Some(false),
                Some(true)
            ]
        );
        // 29 s: within issue 7's 30 s, not issue 30's 15 s.
        assert_eq!(
            pass_of(&r, "100,000: every record"),
            vec![Some(true), Some(false)]
        );
        assert_eq!(
            pass_of(
                &r,
                "batched 1,000: every record on every secondary <= 0.2 s"
            ),
            vec![Some(false)]
        );
        // 2.0 s: within issue 7's 15 s, not issue 30's 1 s.
        assert_eq!(
            pass_of(&r, "batched 10,000: every record"),
            vec![Some(true), Some(false)]
        );
        // 290 us vs 200 us per record: 1.45x.
        assert_eq!(pass_of(&r, "time per record"), vec![Some(true)]);
        assert_eq!(pass_of(&r, "baseline"), vec![Some(true)]);
        assert_eq!(pass_of(&r, "writes per created"), vec![Some(true); 5]);
        // 900,000 KiB over 100,000 records is 9 KiB each.
        assert_eq!(pass_of(&r, "memory"), vec![Some(false)]);
        assert_eq!(pass_of(&r, "beyond the periodic"), vec![Some(false)]);
        assert_eq!(pass_of(&r, "operator API writes = 0"), vec![Some(true)]);
        let table = r.table();
        assert!(table.contains("FAIL  converged 300 s"), "{table}");
        assert!(table.contains("3.0s exec rndc on bench-0"), "{table}");
        assert!(table.contains("9.00 KiB per record"), "{table}");
    }

    #[test]
    fn missing_runs_are_not_measured() {
        let opts = BenchOptions {
            records: vec![20],
            baseline_records: 0,
            ..Default::default()
        };
        let r = BenchReport::new(&opts, vec![result(ScenarioKind::Batched, 20, None)]);
        assert!(r.comparison.is_none());
        assert_eq!(r.targets.secondary_met, None);
        assert!(!r.scenarios[0].complete());
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
