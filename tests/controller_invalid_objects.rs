//! One object that does not deserialise (written under an older CRD
//! version, say) is reported and skipped; it never stalls its kind. Run by
//! the controllers themselves (`run_scoped` on the in-memory API, which
//! stores what it is given without schema validation, as a real API server
//! does for objects written before a CRD changed).

use crate::support_controller as support;

use std::sync::Arc;

use bind_operator::api::{BindTSIGKey, DNSRecord, REASON_KEY_AVAILABLE};
use bind_operator::controller::stores::REASON_INVALID_OBJECT;
use bind_operator::controller::{self, Scope};
use bind_operator::operator::{Metrics, Readiness};
use kube::Resource as _;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use support::{FakeExec, FixedNetwork, NS};

/// Stores `body` as an object of kind `K`, whatever it holds.
async fn create_raw<K: kube::Resource<DynamicType = ()>>(
    client: &kube::Client,
    name: &str,
    body: serde_json::Value,
) {
    let ar = ApiResource::erase::<K>(&());
    let mut obj = DynamicObject::new(name, &ar).within(NS);
    obj.data = body;
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ar)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

fn key_ready(api: &bind_operator::local::memapi::MemApi, name: &str) -> Option<()> {
    let k: BindTSIGKey = api.get(Some(NS), name)?;
    let ready = bind_operator::api::find_condition(&k.status?.conditions, "Ready")?.clone();
    (ready.reason == REASON_KEY_AVAILABLE).then_some(())
}

fn has_finalizer(api: &bind_operator::local::memapi::MemApi, name: &str) -> Option<()> {
    let r: DNSRecord = api.get(Some(NS), name)?;
    (!r.metadata.finalizers?.is_empty()).then_some(())
}

/// The Warning Events about `name` with the invalid-object reason.
fn invalid_events(api: &bind_operator::local::memapi::MemApi, name: &str) -> usize {
    api.list::<k8s_openapi::api::events::v1::Event>()
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(REASON_INVALID_OBJECT)
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .count()
}

#[tokio::test]
async fn an_object_that_does_not_deserialise_is_reported_and_skipped() {
    let api = support::memapi();
    let client = api.client();
    // Before start, one bad object of each of two kinds among good ones:
    // the initial list must not fail because of them.
    create_raw::<BindTSIGKey>(
        &client,
        "old-key",
        serde_json::json!({"spec": {"algorithm": "hmac-md4"}}),
    )
    .await;
    create_raw::<DNSRecord>(
        &client,
        "old-record",
        // `value` (one string) where the type has `values` (a list).
        serde_json::json!({"spec": {"zoneRef": "z", "type": "A", "value": "192.0.2.1"}}),
    )
    .await;
    create_raw::<BindTSIGKey>(&client, "before", serde_json::json!({"spec": {}})).await;
    create_raw::<DNSRecord>(
        &client,
        "www",
        serde_json::json!({"spec": {"zoneRef": "z", "type": "A", "values": ["192.0.2.1"]}}),
    )
    .await;

    let readiness = Readiness::new();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(controller::run_scoped(
        client.clone(),
        Arc::new(FakeExec::default()),
        Arc::new(FixedNetwork),
        Metrics::new(),
        readiness.clone(),
        Scope::cluster(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    support::eventually("the caches ready despite the bad objects", || {
        readiness.is_ready().then_some(())
    })
    .await;
    support::eventually("the good key reconciled", || key_ready(&api, "before")).await;
    support::eventually("the good record reconciled", || has_finalizer(&api, "www")).await;
    support::eventually("an Event on each bad object", || {
        (invalid_events(&api, "old-key") == 1 && invalid_events(&api, "old-record") == 1)
            .then_some(())
    })
    .await;

    // After start: a bad one arrives, then a good one; the watch goes on.
    create_raw::<BindTSIGKey>(
        &client,
        "bad-later",
        serde_json::json!({"spec": {"algorithm": 5}}),
    )
    .await;
    create_raw::<BindTSIGKey>(&client, "after", serde_json::json!({"spec": {}})).await;
    support::eventually("the key created after the bad one reconciled", || {
        key_ready(&api, "after")
    })
    .await;
    support::eventually("an Event on the later bad object", || {
        (invalid_events(&api, "bad-later") == 1).then_some(())
    })
    .await;
    // The bad objects were left alone: no status, no finalizer.
    let raw = api
        .raw(
            &BindTSIGKey::api_version(&()),
            "bindtsigkeys",
            Some(NS),
            "old-key",
        )
        .unwrap();
    assert!(raw.get("status").is_none(), "{raw}");
    let raw = api
        .raw(
            &DNSRecord::api_version(&()),
            "dnsrecords",
            Some(NS),
            "old-record",
        )
        .unwrap();
    assert!(raw.pointer("/metadata/finalizers").is_none(), "{raw}");
    let note = api
        .list::<k8s_openapi::api::events::v1::Event>()
        .into_iter()
        .find(|e| e.reason.as_deref() == Some(REASON_INVALID_OBJECT))
        .and_then(|e| e.note)
        .unwrap_or_default();
    println!("invalid-object event: {note}");
    stop_tx.send(()).unwrap();
    support::within("the manager to stop", manager)
        .await
        .unwrap();
}
