//! Least privilege and honest operations of `bind-operator run`, on the
//! in-memory API or a loopback test server: `--watch-namespaces` keeps the
//! controllers out of every other namespace, the pods/exec executor refuses
//! a pod that is not one of our BIND pods, and every request carries the
//! operator's User-Agent.

use crate::support_controller as support;

use std::sync::Arc;
use std::time::Duration;

use bind_operator::api::{BindCluster, BindClusterSpec};
use bind_operator::bind::commands::Command;
use bind_operator::controller::{self, KubeExecutor, PodExecutor as _, PodRef, Scope};
use bind_operator::operator::{Metrics, Readiness};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use support::{FakeExec, FixedNetwork, NS};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const OTHER: &str = "elsewhere";

async fn cluster_in(client: &kube::Client, ns: &str) {
    let mut c = BindCluster::new(
        "c",
        BindClusterSpec {
            replicas: 1,
            ..Default::default()
        },
    );
    c.metadata.namespace = Some(ns.into());
    Api::<BindCluster>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &c)
        .await
        .unwrap();
}

#[tokio::test]
async fn watch_namespaces_keeps_the_controllers_out_of_other_namespaces() {
    let api = support::memapi();
    let client = api.client();
    // One cluster before start, in each namespace; two watched namespaces
    // (one empty) so the per-namespace watches are merged.
    cluster_in(&client, NS).await;
    cluster_in(&client, OTHER).await;
    let readiness = Readiness::new();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(controller::run_scoped(
        client.clone(),
        Arc::new(FakeExec::default()),
        Arc::new(FixedNetwork),
        Metrics::new(),
        readiness.clone(),
        Scope::parse(&format!("{NS},empty")).unwrap(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    support::eventually("ready", || readiness.is_ready().then_some(())).await;
    support::eventually("the watched cluster's status", || {
        let c: BindCluster = api.get(Some(NS), "c")?;
        c.status.map(|_| ())
    })
    .await;
    // A cluster created after start is reconciled too.
    let mut late = BindCluster::new(
        "late",
        BindClusterSpec {
            replicas: 1,
            ..Default::default()
        },
    );
    late.metadata.namespace = Some(NS.into());
    Api::<BindCluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &late)
        .await
        .unwrap();
    support::eventually("the late cluster's configmap", || {
        api.get::<ConfigMap>(Some(NS), "late-config")
    })
    .await;
    // Meanwhile nothing happened in the namespace that is not watched.
    crate::support_clock::idle_for(Duration::from_millis(300)).await;
    let other: BindCluster = api.get(Some(OTHER), "c").unwrap();
    assert!(other.status.is_none(), "an unwatched cluster got a status");
    assert!(
        api.get::<ConfigMap>(Some(OTHER), "c-config").is_none(),
        "an unwatched cluster got children"
    );
    stop_tx.send(()).unwrap();
    support::within("the manager to stop", manager)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_exec_executor_refuses_a_pod_that_is_not_our_bind_pod() {
    let api = support::memapi();
    let client = api.client();
    // A pod named like a BIND pod, without our labels and owner.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "c-0", "namespace": NS},
        "spec": {"containers": [{"name": "bind", "image": "bind"}]},
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let exec = KubeExecutor::new(client);
    let cmd = Command {
        argv: vec!["rndc".into(), "status".into()],
        stdin: None,
    };
    let err = exec
        .exec(&PodRef::new(NS, "c-0"), &cmd)
        .await
        .expect_err("an unlabelled pod must be refused");
    let text = err.to_string();
    assert!(
        text.contains("refusing to exec") && text.contains("managed-by"),
        "{text}"
    );
}

#[tokio::test]
async fn every_request_carries_the_operator_user_agent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 4096];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client hung up");
            req.extend_from_slice(&buf[..n]);
        }
        let body = serde_json::json!({
            "major": "1", "minor": "36", "gitVersion": "v1.36.2", "gitCommit": "x",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go", "compiler": "gc", "platform": "linux/amd64",
        })
        .to_string();
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        sock.write_all(resp.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&req).into_owned()
    });
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    let client = bind_operator::operator::manager::client_for(config).unwrap();
    support::within("the version", client.apiserver_version())
        .await
        .unwrap();
    let request = server.await.unwrap().to_ascii_lowercase();
    let expected = format!(
        "user-agent: bind-operator/{}\r\n",
        env!("CARGO_PKG_VERSION")
    );
    assert!(request.contains(&expected), "{request}");
}
