//! What the zone decides about DNSRecords before anything is sent:
//! conflicts (two claimants of one RRset, a DNSRecord against a
//! `spec.records` entry, a CNAME beside another type, more than 100
//! values) leave the first claimant serving and the loser in Error with a
//! reason, nothing of it sent; a zone-qualified apex NS gets
//! ApexNSUnsupported; a record set that does not validate (a DNSRecord or a
//! `spec.records` entry) gets InvalidRecord alone and what it served stays;
//! records wait (Pending) for a missing or unready zone.

use crate::support_zones as support;

use std::sync::Arc;
use std::time::Duration;

use bind_operator::api::{BindZone, DNSRecord, Phase, RecordType};
use serde_json::json;
use support::fakebind::{FakeBind, Kind};
use support::{Env, PRIMARY, record, test_settings, zone};

fn reason(r: &DNSRecord) -> String {
    r.status
        .as_ref()
        .and_then(|s| s.reason.clone())
        .unwrap_or_default()
}

fn message(r: &DNSRecord) -> String {
    r.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

/// Every value any nsupdate run carried.
fn sent(fake: &FakeBind) -> String {
    fake.calls()
        .iter()
        .filter(|c| c.kind == Kind::Update)
        .filter_map(|c| c.text.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_are_decided_before_sending() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    let mut z = zone("shop", "shop.test");
    z.spec.records = serde_json::from_value(json!([
        {"name": "inline", "type": "TXT", "values": ["\"from the zone\""]},
    ]))
    .unwrap();
    env.create(z).await;
    env.zone_phase("shop", Phase::Ready).await;

    // Created in order: the first claimant of each RRset keeps it.
    env.create(record(
        "first",
        "shop",
        "www",
        RecordType::A,
        &["192.0.2.1"],
    ))
    .await;
    env.record_phase("first", Phase::Ready).await;
    env.create(record(
        "second",
        "shop",
        "www",
        RecordType::A,
        &["192.0.2.66"],
    ))
    .await;
    env.create(record(
        "steal",
        "shop",
        "inline",
        RecordType::TXT,
        &["\"mine\""],
    ))
    .await;
    env.create(record(
        "alias",
        "shop",
        "www",
        RecordType::CNAME,
        &["elsewhere.example."],
    ))
    .await;
    let many: Vec<String> = (0..101)
        .map(|i| format!("10.9.{}.{}", i / 250, i % 250))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    env.create(record("huge", "shop", "big", RecordType::A, &many))
        .await;
    env.create(record(
        "fine",
        "shop",
        "api",
        RecordType::AAAA,
        &["2001:db8::1"],
    ))
    .await;

    let second = env.record_phase("second", Phase::Error).await;
    assert_eq!(reason(&second), "Conflict");
    assert!(
        message(&second).contains("DNSRecord first"),
        "{}",
        message(&second)
    );
    let steal = env.record_phase("steal", Phase::Error).await;
    assert_eq!(reason(&steal), "Conflict");
    assert!(
        message(&steal).contains("spec.records[0]"),
        "{}",
        message(&steal)
    );
    assert_eq!(
        reason(&env.record_phase("alias", Phase::Error).await),
        "CNAMEConflict"
    );
    assert_eq!(
        reason(&env.record_phase("huge", Phase::Error).await),
        "TooManyValues"
    );
    let fine = env.record_phase("fine", Phase::Ready).await;
    assert_eq!(
        fine.status.as_ref().unwrap().fqdn.as_deref(),
        Some("api.shop.test.")
    );

    // The first claimants serve; nothing of the losers was ever sent.
    assert_eq!(
        fake.values(PRIMARY, "shop.test", "www.shop.test", "A"),
        ["192.0.2.1".to_string()].into()
    );
    assert_eq!(
        fake.values(PRIMARY, "shop.test", "inline.shop.test", "TXT"),
        ["\"from the zone\"".to_string()].into()
    );
    let text = sent(&fake);
    for loser in ["192.0.2.66", "\"mine\"", "elsewhere.example.", "10.9.0.7"] {
        assert!(!text.contains(loser), "{loser} was sent");
    }
    assert!(
        fake.values(PRIMARY, "shop.test", "big.shop.test", "A")
            .is_empty()
    );

    // The winner goes away: the next claimant takes over the RRset.
    env.delete::<DNSRecord>("alias").await;
    env.gone::<DNSRecord>("alias").await;
    env.delete::<DNSRecord>("first").await;
    env.gone::<DNSRecord>("first").await;
    env.record_phase("second", Phase::Ready).await;
    assert_eq!(
        fake.values(PRIMARY, "shop.test", "www.shop.test", "A"),
        ["192.0.2.66".to_string()].into()
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_qualified_apex_ns_is_refused_and_records_wait_for_their_zone() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;

    // No zone yet: Pending, and no exec at all.
    env.create(record(
        "early",
        "late",
        "www",
        RecordType::A,
        &["192.0.2.5"],
    ))
    .await;
    let early = env.record_phase("early", Phase::Pending).await;
    assert_eq!(reason(&early), "ZoneNotFound");
    // A zone whose cluster does not exist: its records wait too.
    let mut orphan = zone("orphan", "orphan.test");
    orphan.spec.cluster_ref = "nowhere".into();
    env.create(orphan).await;
    env.create(record(
        "lost",
        "orphan",
        "www",
        RecordType::A,
        &["192.0.2.6"],
    ))
    .await;
    // ClusterNotFound is a failure (reason table), so the zone is in Error
    // and its records say the zone failed rather than "not ready" (#14).
    assert_eq!(
        reason(&env.record_phase("lost", Phase::Error).await),
        "ZoneFailed"
    );
    assert_eq!(
        env.zone_phase("orphan", Phase::Error)
            .await
            .status
            .unwrap()
            .conditions[0]
            .reason,
        "ClusterNotFound"
    );
    assert_eq!(fake.count(), 0, "nothing runs for a zone without a cluster");

    env.create(zone("late", "late.test")).await;
    env.record_phase("early", Phase::Ready).await;
    assert_eq!(
        fake.values(PRIMARY, "late.test", "www.late.test", "A"),
        ["192.0.2.5".to_string()].into()
    );

    // `late.test.` NS passes CEL (it only knows `@`) but is the apex.
    env.create(record(
        "apex",
        "late",
        "late.test.",
        RecordType::NS,
        &["ns9.example.org."],
    ))
    .await;
    let apex = env.record_phase("apex", Phase::Error).await;
    assert_eq!(reason(&apex), "ApexNSUnsupported");
    assert!(
        message(&apex).contains("spec.nameservers"),
        "{}",
        message(&apex)
    );
    // A record created after it lands: the zone's writes went out after
    // the refusal, and none carried it.
    env.create(record(
        "after",
        "late",
        "after",
        RecordType::A,
        &["192.0.2.7"],
    ))
    .await;
    env.record_phase("after", Phase::Ready).await;
    assert_eq!(
        fake.values(PRIMARY, "late.test", "after.late.test", "A"),
        ["192.0.2.7".to_string()].into()
    );
    assert!(!sent(&fake).contains("ns9.example.org."));
    assert_eq!(
        fake.values(PRIMARY, "late.test", "late.test", "NS"),
        ["ns1.example.net.".to_string()].into()
    );
    // Deleting it removes nothing at the apex.
    env.delete::<DNSRecord>("apex").await;
    env.gone::<DNSRecord>("apex").await;
    assert_eq!(
        fake.values(PRIMARY, "late.test", "late.test", "NS"),
        ["ns1.example.net.".to_string()].into()
    );
    env.delete::<BindZone>("orphan").await;
    env.gone::<BindZone>("orphan").await;
    env.stop().await;
}

/// A record set that does not validate is refused alone with InvalidRecord
/// and its field named; what it served before keeps serving, nothing of
/// the bad edit is sent, and the zone's other records still land. A bad
/// `spec.records` entry is reported on the zone (which entry, why), the
/// other entries are served, and the RRset the entry served before stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_record_sets_are_refused_alone_and_what_serves_stays() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    let mut z = zone("mail", "mail.test");
    z.spec.records = serde_json::from_value(json!([
        {"name": "a", "type": "TXT", "values": ["\"one\""]},
        {"name": "b", "type": "TXT", "values": ["\"two\""]},
    ]))
    .unwrap();
    env.create(z).await;
    env.zone_phase("mail", Phase::Ready).await;
    env.create(record(
        "mx",
        "mail",
        "@",
        RecordType::MX,
        &["10 mx1.mail.test."],
    ))
    .await;
    env.record_phase("mx", Phase::Ready).await;
    let mx_served = || fake.values(PRIMARY, "mail.test", "mail.test", "MX");
    assert_eq!(mx_served(), ["10 mx1.mail.test.".to_string()].into());

    // Admission lets "not an mx" through (CEL only sees a string).
    env.patch_spec::<DNSRecord>("mx", json!({"values": ["10 mx2.mail.test.", "not an mx"]}))
        .await;
    let mx = env.record_phase("mx", Phase::Error).await;
    assert_eq!(reason(&mx), "InvalidRecord");
    assert!(message(&mx).contains("spec.values[1]"), "{}", message(&mx));
    env.create(record("www", "mail", "www", RecordType::A, &["192.0.2.80"]))
        .await;
    env.record_phase("www", Phase::Ready).await;
    assert_eq!(mx_served(), ["10 mx1.mail.test.".to_string()].into());
    assert!(
        !sent(&fake).contains("mx2.mail.test."),
        "the bad edit was sent"
    );

    env.patch_spec::<BindZone>(
        "mail",
        json!({"records": [
            {"name": "a", "type": "TXT", "values": ["\"one\""]},
            {"name": "b", "type": "MX", "values": ["bogus"]},
            {"name": "c", "type": "TXT", "values": ["\"three\""]},
        ]}),
    )
    .await;
    let zone = env
        .wait::<BindZone, _>("zone refuses spec.records[1]", "mail", |z| {
            let c = z?.status.as_ref()?.conditions.first()?.clone();
            (c.reason == "InvalidRecord").then_some(c)
        })
        .await;
    assert!(
        zone.message.starts_with("spec.records[1]: "),
        "{}",
        zone.message
    );
    support::within("spec.records[2] served", async {
        while fake
            .values(PRIMARY, "mail.test", "c.mail.test", "TXT")
            .is_empty()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        fake.values(PRIMARY, "mail.test", "b.mail.test", "TXT"),
        ["\"two\"".to_string()].into(),
        "the RRset the bad entry served before keeps serving"
    );
    assert!(!sent(&fake).contains("bogus"));
    env.record_phase("www", Phase::Ready).await;
    assert_eq!(
        fake.values(PRIMARY, "mail.test", "www.mail.test", "A"),
        ["192.0.2.80".to_string()].into()
    );
    env.stop().await;
}
