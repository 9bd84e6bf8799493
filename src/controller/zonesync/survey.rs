//! What every pod of a cluster serves: one pipelined, signed SOA read over
//! DNS per pod asks the serial of every zone of the cluster (and its
//! catalog), shared by all the cluster's zone reconciles for a while, so
//! periodic checks cost a constant number of exchanges per cluster instead
//! of one per zone. Also the cluster's pods as the
//! zone controllers see them (from the cache).
//!
//! Touches BIND pods (DNS through the executor); reads only caches.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;

use crate::api::BindCluster;
use crate::bind::{TsigKey, ZoneName};
use crate::controller::exec::PodRef;
use crate::controller::names::pod_ordinal;
use crate::controller::pods;

use super::ZoneContext;
use super::state::{ClusterMemory, Survey};

/// One BIND pod of a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub pod: PodRef,
    pub ordinal: u32,
    /// Ready and not being deleted: commands may run in it.
    pub ready: bool,
    /// Changes when the pod is replaced or its containers restart.
    pub identity: u64,
}

fn identity(pod: &Pod) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pod.metadata.uid.hash(&mut h);
    let status = pod.status.as_ref();
    status.and_then(|s| s.pod_ip.as_ref()).hash(&mut h);
    let restarts: i64 = status
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| i64::from(c.restart_count)).sum())
        .unwrap_or_default();
    restarts.hash(&mut h);
    h.finish()
}

/// The cluster's pods (by ordinal), from the cache.
pub fn cluster_pods(ctx: &ZoneContext, cluster: &BindCluster) -> Vec<PodInfo> {
    let name = cluster.name_any();
    let mut out: Vec<PodInfo> = pods::cluster_pods(&ctx.base.stores.pods, cluster)
        .into_iter()
        .filter_map(|p| {
            let ordinal = pod_ordinal(&name, &p.name_any())?;
            Some(PodInfo {
                pod: PodRef::new(p.namespace().unwrap_or_default(), p.name_any()),
                ordinal,
                ready: pods::containers_ready(&p),
                identity: identity(&p),
            })
        })
        .collect();
    out.sort_by_key(|p| p.ordinal);
    out
}

/// A fingerprint of the pods: any restart, replacement or readiness change
/// makes a survey taken before it stale.
pub fn pods_fingerprint(pods: &[PodInfo]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in pods {
        (&p.pod.name, p.ready, p.identity).hash(&mut h);
    }
    h.finish()
}

/// The zones a survey of `cluster` asks: every BindZone of the cluster
/// outside a view (signed with the transfer key, a query lands in
/// whichever view that key matches, so view zones are asked through rndc
/// instead), and the
/// catalog zone outside views.
pub fn surveyed_zones(ctx: &ZoneContext, cluster: &BindCluster) -> BTreeSet<ZoneName> {
    let name = cluster.name_any();
    let ns = cluster.namespace().unwrap_or_default();
    let mut zones: BTreeSet<ZoneName> = ctx
        .base
        .stores
        .index
        .zones_of_cluster(&ns, &name)
        .into_iter()
        .filter(|z| z.spec.view.is_none())
        .filter_map(|z| ZoneName::parse(&z.spec.zone_name).ok())
        .collect();
    if let Ok(cat) = ZoneName::parse(&cluster.catalog_zone_name()) {
        zones.insert(cat);
    }
    zones
}

/// The cluster's survey: the cached one if taken under the same pods within
/// `max_age`, after `newer_than` (a zone checking on its own last write
/// wants the secondaries' answer since) and asking `must_cover`, else a new
/// one (one pipelined SOA read per ready pod, in the pod's next round). A
/// pod that cannot be asked is left out.
pub async fn survey(
    ctx: &ZoneContext,
    cluster: &BindCluster,
    pods: &[PodInfo],
    memory: &ClusterMemory,
    must_cover: &ZoneName,
    newer_than: Option<Instant>,
    key: Option<&TsigKey>,
) -> Arc<Survey> {
    let fp = pods_fingerprint(pods);
    let max_age = ctx.settings.survey_max_age;
    let usable =
        |s: &Arc<Survey>| s.asked.contains(must_cover) && newer_than.is_none_or(|t| s.taken > t);
    if let Some(s) = memory.survey(fp, max_age).filter(usable) {
        return s;
    }
    let _guard = memory.survey_lock.lock().await;
    if let Some(s) = memory.survey(fp, max_age).filter(usable) {
        return s;
    }
    let mut asked = surveyed_zones(ctx, cluster);
    asked.insert(must_cover.clone());
    let list: Vec<ZoneName> = asked.iter().cloned().collect();
    let mut served = BTreeMap::new();
    for p in pods.iter().filter(|p| p.ready) {
        let target = ctx.target(&p.pod);
        match target.serials(&list, key).await {
            Ok(serials) => {
                served.insert(p.pod.name.clone(), serials);
            }
            Err(e) => {
                tracing::debug!(pod = %p.pod, error = %e, "survey failed for pod");
            }
        }
    }
    let s = Arc::new(Survey {
        taken: Instant::now(),
        pods_fingerprint: fp,
        asked,
        pods: served,
    });
    memory.store_survey(s.clone());
    record_health(ctx, cluster, pods, &s);
    s
}

/// Hands the survey to the zone health gauges
/// ([`crate::telemetry::zonehealth`]): every pod of the cluster, answering
/// or not, against the primary's serials.
fn record_health(ctx: &ZoneContext, cluster: &BindCluster, pods: &[PodInfo], s: &Survey) {
    use crate::telemetry::zonehealth::SurveyReading;
    let Some(primary) = pods.iter().find(|p| p.ordinal == 0) else {
        return;
    };
    let reading = SurveyReading {
        namespace: cluster.namespace().unwrap_or_default(),
        cluster: cluster.name_any(),
        primary: primary.pod.name.clone(),
        pods: pods.iter().map(|p| p.pod.name.clone()).collect(),
        zones: s.asked.iter().map(|z| z.as_str().to_string()).collect(),
        served: s
            .pods
            .iter()
            .map(|(pod, zones)| {
                let zones = zones
                    .iter()
                    .map(|(z, serial)| (z.as_str().to_string(), *serial))
                    .collect();
                (pod.clone(), zones)
            })
            .collect(),
    };
    ctx.base.metrics.zone_health().record(&reading, s.taken);
}
