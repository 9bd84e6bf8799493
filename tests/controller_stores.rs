//! The shared stores' feeds (`controller::stores`): one watch per kind, any
//! number of subscribers, each seeing what the store holds when it
//! subscribes and then every change (deletions included), only once the
//! store has it. On the in-memory API, with the watches driven as
//! `run_scoped` drives them.

use crate::support_controller as support;

use bind_operator::controller::names::cluster_labels;
use bind_operator::controller::stores::watch_all;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::reflector::ObjectRef;
use support::NS;

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            labels: Some(cluster_labels("c")),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn subscribers_see_the_store_then_every_change_deletions_included() {
    let api = support::memapi();
    let client = api.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod("c-0"))
        .await
        .unwrap();
    let (stores, streams) = watch_all(&client);
    let early = stores.feeds.pods.subscribe();
    let driver = tokio::spawn(streams.drive());
    support::within("stores ready", stores.wait_until_ready()).await;
    let mut early = early;
    let first = support::within("the existing pod", early.next())
        .await
        .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("c-0"));
    // In the store before the subscriber heard of it.
    assert!(
        stores
            .pods
            .get(&ObjectRef::from_obj(first.as_ref()))
            .is_some()
    );

    // A subscriber that comes late starts from the store's contents.
    let mut late = stores.feeds.pods.subscribe();
    let seeded = support::within("the late subscriber's seed", late.next())
        .await
        .unwrap();
    assert_eq!(seeded.metadata.name.as_deref(), Some("c-0"));

    pods.create(&PostParams::default(), &pod("c-1"))
        .await
        .unwrap();
    for sub in [&mut early, &mut late] {
        let next = support::within("the new pod", sub.next()).await.unwrap();
        assert_eq!(next.metadata.name.as_deref(), Some("c-1"));
        assert!(
            stores
                .pods
                .get(&ObjectRef::from_obj(next.as_ref()))
                .is_some()
        );
    }

    // A deleted pod reaches every subscriber (as last seen), after the
    // store dropped it: what wakes a cluster when its pod goes.
    pods.delete("c-0", &DeleteParams::default()).await.unwrap();
    for sub in [&mut early, &mut late] {
        let gone = support::within("the deleted pod", sub.next())
            .await
            .unwrap();
        assert_eq!(gone.metadata.name.as_deref(), Some("c-0"));
        assert!(
            stores
                .pods
                .get(&ObjectRef::from_obj(gone.as_ref()))
                .is_none()
        );
    }
    driver.abort();
}
