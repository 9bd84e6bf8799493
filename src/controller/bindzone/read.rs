//! Reads what a BindZone refers to: its cluster and pods (caches), its
//! DNSRecords (cache), the TSIG keys it signs with (material from Secrets),
//! and validates the zone into the BIND layer's types. A zone that cannot
//! go on yet says why ([`Blocked`]).
//!
//! Touches the cluster only to read key Secrets.

use std::sync::Arc;

use kube::ResourceExt as _;
use kube::runtime::reflector::ObjectRef;

use crate::api::{BindCluster, BindZone, DNSRecord};
use crate::controller::names::primary_pod_name;
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::keys::{self, ZoneKeys};
use crate::controller::zonesync::state::ObjKey;
use crate::controller::zonesync::survey::{PodInfo, cluster_pods};
use crate::render::validate::{ConfigError, ZoneConfig, zone_config};

use super::Error;

use crate::api::{REASON_CLUSTER_NOT_FOUND, REASON_INVALID_SPEC, REASON_PRIMARY_NOT_READY};

/// Why a zone cannot be written now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub reason: &'static str,
    pub message: String,
    /// True: only a change to the zone (or what it names) helps; false:
    /// it clears by itself (a pod becoming ready, a key being generated).
    pub permanent: bool,
}

impl Blocked {
    fn waiting(reason: &'static str, message: String) -> Blocked {
        Blocked {
            reason,
            message,
            permanent: false,
        }
    }
}

/// Everything a zone write needs.
pub struct Inputs {
    pub cluster: Arc<BindCluster>,
    pub cluster_key: ObjKey,
    pub pods: Vec<PodInfo>,
    pub keys: ZoneKeys,
}

impl Inputs {
    /// The primary (ordinal 0), when Ready.
    pub fn primary(&self) -> Option<&PodInfo> {
        self.pods.iter().find(|p| p.ordinal == 0 && p.ready)
    }
}

/// The DNSRecords whose zoneRef names `zone`, from the cache.
pub fn records_of(ctx: &ZoneContext, zone: &BindZone) -> Vec<Arc<DNSRecord>> {
    let ns = zone.namespace();
    let name = zone.name_any();
    let mut out: Vec<_> = ctx
        .records
        .state()
        .into_iter()
        .filter(|r| r.namespace() == ns && r.spec.zone_ref == name)
        .collect();
    out.sort_by_key(|r| r.name_any());
    out
}

/// The zone's BindCluster from the cache (`None`: missing or being deleted).
pub fn cluster_of(ctx: &ZoneContext, zone: &BindZone) -> Option<Arc<BindCluster>> {
    let ns = zone.namespace()?;
    ctx.base
        .stores
        .clusters
        .get(&ObjectRef::new(&zone.spec.cluster_ref).within(&ns))
        .filter(|c| c.metadata.deletion_timestamp.is_none())
}

/// Reads the cluster, pods and keys. `Ok(Err(_))`: the zone must wait.
pub async fn inputs(ctx: &ZoneContext, zone: &BindZone) -> Result<Result<Inputs, Blocked>, Error> {
    let ns = zone.namespace().unwrap_or_default();
    let Some(cluster) = cluster_of(ctx, zone) else {
        return Ok(Err(Blocked::waiting(
            REASON_CLUSTER_NOT_FOUND,
            format!("BindCluster {ns}/{} does not exist", zone.spec.cluster_ref),
        )));
    };
    let mut refs: Vec<&str> = zone
        .spec
        .update_key_ref
        .iter()
        .map(String::as_str)
        .collect();
    refs.extend(
        zone.spec
            .primaries
            .iter()
            .filter_map(|p| p.key_ref.as_deref()),
    );
    let keys = match keys::resolve(ctx, &cluster, &refs).await {
        Ok(k) => k,
        Err(e) if e.is_api() => return Err(Error::Keys(e)),
        Err(e) => return Ok(Err(Blocked::waiting(e.category(), e.to_string()))),
    };
    let pods = cluster_pods(ctx, &cluster);
    Ok(Ok(Inputs {
        cluster_key: (ns, cluster.name_any()),
        cluster,
        pods,
        keys,
    }))
}

/// The primary of a cluster as the zone needs it, or why it must wait.
pub fn primary(inputs: &Inputs) -> Result<&PodInfo, Blocked> {
    inputs.primary().ok_or_else(|| {
        Blocked::waiting(
            REASON_PRIMARY_NOT_READY,
            format!(
                "pod {} of BindCluster {} is not Ready",
                primary_pod_name(&inputs.cluster.name_any()),
                inputs.cluster.name_any()
            ),
        )
    })
}

use crate::api::REASON_DUPLICATE_ZONE;

/// Other live BindZones naming the same zone in the same view of the same
/// cluster, with whether each is older (by creation, then name).
fn same_zone(ctx: &ZoneContext, zone: &BindZone) -> Vec<(String, bool)> {
    let norm = |s: &str| s.trim_end_matches('.').to_ascii_lowercase();
    let me = (zone.metadata.creation_timestamp.clone(), zone.name_any());
    ctx.zones
        .state()
        .into_iter()
        .filter(|z| z.namespace() == zone.namespace() && z.name_any() != zone.name_any())
        .filter(|z| z.spec.cluster_ref == zone.spec.cluster_ref && z.spec.view == zone.spec.view)
        .filter(|z| norm(&z.spec.zone_name) == norm(&zone.spec.zone_name))
        .filter(|z| z.metadata.deletion_timestamp.is_none())
        .map(|z| {
            let older = (z.metadata.creation_timestamp.clone(), z.name_any()) < me;
            (z.name_any(), older)
        })
        .collect()
}

/// The older BindZone serving the same zone, as a reason to wait: two
/// objects writing one zone would undo each other, so the younger one
/// waits (and takes over if the older one goes).
pub fn duplicate_of(ctx: &ZoneContext, zone: &BindZone) -> Option<Blocked> {
    let older = same_zone(ctx, zone)
        .into_iter()
        .filter(|(_, older)| *older)
        .map(|(n, _)| n)
        .min()?;
    Some(Blocked::waiting(
        REASON_DUPLICATE_ZONE,
        format!(
            "BindZone {older} already serves zone {} on this cluster",
            zone.spec.zone_name
        ),
    ))
}

/// Whether another live BindZone names the same zone (a duplicate that
/// never applied anything must not delete it on its way out).
pub fn zone_shared(ctx: &ZoneContext, zone: &BindZone) -> bool {
    !same_zone(ctx, zone).is_empty()
}

/// Validates the zone. Inline records are validated one by one by the
/// plan (a bad entry must not block the rest), so they are left out here.
pub fn validate(zone: &BindZone, inputs: &Inputs) -> Result<ZoneConfig, Blocked> {
    let mut bare = zone.clone();
    bare.spec.records.clear();
    zone_config(&bare, &inputs.keys.as_loaded(), &inputs.keys.transfer.name).map_err(|e| match e {
        ConfigError::ZoneKeyNotLoaded { .. } => Blocked::waiting("KeyNotFound", e.to_string()),
        other => Blocked {
            reason: REASON_INVALID_SPEC,
            message: other.to_string(),
            permanent: true,
        },
    })
}
