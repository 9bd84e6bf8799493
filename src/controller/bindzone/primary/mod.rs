//! Converges a primary zone on the cluster's primary pod: the zone exists
//! (file written, then `rndc addzone`, on first sight or after the primary
//! lost it), its clause is current (`modzone`), it is a member of its
//! catalog ([`super::catalog`]), and its owned RRsets match the plan — all
//! pending changes in one nsupdate run.
//!
//! How the primary's contents are known without trusting memory: the SOA
//! serial is read first (a fresh `dig` when the plan changed; the cluster's
//! shared survey on periodic checks; nothing when a snapshot a few seconds
//! old is on hand), the remembered snapshot is used only when its serial
//! still matches and the primary pod was not restarted since, else the
//! zone is transferred (AXFR).
//!
//! Right after a write, the recheck takes a fresh survey while a Ready
//! secondary still shows the old serial (`catch_up`), so `status.servers`
//! catches up then and a converged cluster's periodic check finds nothing
//! to write.
//!
//! A periodic check that wrote nothing repeats the NOTIFY when a Ready
//! secondary lags (it missed one): seen in the survey outside views, asked
//! per secondary with `rndc zonestatus` in a view (`renotify_view`).
//!
//! Touches BIND pods (exec) only; statuses are written by the caller.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt as _;

use crate::api::{BindZone, DNSRecord};
use crate::bind::zone::{ZoneSkeleton, catalog_zone_for, zone_file};
use crate::bind::{RecordType, TsigKey, ViewName, ZoneName};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::diff::{Served, diff};
use crate::controller::zonesync::plan::{Desired, ZoneInputs, plan};
use crate::controller::zonesync::server::{Created, ServerError, Target};
use crate::controller::zonesync::state::{ClusterMemory, ObjKey, Snapshot};
use crate::controller::zonesync::survey::{PodInfo, survey};
use crate::render::validate::PrimaryZoneConfig;

use super::applied::{Applied, clause_hash};
use super::catalog;
use super::read::Inputs;
use super::serials::{
    Placement, behind, of, peer_serials, probe, secondaries_lag, start_serial, view_secondaries,
};

/// The zone type string in the applied annotation.
pub const TYPE_PRIMARY: &str = "primary";
use crate::api::REASON_MISSING_GLUE;

/// A successful convergence.
#[derive(Debug, Clone)]
pub struct Converged {
    /// What the primary holds now.
    pub served: Served,
    /// Whether anything was written (zone, catalog or records).
    pub wrote: bool,
    /// When the next periodic check is due.
    pub next_check: Duration,
    /// Whether the primary was asked this time (false: a recent snapshot
    /// answered, no exec ran).
    pub verified: bool,
}

/// Why a convergence did not happen.
#[derive(Debug)]
pub enum Failure {
    /// A server operation failed (retried with backoff).
    Server(ServerError),
    /// The plan cannot be written as it is (waits for a change).
    Invalid {
        reason: &'static str,
        message: String,
    },
}

/// The outcome of one convergence.
pub struct Outcome {
    pub desired: Desired,
    pub result: Result<Converged, Failure>,
    /// The annotation to record when `result` is Ok.
    pub applied: Applied,
}

/// Everything one write pass needs.
struct Job<'a> {
    ctx: &'a ZoneContext,
    inputs: &'a Inputs,
    cfg: &'a PrimaryZoneConfig,
    zkey: &'a ObjKey,
    memory: &'a ClusterMemory,
    target: Target<'a>,
    desired: &'a Desired,
    applied: &'a Applied,
    want: &'a Applied,
    catalog: Option<&'a ZoneName>,
    /// Signs the operator's updates and AXFR reads of the zone.
    update_key: &'a TsigKey,
    /// The snapshot, if still valid for this primary.
    snap: Option<&'a Snapshot>,
    /// The plan and placement are what the snapshot was written for.
    settled: bool,
    same_plan: bool,
    /// The last serial this process saw, even from before a restart.
    last_serial: Option<u32>,
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
    let catalog = match ZoneName::parse(&inputs.cluster.catalog_zone_name()) {
        Ok(base) if cfg.catalog => catalog_zone_for(&base, view).ok(),
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
            inline: &cfg.records,
            applied_inline: &applied.inline_keys(),
        },
        &crate::controller::zonesync::plan::valid_records(records, zname, cfg.default_ttl),
    );
    let mut want = Applied {
        type_: Some(TYPE_PRIMARY.into()),
        view: view.map(|v| v.as_str().to_string()),
        clause: Some(clause_hash(&cfg.clause.clause())),
        catalog: catalog.as_ref().map(ZoneName::fqdn),
        inline: Default::default(),
    };
    want.set_inline(&desired.inline_owned);
    if !desired.missing_glue.is_empty() {
        let names: Vec<String> = desired.missing_glue.iter().map(|n| n.fqdn()).collect();
        return Outcome {
            result: Err(Failure::Invalid {
                reason: REASON_MISSING_GLUE,
                message: format!(
                    "nameserver {} is inside the zone but has no A or AAAA record; add one (spec.records or a DNSRecord)",
                    names.join(", ")
                ),
            }),
            desired,
            applied: want,
        };
    }

    let zkey: ObjKey = (zone.namespace().unwrap_or_default(), object_name);
    let memory = ctx.state.cluster(&inputs.cluster_key);
    let snap = ctx.state.snapshot(&zkey);
    // The plan, and the SOA fields it is written under.
    let fingerprint = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (desired.fingerprint(), format!("{:?}", cfg.soa)).hash(&mut h);
        h.finish()
    };
    let member_current =
        catalog.is_none() || ctx.state.member_epoch(&zkey) >= memory.catalog_epoch();
    let settled = applied == &want && member_current;
    // A snapshot taken before the primary restarted says nothing about it
    // (its serial still bounds a re-created zone's serial from below).
    let last_serial = snap.as_ref().map(|s| s.served.serial);
    let snap = snap.filter(|s| s.primary == primary.identity);
    let same_plan = snap
        .as_ref()
        .is_some_and(|s| s.applied == Some(fingerprint));
    let interval = ctx.settings.verify_interval;

    // Nothing changed since the last verified write: no exec on the
    // primary, only the secondaries' catch-up (see `catch_up`).
    if let Some(s) = &snap {
        let age = s.verified_at.elapsed();
        if settled && same_plan && age < interval {
            tracing::debug!(zone = %zname, age_ms = age.as_millis() as u64, "zone verified recently; nothing to do");
            let lagging = catch_up(ctx, inputs, &memory, cfg, &primary.pod.name, s).await;
            return Outcome {
                desired,
                result: Ok(Converged {
                    served: s.served.clone(),
                    wrote: false,
                    next_check: if lagging {
                        let recheck = ctx.settings.recheck_after_write;
                        recheck
                            .checked_sub(age)
                            .unwrap_or(recheck)
                            .min(interval - age)
                    } else {
                        interval - age
                    },
                    verified: false,
                }),
                applied: want,
            };
        }
    }

    let update_key = operator_key(zone, inputs, view);
    let job = Job {
        ctx,
        inputs,
        cfg,
        zkey: &zkey,
        memory: &memory,
        target: ctx.target(&primary.pod),
        desired: &desired,
        applied,
        want: &want,
        catalog: catalog.as_ref(),
        update_key,
        snap: snap.as_ref(),
        settled,
        same_plan,
        last_serial,
    };
    let result = match write(&job).await {
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
                verified: true,
            })
        }
        Err(e) => {
            // Whatever happened, what the primary holds is unknown now.
            ctx.state.set_snapshot(&zkey, None);
            memory.invalidate_survey();
            Err(Failure::Server(e))
        }
    };
    Outcome {
        desired,
        result,
        applied: want,
    }
}

/// The key the operator signs its updates and reads of the zone with. In
/// a view it is the view's key (the zone's update policy grants it): from
/// loopback, only a signature reaches the view.
pub fn operator_key<'a>(
    zone: &BindZone,
    inputs: &'a Inputs,
    view: Option<&ViewName>,
) -> &'a TsigKey {
    match view {
        Some(_) => inputs.keys.transfer_for(view),
        None => zone
            .spec
            .update_key_ref
            .as_deref()
            .and_then(|r| inputs.keys.by_object(r))
            .expect("zone validation requires a loaded update key"),
    }
}

/// The skeleton of a (re)created zone: SOA, apex NS and the glue of in-zone
/// nameservers (BIND will not load the zone without it), starting above
/// every serial the cluster may still hold.
fn skeleton(job: &Job<'_>, peers: &[(ZoneName, u32)]) -> ZoneSkeleton {
    let zname = &job.cfg.clause.zone;
    let mut known = of(peers, zname);
    known.extend(job.last_serial);
    let mut records = Vec::new();
    for ns in &job.desired.apex_ns.names {
        for t in [RecordType::A, RecordType::Aaaa] {
            if let Some(w) = job.desired.rrsets.get(&(ns.clone(), t)) {
                records.extend(w.values.iter().map(|v| (ns.clone(), t, w.ttl, v.clone())));
            }
        }
    }
    ZoneSkeleton {
        zone: zname.clone(),
        default_ttl: job.cfg.default_ttl,
        soa: job.cfg.soa.clone(),
        serial: start_serial(known),
        nameservers: job.desired.apex_ns.names.clone(),
        records,
    }
}

/// Removes the zone from where the annotation says it was applied before
/// (another view, or as a secondary zone on every pod).
async fn undo_old_placement(job: &Job<'_>) -> Result<(), ServerError> {
    let zone = &job.cfg.clause.zone;
    let old = job.applied;
    let old_view = old.view.as_deref().and_then(|v| ViewName::parse(v).ok());
    let file = zone_file(zone, old_view.as_ref());
    if old.type_.as_deref() == Some(TYPE_PRIMARY) {
        if let Some(cat) = old.catalog.as_deref().and_then(|c| ZoneName::parse(c).ok()) {
            let key = job.inputs.keys.transfer_for(old_view.as_ref());
            catalog::leave(&job.target, &cat, zone, key).await?;
        }
        job.target.delete(zone, old_view.as_ref(), &file).await
    } else {
        for p in job.inputs.pods.iter().filter(|p| p.ready) {
            job.ctx
                .target(&p.pod)
                .delete(zone, old_view.as_ref(), &file)
                .await?;
        }
        Ok(())
    }
}

/// One write pass: placement, zone, clause, catalog, RRsets. Returns what
/// the primary holds after it and whether anything was written.
async fn write(job: &Job<'_>) -> Result<(Served, bool), ServerError> {
    let (ctx, target) = (job.ctx, &job.target);
    let zname = &job.cfg.clause.zone;
    let view = job.cfg.clause.view.as_ref();
    let transfer = job.inputs.keys.transfer_for(view);
    let moved = job.applied.type_.is_some()
        && (job.applied.type_.as_deref() != Some(TYPE_PRIMARY)
            || job.applied.view != job.want.view);
    if moved {
        undo_old_placement(job).await?;
    }
    // Nothing new to write (or nothing remembered, after an operator
    // restart): the cluster's shared survey tells whether the zone is
    // there and at which serial.
    let periodic = job.settled && !moved && (job.same_plan || job.snap.is_none());
    // Only the plan changed and the snapshot is fresh: write on it.
    let trusted = job
        .snap
        .filter(|s| job.settled && !moved && s.verified_at.elapsed() < ctx.settings.snapshot_trust);
    let (serial, catalog_present, survey) = match trusted {
        Some(s) if !periodic => (Some(s.served.serial), job.catalog.map(|_| true), None),
        _ => {
            let at = Placement {
                zone: zname,
                view,
                catalog: job.catalog,
                newer_than: job.snap.map(|s| s.verified_at),
            };
            let p = probe(ctx, job.inputs, target, job.memory, periodic, &at).await?;
            (p.zone, p.catalog, p.survey)
        }
    };

    // Re-creating the zone or the catalog: start above what secondaries hold.
    let peers = if serial.is_none() || catalog_present == Some(false) {
        let mut ask = vec![zname.clone()];
        ask.extend(job.catalog.cloned());
        peer_serials(ctx, job.inputs, &ask, view).await
    } else {
        Vec::new()
    };

    let mut wrote = false;
    let mut created = false;
    let served = match serial {
        None => {
            let skel = skeleton(job, &peers);
            match target
                .create_primary(&job.cfg.clause, &skel.render())
                .await?
            {
                Created::New => {
                    tracing::info!(pod = %target.pod, zone = %zname, serial = skel.serial, "created zone");
                    job.memory.invalidate_survey();
                    created = true;
                    wrote = true;
                    Served::from_skeleton(&skel)
                }
                Created::Existing => target.transfer(zname, job.update_key).await?,
            }
        }
        Some(s) => match job.snap {
            Some(sn) if sn.served.serial == s => sn.served.clone(),
            _ => target.transfer(zname, job.update_key).await?,
        },
    };
    if !created && job.applied.clause != job.want.clause {
        target
            .modzone(zname, view, &job.cfg.clause.clause())
            .await?;
        wrote = true;
    }

    if let Some(cat) = job.catalog {
        let epoch = catalog::ensure(
            ctx,
            job.inputs,
            job.memory,
            target,
            cat,
            view,
            catalog_present,
        )
        .await?;
        let joined = !created
            && job.applied.catalog == job.want.catalog
            && ctx.state.member_epoch(job.zkey) >= epoch;
        if !joined {
            catalog::join(target, cat, zname, transfer).await?;
            ctx.state.set_member_epoch(job.zkey, epoch);
            wrote = true;
        }
    }
    if let Some(old) = job.applied.catalog.as_deref()
        && job.want.catalog.as_deref() != Some(old)
        && !moved
        && let Ok(old) = ZoneName::parse(old)
    {
        catalog::leave(target, &old, zname, transfer).await?;
        wrote = true;
    }

    let batch = diff(zname, job.desired, &served);
    let mut served = served;
    if let Some(serial) = target
        .update_and_read_serial(&batch, job.update_key, view)
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
    // spec.soa changed after the zone was made: names and timers follow.
    if served.soa_differs(zname.as_domain(), &job.cfg.soa) {
        let next = served.serial.wrapping_add(1);
        let ttl = job.cfg.default_ttl;
        let after = target
            .update_soa(zname, &job.cfg.soa, next, ttl, job.update_key, view)
            .await?
            .unwrap_or(next);
        served.serial = after;
        served.set_soa(zname.as_domain(), &job.cfg.soa, after, ttl);
        wrote = true;
    }
    job.memory
        .note_serial(&target.pod.name, zname, Some(served.serial));

    // A secondary behind the primary missed a NOTIFY (e.g. sent while the
    // primary's NOTIFY list was being restored after a restart): repeat it.
    match (&survey, view, job.catalog) {
        (Some(s), _, Some(cat))
            if !wrote && secondaries_lag(s, &target.pod.name, zname, served.serial) =>
        {
            tracing::info!(zone = %zname, "a secondary lags behind the primary; sending NOTIFY");
            target.notify(zname, view).await?;
            if let Some(cat_serial) = s.pods.get(&target.pod.name).and_then(|m| m.get(cat))
                && secondaries_lag(s, &target.pod.name, cat, *cat_serial)
            {
                target.notify(cat, view).await?;
            }
        }
        // In a view the survey has no answer: ask the view's secondaries.
        (None, Some(v), Some(cat)) if periodic && !wrote => {
            renotify_view(job, v, cat, served.serial).await?;
        }
        _ => {}
    }
    Ok((served, wrote))
}

/// The periodic check of a zone in `view` that wrote nothing: when a Ready
/// secondary's copy of the view lags the primary's `serial` (or lacks the
/// zone), repeat the NOTIFY, and the view catalog's when one lags there too
/// (as [`secondaries_lag`] does from the survey outside views).
///
/// Cost per view zone per check: one `rndc zonestatus` per Ready secondary
/// (none with a single replica); only when one lags, one `rndc notify` of
/// the zone, one zonestatus of the catalog on the primary and on each Ready
/// secondary, and at most one `rndc notify` of the catalog.
async fn renotify_view(
    job: &Job<'_>,
    view: &ViewName,
    catalog: &ZoneName,
    serial: u32,
) -> Result<(), ServerError> {
    let (ctx, inputs, target) = (job.ctx, job.inputs, &job.target);
    let zone = &job.cfg.clause.zone;
    let primary = &target.pod.name;
    if !behind(
        view_secondaries(ctx, inputs, primary, zone, view).await,
        serial,
    ) {
        return Ok(());
    }
    tracing::info!(zone = %zone, view = %view, "a secondary's view lags behind the primary; sending NOTIFY");
    target.notify(zone, Some(view)).await?;
    if let Some(cat_serial) = target.serial_of(catalog, Some(view)).await?
        && behind(
            view_secondaries(ctx, inputs, primary, catalog, view).await,
            cat_serial,
        )
    {
        target.notify(catalog, Some(view)).await?;
    }
    Ok(())
}

/// The recheck after a write: while `status.servers` (from the cluster's
/// last survey) shows a Ready secondary behind the primary's `snap`, and
/// the write is at least [`Settings::recheck_after_write`] old but younger
/// than the survey's lifetime, take a survey newer
/// than the write (shared by the cluster's zones; at most one dig per pod
/// per [`Settings::recheck_after_write`]) so the status catches up now,
/// right after the write, instead of at the next periodic check of a
/// converged cluster (an API write with nothing changed). Returns whether
/// a secondary still lags (look again at the recheck, or soon after it). Views are left to the
/// periodic check: the survey cannot answer for them.
///
/// [`Settings::recheck_after_write`]: crate::controller::zonesync::Settings::recheck_after_write
async fn catch_up(
    ctx: &ZoneContext,
    inputs: &Inputs,
    memory: &ClusterMemory,
    cfg: &PrimaryZoneConfig,
    primary: &str,
    snap: &Snapshot,
) -> bool {
    let zone = &cfg.clause.zone;
    let window = ctx
        .settings
        .survey_max_age
        .min(ctx.settings.verify_interval);
    let age = snap.verified_at.elapsed();
    if cfg.clause.view.is_some() || age >= window {
        return false;
    }
    let lags = || servers_lag(memory, inputs, zone, primary, snap.served.serial);
    if !lags() {
        return false;
    }
    // Record bursts wake the zone often right after its write: only the
    // recheck itself (or a later wake) looks at the secondaries.
    if age < ctx.settings.recheck_after_write {
        return true;
    }
    let recent = Instant::now()
        .checked_sub(ctx.settings.recheck_after_write)
        .map_or(snap.verified_at, |t| t.max(snap.verified_at));
    survey(
        ctx,
        &inputs.cluster,
        &inputs.pods,
        memory,
        zone,
        Some(recent),
    )
    .await;
    lags()
}

/// Whether [`servers`] would show a Ready secondary at another serial than
/// the primary's (or not at all).
fn servers_lag(
    memory: &ClusterMemory,
    inputs: &Inputs,
    zone: &ZoneName,
    primary: &str,
    serial: u32,
) -> bool {
    let shown = servers(memory, zone, primary, serial);
    inputs
        .pods
        .iter()
        .filter(|p| p.ready && p.pod.name != primary)
        .any(|p| shown.get(&p.pod.name) != Some(&serial))
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
