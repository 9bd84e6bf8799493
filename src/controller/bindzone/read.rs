//! Reads what a BindZone refers to: its cluster and pods (caches), its
//! DNSRecords (cache), the TSIG keys it signs with (material from Secrets),
//! and validates the zone and its DNSRecords into typed values
//! ([`crate::render::validate`]), which is all the plan sees. A zone that cannot
//! go on yet says why ([`Blocked`]).
//!
//! Touches the cluster only to read key Secrets.

use std::sync::Arc;

use kube::ResourceExt as _;
use kube::runtime::reflector::ObjectRef;

use crate::api::{BindCluster, BindZone, DNSRecord};
use crate::controller::names::primary_pod_name;
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::access::{NamespaceLabels, uses_selector};
use crate::controller::zonesync::keys::{self, ZoneKeys};
use crate::controller::zonesync::state::ObjKey;
use crate::controller::zonesync::survey::{PodInfo, cluster_pods};
use crate::render::validate::{ConfigError, PrimaryZoneConfig, ZoneConfig, zone_config};

use super::applied::Applied;

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

/// What the read step hands a primary zone's pass, built once: the zone,
/// what it refers to, its validated config (its DNSSEC policy as it may
/// apply now), its DNSRecords and what was applied for it last. Every step
/// after the read takes this one value.
pub struct ZoneRead {
    pub zone: Arc<BindZone>,
    pub inputs: Inputs,
    /// The cluster's primary pod, Ready.
    pub primary: PodInfo,
    pub cfg: PrimaryZoneConfig,
    /// The DNSRecords naming the zone.
    pub records: Vec<Arc<DNSRecord>>,
    /// The applied annotation (or what this process last wrote into it).
    pub applied: Applied,
    /// The zone's DNSSEC key files kept in its Secret (see
    /// [`super::dnssec_keys`]), put back before the zone is created.
    pub kept_keys: Option<Vec<crate::bind::dnssec::KeyFile>>,
    /// Labels of the records' namespaces, when `spec.recordsFrom` selects
    /// namespaces by label ([`namespace_labels`]).
    pub labels: Option<NamespaceLabels>,
}

/// What a zone whose `spec.recordsFrom` selects by label needs to know of
/// the namespaces its records come from: `Some(None)` while the Namespace
/// watch has not listed yet (the zone waits: judging with half the labels
/// would take served records down); `None` when no grant uses a selector.
pub fn namespace_labels(
    ctx: &ZoneContext,
    zone: &BindZone,
    records: &[Arc<DNSRecord>],
) -> Option<Option<NamespaceLabels>> {
    if !uses_selector(zone) {
        return None;
    }
    let namespaces: std::collections::BTreeSet<String> =
        records.iter().filter_map(|r| r.namespace()).collect();
    Some(ctx.namespaces.labels(namespaces.iter().map(String::as_str)))
}

impl Inputs {
    /// The primary (ordinal 0), when Ready.
    pub fn primary(&self) -> Option<&PodInfo> {
        self.pods.iter().find(|p| p.ordinal == 0 && p.ready)
    }
}

/// The DNSRecords whose zoneRef names `zone`, by name, from the cache
/// (through its index: a reconcile does not scan every record).
pub fn records_of(ctx: &ZoneContext, zone: &BindZone) -> Vec<Arc<DNSRecord>> {
    let ns = zone.namespace().unwrap_or_default();
    ctx.base.stores.index.records_of_zone(&ns, &zone.name_any())
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
    // Keys `spec.updatePolicy` grants to: resolved like the others, so a
    // grant to a key the cluster does not load fails validation by name.
    refs.extend(zone.spec.update_policy.iter().map(|g| g.key_ref.as_str()));
    // An external cluster's rndc key (zones are created through it).
    refs.extend(
        cluster
            .external()
            .and_then(|e| e.rndc.as_ref())
            .map(|r| r.key_ref.as_str()),
    );
    // External secondaries' keys: allowed to transfer, and the serial
    // queries of the status are signed with them.
    let external = zone
        .spec
        .external_secondaries
        .as_deref()
        .unwrap_or(&cluster.spec.external_secondaries);
    refs.extend(external.iter().map(|e| e.key_ref.as_str()));
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

use crate::api::{REASON_DUPLICATE_ZONE, REASON_RESERVED_ZONE_NAME};

fn norm(s: &str) -> String {
    s.trim_end_matches('.').to_ascii_lowercase()
}

/// Other live BindZones naming the same zone in the same view of the same
/// cluster, by name.
fn same_zone(ctx: &ZoneContext, zone: &BindZone) -> Vec<Arc<BindZone>> {
    let me = zone.name_any();
    let mut out = ctx.base.stores.index.zones_naming(zone);
    out.retain(|z| z.name_any() != me && z.metadata.deletion_timestamp.is_none());
    out
}

/// Whether the servers hold the zone for this BindZone: its applied
/// annotation (written after the first successful apply, kept across
/// operator restarts) says it was placed.
fn serving(zone: &BindZone) -> bool {
    super::applied::Applied::of(zone).type_.is_some()
}

/// Why this BindZone must not write a zone another BindZone also names.
/// Two objects writing one zone would undo each other. The one the servers
/// hold the zone for keeps it; the others wait. When none of them served
/// it yet (applied together), all wait, each naming the others: neither
/// names nor creation times pick a winner, since an attacker picks the
/// name and objects applied together share a creation second. Only two
/// BindZones that both served it (state from an older operator) fall back
/// to creation time, then name.
pub fn duplicate_of(ctx: &ZoneContext, zone: &BindZone) -> Option<Blocked> {
    let others = same_zone(ctx, zone);
    if others.is_empty() {
        return None;
    }
    let on = format!(
        "zone {} on BindCluster {}{}",
        zone.spec.zone_name,
        zone.spec.cluster_ref,
        zone.spec
            .view
            .as_deref()
            .map(|v| format!(" (view {v})"))
            .unwrap_or_default()
    );
    let me = (zone.metadata.creation_timestamp.clone(), zone.name_any());
    let incumbent = others
        .iter()
        .filter(|z| serving(z))
        .filter(|z| !serving(zone) || (z.metadata.creation_timestamp.clone(), z.name_any()) < me)
        .min_by_key(|z| (z.metadata.creation_timestamp.clone(), z.name_any()));
    let message = match incumbent {
        Some(z) => format!("BindZone {} already serves {on}", z.name_any()),
        None if serving(zone) => return None,
        None => format!(
            "BindZone {} also names {on} and none of them served it before; none is served until all but one are removed",
            others
                .iter()
                .map(|z| z.name_any())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Some(Blocked::waiting(REASON_DUPLICATE_ZONE, message))
}

/// Whether another live BindZone names the same zone (a duplicate that
/// never applied anything must not delete it on its way out).
pub fn zone_shared(ctx: &ZoneContext, zone: &BindZone) -> bool {
    !same_zone(ctx, zone).is_empty()
}

/// Whether the zone's name is its cluster's catalog zone: the operator
/// owns that zone (its members are every zone of the cluster), so no
/// BindZone may write or delete it.
pub fn is_catalog_zone(zone: &BindZone, cluster: &BindCluster) -> bool {
    norm(&zone.spec.zone_name) == norm(&cluster.catalog_zone_name())
}

/// Validates the zone. A bad `spec.records` entry does not fail it: it is
/// validated alone and refused by the plan (the rest is still served).
pub fn validate(zone: &BindZone, inputs: &Inputs) -> Result<ZoneConfig, Blocked> {
    if is_catalog_zone(zone, &inputs.cluster) {
        return Err(Blocked {
            reason: REASON_RESERVED_ZONE_NAME,
            message: format!(
                "zone {} is the catalog zone of BindCluster {}; the operator manages it (pick another zoneName, or set spec.catalog.zoneName on the cluster)",
                zone.spec.zone_name,
                inputs.cluster.name_any()
            ),
            permanent: true,
        });
    }
    if let Some(view) = zone.spec.view.as_deref() {
        let views = &inputs.cluster.spec.views;
        if !views.iter().any(|v| v.name == view) {
            let have = if views.is_empty() {
                "it has no views".to_string()
            } else {
                format!(
                    "its views: {}",
                    views
                        .iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(Blocked {
                reason: crate::api::REASON_VIEW_NOT_FOUND,
                message: format!(
                    "view {view} is gone from BindCluster {} ({have}): no server serves zone {} there. Set spec.view to a view of the cluster, or add the view back",
                    inputs.cluster.name_any(),
                    zone.spec.zone_name
                ),
                permanent: true,
            });
        }
    }
    zone_config(
        zone,
        &inputs.keys.as_loaded(),
        &inputs.keys.transfer.name,
        &inputs.cluster.spec.external_secondaries,
    )
    .map_err(|e| match e {
        ConfigError::ZoneKeyNotLoaded { .. } => Blocked {
            reason: crate::api::REASON_KEY_NOT_FOUND,
            message: e.to_string(),
            permanent: true,
        },
        other => Blocked {
            reason: REASON_INVALID_SPEC,
            message: other.to_string(),
            permanent: true,
        },
    })
}
