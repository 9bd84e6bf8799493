//! `bind-operator import` round trips on real named (issue 25): zone files
//! written for the test (every syntax named-checkzone reads, every record
//! type the CRDs admit, one of a few thousand records) are imported, served
//! by local mode, transferred back from the secondary and compared with
//! `named-checkzone -D` of the original: the same RRsets, SOA serial aside.
//! `import axfr` from a named serving the file and `import named-conf`
//! must write exactly the bytes `import zone` writes.

use crate::support_e2e as e2e;
use crate::support_import as support;

use std::path::Path;

use bind_operator::local::report::PodRole;
use support::{
    Server, assert_same, big_zone_text, checkzone, dig_axfr, import, transfer_key,
    write_syntax_zone,
};

/// Hosts of the large zone (about 3,300 records).
const BIG_HOSTS: usize = 1000;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn imported_zones_serve_what_named_checkzone_reads_of_the_originals() {
    let src = tempfile::tempdir().unwrap();
    let syntax = write_syntax_zone(src.path());
    let big = src.path().join("db.big");
    std::fs::write(&big, big_zone_text("big.example", BIG_HOSTS)).unwrap();

    let f = e2e::Fixture::empty();
    let out = f.dir.to_str().unwrap();
    let run = import(
        &[
            "zone",
            syntax.to_str().unwrap(),
            "--zone",
            "example.com",
            "--out",
            out,
            "--cluster",
            "example",
            "--with-cluster",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // What is not imported is said, by record and line, with the hint.
    assert!(
        run.stdout.contains(
            "db.example:34: host.example.com. HINFO: type HINFO is not one the operator manages"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("db.example:15: example.com. DNSKEY: DNSSEC record left out"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("dnssecPolicy"), "{}", run.stdout);
    let run = import(
        &[
            "zone",
            big.to_str().unwrap(),
            "--zone",
            "big.example",
            "--out",
            out,
            "--cluster",
            "example",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(", 0 skipped,"), "{}", run.stdout);

    let local = f.start(&[]);
    let snapshot = local.wait_status_for(
        "every imported object Ready",
        std::time::Duration::from_secs(300),
        e2e::all_ready,
    );
    let secondary = snapshot
        .pods
        .iter()
        .find(|p| p.role == PodRole::Secondary)
        .expect("a secondary pod");
    let key = transfer_key(&f.state, &secondary.name);
    let port = secondary.dns.port();
    for (file, zone) in [(&syntax, "example.com"), (&big, "big.example")] {
        let original = checkzone(file, zone);
        let served = dig_axfr(port, zone, &key);
        assert_same(&original, &served, zone);
        println!("{zone}: {} RRsets served as in the original", served.len());
    }
}

#[test]
fn import_axfr_and_named_conf_write_what_import_zone_writes() {
    let src = tempfile::tempdir().unwrap();
    let syntax = write_syntax_zone(src.path());
    let common = |out: &str| -> Vec<String> {
        ["--out", out, "--cluster", "example", "--namespace", "dns"]
            .map(str::to_owned)
            .to_vec()
    };
    let by_file = src.path().join("by-file");
    let mut args = vec![
        "zone".to_owned(),
        syntax.to_str().unwrap().to_owned(),
        "--zone".into(),
        "example.com".into(),
    ];
    args.extend(common(by_file.to_str().unwrap()));
    let run = import(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let zone_yaml = read(&by_file.join("example-com/bindzone.yaml"));
    let records_yaml = read(&by_file.join("example-com/dnsrecords.yaml"));

    // A named serving the same file, transfers allowed with a key only.
    let secret = "c2VjcmV0LWZvci10aGUtaW1wb3J0LXRlc3Qtb25seSE=";
    let server = Server::start(src.path(), &[("example.com", "db.example")], secret);
    let addr = format!("127.0.0.1:{}", server.port);
    let by_axfr = src.path().join("by-axfr");
    let axfr_args = |out: &Path, extra: &[&str]| -> Vec<String> {
        let mut a = vec![
            "axfr".to_owned(),
            "--server".into(),
            addr.clone(),
            "--zone".into(),
            "example.com".into(),
        ];
        a.extend(common(out.to_str().unwrap()));
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let unsigned = import(
        &axfr_args(&by_axfr, &[])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(unsigned.code, 1, "an unsigned transfer must be refused");
    assert!(
        unsigned.stderr.contains("refused the transfer")
            || unsigned.stderr.contains("failed to transfer from"),
        "{}",
        unsigned.stderr
    );
    assert!(!by_axfr.exists(), "nothing written on failure");

    let env_key = format!("hmac-sha256:import-key:{secret}");
    let run = import(
        &axfr_args(&by_axfr, &[])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[("BIND_OPERATOR_TSIG", &env_key)],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
    assert_eq!(read(&by_axfr.join("example-com/bindzone.yaml")), zone_yaml);
    assert_eq!(
        read(&by_axfr.join("example-com/dnsrecords.yaml")),
        records_yaml
    );

    // The key from a BIND key file; a wrong secret fails TSIG.
    let key_file = src.path().join("import.key");
    std::fs::write(
        &key_file,
        format!("key \"import-key\" {{\n\talgorithm hmac-sha256;\n\tsecret \"{secret}\";\n}};\n"),
    )
    .unwrap();
    let by_key_file = src.path().join("by-key-file");
    let run = import(
        &axfr_args(
            &by_key_file,
            &["--tsig-key-file", key_file.to_str().unwrap()],
        )
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        read(&by_key_file.join("example-com/dnsrecords.yaml")),
        records_yaml
    );
    let wrong = "hmac-sha256:import-key:d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZyE=";
    let run = import(
        &axfr_args(&src.path().join("wrong"), &[])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[("BIND_OPERATOR_TSIG", wrong)],
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(!run.stderr.contains("d3Jvbmct"), "{}", run.stderr);
    drop(server);

    // The same zone named by a named.conf: same bytes, and what does not
    // map is listed by file and line.
    std::fs::write(
        src.path().join("named.conf"),
        format!(
            "options {{\n  directory \"{}\";\n  recursion no;\n  allow-query {{ any; }};\n  listen-on {{ any; }};\n}};\nzone \"example.com\" {{\n  type primary;\n  file \"db.example\";\n  allow-update {{ none; }};\n}};\nzone \"other.example\" {{ type secondary; primaries {{ 192.0.2.1; }}; }};\n",
            src.path().display()
        ),
    )
    .unwrap();
    let by_conf = src.path().join("by-conf");
    let mut args = vec![
        "named-conf".to_owned(),
        src.path().join("named.conf").to_str().unwrap().to_owned(),
        "--with-cluster".into(),
    ];
    args.extend(common(by_conf.to_str().unwrap()));
    let run = import(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        read(&by_conf.join("example-com/dnsrecords.yaml")),
        records_yaml
    );
    assert_eq!(read(&by_conf.join("example-com/bindzone.yaml")), zone_yaml);
    for line in [
        "named.conf:5: option `listen-on`",
        "named.conf:10: zone example.com option `allow-update`",
        "named.conf:12: zone other.example of type `secondary`",
    ] {
        assert!(
            run.stdout.contains(line),
            "missing {line:?} in:\n{}",
            run.stdout
        );
    }
    let cluster = read(&by_conf.join("cluster.yaml"));
    assert!(cluster.contains("allowQuery:\n  - any"), "{cluster}");
}
