//! BindZone lifecycle against the in-memory API and the recording fake BIND:
//! create order (zone file before addzone, catalog created and joined),
//! delete order (catalog left before delzone; file and journal removed, so
//! a re-created zone of the same name starts clean), apex NS convergence
//! (add the new NS before deleting the old, never an RRset-wide delete),
//! and a failed step's Event naming the step, zone and pod.

use crate::support_zones as support;

use std::sync::Arc;

use bind_operator::api::{BindZone, Phase};
use serde_json::json;
use support::fakebind::{FakeBind, Kind};
use support::{CATALOG, Env, PRIMARY, SECONDARY, test_settings, zone};

fn index_of(calls: &[support::fakebind::Call], kind: Kind, zone: &str) -> usize {
    calls
        .iter()
        .position(|c| c.kind == kind && c.zone.as_deref().is_some_and(|z| z.contains(zone)))
        .unwrap_or_else(|| panic!("no {kind:?} call for {zone} in {calls:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_create_and_delete_follow_the_safe_order() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    let mut z = zone("example", "example.com");
    z.spec.records = serde_json::from_value(json!([
        {"name": "www", "type": "A", "values": ["192.0.2.10"]},
    ]))
    .unwrap();
    env.create(z).await;
    let ready = env.zone_phase("example", Phase::Ready).await;

    let calls = fake.calls();
    // Only the primary is written; the secondary is only asked which
    // serial it holds (a new zone starts above it).
    assert!(
        calls
            .iter()
            .all(|c| c.pod == PRIMARY || c.kind == Kind::Serials),
        "only the primary is written: {calls:#?}"
    );
    // The zone is created with its records (one zone-list run), the
    // catalog zone the same way, then the zone joins the catalog.
    let put = index_of(&calls, Kind::PutZone, "example.com");
    let cat_put = index_of(&calls, Kind::PutZone, CATALOG);
    let join = index_of(&calls, Kind::Update, CATALOG);
    assert!(put < join && cat_put < join, "{calls:#?}");
    assert!(
        calls[join]
            .text
            .as_deref()
            .unwrap()
            .contains("PTR example.com.")
    );
    assert!(
        fake.catalog_members(PRIMARY, CATALOG)
            .contains("example.com")
    );
    assert!(
        !calls
            .iter()
            .any(|c| c.kind == Kind::Update && c.zone.as_deref() == Some("example.com")),
        "the records came with the zone's creation: {calls:#?}"
    );
    assert!(fake.has_file(PRIMARY, "zones/example.com.db"));

    // What a user would see: the primary and, through the catalog, the
    // secondary serve the zone; status carries the serial.
    assert_eq!(
        fake.values(PRIMARY, "example.com", "www.example.com", "A"),
        ["192.0.2.10".to_string()].into()
    );
    assert!(
        fake.zone(SECONDARY, "example.com").is_some(),
        "{:?} {:?}",
        fake.catalog_members(PRIMARY, CATALOG),
        fake.zone(PRIMARY, CATALOG)
    );
    let status = ready.status.unwrap();
    assert_eq!(status.serial, fake.serial(PRIMARY, "example.com"));
    assert_eq!(status.record_count, Some(1));

    // A record added later is one UPDATE signed with the update key (the
    // zone's journal holds it).
    fake.clear_calls();
    env.patch_spec::<BindZone>(
        "example",
        json!({"records": [
            {"name": "www", "type": "A", "values": ["192.0.2.10"]},
            {"name": "api", "type": "A", "values": ["192.0.2.11"]},
        ]}),
    )
    .await;
    env.wait::<BindZone, _>("api served", "example", |_| {
        (!fake
            .values(PRIMARY, "example.com", "api.example.com", "A")
            .is_empty())
        .then_some(())
    })
    .await;
    let calls = fake.calls();
    let upd = index_of(&calls, Kind::Update, "example.com");
    let script = calls[upd].text.as_deref().unwrap();
    assert!(script.contains("key hmac-sha256:update "), "{script:.80}");
    assert!(fake.has_file(PRIMARY, "zones/example.com.db.jnl"));

    // Delete: the catalog is left first, then delzone removes file and journal.
    fake.clear_calls();
    env.delete::<BindZone>("example").await;
    env.gone::<BindZone>("example").await;
    let calls = fake.calls();
    let leave = index_of(&calls, Kind::Update, CATALOG);
    let del = index_of(&calls, Kind::RemoveZone, "example.com");
    assert!(
        leave < del,
        "the catalog must be left before the zone is deleted"
    );
    assert!(
        calls[leave]
            .text
            .as_deref()
            .unwrap()
            .contains("update delete")
    );
    assert!(
        !fake
            .catalog_members(PRIMARY, CATALOG)
            .contains("example.com")
    );
    assert!(fake.zone(PRIMARY, "example.com").is_none());
    assert!(fake.zone(SECONDARY, "example.com").is_none());
    assert!(!fake.has_file(PRIMARY, "zones/example.com.db"));
    assert!(!fake.has_file(PRIMARY, "zones/example.com.db.jnl"));

    // A later zone of the same name starts clean: the old journal would have
    // replayed www into it.
    env.create(zone("again", "example.com")).await;
    env.zone_phase("again", Phase::Ready).await;
    assert!(
        fake.values(PRIMARY, "example.com", "www.example.com", "A")
            .is_empty(),
        "a deleted zone's records came back: {:?}",
        fake.zone(PRIMARY, "example.com")
    );
    assert!(
        fake.catalog_members(PRIMARY, CATALOG)
            .contains("example.com")
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apex_ns_converges_per_rdata_adding_before_deleting() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    let mut z = zone("apex", "apex.test");
    z.spec.nameservers = vec!["ns1".into()];
    z.spec.records = serde_json::from_value(json!([
        {"name": "ns1", "type": "A", "values": ["192.0.2.1"]},
    ]))
    .unwrap();
    env.create(z).await;
    env.zone_phase("apex", Phase::Ready).await;
    assert_eq!(
        fake.values(PRIMARY, "apex.test", "apex.test", "NS"),
        ["ns1.apex.test.".to_string()].into()
    );

    // Replace ns1 by ns2 (an in-zone name whose glue arrives with it).
    fake.clear_calls();
    env.patch_spec::<BindZone>(
        "apex",
        json!({
            "nameservers": ["ns2"],
            "records": [
                {"name": "ns1", "type": "A", "values": ["192.0.2.1"]},
                {"name": "ns2", "type": "A", "values": ["192.0.2.2"]},
            ],
        }),
    )
    .await;
    env.wait::<BindZone, _>("ns2 served", "apex", |_| {
        (fake.values(PRIMARY, "apex.test", "apex.test", "NS")
            == ["ns2.apex.test.".to_string()].into())
        .then_some(())
    })
    .await;
    let calls = fake.calls();
    // The update of this zone that brought ns2 (a late catalog update from
    // the zone's creation may also land after clear_calls on a busy machine).
    let upd = calls
        .iter()
        .find(|c| {
            c.kind == Kind::Update
                && c.ok
                && c.zone
                    .as_deref()
                    .is_some_and(|z| z.starts_with("apex.test"))
                && c.text
                    .as_deref()
                    .is_some_and(|s| s.contains("ns2.apex.test."))
        })
        .unwrap_or_else(|| panic!("an update of apex.test bringing ns2: {calls:#?}"));
    let script = upd.text.as_deref().unwrap();
    let glue = script
        .find("update add ns2.apex.test. 3600 A 192.0.2.2")
        .expect(script);
    let add = script
        .find("update add apex.test. 3600 NS ns2.apex.test.")
        .expect(script);
    let del = script
        .find("update delete apex.test. NS ns1.apex.test.")
        .expect(script);
    assert!(
        glue < add && add < del,
        "glue, then the new NS, then the old:\n{script}"
    );
    assert!(
        !script.contains("update delete apex.test. NS\n"),
        "an RRset-wide apex NS delete is ignored by BIND:\n{script}"
    );

    // spec.soa is honoured after creation too: names and timers follow.
    let before = fake.serial(PRIMARY, "apex.test").unwrap();
    env.patch_spec::<BindZone>(
        "apex",
        json!({"soa": {"rname": "dns-admin@apex.test", "refresh": 7200}}),
    )
    .await;
    let soa = env
        .wait::<BindZone, _>("SOA updated", "apex", |_| {
            fake.soa(PRIMARY, "apex.test")
                .filter(|s| s.contains("dns-admin.apex.test.") && s.contains(" 7200 "))
        })
        .await;
    assert!(fake.serial(PRIMARY, "apex.test").unwrap() > before, "{soa}");
    env.stop().await;
}

/// A failed step of the primary's convergence names itself, the zone and
/// the pod in the Warning Event; the zone's status keeps the server's own
/// message (what a user reads on the object did not change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_names_the_step_zone_and_pod() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    env.create(zone("steps", "steps.test")).await;
    env.zone_phase("steps", Phase::Ready).await;

    fake.set_down(PRIMARY, true);
    // A changed plan reads the primary first: that read is the step that fails.
    env.patch_spec::<BindZone>(
        "steps",
        json!({"records": [{"name": "www", "type": "A", "values": ["192.0.2.7"]}]}),
    )
    .await;
    let z = env.zone_phase("steps", Phase::Pending).await;
    let cond = &z.status.unwrap().conditions[0];
    assert_eq!(cond.reason, "PrimaryUnavailable", "{cond:?}");
    assert!(
        cond.message.starts_with("failed to reach named in pod"),
        "{cond:?}"
    );
    let note = env
        .wait::<BindZone, _>("a Warning Event naming the step", "steps", |_| {
            env.mem
                .list::<k8s_openapi::api::events::v1::Event>()
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("PrimaryUnavailable"))
                .filter_map(|e| e.note)
                .find(|n| n.contains("steps.test"))
        })
        .await;
    assert!(
        note.starts_with(&format!(
            "failed to read what the primary serves (zone steps.test, pod {PRIMARY}): failed to reach named in pod"
        )),
        "{note}"
    );
    env.stop().await;
}
