//! The catalog step: the catalog zone exists on the primary, the zone is a
//! member of it (joined again when the zone was re-created or the catalog
//! was), and it has left a catalog it no longer belongs to.

use crate::bind::ZoneName;
use crate::controller::zonesync::server::ServerError;

use super::super::catalog;
use super::{Job, Need, Seen, Step, StepError, Written};

/// Makes sure the zone's catalog exists (run beside the zone step, so a
/// missing catalog is created in the same round as the zone); the epoch
/// members must have joined at (`None`: no catalog).
pub(super) async fn catalog(job: &Job<'_>, seen: &Seen) -> Result<Option<u64>, StepError> {
    let Some(cat) = &job.plan.catalog else {
        return Ok(None);
    };
    let peers = (seen.catalog == Some(false)).then_some(seen.peers.as_slice());
    catalog::ensure(
        job.ctx,
        job.inputs,
        &job.memory,
        &job.target,
        cat,
        job.view(),
        seen.catalog,
        peers,
    )
    .await
    .map(Some)
    .map_err(job.at(Step::Catalog))
}

/// Brings the zone's catalog membership current (`epoch`: from
/// [`catalog`]).
pub(super) async fn ensure(
    job: &Job<'_>,
    need: Need<'_>,
    epoch: Option<u64>,
    written: &mut Written,
) -> Result<(), StepError> {
    membership(job, need, epoch, written)
        .await
        .map_err(job.at(Step::Catalog))
}

async fn membership(
    job: &Job<'_>,
    need: Need<'_>,
    epoch: Option<u64>,
    written: &mut Written,
) -> Result<(), ServerError> {
    let (ctx, target) = (job.ctx, &job.target);
    let (zname, view) = (job.zname(), job.view());
    let transfer = job.inputs.keys.transfer_for(view);
    let (old, want) = (&job.applied.catalog, &job.plan.want.catalog);
    if let (Some(cat), Some(epoch)) = (&job.plan.catalog, epoch) {
        let joined = !written.created && old == want && ctx.state.member_epoch(&job.zkey) >= epoch;
        if written.joined {
            // Joined in its creation's round, after the catalog existed.
            ctx.state.set_member_epoch(&job.zkey, epoch);
        } else if !joined {
            catalog::join(target, cat, zname, transfer).await?;
            ctx.state.set_member_epoch(&job.zkey, epoch);
            written.wrote = true;
        }
    }
    // A move left the old catalog with the old placement.
    if let Some(old) = old.as_deref()
        && want.as_deref() != Some(old)
        && !matches!(need, Need::Move)
        && let Ok(old) = ZoneName::parse(old)
    {
        catalog::leave(target, &old, zname, transfer).await?;
        written.wrote = true;
    }
    Ok(())
}
