//! The shipped monitoring: the alert rules pass `promtool check rules` and
//! their unit tests (`promtool test rules`: every alert firing and not
//! firing); the kustomize component carries the same rules and dashboard
//! as the Helm chart; the dashboard is JSON whose every panel has a query.
//! Tests needing promtool print SKIP when it is absent (Debian package
//! `prometheus`).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

pub const RULES: &str = "deploy/helm/bind-operator/files/prometheus-rules.yaml";
pub const RULE_TESTS: &str = "deploy/helm/bind-operator/files/prometheus-rules.test.yaml";
pub const DASHBOARD: &str = "deploy/helm/bind-operator/files/grafana-dashboard.json";
const KUSTOMIZE_RULES: &str = "deploy/kustomize/components/monitoring/prometheusrule.yaml";
const KUSTOMIZE_DASHBOARD: &str = "deploy/kustomize/components/monitoring/grafana-dashboard.json";

pub fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo_file(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(text: &str) -> Value {
    let docs = bind_operator::yaml::documents(text);
    assert_eq!(docs.len(), 1);
    docs.into_iter().next().unwrap().value.unwrap()
}

/// `promtool` on PATH, or None (the caller prints SKIP).
pub fn tool(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join(name))
        .find(|p| p.is_file())
}

/// Every PromQL expression of the rules file.
pub fn rule_exprs() -> Vec<String> {
    let rules = yaml(&read(RULES));
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .map(|r| r["expr"].as_str().unwrap().to_string())
        .collect()
}

/// Every PromQL expression of the dashboard's panels.
pub fn dashboard_exprs() -> Vec<String> {
    let d: Value = serde_json::from_str(&read(DASHBOARD)).unwrap();
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn promtool_checks_and_unit_tests_pass() {
    let Some(promtool) = tool("promtool") else {
        eprintln!("SKIP: promtool not installed (apt-get install prometheus)");
        return;
    };
    for args in [
        vec!["check", "rules", RULES],
        vec!["test", "rules", RULE_TESTS],
    ] {
        let out = Command::new(&promtool)
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
        assert!(text.contains("SUCCESS"), "promtool {args:?}:\n{text}");
    }
    // Every alert has a unit test.
    let tests = read(RULE_TESTS);
    let rules = yaml(&read(RULES));
    for r in rules["groups"][0]["rules"].as_array().unwrap() {
        let name = r["alert"].as_str().unwrap();
        assert!(
            tests.contains(&format!("alertname: {name}")),
            "no unit test for {name}"
        );
    }
}

#[test]
fn kustomize_component_ships_the_charts_rules_and_dashboard() {
    let chart = yaml(&read(RULES));
    let component = yaml(&read(KUSTOMIZE_RULES));
    assert_eq!(component["kind"], "PrometheusRule");
    assert_eq!(component["spec"]["groups"], chart["groups"]);
    assert_eq!(read(KUSTOMIZE_DASHBOARD), read(DASHBOARD));
    assert_eq!(rule_exprs().len(), 6);
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 15, "{exprs:?}");
    // Off by default in the chart.
    let values = yaml(&read("deploy/helm/bind-operator/values.yaml"));
    for part in ["podMonitor", "prometheusRule", "grafanaDashboard"] {
        assert_eq!(values["monitoring"][part]["enabled"], false, "{part}");
    }
}
