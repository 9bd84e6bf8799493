//! Shared setup for the zone/record controller tests: an in-memory API
//! with the CRDs, a BindCluster `dns/c` with a transfer key and an update
//! key (Secrets with real base64 material), Ready pods `c-0` (primary) and
//! `c-1`, and the BindZone/DNSRecord controllers running against a given
//! executor (the recording [`fakebind::FakeBind`], or real named).
#![allow(dead_code)]

pub mod fakebind;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bind_operator::api::{
    BindCluster, BindClusterSpec, BindTSIGKey, BindTSIGKeySpec, BindZone, CatalogSpec, DNSRecord,
    DNSRecordSpec, Phase, RecordType, SecretKeyRef,
};
use bind_operator::bind::commands::Command;
use bind_operator::bind::layout::PodLayout;
use bind_operator::bind::{KeyName, TsigAlgorithm, TsigKey, TsigSecret};
use bind_operator::controller::exec::{ExecError, ExecOutput, PodExecutor, PodRef};
use bind_operator::controller::names::cluster_labels;
use bind_operator::controller::network::ClusterNetwork;
use bind_operator::controller::stores::watch_all;
use bind_operator::controller::zones;
use bind_operator::controller::zonesync::Settings;
use bind_operator::controller::zonesync::server::port::ZoneServers;
use bind_operator::controller::{Context, Shutdown};
use bind_operator::local::memapi::MemApi;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

pub const NS: &str = "dns";
pub const CLUSTER: &str = "c";
pub const CATALOG: &str = "catalog.test.internal";
pub const UPDATE_KEY: &str = "update";
pub const XFER_KEY: &str = "xfer";
pub const PRIMARY: &str = "c-0";
pub const SECONDARY: &str = "c-1";

/// How long a test waits for the controllers to converge.
pub const CONVERGE: Duration = Duration::from_secs(15);

/// Timings for tests: quick pod polling and retries; periodic checks and
/// post-write rechecks far enough out that they only run when a test asks.
pub fn test_settings() -> Settings {
    Settings {
        verify_interval: Duration::from_secs(600),
        survey_max_age: Duration::from_secs(30),
        record_max_wait: Duration::from_millis(500),
        retry_base: Duration::from_millis(100),
        retry_max: Duration::from_millis(400),
        recheck_after_write: Duration::from_secs(600),
        snapshot_trust: Duration::from_secs(10),
        served_wait: Duration::from_secs(2),
    }
}

/// A fresh random TSIG key.
pub fn random_key(name: &str) -> TsigKey {
    let bytes: Vec<u8> = (0..32).map(|_| rand::random::<u8>()).collect();
    TsigKey {
        name: KeyName::parse(name).unwrap(),
        algorithm: TsigAlgorithm::HmacSha256,
        secret: TsigSecret::from_bytes(&bytes).unwrap(),
    }
}

/// The running environment.
pub struct Env {
    pub mem: MemApi,
    pub client: Client,
    pub update: TsigKey,
    pub xfer: TsigKey,
    /// The controllers' metrics (a restart keeps counting into them).
    pub metrics: bind_operator::telemetry::Metrics,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// What the controllers reach the BIND pods through: real named through
/// an executor (production's `ExecServers` over it), or the fake's model
/// behind the same port.
#[derive(Clone)]
pub enum Bind {
    Exec(Arc<dyn PodExecutor>),
    Fake(Arc<fakebind::FakeBind>),
}

impl From<Arc<fakebind::FakeBind>> for Bind {
    fn from(fake: Arc<fakebind::FakeBind>) -> Self {
        Bind::Fake(fake)
    }
}

impl From<Arc<dyn PodExecutor>> for Bind {
    fn from(exec: Arc<dyn PodExecutor>) -> Self {
        Bind::Exec(exec)
    }
}

/// The executor of a [`Bind::Fake`] environment: the zone controllers
/// reach the fake through the port only, so any exec is a test bug.
pub struct NoExec;

impl PodExecutor for NoExec {
    fn layout(&self, _pod: &PodRef) -> PodLayout {
        PodLayout::in_cluster()
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        async move {
            Err(ExecError::transport(
                pod,
                cmd,
                "the fake BIND is reached through ZoneServers only",
            ))
        }
        .boxed()
    }
}

impl Env {
    /// Starts with fresh keys.
    pub async fn start(bind: impl Into<Bind>, settings: Settings) -> Env {
        let exec = bind.into();
        Self::start_with_keys(exec, settings, random_key(UPDATE_KEY), random_key(XFER_KEY)).await
    }

    /// Starts with the given keys (real named must load the same ones).
    pub async fn start_with_keys(
        exec: impl Into<Bind>,
        settings: Settings,
        update: TsigKey,
        xfer: TsigKey,
    ) -> Env {
        // RUST_LOG=bind_operator=debug shows the controllers' view.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let mem = MemApi::new();
        mem.register_custom::<BindCluster>();
        mem.register_custom::<BindZone>();
        mem.register_custom::<DNSRecord>();
        mem.register_custom::<BindTSIGKey>();
        let client = mem.client();
        let mut env = Env {
            mem,
            client: client.clone(),
            update,
            xfer,
            metrics: bind_operator::telemetry::Metrics::new(),
            stop: None,
            task: None,
        };
        env.seed().await;
        env.spawn(exec.into(), settings);
        env
    }

    /// Starts the controllers (caches and memory empty, as a fresh
    /// operator process) on this environment's API.
    fn spawn(&mut self, bind: Bind, settings: Settings) {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown: Shutdown = async move {
            let _ = rx.await;
        }
        .boxed()
        .shared();
        let client = self.client.clone();
        let (stores, streams) = watch_all(&client);
        let (exec, servers): (Arc<dyn PodExecutor>, Option<Arc<dyn ZoneServers>>) = match bind {
            Bind::Exec(exec) => (exec, None),
            Bind::Fake(fake) => (Arc::new(NoExec), Some(fake)),
        };
        let ctx = Arc::new(Context::with_metrics(
            client,
            exec,
            Arc::new(ClusterNetwork),
            stores,
            self.metrics.clone(),
        ));
        let task = tokio::spawn(async move {
            let zones = async move {
                match servers {
                    Some(s) => zones::run_on(ctx, s, settings, shutdown).await,
                    None => zones::run(ctx, settings, shutdown).await,
                }
            };
            tokio::select! {
                () = streams.drive() => {},
                () = zones => {},
            }
        });
        self.stop = Some(tx);
        self.task = Some(task);
    }

    /// An operator restart: the controllers stop and a fresh process's
    /// controllers start on the same API (objects and Secrets kept,
    /// everything remembered in memory lost).
    pub async fn restart_operator(&mut self, exec: impl Into<Bind>, settings: Settings) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        self.spawn(exec.into(), settings);
    }

    async fn seed(&self) {
        let _ = Api::<Namespace>::all(self.client.clone())
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: ObjectMeta {
                        name: Some(NS.into()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await;
        for (obj, key) in [(UPDATE_KEY, &self.update), (XFER_KEY, &self.xfer)] {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(format!("{obj}-key")),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([(
                    "secret".to_string(),
                    ByteString(key.secret.expose_base64().as_bytes().to_vec()),
                )])),
                ..Default::default()
            };
            self.create(secret).await;
            self.create(BindTSIGKey::new(
                obj,
                BindTSIGKeySpec {
                    key_name: Some(key.name.as_str().to_string()),
                    secret_ref: Some(SecretKeyRef {
                        name: format!("{obj}-key"),
                        key: "secret".into(),
                    }),
                    ..Default::default()
                },
            ))
            .await;
        }
        self.create(BindCluster::new(
            CLUSTER,
            BindClusterSpec {
                catalog: Some(CatalogSpec {
                    zone_name: Some(CATALOG.into()),
                    transfer_key_ref: Some(XFER_KEY.into()),
                }),
                ..Default::default()
            },
        ))
        .await;
        for pod in [PRIMARY, SECONDARY] {
            self.create(Pod {
                metadata: ObjectMeta {
                    name: Some(pod.into()),
                    labels: Some(cluster_labels(CLUSTER)),
                    ..Default::default()
                },
                ..Default::default()
            })
            .await;
            self.set_pod(pod, true, 0).await;
        }
    }

    /// Sets a pod's readiness and restart count (what kubelet reports).
    pub async fn set_pod(&self, pod: &str, ready: bool, restarts: i32) {
        let status = json!({"status": {
            "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "containerStatuses": [{"name": "bind", "ready": ready, "restartCount": restarts,
                "image": "bind", "imageID": ""}],
        }});
        Api::<Pod>::namespaced(self.client.clone(), NS)
            .patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }

    /// Creates an object in the test namespace.
    pub async fn create<K>(&self, mut obj: K) -> K
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
    {
        obj.meta_mut().namespace = Some(NS.into());
        Api::<K>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", obj.name_any()))
    }

    /// Deletes an object in the test namespace.
    pub async fn delete<K>(&self, name: &str)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        Api::<K>::namespaced(self.client.clone(), NS)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }

    /// Merge-patches an object's spec.
    pub async fn patch_spec<K>(&self, name: &str, spec: serde_json::Value)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        Api::<K>::namespaced(self.client.clone(), NS)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": spec})),
            )
            .await
            .unwrap();
    }

    /// Reads an object (None when gone).
    pub async fn get<K>(&self, name: &str) -> Option<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        Api::<K>::namespaced(self.client.clone(), NS)
            .get_opt(name)
            .await
            .unwrap()
    }

    /// Waits until `check` holds for the object (or it is gone, `None`).
    pub async fn wait<K, T>(
        &self,
        what: &str,
        name: &str,
        mut check: impl FnMut(Option<&K>) -> Option<T>,
    ) -> T
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let obj = self.get::<K>(name).await;
            if let Some(v) = check(obj.as_ref()) {
                return v;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for {what} ({name}); last seen: {obj:#?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for a BindZone phase.
    pub async fn zone_phase(&self, name: &str, phase: Phase) -> BindZone {
        self.wait::<BindZone, _>(&format!("zone phase {phase}"), name, |z| {
            z.filter(|z| z.status.as_ref().and_then(|s| s.phase) == Some(phase))
                .cloned()
        })
        .await
    }

    /// Waits for a DNSRecord phase.
    pub async fn record_phase(&self, name: &str, phase: Phase) -> DNSRecord {
        self.wait::<DNSRecord, _>(&format!("record phase {phase}"), name, |r| {
            r.filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(phase))
                .cloned()
        })
        .await
    }

    /// Waits until an object is gone.
    pub async fn gone<K>(&self, name: &str)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        self.wait::<K, _>("deletion", name, |o| o.is_none().then_some(()))
            .await
    }

    /// Stops the controllers and waits for them.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// A primary BindZone of cluster `c` signed with the `update` key.
pub fn zone(name: &str, zone_name: &str) -> BindZone {
    BindZone::new(
        name,
        serde_json::from_value(json!({
            "clusterRef": CLUSTER,
            "zoneName": zone_name,
            "updateKeyRef": UPDATE_KEY,
            "nameservers": ["ns1.example.net."],
        }))
        .unwrap(),
    )
}

/// A DNSRecord in `zone`.
pub fn record(
    name: &str,
    zone: &str,
    owner: &str,
    rtype: RecordType,
    values: &[&str],
) -> DNSRecord {
    DNSRecord::new(
        name,
        DNSRecordSpec {
            zone_ref: zone.into(),
            zone_namespace: None,
            name: owner.into(),
            type_: rtype,
            ttl: None,
            values: values.iter().map(|v| v.to_string()).collect(),
        },
    )
}

/// Runs `f` with a deadline.
pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(CONVERGE, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// base64 of bytes (for hand-made Secrets).
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
