//! The manifests in examples/ are what README tells users to apply: every
//! document must deserialise into our types and serialise back with no field
//! lost or unknown, pass the CRDs' admission rules, and reference each other
//! consistently (the keys, cluster and zone they name exist).

use std::collections::BTreeSet;
use std::path::PathBuf;

use bind_operator::api::admission::admit;
use bind_operator::api::{BindCluster, BindTSIGKey, BindZone, DNSRecord};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Every (file, document index, document) in examples/.
fn documents() -> Vec<(String, usize, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    paths.sort();
    let mut docs = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for (i, doc) in bind_operator::yaml::documents(&text)
            .into_iter()
            .enumerate()
        {
            let value: Value = doc
                .value
                .unwrap_or_else(|e| panic!("{file} document {i} is not valid YAML: {e}"));
            docs.push((file.clone(), i, value));
        }
    }
    docs
}

/// Paths present in `input` that are missing or different in `output`.
fn lost(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => lost(v, w, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k} (dropped: unknown to the Rust types)")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                lost(v, w, &format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path} ({a} became {b})")),
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(file: &str, i: usize, doc: &Value) -> T {
    let typed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{file} document {i} does not deserialise: {e}"));
    let output = serde_json::to_value(&typed).unwrap();
    let mut problems = Vec::new();
    lost(doc, &output, "", &mut problems);
    assert!(
        problems.is_empty(),
        "{file} document {i} does not round-trip: {problems:#?}"
    );
    // Serialising again from the re-read output is stable (no field flips).
    let again: T = serde_json::from_value(output.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        output,
        "{file} document {i}"
    );
    typed
}

#[test]
fn examples_round_trip_pass_admission_and_reference_each_other() {
    let mut keys = Vec::new();
    let mut clusters = Vec::new();
    let mut zones = Vec::new();
    let mut records = Vec::new();
    for (file, i, doc) in documents() {
        if let Err(e) = admit(&doc, None) {
            panic!("{file} document {i} would be rejected by the API server: {e}");
        }
        match doc["kind"].as_str() {
            Some("BindTSIGKey") => keys.push(round_trip::<BindTSIGKey>(&file, i, &doc)),
            Some("BindCluster") => clusters.push(round_trip::<BindCluster>(&file, i, &doc)),
            Some("BindZone") => zones.push(round_trip::<BindZone>(&file, i, &doc)),
            Some("DNSRecord") => records.push(round_trip::<DNSRecord>(&file, i, &doc)),
            other => panic!("{file} document {i} has unexpected kind {other:?}"),
        }
    }

    assert!(!keys.is_empty(), "examples need a BindTSIGKey");
    assert_eq!(clusters.len(), 1, "examples need one BindCluster");
    assert_eq!(zones.len(), 1, "examples need one BindZone");
    assert_eq!(records.len(), 2, "examples need two DNSRecords");

    let key_names: BTreeSet<&str> = keys
        .iter()
        .map(|k| k.metadata.name.as_deref().unwrap())
        .collect();
    let cluster = &clusters[0];
    let cluster_name = cluster.metadata.name.as_deref().unwrap();
    assert_eq!(cluster.spec.replicas, 2, "one primary and one secondary");
    let transfer = cluster
        .transfer_key_ref()
        .expect("the example catalog names a transfer key");
    assert!(
        key_names.contains(transfer),
        "transferKeyRef {transfer} is not an example key"
    );

    let zone = &zones[0];
    assert_eq!(zone.spec.cluster_ref, cluster_name);
    assert!(
        !zone.spec.nameservers.is_empty(),
        "the example zone shows spec.nameservers"
    );
    assert!(
        zone.spec.soa.mname.is_some(),
        "the example zone shows spec.soa"
    );
    let update = zone
        .spec
        .update_key_ref
        .as_deref()
        .expect("the example zone names an update key");
    assert!(
        key_names.contains(update),
        "updateKeyRef {update} is not an example key"
    );
    for key in &keys {
        if let Some(c) = &key.spec.cluster_ref {
            assert_eq!(c, cluster_name);
        }
    }
    for record in &records {
        assert_eq!(
            Some(record.spec.zone_ref.as_str()),
            zone.metadata.name.as_deref()
        );
    }
}

#[test]
fn the_round_trip_check_notices_a_dropped_field() {
    // Guard against a check that cannot fail: a misspelt field is reported.
    let doc: Value = serde_json::json!({
        "apiVersion": "bind.unkin.net/v1alpha1", "kind": "DNSRecord",
        "metadata": {"name": "x"},
        "spec": {"zoneRef": "z", "name": "www", "type": "A", "values": ["192.0.2.1"], "tll": 60}
    });
    let typed: DNSRecord = serde_json::from_value(doc.clone()).unwrap();
    let mut problems = Vec::new();
    lost(
        &doc,
        &serde_json::to_value(typed).unwrap(),
        "",
        &mut problems,
    );
    assert_eq!(problems, [".spec.tll (dropped: unknown to the Rust types)"]);
}
