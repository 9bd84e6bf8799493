//! Converges a primary zone on the cluster's primary pod: the zone exists
//! (file written, then `rndc addzone`, on first sight or after the primary
//! lost it), its clause is current (`modzone`), it is a member of its
//! catalog (the catalog zone itself is created here too, once per cluster
//! and view), and its owned RRsets match the plan — all pending changes in
//! one nsupdate run.
//!
//! How the primary's contents are known without trusting memory: the SOA
//! serial is read first (a fresh `dig` when the plan changed; the cluster's
//! shared survey on periodic checks); the remembered snapshot is used only
//! when its serial still matches, else the zone is transferred (AXFR).
//!
//! Touches BIND pods (exec) only; statuses are written by the caller.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kube::ResourceExt as _;

use crate::api::{BindZone, DNSRecord};
use crate::bind::nsupdate::UpdateBatch;
use crate::bind::zone::{
    ZoneSkeleton, catalog_add_member, catalog_primary_zone, catalog_remove_member,
    catalog_skeleton, catalog_zone_for,
};
use crate::bind::{TsigKey, ViewName, ZoneName};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::diff::{Served, diff};
use crate::controller::zonesync::plan::{Desired, ZoneInputs, plan};
use crate::controller::zonesync::server::{Created, ServerError, Target};
use crate::controller::zonesync::state::{ClusterMemory, ObjKey, Snapshot};
use crate::controller::zonesync::survey::{PodInfo, survey};
use crate::render::validate::PrimaryZoneConfig;

use super::applied::{Applied, clause_hash};
use super::read::Inputs;

/// The zone type string in the applied annotation.
pub const TYPE_PRIMARY: &str = "primary";

/// A successful convergence.
#[derive(Debug, Clone)]
pub struct Converged {
    /// What the primary holds now.
    pub served: Served,
    /// Whether anything was written (zone, catalog or records).
    pub wrote: bool,
    /// When the next periodic check is due.
    pub next_check: Duration,
}

/// The outcome of one convergence.
pub struct Outcome {
    pub desired: Desired,
    pub result: Result<Converged, ServerError>,
    /// The annotation to record when `result` is Ok.
    pub applied: Applied,
}

fn now_secs() -> u32 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
        .unwrap_or_default()
}

/// A starting serial for a (re)created zone: the clock, but never at or
/// below a serial the cluster is known to have served (updates move the
/// serial past the clock; secondaries ignore a zone whose serial went back).
fn start_serial(known: impl IntoIterator<Item = u32>) -> u32 {
    known
        .into_iter()
        .map(|s| s.wrapping_add(1))
        .fold(now_secs(), u32::max)
}

/// Serials this process has seen for `zone` on any pod of the cluster.
fn known_serials(memory: &ClusterMemory, zone: &ZoneName, last: Option<u32>) -> Vec<u32> {
    let mut v: Vec<u32> = memory
        .last_survey()
        .map(|s| {
            s.pods
                .values()
                .filter_map(|m| m.get(zone).copied())
                .collect()
        })
        .unwrap_or_default();
    v.extend(last);
    v
}

/// Where a zone lives and which catalog it joins.
struct Placement<'a> {
    zone: &'a ZoneName,
    view: Option<&'a ViewName>,
    catalog: Option<&'a ZoneName>,
}

/// Serials of the zone and, if any, its catalog on the primary: from the
/// survey on a periodic check, else one fresh dig (zonestatus in a view).
async fn probe(
    ctx: &ZoneContext,
    inputs: &Inputs,
    target: &Target<'_>,
    memory: &ClusterMemory,
    periodic: bool,
    at: &Placement<'_>,
) -> Result<(Option<u32>, Option<bool>), ServerError> {
    let (zone, view, catalog) = (at.zone, at.view, at.catalog);
    if periodic && view.is_none() {
        let s = survey(ctx, &inputs.cluster, &inputs.pods, memory, zone).await;
        if let Some(served) = s.pods.get(&target.pod.name) {
            let cat = catalog.map(|c| s.asked.contains(c).then(|| served.contains_key(c)));
            if cat.is_none() || cat.is_some_and(|c| c.is_some()) {
                return Ok((served.get(zone).copied(), cat.flatten()));
            }
        }
    }
    match view {
        None => {
            let mut ask = vec![zone.clone()];
            ask.extend(catalog.cloned());
            let serials = target.serials(&ask).await?;
            Ok((
                serials.get(zone).copied(),
                catalog.map(|c| serials.contains_key(c)),
            ))
        }
        Some(_) => {
            let z = target.serial_of(zone, view).await?;
            let c = match catalog {
                Some(c) => Some(target.serial_of(c, view).await?.is_some()),
                None => None,
            };
            Ok((z, c))
        }
    }
}

/// Makes sure the catalog zone exists on the primary; returns the catalog
/// epoch members must have joined at.
async fn ensure_catalog(
    memory: &ClusterMemory,
    target: &Target<'_>,
    catalog: &ZoneName,
    view: Option<&ViewName>,
    transfer: &TsigKey,
    present: Option<bool>,
) -> Result<u64, ServerError> {
    if present == Some(true) {
        return Ok(memory.catalog_epoch());
    }
    let _guard = memory.catalog_lock.lock().await;
    // Another zone of the cluster may have created it while we waited.
    if target.serial_of(catalog, view).await?.is_some() {
        return Ok(memory.catalog_epoch());
    }
    let zone = catalog_primary_zone(catalog, view, &transfer.name);
    let serial = start_serial(known_serials(memory, catalog, None));
    match target
        .create_primary(&zone, &catalog_skeleton(catalog, serial).render())
        .await?
    {
        Created::New => {
            memory.invalidate_survey();
            tracing::info!(pod = %target.pod, catalog = %catalog, "created catalog zone");
            Ok(memory.bump_catalog_epoch())
        }
        Created::Existing => Ok(memory.catalog_epoch()),
    }
}

/// One catalog change (join or leave), signed with the transfer key.
async fn catalog_update(
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
    let batch = UpdateBatch {
        zone: catalog.clone(),
        changes: vec![change],
        apex_ns: None,
    };
    target.update(&batch, transfer).await.map(|_| ())
}

/// Removes the zone from where the annotation says it was applied before
/// (another view, or as a secondary zone on every pod).
async fn undo_old_placement(
    ctx: &ZoneContext,
    inputs: &Inputs,
    target: &Target<'_>,
    zone: &ZoneName,
    old: &Applied,
) -> Result<(), ServerError> {
    let old_view = old.view.as_deref().and_then(|v| ViewName::parse(v).ok());
    let file = crate::bind::zone::zone_file(zone, old_view.as_ref());
    if old.type_.as_deref() == Some(TYPE_PRIMARY) {
        if let Some(cat) = old.catalog.as_deref().and_then(|c| ZoneName::parse(c).ok()) {
            leave_catalog(target, &cat, zone, &inputs.keys.transfer).await?;
        }
        target.delete(zone, old_view.as_ref(), &file).await
    } else {
        for p in inputs.pods.iter().filter(|p| p.ready) {
            Target::new(ctx.base.executor.as_ref(), &p.pod)
                .delete(zone, old_view.as_ref(), &file)
                .await?;
        }
        Ok(())
    }
}

/// Leaves a catalog; a catalog that is gone counts as left.
pub async fn leave_catalog(
    target: &Target<'_>,
    catalog: &ZoneName,
    zone: &ZoneName,
    transfer: &TsigKey,
) -> Result<(), ServerError> {
    match catalog_update(target, catalog, zone, false, transfer).await {
        Err(e) if e.zone_missing() => Ok(()),
        other => other,
    }
}

/// Plans and converges one primary zone.
pub async fn converge(
    ctx: &ZoneContext,
    zone: &BindZone,
    inputs: &Inputs,
    primary: &PodInfo,
    cfg: &PrimaryZoneConfig,
    records: &[Arc<DNSRecord>],
    applied: &Applied,
) -> Outcome {
    let zname = &cfg.clause.zone;
    let view = cfg.clause.view.as_ref();
    let catalog_base = ZoneName::parse(&inputs.cluster.catalog_zone_name());
    let catalog = match (cfg.catalog, catalog_base) {
        (true, Ok(base)) => catalog_zone_for(&base, view).ok(),
        _ => None,
    };
    let object_name = zone.name_any();
    let desired = plan(
        &ZoneInputs {
            zone: zname,
            object_name: &object_name,
            created: zone.metadata.creation_timestamp.as_ref(),
            default_ttl: cfg.default_ttl,
            nameservers: &cfg.nameservers,
            soa_mname: &cfg.soa.mname,
            inline: &zone.spec.records,
            applied_inline: &applied.inline_keys(),
        },
        records,
    );
    let clause = cfg.clause.clause();
    let mut want_applied = Applied {
        type_: Some(TYPE_PRIMARY.into()),
        view: view.map(|v| v.as_str().to_string()),
        clause: Some(clause_hash(&clause)),
        catalog: catalog.as_ref().map(ZoneName::fqdn),
        inline: Default::default(),
    };
    want_applied.set_inline(&desired.inline_owned);

    let zkey: ObjKey = (zone.namespace().unwrap_or_default(), object_name);
    let memory = ctx.state.cluster(&inputs.cluster_key);
    let snap = ctx.state.snapshot(&zkey);
    let fingerprint = desired.fingerprint();
    let epoch = memory.catalog_epoch();
    let member_current = catalog.is_none() || ctx.state.member_epoch(&zkey) >= epoch;
    let settled = applied == &want_applied && member_current;
    // A snapshot taken before the primary restarted says nothing about it.
    // (Its serial still bounds a re-created zone's serial from below.)
    let last_serial = snap.as_ref().map(|s| s.served.serial);
    let snap = snap.filter(|s| s.primary == primary.identity);
    let same_plan = snap
        .as_ref()
        .is_some_and(|s| s.applied == Some(fingerprint));
    let interval = ctx.settings.verify_interval;

    // Nothing changed since the last verified write: no exec at all.
    if let Some(s) = &snap {
        let age = s.verified_at.elapsed();
        if settled && same_plan && age < interval {
            return Outcome {
                desired,
                result: Ok(Converged {
                    served: s.served.clone(),
                    wrote: false,
                    next_check: interval - age,
                }),
                applied: want_applied,
            };
        }
    }

    let target = Target::new(ctx.base.executor.as_ref(), &primary.pod);
    let update_key = zone
        .spec
        .update_key_ref
        .as_deref()
        .and_then(|r| inputs.keys.by_object(r))
        .expect("zone validation requires a loaded update key");
    let transfer = &inputs.keys.transfer;
    let result = async {
        let moved = applied.type_.is_some()
            && (applied.type_.as_deref() != Some(TYPE_PRIMARY)
                || applied.view != want_applied.view);
        if moved {
            undo_old_placement(ctx, inputs, &target, zname, applied).await?;
        }
        let periodic = settled && same_plan && !moved;
        // Only the plan changed and the snapshot is fresh: write on it.
        let trusted = snap
            .as_ref()
            .filter(|s| settled && !moved && s.verified_at.elapsed() < ctx.settings.snapshot_trust);
        let (serial, catalog_present) = match trusted {
            Some(s) if !periodic => (Some(s.served.serial), catalog.as_ref().map(|_| true)),
            _ => {
                probe(
                    ctx,
                    inputs,
                    &target,
                    &memory,
                    periodic,
                    &Placement {
                        zone: zname,
                        view,
                        catalog: catalog.as_ref(),
                    },
                )
                .await?
            }
        };

        let mut wrote = false;
        let mut created = false;
        let served = match serial {
            None => {
                let skeleton = ZoneSkeleton {
                    zone: zname.clone(),
                    default_ttl: cfg.default_ttl,
                    soa: cfg.soa.clone(),
                    serial: start_serial(known_serials(&memory, zname, last_serial)),
                    nameservers: desired.apex_ns.names.clone(),
                    records: Vec::new(),
                };
                match target
                    .create_primary(&cfg.clause, &skeleton.render())
                    .await?
                {
                    Created::New => {
                        tracing::info!(pod = %target.pod, zone = %zname, "created zone");
                        memory.invalidate_survey();
                        created = true;
                        wrote = true;
                        Served::from_skeleton(
                            zname,
                            skeleton.serial,
                            cfg.default_ttl,
                            &skeleton.nameservers,
                        )
                    }
                    Created::Existing => target.transfer(zname, update_key).await?,
                }
            }
            Some(s) => match &snap {
                Some(sn) if sn.served.serial == s => sn.served.clone(),
                _ => target.transfer(zname, update_key).await?,
            },
        };
        if !created && applied.clause != want_applied.clause {
            target.modzone(zname, view, &clause).await?;
            wrote = true;
        }

        let member_epoch = ctx.state.member_epoch(&zkey);
        if let Some(cat) = &catalog {
            let epoch =
                ensure_catalog(&memory, &target, cat, view, transfer, catalog_present).await?;
            let joined =
                !created && applied.catalog == want_applied.catalog && member_epoch >= epoch;
            if !joined {
                catalog_update(&target, cat, zname, true, transfer).await?;
                ctx.state.set_member_epoch(&zkey, epoch);
                wrote = true;
            }
        }
        if let Some(old) = applied.catalog.as_deref()
            && want_applied.catalog.as_deref() != Some(old)
            && !moved
            && let Ok(old) = ZoneName::parse(old)
        {
            leave_catalog(&target, &old, zname, transfer).await?;
            wrote = true;
        }

        let batch = diff(zname, &desired, &served);
        let mut served = served;
        if let Some(serial) = target
            .update_and_read_serial(&batch, update_key, view)
            .await?
        {
            wrote = true;
            served.apply(&batch);
            served.serial = serial.ok_or_else(|| ServerError::Transfer {
                zone: zname.to_string(),
                pod: target.pod.to_string(),
                reason: "the zone vanished right after the update".into(),
            })?;
        }
        memory.note_serial(&target.pod.name, zname, Some(served.serial));
        Ok((served, wrote))
    }
    .await;

    let result = match result {
        Ok((served, wrote)) => {
            ctx.state.set_snapshot(
                &zkey,
                Some(Snapshot {
                    served: served.clone(),
                    applied: Some(fingerprint),
                    verified_at: Instant::now(),
                    primary: primary.identity,
                }),
            );
            Ok(Converged {
                served,
                wrote,
                next_check: interval,
            })
        }
        Err(e) => {
            // Whatever happened, what the primary holds is unknown now.
            ctx.state.set_snapshot(&zkey, None);
            memory.invalidate_survey();
            Err(e)
        }
    };
    Outcome {
        desired,
        result,
        applied: want_applied,
    }
}

/// Pod name -> serial of `zone` from the cluster's last survey, with the
/// primary's entry replaced by what this process just saw.
pub fn servers(
    memory: &ClusterMemory,
    zone: &ZoneName,
    primary: &str,
    primary_serial: u32,
) -> BTreeMap<String, u32> {
    let mut out: BTreeMap<String, u32> = memory
        .last_survey()
        .filter(|s| s.asked.contains(zone))
        .map(|s| {
            s.pods
                .iter()
                .filter_map(|(pod, m)| m.get(zone).map(|v| (pod.clone(), *v)))
                .collect()
        })
        .unwrap_or_default();
    out.insert(primary.to_string(), primary_serial);
    out
}
