//! Patches (merge, JSON patch with `test`, server-side apply), finalizers
//! and deletionTimestamp, and owner-reference garbage collection, all
//! through a real `kube::Client` against the in-memory API.

use crate::support_memapi as support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde_json::json;
use support::{Widget, setup, widget};

fn code<T: std::fmt::Debug>(r: kube::Result<T>) -> u16 {
    match r {
        Err(kube::Error::Api(s)) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn owned_cm(name: &str, owners: &[OwnerReference]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(owners.to_vec()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn owner_ref<K: Resource<DynamicType = ()>>(k: &K) -> OwnerReference {
    k.controller_owner_ref(&())
        .expect("object has a name and uid")
}

#[tokio::test]
async fn merge_patch_merges_maps_and_null_removes() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    let mut c = owned_cm("a", &[]);
    c.data = Some(BTreeMap::from([
        ("keep".into(), "1".into()),
        ("drop".into(), "2".into()),
    ]));
    cms.create(&PostParams::default(), &c).await.unwrap();
    let p = json!({"data": {"drop": null, "new": "3"}, "metadata": {"labels": {"l": "v"}}});
    let c = cms
        .patch("a", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert_eq!(
        c.data.clone().unwrap(),
        BTreeMap::from([("keep".into(), "1".into()), ("new".into(), "3".into())])
    );
    assert_eq!(c.labels()["l"], "v");
}

#[tokio::test]
async fn json_patch_with_test_is_atomic() {
    let (_api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client, "ns1");
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    // Exactly what kube's finalizer helper sends for the first finalizer.
    let first: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["a/f"]},
    ]))
    .unwrap();
    let w = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Json::<()>(first.clone()),
        )
        .await
        .unwrap();
    assert_eq!(w.finalizers(), ["a/f"]);
    // Replaying it fails the test and changes nothing.
    assert_eq!(
        code(
            widgets
                .patch("w", &PatchParams::default(), &Patch::Json::<()>(first))
                .await
        ),
        422
    );
    let bad: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/size", "value": 7},
        {"op": "test", "path": "/spec/size", "value": 8},
    ]))
    .unwrap();
    assert_eq!(
        code(
            widgets
                .patch("w", &PatchParams::default(), &Patch::Json::<()>(bad))
                .await
        ),
        422
    );
    assert_eq!(widgets.get("w").await.unwrap().spec.size, 1);
    let good: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "a/f"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
        {"op": "replace", "path": "/spec/size", "value": 7},
    ]))
    .unwrap();
    let w = widgets
        .patch("w", &PatchParams::default(), &Patch::Json::<()>(good))
        .await
        .unwrap();
    assert!(w.finalizers().is_empty() && w.spec.size == 7);
}

#[tokio::test]
async fn apply_creates_then_owns_exactly_what_it_sets() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    let pp = PatchParams::apply("ctrl");
    let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"mine": "1"}},
        "data": {"x": "1", "y": "2"}});
    let made = cms.patch("a", &pp, &Patch::Apply(&first)).await.unwrap();
    assert_eq!(made.data.as_ref().unwrap().len(), 2);
    assert!(made.uid().is_some());
    // Someone else adds a key by merge patch; the next apply keeps it but
    // drops what the manager stopped setting.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"theirs": "t"}, "metadata": {"labels": {"their": "1"}}})),
    )
    .await
    .unwrap();
    let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "10"}});
    let c = cms.patch("a", &pp, &Patch::Apply(&second)).await.unwrap();
    assert_eq!(
        c.data.clone().unwrap(),
        BTreeMap::from([("x".into(), "10".into()), ("theirs".into(), "t".into())])
    );
    assert_eq!(
        c.labels().clone(),
        BTreeMap::from([("their".into(), "1".into())])
    );
    // Re-applying the same configuration is a no-op.
    let again = cms.patch("a", &pp, &Patch::Apply(&second)).await.unwrap();
    assert_eq!(again.resource_version(), c.metadata.resource_version);
    // An apply without kind is rejected like on a real server.
    assert_eq!(
        code(
            cms.patch("a", &pp, &Patch::Apply(json!({"data": {"x": "1"}})))
                .await
        ),
        400
    );
}

#[tokio::test]
async fn apply_conflicts_between_managers_unless_forced() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    let cfg = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": v}});
    cms.patch("a", &PatchParams::apply("one"), &Patch::Apply(cfg("1")))
        .await
        .unwrap();
    match cms
        .patch("a", &PatchParams::apply("two"), &Patch::Apply(cfg("2")))
        .await
    {
        Err(kube::Error::Api(s)) => assert!(s.is_conflict(), "{s:?}"),
        other => panic!("expected an apply conflict, got {other:?}"),
    }
    // Agreeing on the value is not a conflict.
    cms.patch("a", &PatchParams::apply("two"), &Patch::Apply(cfg("1")))
        .await
        .unwrap();
    let c = cms
        .patch(
            "a",
            &PatchParams::apply("two").force(),
            &Patch::Apply(cfg("2")),
        )
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["k"], "2");
    // "one" lost the field: its next apply without the field keeps the value.
    let none = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
    let c = cms
        .patch("a", &PatchParams::apply("one"), &Patch::Apply(none))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["k"], "2");
}

#[tokio::test]
async fn apply_status_touches_only_status() {
    let (_api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client, "ns1");
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let pp = PatchParams::apply("ctrl").force();
    let s = json!({"apiVersion": "test.memapi.dev/v1", "kind": "Widget", "spec": {"size": 9},
        "status": {"phase": "Ready", "observedGeneration": 1}});
    let w = widgets
        .patch_status("w", &pp, &Patch::Apply(&s))
        .await
        .unwrap();
    assert_eq!(w.spec.size, 1);
    assert_eq!(w.status.as_ref().unwrap().phase.as_deref(), Some("Ready"));
    assert_eq!(w.metadata.generation, Some(1));
    let s = json!({"apiVersion": "test.memapi.dev/v1", "kind": "Widget", "status": {"observedGeneration": 1}});
    let w = widgets
        .patch_status("w", &pp, &Patch::Apply(&s))
        .await
        .unwrap();
    assert_eq!(
        w.status.unwrap().phase,
        None,
        "a field no longer applied is removed"
    );
    // Apply on the main resource ignores status and bumps generation for spec.
    let m = json!({"apiVersion": "test.memapi.dev/v1", "kind": "Widget", "spec": {"size": 3}, "status": {"phase": "X"}});
    let w = widgets.patch("w", &pp, &Patch::Apply(&m)).await.unwrap();
    assert_eq!((w.spec.size, w.metadata.generation), (3, Some(2)));
    assert_eq!(w.status.unwrap().phase, None);
}

#[tokio::test]
async fn finalizers_hold_a_deleted_object_until_removed() {
    let (_api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client, "ns1");
    let mut w = widget("w", 1);
    w.metadata.finalizers = Some(vec!["a/one".into(), "a/two".into()]);
    widgets.create(&PostParams::default(), &w).await.unwrap();
    let held = widgets.delete("w", &DeleteParams::default()).await.unwrap();
    let held = held
        .left()
        .expect("object still present while finalizers remain");
    let ts = held
        .metadata
        .deletion_timestamp
        .clone()
        .expect("deletionTimestamp set");
    // A second delete does not move the timestamp.
    widgets.delete("w", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        widgets.get("w").await.unwrap().metadata.deletion_timestamp,
        Some(ts)
    );
    // New finalizers are refused once deleting; spec edits still work.
    let add = json!({"metadata": {"finalizers": ["a/one", "a/two", "a/three"]}});
    assert_eq!(
        code(
            widgets
                .patch("w", &PatchParams::default(), &Patch::Merge(add))
                .await
        ),
        422
    );
    let p = json!({"metadata": {"finalizers": ["a/two"]}});
    widgets
        .patch("w", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert!(widgets.get_opt("w").await.unwrap().is_some());
    let p = json!({"metadata": {"finalizers": null}});
    widgets
        .patch("w", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert!(
        widgets.get_opt("w").await.unwrap().is_none(),
        "removing the last finalizer deletes"
    );
    // Without finalizers delete is immediate and answers with a Status.
    widgets
        .create(&PostParams::default(), &widget("v", 1))
        .await
        .unwrap();
    let gone = widgets.delete("v", &DeleteParams::default()).await.unwrap();
    assert!(gone.right().is_some_and(|s| s.is_success()));
    assert!(widgets.get_opt("v").await.unwrap().is_none());
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    let c = cms
        .create(&PostParams::default(), &owned_cm("a", &[]))
        .await
        .unwrap();
    let dp = |uid: &str| DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(code(cms.delete("a", &dp("other-uid")).await), 409);
    cms.delete("a", &dp(&c.uid().unwrap())).await.unwrap();
    assert!(cms.get_opt("a").await.unwrap().is_none());
}

#[tokio::test]
async fn owner_delete_cascades_through_dependents_of_dependents() {
    let (api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "ns1");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ns1");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "ns1");
    let w = widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let child = cms
        .create(&PostParams::default(), &owned_cm("child", &[owner_ref(&w)]))
        .await
        .unwrap();
    let mut grandchild = Secret::default();
    grandchild.metadata.name = Some("grandchild".into());
    grandchild.metadata.owner_references = Some(vec![owner_ref(&child)]);
    secrets
        .create(&PostParams::default(), &grandchild)
        .await
        .unwrap();
    cms.create(&PostParams::default(), &owned_cm("unrelated", &[]))
        .await
        .unwrap();

    widgets.delete("w", &DeleteParams::default()).await.unwrap();
    assert!(cms.get_opt("child").await.unwrap().is_none());
    assert!(secrets.get_opt("grandchild").await.unwrap().is_none());
    assert!(cms.get_opt("unrelated").await.unwrap().is_some());
    assert!(api.list::<Secret>().is_empty());
}

#[tokio::test]
async fn dependent_with_a_finalizer_or_a_live_owner_survives() {
    let (_api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "ns1");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ns1");
    let a = widgets
        .create(&PostParams::default(), &widget("a", 1))
        .await
        .unwrap();
    let b = widgets
        .create(&PostParams::default(), &widget("b", 1))
        .await
        .unwrap();
    let mut ra = owner_ref(&a);
    ra.controller = Some(false);
    cms.create(
        &PostParams::default(),
        &owned_cm("shared", &[ra, owner_ref(&b)]),
    )
    .await
    .unwrap();
    let mut held = owned_cm("held", &[owner_ref(&a)]);
    held.metadata.finalizers = Some(vec!["x/keep".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();

    widgets.delete("a", &DeleteParams::default()).await.unwrap();
    let shared = cms.get("shared").await.unwrap();
    assert_eq!(
        shared.owner_references().len(),
        1,
        "the dangling reference is dropped"
    );
    assert_eq!(shared.owner_references()[0].uid, b.uid().unwrap());
    let held = cms.get("held").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "GC deletes it, its finalizer holds it"
    );
    widgets.delete("b", &DeleteParams::default()).await.unwrap();
    assert!(cms.get_opt("shared").await.unwrap().is_none());
}

#[tokio::test]
async fn orphan_and_foreground_propagation() {
    let (_api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "ns1");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ns1");
    let w = widgets
        .create(&PostParams::default(), &widget("o", 1))
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &owned_cm("orphan", &[owner_ref(&w)]),
    )
    .await
    .unwrap();
    widgets.delete("o", &DeleteParams::orphan()).await.unwrap();
    let orphan = cms.get("orphan").await.unwrap();
    assert!(orphan.owner_references().is_empty());

    let w = widgets
        .create(&PostParams::default(), &widget("f", 1))
        .await
        .unwrap();
    let mut held = owned_cm("dep", &[owner_ref(&w)]);
    held.metadata.finalizers = Some(vec!["x/keep".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();
    let owner = widgets
        .delete("f", &DeleteParams::foreground())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(
        owner
            .finalizers()
            .contains(&"foregroundDeletion".to_string())
    );
    assert!(
        cms.get("dep")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(
        widgets.get_opt("f").await.unwrap().is_some(),
        "owner waits for its dependents"
    );
    cms.patch(
        "dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(widgets.get_opt("f").await.unwrap().is_none());
}

#[tokio::test]
async fn dependent_of_a_missing_owner_is_collected() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    let ghost = OwnerReference {
        api_version: "test.memapi.dev/v1".into(),
        kind: "Widget".into(),
        name: "gone".into(),
        uid: "00000000-0000-4000-8000-000000000000".into(),
        ..Default::default()
    };
    cms.create(&PostParams::default(), &owned_cm("late", &[ghost]))
        .await
        .unwrap();
    assert!(cms.get_opt("late").await.unwrap().is_none());
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents() {
    let (_api, client) = setup();
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let inside: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let outside: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
    inside
        .create(&PostParams::default(), &owned_cm("a", &[]))
        .await
        .unwrap();
    outside
        .create(&PostParams::default(), &owned_cm("a", &[]))
        .await
        .unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    assert!(inside.get_opt("a").await.unwrap().is_none());
    assert!(outside.get_opt("a").await.unwrap().is_some());
}

/// As kube-apiserver's NamespaceLifecycle admission (seen in the real-API
/// lane): nothing new is created in a namespace that is being deleted, and
/// the refusal is a 403 Forbidden that says why. Updates still work (the
/// namespace controller and finalizers need them).
#[tokio::test]
async fn a_terminating_namespace_refuses_new_objects() {
    let (_api, client) = setup();
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(
        json!({"metadata": {"name": "leaving", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let inside: Api<ConfigMap> = Api::namespaced(client.clone(), "leaving");
    inside
        .create(&PostParams::default(), &owned_cm("before", &[]))
        .await
        .unwrap();
    nss.delete("leaving", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        nss.get("leaving")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "held by its finalizer"
    );

    match inside
        .create(&PostParams::default(), &owned_cm("after", &[]))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
            assert!(
                s.message.contains("because it is being terminated"),
                "{}",
                s.message
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }
    let patch = json!({"data": {"k": "v"}});
    inside
        .patch("before", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    // Other namespaces are not affected.
    Api::<ConfigMap>::namespaced(client, "other")
        .create(&PostParams::default(), &owned_cm("after", &[]))
        .await
        .unwrap();
}
