//! What the bench measured and how it is shown: one [`ScenarioResult`] per
//! scenario, the batched-vs-baseline comparison, the targets, a
//! text table ([`BenchReport::table`]) and JSON ([`BenchReport::json`]).
//!
//! Pure formatting; no I/O.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::check::PodProgress;
use super::exec_log::ExecSummary;
use super::{BenchOptions, TARGET_SECONDARY, TARGET_SECONDARY_RECORDS, TARGET_SPEEDUP};

/// Which write path a scenario measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScenarioKind {
    /// DNSRecords through the API, written by the controllers.
    Batched,
    /// One nsupdate run per record, sequentially.
    Baseline,
}

impl ScenarioKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioKind::Batched => "batched",
            ScenarioKind::Baseline => "baseline",
        }
    }
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
    /// API writes (create, update, patch, delete) in the same window.
    pub api_writes: u64,
    pub api_writes_by_verb: BTreeMap<String, u64>,
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
        self.primary_secs.is_some()
            && self.secondary_secs.is_some()
            && self.sampled_ok == self.sampled
            && (self.kind == ScenarioKind::Baseline || self.records_ready_secs.is_some())
    }
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
        BenchReport {
            zones: opts.zones,
            replicas: opts.replicas,
            scenarios,
            comparison,
            targets,
        }
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
            "bind-operator bench: 1 BindCluster ({} pods), {} zones, one A record per name; \
             seconds since the first write",
            self.replicas, self.zones
        );
        let _ = writeln!(t);
        let header = [
            "scenario",
            "records",
            "applied",
            "primary",
            "secondary",
            "all Ready",
            "exec",
            "nsupdate",
            "API writes",
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
                format!("{:.2}", s.applied_secs),
                opt_secs(s.primary_secs),
                opt_secs(s.secondary_secs),
                match s.kind {
                    ScenarioKind::Batched => opt_secs(s.records_ready_secs),
                    ScenarioKind::Baseline => "n/a".into(),
                },
                thousands(s.exec.calls),
                thousands(s.exec.by_tool.get("nsupdate").copied().unwrap_or(0)),
                thousands(s.api_writes),
                s.process_peak_rss_kib.map_or("-".into(), mib),
                named.join(" / "),
            ]);
        }
        t.push_str(&columns(&rows));
        let _ = writeln!(
            t,
            "(applied: creates returned / baseline updates sent; primary, secondary: every \
             record answered there (AXFR of every zone checked); all Ready: every DNSRecord's \
             status; exec and API writes: from the first write until all of these; peak RSS: \
             this process (controllers, in-memory API, bench), reset per scenario; named RSS: \
             peak per pod, primary / secondary)"
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
            if s.kind == ScenarioKind::Batched {
                let _ = write!(t, "; finalizers on all at {}", opt_secs(s.finalized_secs));
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
                verdict(c.meets_target),
                opt_secs(c.batched_primary_secs),
                opt_secs(c.baseline_primary_secs),
                thousands(c.batched_exec_calls),
                thousands(c.baseline_exec_calls),
            );
        }
        let g = &self.targets;
        if g.secondary_met.is_some() {
            let _ = writeln!(
                t,
                "target: {} records answer on the secondary within {:.0}s: {} ({})",
                thousands(g.secondary_records as u64),
                g.secondary_limit_secs,
                opt_secs(g.secondary_secs),
                verdict(g.secondary_met)
            );
        }
        t
    }
}

fn verdict(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "not measured",
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
        assert_eq!(c.meets_target, Some(true));
        assert_eq!(r.targets.secondary_met, Some(false));
        let table = r.table();
        assert!(table.contains("45.0x faster"), "{table}");
        assert!(table.contains("MISSED"), "{table}");
        assert!(table.contains("10,000"), "{table}");
        assert!(table.contains("100.0 MiB"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(json["scenarios"][1]["kind"], "baseline");
        assert_eq!(json["targets"]["speedup_met"], true);
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
