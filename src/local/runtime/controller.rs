//! The StatefulSet controller the in-memory API lacks: on every cache
//! change, applies `statefulset.rs`'s plan for each StatefulSet (create
//! missing Pods, delete surplus and stale ones) and writes its status.
//!
//! Level-driven and idempotent: a plan made from a cache that lags behind
//! a write just repeats it, and the resulting AlreadyExists / NotFound
//! answers are expected. Writes Pods (create, delete) and
//! `statefulsets/status` only; runs only when the runtime is configured to
//! (a real API server has its own controller).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use super::Shared;
use super::statefulset::{self, Action, DeleteReason};
use super::watches::{Ready, Stores};

/// Delay before retrying after a failed write.
const RETRY_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(1);

pub(crate) async fn run(
    shared: Arc<Shared>,
    stores: Stores,
    ready: Ready,
    mut changes: watch::Receiver<u64>,
) {
    tokio::select! {
        _ = shared.cancel.cancelled() => return,
        ok = ready => if !ok { return },
    }
    loop {
        changes.borrow_and_update();
        let mut failed = false;
        for sts in stores.statefulsets.state() {
            failed |= !reconcile(&shared.client, &stores, &sts).await;
        }
        // A failed write is retried even if nothing else changes.
        let retry = async {
            if failed {
                tokio::time::sleep(RETRY_AFTER_FAILURE).await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            _ = shared.cancel.cancelled() => return,
            r = changes.changed() => if r.is_err() { return },
            () = retry => {}
        }
    }
}

/// Converges one StatefulSet; false if a write failed.
async fn reconcile(client: &kube::Client, stores: &Stores, sts: &StatefulSet) -> bool {
    let mut ok = true;
    let ns = sts.namespace().unwrap_or_default();
    let name = sts.name_any();
    let pods: Vec<Arc<Pod>> = stores
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
        .collect();
    let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    for action in statefulset::plan(sts, &refs) {
        match action {
            Action::Create(pod) => {
                let pod_name = pod.name_any();
                match api.create(&PostParams::default(), &pod).await {
                    Ok(_) => {
                        tracing::info!(statefulset = %name, namespace = %ns, pod = %pod_name, "created pod")
                    }
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => {
                        ok = false;
                        tracing::warn!(statefulset = %name, pod = %pod_name, error = %e, "failed to create pod")
                    }
                }
            }
            Action::Delete { pod, reason } => {
                let why = match reason {
                    DeleteReason::ScaleDown => "scale down",
                    DeleteReason::Stale => "template changed",
                };
                match api.delete(&pod, &DeleteParams::default()).await {
                    Ok(_) => {
                        tracing::info!(statefulset = %name, namespace = %ns, pod = %pod, reason = why, "deleted pod")
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => {
                        ok = false;
                        tracing::warn!(statefulset = %name, pod = %pod, error = %e, "failed to delete pod")
                    }
                }
            }
        }
    }
    let status = statefulset::status(sts, &refs);
    if sts.status.as_ref() == Some(&status) {
        return ok;
    }
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    let patch = json!({ "status": status });
    if let Err(e) = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::debug!(statefulset = %name, error = %e, "failed to write statefulset status");
        return false;
    }
    ok
}
