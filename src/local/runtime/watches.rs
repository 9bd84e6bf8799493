//! The runtime's watches: reflector caches of Pods, StatefulSets,
//! ConfigMaps and Secrets ([`Stores`]), one readiness future for all of
//! them, and one change counter every event on any of them bumps. The
//! kubelet loop (`kubelet.rs`), the pod workers and the StatefulSet
//! controller (`controller.rs`) all run off these.
//!
//! Reads the cluster through watches only; writes nothing.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::future::{BoxFuture, Shared as SharedFuture};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher;
use kube::runtime::{WatchStreamExt, watcher::Config};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Shared;
use super::volume::Sources;

/// `(namespace, pod name)`.
pub(crate) type PodKey = (String, String);

/// The reflector caches the runtime reads.
#[derive(Clone)]
pub(crate) struct Stores {
    pub(crate) pods: Store<Pod>,
    pub(crate) statefulsets: Store<StatefulSet>,
    pub(crate) config_maps: Store<ConfigMap>,
    pub(crate) secrets: Store<Secret>,
}

impl Stores {
    pub(crate) fn pod(&self, key: &PodKey) -> Option<Arc<Pod>> {
        self.pods.get(&ObjectRef::new(&key.1).within(&key.0))
    }

    pub(crate) fn statefulset(&self, namespace: &str, name: &str) -> Option<Arc<StatefulSet>> {
        self.statefulsets
            .get(&ObjectRef::new(name).within(namespace))
    }
}

impl Sources for Stores {
    fn config_map(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
        self.config_maps
            .get(&ObjectRef::new(name).within(namespace))
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<Arc<Secret>> {
        self.secrets.get(&ObjectRef::new(name).within(namespace))
    }
}

fn reflect<K>(
    shared: &Arc<Shared>,
    api: Api<K>,
    config: Config,
    writer: Writer<K>,
    changes: watch::Sender<u64>,
) -> JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let cancel = shared.cancel.clone();
    tokio::spawn(async move {
        let stream = watcher(api, config).default_backoff().reflect(writer);
        futures::pin_mut!(stream);
        loop {
            let ev = tokio::select! {
                _ = cancel.cancelled() => return,
                ev = stream.next() => ev,
            };
            match ev {
                Some(Ok(_)) => changes.send_modify(|v| *v = v.wrapping_add(1)),
                Some(Err(e)) => tracing::warn!(kind, error = %e, "watch failed; retrying"),
                None => return,
            }
        }
    })
}

/// The caches, once started: what the kubelet loop and the StatefulSet
/// controller run off.
pub(crate) struct Watches {
    pub(crate) tasks: Vec<JoinHandle<()>>,
    pub(crate) stores: Stores,
    pub(crate) ready: Ready,
    /// Bumped on every event of any watch.
    pub(crate) changes: watch::Receiver<u64>,
}

/// Starts the watches (the caller starts what runs off them: the kubelet
/// loop, `kubelet::start_kubelet`, and the StatefulSet controller).
pub(crate) fn start_watches(shared: &Arc<Shared>) -> Watches {
    let client = shared.client.clone();
    let (changes, rx) = watch::channel(0u64);
    let (pods, pw) = reflector::store();
    let (statefulsets, sw) = reflector::store();
    let (config_maps, cw) = reflector::store();
    let (secrets, xw) = reflector::store();
    let mut pod_config = Config::default();
    if let Some(sel) = &shared.config.pod_selector {
        pod_config = pod_config.labels(sel);
    }
    let tasks = vec![
        reflect(
            shared,
            Api::<Pod>::all(client.clone()),
            pod_config,
            pw,
            changes.clone(),
        ),
        reflect(
            shared,
            Api::<StatefulSet>::all(client.clone()),
            Config::default(),
            sw,
            changes.clone(),
        ),
        reflect(
            shared,
            Api::<ConfigMap>::all(client.clone()),
            Config::default(),
            cw,
            changes.clone(),
        ),
        reflect(
            shared,
            Api::<Secret>::all(client),
            Config::default(),
            xw,
            changes,
        ),
    ];
    let stores = Stores {
        pods,
        statefulsets,
        config_maps,
        secrets,
    };
    let ready = ready(&stores);
    Watches {
        tasks,
        stores,
        ready,
        changes: rx,
    }
}

/// Resolves (true) once every cache holds its initial list; false if a
/// watch ended first.
pub(crate) type Ready = SharedFuture<BoxFuture<'static, bool>>;

/// One readiness future for everyone: a store's `wait_until_ready` wakes
/// only the last of several concurrent waiters (its oneshot keeps a single
/// waker), so tasks must not wait on the stores directly.
fn ready(stores: &Stores) -> Ready {
    let stores = stores.clone();
    async move {
        stores.pods.wait_until_ready().await.is_ok()
            && stores.statefulsets.wait_until_ready().await.is_ok()
            && stores.config_maps.wait_until_ready().await.is_ok()
            && stores.secrets.wait_until_ready().await.is_ok()
    }
    .boxed()
    .shared()
}
