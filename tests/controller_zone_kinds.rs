//! The other zone shapes against the recording fake BIND: a secondary zone
//! (added on every pod with its external primaries and key, never a catalog
//! member, nothing sent by update) and a zone in a view (added to that
//! view, joined to that view's catalog).

use crate::support_zones as support;

use std::sync::Arc;

use bind_operator::api::{BindCluster, BindZone, Phase};
use serde_json::json;
use support::fakebind::{FakeBind, Kind};
use support::{CATALOG, CLUSTER, Env, PRIMARY, SECONDARY, XFER_KEY, test_settings};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secondary_zone_is_added_on_every_pod_and_never_joins_the_catalog() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    let z: BindZone = BindZone::new(
        "mirror",
        serde_json::from_value(json!({
            "clusterRef": CLUSTER,
            "zoneName": "partner.example",
            "type": "secondary",
            "primaries": [{"address": "192.0.2.99", "port": 5353, "keyRef": XFER_KEY}],
        }))
        .unwrap(),
    );
    env.create(z).await;
    let ready = env.zone_phase("mirror", Phase::Ready).await;
    let calls = fake.calls();
    for pod in [PRIMARY, SECONDARY] {
        let add = calls
            .iter()
            .find(|c| c.pod == pod && c.kind == Kind::AddZone)
            .unwrap_or_else(|| panic!("no addzone on {pod}: {calls:#?}"));
        let clause = add.text.as_deref().unwrap();
        assert!(clause.contains("type secondary;"), "{clause}");
        assert!(
            clause.contains("primaries { 192.0.2.99 port 5353 key \"xfer\"; };"),
            "{clause}"
        );
        assert!(fake.zone(pod, "partner.example").is_some());
    }
    assert_eq!(
        fake.count_kind(Kind::Update),
        0,
        "nothing is sent by update"
    );
    assert!(
        !fake
            .catalog_members(PRIMARY, CATALOG)
            .contains("partner.example")
    );
    assert_eq!(ready.status.unwrap().servers.len(), 2);

    // Deleted while a secondary pod is down: the zone stays in its data
    // directory, so the delete waits for the pod rather than leaving the
    // zone to come back with it.
    env.set_pod(SECONDARY, false, 0).await;
    env.delete::<BindZone>("mirror").await;
    env.wait::<BindZone, _>("the delete blocked on the down pod", "mirror", |_| {
        env.mem
            .list::<k8s_openapi::api::events::v1::Event>()
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("PodsNotReady"))
            .find(|e| {
                e.note
                    .as_deref()
                    .is_some_and(|n| n.contains("partner.example"))
            })
    })
    .await;
    let held = env
        .get::<BindZone>("mirror")
        .await
        .expect("held by its finalizer while a pod is down");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(
        fake.zone(PRIMARY, "partner.example").is_some(),
        "nothing removed yet"
    );
    assert!(fake.zone(SECONDARY, "partner.example").is_some());
    env.set_pod(SECONDARY, true, 0).await;
    env.gone::<BindZone>("mirror").await;
    for pod in [PRIMARY, SECONDARY] {
        assert!(fake.zone(pod, "partner.example").is_none(), "{pod}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_in_a_view_goes_to_that_view_and_its_catalog() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    env.patch_spec::<BindCluster>(CLUSTER, json!({"views": [{"name": "internal"}]}))
        .await;
    let mut z = support::zone("inside", "corp.internal");
    z.spec.view = Some("internal".into());
    env.create(z).await;
    env.zone_phase("inside", Phase::Ready).await;
    let view_catalog = format!("internal.{CATALOG}");
    let calls = fake.calls();
    // The zone and the view's catalog, each listed in the view.
    let puts: Vec<_> = calls
        .iter()
        .filter(|c| c.kind == Kind::PutZone && c.ok)
        .collect();
    assert_eq!(puts.len(), 2, "{puts:#?}");
    for put in &puts {
        assert_eq!(put.view.as_deref(), Some("internal"), "{put:?}");
    }
    assert!(
        puts.iter()
            .any(|p| p.zone.as_deref() == Some(view_catalog.as_str()))
    );
    assert!(
        fake.catalog_members(PRIMARY, &view_catalog)
            .contains("corp.internal")
    );
    assert!(fake.catalog_members(PRIMARY, CATALOG).is_empty());

    env.delete::<BindZone>("inside").await;
    env.gone::<BindZone>("inside").await;
    let del = fake
        .calls()
        .into_iter()
        .find(|c| c.kind == Kind::RemoveZone)
        .unwrap();
    assert_eq!(del.zone.as_deref(), Some("corp.internal"));
    assert_eq!(del.view.as_deref(), Some("internal"));
    assert!(fake.zone(PRIMARY, "corp.internal").is_none());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_bindzone_for_the_same_zone_waits_and_never_deletes_it() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), test_settings()).await;
    env.create(support::zone("first", "dup.test")).await;
    env.zone_phase("first", Phase::Ready).await;
    env.create(support::zone("second", "DUP.test.")).await;
    // A failure until one of them goes (#14): Error, not "in progress".
    let second = env.zone_phase("second", Phase::Error).await;
    let cond = &second.status.unwrap().conditions[0];
    assert_eq!(cond.reason, "DuplicateZone");
    assert!(cond.message.contains("BindZone first"), "{}", cond.message);

    env.delete::<BindZone>("second").await;
    env.gone::<BindZone>("second").await;
    assert!(
        fake.zone(PRIMARY, "dup.test").is_some(),
        "the duplicate deleted the zone"
    );
    assert_eq!(fake.count_kind(Kind::RemoveZone), 0);
    assert_eq!(fake.count_kind(Kind::DelZone), 0);
    env.stop().await;
}
