//! BindTSIGKey: generated material (random, algorithm-sized, owned, never
//! rotated), user Secrets (checked, with clear reasons when wrong), and a
//! key change reaching keys.conf and then every pod through one reconfig.

use crate::support_controller as support;

use base64::Engine as _;
use bind_operator::api::{
    BindTSIGKey, BindTSIGKeySpec, CONDITION_READY, TsigAlgorithm, find_condition,
};
use bind_operator::controller::REQUEUE_LONG;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use kube::runtime::controller::Action;
use support::{Harness, NS, material};

fn generated(name: &str, alg: TsigAlgorithm, cluster_ref: Option<&str>) -> BindTSIGKey {
    let mut k = BindTSIGKey::new(
        name,
        BindTSIGKeySpec {
            algorithm: alg,
            cluster_ref: cluster_ref.map(Into::into),
            ..Default::default()
        },
    );
    k.metadata.namespace = Some(NS.into());
    k
}

fn secret_text(h: &Harness, name: &str) -> String {
    let s: Secret = h.api.get(Some(NS), name).expect("secret exists");
    String::from_utf8(s.data.unwrap()["secret"].0.clone()).unwrap()
}

fn ready(h: &Harness, key: &str) -> (String, String, String) {
    let k = h.get_key(key);
    let c = find_condition(&k.status.unwrap().conditions, CONDITION_READY)
        .unwrap()
        .clone();
    (c.status, c.reason, c.message)
}

#[tokio::test]
async fn generates_owned_material_once_and_never_rotates() {
    let h = Harness::new().await;
    for (name, alg, bytes) in [
        ("gen256", TsigAlgorithm::HmacSha256, 32),
        ("gen512", TsigAlgorithm::HmacSha512, 64),
        ("genmd5", TsigAlgorithm::HmacMd5, 16),
    ] {
        h.create(&generated(name, alg, None)).await;
        assert_eq!(h.reconcile_key(name).await, Action::await_change());
        let secret_name = format!("{name}-tsig");
        let text = secret_text(&h, &secret_name);
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&text)
            .expect("the secret holds base64 key material");
        assert_eq!(raw.len(), bytes, "{name}: key sized for {alg}");
        let s: Secret = h.api.get(Some(NS), &secret_name).unwrap();
        let key = h.get_key(name);
        assert!(
            s.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == key.uid().as_ref() && o.controller == Some(true))
        );
        let status = key.status.unwrap();
        assert_eq!(status.secret_name.as_deref(), Some(secret_name.as_str()));
        assert_eq!(status.observed_generation, key.metadata.generation);
        assert_eq!(ready(&h, name).0, "True");

        // Reconciling again (even after a spec change) keeps the material.
        h.api.reset_counts();
        h.reconcile_key(name).await;
        assert_eq!(h.api.writes(), 0, "a ready key wrote again");
        assert_eq!(secret_text(&h, &secret_name), text, "the key was rotated");
    }
    assert!(h.events().iter().any(|(r, _)| r == "KeyGenerated"));
}

#[tokio::test]
async fn bad_secret_ref_is_not_ready_with_a_reason() {
    let h = Harness::new().await;
    h.key_with_ref("ext", "ext-dns", "tsig").await;
    assert_eq!(h.reconcile_key("ext").await, Action::requeue(REQUEUE_LONG));
    let (status, reason, message) = ready(&h, "ext");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "SecretNotFound")
    );
    assert!(message.contains("ext-dns"), "{message}");
    assert!(h.get_key("ext").status.unwrap().secret_name.is_none());

    // The Secret appears, without the key the ref names.
    let bad = "c2VjcmV0LW5vdC1iYXNlNjQ=!!";
    let s = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("ext-dns".into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some([("other".to_string(), k8s_openapi::ByteString(b"x".to_vec()))].into()),
        ..Default::default()
    };
    h.create(&s).await;
    h.reconcile_key("ext").await;
    assert_eq!(ready(&h, "ext").1, "SecretKeyMissing");

    // The key is there but is not base64 key material.
    let api: kube::Api<Secret> = kube::Api::namespaced(h.client.clone(), NS);
    let set_tsig = |text: String| {
        let api = api.clone();
        async move {
            let mut cur = api.get("ext-dns").await.unwrap();
            cur.data = Some(
                [(
                    "tsig".to_string(),
                    k8s_openapi::ByteString(text.into_bytes()),
                )]
                .into(),
            );
            api.replace("ext-dns", &Default::default(), &cur)
                .await
                .unwrap();
        }
    };
    set_tsig(bad.to_string()).await;
    h.reconcile_key("ext").await;
    let (_, reason, message) = ready(&h, "ext");
    assert_eq!(reason, "InvalidSecret");
    assert!(
        !message.contains(bad) && !message.contains("c2VjcmV0"),
        "{message}"
    );
    for (_, note) in h.events() {
        assert!(!note.contains("c2VjcmV0"), "{note}");
    }

    // Fixed: ready.
    set_tsig(material(9)).await;
    assert_eq!(h.reconcile_key("ext").await, Action::await_change());
    assert_eq!(ready(&h, "ext").0, "True");
}

#[tokio::test]
async fn keys_conf_holds_the_keys_the_cluster_loads() {
    let h = Harness::new().await;
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    h.create(&generated("shared", TsigAlgorithm::HmacSha256, None))
        .await;
    h.create(&generated("mine", TsigAlgorithm::HmacSha384, Some("c")))
        .await;
    h.create(&generated(
        "theirs",
        TsigAlgorithm::HmacSha256,
        Some("other"),
    ))
    .await;
    for k in ["shared", "mine", "theirs"] {
        h.reconcile_key(k).await;
    }
    h.cluster("c", 1).await;
    h.reconcile_cluster("c").await;
    let conf = h.keys_conf("c");
    for k in ["xfer", "shared", "mine"] {
        assert!(
            conf.contains(&format!("key \"{k}\"")),
            "{k} missing: {conf}"
        );
    }
    assert!(conf.contains(&secret_text(&h, "shared-tsig")));
    assert!(conf.contains("hmac-sha384"));
    assert!(
        !conf.contains("\"theirs\""),
        "a key for another cluster leaked in"
    );
    assert!(!conf.contains(&secret_text(&h, "theirs-tsig")));
}

#[tokio::test]
async fn key_change_reaches_keys_conf_and_every_pod_once() {
    let h = Harness::new().await;
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    h.cluster("c", 2).await;
    h.converge("c", 2).await;
    assert!(h.keys_conf("c").contains(&material(1)));
    let old_hash = h.get_cluster("c").status.unwrap().applied_config["c-0"].clone();

    h.set_secret("xfer-secret", &material(2)).await;
    h.reconcile_cluster("c").await;
    let conf = h.keys_conf("c");
    assert!(
        conf.contains(&material(2)) && !conf.contains(&material(1)),
        "{conf}"
    );
    let status = h.get_cluster("c").status.unwrap();
    let applied = find_condition(&status.conditions, "ConfigApplied").unwrap();
    assert_eq!(
        applied.reason, "Propagating",
        "mounts still hold the old key"
    );

    h.propagate("c", "c-0");
    h.propagate("c", "c-1");
    assert_eq!(h.reconcile_cluster("c").await, Action::await_change());
    assert_eq!((h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")), (2, 2));
    let status = h.get_cluster("c").status.unwrap();
    assert_ne!(status.applied_config["c-0"], old_hash);
    assert_eq!(
        find_condition(&status.conditions, "ConfigApplied")
            .unwrap()
            .reason,
        "Applied"
    );
}

/// Keys and cluster applied together: the cluster reconciles before the
/// key's generated Secret exists. That is a wait for the operator's own
/// work, not a user's mistake: no Warning Event, no condition saying the
/// Secret is missing; the cluster goes on once the key reconcile made it.
#[tokio::test]
async fn a_cluster_applied_with_its_generated_key_raises_no_secret_not_found() {
    let h = Harness::new().await;
    h.create(&generated("xfer", TsigAlgorithm::HmacSha256, None))
        .await;
    h.cluster("c", 1).await;
    h.settle().await;
    let c = std::sync::Arc::new(h.get_cluster("c"));
    let e = bind_operator::controller::bindcluster::reconcile(c, h.ctx.clone())
        .await
        .expect_err("the key's Secret does not exist yet");
    assert_eq!(
        e.to_string(),
        "failed to load the cluster's keys: waiting for secret xfer-tsig of tsig key xfer, \
         which the operator generates"
    );
    let reasons: Vec<String> = h.events().into_iter().map(|(r, _)| r).collect();
    assert!(
        !reasons
            .iter()
            .any(|r| r == "SecretNotFound" || r == "KeyPending"),
        "Warning Events for a Secret the operator creates: {reasons:?}"
    );
    let status = h.get_cluster("c").status.unwrap_or_default();
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.reason == "SecretNotFound"),
        "{status:?}"
    );
    // The key reconcile generates it; the cluster then goes on.
    h.reconcile_key("xfer").await;
    h.reconcile_cluster("c").await;
    assert!(
        h.api
            .get::<k8s_openapi::api::apps::v1::StatefulSet>(Some(NS), "c")
            .is_some()
    );
}
