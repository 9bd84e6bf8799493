//! A zone's own `spec.records` against DNSRecords (issue 23, item 5), on
//! the real binary's `local` mode and real named: a DNSRecord at the same
//! owner and type as an inline record is refused naming it, and the zone
//! (its nameserver's glue included) keeps serving on a fresh start; a zone
//! that cannot be written leaves no DNSRecord without a reason.

use std::time::Duration;

use crate::support_e2e as support;

use bind_operator::local::report::{ObjectStatus, Snapshot};
use support::{Fixture, STARTUP, pods_of, record, wait_answer};

fn row<'a>(s: &'a Snapshot, name: &str) -> Option<&'a ObjectStatus> {
    s.objects.iter().find(|o| o.name == name)
}

fn ready(s: &Snapshot, name: &str) -> bool {
    row(s, name).is_some_and(|o| o.ready)
}

/// examples/ plus a DNSRecord claiming ns1's address, which the zone
/// publishes inline (`spec.records[0]`), and one more good record.
fn fixture() -> Fixture {
    let f = Fixture::examples();
    f.write(
        "ns1.yaml",
        &format!(
            "{}---\n{}",
            record("ns1-clash", "ns1", "A", &["192.0.2.99"]),
            record("good", "good", "A", &["192.0.2.77"])
        ),
    );
    f
}

#[test]
fn a_dnsrecord_beside_the_zones_own_record_is_refused_and_the_zone_serves() {
    let f = fixture();
    let local = f.start(&[]);
    let s = local.wait_status_for("the clash refused, the rest Ready", STARTUP, |s| {
        s.converged
            && row(s, "ns1-clash").is_some_and(|o| !o.ready && o.reason == "Conflict")
            && ["example-com", "www-example-com", "spf-example-com", "good"]
                .iter()
                .all(|o| ready(s, o))
    });
    let msg = &row(&s, "ns1-clash").unwrap().message;
    assert!(
        msg.contains("spec.records[0]") && msg.contains("ns1.example.com. A"),
        "{msg}"
    );
    for p in pods_of(&s, "example") {
        let port = p.dns.port();
        wait_answer(
            port,
            "ns1.example.com.",
            "A",
            &["192.0.2.53".into()],
            &local,
        );
        wait_answer(
            port,
            "good.example.com.",
            "A",
            &["192.0.2.77".into()],
            &local,
        );
    }
    assert!(local.stop().success());

    // `--once` on the same input: exits 1 promptly, naming only the clash.
    let f = fixture();
    let once = f.start(&["--once", "--timeout", "90"]);
    let (status, stdout) = once.wait_exit(STARTUP + Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{stdout}");
    let verdict = stdout
        .split_once("objects are not Ready:")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no verdict in:\n{stdout}"));
    assert!(verdict.contains("ns1-clash"), "{verdict}");
    for good in ["example-com", "www-example-com", "good"] {
        assert!(
            !verdict.lines().any(|l| l.contains(&format!("/{good}:"))),
            "{good} listed in:\n{verdict}"
        );
    }
}

#[test]
fn records_of_a_zone_that_cannot_be_written_all_say_why() {
    let f = Fixture::examples();
    // A nameserver inside the zone without an address: BIND would not
    // load the zone, so nothing of it is written.
    let zone = f
        .read("bindzone.yaml")
        .replace("    - ns1.example.com.\n", "    - ns9.example.com.\n");
    assert!(zone.contains("ns9"));
    f.write("bindzone.yaml", &zone);
    let local = f.start(&[]);
    let s = local.wait_status_for("the zone refused", STARTUP, |s| {
        s.converged && row(s, "example-com").is_some_and(|o| o.reason == "MissingGlue")
    });
    for name in ["www-example-com", "spf-example-com"] {
        let r = row(&s, name).expect("listed");
        assert!(!r.ready, "{r:?}");
        assert!(
            !r.reason.is_empty() && r.message.contains("ns9.example.com."),
            "{r:?}"
        );
    }
    assert!(local.stop().success());
}
