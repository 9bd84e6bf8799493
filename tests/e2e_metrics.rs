//! Metrics against real named: `bind-operator local --metrics-addr` on the
//! examples exports every metric and label the shipped dashboard and alert
//! rules use (names read from their expressions), with live values
//! (`bind_up` 1 for both pods, queries counted, zone serials in sync); then
//! a real Prometheus (Debian's `prometheus` binary, own config in a temp
//! dir, 127.0.0.1, 1 s scrape and evaluation, the rules with `for: 5s`)
//! scrapes it and sees `BindZoneBehind` fire once the secondary's named is
//! stopped (SIGSTOP) and clear once it runs again (SIGCONT). Waits poll
//! Prometheus's HTTP API, each bounded. Without `prometheus` the second
//! half prints SKIP.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::deploy_monitoring::{RULES, dashboard_exprs, repo_file, rule_exprs, tool};
use crate::support_e2e::{Fixture, pods_of};
use crate::support_ops::promtext;

/// Longest wait for the alert to fire or clear: the survey that notices a
/// stopped pod runs at least once a minute (zonesync::VERIFY_INTERVAL),
/// plus dig's timeouts on the stopped pod.
const ALERT_WAIT: Duration = Duration::from_secs(180);

/// The value of the first sample of `f` carrying `labels` (among others).
fn with_labels(f: &promtext::Family, labels: &[(&str, &str)]) -> Option<f64> {
    f.samples
        .iter()
        .find(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

/// Families whose series appear with the first failure.
const FAILURE_ONLY: [&str; 2] = [
    "bind_operator_reconcile_errors_total",
    "bind_operator_exec_errors_total",
];

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET over HTTP/1.0 (body, or None when nothing answers).
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then_some(())?;
    head.split(' ').nth(1).filter(|c| *c == "200")?;
    Some(body.to_string())
}

fn wait_for<T>(
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> Option<T>,
    diag: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            diag()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Metric names (`bind_*`) and label names an expression uses.
fn names_in(expr: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let metric = regex::Regex::new(r"\bbind_[a-z0-9_]+").unwrap();
    let grouping = regex::Regex::new(r"\bby \(([^)]*)\)").unwrap();
    let matcher = regex::Regex::new(r"([a-z_]+)\s*(=~|!~|!=|=)").unwrap();
    let selector = regex::Regex::new(r"\{([^}]*)\}").unwrap();
    let metrics = metric
        .find_iter(expr)
        .map(|m| m.as_str().to_string())
        .collect();
    let mut labels = BTreeSet::new();
    for c in grouping.captures_iter(expr) {
        labels.extend(c[1].split(',').map(|l| l.trim().to_string()));
    }
    for c in selector.captures_iter(expr) {
        labels.extend(matcher.captures_iter(&c[1]).map(|m| m[1].to_string()));
    }
    (metrics, labels)
}

/// Every sample's metric name and label names in the exposition.
fn exported(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut names = BTreeSet::new();
    let mut labels = BTreeSet::new();
    let label = regex::Regex::new(r#"([a-z_]+)=""#).unwrap();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            names.insert(rest.split(' ').next().unwrap().to_string());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap();
        names.insert(name.to_string());
        if let Some((_, rest)) = line.split_once('{') {
            labels.extend(label.captures_iter(rest).map(|c| c[1].to_string()));
        }
    }
    (names, labels)
}

struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(bin: &Path, target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        // The shipped rules, every `for:` shortened to 5 s.
        let rules = std::fs::read_to_string(repo_file(RULES)).unwrap();
        let for_clause = regex::Regex::new(r"(?m)^(\s+)for: \S+$").unwrap();
        let rules = for_clause.replace_all(&rules, "${1}for: 5s");
        std::fs::write(dir.path().join("rules.yaml"), rules.as_ref()).unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - rules.yaml\n\
             scrape_configs:\n  - job_name: bind-operator\n    honor_labels: true\n    static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .current_dir(dir.path())
            .arg("--config.file=prometheus.yml")
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        Prometheus {
            child,
            addr,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        let text =
            std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default();
        crate::support_e2e::tail(&text, 30)
    }

    /// `(alertname, labels, state)` of every active alert.
    fn alerts(&self) -> Option<Vec<(String, serde_json::Value, String)>> {
        let body = http_get(self.addr, "/api/v1/alerts")?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        Some(
            v["data"]["alerts"]
                .as_array()?
                .iter()
                .map(|a| {
                    (
                        a["labels"]["alertname"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        a["labels"].clone(),
                        a["state"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect(),
        )
    }

    fn zone_behind_firing_for(&self, pod: &str) -> Option<bool> {
        Some(self.alerts()?.iter().any(|(name, labels, state)| {
            name == "BindZoneBehind" && labels["pod"] == pod && state == "firing"
        }))
    }
}

fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) with a pid read from named's own pid file.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {pid} {sig}");
}

#[test]
fn dashboard_and_alerts_read_live_metrics_and_zone_behind_fires_and_clears() {
    let f = Fixture::examples();
    let metrics_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let local = f.start(&["--metrics-addr", &metrics_addr.to_string()]);
    let snapshot = local.wait_all_ready();
    let pods = pods_of(&snapshot, "example");
    assert_eq!(pods.len(), 2);
    let secondary = pods[1].name.clone();

    // Every pod read and every zone surveyed on both pods.
    let text = wait_for(
        "bind_up 1 and zone serials for both pods",
        Duration::from_secs(90),
        || {
            let text = http_get(metrics_addr, "/metrics")?;
            let fams = promtext::parse(&text).ok()?;
            let up = fams.get("bind_up")?;
            let zone = fams.get("bind_operator_zone_serial")?;
            pods.iter()
                .all(|p| {
                    with_labels(up, &[("pod", p.name.as_str())]) == Some(1.0)
                        && with_labels(zone, &[("pod", p.name.as_str()), ("zone", "example.com")])
                            .is_some()
                })
                .then_some(text)
        },
        || local.diagnostics(),
    );
    let fams = promtext::parse(&text).unwrap();
    let queries: f64 = fams["bind_queries_total"]
        .samples
        .iter()
        .map(|s| s.value)
        .sum();
    assert!(queries > 0.0, "named counted queries:\n{text}");
    let behind = &fams["bind_operator_zone_behind_seconds"];
    assert_eq!(
        with_labels(
            behind,
            &[("pod", secondary.as_str()), ("zone", "example.com")]
        ),
        Some(0.0),
        "the secondary is in sync"
    );

    // Every metric and label the dashboard and the rules use is exported.
    let (names, labels) = exported(&text);
    let mut used = Vec::new();
    for expr in rule_exprs().into_iter().chain(dashboard_exprs()) {
        let (m, l) = names_in(&expr);
        used.extend(m.into_iter().map(|m| (m, expr.clone(), true)));
        used.extend(l.into_iter().map(|l| (l, expr.clone(), false)));
    }
    assert!(used.len() > 30);
    // Failure counters get their first series with the first failure (an
    // error category is only known then): they must be what the operator
    // registers once one happens.
    let after_failures = {
        let m = bind_operator::operator::Metrics::new();
        m.reconcile(
            bind_operator::operator::Controller::BindZone,
            Duration::ZERO,
            Some("Exec"),
        );
        m.exec("reconfig", false);
        exported(&m.encode())
    };
    for (name, expr, is_metric) in &used {
        if *is_metric {
            let on_failure =
                FAILURE_ONLY.contains(&name.as_str()) && after_failures.0.contains(name);
            assert!(
                names.contains(name) || on_failure,
                "{name} (used in `{expr}`) is not exported:\n{text}"
            );
        } else {
            // A label only the failure counters carry (`category`).
            let on_failure =
                FAILURE_ONLY.iter().any(|f| expr.contains(f)) && after_failures.1.contains(name);
            assert!(
                labels.contains(name) || on_failure,
                "label {name} (used in `{expr}`) is not exported"
            );
        }
    }

    let Some(prometheus_bin) = tool("prometheus") else {
        eprintln!("SKIP: prometheus not installed (apt-get install prometheus)");
        return;
    };
    let prom = Prometheus::start(&prometheus_bin, metrics_addr);
    let diag = || format!("{}\n--- prometheus\n{}", local.diagnostics(), prom.log());
    // Prometheus scrapes the operator and evaluates the rules: in sync, no alert.
    wait_for(
        "prometheus scraping with the rules loaded",
        Duration::from_secs(60),
        || {
            let body = http_get(prom.addr, "/api/v1/targets")?;
            body.contains("\"health\":\"up\"").then_some(())?;
            let rules = http_get(prom.addr, "/api/v1/rules")?;
            rules.contains("BindZoneBehind").then_some(())
        },
        diag,
    );
    assert_eq!(prom.zone_behind_firing_for(&secondary), Some(false));

    // Stop the secondary's named: the alert fires for it.
    let pid_file = local
        .state
        .join("default")
        .join(&secondary)
        .join("data/named.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    signal(pid, libc::SIGSTOP);
    let stopped = Instant::now();
    let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for(
            "BindZoneBehind firing for the stopped secondary",
            ALERT_WAIT,
            || prom.zone_behind_firing_for(&secondary)?.then_some(()),
            diag,
        )
    }));
    // Whatever happened, named runs again.
    let _ = unsafe { libc::kill(pid, libc::SIGCONT) };
    if let Err(e) = fired {
        std::panic::resume_unwind(e);
    }
    eprintln!("BindZoneBehind fired {:?} after SIGSTOP", stopped.elapsed());
    let resumed = Instant::now();
    wait_for(
        "BindZoneBehind cleared once the secondary runs again",
        ALERT_WAIT,
        || (!prom.zone_behind_firing_for(&secondary)?).then_some(()),
        diag,
    );
    eprintln!(
        "BindZoneBehind cleared {:?} after SIGCONT",
        resumed.elapsed()
    );
}
