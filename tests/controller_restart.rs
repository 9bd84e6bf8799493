//! An operator (re)started over objects that already exist: the whole
//! manager (`controller::run_scoped`, as `bind-operator run` and `local`
//! start it) on the in-memory API with a cluster, a key, a zone and a
//! record created *before* the controllers start. Every one of them is
//! reconciled (counted in `bind_operator_reconciliations_total`, read back
//! from the text exposition), a child deleted behind the operator's back
//! comes back, and the manager stops promptly on shutdown.
//!
//! Before the fix, several tasks awaited the same kube store's readiness
//! (a oneshot keeping one waker): the reconcile of the existing cluster
//! never woke, its ConfigMap never appeared and shutdown hung.

use crate::support_controller as support;
use crate::support_ops::promtext;

use std::sync::Arc;

use bind_operator::api::{BindZone, DNSRecord, DNSRecordSpec, RecordType};
use bind_operator::controller;
use bind_operator::operator::{Metrics, Readiness};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use support::{FakeExec, FixedNetwork, Harness, NS, material};

fn reconciles(m: &Metrics, controller: &str) -> f64 {
    let text = m.encode();
    let families = promtext::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    families
        .get("bind_operator_reconciliations_total")
        .and_then(|f| {
            f.value(
                "bind_operator_reconciliations_total",
                &[("controller", controller)],
            )
        })
        .unwrap_or(0.0)
}

#[tokio::test]
async fn objects_that_exist_at_start_are_reconciled_and_children_come_back() {
    let api = support::memapi();
    let client = api.client();

    // Everything exists before the operator starts.
    let h = Harness::detached(api.clone(), FakeExec::default());
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    h.cluster("c", 1).await;
    let zone: BindZone = serde_json::from_value(serde_json::json!({
        "apiVersion": "bind.unkin.net/v1alpha1",
        "kind": "BindZone",
        "metadata": {"name": "example", "namespace": NS},
        "spec": {"clusterRef": "c", "zoneName": "example.com", "nameservers": ["ns1.example.net."]},
    }))
    .unwrap();
    Api::<BindZone>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &zone)
        .await
        .unwrap();
    let mut record = DNSRecord::new(
        "www",
        DNSRecordSpec {
            zone_ref: "example".into(),
            zone_namespace: None,
            name: "www".into(),
            type_: RecordType::A,
            ttl: None,
            values: vec!["192.0.2.1".into()],
        },
    );
    record.metadata.namespace = Some(NS.into());
    Api::<DNSRecord>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &record)
        .await
        .unwrap();

    let metrics = Metrics::new();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(controller::run_scoped(
        client.clone(),
        Arc::new(FakeExec::default()),
        Arc::new(FixedNetwork),
        metrics.clone(),
        Readiness::new(),
        controller::Scope::cluster(),
        async move {
            let _ = stop_rx.await;
        },
    ));

    // The existing cluster is reconciled: its children and status appear.
    support::eventually("the existing cluster's configmap", || {
        api.get::<ConfigMap>(Some(NS), "c-config")
    })
    .await;
    support::eventually("the existing cluster's status", || {
        h.get_cluster("c").status.map(|_| ())
    })
    .await;
    // The existing zone and record are reconciled and counted.
    support::eventually("the existing zone and record reconciled", || {
        let z: BindZone = api.get(Some(NS), "example")?;
        let r: DNSRecord = api.get(Some(NS), "www")?;
        (z.status.is_some() && r.metadata.finalizers.is_some()).then_some(())
    })
    .await;
    support::eventually("the zone and record reconciles counted", || {
        (reconciles(&metrics, "BindZone") >= 1.0 && reconciles(&metrics, "DNSRecord") >= 1.0)
            .then_some(())
    })
    .await;
    assert!(reconciles(&metrics, "BindCluster") >= 1.0);

    // A child deleted behind the operator's back comes back.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let old_uid = api
        .get::<ConfigMap>(Some(NS), "c-config")
        .unwrap()
        .metadata
        .uid;
    cms.delete("c-config", &DeleteParams::default())
        .await
        .unwrap();
    support::eventually("the deleted configmap re-created", || {
        let cm: ConfigMap = api.get(Some(NS), "c-config")?;
        (cm.metadata.uid != old_uid).then_some(())
    })
    .await;

    stop_tx.send(()).unwrap();
    support::within("the manager to stop", manager)
        .await
        .unwrap();
}

/// The mechanism behind the hang, made deterministic: several tasks wait
/// for the stores before their watches run (as the readiness probe, the
/// zone controllers and each BindCluster reconcile do); every one of them
/// must be woken once the caches are filled.
#[tokio::test]
async fn every_task_waiting_for_the_stores_is_woken() {
    let api = support::memapi();
    let h = Harness::detached(api.clone(), FakeExec::default());
    h.cluster("c", 1).await;
    let (stores, streams) = bind_operator::controller::stores::watch_all(&api.client());
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let stores = stores.clone();
            tokio::spawn(async move { stores.wait_until_ready().await })
        })
        .collect();
    // Let every waiter register before the stores can fill.
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    let driver = tokio::spawn(streams.drive());
    for (i, w) in waiters.into_iter().enumerate() {
        support::within(&format!("waiter {i} to be woken"), w)
            .await
            .unwrap();
    }
    driver.abort();
}
