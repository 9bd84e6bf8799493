//! The steps of the BindCluster pipeline that touch the cluster or the
//! pods, each small enough to read at a glance; `converge` in the parent
//! module calls them in order.
//!
//! Touches the cluster (applies, Events, status) and pods (executor).
//! Never logs rendered keys.conf.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource as _, ResourceExt as _};

pub use super::reconfig::NotifyLists;
use super::reconfig::{Outcome, PodView, Wanted, reconfig_pods, sync_notify_targets};
use super::{Error, REASON_NOTIFY_UPDATED, REASON_RECONFIGURED, build, read, statefulset, status};
use crate::api::{BindCluster, CONDITION_READY, is_condition_true};
use crate::bind::Endpoint;
use crate::bind::render::RenderedFiles;
use crate::controller::apply::{apply_if_changed, apply_secret_if_changed};
use crate::controller::context::{Context, REQUEST_KIND_APPLY, REQUEUE_LONG, REQUEUE_SHORT};
use crate::controller::exec::PodRef;
use crate::controller::names::{pod_ordinal, primary_pod_name, primary_service_name};
use crate::controller::pods;

fn apply_err(kind: &str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let object = format!("{kind} {name}");
    move |source| Error::Kube {
        action: REQUEST_KIND_APPLY,
        object,
        source,
    }
}

/// The primary pod (ordinal 0).
pub fn primary_pod(cluster: &BindCluster) -> PodRef {
    PodRef::new(
        cluster.namespace().unwrap_or_default(),
        primary_pod_name(&cluster.name_any()),
    )
}

/// Applies the three Services; returns the primary Service as live.
pub async fn apply_services(ctx: &Context, cluster: &BindCluster) -> Result<Service, Error> {
    let mut primary = None;
    for desired in [
        build::dns_service(cluster),
        build::headless_service(cluster),
        build::primary_service(cluster),
    ] {
        let name = desired.name_any();
        let live = apply_if_changed(&ctx.client, &ctx.stores.services, desired, |_, _| true)
            .await
            .map_err(apply_err("service", &name))?;
        if name == primary_service_name(&cluster.name_any()) {
            primary = Some(live);
        }
    }
    Ok(primary.expect("the primary Service is among those applied"))
}

/// Applies the PodDisruptionBudget, or deletes the one the operator made
/// when the spec turns it off.
pub async fn apply_disruption_budget(ctx: &Context, cluster: &BindCluster) -> Result<(), Error> {
    let desired = build::pod_disruption_budget(cluster);
    let name = desired.name_any();
    if cluster.spec.pod_disruption_budget_enabled() {
        apply_if_changed(&ctx.client, &ctx.stores.pdbs, desired, |_, _| true)
            .await
            .map_err(apply_err("poddisruptionbudget", &name))?;
        return Ok(());
    }
    let ns = cluster.namespace().unwrap_or_default();
    let cached = ctx
        .stores
        .pdbs
        .get(&ObjectRef::new(&name).within(&ns))
        .is_some();
    if cached {
        let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), &ns);
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(namespace = %ns, name = %name, "deleted poddisruptionbudget"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(Error::Kube {
                    action: "delete",
                    object: format!("poddisruptionbudget {name}"),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// Applies the ConfigMap, the keys Secret and the StatefulSet.
pub async fn apply_rendered(
    ctx: &Context,
    cluster: &BindCluster,
    files: &RenderedFiles,
) -> Result<(), Error> {
    let cm = build::configmap(cluster, files);
    let name = cm.name_any();
    // Data is compared too: a hand edit of the ConfigMap is reverted.
    apply_if_changed(&ctx.client, &ctx.stores.configmaps, cm, |live, desired| {
        live.data == desired.data
    })
    .await
    .map_err(apply_err("configmap", &name))?;
    let keys = build::keys_secret(cluster, files);
    let name = keys.name_any();
    apply_secret_if_changed(&ctx.client, &ctx.stores.secrets, keys)
        .await
        .map_err(apply_err("secret", &name))?;
    let sts = statefulset::statefulset(cluster, &files.entrypoint);
    let name = sts.name_any();
    apply_if_changed(&ctx.client, &ctx.stores.statefulsets, sts, |_, _| true)
        .await
        .map_err(apply_err("statefulset", &name))?;
    Ok(())
}

fn wanted<'a>(files: &'a RenderedFiles, notify: Option<&'a NotifyLists>) -> Wanted<'a> {
    Wanted {
        primary_conf: &files.named_conf_primary,
        secondary_conf: &files.named_conf_secondary,
        keys_conf: &files.keys_conf,
        notify,
    }
}

/// The secondary pods' DNS endpoints the primary NOTIFYs.
pub fn notify_targets(ctx: &Context, cluster: &BindCluster, pods: &[Arc<Pod>]) -> Vec<Endpoint> {
    let name = cluster.name_any();
    pods.iter()
        .filter(|p| {
            p.meta().deletion_timestamp.is_none()
                && pod_ordinal(&name, &p.name_any()).is_some_and(|o| o > 0)
        })
        .filter_map(|p| ctx.network.pod_dns_endpoint(p))
        .collect()
}

/// Runs the per-pod reconfig step and publishes one Event per pod that
/// loaded the config.
pub async fn reconfigure(
    ctx: &Context,
    cluster: &BindCluster,
    pods: &[Arc<Pod>],
    files: &RenderedFiles,
    notify: &NotifyLists,
) -> Outcome {
    let name = cluster.name_any();
    let ns = cluster.namespace().unwrap_or_default();
    let views: Vec<PodView> = pods
        .iter()
        .map(|p| PodView {
            pod: PodRef::new(&ns, p.name_any()),
            ready: pods::containers_ready(p),
            primary: pod_ordinal(&name, &p.name_any()) == Some(0),
            identity: container_identity(p),
        })
        .collect();
    let previous = cluster
        .status
        .as_ref()
        .map(|s| s.applied_config.clone())
        .unwrap_or_default();
    let outcome = reconfig_pods(
        ctx.executor.as_ref(),
        &ctx.reconfig_memo,
        &views,
        &wanted(files, Some(notify)),
        &previous,
    )
    .await;
    for (pod, hash) in &outcome.reconfigured {
        let short = &hash[..12];
        tracing::info!(namespace = %ns, cluster = %name, pod = %pod, config = %short, "reconfigured");
        let related = pods
            .iter()
            .find(|p| p.name_any() == *pod)
            .map(|p| p.object_ref(&()));
        ctx.publish_related_event(
            cluster,
            related,
            EventType::Normal,
            REASON_RECONFIGURED,
            "Reconfig",
            format!("pod {pod} loaded config {short}"),
        )
        .await;
    }
    outcome
}

/// What a remembered NOTIFY list or reconfig is valid for: this Pod
/// object's current container. A restarted container can come back on an
/// emptied data volume (a memory-backed emptyDir after a node reboot, the
/// local runtime's empty-volume restarts) where the list written before is
/// gone.
fn container_identity(pod: &Pod) -> String {
    let restarts = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count);
    format!("{}/{restarts}", pod.uid().unwrap_or_default())
}

/// Points the primary's NOTIFY list (one per view, signed with the view's
/// key, when the cluster has views) at the secondaries, once the primary
/// runs the wanted config. Failures join the outcome's exec errors.
#[allow(clippy::too_many_arguments)]
pub async fn notify(
    ctx: &Context,
    cluster: &BindCluster,
    pods: &[Arc<Pod>],
    files: &RenderedFiles,
    lists: &NotifyLists,
    outcome: &mut Outcome,
) {
    let name = cluster.name_any();
    let Some(primary) = pods
        .iter()
        .find(|p| pod_ordinal(&name, &p.name_any()) == Some(0))
    else {
        return;
    };
    if !pods::containers_ready(primary)
        || outcome.applied.get(&primary.name_any()) != Some(&wanted(files, None).hash_for(true))
    {
        return;
    }
    let targets = &lists.targets;
    let result = sync_notify_targets(
        ctx.executor.as_ref(),
        &ctx.notify_memo,
        &primary_pod(cluster),
        &container_identity(primary),
        targets,
        &lists.transfer_key,
        &lists.view_keys,
        &lists.external,
    )
    .await;
    match result {
        Ok(true) => {
            ctx.publish_event(
                cluster,
                EventType::Normal,
                REASON_NOTIFY_UPDATED,
                "Notify",
                format!("the primary now notifies {} secondaries", targets.len()),
            )
            .await;
        }
        Ok(false) => {}
        Err(e) => outcome.exec_errors.push(e),
    }
}

/// Writes status (when it changed), publishes a Warning for failures, and
/// picks the requeue: long after any failure, short while waiting or not
/// Ready, none when converged.
pub async fn finish(
    ctx: &Context,
    cluster: &BindCluster,
    outcome: &Outcome,
    remount_recheck: Option<Duration>,
) -> Result<Action, Error> {
    let ready_pods = read::ready_pod_count(&ctx.stores.pods, cluster);
    let cluster_pods = pods::cluster_pods(&ctx.stores.pods, cluster);
    let failing = status::failing_pods(&cluster_pods);
    let mut new_status = status::converged_status(cluster, ready_pods, outcome, failing);
    // The primary down while a secondary serves: say what that means.
    let primary = primary_pod_name(&cluster.name_any());
    let primary_ready = cluster_pods
        .iter()
        .any(|p| p.name_any() == primary && pods::pod_ready(p));
    if !primary_ready && ready_pods > 0 {
        status::note_primary_rebuilding(&mut new_status, &primary);
    }
    let requeue = outcome.requeue();
    if requeue == Some(REQUEUE_LONG) {
        let (_, reason, message) = outcome.condition();
        tracing::warn!(
            namespace = cluster.namespace().unwrap_or_default(),
            cluster = cluster.name_any(),
            reason,
            message = %message,
            "config apply failed"
        );
        ctx.publish_event(cluster, EventType::Warning, reason, "Reconfig", message)
            .await;
    }
    let ready = is_condition_true(&new_status.conditions, CONDITION_READY);
    super::write_status(ctx, cluster, new_status).await?;
    Ok(match requeue {
        // A nudged mount is looked at on the nudge's backoff.
        Some(d) if d == REQUEUE_SHORT => Action::requeue(remount_recheck.unwrap_or(d).min(d)),
        Some(d) => Action::requeue(d),
        None if !ready => Action::requeue(REQUEUE_SHORT),
        None => Action::await_change(),
    })
}
