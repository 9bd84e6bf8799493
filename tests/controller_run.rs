//! The whole manager (`controller::run`, as `bind-operator run` and
//! `local` start it) on the in-memory API: watches and mappers, not direct
//! reconcile calls, carry each change to the cluster it concerns: new pods,
//! a pod's readiness, a key's Secret, a new shared key.

use crate::support_controller as support;

use std::sync::Arc;
use std::time::Duration;

use bind_operator::api::{BindCluster, BindTSIGKey, BindTSIGKeySpec, find_condition};
use bind_operator::controller;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use support::{FakeExec, FixedNetwork, NS, material, memapi};

fn condition(api: &bind_operator::local::memapi::MemApi, type_: &str) -> Option<(String, String)> {
    let c: BindCluster = api.get(Some(NS), "c")?;
    let cond = find_condition(&c.status?.conditions, type_)?.clone();
    Some((cond.status, cond.reason))
}

async fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    support::eventually(what, check).await
}

#[tokio::test]
async fn watches_carry_every_change_to_its_cluster() {
    let api = memapi();
    let client = api.client();
    let exec = FakeExec::default();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(controller::run(
        client.clone(),
        Arc::new(exec.clone()),
        Arc::new(FixedNetwork),
        async move {
            let _ = stop_rx.await;
        },
    ));

    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let h_user_secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("xfer-secret".into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(
            [(
                "secret".to_string(),
                k8s_openapi::ByteString(material(1).into_bytes()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &h_user_secret)
        .await
        .unwrap();
    let keys: Api<BindTSIGKey> = Api::namespaced(client.clone(), NS);
    let mut xfer = BindTSIGKey::new(
        "xfer",
        BindTSIGKeySpec {
            secret_ref: Some(bind_operator::api::SecretKeyRef {
                name: "xfer-secret".into(),
                key: "secret".into(),
            }),
            ..Default::default()
        },
    );
    xfer.metadata.namespace = Some(NS.into());
    keys.create(&PostParams::default(), &xfer).await.unwrap();
    let clusters: Api<BindCluster> = Api::namespaced(client.clone(), NS);
    let mut c = BindCluster::new("c", support::cluster_spec(2));
    c.metadata.namespace = Some(NS.into());
    clusters.create(&PostParams::default(), &c).await.unwrap();

    // The children appear; the key controller marks the key ready.
    eventually("the configmap", || {
        api.get::<ConfigMap>(Some(NS), "c-config")
    })
    .await;
    eventually("the key to be ready", || {
        let k: BindTSIGKey = api.get(Some(NS), "xfer")?;
        find_condition(&k.status?.conditions, "Ready").filter(|c| c.status == "True")?;
        Some(())
    })
    .await;

    // Kubelet's part: the mounts hold the current files, then the pods
    // come up. Creating them is what wakes the cluster.
    let mount = |primary: bool| {
        let cm: ConfigMap = api.get(Some(NS), "c-config").unwrap();
        let keys: Secret = api.get(Some(NS), "c-keys").unwrap();
        let file = if primary {
            "named.conf.primary"
        } else {
            "named.conf.secondary"
        };
        cm.data.unwrap()[file].clone()
            + &String::from_utf8(keys.data.unwrap()["keys.conf"].0.clone()).unwrap()
    };
    exec.set_mounted("c-0", &mount(true));
    exec.set_mounted("c-1", &mount(false));
    let h = support::Harness::detached(api.clone(), exec.clone());
    h.pod("c", 0, true).await;
    h.pod("c", 1, true).await;
    eventually("ConfigApplied", || {
        condition(&api, "ConfigApplied").filter(|(s, _)| s == "True")
    })
    .await;
    eventually("Ready", || {
        condition(&api, "Ready").filter(|(s, _)| s == "True")
    })
    .await;
    assert_eq!((exec.reconfigs("c-0"), exec.reconfigs("c-1")), (1, 1));

    // A pod losing readiness reaches the cluster's status.
    h.set_ready("c-1", false, 1).await;
    eventually("readyReplicas 1", || {
        let c: BindCluster = api.get(Some(NS), "c")?;
        (c.status?.ready_replicas == 1).then_some(())
    })
    .await;
    h.set_ready("c-1", true, 1).await;
    eventually("Ready again", || {
        condition(&api, "Ready").filter(|(s, _)| s == "True")
    })
    .await;

    // A change to a key's Secret reaches keys.conf (through the Secret
    // watch and the key -> cluster mapping).
    let patch = serde_json::json!({"data": {"secret": support::base64(material(2).as_bytes())}});
    secrets
        .patch(
            "xfer-secret",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    eventually("keys.conf with the new key", || {
        let keys: Secret = api.get(Some(NS), "c-keys")?;
        let conf = String::from_utf8(keys.data?["keys.conf"].0.clone()).ok()?;
        conf.contains(&material(2)).then_some(())
    })
    .await;
    exec.set_mounted("c-0", &mount(true));
    exec.set_mounted("c-1", &mount(false));
    // Kubelet's swap is invisible to the API; the pods' next status
    // heartbeat is what wakes the cluster.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for p in ["c-0", "c-1"] {
        let touch = serde_json::json!({"metadata": {"annotations": {"heartbeat": "1"}}});
        pods.patch(p, &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .unwrap();
    }
    eventually("both pods reconfigured twice", || {
        (exec.reconfigs("c-0") == 2 && exec.reconfigs("c-1") == 2).then_some(())
    })
    .await;

    // A new shared key: generated by its controller, then loaded.
    let mut shared = BindTSIGKey::new("shared", BindTSIGKeySpec::default());
    shared.metadata.namespace = Some(NS.into());
    keys.create(&PostParams::default(), &shared).await.unwrap();
    eventually("keys.conf with the shared key", || {
        let gen_secret: Secret = api.get(Some(NS), "shared-tsig")?;
        let material = String::from_utf8(gen_secret.data?["secret"].0.clone()).ok()?;
        let keys: Secret = api.get(Some(NS), "c-keys")?;
        let conf = String::from_utf8(keys.data?["keys.conf"].0.clone()).ok()?;
        (conf.contains("key \"shared\"") && conf.contains(&material)).then_some(())
    })
    .await;

    // Once converged again the manager goes quiet: no exec, no write.
    exec.set_mounted("c-0", &mount(true));
    exec.set_mounted("c-1", &mount(false));
    for p in ["c-0", "c-1"] {
        let touch = serde_json::json!({"metadata": {"annotations": {"heartbeat": "2"}}});
        pods.patch(p, &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .unwrap();
    }
    eventually("applied everywhere", || {
        condition(&api, "ConfigApplied").filter(|(s, _)| s == "True")?;
        (exec.reconfigs("c-0") == 3 && exec.reconfigs("c-1") == 3).then_some(())
    })
    .await;
    crate::support_clock::idle_for(Duration::from_millis(300)).await;
    let calls = exec.calls();
    api.reset_counts();
    crate::support_clock::idle_for(Duration::from_millis(500)).await;
    assert_eq!(exec.calls(), calls, "a converged cluster ran commands");
    assert_eq!(api.writes(), 0, "a converged cluster wrote");

    stop_tx.send(()).unwrap();
    support::within("the manager to stop", manager)
        .await
        .unwrap();
}
