//! The zone step: the zone leaves where the annotation says it was applied
//! before (another view, or as a secondary zone on every pod), is created
//! when the primary lacks it (else read: the snapshot when its serial still
//! matches, an AXFR otherwise), and its clause is brought current (its
//! stanza in the primary's zone list; see `zonesync::server`).
//!
//! A zone is created with every RRset of its plan in its file (a new or
//! re-created zone holds nothing of others and retires nothing), so it
//! serves the plan from its first answer and the records step finds
//! nothing to send. Its bare skeleton (SOA, apex NS, glue) goes with it:
//! when named would not load the file (a record a file load refuses), the
//! batched creation falls back to the skeleton in the same run and the
//! records follow by UPDATE, where a bad one fails its own message.

use std::sync::Arc;

use crate::bind::zone::{ZoneSkeleton, zone_file};
use crate::bind::{RecordType, ViewName, ZoneName};
use crate::controller::zonesync::diff::Served;
use crate::controller::zonesync::server::{Created, ServerError};

use super::super::serials::{of, start_serial};
use super::super::{catalog, dnssec_keys};
use super::{Job, Seen, Step, StepError, TYPE_PRIMARY, Written};

/// Removes the zone from where the annotation says it was applied before.
pub(super) async fn leave_old_placement(job: &Job<'_>) -> Result<(), StepError> {
    remove_old(job).await.map_err(job.at(Step::Place))
}

async fn remove_old(job: &Job<'_>) -> Result<(), ServerError> {
    let zone = job.zname();
    let old = job.applied;
    let old_view = old.view.as_deref().and_then(|v| ViewName::parse(v).ok());
    let file = zone_file(zone, old_view.as_ref());
    if old.type_.as_deref() == Some(TYPE_PRIMARY) {
        if let Some(cat) = old.catalog.as_deref().and_then(|c| ZoneName::parse(c).ok()) {
            let key = job.inputs.keys.transfer_for(old_view.as_ref());
            catalog::leave(&job.target, &cat, zone, key).await?;
        }
        job.target.delete_primary(zone, old_view.as_ref()).await
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

/// Makes sure the primary serves the zone under its current clause;
/// returns what it holds.
pub(super) async fn ensure(job: &Job<'_>, seen: &Seen) -> Result<Written, StepError> {
    let (target, zname) = (&job.target, job.zname());
    let mut created = false;
    let mut wrote = false;
    let mut joined = false;
    let skel = skeleton(job, &seen.peers);
    let served = match seen.serial {
        None => {
            // A signed zone's kept keys go back first: named signs the
            // new zone with them, so its DS at the parent still matches.
            if let Some(files) = job.kept_keys {
                dnssec_keys::restore(target, zname, files)
                    .await
                    .map_err(job.at(Step::Zone))?;
            }
            let full = with_records(job, &skel);
            let (text, bare) = (full.render(), skel.render());
            let fallback = (full.records.len() > skel.records.len()).then_some(bare.as_str());
            let made = match &job.plan.catalog {
                // Its catalog join goes in the creation's round.
                Some(cat) => {
                    let transfer = job.inputs.keys.transfer_for(job.view());
                    let join = catalog::carried_join(cat, zname, transfer);
                    target
                        .create_primary_joining(&job.cfg.clause, &text, fallback, join)
                        .await
                }
                None => target
                    .create_primary(&job.cfg.clause, &text, fallback)
                    .await
                    .map(|c| (c, None)),
            };
            let (made, carried) = made.map_err(job.at(Step::Zone))?;
            match carried {
                Some(Ok(())) => joined = true,
                // The catalog step joins it again, after the catalog's own
                // creation (which may have come a round later).
                Some(Err(e)) => {
                    tracing::debug!(pod = %target.pod, zone = %zname, error = %e, "the join sent with the zone's creation failed; joining again");
                }
                None => {}
            }
            match made {
                Created::New => {
                    let records = full.records.len();
                    tracing::info!(pod = %target.pod, zone = %zname, serial = skel.serial, records, "created zone");
                    job.memory.invalidate_survey();
                    created = true;
                    wrote = true;
                    Served::from_skeleton(&full).into()
                }
                Created::Bare(why) => {
                    // The records follow by UPDATE, where a bad one fails
                    // its own message with the server's answer.
                    tracing::warn!(pod = %target.pod, zone = %zname, serial = skel.serial, why = %why.trim(), "named would not load the zone with its records; created it bare");
                    job.memory.invalidate_survey();
                    created = true;
                    wrote = true;
                    Served::from_skeleton(&skel).into()
                }
                Created::Existing => target
                    .transfer(zname, job.update_key())
                    .await
                    .map(Arc::new)
                    .map_err(job.at(Step::Read))?,
            }
        }
        Some(s) => match &job.snap {
            Some(sn) if sn.served.serial == s => sn.served.clone(),
            // A restarted operator: the zone is still at the serial its
            // status recorded for this very plan.
            None if verified_before(job, s) => {
                tracing::debug!(zone = %zname, serial = s, "zone still at the serial its status recorded for this plan; trusted without a transfer");
                Served::assumed(
                    zname,
                    &job.plan.desired,
                    &job.cfg.soa,
                    job.cfg.default_ttl,
                    s,
                )
                .into()
            }
            _ => target
                .transfer(zname, job.update_key())
                .await
                .map(Arc::new)
                .map_err(job.at(Step::Read))?,
        },
    };
    // Also moves a zone an older operator added by rndc into the list.
    if !created
        && target
            .relist_primary(&job.cfg.clause, &skel.render())
            .await
            .map_err(job.at(Step::Zone))?
    {
        wrote = true;
    }
    Ok(Written {
        served,
        created,
        joined,
        wrote,
        restored: Vec::new(),
    })
}

/// Whether the zone's status says the primary held this plan, whole, at
/// `serial` (Ready, `status.serial` and `status.appliedPlan`): any write
/// since, ours or another client's, moved the serial.
fn verified_before(job: &Job<'_>, serial: u32) -> bool {
    job.zone.status.as_ref().is_some_and(|st| {
        st.phase == Some(crate::api::Phase::Ready)
            && st.serial == Some(serial)
            && st.applied_plan.as_deref() == Some(super::plan_text(job.plan.fingerprint).as_str())
    })
}

/// The skeleton with every RRset of the plan: what a (re)created zone's
/// file holds, so it serves the plan from its first answer and no UPDATE
/// follows (a new zone holds no RRset of others, and nothing is retired
/// from it).
fn with_records(job: &Job<'_>, skel: &ZoneSkeleton) -> ZoneSkeleton {
    let mut full = skel.clone();
    let glue: std::collections::BTreeSet<_> = skel
        .records
        .iter()
        .map(|(n, t, _, _)| (n.clone(), *t))
        .collect();
    for ((name, rtype), w) in &job.plan.desired.rrsets {
        if glue.contains(&(name.clone(), *rtype)) {
            continue;
        }
        full.records.extend(
            w.values
                .iter()
                .map(|v| (name.clone(), *rtype, w.ttl, v.clone())),
        );
    }
    full
}

/// The skeleton of a (re)created zone: SOA, apex NS and the glue of in-zone
/// nameservers (BIND will not load the zone without it), starting above
/// every serial the cluster may still hold.
fn skeleton(job: &Job<'_>, peers: &[(ZoneName, u32)]) -> ZoneSkeleton {
    let zname = job.zname();
    let desired = &job.plan.desired;
    let mut known = of(peers, zname);
    known.extend(job.last_serial);
    let mut records = Vec::new();
    for ns in &desired.apex_ns.names {
        for t in [RecordType::A, RecordType::Aaaa] {
            if let Some(w) = desired.rrsets.get(&(ns.clone(), t)) {
                records.extend(w.values.iter().map(|v| (ns.clone(), t, w.ttl, v.clone())));
            }
        }
    }
    ZoneSkeleton {
        zone: zname.clone(),
        default_ttl: job.cfg.default_ttl,
        soa: job.cfg.soa.clone(),
        serial: start_serial(known),
        nameservers: desired.apex_ns.names.clone(),
        records,
    }
}
