//! The runtime's kubelet loop: makes sure every Pod in the cache
//! (`watches.rs`) has exactly one pod worker (`worker.rs`), which owns
//! everything about that pod name from then on, including noticing that
//! its Pod object went away.
//!
//! Reads the cluster through the watches' caches only; writes nothing itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Shared;
use super::watches::{PodKey, Ready, Stores};
use super::worker::{self, WorkerHandle};

/// One worker per pod name.
pub(crate) type Workers = BTreeMap<PodKey, WorkerHandle>;

/// Starts the kubelet loop off the watches' caches.
pub(crate) fn start_kubelet(
    shared: &Arc<Shared>,
    stores: Stores,
    ready: Ready,
    changes: watch::Receiver<u64>,
) -> JoinHandle<()> {
    tokio::spawn(run(shared.clone(), stores, ready, changes))
}

async fn run(shared: Arc<Shared>, stores: Stores, ready: Ready, mut changes: watch::Receiver<u64>) {
    tokio::select! {
        _ = shared.cancel.cancelled() => return,
        ok = ready => if !ok { return },
    }
    loop {
        changes.borrow_and_update();
        ensure_workers(&shared, &stores, &changes);
        tokio::select! {
            _ = shared.cancel.cancelled() => return,
            r = changes.changed() => if r.is_err() { return },
        }
    }
}

/// One live worker per cached pod. A worker removes itself (under the
/// same lock) only once its pod is gone, so a pod re-created while its old
/// worker is still stopping named is picked up by that worker.
fn ensure_workers(shared: &Arc<Shared>, stores: &Stores, changes: &watch::Receiver<u64>) {
    if shared.cancel.is_cancelled() {
        return;
    }
    let mut workers = shared.workers();
    for pod in stores.pods.state() {
        let (Some(ns), Some(name)) = (
            pod.metadata.namespace.as_deref(),
            pod.metadata.name.as_deref(),
        ) else {
            continue;
        };
        let key = (ns.to_string(), name.to_string());
        if workers.get(&key).is_some_and(|w| !w.join.is_finished()) {
            continue;
        }
        let handle = worker::spawn(shared.clone(), stores.clone(), key.clone(), changes.clone());
        workers.insert(key, handle);
    }
}
