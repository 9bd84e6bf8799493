//! Self-repair: a primary restarted on an empty volume gets its zones, its
//! catalog and every owned RRset back (noticed at once through the pod's
//! restart, or by the periodic SOA survey when nothing else changed); an
//! owned RRset changed behind the operator's back is restored; RRsets
//! nobody owns (external-dns) are never touched.

use crate::support_zones as support;

use std::sync::Arc;
use std::time::Duration;

use bind_operator::api::{BindZone, Phase, RecordType};
use bind_operator::controller::zonesync::Settings;
use serde_json::json;
use support::fakebind::{FakeBind, Kind};
use support::{CATALOG, Env, PRIMARY, SECONDARY, record, test_settings, zone};

/// Sets up zone `app.test` with an inline record, three DNSRecords and a
/// new nameserver set, all Ready.
async fn populated(env: &Env) {
    let mut z = zone("app", "app.test");
    z.spec.nameservers = vec!["ns1".into(), "ns2".into()];
    z.spec.records = serde_json::from_value(json!([
        {"name": "ns1", "type": "A", "values": ["192.0.2.1"]},
        {"name": "ns2", "type": "A", "values": ["192.0.2.2"]},
    ]))
    .unwrap();
    env.create(z).await;
    env.create(record(
        "www",
        "app",
        "www",
        RecordType::A,
        &["192.0.2.10", "192.0.2.11"],
    ))
    .await;
    env.create(record(
        "txt",
        "app",
        "@",
        RecordType::TXT,
        &["\"v=spf1 -all\""],
    ))
    .await;
    env.create(record(
        "mx",
        "app",
        "@",
        RecordType::MX,
        &["10 mail.app.test."],
    ))
    .await;
    for r in ["www", "txt", "mx"] {
        env.record_phase(r, Phase::Ready).await;
    }
    env.zone_phase("app", Phase::Ready).await;
}

fn everything_served(fake: &FakeBind, pod: &str) -> bool {
    let v = |name: &str, t: &str| fake.values(pod, "app.test", name, t);
    v("www.app.test", "A") == ["192.0.2.10".to_string(), "192.0.2.11".to_string()].into()
        && v("app.test", "TXT") == ["\"v=spf1 -all\"".to_string()].into()
        && v("app.test", "MX") == ["10 mail.app.test.".to_string()].into()
        && v("ns2.app.test", "A") == ["192.0.2.2".to_string()].into()
        && v("app.test", "NS") == ["ns1.app.test.".to_string(), "ns2.app.test.".to_string()].into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_restarted_on_an_empty_volume_gets_everything_back() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    populated(&env).await;
    assert!(everything_served(&fake, PRIMARY));
    let serial_before = fake.serial(PRIMARY, "app.test").unwrap();

    // The pod restarts on an empty volume: kubelet bumps its restart count.
    fake.wipe(PRIMARY);
    fake.clear_calls();
    assert!(fake.zone(PRIMARY, "app.test").is_none());
    env.set_pod(PRIMARY, true, 1).await;
    // The zone comes back with its records and joins its re-created
    // catalog (the join may land a round after the records).
    env.wait::<BindZone, _>("records and catalog membership back", "app", |_| {
        (everything_served(&fake, PRIMARY)
            && fake.catalog_members(PRIMARY, CATALOG).contains("app.test"))
        .then_some(())
    })
    .await;
    assert!(
        everything_served(&fake, SECONDARY),
        "the secondary follows through the catalog"
    );
    // The re-created zone starts above the old serial, so secondaries transfer it.
    assert!(fake.serial(PRIMARY, "app.test").unwrap() > serial_before);
    let calls = fake.calls();
    // Survey (2 pods), peer serials, one zone-list run creating the zone
    // with every record; the same for the catalog, its join: a constant,
    // not one per record.
    assert!(
        calls.len() <= 16,
        "repair cost {} operations: {calls:#?}",
        calls.len()
    );
    assert!(
        calls
            .iter()
            .any(|c| c.kind == Kind::PutZone && c.ok && c.zone.as_deref() == Some("app.test")),
        "{calls:#?}"
    );
    assert!(
        !calls
            .iter()
            .any(|c| c.kind == Kind::Update && c.zone.as_deref() == Some("app.test")),
        "the records came back with the zone's creation: {calls:#?}"
    );
    env.zone_phase("app", Phase::Ready).await;
    env.stop().await;
}

fn periodic_settings() -> Settings {
    Settings {
        verify_interval: Duration::from_millis(500),
        survey_max_age: Duration::from_millis(200),
        snapshot_trust: Duration::from_millis(200),
        ..test_settings()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_check_repairs_silent_loss_and_leaves_foreign_rrsets_alone() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), periodic_settings()).await;
    populated(&env).await;

    // Someone else (external-dns) writes its own RRsets into the zone...
    fake.external_write(PRIMARY, "app.test", "ext.app.test", "A", &["198.51.100.7"]);
    fake.external_write(
        PRIMARY,
        "app.test",
        "ext.app.test",
        "TXT",
        &["\"heritage=external-dns\""],
    );
    // ...and removes or changes RRsets the operator owns.
    fake.external_delete(PRIMARY, "app.test", "www.app.test", "A");
    fake.external_write(PRIMARY, "app.test", "app.test", "TXT", &["\"tampered\""]);
    env.wait::<BindZone, _>("owned RRsets restored", "app", |_| {
        everything_served(&fake, PRIMARY).then_some(())
    })
    .await;
    assert_eq!(
        fake.values(PRIMARY, "app.test", "ext.app.test", "A"),
        ["198.51.100.7".to_string()].into(),
        "an RRset nobody owns must be left alone"
    );
    assert_eq!(
        fake.values(PRIMARY, "app.test", "ext.app.test", "TXT")
            .len(),
        1
    );
    let sent: String = fake
        .calls()
        .iter()
        .filter(|c| c.kind == Kind::Update)
        .filter_map(|c| c.text.clone())
        .collect();
    assert!(!sent.contains("ext.app.test"), "{sent}");

    // The periodic survey asks every pod with one dig each: status shows
    // which pods serve which serial.
    let z = env
        .wait::<BindZone, _>("both pods in status.servers", "app", |z| {
            let s = z?.status.as_ref()?;
            (s.servers.len() == 2 && s.servers.values().all(|v| Some(*v) == s.serial))
                .then(|| z.unwrap().clone())
        })
        .await;
    assert_eq!(z.status.unwrap().serial, fake.serial(SECONDARY, "app.test"));

    // A silent wipe (no pod change at all) is found by the periodic check.
    fake.wipe(PRIMARY);
    env.wait::<BindZone, _>(
        "records and catalog membership back after a silent wipe",
        "app",
        |_| {
            (everything_served(&fake, PRIMARY)
                && fake.catalog_members(PRIMARY, CATALOG).contains("app.test"))
            .then_some(())
        },
    )
    .await;

    // Steady state: periodic checks are dig surveys (one per pod), no writes.
    // Counted from the check after the repair's (its tail lands before).
    let digs = || {
        let calls = fake.calls();
        (
            calls.iter().filter(|c| c.kind == Kind::Serials).count(),
            calls,
        )
    };
    fake.clear_calls();
    crate::support_clock::until("a periodic check", || async {
        (digs().0 >= 2).then_some(())
    })
    .await;
    fake.clear_calls();
    let started = std::time::Instant::now();
    let calls = crate::support_clock::until("three periodic checks", || async {
        let (n, calls) = digs();
        (n >= 6).then_some(calls)
    })
    .await;
    let waited = started.elapsed();
    assert!(
        calls.iter().all(|c| c.kind == Kind::Serials),
        "a converged zone only reads: {calls:#?}"
    );
    // At most 16 digs per 1.5 s: checks are spaced, not a loop.
    assert!(
        calls.len() as u128 * 1500 <= 16 * waited.as_millis(),
        "{} digs in {waited:?}",
        calls.len()
    );
    env.stop().await;
}
