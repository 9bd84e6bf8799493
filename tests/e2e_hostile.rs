//! Hostile input (#14) against the real binary's `local` mode and real
//! named, checked with dig: a bad object never takes over or blocks a good
//! one, and what is Ready is what a resolver gets.
//!
//! - Records and zones new together that clash are all refused, nothing of
//!   them is served; once one goes the survivor serves; live, the serving
//!   one keeps its name against newcomers (same RRset, CNAME beside data, a
//!   delegation over it).
//! - Bad BindTSIGKeys (Secret missing, duplicate keyName, the rndc key's
//!   name) and a BindZone named like the catalog zone fail alone; the rest
//!   of the cluster converges and a later BindCluster change still renders.
//! - `--once` on such input exits 1 promptly, naming each bad object.

use std::time::{Duration, Instant};

use crate::support_e2e as support;

use bind_operator::local::report::Snapshot;
use support::{Fixture, Local, STARTUP, WAIT, dig, keys_conf, pods_of, record, wait_answer};

const GOOD_WWW: [&str; 2] = ["192.0.2.10", "192.0.2.11"];

fn want(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

/// The row of one object, if listed.
fn row<'a>(s: &'a Snapshot, name: &str) -> Option<&'a bind_operator::local::report::ObjectStatus> {
    s.objects.iter().find(|o| o.name == name)
}

fn reason_is(s: &Snapshot, name: &str, reason: &str) -> bool {
    row(s, name).is_some_and(|o| !o.ready && o.reason == reason)
}

fn ready(s: &Snapshot, name: &str) -> bool {
    row(s, name).is_some_and(|o| o.ready)
}

/// dig keeps giving `values` for a while (nothing flips later).
fn stays(local: &Local, ports: &[u16], name: &str, rtype: &str, values: &[&str]) {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        for p in ports {
            let mut got = dig(*p, name, rtype);
            got.sort();
            assert_eq!(
                got,
                want(values),
                "port {p}: {name} {rtype}\n{}",
                local.diagnostics()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn ports(s: &Snapshot) -> Vec<u16> {
    pods_of(s, "example").iter().map(|p| p.dns.port()).collect()
}

#[test]
fn clashing_records_new_together_serve_nothing_and_the_serving_one_keeps_its_name() {
    let f = Fixture::examples();
    // Sorts before the good record by name and shares its creation second.
    f.write("dup.yaml", &record("a-www-dup", "www", "A", &["6.6.6.6"]));
    let local = f.start(&[]);
    let s = local.wait_status_for("both www claimants refused, the rest Ready", STARTUP, |s| {
        reason_is(s, "a-www-dup", "Conflict")
            && reason_is(s, "www-example-com", "Conflict")
            && ready(s, "spf-example-com")
            && ready(s, "example-com")
    });
    let msg = &row(&s, "a-www-dup").unwrap().message;
    assert!(msg.contains("DNSRecord www-example-com"), "{msg}");
    let msg = &row(&s, "www-example-com").unwrap().message;
    assert!(msg.contains("DNSRecord a-www-dup"), "{msg}");
    let ports = ports(&s);
    assert_eq!(ports.len(), 2);
    for p in &ports {
        wait_answer(*p, "www.example.com.", "A", &[], &local);
        wait_answer(
            *p,
            "example.com.",
            "TXT",
            &want(&["\"v=spf1 mx -all\""]),
            &local,
        );
    }

    // One party goes: the other serves, on both pods.
    f.remove("dup.yaml");
    for p in &ports {
        wait_answer(*p, "www.example.com.", "A", &want(&GOOD_WWW), &local);
    }
    local.wait_status("www Ready", |s| ready(s, "www-example-com"));

    // Live: the serving record keeps its name against a duplicate, a
    // CNAME and a delegation at the same name (all with lower names).
    f.write("dup.yaml", &record("a-www-dup", "www", "A", &["6.6.6.6"]));
    f.write(
        "cname.yaml",
        &record("a-www-cname", "www", "CNAME", &["evil.example.org."]),
    );
    f.write(
        "ns.yaml",
        &record("a-www-ns", "www", "NS", &["ns.evil.example.org."]),
    );
    let s = local.wait_status("the newcomers refused, www still Ready", |s| {
        reason_is(s, "a-www-dup", "Conflict")
            && reason_is(s, "a-www-cname", "CNAMEConflict")
            && reason_is(s, "a-www-ns", "DelegationConflict")
            && ready(s, "www-example-com")
    });
    let msg = &row(&s, "a-www-ns").unwrap().message;
    assert!(msg.contains("DNSRecord www-example-com"), "{msg}");
    stays(&local, &ports, "www.example.com.", "A", &GOOD_WWW);
    for p in &ports {
        assert!(dig(*p, "www.example.com.", "NS").is_empty(), "no referral");
    }
    assert!(local.stop().success());
}

#[test]
fn a_record_under_a_served_delegation_is_not_ready_and_says_why() {
    let f = Fixture::examples();
    f.write(
        "sub.yaml",
        &format!(
            "{}---\n{}",
            record("sub-ns", "sub", "NS", &["ns1.sub.example.com."]),
            record("sub-glue", "ns1.sub", "A", &["192.0.2.99"])
        ),
    );
    let local = f.start(&[]);
    let s = local.wait_status_for("the delegation and its glue Ready", STARTUP, |s| {
        ready(s, "sub-ns") && ready(s, "sub-glue") && ready(s, "www-example-com")
    });
    let ports = ports(&s);
    f.write(
        "hidden.yaml",
        &record("hidden", "www.sub", "A", &["192.0.2.77"]),
    );
    let s = local.wait_status("the hidden record Occluded", |s| {
        reason_is(s, "hidden", "Occluded")
    });
    let msg = &row(&s, "hidden").unwrap().message;
    assert!(msg.contains("sub.example.com. NS"), "{msg}");
    // What a resolver sees: a referral, never the hidden address.
    for p in &ports {
        assert!(dig(*p, "www.sub.example.com.", "A").is_empty());
    }
    assert!(local.stop().success());
}

#[test]
fn duplicate_zones_new_together_serve_nothing_and_the_serving_one_keeps_the_zone() {
    let f = Fixture::examples();
    let dup = "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: a-bars-dup\nspec:\n  clusterRef: example\n  zoneName: example.com\n  nameservers:\n    - ns.evil.example.org.\n  records:\n    - name: www\n      type: A\n      values:\n        - 6.6.6.6\n";
    f.write("dupzone.yaml", dup);
    let local = f.start(&[]);
    let s = local.wait_status_for("both zones refused", STARTUP, |s| {
        reason_is(s, "a-bars-dup", "DuplicateZone")
            && reason_is(s, "example-com", "DuplicateZone")
            && reason_is(s, "www-example-com", "ZoneFailed")
    });
    assert!(
        row(&s, "example-com")
            .unwrap()
            .message
            .contains("a-bars-dup")
    );
    let ports = ports(&s);
    for p in &ports {
        assert!(
            dig(*p, "example.com.", "SOA").is_empty(),
            "nothing of them is served"
        );
        assert!(dig(*p, "www.example.com.", "A").is_empty());
    }
    f.remove("dupzone.yaml");
    for p in &ports {
        wait_answer(*p, "www.example.com.", "A", &want(&GOOD_WWW), &local);
    }
    local.wait_status("example-com Ready", |s| ready(s, "example-com"));
    // Live: the serving zone keeps it.
    f.write("dupzone.yaml", dup);
    let s = local.wait_status("the newcomer refused", |s| {
        reason_is(s, "a-bars-dup", "DuplicateZone")
    });
    assert!(
        row(&s, "a-bars-dup")
            .unwrap()
            .message
            .contains("example-com")
    );
    stays(&local, &ports, "www.example.com.", "A", &GOOD_WWW);
    assert!(ready(&local.status().unwrap(), "example-com"));
    assert!(local.stop().success());
}

const BAD_KEYS: &str = "apiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: no-secret\nspec:\n  clusterRef: example\n  secretRef:\n    name: does-not-exist\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: dup-a\nspec:\n  keyName: shared-name\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: dup-b\nspec:\n  clusterRef: example\n  keyName: shared-name\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: rndc-clash\nspec:\n  keyName: rndc-key\n";

const BAD_ZONES: &str = "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: catalog-clash\nspec:\n  clusterRef: example\n  zoneName: example.default.catalog.invalid\n  updateKeyRef: update-key\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: keyless\nspec:\n  clusterRef: example\n  zoneName: keyless.example\n  updateKeyRef: no-such-key\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: bad-key-zone\nspec:\n  clusterRef: example\n  zoneName: badkey.example\n  nameservers:\n    - ns1.example.com.\n  updateKeyRef: dup-b\n";

/// Two keys with one keyName, both in DIR when local mode starts: the
/// session applies the whole directory before the controllers start, so
/// they are new together and both are refused, each naming the other,
/// whatever order the files were applied in (never one of them by luck).
fn both_twins_refused(s: &Snapshot) -> bool {
    reason_is(s, "dup-a", "DuplicateKeyName") && reason_is(s, "dup-b", "DuplicateKeyName")
}

#[test]
fn bad_keys_and_a_catalog_named_zone_fail_alone_and_later_changes_still_render() {
    let f = Fixture::examples();
    f.write("badkeys.yaml", BAD_KEYS);
    f.write("badzones.yaml", BAD_ZONES);
    let local = f.start(&[]);
    let s = local.wait_status_for("the bad objects failed, the rest Ready", STARTUP, |s| {
        reason_is(s, "no-secret", "SecretNotFound")
            && both_twins_refused(s)
            && reason_is(s, "rndc-clash", "ReservedKeyName")
            && reason_is(s, "catalog-clash", "ReservedZoneName")
            && reason_is(s, "keyless", "KeyNotFound")
            && reason_is(s, "bad-key-zone", "KeyFailed")
            && [
                "example",
                "example-com",
                "www-example-com",
                "spf-example-com",
                "update-key",
                "transfer-key",
            ]
            .iter()
            .all(|n| ready(s, n))
    });
    // Each twin names the other.
    for (me, other) in [("dup-a", "dup-b"), ("dup-b", "dup-a")] {
        let r = row(&s, me).unwrap();
        assert!(!r.ready && r.message.contains(other), "{r:?}");
    }
    assert!(row(&s, "bad-key-zone").unwrap().message.contains("dup-b"));
    let ports = ports(&s);
    for p in &ports {
        wait_answer(*p, "www.example.com.", "A", &want(&GOOD_WWW), &local);
    }
    let pods: Vec<String> = pods_of(&s, "example")
        .iter()
        .map(|p| p.name.clone())
        .collect();
    for pod in &pods {
        let conf = keys_conf(&local, pod);
        assert!(conf.contains("\"update-key\""), "{pod}: {conf}");
        assert!(conf.matches("shared-name").count() <= 1, "{pod}: {conf}");
        assert!(!conf.contains("\"no-secret\""), "{pod}: {conf}");
    }
    // The catalog still hands zones to the secondary: a new zone arrives.
    f.write("newzone.yaml", "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: later\nspec:\n  clusterRef: example\n  zoneName: later.example\n  updateKeyRef: update-key\n  records:\n    - name: ns1\n      type: A\n      values:\n        - 192.0.2.53\n    - name: www\n      type: A\n      values:\n        - 192.0.2.44\n");
    for p in &ports {
        wait_answer(
            *p,
            "www.later.example.",
            "A",
            &want(&["192.0.2.44"]),
            &local,
        );
    }
    // A later BindCluster change still renders.
    let cluster = format!(
        "{}  validateExcept:\n    - corp.example\n",
        f.read("bindcluster.yaml")
    );
    f.write("bindcluster.yaml", &cluster);
    let deadline = Instant::now() + WAIT;
    loop {
        let conf = std::fs::read_to_string(
            local
                .state
                .join("default/example-0/config/named.conf.primary"),
        )
        .unwrap_or_default();
        if conf.contains("corp.example") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cluster change never rendered\n{}",
            local.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Removing one duplicate lets the other load.
    f.write(
        "badkeys.yaml",
        &BAD_KEYS.replace(
            "  name: dup-a\nspec:\n  keyName: shared-name",
            "  name: dup-a\nspec:\n  keyName: other-name",
        ),
    );
    local.wait_status("dup-b loads once its twin is renamed", |s| {
        ready(s, "dup-b") && ready(s, "dup-a") && ready(s, "bad-key-zone")
    });
    assert!(local.stop().success());
}

#[test]
fn once_on_hostile_input_exits_one_promptly_naming_each_bad_object() {
    let f = Fixture::examples();
    f.write("badkeys.yaml", BAD_KEYS);
    f.write("badzones.yaml", BAD_ZONES);
    f.write("dup.yaml", &record("a-www-dup", "www", "A", &["6.6.6.6"]));
    let started = Instant::now();
    let local = f.start(&["--once", "--timeout", "90"]);
    let (status, stdout) = local.wait_exit(STARTUP + Duration::from_secs(60));
    let took = started.elapsed();
    assert_eq!(status.code(), Some(1), "{stdout}");
    assert!(
        took < Duration::from_secs(80),
        "waited out the timeout: {took:?}\n{stdout}"
    );
    let verdict = stdout
        .split_once("objects are not Ready:")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no verdict in:\n{stdout}"));
    for bad in [
        "no-secret",
        "rndc-clash",
        "catalog-clash",
        "keyless",
        "a-www-dup",
        "www-example-com",
    ] {
        assert!(verdict.contains(bad), "{bad} missing from:\n{verdict}");
    }
    // The twin keys are both refused (see `both_twins_refused`), and the
    // zone using dup-b's key fails with it.
    let listed = |row: &str| {
        verdict
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("{row}:")))
    };
    for row in [
        "BindTSIGKey default/dup-a",
        "BindTSIGKey default/dup-b",
        "BindZone default/bad-key-zone",
    ] {
        assert!(listed(row), "{row} not refused in:\n{verdict}");
    }
    for good in [
        "spf-example-com",
        "transfer-key",
        "BindZone default/example-com",
    ] {
        assert!(!verdict.contains(good), "{good} listed in:\n{verdict}");
    }
}

#[test]
fn weak_but_valid_input_is_served_with_a_warning() {
    use base64::Engine as _;
    let f = Fixture::examples();
    let three_bytes = base64::engine::general_purpose::STANDARD.encode([7u8; 3]);
    f.write(
        "weak.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: weak-material\ntype: Opaque\ndata:\n  secret: {}\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: short-key\nspec:\n  clusterRef: example\n  secretRef:\n    name: weak-material\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: md5-key\nspec:\n  clusterRef: example\n  algorithm: hmac-md5\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: tld\nspec:\n  clusterRef: example\n  zoneName: com\n  nameservers:\n    - ns.example.org.\n  updateKeyRef: update-key\n  records:\n    - name: www.google\n      type: A\n      values:\n        - 6.6.6.6\n",
            base64::engine::general_purpose::STANDARD.encode(&three_bytes)
        ),
    );
    f.write(
        "mx.yaml",
        &record("mx-rel", "mx", "MX", &["10 mail.example.com"]),
    );
    let local = f.start(&[]);
    let warned = |s: &Snapshot, n: &str, reason: &str| {
        row(s, n)
            .is_some_and(|o| o.ready && o.reason == reason && o.message.starts_with("warning: "))
    };
    let s = local.wait_status_for("each weak object Ready with its warning", STARTUP, |s| {
        warned(s, "short-key", "WeakKey")
            && warned(s, "md5-key", "WeakKey")
            && warned(s, "tld", "PublicSuffix")
            && warned(s, "mx-rel", "RelativeTarget")
            && ready(s, "www-example-com")
    });
    assert!(row(&s, "short-key").unwrap().message.contains("3 bytes"));
    assert!(!row(&s, "short-key").unwrap().message.contains(&three_bytes));
    assert!(
        row(&s, "mx-rel")
            .unwrap()
            .message
            .contains("mail.example.com.")
    );
    // Valid, so served as written: what the warning is about.
    let ports = ports(&s);
    for p in &ports {
        wait_answer(
            *p,
            "mx.example.com.",
            "MX",
            &want(&["10 mail.example.com.example.com."]),
            &local,
        );
        wait_answer(*p, "www.google.com.", "A", &want(&["6.6.6.6"]), &local);
    }
    // Objects without weak input carry no warning.
    assert_eq!(row(&s, "update-key").unwrap().reason, "KeyAvailable");
    assert!(local.stop().success());
}
