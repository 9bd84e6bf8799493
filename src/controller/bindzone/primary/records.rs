//! The records step: the zone's owned RRsets brought to the plan in one
//! nsupdate run (the diff against what the primary holds), then the SOA's
//! names and timers when `spec.soa` changed after the zone was made.

use std::sync::Arc;

use crate::bind::nsupdate::RrsetChange;
use crate::controller::zonesync::diff::{Foreign, diff};
use crate::controller::zonesync::plan::RrKey;
use crate::controller::zonesync::server::ServerError;

use super::{Job, Step, StepError, Written};

/// Writes what the plan changes; `written` follows.
pub(super) async fn write(job: &Job<'_>, written: &mut Written) -> Result<(), StepError> {
    rrsets(job, written).await.map_err(job.at(Step::Records))
}

async fn rrsets(job: &Job<'_>, written: &mut Written) -> Result<(), ServerError> {
    let target = &job.target;
    let zname = job.zname();
    let (soa, key) = (&job.cfg.soa, job.update_key());
    // Something hidden by foreign data in what is remembered: read again,
    // the other client may have removed it since.
    let desired = &job.plan.desired;
    let foreign = Foreign::new(zname, &written.served, desired);
    if desired
        .rrsets
        .keys()
        .any(|k| !written.served.holds(k, desired) && foreign.blocker(k).is_some())
    {
        written.served = Arc::new(target.transfer(zname, key).await?);
    }
    // Drift: owned RRsets this process saw served as planned (its
    // snapshot of this primary) that the primary, at a serial another
    // client moved, no longer serves so. Rewritten below, and told.
    let drifted: Vec<RrKey> = match &job.snap {
        Some(sn) if sn.served.serial != written.served.serial && !written.created => desired
            .rrsets
            .keys()
            .filter(|k| sn.served.holds(k, desired) && !written.served.holds(k, desired))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    let batch = diff(zname, desired, &written.served);
    // Read back what an update adding data left: BIND answers NOERROR to
    // an add it drops (other data beside another client's CNAME), so only
    // the served zone says whether the records are there. The server's
    // differences since the zone as it was (one IXFR) say it without
    // moving the whole zone, and carry the serial the update produced: no
    // SOA query of its own. An update that only deletes is applied to what
    // is remembered, under the serial read back with it.
    let reads_back = batch
        .changes
        .iter()
        .any(|c| matches!(c, RrsetChange::Replace { .. }));
    let wrote = if reads_back {
        let sent = target.update(&batch, key).await?;
        if sent {
            written.served = Arc::new(target.read_back(zname, key, &written.served).await?);
        }
        sent
    } else {
        match target.update_and_read_serial(&batch, key).await? {
            None => false,
            Some(serial) => {
                let serial = serial.ok_or_else(|| ServerError::Transfer {
                    zone: zname.to_string(),
                    pod: target.pod.to_string(),
                    reason: "the zone vanished right after the update".into(),
                })?;
                let served = Arc::make_mut(&mut written.served);
                served.apply(&batch);
                served.serial = serial;
                true
            }
        }
    };
    // Copied (from the snapshot it shares) only when something changes.
    let needs_soa = written.served.soa_differs(zname.as_domain(), soa);
    if !wrote && !needs_soa {
        job.memory
            .note_serial(&target.pod.name, zname, Some(written.served.serial));
        return Ok(());
    }
    written.wrote |= wrote;
    let served = Arc::make_mut(&mut written.served);
    // Only what the primary now serves as planned counts as restored.
    written.restored = drifted
        .into_iter()
        .filter(|k| served.holds(k, desired))
        .collect();
    // spec.soa changed after the zone was made: names and timers follow.
    if served.soa_differs(zname.as_domain(), soa) {
        let next = served.serial.wrapping_add(1);
        let ttl = job.cfg.default_ttl;
        let after = target
            .update_soa(zname, soa, next, ttl, key)
            .await?
            .unwrap_or(next);
        served.serial = after;
        served.set_soa(zname.as_domain(), soa, after, ttl);
        written.wrote = true;
    }
    job.memory
        .note_serial(&target.pod.name, zname, Some(served.serial));
    Ok(())
}
