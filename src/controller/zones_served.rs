//! The pods' readiness gate ([`CONDITION_ZONES_SERVED`]): a BIND pod whose
//! template carries the gate is Ready (in the Services, counted by the
//! cluster) only once this module set the condition True, which it does
//! once the pod serves every zone of its cluster: a secondary at the
//! primary's serial, the primary (which the zone pipeline writes directly)
//! with every zone loaded. So a new secondary or a restarted primary never
//! gets clients it would answer REFUSED.
//!
//! The zones checked are the cluster's BindZones outside views (a dig from
//! inside the pod lands in whichever view matches loopback) that have been
//! served before (`status.serial` set) and are not failing for good
//! (a zone that cannot be served must not keep every new pod out).
//!
//! Event-driven: pod and BindZone changes (status included: a zone status
//! write is what says a pod caught up) wake the pod's cluster; a cluster
//! with a pod still waiting is looked at again after [`RECHECK`]. Reads the
//! caches; asks only waiting pods (and the primary) for their serials, one
//! dig run each per look; writes only `pods/status` of a waiting pod, once.
//! Once open, a gate stays open for the Pod's life: a secondary a record
//! behind still answers, and a gate that closed during every record burst
//! would take pods out of the Services for nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _, future, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use super::Shutdown;
use super::bindcluster::cluster_of_pod;
use super::names::{CONDITION_ZONES_SERVED, pod_ordinal};
use super::pods::{cluster_pods, containers_ready};
use super::zonesync::ZoneContext;
use crate::api::{BindCluster, BindZone, CONDITION_READY, ReasonKind, find_condition, reason_kind};
use crate::bind::ZoneName;
use crate::controller::exec::PodRef;

/// A cluster with a pod still waiting is looked at again this soon.
pub const RECHECK: Duration = Duration::from_millis(500);
/// Reason of the condition when set.
pub const REASON_ZONES_SERVED: &str = "ZonesServed";

type ClusterKey = (String, String);

/// Whether `pod` has the gate and it is not yet True.
pub fn gate_waiting(pod: &Pod) -> bool {
    let has_gate = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == CONDITION_ZONES_SERVED));
    let open = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == CONDITION_ZONES_SERVED && c.status == "True")
        });
    has_gate && !open
}

/// Runs until `shutdown`.
pub async fn run(ctx: Arc<ZoneContext>, shutdown: Shutdown) {
    ctx.base.stores.wait_until_ready().await;
    let feeds = &ctx.base.stores.feeds;
    let pods = feeds
        .pods
        .subscribe()
        .filter_map(|p| future::ready(cluster_of_pod(&p).map(key_of)));
    let zones = feeds
        .zones
        .subscribe()
        .filter_map(|z| future::ready(z.namespace().map(|ns| (ns, z.spec.cluster_ref.clone()))));
    let mut events = stream::select(pods, zones);
    let mut pending: BTreeSet<ClusterKey> = BTreeSet::new();
    let mut recheck_at: Option<Instant> = None;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let sleep = async {
            match recheck_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => future::pending().await,
            }
        };
        tokio::select! {
            () = &mut shutdown => break,
            next = events.next() => match next {
                Some(k) => {
                    pending.insert(k);
                    // Take every change already queued: one look per cluster.
                    while let Some(Some(k)) = events.next().now_or_never() {
                        pending.insert(k);
                    }
                }
                None => break,
            },
            () = sleep => {}
        }
        let due = recheck_at.is_some_and(|t| Instant::now() >= t);
        if !due && pending.is_empty() {
            continue;
        }
        let mut waiting = false;
        let clusters: Vec<ClusterKey> = if due {
            recheck_at = None;
            ctx.base
                .stores
                .clusters
                .state()
                .iter()
                .filter_map(|c| Some((c.namespace()?, c.name_any())))
                .collect()
        } else {
            std::mem::take(&mut pending).into_iter().collect()
        };
        for key in clusters {
            waiting |= open_gates(&ctx, &key).await;
        }
        if waiting && recheck_at.is_none() {
            recheck_at = Some(Instant::now() + RECHECK);
        }
    }
}

fn key_of(r: ObjectRef<BindCluster>) -> ClusterKey {
    (r.namespace.unwrap_or_default(), r.name)
}

/// Opens the gate of every pod of the cluster that serves every zone.
/// Returns whether a pod is still waiting.
async fn open_gates(ctx: &ZoneContext, (ns, name): &ClusterKey) -> bool {
    let Some(cluster) = ctx
        .base
        .stores
        .clusters
        .get(&ObjectRef::new(name).within(ns))
        .filter(|c| c.metadata.deletion_timestamp.is_none())
    else {
        return false;
    };
    let pods = cluster_pods(&ctx.base.stores.pods, &cluster);
    let waiting: Vec<&Arc<Pod>> = pods
        .iter()
        .filter(|p| gate_waiting(p) && containers_ready(p))
        .collect();
    let still_starting = pods.iter().any(|p| gate_waiting(p) && !containers_ready(p));
    if waiting.is_empty() {
        return still_starting;
    }
    let zones = zones_to_serve(&ctx.base.stores.index.zones_of_cluster(ns, name));
    let pod_ref = |p: &Pod| PodRef::new(ns.clone(), p.name_any());
    let zones_ref = &zones;
    // Signed with the transfer key (allowed past allow-query); unsigned
    // while it cannot be read.
    let keys = crate::controller::zonesync::keys::resolve(ctx, &cluster, &[])
        .await
        .ok();
    let key = keys.as_ref().map(|k| &k.transfer);
    let serials = |p: PodRef| async move {
        if zones_ref.is_empty() {
            return Some(BTreeMap::new());
        }
        ctx.target(&p).serials(zones_ref, key).await.ok()
    };
    let primary = pods
        .iter()
        .find(|p| pod_ordinal(name, &p.name_any()) == Some(0) && containers_ready(p));
    let primary_serials = match primary {
        Some(p) => serials(pod_ref(p)).await,
        None => None,
    };
    let mut still = still_starting;
    for pod in waiting {
        let is_primary = pod_ordinal(name, &pod.name_any()) == Some(0);
        let own = if is_primary {
            primary_serials.clone()
        } else {
            serials(pod_ref(pod)).await
        };
        let serves = own.as_ref().is_some_and(|own| {
            zones.iter().all(|z| match (own.get(z), &primary_serials) {
                (None, _) => false,
                (Some(_), _) if is_primary => true,
                (Some(s), Some(primary)) => primary.get(z).is_none_or(|p| p == s),
                // No primary to compare with: loaded is what can be known.
                (Some(_), None) => true,
            })
        });
        if !serves || !open(ctx, pod, zones.len()).await {
            still = true;
        }
    }
    still
}

/// The zones a pod must serve before its gate opens (see the module doc).
fn zones_to_serve(zones: &[Arc<BindZone>]) -> Vec<ZoneName> {
    let mut out: Vec<ZoneName> = zones
        .iter()
        .filter(|z| z.metadata.deletion_timestamp.is_none() && z.spec.view.is_none())
        .filter(|z| {
            let Some(status) = z.status.as_ref() else {
                return false;
            };
            let failing = find_condition(&status.conditions, CONDITION_READY).is_some_and(|c| {
                c.status != "True" && reason_kind(&c.reason) == Some(ReasonKind::Failed)
            });
            status.serial.is_some() && !failing
        })
        .filter_map(|z| ZoneName::parse(&z.spec.zone_name).ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Sets the pod's gate condition True (a strategic merge: the kubelet's
/// conditions stay). False when the write failed (looked at again).
async fn open(ctx: &ZoneContext, pod: &Pod, zones: usize) -> bool {
    let ns = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.base.client.clone(), &ns);
    let now = crate::controller::apply::now();
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": CONDITION_ZONES_SERVED,
        "status": "True",
        "reason": REASON_ZONES_SERVED,
        "message": format!("serves all {zones} zones of its cluster"),
        "lastProbeTime": null,
        "lastTransitionTime": now,
    }]}});
    match api
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
    {
        Ok(_) => {
            tracing::info!(namespace = %ns, pod = %pod.name_any(), zones, "pod serves every zone; readiness gate open");
            true
        }
        Err(e) => {
            tracing::debug!(namespace = %ns, pod = %pod.name_any(), error = %e, "failed to open the readiness gate; retrying");
            false
        }
    }
}
