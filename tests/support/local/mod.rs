//! Shared helpers for the local runtime tests: a runtime on a fresh
//! in-memory API with its own ports and state dir, realistic cluster
//! objects built with the BIND renderer (no controller involved), `dig`,
//! polling, and a check that no named started by a test is left running.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use bind_operator::bind::entrypoint::render_rndc_key;
use bind_operator::bind::render::{ClusterConfig, DnssecValidation, render_cluster};
use bind_operator::bind::types::TsigSecret;
use bind_operator::bind::{Endpoint, KeyName, TsigAlgorithm, TsigKey, ZoneName};
use bind_operator::local::memapi::MemApi;
use bind_operator::local::runtime::{LocalRuntime, RuntimeConfig};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

pub const NS: &str = "dns-test";
pub const STS: &str = "dns";
pub const TRANSFER_KEY: &str = "xfer";
pub const CATALOG: &str = "catalog.dns.invalid";

pub use crate::support_bind::RUNTIME_PORTS as PORTS;

/// A runtime on a fresh in-memory API.
pub struct Harness {
    pub api: MemApi,
    pub client: kube::Client,
    pub runtime: LocalRuntime,
    pub state: tempfile::TempDir,
    /// The runtime's ports, this test's until the harness drops.
    pub ports: crate::support_bind::PortBlock,
}

impl Harness {
    pub async fn start(tweak: impl FnOnce(&mut RuntimeConfig)) -> Harness {
        // RUST_LOG=bind_operator=debug shows the runtime's decisions.
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .try_init();
        let api = MemApi::new();
        let client = api.client();
        let state = tempfile::tempdir().unwrap();
        let ports = crate::support_bind::port_block(PORTS);
        let mut config = RuntimeConfig::new(state.path().join("state"), ports.base);
        config.stop_grace = Duration::from_secs(3);
        tweak(&mut config);
        let runtime = LocalRuntime::start(client.clone(), config).await.unwrap();
        Harness {
            api,
            client,
            runtime,
            state,
            ports,
        }
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn statefulsets(&self) -> Api<StatefulSet> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn dns_port(&self, pod: &str) -> u16 {
        self.runtime.ports(NS, pod).unwrap().dns
    }

    /// Creates the ConfigMap, Secrets and StatefulSet of a cluster.
    pub async fn create_cluster(&self, replicas: i32) -> ClusterObjects {
        let primary = self.runtime.network().statefulset_primary(NS, STS).unwrap();
        let objects = ClusterObjects::new(primary, replicas);
        let pp = PostParams::default();
        self.config_maps()
            .create(&pp, &objects.config)
            .await
            .unwrap();
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NS);
        secrets.create(&pp, &objects.keys).await.unwrap();
        secrets.create(&pp, &objects.rndc).await.unwrap();
        self.statefulsets()
            .create(&pp, &objects.statefulset)
            .await
            .unwrap();
        objects
    }

    /// Waits until `pod` is Ready (by the Pod's status) and returns it; on
    /// timeout shows the Pod and every named log.
    pub async fn ready_pod(&self, pod: &str) -> Pod {
        let api = self.pods();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let p = api.get_opt(pod).await.unwrap();
            if let Some(p) = p.as_ref().filter(|p| pod_ready(p)) {
                return p.clone();
            }
            if tokio::time::Instant::now() > deadline {
                self.dump_logs();
                panic!(
                    "timed out waiting for pod {pod} Ready: {}",
                    serde_json::to_string_pretty(&p.map(|p| p.status)).unwrap()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Prints every pod's named log (for failing tests).
    pub fn dump_logs(&self) {
        for p in self.runtime.pods() {
            let log = std::fs::read_to_string(&p.log).unwrap_or_default();
            eprintln!("==== {}/{} {:?}\n{log}", p.namespace, p.name, p);
        }
    }

    /// Stops the runtime and checks that none of its named is left.
    pub async fn finish(self) {
        let state = self.state.path().to_path_buf();
        self.runtime.shutdown().await;
        assert_eq!(named_under(&state), Vec::<u32>::new(), "named left running");
    }
}

pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn restart_count(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count)
}

/// How long any wait in these tests may take.
pub const WAIT: Duration = Duration::from_secs(30);

/// Polls `f` until it yields, for up to [`WAIT`].
pub async fn wait_for<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `dig +short` against 127.0.0.1:port; empty on no answer.
pub async fn dig(port: u16, args: &[&str]) -> String {
    let out = tokio::process::Command::new("dig")
        .args([
            "-p",
            &port.to_string(),
            "@127.0.0.1",
            "+time=1",
            "+tries=1",
            "+short",
        ])
        .args(args)
        .output()
        .await
        .expect("dig runs");
    if out.status.success() {
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    } else {
        String::new()
    }
}

/// named's version string as dig reports it (empty if nothing answers).
pub async fn version_bind(port: u16) -> String {
    dig(port, &["version.bind", "CH", "TXT"]).await
}

/// pids of named processes whose command line mentions `dir`.
pub fn named_under(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let is_named = cmd
            .split(' ')
            .next()
            .is_some_and(|a| a.rsplit('/').next() == Some("named"));
        if is_named && cmd.contains(&needle) {
            out.push(pid);
        }
    }
    out
}

/// The objects a BindCluster reconciler would make, built by hand.
pub struct ClusterObjects {
    pub config: ConfigMap,
    pub keys: Secret,
    pub rndc: Secret,
    pub statefulset: StatefulSet,
    pub transfer_key: TsigKey,
}

fn secret_key(seed: u8) -> TsigSecret {
    TsigSecret::from_bytes(&[seed; 32]).unwrap()
}

impl ClusterObjects {
    pub fn new(primary: Endpoint, replicas: i32) -> Self {
        let transfer_key = TsigKey {
            name: KeyName::parse(TRANSFER_KEY).unwrap(),
            algorithm: TsigAlgorithm::HmacSha256,
            secret: secret_key(7),
        };
        let cfg = ClusterConfig {
            recursion: false,
            allow_query: Vec::new(),
            allow_recursion: Vec::new(),
            forwarders: Vec::new(),
            forward_only: false,
            dnssec_validation: DnssecValidation::No,
            trust_anchors: vec![],
            validate_except: Vec::new(),
            forward_zones: Vec::new(),
            views: Vec::new(),
            catalog_zone: ZoneName::parse(CATALOG).unwrap(),
            transfer_key: transfer_key.name.clone(),
            primary_endpoint: primary,
            keys: vec![transfer_key.clone()],
            external_secondaries: Vec::new(),
            catalog_consumers: Vec::new(),
        };
        let files = render_cluster(&cfg).unwrap();
        let config: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "dns-config", "namespace": NS},
            "data": {
                "named.conf.primary": files.named_conf_primary,
                "named.conf.secondary": files.named_conf_secondary,
                "entrypoint.sh": files.entrypoint,
            }
        }))
        .unwrap();
        let secret = |name: &str, key: &str, value: &str| Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                key.to_string(),
                ByteString(value.as_bytes().to_vec()),
            )])),
            ..Default::default()
        };
        let keys = secret("dns-keys", "keys.conf", &files.keys_conf);
        let rndc_key = render_rndc_key(TsigAlgorithm::HmacSha256, &secret_key(9));
        let rndc = secret("dns-rndc", "rndc.key", &rndc_key);
        let statefulset: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": STS, "namespace": NS},
            "spec": {
                "replicas": replicas,
                "serviceName": "dns-headless",
                "selector": {"matchLabels": {"app": "dns"}},
                "template": {
                    "metadata": {
                        "labels": {"app": "dns", "bind.unkin.net/cluster": "dns"},
                        "annotations": {"bind.unkin.net/entrypoint-hash": "v1"}
                    },
                    "spec": {
                        "containers": [{
                            "name": "bind",
                            "image": "internetsystemsconsortium/bind9:9.20",
                            "command": ["sh", "/etc/bind/operator/entrypoint.sh"],
                            "volumeMounts": [
                                {"name": "config", "mountPath": "/etc/bind/operator"},
                                {"name": "data", "mountPath": "/var/lib/bind"}
                            ]
                        }],
                        "volumes": [
                            {"name": "config", "projected": {"sources": [
                                {"configMap": {"name": "dns-config"}},
                                {"secret": {"name": "dns-keys", "items": [{"key": "keys.conf", "path": "keys.conf"}]}},
                                {"secret": {"name": "dns-rndc", "items": [{"key": "rndc.key", "path": "rndc.key"}]}}
                            ]}},
                            {"name": "data", "emptyDir": {}}
                        ]
                    }
                }
            }
        }))
        .unwrap();
        ClusterObjects {
            config,
            keys,
            rndc,
            statefulset,
            transfer_key,
        }
    }
}

/// The operator's controllers (`controller::run`, the production wiring)
/// on a fresh runtime with every CRD registered: the harness, the sender
/// that stops them and their task. [`stop_controllers`] ends them.
pub async fn start_controllers(
    tweak: impl FnOnce(&mut RuntimeConfig),
) -> (
    Harness,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    use bind_operator::api::{BindCluster, BindTSIGKey, BindZone, DNSRecord};
    let h = Harness::start(tweak).await;
    h.api.register_custom::<BindCluster>();
    h.api.register_custom::<BindTSIGKey>();
    h.api.register_custom::<BindZone>();
    h.api.register_custom::<DNSRecord>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(bind_operator::controller::run(
        h.client.clone(),
        std::sync::Arc::new(h.runtime.executor()),
        std::sync::Arc::new(h.runtime.network()),
        async move {
            let _ = stopped.await;
        },
    ));
    (h, stop, manager)
}

/// Stops what [`start_controllers`] started, then the runtime.
pub async fn stop_controllers(
    h: Harness,
    stop: tokio::sync::oneshot::Sender<()>,
    manager: tokio::task::JoinHandle<()>,
) {
    let _ = stop.send(());
    manager.await.unwrap();
    h.finish().await;
}
