//! One scenario's environment: a fresh in-memory API with our kinds, the
//! local runtime (StatefulSet controller and kubelet, real named), the real
//! controllers on their own runtime ([`OperatorSide`]) behind a
//! [`counting`](super::exec_log::counting()) executor, and the objects every scenario starts from: a
//! Secret with two random TSIG keys, BindTSIGKeys for them (transfer and
//! update), a BindCluster with a catalog ([`BenchEnv::seed_cluster`]) and
//! `zones` BindZones ([`BenchEnv::zone_objects`]). [`BenchEnv::bring_up`]
//! returns once every pod is Ready and serves every zone.
//!
//! Touches only its own in-memory API and the named processes its runtime
//! starts; [`BenchEnv::shutdown`] stops them all. Key material lives in the
//! API's Secret and in memory, never in output.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::BenchError;
use super::check::PodTarget;
use super::exec_log::{ExecLog, counting};
use super::operator::{OperatorSide, WriteLog};
use crate::api::{
    BindCluster, BindClusterSpec, BindTSIGKey, BindTSIGKeySpec, BindZone, CatalogSpec, Phase,
    SecretKeyRef,
};
use crate::bind::render::render_keys_conf;
use crate::bind::{KeyName, TsigAlgorithm, TsigKey, TsigSecret, ZoneName};
use crate::controller::exec::{ObservedExecutor, PodExecutor, PodRef};
use crate::local::memapi::MemApi;
use crate::local::runtime::{LocalExecutor, LocalRuntime, PodRole, RuntimeConfig};
use crate::local::session::register_kinds;

/// Namespace of every bench object.
pub const NAMESPACE: &str = "bench";
/// The BindCluster.
pub const CLUSTER: &str = "bench";
/// BindTSIGKey signing transfers, NOTIFY and catalog updates.
pub const TRANSFER_KEY: &str = "bench-transfer";
/// BindTSIGKey the zones accept updates from (the operator's and the
/// baseline's).
pub const UPDATE_KEY: &str = "bench-update";
/// The Secret holding both keys' material.
const KEY_SECRET: &str = "bench-tsig";
/// Out-of-zone apex NS of every bench zone (no glue needed).
const NAMESERVER: &str = "ns1.bench.invalid.";
/// Parent of the bench zones (`z<i>.bench.test`).
const ZONE_SUFFIX: &str = "bench.test";
/// How often readiness is polled.
const READY_POLL: Duration = Duration::from_millis(200);
/// How long a stopping named gets before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The running environment of one scenario.
pub struct BenchEnv {
    pub mem: MemApi,
    /// The bench's own client (its creates are not the operator's writes).
    pub client: Client,
    /// Every write the controllers sent.
    pub writes: WriteLog,
    runtime: Option<LocalRuntime>,
    /// The executor the controllers (and the baseline) use; logs every call.
    pub exec: Arc<ObservedExecutor>,
    /// The same pods without logging, for the bench's own checks.
    pub raw: LocalExecutor,
    pub log: ExecLog,
    pub transfer_key: TsigKey,
    pub update_key: TsigKey,
    pub zones: Vec<ZoneName>,
    /// The running controllers' stop signal and task (replaced by
    /// [`BenchEnv::restart_controllers`]).
    controllers: std::sync::Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
    operator: Option<OperatorSide>,
}

fn random_key(name: &str) -> TsigKey {
    let bytes: [u8; 32] = rand::random();
    TsigKey {
        name: KeyName::parse(name).expect("a fixed key name"),
        algorithm: TsigAlgorithm::HmacSha256,
        secret: TsigSecret::from_bytes(&bytes).expect("32 bytes is a valid key"),
    }
}

/// The zone names of a bench with `n` zones.
pub fn zone_names(n: usize) -> Vec<ZoneName> {
    (0..n)
        .map(|i| ZoneName::parse(&format!("z{i}.{ZONE_SUFFIX}")).expect("a fixed zone name"))
        .collect()
}

/// The BindZone object name of zone `i`.
pub fn zone_object(i: usize) -> String {
    format!("z{i}")
}

fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> BenchError {
    let action = action.into();
    move |source| BenchError::Api { action, source }
}

impl BenchEnv {
    /// Starts the API, runtime and controllers; creates nothing.
    pub async fn start(state_dir: &Path, base_port: u16, zones: usize) -> Result<Self, BenchError> {
        let mem = MemApi::new();
        register_kinds(&mem);
        let client = mem.client();
        let mut config = RuntimeConfig::new(state_dir, base_port);
        config.stop_grace = STOP_GRACE;
        let runtime = LocalRuntime::start(client.clone(), config).await?;
        let log = ExecLog::default();
        let raw = runtime.executor();
        let exec = Arc::new(counting(Arc::new(raw.clone()), log.clone()));
        let operator = OperatorSide::start(mem.service())?;
        let controllers = spawn_controllers(&operator, &exec, &runtime);
        Ok(BenchEnv {
            mem,
            client,
            writes: operator.writes.clone(),
            runtime: Some(runtime),
            exec,
            raw,
            log,
            transfer_key: random_key(TRANSFER_KEY),
            update_key: random_key(UPDATE_KEY),
            zones: zone_names(zones),
            controllers: std::sync::Mutex::new(Some(controllers)),
            operator: Some(operator),
        })
    }

    /// Creates a namespaced object in the bench namespace.
    pub async fn create<K>(&self, mut obj: K) -> Result<(), BenchError>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
    {
        obj.meta_mut().namespace = Some(NAMESPACE.into());
        let what = format!("create {} {}", K::kind(&()), obj.name_any());
        Api::<K>::namespaced(self.client.clone(), NAMESPACE)
            .create(&PostParams::default(), &obj)
            .await
            .map(|_| ())
            .map_err(api_error(what))
    }

    /// Creates the key Secret, both BindTSIGKeys and the BindCluster.
    pub async fn seed_cluster(&self, replicas: i32) -> Result<(), BenchError> {
        let data = [&self.transfer_key, &self.update_key]
            .into_iter()
            .map(|k| {
                (
                    k.name.as_str().to_string(),
                    ByteString(k.secret.expose_base64().as_bytes().to_vec()),
                )
            })
            .collect::<BTreeMap<_, _>>();
        self.create(Secret {
            metadata: ObjectMeta {
                name: Some(KEY_SECRET.into()),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        })
        .await?;
        for key in [TRANSFER_KEY, UPDATE_KEY] {
            self.create(BindTSIGKey::new(
                key,
                BindTSIGKeySpec {
                    cluster_ref: Some(CLUSTER.into()),
                    secret_ref: Some(SecretKeyRef {
                        name: KEY_SECRET.into(),
                        key: key.into(),
                    }),
                    ..Default::default()
                },
            ))
            .await?;
        }
        self.create(BindCluster::new(
            CLUSTER,
            BindClusterSpec {
                replicas,
                catalog: Some(CatalogSpec {
                    zone_name: None,
                    transfer_key_ref: Some(TRANSFER_KEY.into()),
                }),
                ..Default::default()
            },
        ))
        .await
    }

    /// The BindZone of every bench zone.
    pub fn zone_objects(&self) -> Vec<BindZone> {
        self.zones
            .iter()
            .enumerate()
            .map(|(i, zone)| {
                let spec = serde_json::from_value(json!({
                    "clusterRef": CLUSTER,
                    "zoneName": zone.as_str(),
                    "updateKeyRef": UPDATE_KEY,
                    "nameservers": [NAMESERVER],
                }))
                .expect("a valid BindZone spec");
                BindZone::new(&zone_object(i), spec)
            })
            .collect()
    }

    /// Creates every BindZone, one after another.
    pub async fn create_zones(&self) -> Result<(), BenchError> {
        for z in self.zone_objects() {
            self.create(z).await?;
        }
        Ok(())
    }

    fn runtime(&self) -> &LocalRuntime {
        self.runtime
            .as_ref()
            .expect("the runtime runs until shutdown")
    }

    /// The cluster's pods as check targets, primary first (those the
    /// runtime has created so far).
    pub fn targets(&self) -> Vec<PodTarget> {
        let mut pods: Vec<_> = self
            .runtime()
            .pods()
            .into_iter()
            .filter(|p| p.namespace == NAMESPACE && p.cluster == CLUSTER)
            .collect();
        pods.sort_by_key(|p| p.ordinal);
        pods.into_iter()
            .map(|p| {
                let pod = PodRef::new(&p.namespace, &p.name);
                PodTarget {
                    layout: self.raw.layout(&pod),
                    pod,
                    role: p.role,
                    dns: p.dns,
                }
            })
            .collect()
    }

    /// How many of the cluster's pods are not Ready yet, or None.
    fn pods_not_ready(&self, replicas: i32) -> Option<String> {
        let ready = self
            .runtime()
            .pods()
            .into_iter()
            .filter(|p| p.cluster == CLUSTER && p.ready)
            .count();
        (ready != usize::try_from(replicas).unwrap_or_default())
            .then(|| format!("{ready} of {replicas} pods Ready"))
    }

    /// What keeps the zones from being served everywhere, or None.
    async fn not_ready(&self) -> Option<String> {
        let zones: Vec<BindZone> = self.mem.list();
        let ready_zones = zones
            .iter()
            .filter(|z| z.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready))
            .count();
        if ready_zones != self.zones.len() {
            let why = zones
                .iter()
                .filter_map(|z| z.status.as_ref())
                .find(|s| s.phase != Some(Phase::Ready))
                .and_then(|s| s.conditions.first())
                .map(|c| format!(": {} {}", c.reason, c.message))
                .unwrap_or_default();
            return Some(format!(
                "{ready_zones} of {} zones Ready{why}",
                self.zones.len()
            ));
        }
        for t in self.targets() {
            let served = match self
                .raw
                .dns_serials(&t.pod, &self.zones, Some(&self.transfer_key))
                .await
            {
                Ok(served) => served,
                Err(e) => return Some(format!("pod {} does not answer: {e}", t.pod)),
            };
            let missing = self
                .zones
                .iter()
                .filter(|z| !served.contains_key(z))
                .count();
            if missing > 0 {
                return Some(format!("pod {} lacks {missing} zones", t.pod.name));
            }
        }
        None
    }

    /// Waits until every pod is Ready and every zone Ready and served by
    /// every pod; returns the pods, primary first. `progress` hears each
    /// new reason to wait.
    pub async fn bring_up(
        &self,
        replicas: i32,
        timeout: Duration,
        progress: &impl Fn(String),
    ) -> Result<Vec<PodTarget>, BenchError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut last = String::new();
        loop {
            let why = match self.pods_not_ready(replicas) {
                None => self.not_ready().await,
                why => why,
            };
            let Some(why) = why else {
                return Ok(self.targets());
            };
            if why != last {
                progress(format!("{:.1}s: {why}", start.elapsed().as_secs_f64()));
                last.clone_from(&why);
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Timeout {
                    what: format!("bring the cluster up ({why})"),
                    secs: timeout.as_secs(),
                });
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// Peak RSS (KiB) of each pod's named, by pod name.
    pub fn named_peaks(&self, pods: &[PodTarget]) -> BTreeMap<String, Option<u64>> {
        pods.iter()
            .map(|t| {
                let conf = t.layout.data_dir.join(crate::bind::layout::data::RUN_CONF);
                (t.pod.name.clone(), super::rss::named_peak_kib(&conf))
            })
            .collect()
    }

    /// Writes the transfer key as a BIND key file readable only by us (for
    /// `dig -k`); the caller removes it.
    pub fn write_transfer_key(&self, path: &Path) -> Result<(), BenchError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let failed = |source| BenchError::StateDir {
            path: path.to_owned(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(failed)?;
        f.write_all(render_keys_conf(std::slice::from_ref(&self.transfer_key)).as_bytes())
            .map_err(failed)
    }

    /// Whether `t` is the primary.
    pub fn is_primary(t: &PodTarget) -> bool {
        t.role == PodRole::Primary
    }

    /// Stops the controllers and starts them again against the same API
    /// and pods (an operator restart): nothing they remembered survives.
    pub async fn restart_controllers(&self) {
        let running = self
            .controllers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((stop, task)) = running {
            let _ = stop.send(());
            let _ = task.await;
        }
        let (Some(operator), Some(runtime)) = (&self.operator, &self.runtime) else {
            return;
        };
        let started = spawn_controllers(operator, &self.exec, runtime);
        *self.controllers.lock().unwrap_or_else(|p| p.into_inner()) = Some(started);
    }

    /// Stops the controllers and waits for their tasks, then every named,
    /// then frees the API's objects: all of it before the next scenario.
    pub async fn shutdown(mut self) {
        let running = self
            .controllers
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((stop, task)) = running {
            let _ = stop.send(());
            let _ = task.await;
        }
        if let Some(operator) = self.operator.take() {
            operator.stop().await;
        }
        if let Some(r) = self.runtime.take() {
            r.shutdown().await;
        }
        self.mem.release();
    }
}

/// Starts the controllers on the operator's side of the process.
fn spawn_controllers(
    operator: &OperatorSide,
    exec: &Arc<ObservedExecutor>,
    runtime: &LocalRuntime,
) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = operator.spawn(crate::controller::run(
        operator.client.clone(),
        exec.clone(),
        Arc::new(runtime.network()),
        async move {
            let _ = stopped.await;
        },
    ));
    (stop, task)
}
