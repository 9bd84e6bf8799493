//! A BindCluster that names no transfer key (no `catalog` block at all)
//! still converges: the reconciler generates a transfer key once into a
//! Secret the cluster owns, loads it in keys.conf (which named-checkconf
//! accepts), signs the catalog, transfers and NOTIFY with it, and keeps it
//! unchanged however often it reconciles. Naming a key later switches to
//! that key.

use crate::support_controller as support;

use std::sync::Arc;

use bind_operator::api::{BindCluster, BindClusterSpec, CONDITION_READY, find_condition};
use bind_operator::controller::bindcluster::cluster_keys;
use bind_operator::controller::names::GENERATED_TRANSFER_KEY_NAME;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt as _;
use kube::runtime::controller::Action;
use support::{Harness, NS, material};

const KEY_CLAUSE: &str = "key \"bind-operator-transfer\"";

fn transfer_secret(h: &Harness) -> Secret {
    h.api
        .get(Some(NS), "c-transfer")
        .expect("the transfer key secret exists")
}

fn material_of(s: &Secret) -> String {
    String::from_utf8(s.data.clone().unwrap()["secret"].0.clone()).unwrap()
}

async fn minimal_cluster(h: &Harness, replicas: i32) {
    let mut c = BindCluster::new(
        "c",
        BindClusterSpec {
            replicas,
            ..Default::default()
        },
    );
    c.metadata.namespace = Some(NS.into());
    assert!(c.spec.catalog.is_none());
    h.create(&c).await;
}

#[tokio::test]
async fn a_cluster_without_a_catalog_block_converges_on_a_generated_key() {
    let h = Harness::new().await;
    minimal_cluster(&h, 2).await;
    h.converge("c", 2).await;
    let status = h.get_cluster("c").status.unwrap();
    let ready = find_condition(&status.conditions, CONDITION_READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Ready"),
        "{}",
        ready.message
    );

    // Owned by the cluster (deleted with it), with base64 material of the
    // HMAC's size.
    let secret = transfer_secret(&h);
    let uid = h.get_cluster("c").uid().unwrap();
    assert!(
        secret
            .owner_references()
            .iter()
            .any(|o| o.uid == uid && o.kind == "BindCluster")
    );
    let key = material_of(&secret);
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&key)
        .unwrap();
    assert_eq!(raw.len(), 32);

    // keys.conf carries it, and BIND accepts it.
    let keys_conf = h.keys_conf("c");
    assert!(keys_conf.contains(KEY_CLAUSE), "{keys_conf}");
    assert!(keys_conf.contains(&key));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.conf");
    std::fs::write(&path, &keys_conf).unwrap();
    let check = std::process::Command::new("named-checkconf")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );

    // Secondaries transfer with it; the primary notifies with it.
    let cm: ConfigMap = h.api.get(Some(NS), "c-config").unwrap();
    let secondary = &cm.data.unwrap()["named.conf.secondary"];
    assert!(secondary.contains(KEY_CLAUSE), "{secondary}");
    let notify = h
        .exec
        .state()
        .notify
        .get("c-0")
        .cloned()
        .unwrap_or_default();
    assert!(notify.contains(KEY_CLAUSE), "{notify}");

    // The zone reconcilers see the same key as the cluster's transfer key.
    let cluster = h.get_cluster("c");
    let keys = cluster_keys(&h.ctx, &cluster).await.unwrap();
    let transfer = keys.transfer(&cluster).expect("the generated key");
    assert_eq!(transfer.name.as_str(), GENERATED_TRANSFER_KEY_NAME);
    assert_eq!(transfer.secret.expose_base64(), key);
}

#[tokio::test]
async fn the_generated_key_survives_reconciles_and_yields_to_a_named_key() {
    let h = Harness::new().await;
    minimal_cluster(&h, 2).await;
    h.converge("c", 2).await;
    let before = transfer_secret(&h);

    h.api.reset_counts();
    let execs = h.exec.calls();
    for _ in 0..20 {
        let c = Arc::new(h.get_cluster("c"));
        h.settle().await;
        assert_eq!(
            bind_operator::controller::bindcluster::reconcile(c, h.ctx.clone())
                .await
                .unwrap(),
            Action::await_change()
        );
    }
    assert_eq!(h.api.writes(), 0, "a converged cluster wrote to the API");
    assert_eq!(h.exec.calls(), execs, "a converged cluster ran commands");
    let after = transfer_secret(&h);
    assert_eq!(after.resource_version(), before.resource_version());
    assert_eq!(material_of(&after), material_of(&before));

    // Naming a transfer key switches keys.conf and NOTIFY over to it.
    h.user_key("xfer", "xfer-secret", &material(7)).await;
    h.patch_cluster_spec(
        "c",
        serde_json::json!({"catalog": {"transferKeyRef": "xfer"}}),
    )
    .await;
    h.converge("c", 2).await;
    let keys_conf = h.keys_conf("c");
    assert!(keys_conf.contains("key \"xfer\""), "{keys_conf}");
    assert!(!keys_conf.contains(KEY_CLAUSE), "{keys_conf}");
    let notify = h.exec.state().notify["c-0"].clone();
    assert!(notify.contains("key \"xfer\""), "{notify}");
}
