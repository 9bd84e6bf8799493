//! The read step: what the primary serves before anything is written —
//! the zone's and its catalog's serials (the remembered snapshot's when it
//! is fresh and only the plan changed; the cluster's shared survey on a
//! periodic check; else one fresh read), and, before a zone or catalog is
//! re-created, the serials the secondaries still hold (not for a zone
//! never applied: a first sync asks the secondaries nothing per zone).

use super::super::serials::{Placement, peer_serials, probe};
use super::{Job, Need, Seen, Step, StepError};

/// Reads the primary (and, when something must be re-created, the
/// secondaries) for this pass.
pub(super) async fn primary(job: &Job<'_>, need: Need<'_>) -> Result<Seen, StepError> {
    let (zname, view) = (job.zname(), job.view());
    let catalog = job.plan.catalog.as_ref();
    let (serial, catalog_present, survey) = match need {
        Need::Records(s) => (Some(s.served.serial), catalog.map(|_| true), None),
        _ => {
            let at = Placement {
                zone: zname,
                view,
                catalog,
                newer_than: job.snap.as_ref().map(|s| s.verified_at),
            };
            let periodic = matches!(need, Need::Check);
            let p = probe(job.ctx, job.inputs, &job.target, &job.memory, periodic, &at)
                .await
                .map_err(job.at(Step::Read))?;
            (p.zone, p.catalog, p.survey)
        }
    };
    // Re-creating the zone or the catalog: start above what secondaries
    // hold. A zone never applied (no annotation: a first sync) is not
    // re-created, and no secondary holds it as ours: a zone of that name
    // removed before left the catalog, and the secondaries dropped it.
    let mut ask = Vec::new();
    if serial.is_none() && job.applied.type_.is_some() {
        ask.push(zname.clone());
    }
    if catalog_present == Some(false) {
        ask.extend(catalog.cloned());
    }
    let peers = if ask.is_empty() {
        Vec::new()
    } else {
        peer_serials(job.ctx, job.inputs, &ask, view).await
    };
    Ok(Seen {
        serial,
        catalog: catalog_present,
        survey,
        peers,
    })
}
