//! The in-memory API through a real `kube::Client`: kinds and discovery,
//! CRUD and its errors, namespaces, server-owned metadata, the status
//! subresource, validation, fault injection and request counters.

use crate::support_memapi as support;

use std::collections::BTreeMap;

use bind_operator::local::memapi::{Fault, MemApi, Verb};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, Namespace, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{GroupVersionKind, Status};
use kube::discovery::{self, Discovery, Scope};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use support::{Widget, WidgetStatus, setup, widget};

fn api_err<T: std::fmt::Debug>(r: kube::Result<T>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => {
            let s: &Status = &s;
            (s.code, s.reason.clone())
        }
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..Default::default()
    }
}

async fn roundtrip<K>(client: &Client, obj: serde_json::Value)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), "ns1");
    let obj: K = serde_json::from_value(obj).unwrap();
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    let got = api.get(&created.name_any()).await.unwrap();
    assert_eq!(got.meta().uid, created.meta().uid);
    assert_eq!(got.meta().namespace.as_deref(), Some("ns1"));
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn builtin_and_custom_kinds_are_served_under_kube_paths() {
    let (_api, client) = setup();
    roundtrip::<ConfigMap>(
        &client,
        json!({"metadata": {"name": "c"}, "data": {"a": "b"}}),
    )
    .await;
    roundtrip::<Secret>(
        &client,
        json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}),
    )
    .await;
    roundtrip::<Service>(
        &client,
        json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 53}]}}),
    )
    .await;
    roundtrip::<StatefulSet>(
        &client,
        json!({"metadata": {"name": "sts"}, "spec": {"serviceName": "svc",
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
    )
    .await;
    roundtrip::<Pod>(
        &client,
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}),
    )
    .await;
    roundtrip::<Lease>(
        &client,
        json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
    )
    .await;
    roundtrip::<Event>(&client, json!({"metadata": {"name": "e"}, "eventTime": "2024-01-01T00:00:00.000000Z", "reason": "R"})).await;
    roundtrip::<CoreEvent>(
        &client,
        json!({"metadata": {"name": "e"}, "involvedObject": {}, "reason": "R"}),
    )
    .await;
    roundtrip::<Widget>(&client, json!({"apiVersion": "test.memapi.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}})).await;

    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap(),
    )
    .await
    .unwrap();
    assert!(ns.get("team-a").await.unwrap().metadata.namespace.is_none());
}

#[tokio::test]
async fn unregistered_custom_kind_is_not_found() {
    let api = MemApi::new();
    let widgets: Api<Widget> = Api::namespaced(api.client(), "ns1");
    let (code, reason) = api_err(
        widgets
            .create(&PostParams::default(), &widget("w", 1))
            .await,
    );
    assert_eq!((code, reason.as_str()), (404, "NotFound"));
    // Creating the CRD through the API makes the kind served, as on a cluster.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(api.client());
    assert!(api.resource("test.memapi.dev/v1", "Widget").is_none());
    let crd = <Widget as kube::CustomResourceExt>::crd();
    let crd_name = crd.name_any();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = kube::runtime::wait::await_condition(
        crds.clone(),
        &crd_name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    support::within("crd established", established)
        .await
        .unwrap();
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let info = api
        .resource("test.memapi.dev/v1", "Widget")
        .expect("served after the crd");
    assert_eq!(
        (
            info.plural.as_str(),
            info.namespaced,
            info.status_subresource
        ),
        ("widgets", true, true)
    );
    // Deleting the CRD removes its instances and stops serving the kind.
    crds.delete(&crd.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    assert!(api.raw_list("test.memapi.dev/v1", "widgets").is_empty());
    assert_eq!(api_err(widgets.get("w").await).0, 404);
}

#[tokio::test]
async fn discovery_reports_scope_and_status_subresource() {
    let (_api, client) = setup();
    let d = Discovery::new(client.clone()).run().await.unwrap();
    let (res, caps) = d
        .resolve_gvk(&GroupVersionKind::gvk("test.memapi.dev", "v1", "Widget"))
        .expect("widget discovered");
    assert_eq!(res.plural, "widgets");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural == "widgets/status" || r.plural == "status")
    );
    let (_, caps) = d
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Namespace"))
        .expect("namespace discovered");
    assert_eq!(caps.scope, Scope::Cluster);
    let (_, caps) = d
        .resolve_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .unwrap();
    assert!(caps.subresources.is_empty());

    let agg = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    assert!(
        agg.resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "StatefulSet"))
            .is_some()
    );
    assert!(
        agg.resolve_gvk(&GroupVersionKind::gvk("test.memapi.dev", "v1", "Widget"))
            .is_some()
    );
    let (res, _) = discovery::pinned_kind(
        &client,
        &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
    )
    .await
    .unwrap();
    assert_eq!(res.plural, "leases");
}

#[tokio::test]
async fn missing_object_is_404_and_get_opt_none() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    assert!(cms.get_opt("nope").await.unwrap().is_none());
    assert_eq!(api_err(cms.get("nope").await), (404, "NotFound".into()));
    assert_eq!(
        api_err(cms.delete("nope", &DeleteParams::default()).await).0,
        404
    );
    assert_eq!(
        api_err(
            cms.patch("nope", &PatchParams::default(), &Patch::Merge(json!({})))
                .await
        )
        .0,
        404
    );
    assert_eq!(
        api_err(
            cms.replace("nope", &PostParams::default(), &cm("nope", &[]))
                .await
        )
        .0,
        404
    );
}

#[tokio::test]
async fn create_twice_is_already_exists() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    match cms.create(&PostParams::default(), &cm("a", &[])).await {
        Err(kube::Error::Api(s)) => {
            assert!(s.is_already_exists());
            assert_eq!(s.code, 409);
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
}

#[tokio::test]
async fn stale_resource_version_is_conflict() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    let v1 = cms
        .create(&PostParams::default(), &cm("a", &[("k", "1")]))
        .await
        .unwrap();
    let mut v2 = v1.clone();
    v2.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    let v2 = cms.replace("a", &PostParams::default(), &v2).await.unwrap();
    // Writing on top of the first version again must fail: someone else won.
    let mut stale = v1.clone();
    stale.data = Some(BTreeMap::from([("k".into(), "3".into())]));
    match cms.replace("a", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(s)) => assert!(s.is_conflict() && s.reason == "Conflict"),
        other => panic!("expected Conflict, got {other:?}"),
    }
    // A merge patch carrying the stale version fails the same way.
    let p = json!({"metadata": {"resourceVersion": v1.resource_version()}, "data": {"k": "4"}});
    assert_eq!(
        api_err(
            cms.patch("a", &PatchParams::default(), &Patch::Merge(p))
                .await
        ),
        (409, "Conflict".into())
    );
    assert_eq!(cms.get("a").await.unwrap().data, v2.data);
    // Without a resourceVersion a replace is unconditional.
    let mut blind = cm("a", &[("k", "5")]);
    blind.metadata.resource_version = None;
    cms.replace("a", &PostParams::default(), &blind)
        .await
        .unwrap();
}

#[tokio::test]
async fn namespaces_isolate_objects_and_must_match_the_path() {
    let (_api, client) = setup();
    let a: Api<ConfigMap> = Api::namespaced(client.clone(), "a");
    let b: Api<ConfigMap> = Api::namespaced(client.clone(), "b");
    a.create(&PostParams::default(), &cm("same", &[("ns", "a")]))
        .await
        .unwrap();
    b.create(&PostParams::default(), &cm("same", &[("ns", "b")]))
        .await
        .unwrap();
    a.create(&PostParams::default(), &cm("only-a", &[]))
        .await
        .unwrap();
    assert_eq!(b.get("same").await.unwrap().data.unwrap()["ns"], "b");
    assert_eq!(a.list(&ListParams::default()).await.unwrap().items.len(), 2);
    assert_eq!(b.list(&ListParams::default()).await.unwrap().items.len(), 1);
    assert!(b.get_opt("only-a").await.unwrap().is_none());
    let all: Api<ConfigMap> = Api::all(client.clone());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
    let default: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let made = default
        .create(&PostParams::default(), &cm("d", &[]))
        .await
        .unwrap();
    assert_eq!(made.metadata.namespace.as_deref(), Some("default"));
    let mut wrong = cm("x", &[]);
    wrong.metadata.namespace = Some("b".into());
    assert_eq!(
        api_err(a.create(&PostParams::default(), &wrong).await).0,
        400
    );
}

#[tokio::test]
async fn server_owns_uid_versions_timestamps_and_generation() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ns1");
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "ns1");
    let mut c = cm("a", &[]);
    c.metadata.uid = Some("client-chosen".into());
    c.metadata.resource_version = Some("999".into());
    let c = cms.create(&PostParams::default(), &c).await.unwrap();
    let w = widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let uid = c.uid().unwrap();
    assert_ne!(uid, "client-chosen");
    assert_eq!(uid.len(), 36);
    assert_ne!(w.uid(), c.uid());
    assert!(c.metadata.creation_timestamp.is_some());
    let (rv_c, rv_w): (u64, u64) = (
        c.resource_version().unwrap().parse().unwrap(),
        w.resource_version().unwrap().parse().unwrap(),
    );
    assert!(
        rv_w > rv_c,
        "resourceVersion is one global counter across kinds"
    );
    assert_eq!(w.metadata.generation, Some(1));

    // Metadata-only change: new resourceVersion, same generation.
    let p = json!({"metadata": {"labels": {"x": "y"}, "uid": "hijack", "creationTimestamp": "2000-01-01T00:00:00Z"}});
    let w2 = widgets
        .patch("w", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert_eq!(w2.metadata.generation, Some(1));
    assert_eq!(w2.uid(), w.uid());
    assert_eq!(
        w2.metadata.creation_timestamp,
        w.metadata.creation_timestamp
    );
    assert!(w2.resource_version().unwrap().parse::<u64>().unwrap() > rv_w);
    // Status change: same generation.
    let w3 = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(w3.metadata.generation, Some(1));
    // Spec change: generation + 1.
    let w4 = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(w4.metadata.generation, Some(2));
    // A write that changes nothing keeps the resourceVersion.
    let w5 = widgets
        .replace("w", &PostParams::default(), &w4)
        .await
        .unwrap();
    assert_eq!(w5.resource_version(), w4.resource_version());
    assert_eq!(w5.metadata.generation, Some(2));
    // deletionTimestamp cannot be set by a client.
    let p = json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}});
    let w6 = widgets
        .patch("w", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert!(w6.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn status_subresource_separates_spec_and_status() {
    let (_api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "ns1");
    let mut w = widget("w", 1);
    w.status = Some(WidgetStatus {
        phase: Some("Sneaky".into()),
        observed_generation: None,
    });
    let w = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert!(w.status.is_none(), "create ignores status");

    // /status writes change only status, even when the body has a new spec.
    let mut s = w.clone();
    s.spec.size = 99;
    s.status = Some(WidgetStatus {
        phase: Some("Ready".into()),
        observed_generation: Some(1),
    });
    let after = widgets
        .replace_status("w", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(after.spec.size, 1);
    assert_eq!(
        after.status.as_ref().unwrap().phase.as_deref(),
        Some("Ready")
    );
    let p = json!({"spec": {"size": 50}, "metadata": {"labels": {"a": "b"}}, "status": {"phase": "Busy"}});
    let after = widgets
        .patch_status("w", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert_eq!(after.spec.size, 1);
    assert!(after.metadata.labels.is_none());
    assert_eq!(
        after.status.as_ref().unwrap().phase.as_deref(),
        Some("Busy")
    );

    // Main-resource writes ignore status.
    let p = json!({"spec": {"size": 2}, "status": {"phase": "Overwritten"}});
    let after = widgets
        .patch("w", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert_eq!(after.spec.size, 2);
    assert_eq!(
        after.status.as_ref().unwrap().phase.as_deref(),
        Some("Busy")
    );
    let mut r = after.clone();
    r.status = None;
    let after = widgets
        .replace("w", &PostParams::default(), &r)
        .await
        .unwrap();
    assert_eq!(
        after.status.as_ref().unwrap().phase.as_deref(),
        Some("Busy")
    );

    // Kinds without the subresource have no /status.
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    cms.create(&PostParams::default(), &cm("c", &[]))
        .await
        .unwrap();
    assert_eq!(api_err(cms.get_status("c").await).0, 404);
}

#[tokio::test]
async fn invalid_names_and_labels_are_rejected() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    assert_eq!(
        api_err(
            cms.create(&PostParams::default(), &cm("Bad_Name", &[]))
                .await
        ),
        (422, "Invalid".into())
    );
    let mut c = cm("ok", &[]);
    c.metadata.labels = Some(BTreeMap::from([("k".into(), "not valid!".into())]));
    assert_eq!(api_err(cms.create(&PostParams::default(), &c).await).0, 422);
    let mut g = cm("", &[]);
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let made = cms.create(&PostParams::default(), &g).await.unwrap();
    assert!(made.name_any().starts_with("gen-") && made.name_any().len() == 9);
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let (api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    let made = cms
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &cm("a", &[]),
        )
        .await
        .unwrap();
    assert_eq!(made.name_any(), "a");
    assert!(cms.get_opt("a").await.unwrap().is_none());
    assert_eq!(api.resource_version(), 0);
}

#[tokio::test]
async fn injected_faults_fail_the_next_matching_requests() {
    let (api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    api.fail_next(
        Fault::new(Verb::Patch, "configmaps")
            .times(2)
            .status(409, "Conflict"),
    );
    api.fail_next(
        Fault::new(Verb::Get, "configmaps")
            .named("b")
            .status(503, "ServiceUnavailable"),
    );
    let p = Patch::Merge(json!({"data": {"k": "v"}}));
    assert_eq!(
        api_err(cms.patch("a", &PatchParams::default(), &p).await),
        (409, "Conflict".into())
    );
    // Other verbs and names are untouched while faults are pending.
    cms.get("a").await.unwrap();
    assert_eq!(
        api_err(cms.patch("a", &PatchParams::default(), &p).await).0,
        409
    );
    assert!(
        !cms.get("a")
            .await
            .unwrap()
            .data
            .unwrap_or_default()
            .contains_key("k"),
        "a failed patch changes nothing"
    );
    cms.patch("a", &PatchParams::default(), &p).await.unwrap();
    assert_eq!(api.pending_faults(), 1);
    assert_eq!(
        api_err(cms.get("b").await),
        (503, "ServiceUnavailable".into())
    );
    assert_eq!(api.pending_faults(), 0);
}

#[tokio::test]
async fn request_counters_separate_reads_and_writes() {
    let (api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    cms.get("a").await.unwrap();
    cms.get("a").await.unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    assert_eq!(api.count(Verb::Get, "configmaps"), 2);
    assert_eq!(api.count(Verb::List, "configmaps"), 1);
    assert_eq!(api.count_verb(Verb::Create), 1);
    assert_eq!(api.writes(), 2);
    api.reset_counts();
    cms.get("a").await.unwrap();
    assert_eq!(api.writes(), 0);
    assert_eq!(api.count_verb(Verb::Get), 1);
    // Store access for assertions does not count as a request.
    assert_eq!(
        api.get::<ConfigMap>(Some("ns1"), "a")
            .unwrap()
            .data
            .unwrap()["k"],
        "v"
    );
    assert_eq!(api.list::<ConfigMap>().len(), 1);
    assert_eq!(api.count_verb(Verb::Get), 1);
}
