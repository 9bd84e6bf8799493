//! What "Ready" and `status.servers` mean to a user, end to end with real
//! named: the controllers and the local runtime (StatefulSet controller and
//! kubelet) on one in-memory API. A scale-down drops the removed pods from
//! every zone's `status.servers` at once (not at the next periodic check)
//! and the cluster never counts more ready pods than it wants.

use crate::support_local as support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bind_operator::api::{
    BindCluster, BindTSIGKey, BindTSIGKeySpec, BindZone, DNSRecord, find_condition,
};
use bind_operator::controller;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Harness, NS, wait_for};

/// The controllers running on a local runtime.
pub struct Env {
    pub h: Harness,
    stop: tokio::sync::oneshot::Sender<()>,
    manager: tokio::task::JoinHandle<()>,
}

impl Env {
    pub async fn start(
        tweak: impl FnOnce(&mut bind_operator::local::runtime::RuntimeConfig),
    ) -> Env {
        let h = Harness::start(tweak).await;
        h.api.register_custom::<BindCluster>();
        h.api.register_custom::<BindTSIGKey>();
        h.api.register_custom::<BindZone>();
        h.api.register_custom::<DNSRecord>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let manager = tokio::spawn(controller::run(
            h.client.clone(),
            Arc::new(h.runtime.executor()),
            Arc::new(h.runtime.network()),
            async move {
                let _ = stopped.await;
            },
        ));
        Env { h, stop, manager }
    }

    pub async fn create<K>(&self, value: serde_json::Value)
    where
        K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + serde::de::DeserializeOwned
            + serde::Serialize
            + Clone
            + std::fmt::Debug,
    {
        let obj: K = serde_json::from_value(value).unwrap();
        Api::<K>::namespaced(self.h.client.clone(), NS)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }

    /// Cluster `c` with `replicas` pods and zone example.com.
    pub async fn cluster_with_zone(&self, replicas: i32) {
        let key = BindTSIGKey::new("xfer", BindTSIGKeySpec::default());
        let mut key = serde_json::to_value(key).unwrap();
        key["metadata"]["namespace"] = json!(NS);
        self.create::<BindTSIGKey>(key).await;
        self.create::<BindCluster>(json!({
            "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindCluster",
            "metadata": {"name": "c", "namespace": NS},
            "spec": {"replicas": replicas, "catalog": {"transferKeyRef": "xfer"}},
        }))
        .await;
        self.create::<BindZone>(json!({
            "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindZone",
            "metadata": {"name": "example-com", "namespace": NS},
            "spec": {"clusterRef": "c", "zoneName": "example.com",
                     "nameservers": ["ns1.example.com."], "updateKeyRef": "xfer",
                     "records": [{"name": "ns1", "type": "A", "values": ["192.0.2.53"]}]},
        }))
        .await;
    }

    pub fn clusters(&self) -> Api<BindCluster> {
        Api::namespaced(self.h.client.clone(), NS)
    }

    pub fn zones(&self) -> Api<BindZone> {
        Api::namespaced(self.h.client.clone(), NS)
    }

    /// The zone's `status.servers` once it lists exactly `pods`, all at
    /// one serial.
    pub async fn servers_are(&self, pods: &[&str]) -> u32 {
        let zones = self.zones();
        wait_for(&format!("example.com served by exactly {pods:?}"), || {
            let zones = zones.clone();
            async move {
                let servers = zones.get("example-com").await.ok()?.status?.servers;
                let names: Vec<&str> = servers.keys().map(String::as_str).collect();
                let serials: std::collections::BTreeSet<u32> = servers.values().copied().collect();
                (names == pods && serials.len() == 1).then(|| *serials.first().unwrap())
            }
        })
        .await
    }

    pub async fn finish(self) {
        let _ = self.stop.send(());
        self.manager.await.unwrap();
        self.h.finish().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_down_leaves_status_servers_at_once_and_never_counts_extra_pods() {
    let env = Env::start(|_| {}).await;
    env.cluster_with_zone(3).await;
    env.servers_are(&["c-0", "c-1", "c-2"]).await;

    // Every Ready message the cluster shows from now on.
    let messages = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = messages.clone();
    let clusters = env.clusters();
    let watcher = tokio::spawn(async move {
        loop {
            if let Ok(c) = clusters.get("c").await
                && let Some(r) = c
                    .status
                    .as_ref()
                    .and_then(|s| find_condition(&s.conditions, "Ready"))
            {
                let mut seen = seen.lock().unwrap();
                if seen.last() != Some(&r.message) {
                    seen.push(r.message.clone());
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });

    let scaled = Instant::now();
    env.clusters()
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    env.servers_are(&["c-0"]).await;
    let took = scaled.elapsed();
    // The periodic check (60 s) is not what removes them.
    assert!(
        took < Duration::from_secs(15),
        "status.servers kept removed pods for {took:?}"
    );
    wait_for("cluster Ready at 1/1", || async {
        let c = env.clusters().get("c").await.ok()?;
        let r = find_condition(&c.status?.conditions, "Ready")?.clone();
        (r.status == "True" && r.message == "1/1 pods ready").then_some(())
    })
    .await;
    watcher.abort();
    let messages = messages.lock().unwrap().clone();
    for m in &messages {
        if let Some((ready, wanted)) = m
            .split(" pods ready")
            .next()
            .and_then(|c| c.split_once('/'))
            && let (Ok(ready), Ok(wanted)) = (ready.parse::<u32>(), wanted.parse::<u32>())
        {
            assert!(
                ready <= wanted,
                "the cluster said {m:?} (all: {messages:?})"
            );
        }
    }
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_secondary_is_ready_and_counted_only_once_it_serves_the_zones() {
    let env = Env::start(|_| {}).await;
    env.cluster_with_zone(1).await;
    env.servers_are(&["c-0"]).await;
    let pod = env.h.pods().get("c-0").await.unwrap();
    let gates = pod.spec.unwrap().readiness_gates.unwrap();
    assert_eq!(gates[0].condition_type, "bind.unkin.net/zones-served");

    env.clusters()
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    // From the moment c-1 is Ready (in the Services) or counted by the
    // cluster, it answers for the zone.
    let pods = env.h.pods();
    let mut saw_waiting_gate = false;
    let deadline = Instant::now() + support::WAIT;
    loop {
        assert!(Instant::now() < deadline, "c-1 never became Ready");
        let counted = env
            .clusters()
            .get("c")
            .await
            .ok()
            .and_then(|c| c.status)
            .is_some_and(|s| s.ready_replicas >= 2);
        let Ok(p) = pods.get("c-1").await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let cond = |t: &str| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == t))
                .is_some_and(|c| c.status == "True")
        };
        if cond("ContainersReady") && !cond("Ready") {
            saw_waiting_gate = true;
        }
        if cond("Ready") || counted {
            let port = env.h.runtime.pod(NS, "c-1").unwrap().dns.port();
            let soa = support::dig(port, &["example.com", "SOA"]).await;
            assert!(
                !soa.is_empty(),
                "c-1 is Ready (counted: {counted}) but does not answer for example.com"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        saw_waiting_gate,
        "c-1's named answered before it was Ready: the gate was seen waiting"
    );
    env.servers_are(&["c-0", "c-1"]).await;
    env.finish().await;
}
