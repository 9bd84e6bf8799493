//! `bind-operator local --kubeconfig`: the API server is someone else's
//! (here an in-memory one standing in for a control plane with CRDs
//! installed, and a hand-rolled StatefulSet controller standing in for
//! kube-controller-manager). Local mode applies DIR there, runs the
//! controllers, and runs exactly the BIND pods that API server has: it
//! creates no pod itself and leaves unrelated pods alone.

use crate::support_e2e as support;

use std::collections::BTreeMap;
use std::time::Duration;

use bind_operator::local::command::Backend;
use bind_operator::local::memapi::{MemApi, Verb};
use bind_operator::local::session::register_kinds;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};
use kube::{Client, Resource as _};
use serde_json::json;
use support::{Fixture, read_status};
use tokio_util::sync::CancellationToken;

/// What kube-controller-manager does for a StatefulSet, reduced to what
/// this test needs: pods `<sts>-<i>` from the template, once.
async fn statefulset_controller(client: Client, stop: CancellationToken) {
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    while !stop.is_cancelled() {
        for sts in sets.list(&Default::default()).await.unwrap().items {
            let spec = sts.spec.clone();
            let name = sts.metadata.name.clone().unwrap();
            for i in 0..spec.replicas.unwrap_or(1) {
                let pod_name = format!("{name}-{i}");
                if pods.get_opt(&pod_name).await.unwrap().is_some() {
                    continue;
                }
                let template = spec.template.clone();
                let meta = template.metadata.unwrap_or_default();
                let mut labels = meta.labels.unwrap_or_default();
                labels.insert(
                    "statefulset.kubernetes.io/pod-name".into(),
                    pod_name.clone(),
                );
                let pod = Pod {
                    metadata: ObjectMeta {
                        name: Some(pod_name),
                        namespace: Some("default".into()),
                        labels: Some(labels),
                        annotations: meta.annotations,
                        owner_references: Some(vec![OwnerReference {
                            api_version: "apps/v1".into(),
                            kind: "StatefulSet".into(),
                            name: name.clone(),
                            uid: sts.meta().uid.clone().unwrap(),
                            controller: Some(true),
                            block_owner_deletion: Some(true),
                        }]),
                        ..Default::default()
                    },
                    spec: template.spec,
                    status: None,
                };
                let _ = pods.create(&PostParams::default(), &pod).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_mode_serves_the_api_servers_bind_pods_only() {
    let api = MemApi::new();
    register_kinds(&api);
    let client = api.client();
    let f = Fixture::examples();
    let mode = support::local_in_process(&f, Backend::Cluster(client.clone())).await;
    let stop = CancellationToken::new();
    let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));
    let kcm = tokio::spawn(statefulset_controller(client.clone(), stop.clone()));
    // Somebody else's pod: not ours to run.
    let other: Pod = serde_json::from_value(json!({
        "metadata": {"name": "unrelated", "namespace": "default",
                     "labels": {"app.kubernetes.io/name": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &other)
        .await
        .unwrap();

    let state = f.state.clone();
    let dir = f.dir.clone();
    let snapshot = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + support::STARTUP;
        let snapshot = loop {
            if let Some(s) = read_status(&state).filter(support::all_ready) {
                break s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never ready: {:?}\n{}",
                read_status(&state),
                support::state_diagnostics(&state)
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        support::assert_serves_all(state.as_path(), &snapshot, "example", &dir);
        snapshot
    })
    .await
    .unwrap();
    let names: Vec<&str> = snapshot.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["example-0", "example-1"]);
    assert!(!f.state.join("default/unrelated").exists());

    // The directory went to the API server; nothing was bound to a node.
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let p = pods.get("example-0").await.unwrap();
    assert!(p.spec.unwrap().node_name.is_none());
    let ready: BTreeMap<String, String> = p
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(ready.get("Ready").map(String::as_str), Some("True"));

    // The report watches the API server: it does not LIST our kinds per
    // report (it did every 0.7 s while not converged, #10 item 4). Counted
    // through an edit: applied, served, and converged again.
    api.reset_counts();
    let text = f
        .read("dnsrecords.yaml")
        .replace("192.0.2.11", "192.0.2.12");
    f.write("dnsrecords.yaml", &text);
    let state = f.state.clone();
    let port = snapshot.pods[0].dns.port();
    tokio::task::spawn_blocking(move || {
        support::wait_answer(
            port,
            "www.example.com",
            "A",
            &["192.0.2.10".into(), "192.0.2.12".into()],
            state.as_path(),
        );
        let deadline = std::time::Instant::now() + support::WAIT;
        while !read_status(&state).is_some_and(|s| support::all_ready(&s)) {
            assert!(
                std::time::Instant::now() < deadline,
                "never converged again"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
    .unwrap();
    let lists: u64 = ["bindclusters", "bindtsigkeys", "bindzones", "dnsrecords"]
        .into_iter()
        .map(|r| api.count(Verb::List, r))
        .sum();
    assert_eq!(lists, 0, "LISTs of our kinds through an edit");

    stop.cancel();
    kcm.await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), serving)
        .await
        .expect("local mode stops")
        .unwrap();
    assert!(support::named_under(&f.state).is_empty());
    // Nothing runs them any more: they are not left Running/Ready in the
    // API (deleted; a real StatefulSet controller re-creates them Pending).
    for name in ["example-0", "example-1"] {
        assert!(
            pods.get_opt(name).await.unwrap().is_none(),
            "{name} left in the API after exit"
        );
    }
    assert!(pods.get_opt("unrelated").await.unwrap().is_some());
}

/// #10 item 4: a second run against an API server that still holds the
/// objects with their Ready statuses from the first run must not say
/// "converged" from those: at its first converged status the secondary
/// (a new, empty pod) already answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_existing_objects_converges_only_once_the_secondary_answers() {
    let api = MemApi::new();
    register_kinds(&api);
    let client = api.client();
    let f = Fixture::examples();
    for run in 0..2 {
        let mode = support::local_in_process(&f, Backend::Cluster(client.clone())).await;
        let _ = std::fs::remove_file(f.state.join("status.json"));
        let stop = CancellationToken::new();
        let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));
        let kcm = tokio::spawn(statefulset_controller(client.clone(), stop.clone()));
        let state = f.state.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + support::STARTUP;
            let first = loop {
                if let Some(s) = read_status(&state).filter(|s| s.converged) {
                    break s;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "run {run} never converged: {:?}",
                    read_status(&state)
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            let secondary = first
                .pods
                .iter()
                .find(|p| p.role == bind_operator::local::report::PodRole::Secondary)
                .expect("a secondary pod")
                .dns
                .port();
            support::dig(secondary, "www.example.com", "A")
        })
        .await
        .unwrap();
        assert_eq!(
            answer,
            ["192.0.2.10", "192.0.2.11"],
            "run {run}: converged while the secondary answers {answer:?}"
        );
        stop.cancel();
        kcm.await.unwrap();
        tokio::time::timeout(Duration::from_secs(20), serving)
            .await
            .expect("local mode stops")
            .unwrap();
        println!("run {run}: the first converged status came with the secondary answering");
    }
}
