//! Golden tests: whole rendered BIND files for a small cluster, a cluster
//! with views and forward zones, and a cluster with several keys, rendered
//! from the YAML manifests in tests/fixtures/render/<case>/ by the offline
//! `render` path (with `--secrets-from-dir`, so keys.conf holds the fixtures'
//! material). With UPDATE_GOLDEN=1 each test rewrites tests/golden/<case>/
//! and then FAILS, so every rewrite is a diff someone reviews before the
//! tests pass again. Every rendered named.conf must also pass
//! named-checkconf, as rendered (rndc.key included), with the data
//! directory the real entrypoint lays out.
//!
//! kubernetes.yaml is not a golden here: render_objects proves it equal to
//! what the controller applies.

use crate::support_bind as harness;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bind_operator::bind::Endpoint;
use bind_operator::bind::commands;
use bind_operator::bind::layout::mount;
use bind_operator::bind::parse::parse_checkconf;
use bind_operator::offline::objects::OBJECTS_FILE;
use bind_operator::offline::{RenderOptions, render_dir};

/// A stand-in for the primary Service's ClusterIP.
const PRIMARY_IP: &str = "10.96.0.10";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn read_tree(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read_to_string(&p).unwrap());
            }
        }
    }
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out
}

fn render_case(case: &str) -> (tempfile::TempDir, BTreeMap<String, String>) {
    let out = tempfile::tempdir().unwrap();
    let opts = RenderOptions {
        primary: Endpoint::new(PRIMARY_IP.parse().unwrap(), 53).unwrap(),
        secrets_from_dir: true,
    };
    let report = render_dir(
        &root().join("fixtures/render").join(case),
        out.path(),
        &opts,
    )
    .unwrap();
    assert!(report.success(), "{case}: {report:?}");
    let mut tree = read_tree(out.path());
    tree.retain(|rel, _| !rel.ends_with(OBJECTS_FILE));
    (out, tree)
}

fn check_golden(case: &str) {
    let (out, got) = render_case(case);
    let golden = root().join("golden").join(case);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let changed = read_tree(&golden) != got;
        let _ = fs::remove_dir_all(&golden);
        for (rel, text) in &got {
            let path = golden.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        // A golden the test writes and then passes against proves nothing:
        // fail, so the rewrite is reviewed (git diff) before it counts.
        panic!(
            "{case}: UPDATE_GOLDEN is set: rewrote tests/golden/{case}/ ({}); review `git diff tests/golden/{case}` and rerun without UPDATE_GOLDEN",
            if changed {
                "files changed"
            } else {
                "no file changed"
            }
        );
    }
    let want = read_tree(&golden);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{case}: rendered file set differs from tests/golden (UPDATE_GOLDEN=1 rewrites)"
    );
    for (rel, text) in &got {
        assert_eq!(
            text, &want[rel],
            "{case}/{rel} differs from golden (UPDATE_GOLDEN=1 rewrites)"
        );
    }
    // Same input, same bytes.
    let (_again, again) = render_case(case);
    assert_eq!(got, again, "{case}: rendering is not deterministic");
    checkconf_both_roles(out.path());
}

/// Lays out each rendered cluster as a pod would see it (entrypoint in
/// prepare-only mode) and runs named-checkconf for ordinal 0 and 1 on the
/// files exactly as rendered.
pub(crate) fn checkconf_both_roles(out: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(out).unwrap() {
        for cluster in fs::read_dir(entry.unwrap().path()).unwrap() {
            let config = cluster.unwrap().path();
            assert!(
                config.join(mount::RNDC_KEY).exists(),
                "{}: render wrote no rndc.key",
                config.display()
            );
            for ordinal in [0, 1] {
                let pod = harness::Pod::new(tmp.path(), &config, ordinal);
                pod.prepare();
                let res = harness::run(&commands::checkconf(&pod.layout, false));
                assert!(
                    res.ok() && res.stdout.is_empty(),
                    "{}: ordinal {ordinal}: {}",
                    config.display(),
                    res.stdout
                );
                assert!(parse_checkconf(&res.stdout).is_empty());
                fs::remove_dir_all(&pod.layout.data_dir).unwrap();
            }
        }
    }
}

#[test]
fn golden_small_cluster() {
    check_golden("small");
}

#[test]
fn golden_views_and_forward_zones() {
    check_golden("views");
}

#[test]
fn golden_several_keys() {
    check_golden("keys");
    // Only the keys the cluster loads: its own and the shared one.
    let (_out, tree) = render_case("keys");
    let keys = &tree["keys/main/keys.conf"];
    for name in ["transfer", "external-dns.update", "shared", "legacy"] {
        assert!(
            keys.contains(&format!("key \"{name}\" {{")),
            "{name} missing:\n{keys}"
        );
    }
    assert!(
        !keys.contains("\"other\""),
        "a key for another cluster leaked in:\n{keys}"
    );
}
