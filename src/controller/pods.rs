//! What the controllers know about a cluster's pods as Kubernetes objects:
//! which pods belong to a BindCluster (its label, in its namespace) and
//! whether a pod is Ready. One copy for every controller (the BindCluster
//! reconcile and the zone pipeline both ask).
//!
//! Reads the pod cache only; touches nothing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::runtime::reflector::Store;

use super::names::LABEL_CLUSTER;
use crate::api::BindCluster;

/// The cluster's pods (labelled with its name, in its namespace), by name,
/// from the cache.
pub fn cluster_pods(pods: &Store<Pod>, cluster: &BindCluster) -> Vec<Arc<Pod>> {
    let name = cluster.name_any();
    let mut out: Vec<_> = pods
        .state()
        .into_iter()
        .filter(|p| {
            p.namespace() == cluster.namespace() && p.labels().get(LABEL_CLUSTER) == Some(&name)
        })
        .collect();
    out.sort_by_key(|p| p.name_any());
    out
}

/// Whether a pod is Ready and not on its way out.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether a pod's containers are ready (its `ContainersReady` condition;
/// a pod that reports only `Ready` counts by that) and it is not on its
/// way out: named answers, so commands may run in it and zones be written
/// to it. Unlike [`pod_ready`] this ignores readiness gates, which wait for
/// exactly that work.
pub fn containers_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let is_true = |t: &str| {
        conditions.and_then(|cs| cs.iter().find(|c| c.type_ == t).map(|c| c.status == "True"))
    };
    pod.metadata.deletion_timestamp.is_none()
        && is_true("ContainersReady")
            .or_else(|| is_true("Ready"))
            .unwrap_or(false)
}
