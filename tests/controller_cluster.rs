//! The BindCluster reconciler's children and its write discipline, against
//! the in-memory API: what it builds, that rendered config never touches
//! the pod template, that an unchanged render bumps nothing, and that a
//! converged cluster costs no exec and no write however often it is
//! reconciled.

use crate::support_controller as support;

use std::collections::BTreeMap;

use bind_operator::api::{CONDITION_READY, find_condition};
use bind_operator::controller::REQUEUE_LONG;
use bind_operator::controller::bindcluster::statefulset::{entrypoint_hash, statefulset};
use bind_operator::controller::names::ANNOTATION_ENTRYPOINT_HASH;
use bind_operator::local::memapi::Verb;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt as _;
use kube::runtime::controller::Action;
use support::{Harness, NS, PRIMARY_IP, material};

async fn setup(replicas: i32) -> Harness {
    let h = Harness::new().await;
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    h.cluster("c", replicas).await;
    h
}

fn sts(h: &Harness) -> StatefulSet {
    h.api.get(Some(NS), "c").expect("statefulset exists")
}

#[tokio::test]
async fn children_are_built_owned_and_wired() {
    let h = setup(3).await;
    h.pod("c", 0, true).await;
    h.reconcile_cluster("c").await;
    let uid = h.get_cluster("c").uid().unwrap();
    let owned_by_cluster =
        |refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference]| {
            refs.iter()
                .any(|o| o.uid == uid && o.kind == "BindCluster" && o.controller == Some(true))
        };

    let cm: ConfigMap = h.api.get(Some(NS), "c-config").unwrap();
    let data = cm.data.clone().unwrap();
    assert_eq!(
        data.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "entrypoint.sh",
            "named.conf.primary",
            "named.conf.secondary"
        ]
    );
    // Secondaries reach the primary through the primary Service's address,
    // and no pod IP is rendered anywhere.
    assert!(data["named.conf.secondary"].contains(PRIMARY_IP));
    assert!(data.values().all(|v| !v.contains("10.244.")));
    assert!(owned_by_cluster(cm.owner_references()));

    let keys: Secret = h.api.get(Some(NS), "c-keys").unwrap();
    let keys_conf = String::from_utf8(keys.data.unwrap()["keys.conf"].0.clone()).unwrap();
    assert!(keys_conf.contains("key \"xfer\""), "{keys_conf}");
    assert!(keys_conf.contains(&material(1)));
    let rndc: Secret = h.api.get(Some(NS), "c-rndc").unwrap();
    assert!(owned_by_cluster(rndc.owner_references()));
    assert!(rndc.data.unwrap().contains_key("rndc.key"));

    let svc = |n: &str| -> Service { h.api.get(Some(NS), n).unwrap() };
    let dns = svc("c");
    let headless = svc("c-headless");
    let primary = svc("c-primary");
    for s in [&dns, &headless, &primary] {
        assert!(owned_by_cluster(s.owner_references()), "{}", s.name_any());
        let ports = s.spec.as_ref().unwrap().ports.as_ref().unwrap();
        let protos: Vec<_> = ports
            .iter()
            .map(|p| (p.port, p.protocol.clone().unwrap()))
            .collect();
        assert_eq!(protos, [(53, "UDP".to_string()), (53, "TCP".to_string())]);
        // Clients keep 53; named listens on the unprivileged 5353.
        for p in ports {
            assert_eq!(p.target_port, Some(IntOrString::Int(5353)));
        }
    }
    assert_eq!(
        headless.spec.as_ref().unwrap().cluster_ip.as_deref(),
        Some("None")
    );
    let primary_sel = primary.spec.unwrap().selector.unwrap();
    assert_eq!(
        primary_sel
            .get("statefulset.kubernetes.io/pod-name")
            .map(String::as_str),
        Some("c-0")
    );
    assert!(
        !dns.spec
            .unwrap()
            .selector
            .unwrap()
            .contains_key("statefulset.kubernetes.io/pod-name")
    );

    let set = sts(&h);
    assert!(owned_by_cluster(set.owner_references()));
    assert_eq!(set.spec.replicas, Some(3));
    assert_eq!(set.spec.service_name.as_deref(), Some("c-headless"));
    let template = set.spec.template;
    assert_eq!(
        template.metadata.unwrap().annotations.unwrap()[ANNOTATION_ENTRYPOINT_HASH],
        entrypoint_hash(&data["entrypoint.sh"])
    );
    let pod = template.spec.unwrap();
    let container = &pod.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("internetsystemsconsortium/bind9:9.20")
    );
    for probe in [&container.readiness_probe, &container.liveness_probe] {
        let cmd = probe
            .as_ref()
            .unwrap()
            .exec
            .as_ref()
            .unwrap()
            .command
            .clone()
            .unwrap();
        assert_eq!(cmd[0], "dig", "probes ask named over DNS: {cmd:?}");
        assert!(cmd.contains(&"@127.0.0.1".to_string()));
    }
    let projected = pod.volumes.unwrap()[0].projected.clone().unwrap();
    let sources: Vec<String> = projected
        .sources
        .unwrap()
        .iter()
        .map(|s| {
            s.config_map
                .as_ref()
                .map(|c| c.name.clone())
                .or_else(|| s.secret.as_ref().map(|c| c.name.clone()))
                .unwrap()
        })
        .collect();
    assert_eq!(sources, ["c-config", "c-keys", "c-rndc"]);
}

#[tokio::test]
async fn pod_template_ignores_rendered_config_but_tracks_pod_spec() {
    let h = setup(2).await;
    h.reconcile_cluster("c").await;
    let base = sts(&h).spec.template;
    let base_conf = h.wanted_mount("c", false);

    h.patch_cluster_spec(
        "c",
        serde_json::json!({"recursion": true, "forwarders": ["192.0.2.53"], "allowRecursion": ["10.0.0.0/8"]}),
    )
    .await;
    h.reconcile_cluster("c").await;
    assert_ne!(
        h.wanted_mount("c", false),
        base_conf,
        "the config did change"
    );
    assert_eq!(
        sts(&h).spec.template,
        base,
        "pod template changed on a rendered-config change; that restarts every pod"
    );

    h.patch_cluster_spec(
        "c",
        serde_json::json!({"image": "internetsystemsconsortium/bind9:9.21"}),
    )
    .await;
    h.reconcile_cluster("c").await;
    let with_image = sts(&h).spec.template;
    assert_ne!(with_image, base, "the template must change with the image");

    h.patch_cluster_spec(
        "c",
        serde_json::json!({"resources": {"limits": {"memory": "1Gi"}}}),
    )
    .await;
    h.reconcile_cluster("c").await;
    assert_ne!(
        sts(&h).spec.template,
        with_image,
        "the template must change with resources"
    );

    h.patch_cluster_spec("c", serde_json::json!({"nodeSelector": {"dns": "yes"}}))
        .await;
    let before = sts(&h).spec.template;
    h.reconcile_cluster("c").await;
    assert_ne!(
        sts(&h).spec.template,
        before,
        "the template must change with scheduling"
    );

    // The entrypoint's hash is the template's only link to rendered files.
    let c = h.get_cluster("c");
    let hash = |s: &StatefulSet| {
        s.spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()[ANNOTATION_ENTRYPOINT_HASH]
            .clone()
    };
    assert_eq!(
        hash(&statefulset(&c, "#!/bin/sh\n")),
        entrypoint_hash("#!/bin/sh\n")
    );
    assert_ne!(
        hash(&statefulset(&c, "#!/bin/sh\n")),
        hash(&statefulset(&c, "#!/bin/sh\n# changed\n"))
    );
}

fn versions(h: &Harness) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let rv = |o: Option<String>| o.unwrap_or_default();
    out.insert("cluster".into(), rv(h.get_cluster("c").resource_version()));
    out.insert(
        "c-config".into(),
        rv(h.api
            .get::<ConfigMap>(Some(NS), "c-config")
            .unwrap()
            .resource_version()),
    );
    for n in ["c-keys", "c-rndc"] {
        out.insert(
            n.into(),
            rv(h.api.get::<Secret>(Some(NS), n).unwrap().resource_version()),
        );
    }
    for n in ["c", "c-headless", "c-primary"] {
        out.insert(
            format!("svc/{n}"),
            rv(h.api
                .get::<Service>(Some(NS), n)
                .unwrap()
                .resource_version()),
        );
    }
    out.insert("sts".into(), rv(sts(h).resource_version()));
    out
}

#[tokio::test]
async fn unchanged_render_bumps_nothing() {
    let h = setup(2).await;
    h.converge("c", 2).await;
    let before = versions(&h);
    let execs = h.exec.calls();
    // Things that wake the reconciler without changing what it renders: a
    // label on the cluster, a label on the key it loads.
    let clusters: kube::Api<bind_operator::api::BindCluster> =
        kube::Api::namespaced(h.client.clone(), NS);
    let label = serde_json::json!({"metadata": {"labels": {"team": "dns"}}});
    clusters
        .patch("c", &Default::default(), &kube::api::Patch::Merge(&label))
        .await
        .unwrap();
    let keys: kube::Api<bind_operator::api::BindTSIGKey> =
        kube::Api::namespaced(h.client.clone(), NS);
    keys.patch(
        "xfer",
        &Default::default(),
        &kube::api::Patch::Merge(&label),
    )
    .await
    .unwrap();
    h.api.reset_counts();
    assert_eq!(h.reconcile_cluster("c").await, Action::await_change());
    let mut after = versions(&h);
    // Only our own label patch moved the cluster's resourceVersion.
    after.insert("cluster".into(), before["cluster"].clone());
    assert_eq!(after, before, "an unchanged render bumped a child");
    assert_eq!(h.api.writes(), 0);
    assert_eq!(h.exec.calls(), execs, "an unchanged render ran a command");
    assert_eq!(h.exec.reconfigs("c-0"), 1);
}

#[tokio::test]
async fn converged_cluster_reconciled_100_times_costs_nothing() {
    let h = setup(2).await;
    assert_eq!(h.converge("c", 2).await, Action::await_change());
    let ready = find_condition(
        &h.get_cluster("c").status.unwrap().conditions,
        CONDITION_READY,
    )
    .unwrap()
    .clone();
    assert_eq!(ready.status, "True");
    let execs = h.exec.calls();
    h.api.reset_counts();
    for _ in 0..100 {
        assert_eq!(h.reconcile_cluster("c").await, Action::await_change());
    }
    assert_eq!(
        h.exec.calls() - execs,
        0,
        "a converged cluster ran commands"
    );
    assert_eq!(h.api.writes(), 0, "a converged cluster wrote to the API");
    // Reads are caches: key Secrets are read once per version.
    assert_eq!(h.api.count(Verb::Get, "secrets"), 0);
    assert_eq!(h.api.count_verb(Verb::List), 0);
}

#[tokio::test]
async fn invalid_spec_reports_and_keeps_serving_config() {
    let h = setup(1).await;
    h.converge("c", 1).await;
    let cm_before = h.api.get::<ConfigMap>(Some(NS), "c-config").unwrap();
    h.patch_cluster_spec("c", serde_json::json!({"forwarders": ["not-an-ip"]}))
        .await;
    let execs = h.exec.calls();
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_LONG)
    );
    let status = h.get_cluster("c").status.unwrap();
    let ready = find_condition(&status.conditions, CONDITION_READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert!(
        ready.message.contains("spec.forwarders[0]"),
        "{}",
        ready.message
    );
    let applied = find_condition(&status.conditions, "ConfigApplied").unwrap();
    assert_eq!(
        applied.status, "True",
        "the last good config is still serving"
    );
    let cm_after = h.api.get::<ConfigMap>(Some(NS), "c-config").unwrap();
    assert_eq!(cm_after.resource_version(), cm_before.resource_version());
    assert_eq!(h.exec.calls(), execs);
    assert!(h.events().iter().any(|(r, _)| r == "InvalidSpec"));
    // Looking again at the same problem writes nothing (no status, no Event).
    h.api.reset_counts();
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_LONG)
    );
    assert_eq!(h.api.writes(), 0);

    // No transfer key: the same kind of answer.
    h.patch_cluster_spec(
        "c",
        serde_json::json!({"forwarders": null, "catalog": {"transferKeyRef": "nope"}}),
    )
    .await;
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_LONG)
    );
    let status = h.get_cluster("c").status.unwrap();
    let ready = find_condition(&status.conditions, CONDITION_READY).unwrap();
    assert!(ready.message.contains("nope"), "{}", ready.message);
}

#[tokio::test]
async fn a_disruption_budget_is_owned_until_the_spec_turns_it_off() {
    let h = setup(3).await;
    h.pod("c", 0, true).await;
    h.reconcile_cluster("c").await;
    let uid = h.get_cluster("c").uid().unwrap();
    let pdb: PodDisruptionBudget = h.api.get(Some(NS), "c-pdb").expect("pdb exists");
    assert!(
        pdb.owner_references()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true))
    );
    let spec = pdb.spec.unwrap();
    assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(spec.min_available, None);
    let selector = spec.selector.unwrap().match_labels.unwrap();
    let sts_selector = sts(&h).spec.selector.match_labels.unwrap();
    assert_eq!(selector, sts_selector, "the budget covers exactly the pods");

    // Turned off: the operator deletes the budget it made.
    h.patch_cluster_spec(
        "c",
        serde_json::json!({"podDisruptionBudget": {"enabled": false}}),
    )
    .await;
    h.reconcile_cluster("c").await;
    assert!(
        h.api
            .get::<PodDisruptionBudget>(Some(NS), "c-pdb")
            .is_none()
    );
    // Back on: it returns.
    h.patch_cluster_spec(
        "c",
        serde_json::json!({"podDisruptionBudget": {"enabled": true}}),
    )
    .await;
    h.reconcile_cluster("c").await;
    assert!(
        h.api
            .get::<PodDisruptionBudget>(Some(NS), "c-pdb")
            .is_some()
    );
}
