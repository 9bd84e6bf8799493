//! What a pod worker reports: the runtime's pod table entry and the Pod's
//! status, patched only when it changed. Part of the pod worker; writes
//! `pods/status` only.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;

use super::{STATUS_RETRY, Worker};
use crate::controller::names::{LABEL_CLUSTER, LABEL_INSTANCE};
use crate::local::runtime::pod_status::{self, ContainerPhase, StatusInput};
use crate::local::runtime::table::PodEndpoint;

impl Worker {
    pub(super) fn cluster(&self, pod: &Pod) -> String {
        let sts = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "StatefulSet")
            .map(|o| o.name.clone());
        let owner = sts
            .as_deref()
            .and_then(|s| self.stores.statefulset(self.ns(), s))
            .and_then(|s| {
                s.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .find(|o| o.kind == "BindCluster")
                    .map(|o| o.name.clone())
            });
        let label = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_CLUSTER).or_else(|| l.get(LABEL_INSTANCE)))
            .cloned();
        owner.or(label).or(sts).unwrap_or_else(|| {
            self.name()
                .rsplit_once('-')
                .map_or(self.name(), |(s, _)| s)
                .to_string()
        })
    }

    /// Updates the runtime's table and, when it changed, the Pod's status.
    pub(super) async fn publish(&mut self, pod: &Pod) {
        let ordinal = self.ordinal(pod);
        if let Ok(ports) = self.shared.ports.ports(self.ns(), self.name()) {
            let mut entry = PodEndpoint::new(
                self.ns(),
                self.name(),
                &self.cluster(pod),
                ordinal,
                ports,
                self.dirs.log.clone(),
            );
            entry.running = self.pod.container.is_some();
            entry.ready = self.pod.ready;
            entry.restarts = self.pod.restarts;
            entry.uid = self.pod.uid.clone().unwrap_or_default();
            entry.run_as = self.pod.run_as.clone();
            self.shared.table.set(entry);
        }

        let now = Timestamp::now();
        let running = self.pod.container.is_some();
        let p = &mut self.pod;
        p.conditions.set("PodScheduled", true, p.start_time);
        p.conditions.set("Initialized", true, p.start_time);
        // As kubelet: Ready is the containers' readiness AND every
        // readiness gate's condition (set by whoever owns the gate) True.
        let gates_open = readiness_gates_open(pod);
        p.conditions.set("ContainersReady", running && p.ready, now);
        p.conditions
            .set("Ready", running && p.ready && gates_open, now);
        let phase = match (&p.container, p.started_at) {
            (Some(c), Some((_, since))) => ContainerPhase::Running {
                since,
                pid: c.pid(),
            },
            _ => ContainerPhase::Waiting {
                reason: p.waiting.0.clone(),
                message: p.waiting.1.clone(),
            },
        };
        let container = pod.spec.as_ref().and_then(|s| s.containers.first());
        let status = pod_status::build(&StatusInput {
            container_name: container.map_or("bind", |c| c.name.as_str()),
            image: container
                .and_then(|c| c.image.as_deref())
                .unwrap_or_default(),
            start_time: p.start_time,
            started_once: p.started_once,
            phase: &phase,
            ready: running && p.ready,
            restarts: p.restarts,
            last_terminated: p.last_terminated.as_ref(),
            conditions: &p.conditions,
        });
        if p.published.as_ref() == Some(&status) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.shared.client.clone(), &self.key.0);
        // A strategic merge, as kubelet's: `conditions` merge by type, so
        // a readiness gate's condition written by its owner stays.
        let patch = json!({ "status": status });
        match api
            .patch_status(
                &self.key.1,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => {
                self.pod.published = Some(status);
                self.pod.status_retry_at = None;
            }
            Err(e) => {
                tracing::debug!(pod = %self.key.1, error = %e, "failed to write pod status; retrying");
                self.pod.status_retry_at = Some(Instant::now() + STATUS_RETRY);
            }
        }
    }
}

/// Whether every `spec.readinessGates` condition of `pod` is True (no gates:
/// true).
pub(super) fn readiness_gates_open(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .into_iter()
        .flatten()
        .all(|g| {
            conditions.is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == g.condition_type && c.status == "True")
            })
        })
}
