//! Asking the kubelet to refresh a pod's projected config now. The kubelet
//! rewrites configMap/secret/projected volumes on its periodic pod sync
//! (about a minute), or at once when the Pod object changes: so a pod
//! whose mount is behind the wanted config gets its
//! [`ANNOTATION_CONFIG_HASH`] annotation set (files new 0.2-0.6 s later on
//! a real kubelet). The kubelet reads the ConfigMap from its own watch
//! cache, so a nudge that arrives before the ConfigMap's event remounts
//! the old content: a pod still behind at the next look is nudged again
//! (a new annotation value), with backoff, and the reconcile looks again
//! on the same backoff instead of every [`REQUEUE_SHORT`].
//!
//! Touches the cluster: one Pod metadata patch per nudge. Never writes
//! anything but that annotation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};

use super::reconfig::Outcome;
use crate::api::BindCluster;
use crate::controller::context::{Context, REQUEUE_SHORT};
use crate::controller::memo::Nudge;
use crate::controller::names::ANNOTATION_CONFIG_HASH;

/// The first look after a nudge; doubled per nudge of the same config.
const FIRST_RECHECK: Duration = Duration::from_millis(500);

fn backoff(attempts: u32) -> Duration {
    FIRST_RECHECK
        .saturating_mul(1 << attempts.saturating_sub(1).min(8))
        .min(REQUEUE_SHORT)
}

/// Nudges every pod whose mount is behind (see the module doc); returns
/// when to look again (None: no pod is behind).
pub async fn nudge(
    ctx: &Context,
    cluster: &BindCluster,
    pods: &[Arc<Pod>],
    outcome: &Outcome,
) -> Option<Duration> {
    let ns = cluster.namespace().unwrap_or_default();
    let key = |pod: &str| format!("{ns}/{pod}");
    let mut due = Vec::new();
    let mut recheck: Option<Duration> = None;
    {
        let mut memo = ctx.remount_memo.0.lock().expect("remount memo");
        let stale: Vec<String> = outcome.stale_mounts.iter().map(|(p, _)| key(p)).collect();
        let mine = format!("{ns}/");
        memo.retain(|k, _| !k.starts_with(&mine) || stale.contains(k) || !is_of(cluster, k));
        for (pod, hash) in &outcome.stale_mounts {
            let n = memo.entry(key(pod)).or_insert_with(|| Nudge {
                hash: hash.clone(),
                attempts: 0,
                at: Instant::now(),
            });
            if n.hash != *hash {
                *n = Nudge {
                    hash: hash.clone(),
                    attempts: 0,
                    at: Instant::now(),
                };
            }
            let wait = backoff(n.attempts);
            if n.attempts == 0 || n.at.elapsed() >= wait {
                n.attempts += 1;
                n.at = Instant::now();
                due.push((
                    pod.clone(),
                    format!("{}-{}", &hash[..16.min(hash.len())], n.attempts),
                ));
            }
            let left = backoff(n.attempts).saturating_sub(n.at.elapsed());
            recheck = Some(recheck.map_or(left, |r| r.min(left)));
        }
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    for (pod, value) in due {
        if !pods.iter().any(|p| p.name_any() == pod) {
            continue;
        }
        let patch =
            serde_json::json!({"metadata": {"annotations": {ANNOTATION_CONFIG_HASH: value}}});
        match api
            .patch(&pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::debug!(namespace = %ns, pod = %pod, "asked the kubelet to remount the config")
            }
            Err(e) => {
                tracing::debug!(namespace = %ns, pod = %pod, error = %e, "failed to annotate pod for a remount")
            }
        }
    }
    recheck.map(|r| r.max(Duration::from_millis(100)))
}

/// Whether the memo key `ns/pod` names a pod of `cluster`.
fn is_of(cluster: &BindCluster, key: &str) -> bool {
    let name = cluster.name_any();
    key.rsplit_once('/')
        .and_then(|(_, pod)| pod.strip_prefix(&format!("{name}-")))
        .is_some_and(|o| o.bytes().all(|b| b.is_ascii_digit()))
}
