//! What a manifest directory promises a user can `dig`: every RRset of
//! its BindZones and DNSRecords, and the check that every pod serves them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bind_operator::local::report::Snapshot;
use serde_json::Value;

use super::{Diagnose, pods_of, wait_answer};

/// One record set a manifest directory promises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub fqdn: String,
    pub rtype: String,
    pub values: Vec<String>,
}

/// Every RRset the manifests in `dir` define: each BindZone's apex NS
/// (spec.nameservers) and spec.records, and each DNSRecord (zone from its
/// zoneRef). Namespaces default to `default`.
pub fn expected_records(dir: &Path) -> Vec<Expected> {
    let mut zones: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut out = Vec::new();
    let docs = manifest_docs(dir);
    for doc in &docs {
        if doc["kind"] == "BindZone" {
            let zone = doc["spec"]["zoneName"]
                .as_str()
                .unwrap()
                .trim_end_matches('.');
            zones.insert((namespace(doc), name(doc)), zone.to_string());
            let ns: Vec<String> = strings(&doc["spec"]["nameservers"]);
            if !ns.is_empty() {
                out.push(Expected {
                    fqdn: format!("{zone}."),
                    rtype: "NS".into(),
                    values: ns,
                });
            }
            for r in doc["spec"]["records"].as_array().into_iter().flatten() {
                out.push(record_set(zone, r));
            }
        }
    }
    for doc in &docs {
        if doc["kind"] == "DNSRecord" {
            let zone_ref = doc["spec"]["zoneRef"].as_str().unwrap().to_string();
            let zone = &zones[&(namespace(doc), zone_ref)];
            out.push(record_set(zone, &doc["spec"]));
        }
    }
    out
}

fn record_set(zone: &str, spec: &Value) -> Expected {
    let owner = spec["name"].as_str().unwrap_or("@");
    let fqdn = if owner == "@" || owner.is_empty() {
        format!("{zone}.")
    } else if owner.ends_with('.') {
        owner.to_string()
    } else {
        format!("{owner}.{zone}.")
    };
    Expected {
        fqdn,
        rtype: spec["type"].as_str().unwrap().to_string(),
        values: strings(&spec["values"]),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn namespace(doc: &Value) -> String {
    doc["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string()
}

fn name(doc: &Value) -> String {
    doc["metadata"]["name"].as_str().unwrap().to_string()
}

/// Every YAML document under `dir` (not recursive: fixtures are flat).
fn manifest_docs(dir: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for d in bind_operator::yaml::documents(&text) {
            docs.push(d.value.unwrap());
        }
    }
    docs
}

/// Waits until every pod of `cluster` answers every record of `dir`.
pub fn assert_serves_all(
    local: &(impl Diagnose + ?Sized),
    snapshot: &Snapshot,
    cluster: &str,
    dir: &Path,
) {
    let expected = expected_records(dir);
    assert!(!expected.is_empty(), "no records in {}", dir.display());
    let pods = pods_of(snapshot, cluster);
    assert!(pods.len() >= 2, "a primary and a secondary: {pods:?}");
    for pod in pods {
        for e in &expected {
            wait_answer(pod.dns.port(), &e.fqdn, &e.rtype, &e.values, local);
        }
    }
}
