//! A deleted DNSRecord's RRset is removed even if the primary was down at
//! the time: the finalizer holds (the zone retries with backoff, without
//! hot-looping) until the removal succeeded, then releases it.

use crate::support_zones as support;

use std::sync::Arc;
use std::time::Duration;

use bind_operator::api::{BindZone, DNSRecord, Phase, RecordType};
use kube::ResourceExt as _;
use support::fakebind::{FakeBind, Kind};
use support::{Env, PRIMARY, record, test_settings, zone};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_waits_for_a_down_primary_then_removes_the_rrset() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    env.create(zone("corp", "corp.test")).await;
    env.create(record("web", "corp", "web", RecordType::A, &["192.0.2.80"]))
        .await;
    env.create(record(
        "mail",
        "corp",
        "mail",
        RecordType::A,
        &["192.0.2.25"],
    ))
    .await;
    env.record_phase("web", Phase::Ready).await;
    env.record_phase("mail", Phase::Ready).await;
    assert!(
        !fake
            .values(PRIMARY, "corp.test", "web.corp.test", "A")
            .is_empty()
    );

    fake.set_down(PRIMARY, true);
    fake.clear_calls();
    let deleted = std::time::Instant::now();
    env.delete::<DNSRecord>("web").await;
    // The zone reports the outage; the record stays, held by its finalizer.
    let z = env.zone_phase("corp", Phase::Pending).await;
    let cond = &z.status.unwrap().conditions[0];
    assert_eq!(cond.reason, "PrimaryUnavailable", "{cond:?}");
    // Retried with backoff (100 ms doubling to 400 ms here), not
    // hot-looped: six calls on the down primary span several backoffs.
    let attempts = crate::support_clock::until("six calls on the down primary", || async {
        let n = fake.calls().len();
        (n >= 6).then_some(n)
    })
    .await;
    let waited = deleted.elapsed();
    let held = env
        .get::<DNSRecord>("web")
        .await
        .expect("held by its finalizer");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(!held.finalizers().is_empty());
    assert!(
        waited >= Duration::from_millis(300),
        "{attempts} attempts in {waited:?}"
    );

    fake.set_down(PRIMARY, false);
    env.gone::<DNSRecord>("web").await;
    assert!(
        fake.values(PRIMARY, "corp.test", "web.corp.test", "A")
            .is_empty(),
        "the deleted record's RRset must be gone"
    );
    assert_eq!(
        fake.values(PRIMARY, "corp.test", "mail.corp.test", "A"),
        ["192.0.2.25".to_string()].into()
    );
    env.zone_phase("corp", Phase::Ready).await;
    // Back up: one update removes the RRset; the catalog membership is not
    // redone (a failed write does not change it).
    assert!(
        !fake
            .calls()
            .iter()
            .any(|c| c.ok && c.kind == Kind::Update && c.zone.as_deref() == Some(support::CATALOG)),
        "{:#?}",
        fake.calls()
    );
    let removal = fake
        .calls()
        .into_iter()
        .find(|c| c.kind == Kind::Update && c.ok && c.zone.as_deref() == Some("corp.test"))
        .expect("the removal");
    assert!(
        removal
            .text
            .unwrap()
            .contains("update delete web.corp.test. A\n")
    );

    // The outage was reported as Events, and no key material leaked into
    // an Event or a status on the way.
    let events = env
        .mem
        .raw_list("events.k8s.io/v1", "events")
        .into_iter()
        .chain(env.mem.raw_list("v1", "events"));
    let events: Vec<String> = events.map(|e| e.to_string()).collect();
    assert!(
        events.iter().any(|e| e.contains("PrimaryUnavailable")),
        "{events:#?}"
    );
    let mut seen = events.join("\n");
    for kind in [
        ("bind.unkin.net/v1alpha1", "bindzones"),
        ("bind.unkin.net/v1alpha1", "dnsrecords"),
    ] {
        for o in env.mem.raw_list(kind.0, kind.1) {
            seen.push_str(&o["status"].to_string());
        }
    }
    for key in [&env.update, &env.xfer] {
        assert!(
            !seen.contains(key.secret.expose_base64()),
            "key material leaked"
        );
    }

    // A record whose zone is gone is released at once (nothing is served).
    env.delete::<BindZone>("corp").await;
    env.gone::<BindZone>("corp").await;
    let mail = env.record_phase("mail", Phase::Pending).await;
    assert_eq!(mail.status.unwrap().reason.as_deref(), Some("ZoneNotFound"));
    env.delete::<DNSRecord>("mail").await;
    env.gone::<DNSRecord>("mail").await;
    env.stop().await;
}
