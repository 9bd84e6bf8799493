//! What `bind-operator import` writes (issue 25): the same input gives the
//! same bytes; the objects pass the checks an API server makes (local
//! mode's loader runs the CRDs' schema and CEL rules client-side) and the
//! offline `render`; `--strict` refuses a zone with skipped records and
//! writes nothing; a file the reader cannot follow fails with its line.

use crate::support_import as support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use bind_operator::local::manifest_dir::load_dir;
use support::{import, write_syntax_zone};

/// Every file under `dir` (relative path -> bytes).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn import_syntax(src: &Path, out: &Path, extra: &[&str]) -> support::Run {
    let file = src.join("db.example");
    let mut args = vec![
        "zone",
        file.to_str().unwrap(),
        "--zone",
        "example.com",
        "--out",
        out.to_str().unwrap(),
        "--cluster",
        "example",
    ];
    args.extend_from_slice(extra);
    import(&args, &[])
}

#[test]
fn output_is_deterministic_and_admitted_by_the_loader_and_render() {
    let src = tempfile::tempdir().unwrap();
    write_syntax_zone(src.path());
    let (a, b) = (src.path().join("a"), src.path().join("b"));
    for out in [&a, &b] {
        let run = import_syntax(src.path(), out, &["--with-cluster"]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    }
    let (ta, tb) = (tree(&a), tree(&b));
    assert_eq!(
        ta.keys().collect::<Vec<_>>(),
        [
            "cluster.yaml",
            "example-com/bindzone.yaml",
            "example-com/dnsrecords.yaml"
        ]
    );
    assert!(ta == tb, "two imports of one file differ");

    // The loader local mode and `render` use: schema, CEL, metadata.
    let loaded = load_dir(&a);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let kinds: BTreeMap<String, usize> =
        loaded.manifests.iter().fold(BTreeMap::new(), |mut m, x| {
            *m.entry(x.key.kind.as_str().to_owned()).or_default() += 1;
            m
        });
    assert_eq!(kinds["BindCluster"], 1);
    assert_eq!(kinds["BindTSIGKey"], 1);
    assert_eq!(kinds["BindZone"], 1);
    // 38 records read: SOA, 2 apex NS, DNSKEY, HINFO not DNSRecords; the
    // rest are 35 RRsets (ns2 A+AAAA, sub NS+DS, host SSHFP ...).
    assert_eq!(kinds["DNSRecord"], 35, "{kinds:?}");

    let rendered = src.path().join("rendered");
    let out = Command::new(env!("CARGO_BIN_EXE_bind-operator"))
        .args(["render", "-f"])
        .arg(&a)
        .arg("--out")
        .arg(&rendered)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "render refused the import: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        rendered
            .join("default/example/named.conf.primary")
            .is_file()
    );
}

#[test]
fn strict_refuses_skipped_records_and_writes_nothing() {
    let src = tempfile::tempdir().unwrap();
    write_syntax_zone(src.path());
    let zone = src.path().join("db.example");
    let mut text = std::fs::read_to_string(&zone).unwrap();
    text.push_str("outside.example.net. A 192.0.2.1\n");
    std::fs::write(&zone, text).unwrap();
    let out = src.path().join("out");
    let run = import_syntax(src.path(), &out, &["--strict"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("HINFO"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("db.example:44: outside.example.net. A: outside zone example.com"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("--strict: 2 records skipped; nothing written"),
        "{}",
        run.stdout
    );
    assert!(!out.exists());

    // Without --strict the rest is written.
    let run = import_syntax(src.path(), &out, &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(out.join("example-com/dnsrecords.yaml").is_file());
}

#[test]
fn a_broken_zone_file_fails_with_its_line() {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("db.bad");
    std::fs::write(
        &file,
        "$TTL 1h\n@ SOA ns1 host 1 2 3 4 5\n  NS ns1\nns1 A 192.0.2.1\nbad TXT ( \"never closed\"\n",
    )
    .unwrap();
    let run = import(
        &[
            "zone",
            file.to_str().unwrap(),
            "--zone",
            "bad.example",
            "--out",
            src.path().join("out").to_str().unwrap(),
            "--cluster",
            "c",
        ],
        &[],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("db.bad: line 5: unbalanced parentheses"),
        "{}",
        run.stderr
    );
    // A zone without its apex NS is refused as named refuses it.
    std::fs::write(
        &file,
        "$TTL 1h\n@ SOA ns1 host 1 2 3 4 5\nns1 A 192.0.2.1\n",
    )
    .unwrap();
    let run = import(
        &[
            "zone",
            file.to_str().unwrap(),
            "--zone",
            "bad.example",
            "--out",
            src.path().join("out").to_str().unwrap(),
            "--cluster",
            "c",
        ],
        &[],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("has no NS record at its apex"),
        "{}",
        run.stderr
    );
}
