//! The store indexes (`controller::index`) as the zone controllers use
//! them, fed by the real watches on the in-memory API: a subscriber that
//! hears of a DNSRecord or BindZone change (what wakes a zone reconcile)
//! finds it already in the index's lookup, and a lookup answers the store's
//! current state (created, changed, moved, deleted).

use crate::support_controller as support;

use std::sync::Arc;

use bind_operator::api::{BindZone, DNSRecord};
use bind_operator::controller::stores::watch_all;
use futures::StreamExt as _;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use support::NS;

fn record(name: &str, zone: &str) -> DNSRecord {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "bind.unkin.net/v1alpha1", "kind": "DNSRecord",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"zoneRef": zone, "name": name, "type": "A", "values": ["192.0.2.1"]}
    }))
    .unwrap()
}

fn bindzone(name: &str, zone_name: &str, cluster: &str) -> BindZone {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindZone",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterRef": cluster, "zoneName": zone_name}
    }))
    .unwrap()
}

fn names<K: kube::Resource>(objs: &[Arc<K>]) -> Vec<String> {
    objs.iter().map(|o| o.name_any()).collect()
}

#[tokio::test]
async fn a_record_is_in_its_zones_lookup_before_any_subscriber_hears_of_it() {
    let api = support::memapi();
    let client = api.client();
    let records: Api<DNSRecord> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    records
        .create(&pp, &record("old", "example-com"))
        .await
        .unwrap();
    let (stores, streams) = watch_all(&client);
    let mut sub = stores.feeds.records.subscribe();
    let driver = tokio::spawn(streams.drive());
    support::within("stores ready", stores.wait_until_ready()).await;
    let ix = &stores.index;

    // Existing at start: indexed by the initial list.
    let seen = support::within("the existing record", sub.next())
        .await
        .unwrap();
    assert_eq!(seen.name_any(), "old");
    assert_eq!(names(&ix.records_of_zone(NS, "example-com")), ["old"]);

    // Created: every change is checked the moment the subscriber gets it.
    records
        .create(&pp, &record("www", "example-com"))
        .await
        .unwrap();
    let seen = support::within("the new record", sub.next()).await.unwrap();
    assert_eq!(seen.name_any(), "www");
    assert_eq!(
        names(&ix.records_of_zone(NS, "example-com")),
        ["old", "www"]
    );

    // Changed: the lookup gives the changed version.
    let ttl = serde_json::json!({"spec": {"ttl": 42}});
    records
        .patch("www", &PatchParams::default(), &Patch::Merge(&ttl))
        .await
        .unwrap();
    let seen = support::within("the changed record", sub.next())
        .await
        .unwrap();
    assert_eq!(seen.spec.ttl, Some(42));
    let www = ix.records_of_zone(NS, "example-com");
    assert_eq!(
        www.iter().find(|r| r.name_any() == "www").unwrap().spec.ttl,
        Some(42)
    );

    // Moved to another zone: out of the first lookup, in the second.
    let moved = serde_json::json!({"spec": {"zoneRef": "other"}});
    records
        .patch("www", &PatchParams::default(), &Patch::Merge(&moved))
        .await
        .unwrap();
    let seen = support::within("the moved record", sub.next())
        .await
        .unwrap();
    assert_eq!(seen.spec.zone_ref, "other");
    assert_eq!(names(&ix.records_of_zone(NS, "example-com")), ["old"]);
    assert_eq!(names(&ix.records_of_zone(NS, "other")), ["www"]);

    // Deleted: gone by the time the subscriber hears of it.
    records
        .delete("www", &DeleteParams::default())
        .await
        .unwrap();
    let seen = support::within("the deleted record", sub.next())
        .await
        .unwrap();
    assert_eq!(seen.name_any(), "www");
    assert!(ix.records_of_zone(NS, "other").is_empty());
    assert_eq!(names(&ix.records_of_zone(NS, "example-com")), ["old"]);
    driver.abort();
}

#[tokio::test]
async fn zones_are_looked_up_by_cluster_and_by_the_zone_they_name() {
    let api = support::memapi();
    let client = api.client();
    let zones: Api<BindZone> = Api::namespaced(client.clone(), NS);
    let pp = PostParams::default();
    let (stores, streams) = watch_all(&client);
    let mut sub = stores.feeds.zones.subscribe();
    let driver = tokio::spawn(streams.drive());
    support::within("stores ready", stores.wait_until_ready()).await;
    let ix = &stores.index;

    for (name, zone, cluster) in [
        ("a", "Example.com.", "c1"),
        ("b", "example.com", "c1"),
        ("c", "example.org", "c1"),
        ("d", "example.com", "c2"),
    ] {
        zones
            .create(&pp, &bindzone(name, zone, cluster))
            .await
            .unwrap();
        let seen = support::within("the new zone", sub.next()).await.unwrap();
        assert_eq!(seen.name_any(), name);
        assert!(names(&ix.zones_of_cluster(NS, cluster)).contains(&name.to_string()));
    }
    assert_eq!(names(&ix.zones_of_cluster(NS, "c1")), ["a", "b", "c"]);
    assert_eq!(names(&ix.zones_of_cluster(NS, "c2")), ["d"]);
    assert_eq!(
        names(&ix.zones_naming(&bindzone("x", "EXAMPLE.COM.", "c1"))),
        ["a", "b"]
    );

    zones.delete("a", &DeleteParams::default()).await.unwrap();
    let seen = support::within("the deleted zone", sub.next())
        .await
        .unwrap();
    assert_eq!(seen.name_any(), "a");
    assert_eq!(names(&ix.zones_of_cluster(NS, "c1")), ["b", "c"]);
    assert_eq!(
        names(&ix.zones_naming(&bindzone("x", "example.com", "c1"))),
        ["b"]
    );
    driver.abort();
}
