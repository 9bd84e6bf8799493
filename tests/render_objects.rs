//! `render` writes kubernetes.yaml, the objects each BindCluster gets. This
//! proves they are what the controller really applies: the repository's
//! examples/ are loaded into the in-memory API, the real BindTSIGKey and
//! BindCluster reconcilers run on them, and every child they created is
//! compared with the document the real binary rendered for it (server-set
//! fields and the owner's uid aside). Secrets keep their keys and type but
//! no value, and no live key material appears anywhere in the file.

use crate::support_controller as support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use bind_operator::api::{BindCluster, BindTSIGKey};
use bind_operator::controller::{bindcluster, bindtsigkey};
use bind_operator::local::manifest_dir::load_dir;
use bind_operator::offline::objects::{OBJECTS_FILE, REDACTED};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;
use support::{Harness, PRIMARY_IP};

const NAMESPACE: &str = "default";
const CLUSTER: &str = "example";

/// Where the controller's children live in the in-memory API, by kind.
const CHILD_COLLECTIONS: &[(&str, &str)] = &[
    ("v1", "services"),
    ("v1", "configmaps"),
    ("v1", "secrets"),
    ("apps/v1", "statefulsets"),
    ("policy/v1", "poddisruptionbudgets"),
];

fn examples_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// The examples applied to the API, as `local` would.
async fn apply_examples(h: &Harness) {
    let loaded = load_dir(examples_dir());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    for m in loaded.manifests {
        let ar = m.key.kind.api_resource();
        let obj: DynamicObject = serde_json::from_value(m.object).unwrap();
        let api: Api<DynamicObject> = Api::namespaced_with(
            h.client.clone(),
            m.key.namespace.as_deref().unwrap_or(NAMESPACE),
            &ar,
        );
        api.create(&PostParams::default(), &obj).await.unwrap();
    }
}

/// Runs the BindTSIGKey reconciler on every key, then the BindCluster
/// reconciler: the children it applies are what a cluster would get.
async fn reconcile_examples(h: &Harness) {
    for key in h.api.list::<BindTSIGKey>() {
        h.settle().await;
        bindtsigkey::reconcile(Arc::new(key), h.ctx.clone())
            .await
            .unwrap_or_else(|e| panic!("key reconcile failed: {e}"));
    }
    h.settle().await;
    let cluster: BindCluster = h.api.get(Some(NAMESPACE), CLUSTER).unwrap();
    bindcluster::reconcile(Arc::new(cluster), h.ctx.clone())
        .await
        .unwrap_or_else(|e| panic!("cluster reconcile failed: {e}"));
    h.settle().await;
}

/// The children of the cluster in the API, by (kind, name).
fn live_children(h: &Harness) -> BTreeMap<(String, String), Value> {
    let mut out = BTreeMap::new();
    for (api_version, plural) in CHILD_COLLECTIONS {
        for obj in h.api.raw_list(api_version, plural) {
            let owned = obj["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r["kind"] == "BindCluster" && r["name"] == CLUSTER)
                });
            if owned {
                let kind = obj["kind"].as_str().unwrap().to_string();
                let name = obj["metadata"]["name"].as_str().unwrap().to_string();
                out.insert((kind, name), obj);
            }
        }
    }
    out
}

/// What only the server (or this run) decides: identity, versions, the
/// apply-hash annotation (a hash over the owner's uid), Service IPs,
/// status.
fn normalise(mut v: Value) -> Value {
    let meta = v["metadata"].as_object_mut().unwrap();
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "generation",
    ] {
        meta.remove(field);
    }
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.retain(|k, _| !k.ends_with("applied-hash"));
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
    if let Some(refs) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        for r in refs {
            r.as_object_mut().unwrap().remove("uid");
        }
    }
    let obj = v.as_object_mut().unwrap();
    obj.remove("status");
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
        && spec.get("clusterIP").and_then(Value::as_str) != Some("None")
    {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    v
}

fn rendered_docs(text: &str) -> BTreeMap<(String, String), Value> {
    let mut out = BTreeMap::new();
    for doc in bind_operator::yaml::documents(text) {
        let v: Value = doc.value.unwrap();
        let kind = v["kind"].as_str().unwrap().to_string();
        let name = v["metadata"]["name"].as_str().unwrap().to_string();
        assert!(
            out.insert((kind.clone(), name.clone()), v).is_none(),
            "{kind} {name} rendered twice"
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_objects_are_what_the_controller_applies() {
    let h = Harness::new().await;
    apply_examples(&h).await;
    reconcile_examples(&h).await;
    let live = live_children(&h);

    let out = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_bind-operator"))
        .args(["render", "-f"])
        .arg(examples_dir())
        .arg("--out")
        .arg(out.path())
        // The fixed network's primary Service ClusterIP, as the controller saw it.
        .args(["--primary-address", PRIMARY_IP])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "render failed: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(out.path().join(NAMESPACE).join(CLUSTER).join(OBJECTS_FILE))
        .unwrap();
    let rendered = rendered_docs(&text);

    let names = |m: &BTreeMap<(String, String), Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&rendered),
        names(&live),
        "render and the controller disagree on which objects the cluster gets"
    );
    for kind in ["StatefulSet", "Service", "ConfigMap", "Secret"] {
        assert!(
            live.keys().any(|(k, _)| k == kind),
            "the controller made no {kind}: the comparison would prove nothing"
        );
    }

    for (id, live_obj) in &live {
        let got = rendered[id].clone();
        if id.0 != "Secret" {
            assert_eq!(
                normalise(got),
                normalise(live_obj.clone()),
                "{} {}: rendered differs from what the controller applied",
                id.0,
                id.1
            );
            continue;
        }
        // Same Secret, same keys and type, no value.
        let data = got["stringData"].as_object().cloned().unwrap_or_default();
        let live_data = live_obj["data"].as_object().unwrap();
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            live_data.keys().collect::<Vec<_>>(),
            "Secret {}: keys differ",
            id.1
        );
        assert!(
            data.values().all(|v| v == REDACTED),
            "Secret {} has a value that is not redacted: {data:?}",
            id.1
        );
        assert!(got.get("data").is_none(), "Secret {} carries data", id.1);
        let mut strip = got.clone();
        strip.as_object_mut().unwrap().remove("stringData");
        let mut live_strip = live_obj.clone();
        live_strip.as_object_mut().unwrap().remove("data");
        assert_eq!(normalise(strip), normalise(live_strip), "Secret {}", id.1);
    }

    // No key material of the live cluster is in the file: neither a raw
    // base64 value nor a `secret "..."` inside a key file.
    let mut materials = Vec::new();
    for secret in h.api.list::<k8s_openapi::api::core::v1::Secret>() {
        for value in secret.data.unwrap_or_default().into_values() {
            let text = String::from_utf8_lossy(&value.0).into_owned();
            if !text.contains('{') {
                materials.push(text.trim().to_string());
            }
            for part in text.split("secret \"").skip(1) {
                materials.push(part.split('"').next().unwrap().to_string());
            }
        }
    }
    assert!(
        materials.len() >= 3,
        "too few key materials found: the check would prove nothing"
    );
    for m in &materials {
        assert!(
            !text.contains(m.as_str()),
            "{OBJECTS_FILE} holds live key material"
        );
    }
    println!(
        "{} objects compared with the controller's: {:?}",
        live.len(),
        names(&live)
    );
}
