//! Deleting a BindZone: a primary zone leaves its catalog first (so the
//! secondaries drop it), then is deleted on the primary with its file and
//! journal (`delzone`, then `rm`), so a later zone of the same name
//! starts clean; a secondary zone is deleted on every pod. The zone's
//! DNSRecords are settled: deleted ones released, the others told the zone
//! is gone. With no cluster left there is nothing to remove on any server.
//!
//! What is removed is planned from typed values (`Removal::plan`): the
//! zone's placement validated by [`crate::render::validate::zone_placement`]
//! and the applied annotation. Nothing here reads a CRD string.
//!
//! Touches BIND pods (exec) and the cluster (record statuses, through the
//! zone controllers' status memo, and finalizers).
//! A primary that is down blocks the delete (retried with backoff), and so
//! does any pod that is down for a secondary zone: a zone left behind
//! would come back to life on the next start.

use std::sync::Arc;

use kube::ResourceExt as _;
use kube::runtime::controller::Action;

use crate::api::{BindCluster, BindZone, DNSRecord, ZoneType};
use crate::bind::zone::zone_file;
use crate::bind::{ViewName, ZoneName};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::keys;
use crate::controller::zonesync::plan::has_record_finalizer;
use crate::controller::zonesync::server::ServerError;
use crate::controller::zonesync::survey::cluster_pods;
use crate::controller::zonesync::writes::{
    RecordReport, release_record_reports, write_record_reports_final,
};
use crate::render::validate::{ZonePlacement, zone_placement};

use super::applied::Applied;
use super::catalog;
use super::primary::TYPE_PRIMARY;
use super::read::{cluster_of, records_of};
use super::secondary::TYPE_SECONDARY;
use super::{Error, read};

/// What deleting a zone removes, planned from typed values: the spec's
/// placement (validated) and the applied annotation (where the operator
/// last placed it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Removal {
    zone: ZoneName,
    /// The views the zone is deleted from: the spec's, and the applied
    /// one when the zone was placed elsewhere.
    views: Vec<Option<ViewName>>,
    /// Held by the primary (delete it there, after leaving its catalogs).
    primary: bool,
    /// Held as a secondary zone by every pod.
    secondary: bool,
    /// Catalogs to leave first, each with its view (in a view, only that
    /// view's key reaches its catalog).
    catalogs: Vec<(ZoneName, Option<ViewName>)>,
}

impl Removal {
    fn plan(spec: &ZonePlacement, applied: &Applied) -> Removal {
        let old_view = applied
            .view
            .as_deref()
            .and_then(|v| ViewName::parse(v).ok());
        let mut views = vec![spec.view.clone()];
        if old_view != spec.view && applied.type_.is_some() {
            views.push(old_view.clone());
        }
        let mut catalogs: Vec<(ZoneName, Option<ViewName>)> = applied
            .catalog
            .iter()
            .filter_map(|c| ZoneName::parse(c).ok())
            .map(|c| (c, old_view.clone()))
            .collect();
        catalogs.extend(spec.catalog.clone().map(|c| (c, spec.view.clone())));
        catalogs.sort();
        catalogs.dedup();
        Removal {
            zone: spec.zone.clone(),
            views,
            primary: spec.type_ == ZoneType::Primary
                || applied.type_.as_deref() == Some(TYPE_PRIMARY),
            secondary: spec.type_ == ZoneType::Secondary
                || applied.type_.as_deref() == Some(TYPE_SECONDARY),
            catalogs,
        }
    }
}

/// Removes the zone from the servers, then settles its DNSRecords.
/// Returning Ok releases the zone's finalizer.
pub async fn cleanup(zone: &Arc<BindZone>, ctx: &ZoneContext) -> Result<Action, Error> {
    let records = records_of(ctx, zone);
    // A duplicate that never applied anything leaves the zone to its owner.
    let owned_by_other = Applied::of(zone).type_.is_none() && read::zone_shared(ctx, zone);
    // The cluster's catalog zone is the operator's, never a BindZone's.
    let reserved = cluster_of(ctx, zone).is_some_and(|c| read::is_catalog_zone(zone, &c));
    if owned_by_other || reserved {
        tracing::info!(zone = %zone.spec.zone_name, "zone served by another BindZone or the catalog; not removing it");
    } else if let Some(cluster) = cluster_of(ctx, zone)
        && cluster.external().is_some()
    {
        super::external::remove(ctx, zone, &cluster).await?;
    } else if let Some(cluster) = cluster_of(ctx, zone) {
        match zone_placement(zone, &cluster) {
            Ok(spec) => {
                let removal = Removal::plan(&spec, &Applied::of(zone));
                remove(ctx, zone, &cluster, &removal).await?;
            }
            // Never placed anywhere under a name that does not validate.
            Err(e) => tracing::info!(error = %e, "zone name does not validate; nothing to remove"),
        }
    }
    settle_orphans(ctx, zone, &records).await?;
    ctx.state
        .forget(&(zone.namespace().unwrap_or_default(), zone.name_any()));
    if let Some(uid) = &zone.metadata.uid {
        ctx.state.statuses.memo.forget(uid);
        ctx.state.served.forget_zone(uid, None);
    }
    Ok(Action::await_change())
}

/// Carries out a removal on the cluster's pods.
async fn remove(
    ctx: &ZoneContext,
    zone: &BindZone,
    cluster: &BindCluster,
    removal: &Removal,
) -> Result<(), Error> {
    let zname = &removal.zone;
    let pods = cluster_pods(ctx, cluster);
    let blocked = |message: String| Error::Blocked {
        zone: zname.to_string(),
        reason: crate::api::REASON_PRIMARY_NOT_READY,
        message,
    };
    let server = |source: ServerError| Error::Server {
        zone: zname.to_string(),
        source,
    };

    // A secondary zone lives in every pod's data directory: a pod that
    // is down now would serve it again when it comes back. Wait for it
    // (before touching anything), as for a primary that is down.
    // Pods that hold the secondary zone (a zone that was both keeps the
    // primary's copy for the primary path below).
    let holds_secondary = |ordinal| !(removal.primary && ordinal == 0);
    if removal.secondary
        && let Some(down) = pods.iter().find(|p| holds_secondary(p.ordinal) && !p.ready)
    {
        return Err(Error::Blocked {
            zone: zname.to_string(),
            reason: crate::api::REASON_PODS_NOT_READY,
            message: format!(
                "pod {} is not Ready; the zone would survive on it",
                down.pod.name
            ),
        });
    }

    if removal.primary {
        let Some(primary) = pods.iter().find(|p| p.ordinal == 0 && p.ready) else {
            return Err(blocked(format!(
                "the primary of BindCluster {} is not Ready",
                cluster.name_any()
            )));
        };
        let t = ctx.target(&primary.pod);
        // Leave the catalog first so the secondaries drop the zone.
        match keys::resolve(ctx, cluster, &[]).await {
            Ok(k) => {
                for (cat, view) in &removal.catalogs {
                    catalog::leave(&t, cat, zname, k.transfer_for(view.as_ref()))
                        .await
                        .map_err(server)?;
                }
            }
            Err(e) => tracing::warn!(
                zone = %zname,
                error = %e,
                "cannot sign the catalog update; deleting the zone without leaving its catalog"
            ),
        }
        for v in &removal.views {
            t.delete_primary(zname, v.as_ref()).await.map_err(server)?;
        }
    }
    if removal.secondary {
        for p in pods.iter().filter(|p| holds_secondary(p.ordinal)) {
            let t = ctx.target(&p.pod);
            for v in &removal.views {
                t.delete(zname, v.as_ref(), &zone_file(zname, v.as_ref()))
                    .await
                    .map_err(server)?;
            }
        }
    }
    ctx.state
        .cluster(&(zone.namespace().unwrap_or_default(), cluster.name_any()))
        .invalidate_survey();
    tracing::info!(zone = %zname, "deleted zone");
    Ok(())
}

/// The zone is gone from the servers: deleted DNSRecords are released,
/// the others wait for a zone of that name.
async fn settle_orphans(
    ctx: &ZoneContext,
    zone: &BindZone,
    records: &[Arc<DNSRecord>],
) -> Result<(), Error> {
    let managed = records.iter().filter(|r| has_record_finalizer(r));
    let (deleting, live): (Vec<_>, Vec<_>) =
        managed.partition(|r| r.metadata.deletion_timestamp.is_some());
    release_record_reports(ctx, deleting.into_iter().cloned().collect()).await?;
    let reports = live
        .into_iter()
        .map(|r| {
            (
                r.clone(),
                RecordReport::Pending {
                    reason: crate::api::REASON_ZONE_NOT_FOUND,
                    message: format!("BindZone {} is being deleted", zone.name_any()),
                },
            )
        })
        .collect();
    // Through the status memo, so a later report of a zone of that name
    // is written even when it equals the one before this (a Ready that
    // was ours, then this Pending, then Ready again).
    write_record_reports_final(ctx, reports).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone() -> ZoneName {
        ZoneName::parse("example.com").unwrap()
    }

    fn view(v: &str) -> Option<ViewName> {
        Some(ViewName::parse(v).unwrap())
    }

    #[test]
    fn a_never_applied_zone_is_removed_where_its_spec_places_it() {
        let cat = ZoneName::parse("catalog.internal").unwrap();
        let spec = ZonePlacement {
            zone: zone(),
            view: None,
            type_: ZoneType::Primary,
            catalog: Some(cat.clone()),
        };
        let r = Removal::plan(&spec, &Applied::default());
        assert_eq!(r.views, vec![None]);
        assert!(r.primary && !r.secondary);
        assert_eq!(r.catalogs, vec![(cat, None)]);
    }

    #[test]
    fn a_moved_zone_is_removed_from_its_old_view_catalog_and_type_too() {
        let old_cat = ZoneName::parse("catalog-old.internal").unwrap();
        let spec = ZonePlacement {
            zone: zone(),
            view: view("external"),
            type_: ZoneType::Secondary,
            catalog: None,
        };
        let applied = Applied {
            type_: Some(TYPE_PRIMARY.into()),
            view: Some("internal".into()),
            catalog: Some(old_cat.fqdn()),
            ..Default::default()
        };
        let r = Removal::plan(&spec, &applied);
        assert_eq!(r.views, vec![view("external"), view("internal")]);
        assert!(r.primary && r.secondary);
        assert_eq!(r.catalogs, vec![(old_cat, view("internal"))]);
    }
}
