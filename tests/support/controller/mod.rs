//! Helpers for the controller tests: an in-memory API with our CRDs, a
//! recording fake executor (the seed's fakeExec: plays the reconfig step's
//! mount check against the mounted config per pod, counts reconfigs, keeps
//! the NOTIFY list, fails on demand), a fixed
//! network, and pods the tests create themselves (there is no StatefulSet
//! controller and no kubelet in the in-memory API).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bind_operator::api::{
    BindCluster, BindClusterSpec, BindTSIGKey, BindTSIGKeySpec, BindZone, CatalogSpec, DNSRecord,
};
use bind_operator::bind::Endpoint;
use bind_operator::bind::commands::{self, Command, WhenMounted};
use bind_operator::bind::layout::PodLayout;
use bind_operator::controller::bindcluster;
use bind_operator::controller::names::{LABEL_POD_NAME, cluster_labels};
use bind_operator::controller::{
    ClusterNetwork, Context, ExecError, ExecOutput, Network, NetworkError, PodExecutor, PodRef,
    Stores, stores,
};
use bind_operator::local::memapi::MemApi;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodCondition, PodStatus, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt as _};
use serde::de::DeserializeOwned;

pub const NS: &str = "dns";
/// What the fixed network says the primary Service's ClusterIP is.
pub const PRIMARY_IP: &str = "10.96.0.10";

/// Every command the fake was asked to run.
#[derive(Clone, Debug)]
pub struct Call {
    pub pod: String,
    pub argv: Vec<String>,
    pub had_stdin: bool,
}

#[derive(Default)]
pub struct FakeState {
    /// What `cat named.conf keys.conf` prints per pod (the mount).
    pub mounted: HashMap<String, String>,
    /// Pods whose exec fails at the transport level (e.g. RBAC).
    pub exec_err: HashMap<String, String>,
    /// When set, `rndc reconfig` exits 1 with this stderr.
    pub reconfig_err: Option<String>,
    /// What named-checkconf prints (on stdout, exit 1) when asked.
    pub checkconf_stdout: String,
    /// The primary's notify-targets.conf per pod.
    pub notify: HashMap<String, String>,
    pub reconfigs: HashMap<String, usize>,
    pub calls: Vec<Call>,
}

/// The recording fake executor.
#[derive(Clone, Default)]
pub struct FakeExec(pub Arc<Mutex<FakeState>>);

impl FakeExec {
    pub fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.0.lock().unwrap()
    }
    pub fn calls(&self) -> usize {
        self.state().calls.len()
    }
    pub fn reconfigs(&self, pod: &str) -> usize {
        self.state().reconfigs.get(pod).copied().unwrap_or(0)
    }
    pub fn set_mounted(&self, pod: &str, text: &str) {
        self.state().mounted.insert(pod.into(), text.into());
    }
}

fn exited(pod: &PodRef, cmd: &Command, code: i32, stdout: &str, stderr: &str) -> ExecError {
    ExecError::exited(pod, cmd, code, stdout.to_string(), stderr)
}

impl PodExecutor for FakeExec {
    fn layout(&self, _pod: &PodRef) -> PodLayout {
        PodLayout::in_cluster()
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        let l = PodLayout::in_cluster();
        let mut s = self.state();
        s.calls.push(Call {
            pod: pod.name.clone(),
            argv: cmd.argv.clone(),
            had_stdin: cmd.stdin.is_some(),
        });
        let ok = |stdout: String| {
            Ok(ExecOutput {
                stdout,
                stderr: String::new(),
            })
        };
        let result = if let Some(e) = s.exec_err.get(&pod.name) {
            Err(ExecError::transport(pod, cmd, e))
        } else if cmd.argv.first().is_some_and(|p| p == "sh") && cmd.verb() == "reconfig" {
            // reconfig_when_mounted: stdin is the wanted named.conf +
            // keys.conf; reconfig only when the mount shows the same bytes.
            let mounted = s.mounted.get(&pod.name).cloned().unwrap_or_default();
            if cmd.stdin.as_deref() != Some(mounted.as_str()) {
                ok(format!("{}\n", WhenMounted::NotMounted.marker()))
            } else {
                *s.reconfigs.entry(pod.name.clone()).or_default() += 1;
                match &s.reconfig_err {
                    Some(e) => Err(exited(
                        pod,
                        cmd,
                        1,
                        &format!("{}\n", WhenMounted::ReconfigFailed.marker()),
                        e,
                    )),
                    None => ok(format!("{}\n", WhenMounted::Reconfigured.marker())),
                }
            }
        } else if cmd.argv == commands::read_mounted_config(&l).argv {
            ok(s.mounted.get(&pod.name).cloned().unwrap_or_default())
        } else if cmd.argv == commands::reconfig(&l).argv {
            *s.reconfigs.entry(pod.name.clone()).or_default() += 1;
            match &s.reconfig_err {
                Some(e) => Err(exited(pod, cmd, 1, "", e)),
                None => ok(String::new()),
            }
        } else if cmd.argv == commands::checkconf(&l, false).argv {
            Err(exited(pod, cmd, 1, &s.checkconf_stdout.clone(), ""))
        } else if cmd.verb() == "write_notify_targets" {
            // `sh -c SCRIPT sh RNDC CONF (FILE TEXT)...`: the lists, in
            // order, rewritten (and reconfigured) only when they differ.
            let wanted: String = cmd.argv[6..].iter().skip(1).step_by(2).cloned().collect();
            let current = s
                .notify
                .get(&pod.name)
                .cloned()
                .unwrap_or_else(|| "also-notify { };\n".into());
            if current == wanted {
                ok(format!("{}\n", commands::NOTIFY_UNCHANGED))
            } else {
                // Its reconfig is not counted: `reconfigs` counts the
                // reconfig step's.
                s.notify.insert(pod.name.clone(), wanted);
                ok(format!("{}\n", commands::NOTIFY_CHANGED))
            }
        } else {
            Err(exited(pod, cmd, 127, "", "unexpected command"))
        };
        async move { result }.boxed()
    }
}

/// The primary Service's ClusterIP is fixed (the in-memory API allocates
/// none); pods are reached at their podIP like in a cluster.
pub struct FixedNetwork;

impl Network for FixedNetwork {
    fn primary_endpoint(&self, _: &PodRef, _: &Service) -> Result<Endpoint, NetworkError> {
        Ok(Endpoint::new(PRIMARY_IP.parse().unwrap(), 53).unwrap())
    }
    fn pod_dns_endpoint(&self, pod: &Pod) -> Option<Endpoint> {
        ClusterNetwork.pod_dns_endpoint(pod)
    }
}

/// An in-memory API with our CRDs, a context on it, and stores kept
/// current by a background task.
pub struct Harness {
    pub api: MemApi,
    pub client: kube::Client,
    pub exec: FakeExec,
    pub ctx: Arc<Context>,
}

pub fn memapi() -> MemApi {
    let api = MemApi::new();
    api.register_custom::<BindCluster>();
    api.register_custom::<BindTSIGKey>();
    api.register_custom::<BindZone>();
    api.register_custom::<DNSRecord>();
    api
}

impl Harness {
    pub async fn new() -> Self {
        let api = memapi();
        let client = api.client();
        let exec = FakeExec::default();
        let (stores, streams) = stores::watch_all(&client);
        tokio::spawn(streams.drive());
        let ctx = Arc::new(Context::new(
            client.clone(),
            Arc::new(exec.clone()),
            Arc::new(FixedNetwork),
            stores,
        ));
        within("stores ready", ctx.stores.wait_until_ready()).await;
        Harness {
            api,
            client,
            exec,
            ctx,
        }
    }

    /// Helpers over an API whose controllers run elsewhere (`run`): the
    /// context's stores are not driven, so only the object helpers apply.
    pub fn detached(api: MemApi, exec: FakeExec) -> Self {
        let client = api.client();
        let (stores, _streams) = stores::watch_all(&client);
        let ctx = Arc::new(Context::new(
            client.clone(),
            Arc::new(exec.clone()),
            Arc::new(FixedNetwork),
            stores,
        ));
        Harness {
            api,
            client,
            exec,
            ctx,
        }
    }

    pub fn stores(&self) -> &Stores {
        &self.ctx.stores
    }

    pub async fn create<K>(&self, obj: &K) -> K
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::Serialize
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), NS);
        api.create(&PostParams::default(), obj).await.unwrap()
    }

    /// A key with a user Secret holding `material` (base64).
    pub async fn user_key(&self, name: &str, secret: &str, material: &str) -> BindTSIGKey {
        let s = Secret {
            metadata: ObjectMeta {
                name: Some(secret.into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            string_data: None,
            data: Some(BTreeMap::from([(
                "secret".to_string(),
                k8s_openapi::ByteString(material.as_bytes().to_vec()),
            )])),
            ..Default::default()
        };
        self.create(&s).await;
        self.key_with_ref(name, secret, "secret").await
    }

    /// A key whose material is under `data_key` of Secret `secret` (which
    /// this does not create).
    pub async fn key_with_ref(&self, name: &str, secret: &str, data_key: &str) -> BindTSIGKey {
        let mut k = BindTSIGKey::new(
            name,
            BindTSIGKeySpec {
                secret_ref: Some(bind_operator::api::SecretKeyRef {
                    name: secret.into(),
                    key: data_key.into(),
                }),
                ..Default::default()
            },
        );
        k.metadata.namespace = Some(NS.into());
        self.create(&k).await
    }

    /// Replaces the data of a user Secret.
    pub async fn set_secret(&self, secret: &str, material: &str) {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), NS);
        let patch = serde_json::json!({"data": {"secret": base64(material.as_bytes())}});
        api.patch(secret, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// A cluster of `replicas` using transfer key `xfer`.
    pub async fn cluster(&self, name: &str, replicas: i32) -> BindCluster {
        let mut c = BindCluster::new(name, cluster_spec(replicas));
        c.metadata.namespace = Some(NS.into());
        self.create(&c).await
    }

    pub async fn patch_cluster_spec(&self, name: &str, spec: serde_json::Value) {
        let api: Api<BindCluster> = Api::namespaced(self.client.clone(), NS);
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "spec": spec })),
        )
        .await
        .unwrap();
    }

    /// A pod of `cluster` as the StatefulSet controller and kubelet would
    /// make it: labels, podIP, Ready condition.
    pub async fn pod(&self, cluster: &str, ordinal: u32, ready: bool) -> Pod {
        let name = format!("{cluster}-{ordinal}");
        let mut labels = cluster_labels(cluster);
        labels.insert(LABEL_POD_NAME.into(), name.clone());
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(NS.into()),
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        };
        self.create(&pod).await;
        self.set_ready(&name, ready, ordinal).await
    }

    pub async fn set_ready(&self, pod: &str, ready: bool, ordinal: u32) -> Pod {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        let status = PodStatus {
            pod_ip: Some(format!("10.244.0.{}", 10 + ordinal)),
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        api.patch_status(
            pod,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "status": status })),
        )
        .await
        .unwrap()
    }

    pub async fn delete_pod(&self, pod: &str) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        api.delete(pod, &Default::default()).await.unwrap();
    }

    /// Plays kubelet: the pod's mount now holds what the ConfigMap and keys
    /// Secret hold for its role.
    pub fn propagate(&self, cluster: &str, pod: &str) {
        let primary = pod.ends_with("-0");
        self.exec
            .set_mounted(pod, &self.wanted_mount(cluster, primary));
    }

    /// named.conf for the role + keys.conf, as stored now.
    pub fn wanted_mount(&self, cluster: &str, primary: bool) -> String {
        let cm: ConfigMap = self
            .api
            .get(Some(NS), &format!("{cluster}-config"))
            .expect("configmap exists");
        let keys: Secret = self
            .api
            .get(Some(NS), &format!("{cluster}-keys"))
            .expect("keys secret exists");
        let file = if primary {
            "named.conf.primary"
        } else {
            "named.conf.secondary"
        };
        let conf = cm.data.unwrap()[file].clone();
        let keys = String::from_utf8(keys.data.unwrap()["keys.conf"].0.clone()).unwrap();
        conf + &keys
    }

    pub fn keys_conf(&self, cluster: &str) -> String {
        let keys: Secret = self
            .api
            .get(Some(NS), &format!("{cluster}-keys"))
            .expect("keys secret exists");
        String::from_utf8(keys.data.unwrap()["keys.conf"].0.clone()).unwrap()
    }

    pub fn get_cluster(&self, name: &str) -> BindCluster {
        self.api.get(Some(NS), name).expect("cluster exists")
    }

    pub fn get_key(&self, name: &str) -> BindTSIGKey {
        self.api.get(Some(NS), name).expect("key exists")
    }

    /// Waits until every store holds exactly what the API holds.
    pub async fn settle(&self) {
        let s = self.stores().clone();
        let api = self.api.clone();
        eventually("stores to catch up", move || {
            let managed = |labels: &BTreeMap<String, String>| {
                labels
                    .get("app.kubernetes.io/managed-by")
                    .map(String::as_str)
                    == Some("bind-operator")
            };
            let all = in_sync::<BindCluster>(&s.clusters, &api, |_| true)
                && in_sync::<BindTSIGKey>(&s.keys, &api, |_| true)
                && in_sync::<Pod>(&s.pods, &api, |p| managed(p.labels()))
                && in_sync::<StatefulSet>(&s.statefulsets, &api, |p| managed(p.labels()))
                && in_sync::<ConfigMap>(&s.configmaps, &api, |p| managed(p.labels()))
                && in_sync::<Service>(&s.services, &api, |p| managed(p.labels()))
                && in_sync::<PodDisruptionBudget>(&s.pdbs, &api, |p| managed(p.labels()))
                && secrets_in_sync(&s, &api);
            all.then_some(())
        })
        .await;
    }

    /// Settles the stores, then reconciles the cluster as stored now.
    pub async fn reconcile_cluster(&self, name: &str) -> Action {
        self.settle().await;
        let c = Arc::new(self.get_cluster(name));
        let action = bindcluster::reconcile(c, self.ctx.clone())
            .await
            .unwrap_or_else(|e| panic!("reconcile failed: {e}"));
        self.settle().await;
        action
    }

    pub async fn reconcile_key(&self, name: &str) -> Action {
        self.settle().await;
        let k = Arc::new(self.get_key(name));
        let action = bind_operator::controller::bindtsigkey::reconcile(k, self.ctx.clone())
            .await
            .unwrap_or_else(|e| panic!("reconcile failed: {e}"));
        self.settle().await;
        action
    }

    /// Creates pods 0..pods (ready), reconciles, propagates every mount and
    /// reconciles again; every existing pod then runs the wanted config.
    pub async fn converge(&self, cluster: &str, pods: u32) -> Action {
        self.reconcile_cluster(cluster).await;
        for i in 0..pods {
            if self
                .api
                .get::<Pod>(Some(NS), &format!("{cluster}-{i}"))
                .is_none()
            {
                self.pod(cluster, i, true).await;
            }
            self.propagate(cluster, &format!("{cluster}-{i}"));
        }
        let action = self.reconcile_cluster(cluster).await;
        let status = self.get_cluster(cluster).status.expect("status written");
        let applied = bind_operator::api::find_condition(&status.conditions, "ConfigApplied")
            .expect("ConfigApplied set");
        assert_eq!(applied.status, "True", "config not applied: {applied:?}");
        action
    }

    /// The Events recorded (one per series), as (reason, note).
    pub fn events(&self) -> Vec<(String, String)> {
        self.api
            .list::<k8s_openapi::api::events::v1::Event>()
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }
}

fn in_sync<K>(store: &Store<K>, api: &MemApi, filter: impl Fn(&K) -> bool) -> bool
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + 'static,
{
    let mut want: Vec<(String, String)> = api
        .list::<K>()
        .iter()
        .filter(|o| filter(o))
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect();
    let mut have: Vec<(String, String)> = store
        .state()
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect();
    want.sort();
    have.sort();
    want == have
}

fn secrets_in_sync(s: &Stores, api: &MemApi) -> bool {
    let mut want: Vec<(String, String)> = api
        .list::<Secret>()
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect();
    let mut have: Vec<(String, String)> = s
        .secrets
        .state()
        .iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect();
    want.sort();
    have.sort();
    want == have
}

pub fn cluster_spec(replicas: i32) -> BindClusterSpec {
    BindClusterSpec {
        replicas,
        catalog: Some(CatalogSpec {
            zone_name: None,
            transfer_key_ref: Some("xfer".into()),
        }),
        ..Default::default()
    }
}

pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Key material that is easy to search for in logs: base64 of 32 bytes.
pub fn material(seed: u8) -> String {
    base64(&[seed; 32])
}

/// Failure guard: a step that should finish quickly.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `check` until it returns `Some`.
pub async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    within(what, async {
        loop {
            if let Some(v) = check() {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}
