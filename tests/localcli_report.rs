//! The session report: how each kind's status reads as ready / settled,
//! how bad manifests appear, the exact `status.json` shape, the table, and
//! the `--once` verdict.

use bind_operator::api::is_terminal_failure;
use bind_operator::local::manifests::{DocRef, ManifestError, ManifestKind, Problem};
use bind_operator::local::render::{STATUS_FILE, StatusFile, render_table};
use bind_operator::local::report::{
    EXIT_NOT_CONVERGED, EXIT_NOT_READY, EXIT_READY, ObjectStatus, PodEndpoint, PodRole, Snapshot,
    build_snapshot, classify,
};
use bind_operator::local::runtime::PodPorts;
use serde_json::{Value, json};
use std::path::PathBuf;

fn object(kind: &str, name: &str, generation: i64, status: Value) -> Value {
    json!({
        "apiVersion": "bind.unkin.net/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": "default", "generation": generation},
        "status": status,
    })
}

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": "2024-01-01T00:00:00Z"})
}

fn row(kind: &str, name: &str, ready: bool, phase: &str) -> ObjectStatus {
    ObjectStatus {
        kind: kind.into(),
        namespace: "default".into(),
        name: name.into(),
        ready,
        phase: phase.into(),
        reason: String::new(),
        message: String::new(),
        settled: true,
    }
}

/// A Ready pod of `example`; the role follows from the name's ordinal.
fn pod(name: &str, role: PodRole, port: u16) -> PodEndpoint {
    let ordinal: u32 = name.rsplit_once('-').unwrap().1.parse().unwrap();
    let ports = PodPorts {
        dns: port,
        control: port + 1000,
        stats: port + 2000,
    };
    let mut p = PodEndpoint::new("default", name, "example", ordinal, ports, PathBuf::new());
    assert_eq!(p.role, role);
    p.running = true;
    p.ready = true;
    p
}

#[test]
fn cluster_is_ready_only_when_config_is_applied_and_ready() {
    let both = object(
        "BindCluster",
        "c",
        3,
        json!({"observedGeneration": 3, "conditions": [
            cond("ConfigApplied", "True", "Applied", ""), cond("Ready", "True", "Ready", "2/2 pods ready")]}),
    );
    let s = classify(ManifestKind::BindCluster, &both);
    assert!(s.ready && s.settled);
    assert_eq!(
        (s.phase.as_str(), s.reason.as_str(), s.message.as_str()),
        ("Ready", "Ready", "2/2 pods ready")
    );

    // A broken option: terminal, with the checkconf detail.
    let failed = object(
        "BindCluster",
        "c",
        3,
        json!({"observedGeneration": 3, "conditions": [
            cond("ConfigApplied", "False", "ReconfigFailed", "named.conf:12: unknown option 'bogus'"),
            cond("Ready", "True", "Ready", "")]}),
    );
    let s = classify(ManifestKind::BindCluster, &failed);
    assert!(!s.ready && s.settled);
    assert_eq!(
        (s.phase.as_str(), s.reason.as_str()),
        ("Error", "ReconfigFailed")
    );
    assert!(s.message.contains("named.conf:12"));

    // Still propagating: not settled.
    let moving = object(
        "BindCluster",
        "c",
        3,
        json!({"observedGeneration": 3, "conditions": [
            cond("ConfigApplied", "False", "Propagating", "awaiting config on c-1")]}),
    );
    let s = classify(ManifestKind::BindCluster, &moving);
    assert!(!s.ready && !s.settled);
    assert_eq!(
        (s.phase.as_str(), s.reason.as_str()),
        ("Pending", "Propagating")
    );

    // Ready for an older generation: the new spec is not yet observed.
    let stale = object("BindCluster", "c", 4, both["status"].clone());
    let s = classify(ManifestKind::BindCluster, &stale);
    assert!(!s.ready && !s.settled);
}

#[test]
fn zones_and_records_follow_their_phase() {
    let zone = object(
        "BindZone",
        "z",
        1,
        json!({"observedGeneration": 1, "phase": "Ready", "serial": 7,
               "conditions": [cond("Ready", "True", "Served", "serial 7 on 2 pods")]}),
    );
    let s = classify(ManifestKind::BindZone, &zone);
    assert!(s.ready && s.settled);
    assert_eq!(
        (s.reason.as_str(), s.message.as_str()),
        ("Served", "serial 7 on 2 pods")
    );

    let apex = object(
        "DNSRecord",
        "r",
        2,
        json!({"observedGeneration": 2, "phase": "Error", "reason": "ApexNSUnsupported", "message": "use nameservers"}),
    );
    let s = classify(ManifestKind::DNSRecord, &apex);
    assert!(!s.ready && s.settled);
    assert_eq!(
        (s.phase.as_str(), s.reason.as_str(), s.message.as_str()),
        ("Error", "ApexNSUnsupported", "use nameservers")
    );

    let pending = object(
        "DNSRecord",
        "r",
        1,
        json!({"observedGeneration": 1, "phase": "Pending", "reason": "ZoneNotReady"}),
    );
    assert!(!classify(ManifestKind::DNSRecord, &pending).settled);
    // Waiting for something that does not exist will not end by itself.
    let orphan = object(
        "DNSRecord",
        "r",
        1,
        json!({"observedGeneration": 1, "phase": "Pending", "reason": "ZoneNotFound"}),
    );
    let s = classify(ManifestKind::DNSRecord, &orphan);
    assert!(s.settled && !s.ready);
    assert_eq!(s.phase, "Pending");

    // No status yet, and being deleted: neither is settled.
    let mut fresh = object("DNSRecord", "r", 1, Value::Null);
    fresh.as_object_mut().unwrap().remove("status");
    let s = classify(ManifestKind::DNSRecord, &fresh);
    assert_eq!(
        (s.phase.as_str(), s.ready, s.settled),
        ("Pending", false, false)
    );
    let mut deleting = object(
        "DNSRecord",
        "r",
        1,
        json!({"observedGeneration": 1, "phase": "Ready"}),
    );
    deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    let s = classify(ManifestKind::DNSRecord, &deleting);
    assert_eq!(
        (s.phase.as_str(), s.ready, s.settled),
        ("Deleting", false, false)
    );
}

#[test]
fn tsig_keys_use_the_ready_condition_and_its_generation() {
    let ok = object(
        "BindTSIGKey",
        "k",
        2,
        json!({"conditions": [{
        "type": "Ready", "status": "True", "reason": "KeyAvailable", "message": "",
        "observedGeneration": 2, "lastTransitionTime": "2024-01-01T00:00:00Z"}]}),
    );
    assert!(classify(ManifestKind::BindTSIGKey, &ok).ready);
    let missing = object(
        "BindTSIGKey",
        "k",
        1,
        json!({"observedGeneration": 1,
        "conditions": [cond("Ready", "False", "SecretNotFound", "secret tsig not found")]}),
    );
    let s = classify(ManifestKind::BindTSIGKey, &missing);
    assert!(s.settled && !s.ready);
    assert_eq!(s.phase, "Error");
    for reason in [
        "ReconfigFailed",
        "ExecFailed",
        "InvalidSpec",
        "SecretNotFound",
        "ApexNSUnsupported",
    ] {
        assert!(is_terminal_failure(reason), "{reason}");
    }
    for reason in [
        "Propagating",
        "PodsNotReady",
        "Pending",
        "Progressing",
        "WaitingForPods",
        // Failure-sounding names count only when a controller lists them.
        "SomethingFailed",
        "",
    ] {
        assert!(!is_terminal_failure(reason), "{reason}");
    }
}

fn manifest_error(
    file: &str,
    doc: usize,
    kind: Option<&str>,
    name: Option<&str>,
    message: &str,
) -> ManifestError {
    let mut e = ManifestError::new(
        DocRef {
            file: file.into(),
            document: Some(doc),
            line: Some(1),
        },
        Problem::Invalid,
        message,
    );
    e.kind = kind.map(Into::into);
    e.namespace = kind.map(|_| "default".into());
    e.name = name.map(Into::into);
    e
}

fn sample() -> Snapshot {
    let objects = vec![
        row("DNSRecord", "www", true, "Ready"),
        row("BindZone", "example-com", true, "Ready"),
        row("DNSRecord", "mail", true, "Ready"),
        row("BindCluster", "example", true, "Ready"),
    ];
    let errors = vec![
        manifest_error(
            "records.yaml",
            2,
            Some("DNSRecord"),
            Some("mail"),
            "update refused: spec.zoneRef: immutable",
        ),
        manifest_error(
            "broken.yaml",
            1,
            None,
            None,
            "failed to parse YAML: bad indentation",
        ),
        manifest_error(
            "records.yaml",
            3,
            Some("DNSRecord"),
            Some("apex"),
            "spec: use BindZone.spec.nameservers",
        ),
    ];
    let pods = vec![
        pod("example-10", PodRole::Secondary, 15312),
        pod("example-0", PodRole::Primary, 15300),
        pod("example-2", PodRole::Secondary, 15302),
    ];
    build_snapshot(objects, &pods, &errors, false)
}

#[test]
fn bad_manifests_are_rows_and_replace_the_object_they_name() {
    let s = sample();
    let ids: Vec<(String, String, bool, String)> = s
        .objects
        .iter()
        .map(|o| (o.kind.clone(), o.name.clone(), o.ready, o.reason.clone()))
        .collect();
    let id = |k: &str, n: &str, r: bool, reason: &str| {
        (k.to_owned(), n.to_owned(), r, reason.to_owned())
    };
    assert_eq!(
        ids,
        vec![
            id("BindCluster", "example", true, ""),
            id("BindZone", "example-com", true, ""),
            id("DNSRecord", "apex", false, "InvalidManifest"),
            id("DNSRecord", "mail", false, "InvalidManifest"),
            id("DNSRecord", "www", true, ""),
            id("", "", false, "InvalidManifest"),
        ]
    );
    let mail = &s.objects[3];
    assert_eq!(
        mail.message,
        "records.yaml document 2 (line 1): update refused: spec.zoneRef: immutable"
    );
    assert_eq!(mail.phase, "Error");
    // Bad manifests are terminal: the rest being settled, this converged.
    assert!(s.converged);
    let pods: Vec<&str> = s.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pods, ["example-0", "example-2", "example-10"]);
    // A write the API server refused is told apart from a bad document.
    let mut refused = manifest_error(
        "r.yaml",
        1,
        Some("DNSRecord"),
        Some("www"),
        "failed to apply: no (422 Invalid)",
    );
    refused.problem = Problem::Rejected;
    let s = build_snapshot(vec![], &[], &[refused], false);
    assert_eq!(
        (s.objects[0].reason.as_str(), s.objects[0].ready),
        ("ApplyFailed", false)
    );
    // A pending sync holds convergence back.
    assert!(!build_snapshot(vec![], &[], &[], true).converged);
}

#[test]
fn status_json_has_exactly_the_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut file = StatusFile::new(&state).unwrap();
    let s = sample();
    assert!(file.write(&s).unwrap());
    assert!(
        !file.write(&s).unwrap(),
        "unchanged snapshot is not rewritten"
    );
    let text = std::fs::read_to_string(state.join(STATUS_FILE)).unwrap();
    assert!(!state.join("status.json.tmp").exists());
    let v: Value = serde_json::from_str(&text).unwrap();

    let keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    assert_eq!(keys(&v), ["converged", "objects", "pods", "ready"]);
    assert_eq!(v["converged"], true);
    // Converged with bad manifests: nothing more happens on its own, but
    // not everything is Ready.
    assert_eq!(v["ready"], false);
    for p in v["pods"].as_array().unwrap() {
        assert_eq!(
            keys(p),
            [
                "cluster",
                "control",
                "dns",
                "name",
                "namespace",
                "ordinal",
                "ready",
                "restarts",
                "role",
                "running"
            ]
        );
    }
    assert_eq!(
        v["pods"][0],
        json!({"namespace": "default", "name": "example-0", "cluster": "example", "role": "primary",
               "ordinal": 0, "dns": "127.0.0.1:15300", "control": "127.0.0.1:16300",
               "running": true, "ready": true, "restarts": 0})
    );
    for o in v["objects"].as_array().unwrap() {
        assert_eq!(
            keys(o),
            [
                "kind",
                "message",
                "name",
                "namespace",
                "phase",
                "ready",
                "reason"
            ]
        );
        assert!(o["ready"].is_boolean());
        for k in ["kind", "namespace", "name", "phase", "reason", "message"] {
            assert!(o[k].is_string(), "{k} is a string");
        }
    }
    assert_eq!(
        v["objects"][5],
        json!({"kind": "", "namespace": "", "name": "", "ready": false, "phase": "Error",
               "reason": "InvalidManifest", "message": "broken.yaml document 1 (line 1): failed to parse YAML: bad indentation"})
    );
    // Round trip: the file parses back into the same snapshot.
    let back: Snapshot = serde_json::from_str(&text).unwrap();
    assert_eq!(back.pods, s.pods);
    assert_eq!(back.objects.len(), s.objects.len());
    for (a, b) in back.objects.iter().zip(&s.objects) {
        assert_eq!(
            (&a.kind, &a.name, a.ready, &a.message),
            (&b.kind, &b.name, b.ready, &b.message)
        );
    }
}

#[test]
fn table_rendering_is_stable() {
    let expected = "\
3/6 objects ready, 3 pods, converged; not ready

NAMESPACE  CLUSTER  POD         ROLE       DNS              READY  RESTARTS
default    example  example-0   primary    127.0.0.1:15300  yes    0
default    example  example-2   secondary  127.0.0.1:15302  yes    0
default    example  example-10  secondary  127.0.0.1:15312  yes    0

KIND         NAMESPACE  NAME         READY  PHASE  REASON           MESSAGE
BindCluster  default    example      yes    Ready  -                -
BindZone     default    example-com  yes    Ready  -                -
DNSRecord    default    apex         no     Error  InvalidManifest  records.yaml document 3 (line 1): spec: use BindZone.spec.nameservers
DNSRecord    default    mail         no     Error  InvalidManifest  records.yaml document 2 (line 1): update refused: spec.zoneRef: immutable
DNSRecord    default    www          yes    Ready  -                -
-            -          -            no     Error  InvalidManifest  broken.yaml document 1 (line 1): failed to parse YAML: bad indentation

Errors:
  DNSRecord default/apex (InvalidManifest): records.yaml document 3 (line 1): spec: use BindZone.spec.nameservers
  DNSRecord default/mail (InvalidManifest): records.yaml document 2 (line 1): update refused: spec.zoneRef: immutable
  manifest (InvalidManifest): broken.yaml document 1 (line 1): failed to parse YAML: bad indentation
";
    assert_eq!(render_table(&sample()), expected);

    // Long multi-line messages are flattened and cut; the JSON keeps them.
    let mut s = sample();
    s.objects[0].message = format!("line one\nline two {}", "x".repeat(200));
    let table = render_table(&s);
    let line = table
        .lines()
        .find(|l| l.starts_with("BindCluster"))
        .unwrap();
    let shown = format!("line one line two {}...", "x".repeat(100 - 3 - 18));
    assert!(line.ends_with(&format!("  {shown}")), "{line}");
}

#[test]
fn big_tables_show_only_what_is_not_ready() {
    let mut objects: Vec<ObjectStatus> = (0..150)
        .map(|i| row("DNSRecord", &format!("r{i:03}"), true, "Ready"))
        .collect();
    objects[7].ready = false;
    objects[7].phase = "Pending".into();
    let table = render_table(&build_snapshot(objects, &[], &[], false));
    assert!(
        table.starts_with("149/150 objects ready, 0 pods, converged; not ready\n"),
        "{table}"
    );
    assert!(
        table.contains("DNSRecord  default    r007  no     Pending"),
        "{table}"
    );
    assert!(
        table.ends_with("(149 more objects not shown; all are in status.json)\n"),
        "{table}"
    );
}

#[test]
fn once_exit_codes_and_summary() {
    let all_ready = build_snapshot(vec![row("BindZone", "z", true, "Ready")], &[], &[], false);
    let o = all_ready.once_outcome();
    assert_eq!((o.code, o.failing.len()), (EXIT_READY, 0));
    assert_eq!(o.summary(), "all 1 objects are Ready\n");

    let o = sample().once_outcome();
    assert_eq!(o.code, EXIT_NOT_READY);
    assert_eq!(o.summary(), "\
3 of 6 objects are not Ready:
  DNSRecord default/apex: Error (InvalidManifest): records.yaml document 3 (line 1): spec: use BindZone.spec.nameservers
  DNSRecord default/mail: Error (InvalidManifest): records.yaml document 2 (line 1): update refused: spec.zoneRef: immutable
  manifest: Error (InvalidManifest): broken.yaml document 1 (line 1): failed to parse YAML: bad indentation
");

    let mut moving = row("BindCluster", "c", false, "Pending");
    moving.settled = false;
    moving.reason = "Propagating".into();
    let o = build_snapshot(vec![moving], &[], &[], false).once_outcome();
    assert_eq!(o.code, EXIT_NOT_CONVERGED);
    assert_eq!(
        o.summary(),
        "did not converge: 1 of 1 objects are not Ready:\n  BindCluster default/c: Pending (Propagating)\n"
    );
    // Even all-ready objects do not pass while a sync is pending.
    let o =
        build_snapshot(vec![row("BindZone", "z", true, "Ready")], &[], &[], true).once_outcome();
    assert_eq!(o.code, EXIT_NOT_CONVERGED);
}
