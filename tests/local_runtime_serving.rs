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
        let (h, stop, manager) = support::start_controllers(tweak).await;
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
        support::stop_controllers(self.h, self.stop, self.manager).await;
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
        if cond("Ready") || counted {
            // Ready only through the gate the operator opened: named's
            // probe alone (ContainersReady) does not make it Ready. (How
            // long the gate waited depends on how fast the zones arrive:
            // the operator may open it before the probe passes.)
            assert!(
                cond("bind.unkin.net/zones-served"),
                "c-1 is Ready (counted: {counted}) without its zones-served gate"
            );
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
    env.servers_are(&["c-0", "c-1"]).await;
    env.finish().await;
}

/// The kubelet rewrites projected files on its periodic sync (a minute);
/// a change to the Pod makes it remount at once. With the runtime's delay
/// at a kubelet's 60 s, a cluster config change still reaches every pod
/// within seconds (the operator annotates the pods whose mount is behind),
/// and the cluster stays Ready while the old config serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_change_is_applied_on_every_pod_within_seconds_despite_a_60s_kubelet_sync() {
    let env = Env::start(|c| c.propagation_delay = Duration::from_secs(60)).await;
    env.cluster_with_zone(2).await;
    env.servers_are(&["c-0", "c-1"]).await;
    let applied = |c: &BindCluster| {
        let s = c.status.as_ref()?;
        let ok = find_condition(&s.conditions, "ConfigApplied")?.status == "True";
        ok.then(|| s.applied_config.clone())
    };
    let before = wait_for("config applied", || async {
        let c = env.clusters().get("c").await.ok()?;
        let a = applied(&c)?;
        (a.len() == 2).then_some(a)
    })
    .await;

    let readiness = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = readiness.clone();
    let clusters = env.clusters();
    let watcher = tokio::spawn(async move {
        loop {
            if let Ok(c) = clusters.get("c").await
                && let Some(r) = c
                    .status
                    .as_ref()
                    .and_then(|s| find_condition(&s.conditions, "Ready"))
            {
                seen.lock()
                    .unwrap()
                    .push(format!("{} {}", r.status, r.reason));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let changed = Instant::now();
    env.clusters()
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"forwarders": ["192.0.2.1"]}})),
        )
        .await
        .unwrap();
    wait_for("new config applied on both pods", || async {
        let c = env.clusters().get("c").await.ok()?;
        let a = applied(&c)?;
        (a.len() == 2 && a.iter().all(|(pod, h)| before.get(pod) != Some(h))).then_some(())
    })
    .await;
    let took = changed.elapsed();
    watcher.abort();
    assert!(
        took < Duration::from_secs(10),
        "config applied after {took:?}"
    );
    for pod in ["c-0", "c-1"] {
        let conf = std::fs::read_to_string(env.h.runtime.dirs(NS, pod).data.join("named.conf"))
            .unwrap_or_default();
        let mounted = std::fs::read_dir(env.h.runtime.dirs(NS, pod).config)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("named.conf"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .collect::<String>();
        assert!(
            mounted.contains("192.0.2.1") || conf.contains("192.0.2.1"),
            "{pod} has not the new config mounted"
        );
    }
    let readiness = readiness.lock().unwrap().clone();
    assert!(
        readiness.iter().all(|r| r.starts_with("True")),
        "the cluster left Ready while the old config served: {readiness:?}"
    );
    env.finish().await;
}

/// Key material comes from Secrets read once per version: once converged,
/// the zone reconciles a new record causes read no Secret from the API
/// (the Secret metadata watch says nothing changed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_cluster_reads_no_secret_again() {
    let env = Env::start(|_| {}).await;
    env.cluster_with_zone(2).await;
    env.servers_are(&["c-0", "c-1"]).await;
    env.h.api.reset_counts();
    env.create::<DNSRecord>(json!({
        "apiVersion": "bind.unkin.net/v1alpha1", "kind": "DNSRecord",
        "metadata": {"name": "www-example-com", "namespace": NS},
        "spec": {"zoneRef": "example-com", "name": "www", "type": "A", "values": ["192.0.2.10"]},
    }))
    .await;
    for pod in ["c-0", "c-1"] {
        wait_for(&format!("www on {pod}"), || async {
            let port = env.h.runtime.pod(NS, pod)?.dns.port();
            support::dig(port, &["www.example.com", "A"])
                .await
                .contains("192.0.2.10")
                .then_some(())
        })
        .await;
    }
    env.servers_are(&["c-0", "c-1"]).await;
    use bind_operator::local::memapi::Verb;
    assert_eq!(
        env.h.api.count(Verb::Get, "secrets"),
        0,
        "Secrets read again although none changed"
    );
    env.finish().await;
}
