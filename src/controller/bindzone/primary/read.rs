//! The read step: what the primary serves before anything is written —
//! the zone's and its catalog's serials (the remembered snapshot's when it
//! is fresh and only the plan changed; the cluster's shared survey on a
//! periodic check; else one fresh read), and, before a zone or catalog is
//! re-created, the serials the secondaries still hold.

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
    // Re-creating the zone or the catalog: start above what secondaries hold.
    let peers = if serial.is_none() || catalog_present == Some(false) {
        let mut ask = vec![zname.clone()];
        ask.extend(catalog.cloned());
        peer_serials(job.ctx, job.inputs, &ask, view).await
    } else {
        Vec::new()
    };
    Ok(Seen {
        serial,
        catalog: catalog_present,
        survey,
        peers,
    })
}
