//! Deleting a BindZone: a primary zone leaves its catalog first (so the
//! secondaries drop it), then is deleted on the primary with its file and
//! journal (`delzone -clean`, then `rm`), so a later zone of the same name
//! starts clean; a secondary zone is deleted on every pod. The zone's
//! DNSRecords are settled: deleted ones released, the others told the zone
//! is gone. With no cluster left there is nothing to remove on any server.
//!
//! Touches BIND pods (exec) and the cluster (record statuses/finalizers).
//! A primary that is down blocks the delete (retried with backoff), and so
//! does any pod that is down for a secondary zone: a zone left behind
//! would come back to life on the next start.

use std::sync::Arc;

use kube::ResourceExt as _;
use kube::runtime::controller::Action;

use crate::api::{BindZone, DNSRecord, ZoneType};
use crate::bind::zone::{catalog_zone_for, zone_file};
use crate::bind::{ViewName, ZoneName};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::keys;
use crate::controller::zonesync::plan::has_record_finalizer;
use crate::controller::zonesync::server::ServerError;
use crate::controller::zonesync::survey::cluster_pods;
use crate::controller::zonesync::writes::{RecordReport, release_records, write_record_statuses};

use super::applied::Applied;
use super::catalog;
use super::primary::TYPE_PRIMARY;
use super::read::{cluster_of, records_of};
use super::secondary::TYPE_SECONDARY;
use super::{Error, read};

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
    } else if let (Some(cluster), Ok(zname)) =
        (cluster_of(ctx, zone), ZoneName::parse(&zone.spec.zone_name))
    {
        let pods = cluster_pods(ctx, &cluster);
        let applied = Applied::of(zone);
        let spec_view = zone
            .spec
            .view
            .as_deref()
            .and_then(|v| ViewName::parse(v).ok());
        let old_view = applied
            .view
            .as_deref()
            .and_then(|v| ViewName::parse(v).ok());
        let mut views = vec![spec_view.clone()];
        if old_view != spec_view && applied.type_.is_some() {
            views.push(old_view.clone());
        }
        let was_primary =
            zone.spec.type_ == ZoneType::Primary || applied.type_.as_deref() == Some(TYPE_PRIMARY);
        let was_secondary = zone.spec.type_ == ZoneType::Secondary
            || applied.type_.as_deref() == Some(TYPE_SECONDARY);
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
        let holds_secondary = |ordinal| !(was_primary && ordinal == 0);
        if was_secondary
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

        if was_primary {
            let Some(primary) = pods.iter().find(|p| p.ordinal == 0 && p.ready) else {
                return Err(blocked(format!(
                    "the primary of BindCluster {} is not Ready",
                    cluster.name_any()
                )));
            };
            let t = ctx.target(&primary.pod);
            // Leave the catalog first so the secondaries drop the zone.
            match keys::resolve(ctx, &cluster, &[]).await {
                Ok(k) => {
                    // Each catalog with its view: in a view, only that
                    // view's key reaches its catalog.
                    let mut catalogs: Vec<(ZoneName, Option<ViewName>)> = applied
                        .catalog
                        .iter()
                        .filter_map(|c| ZoneName::parse(c).ok())
                        .map(|c| (c, old_view.clone()))
                        .collect();
                    if zone.spec.catalog
                        && let Ok(base) = ZoneName::parse(&cluster.catalog_zone_name())
                    {
                        catalogs.extend(
                            catalog_zone_for(&base, spec_view.as_ref())
                                .ok()
                                .map(|c| (c, spec_view.clone())),
                        );
                    }
                    catalogs.sort();
                    catalogs.dedup();
                    for (cat, view) in catalogs {
                        catalog::leave(&t, &cat, &zname, k.transfer_for(view.as_ref()))
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
            for v in &views {
                t.delete(&zname, v.as_ref(), &zone_file(&zname, v.as_ref()))
                    .await
                    .map_err(server)?;
            }
        }
        if was_secondary {
            for p in pods.iter().filter(|p| holds_secondary(p.ordinal)) {
                let t = ctx.target(&p.pod);
                for v in &views {
                    t.delete(&zname, v.as_ref(), &zone_file(&zname, v.as_ref()))
                        .await
                        .map_err(server)?;
                }
            }
        }
        ctx.state
            .cluster(&(zone.namespace().unwrap_or_default(), cluster.name_any()))
            .invalidate_survey();
        tracing::info!(zone = %zname, "deleted zone");
    }
    settle_orphans(ctx, zone, &records).await?;
    ctx.state
        .forget(&(zone.namespace().unwrap_or_default(), zone.name_any()));
    Ok(Action::await_change())
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
    release_records(&ctx.base.client, deleting.into_iter().cloned().collect()).await?;
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
    write_record_statuses(&ctx.base, reports).await?;
    Ok(())
}
