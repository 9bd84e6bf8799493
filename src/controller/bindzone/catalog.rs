//! The cluster's catalog zone on the primary (RFC 9432, schema 2): created
//! at run time like every primary zone (file, then listed in the primary's
//! zone list; once per cluster and view, under a per-cluster lock so two zones never write its file at
//! once), and zones joining or leaving it by TSIG-signed update with the
//! transfer key (in a view: the view's key) at their stable member id.
//!
//! Touches BIND pods (exec) only.

use crate::bind::nsupdate::{RrsetChange, catalog_add_member, catalog_remove_member};
use crate::bind::zone::{catalog_primary_zone, catalog_skeleton};
use crate::bind::{DomainName, Rdata, RecordType, TsigKey, Ttl, ViewName, ZoneName};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::server::{CatalogJoin, Created, ServerError, Target};
use crate::controller::zonesync::state::ClusterMemory;

use super::read::Inputs;
use super::serials::{of, peer_serials, start_serial};

/// Makes sure the catalog zone exists on the primary (`present`: what the
/// probe saw); returns the catalog epoch members must have joined at.
/// `peers`: the secondaries' serials the caller read right after its
/// probe found the catalog missing (then neither is asked again: the
/// catalog is created in the same round as the zone that found it
/// missing, not two rounds later).
#[allow(clippy::too_many_arguments)]
pub async fn ensure(
    ctx: &ZoneContext,
    inputs: &Inputs,
    memory: &ClusterMemory,
    target: &Target<'_>,
    catalog: &ZoneName,
    view: Option<&ViewName>,
    present: Option<bool>,
    peers: Option<&[(ZoneName, u32)]>,
) -> Result<u64, ServerError> {
    if present == Some(true) {
        // Served: listed already (no exec once this process saw it), or
        // added by an older operator through rndc and moved to the list now.
        let zone = catalog_primary_zone(catalog, view, &inputs.keys.transfer_for(view).name);
        let skeleton = catalog_skeleton(catalog, start_serial(Vec::new()));
        target.relist_primary(&zone, &skeleton.render()).await?;
        return Ok(memory.catalog_epoch());
    }
    let seen = memory.catalog_sightings(catalog);
    let _guard = memory.catalog_lock.lock().await;
    // Another zone of the cluster created or found it while we waited.
    if memory.catalog_sightings(catalog) != seen {
        return Ok(memory.catalog_epoch());
    }
    // A catalog the probe missed though it is listed comes back as
    // `Existing` from the creation below, which writes nothing then.
    let peers = match peers {
        Some(p) => p.to_vec(),
        None => {
            if target
                .serial_of(catalog, inputs.keys.transfer_for(view))
                .await?
                .is_some()
            {
                memory.saw_catalog(catalog);
                return Ok(memory.catalog_epoch());
            }
            peer_serials(ctx, inputs, std::slice::from_ref(catalog), view).await
        }
    };
    let zone = catalog_primary_zone(catalog, view, &inputs.keys.transfer_for(view).name);
    let held = of(&peers, catalog);
    let mut skeleton = catalog_skeleton(catalog, start_serial(held.iter().copied()));
    if !held.is_empty() {
        // Re-created (an empty primary) while secondaries hold it: with
        // every member it had, so the secondaries, which transfer it at
        // once, drop no member zone while the members are rebuilt.
        skeleton.records.extend(members(ctx, inputs, catalog, view));
    }
    let created = target
        .create_primary(&zone, &skeleton.render(), None)
        .await?;
    memory.saw_catalog(catalog);
    match created {
        Created::New | Created::Bare(_) => {
            memory.invalidate_survey();
            tracing::info!(pod = %target.pod, catalog = %catalog, "created catalog zone");
            Ok(memory.bump_catalog_epoch())
        }
        Created::Existing => Ok(memory.catalog_epoch()),
    }
}

/// The member records of the zones of the cluster applied into `catalog`
/// (in `view`), as their joins would write them.
fn members(
    ctx: &ZoneContext,
    inputs: &Inputs,
    catalog: &ZoneName,
    view: Option<&ViewName>,
) -> Vec<(DomainName, RecordType, Ttl, Rdata)> {
    let (ns, cluster) = &inputs.cluster_key;
    ctx.base
        .stores
        .index
        .zones_of_cluster(ns, cluster)
        .iter()
        .filter(|z| z.metadata.deletion_timestamp.is_none())
        .filter_map(|z| {
            let applied = super::applied::Applied::of(z);
            let here = applied.catalog.as_deref() == Some(catalog.fqdn().as_str())
                && applied.view.as_deref() == view.map(ViewName::as_str);
            here.then(|| ZoneName::parse(&z.spec.zone_name).ok())?
        })
        .filter_map(|zone| match catalog_add_member(catalog, &zone) {
            RrsetChange::Replace {
                name,
                rtype,
                ttl,
                mut values,
            } => values.pop().map(|v| (name, rtype, ttl, v)),
            _ => None,
        })
        .collect()
}

/// One catalog change (join or leave), signed with the transfer key; the
/// pod's batcher sends the changes of every zone of a round to one catalog
/// in one message.
async fn update(
    target: &Target<'_>,
    catalog: &ZoneName,
    zone: &ZoneName,
    join: bool,
    transfer: &TsigKey,
) -> Result<(), ServerError> {
    let change = if join {
        catalog_add_member(catalog, zone)
    } else {
        catalog_remove_member(catalog, zone)
    };
    target.catalog_change(catalog, change, transfer).await
}

/// The join of a zone for its creation to carry (see
/// [`Target::create_primary_joining`]): the same change as [`join`].
pub fn carried_join(catalog: &ZoneName, zone: &ZoneName, transfer: &TsigKey) -> CatalogJoin {
    CatalogJoin {
        catalog: catalog.clone(),
        change: catalog_add_member(catalog, zone),
        key: transfer.clone(),
    }
}

/// Makes `zone` a member (PTR at its stable id; replacing is idempotent).
pub async fn join(
    target: &Target<'_>,
    catalog: &ZoneName,
    zone: &ZoneName,
    transfer: &TsigKey,
) -> Result<(), ServerError> {
    update(target, catalog, zone, true, transfer).await
}

/// Leaves a catalog; a catalog that is gone counts as left.
pub async fn leave(
    target: &Target<'_>,
    catalog: &ZoneName,
    zone: &ZoneName,
    transfer: &TsigKey,
) -> Result<(), ServerError> {
    match update(target, catalog, zone, false, transfer).await {
        Err(e) if e.zone_missing() => Ok(()),
        other => other,
    }
}
