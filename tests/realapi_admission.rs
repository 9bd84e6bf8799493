//! The admission table (tests/support/realapi/cases.rs) against both
//! admissions: the client-side one in `api::admission` (always) and the real
//! kube-apiserver with the committed CRDs (the lane). Every invalid object
//! is refused by both, with a message that names the field; valid objects of
//! each kind are accepted by both, so a refusal cannot come from a CRD that
//! is missing.

use crate::support_realapi as support;

use bind_operator::api::admission::admit;
use serde_json::{Value, json};
use support::cases::{Case, rejections};

fn valid_objects() -> Vec<Value> {
    let meta = |kind: &str, name: &str, spec: Value| {
        json!({"apiVersion": "bind.unkin.net/v1alpha1", "kind": kind,
               "metadata": {"name": name}, "spec": spec})
    };
    vec![
        meta("BindCluster", "ok-cluster", json!({"replicas": 1})),
        meta("BindTSIGKey", "ok-key", json!({"algorithm": "hmac-sha256"})),
        meta(
            "BindZone",
            "ok-zone",
            json!({"clusterRef": "ok-cluster", "zoneName": "example.com", "records": [
                {"name": "@", "type": "NS", "values": ["ns1.example.com."]},
                {"name": "www", "type": "A", "values": ["192.0.2.1"]}]}),
        ),
        meta(
            "DNSRecord",
            "ok-record",
            json!({"zoneRef": "ok-zone", "name": "www", "type": "A", "values": ["192.0.2.1"]}),
        ),
        // #26: a zone granting other namespaces, a record naming a zone in another.
        meta(
            "BindZone",
            "ok-shared-zone",
            json!({"clusterRef": "ok-cluster", "zoneName": "example.org", "recordsFrom": [
                {"from": "Selector",
                 "selector": {"matchLabels": {"team": "a"},
                              "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]},
                 "names": ["*.team-a", "api"], "types": ["A", "AAAA", "CNAME"]},
                {"from": "Same"},
                {"from": "All", "names": ["_acme-challenge"], "types": ["TXT"]}]}),
        ),
        meta(
            "DNSRecord",
            "ok-team-record",
            json!({"zoneRef": "ok-shared-zone", "zoneNamespace": "platform",
                   "name": "api.team-a", "type": "A", "values": ["192.0.2.1"]}),
        ),
    ]
}

#[test]
fn realapi_admission_table_is_refused_client_side() {
    let mut failures = Vec::new();
    for Case {
        what,
        object,
        old,
        client,
        ..
    } in rejections()
    {
        let old = old.map(|o| admit(&o, None).expect("the old object is admitted"));
        match admit(&object, old.as_ref()) {
            Ok(_) => failures.push(format!("{what}: admitted")),
            Err(e)
                if !e
                    .violations()
                    .iter()
                    .any(|v| v.to_string().contains(client)) =>
            {
                failures.push(format!("{what}: message lacks {client:?}: {e}"))
            }
            Err(_) => {}
        }
    }
    for obj in valid_objects() {
        if let Err(e) = admit(&obj, None) {
            failures.push(format!("valid {} refused: {e}", obj["kind"]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn realapi_admission_table_is_refused_by_the_real_server() {
    let Some(lane) = support::lane("realapi_admission_table_is_refused_by_the_real_server") else {
        return;
    };
    lane.installed();
    let ns = lane.namespace("lane-admission", &[]);
    let mut failures = Vec::new();
    for obj in valid_objects() {
        let args = ["apply", "--dry-run=server", "-n", &ns.name, "-f", "-"];
        let out = lane.kubectl_with(&lane.kubeconfig, &args, Some(&obj.to_string()));
        if !out.status.success() {
            failures.push(format!(
                "valid {} refused: {}",
                obj["kind"],
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let cases = rejections();
    for case in &cases {
        if let Some(old) = &case.old {
            lane.apply(&ns.name, &old.to_string());
        }
        // An update is checked against the stored object (`oldSelf`).
        let args = ["apply", "--dry-run=server", "-n", &ns.name, "-f", "-"];
        let out = lane.kubectl_with(&lane.kubeconfig, &args, Some(&case.object.to_string()));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            failures.push(format!("{}: accepted by the server", case.what));
            continue;
        }
        let missing: Vec<&&str> = case
            .server
            .iter()
            .filter(|n| !stderr.contains(**n))
            .collect();
        if missing.is_empty() {
            support::say(&format!(
                "realapi: refused {:<50} {}",
                case.what,
                first_line(&stderr)
            ));
        } else {
            failures.push(format!(
                "{}: the server's message lacks {missing:?}: {stderr}",
                case.what
            ));
        }
    }
    support::say(&format!(
        "realapi: {} of {} invalid objects refused as expected",
        cases.len() - failures.len(),
        cases.len()
    ));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The part of kubectl's error that names the field.
fn first_line(stderr: &str) -> String {
    let text = stderr.replace('\n', " ");
    let start = ["unknown field", "spec", "metadata"]
        .iter()
        .find_map(|n| text.find(n))
        .unwrap_or(0);
    text[start..].chars().take(110).collect()
}
