//! Loading a manifest directory: examples/ loads cleanly; every class of bad
//! document is reported with its file and document number while the good
//! documents around it still load; directory walking rules.

use crate::support_localcli as support;

use std::collections::BTreeSet;

use bind_operator::local::manifest_dir::{ManifestDir, load_dir};
use bind_operator::local::manifests::{ManifestKind, Problem};
use support::{examples_dir, record, write, zone};

fn keys(loaded: &bind_operator::local::manifest_dir::Loaded) -> BTreeSet<String> {
    loaded.manifests.iter().map(|m| m.key.to_string()).collect()
}

#[test]
fn examples_load_without_errors() {
    let loaded = load_dir(examples_dir());
    assert!(loaded.errors.is_empty(), "{:#?}", loaded.errors);
    assert!(!loaded.root_unreadable);
    assert_eq!(
        keys(&loaded),
        BTreeSet::from(
            [
                "BindCluster default/example",
                "BindTSIGKey default/transfer-key",
                "BindTSIGKey default/update-key",
                "BindZone default/example-com",
                "DNSRecord default/spf-example-com",
                "DNSRecord default/www-example-com",
            ]
            .map(String::from)
        )
    );
    // Every object is what the API server would store: namespace filled in,
    // schema defaults applied.
    let zone = loaded
        .manifests
        .iter()
        .find(|m| m.key.kind == ManifestKind::BindZone)
        .unwrap();
    assert_eq!(zone.object["metadata"]["namespace"], "default");
    assert_eq!(zone.object["spec"]["type"], "primary");
    assert_eq!(zone.object["spec"]["catalog"], true);
    let www = loaded
        .manifests
        .iter()
        .find(|m| m.key.name == "www-example-com")
        .unwrap();
    assert_eq!(www.at.file.to_str(), Some("dnsrecords.yaml"));
    assert_eq!(www.at.document, Some(1));
}

/// One file per class of bad document, each with a good document after the
/// bad one; every good one must load and every bad one be reported where it is.
#[test]
fn each_bad_document_is_reported_by_file_and_document_and_good_ones_load() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = |n: &str| record(n, "example-com", n, "192.0.2.1");
    // Unparseable YAML in the middle of a file: the document after it loads.
    write(
        d,
        "a-parse.yaml",
        &format!(
            "{}---\nkind: DNSRecord\nmetadata: {{name: [broken\n---\n{}",
            good("ok-a1"),
            good("ok-a2")
        ),
    );
    // Unknown kind, wrong apiVersion for a known kind, no kind at all.
    write(
        d,
        "b-kind.yaml",
        &format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n---\napiVersion: v1\nkind: BindZone\nmetadata:\n  name: z\n---\nmetadata:\n  name: nokind\n---\n{}",
            good("ok-b")
        ),
    );
    // Missing name.
    write(
        d,
        "c-name.yaml",
        &format!(
            "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  generateName: rec-\nspec:\n  zoneRef: example-com\n  name: www\n  type: A\n  values: [192.0.2.1]\n---\n{}",
            good("ok-c")
        ),
    );
    // Schema violation (values must have at least one item; ttl a number).
    write(
        d,
        "d-schema.yaml",
        &format!(
            "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: bad-schema\nspec:\n  zoneRef: example-com\n  name: www\n  type: A\n  ttl: soon\n  values: []\n---\n{}",
            good("ok-d")
        ),
    );
    // CEL: an apex NS DNSRecord, and an A record with an IPv6 value.
    write(
        d,
        "e-cel.yaml",
        &format!(
            "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: apex-ns\nspec:\n  zoneRef: example-com\n  name: \"@\"\n  type: NS\n  values: [ns1.example.com.]\n---\n{}---\napiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: a-v6\nspec:\n  zoneRef: example-com\n  name: v6\n  type: A\n  values: [\"2001:db8::1\"]\n",
            good("ok-e")
        ),
    );
    // Duplicate of ok-a1 (defined first in a-parse.yaml), and a document
    // that is not a mapping.
    write(
        d,
        "f-dup.yaml",
        &format!(
            "{}---\n- just\n- a list\n---\n{}",
            good("ok-a1"),
            good("ok-f")
        ),
    );

    let loaded = load_dir(d);
    assert_eq!(
        keys(&loaded),
        ["ok-a1", "ok-a2", "ok-b", "ok-c", "ok-d", "ok-e", "ok-f"]
            .iter()
            .map(|n| format!("DNSRecord default/{n}"))
            .collect()
    );
    let found: Vec<(String, Option<usize>, Problem)> = loaded
        .errors
        .iter()
        .map(|e| (e.at.file.display().to_string(), e.at.document, e.problem))
        .collect();
    assert_eq!(
        found,
        vec![
            ("a-parse.yaml".into(), Some(2), Problem::Parse),
            ("b-kind.yaml".into(), Some(1), Problem::UnknownKind),
            ("b-kind.yaml".into(), Some(2), Problem::UnknownKind),
            ("b-kind.yaml".into(), Some(3), Problem::UnknownKind),
            ("c-name.yaml".into(), Some(1), Problem::MissingName),
            ("d-schema.yaml".into(), Some(1), Problem::Invalid),
            ("e-cel.yaml".into(), Some(1), Problem::Invalid),
            ("e-cel.yaml".into(), Some(3), Problem::Invalid),
            ("f-dup.yaml".into(), Some(1), Problem::Duplicate),
            ("f-dup.yaml".into(), Some(2), Problem::Parse),
        ],
        "{:#?}",
        loaded.errors
    );
    let msg = |file: &str, doc: usize| {
        loaded
            .errors
            .iter()
            .find(|e| e.at.file.to_str() == Some(file) && e.at.document == Some(doc))
            .unwrap()
            .to_string()
    };
    // The message names the place (file, document, first line) and the cause.
    let parse = msg("a-parse.yaml", 2);
    assert!(
        parse.starts_with("a-parse.yaml document 2 (line 12): failed to parse YAML"),
        "{parse}"
    );
    assert!(
        parse.contains("line 13"),
        "parser position counts from the top of the file: {parse}"
    );
    assert!(msg("b-kind.yaml", 1).contains("unsupported kind \"Deployment\""));
    assert!(
        msg("b-kind.yaml", 2).contains("kind BindZone needs apiVersion bind.unkin.net/v1alpha1")
    );
    assert!(msg("b-kind.yaml", 3).contains("apiVersion and kind are required"));
    assert!(
        msg("c-name.yaml", 1).contains("metadata.name is required (generateName is not supported")
    );
    let schema = msg("d-schema.yaml", 1);
    assert!(
        schema.contains("spec.ttl") && schema.contains("spec.values"),
        "{schema}"
    );
    assert!(msg("e-cel.yaml", 1).contains("BindZone.spec.nameservers"));
    assert!(
        msg("e-cel.yaml", 3).contains("IPv4"),
        "{}",
        msg("e-cel.yaml", 3)
    );
    assert!(msg("f-dup.yaml", 1).contains("already defined in a-parse.yaml document 1 (line 1)"));
    assert!(msg("f-dup.yaml", 2).contains("not a mapping"));

    // Errors that name their object say which one; a parse error cannot,
    // so its whole file is uncertain (its objects must not be pruned).
    let apex = loaded
        .errors
        .iter()
        .find(|e| e.name.as_deref() == Some("apex-ns"))
        .unwrap();
    assert_eq!(apex.key().unwrap().to_string(), "DNSRecord default/apex-ns");
    assert!(
        loaded
            .uncertain
            .iter()
            .any(|p| p.to_str() == Some("a-parse.yaml"))
    );
    assert!(
        loaded
            .uncertain
            .iter()
            .any(|p| p.to_str() == Some("f-dup.yaml"))
    );
    assert!(
        !loaded
            .uncertain
            .iter()
            .any(|p| p.to_str() == Some("d-schema.yaml"))
    );
}

#[test]
fn namespaces_secrets_config_maps_and_json_files_load() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dns\n  namespace: ignored\n",
    );
    write(
        d,
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tsig\n  namespace: dns\n  resourceVersion: \"42\"\n  uid: abc\nstringData:\n  secret: c2VjcmV0\n",
    );
    write(
        d,
        "cm.json",
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}, "data": {"a": "b"}}
           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two", "namespace": "dns"}}"#,
    );
    let loaded = load_dir(d);
    assert!(loaded.errors.is_empty(), "{:#?}", loaded.errors);
    assert_eq!(
        keys(&loaded),
        BTreeSet::from(
            [
                "ConfigMap default/one",
                "ConfigMap dns/two",
                "Namespace dns",
                "Secret dns/tsig"
            ]
            .map(String::from)
        )
    );
    let secret = loaded
        .manifests
        .iter()
        .find(|m| m.key.kind == ManifestKind::Secret)
        .unwrap();
    // stringData folded into base64 data; server-owned metadata dropped.
    assert_eq!(secret.object["data"]["secret"], "YzJWamNtVjA=");
    assert!(secret.object.get("stringData").is_none());
    assert!(secret.object["metadata"].get("resourceVersion").is_none());
    assert!(secret.object["metadata"].get("uid").is_none());
    let ns = loaded
        .manifests
        .iter()
        .find(|m| m.key.kind == ManifestKind::Namespace)
        .unwrap();
    assert!(ns.object["metadata"].get("namespace").is_none());
    let two = loaded
        .manifests
        .iter()
        .find(|m| m.key.name == "two")
        .unwrap();
    assert_eq!((two.at.document, two.at.line), (Some(2), Some(2)));
}

#[test]
fn walk_is_recursive_sorted_and_skips_hidden_and_kustomize_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "b.yaml", &record("from-b", "z", "b", "192.0.2.2"));
    write(
        d,
        "a/nested/deep.yml",
        &record("from-deep", "z", "d", "192.0.2.3"),
    );
    write(d, ".hidden.yaml", &record("hidden", "z", "h", "192.0.2.4"));
    write(d, ".git/x.yaml", &record("in-git", "z", "g", "192.0.2.5"));
    write(d, "kustomization.yaml", "resources: [b.yaml]\n");
    write(d, "notes.txt", "not a manifest");
    write(d, "z.YAML", &zone("upper", "upper.example"));
    let loaded = load_dir(d);
    assert!(loaded.errors.is_empty(), "{:#?}", loaded.errors);
    let order: Vec<String> = loaded
        .manifests
        .iter()
        .map(|m| m.at.file.display().to_string())
        .collect();
    assert_eq!(order, ["a/nested/deep.yml", "b.yaml", "z.YAML"]);
}

#[test]
fn rescans_reparse_only_changed_files_and_notice_removals() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "r.yaml", &record("r", "z", "r", "192.0.2.1"));
    let mut md = ManifestDir::new(d);
    assert!(md.load().changed);
    assert!(!md.load().changed, "nothing changed between scans");
    write(d, "r.yaml", &record("r", "z", "r", "192.0.2.9"));
    let loaded = md.load();
    assert!(loaded.changed);
    assert_eq!(loaded.manifests[0].object["spec"]["values"][0], "192.0.2.9");
    std::fs::remove_file(d.join("r.yaml")).unwrap();
    let loaded = md.load();
    assert!(loaded.changed && loaded.manifests.is_empty());
}

#[test]
fn a_missing_directory_is_an_error_value_that_protects_everything() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = load_dir(dir.path().join("nope"));
    assert!(loaded.root_unreadable);
    assert_eq!(loaded.errors.len(), 1);
    assert_eq!(loaded.errors[0].problem, Problem::Read);
    assert!(
        loaded.errors[0]
            .to_string()
            .contains("failed to read manifest directory")
    );
    assert!(loaded.is_uncertain(&bind_operator::local::manifests::DocRef::file("any.yaml")));
}

/// The one loader (local mode and `render` both read through it) numbers
/// documents from 1 in the order they appear: a leading or trailing `---`
/// and empty or comment-only documents take no number, a document that
/// does not parse takes one, and the documents after it still load. JSON
/// files number their concatenated values the same way. A mapping that
/// repeats a key is refused, as kubectl refuses it.
#[test]
fn documents_are_numbered_in_order_whatever_the_separators_yaml_and_json_alike() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = |n: &str| record(n, "example-com", n, "192.0.2.1");
    let head = format!("---\n# only a comment\n---\n{}---\n\n---\n", good("r1"));
    let broken_at = head.lines().count() + 1;
    let broken = "kind: DNSRecord\nmetadata: {name: [broken\n---\n";
    let dup_at = broken_at + broken.lines().count();
    let dup = "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nkind: DNSRecord\nmetadata: {name: d}\n---\n";
    write(
        d,
        "a.yaml",
        &format!("{head}{broken}{dup}{}---\n", good("r2")),
    );
    let json = |n: &str| {
        let v: serde_json::Value = bind_operator::yaml::from_str(&good(n)).unwrap();
        serde_json::to_string(&v).unwrap()
    };
    write(
        d,
        "b.json",
        &format!("{}\n{}\n{{\"kind\": }}\n", json("j1"), json("j2")),
    );

    let loaded = load_dir(d);
    let names: BTreeSet<String> = loaded
        .manifests
        .iter()
        .map(|m| m.key.name.clone())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["r1", "r2", "j1", "j2"].map(String::from))
    );
    let at = |m: &bind_operator::local::manifests::Manifest| m.at.to_string();
    let r2 = loaded
        .manifests
        .iter()
        .find(|m| m.key.name == "r2")
        .unwrap();
    assert!(at(r2).starts_with("a.yaml document 4 "), "{}", at(r2));
    let j2 = loaded
        .manifests
        .iter()
        .find(|m| m.key.name == "j2")
        .unwrap();
    assert!(at(j2).starts_with("b.json document 2 "), "{}", at(j2));

    let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(
        errors[0].starts_with(&format!(
            "a.yaml document 2 (line {broken_at}): failed to parse YAML"
        )),
        "{errors:#?}"
    );
    // The parser's position counts from the top of the file too.
    assert!(
        errors[0].contains(&format!("line {}", broken_at + 1)),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].starts_with(&format!(
            "a.yaml document 3 (line {dup_at}): failed to parse YAML"
        )) && errors[1].contains("duplicate mapping key: kind"),
        "{errors:#?}"
    );
    assert!(
        errors[2].starts_with("b.json document 3 (line 3)"),
        "{errors:#?}"
    );
}

/// What `kubectl get dnsrecords -o yaml` prints is one `kind: List`
/// document: its items load as objects of their own (server-owned metadata
/// dropped as for any export), numbered as the List's document, and the
/// document after it is the next number.
#[test]
fn a_kind_list_document_loads_its_items_under_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let item = |n: &str| {
        let mut v: serde_json::Value =
            bind_operator::yaml::from_str(&record(n, "example-com", n, "192.0.2.1")).unwrap();
        v["metadata"]["resourceVersion"] = "42".into();
        v
    };
    let list = serde_json::json!({
        "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
        "items": [item("l1"), item("l2")],
    });
    let text = format!(
        "{}---\n{}",
        bind_operator::yaml::to_string(&list).unwrap(),
        record("after", "example-com", "after", "192.0.2.2")
    );
    write(d, "export.yaml", &text);
    let loaded = load_dir(d);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let at = |name: &str| {
        let m = loaded
            .manifests
            .iter()
            .find(|m| m.key.name == name)
            .unwrap();
        assert!(
            m.object["metadata"].get("resourceVersion").is_none(),
            "{name}"
        );
        m.at.to_string()
    };
    assert!(
        at("l1").starts_with("export.yaml document 1 "),
        "{}",
        at("l1")
    );
    assert!(
        at("l2").starts_with("export.yaml document 1 "),
        "{}",
        at("l2")
    );
    assert!(
        at("after").starts_with("export.yaml document 2 "),
        "{}",
        at("after")
    );
}
