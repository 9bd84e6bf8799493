//! The bench's view of exec calls: a [`PodExecutor`] that wraps the local
//! executor and records, for every command the controllers (or the
//! per-record baseline) run, which tool it was, when it started and how
//! long it took. The log answers "how many exec calls between t0 and t1"
//! and "when did the first update after t0 start" without the controllers
//! knowing they are measured.
//!
//! No cluster access. Never records argv beyond the tool's name, nor stdin
//! (nsupdate scripts and AXFR key files carry TSIG keys).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bind::commands::Command;
use crate::controller::exec::{ObservedExecutor, PodExecutor, PodRef};

/// Tools a command is classified by (the first one its argv names); a
/// shell script naming none of them counts as `sh`.
const TOOLS: [&str; 9] = [
    "nsupdate",
    "dig",
    "rndc",
    "named-checkconf",
    "dns-update",
    "dns-soa",
    "dns-axfr",
    "dns-ixfr",
    "dns-notify",
];

/// One finished exec call.
#[derive(Debug, Clone)]
pub struct ExecCall {
    pub tool: &'static str,
    /// What the command does ([`Command::verb`]: `apply_zones`,
    /// `dig_soa`, ...), for timelines.
    pub verb: &'static str,
    /// The pod's name.
    pub pod: String,
    pub started: Instant,
    pub took: Duration,
    pub ok: bool,
}

/// Every exec call made through a [`counting`] executor, in start order of
/// completion. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct ExecLog {
    calls: Arc<Mutex<Vec<ExecCall>>>,
}

/// Exec calls of one window, by tool.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ExecSummary {
    pub calls: u64,
    pub failed: u64,
    /// Calls per tool (`nsupdate` includes the update-then-SOA script).
    pub by_tool: BTreeMap<String, u64>,
    /// Summed wall time of the calls (they may overlap).
    pub busy_secs: f64,
}

impl ExecSummary {
    /// Calls that were pods/exec (rndc, scripts): not the operator's own
    /// DNS exchanges (`dns-*` tools), which reach the pod's DNS port
    /// without an exec (no kubelet hop on a real cluster).
    pub fn pod_execs(&self) -> u64 {
        self.by_tool
            .iter()
            .filter(|(tool, _)| !tool.starts_with("dns-"))
            .map(|(_, n)| n)
            .sum()
    }
}

impl ExecLog {
    fn push(&self, call: ExecCall) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }

    /// Calls finished so far (moves whenever a command ran).
    pub fn finished(&self) -> u64 {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    /// A copy of the calls started in `[from, to]`.
    pub fn window(&self, from: Instant, to: Instant) -> Vec<ExecCall> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|c| c.started >= from && c.started <= to)
            .cloned()
            .collect()
    }

    /// Counts of the calls started in `[from, to]`.
    pub fn summary(&self, from: Instant, to: Instant) -> ExecSummary {
        let mut s = ExecSummary::default();
        let mut busy = Duration::ZERO;
        for c in self.window(from, to) {
            s.calls += 1;
            s.failed += u64::from(!c.ok);
            *s.by_tool.entry(c.tool.to_string()).or_default() += 1;
            busy += c.took;
        }
        s.busy_secs = busy.as_secs_f64();
        s
    }
}

/// Which tool a command runs (see `TOOLS`).
pub fn tool_of(cmd: &Command) -> &'static str {
    cmd.argv
        .iter()
        .find_map(|a| {
            let base = a.rsplit('/').next().unwrap_or(a);
            TOOLS.iter().find(|t| **t == base).copied()
        })
        .unwrap_or("sh")
}

/// Wraps an executor so every call is logged into `log`.
pub fn counting(inner: Arc<dyn PodExecutor>, log: ExecLog) -> ObservedExecutor {
    ObservedExecutor::new(inner, move |pod: &PodRef, cmd: &Command, result, took| {
        log.push(ExecCall {
            tool: tool_of(cmd),
            verb: cmd.verb(),
            pod: pod.name.clone(),
            started: Instant::now() - took,
            took,
            ok: result.is_ok(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(argv: &[&str]) -> Command {
        Command {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            stdin: None,
        }
    }

    #[test]
    fn pod_execs_leave_out_the_operators_dns_exchanges() {
        let summary = ExecSummary {
            calls: 14,
            by_tool: [("rndc", 4), ("sh", 2), ("dns-soa", 5), ("dns-update", 3)]
                .into_iter()
                .map(|(t, n)| (t.to_string(), n))
                .collect(),
            ..Default::default()
        };
        assert_eq!(summary.pod_execs(), 6);
    }

    #[test]
    fn tools_are_named_by_the_first_known_program() {
        assert_eq!(tool_of(&cmd(&["/usr/bin/nsupdate", "-v"])), "nsupdate");
        assert_eq!(
            tool_of(&cmd(&[
                "sh",
                "-c",
                "script",
                "sh",
                "/usr/bin/nsupdate",
                "/usr/bin/dig"
            ])),
            "nsupdate"
        );
        assert_eq!(tool_of(&cmd(&["/usr/sbin/rndc", "reconfig"])), "rndc");
        assert_eq!(tool_of(&cmd(&["sh", "-c", "cat > f"])), "sh");
    }

    #[test]
    fn summary_counts_only_the_window() {
        let log = ExecLog::default();
        let t0 = Instant::now();
        for (i, tool) in ["dig", "nsupdate", "nsupdate"].into_iter().enumerate() {
            log.push(ExecCall {
                tool,
                verb: tool,
                pod: "p-0".into(),
                started: t0 + Duration::from_millis(10 * i as u64),
                took: Duration::from_millis(5),
                ok: i != 2,
            });
        }
        let s = log.summary(t0 + Duration::from_millis(5), t0 + Duration::from_secs(1));
        assert_eq!(s.calls, 2);
        assert_eq!(s.failed, 1);
        assert_eq!(s.by_tool.get("nsupdate"), Some(&2));
        assert!(!s.by_tool.contains_key("dig"));
        assert_eq!(log.finished(), 3);
    }
}
