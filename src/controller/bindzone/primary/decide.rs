//! The decide step: what the primary needs ([`Need`]), from the applied
//! annotation, the catalog epoch and the remembered snapshot. Pure: no
//! client, no exec.

use super::{Job, Need, TYPE_PRIMARY};

/// Names what this pass must do on the primary.
pub(super) fn need<'j>(job: &'j Job<'_>) -> Need<'j> {
    let (plan, applied) = (job.plan, job.applied);
    let settings = &job.ctx.settings;
    let moved = applied.type_.is_some()
        && (applied.type_.as_deref() != Some(TYPE_PRIMARY) || applied.view != plan.want.view);
    if moved {
        return Need::Move;
    }
    let member_current = plan.catalog.is_none()
        || job.ctx.state.member_epoch(&job.zkey) >= job.memory.catalog_epoch();
    // The annotation and the catalog membership are what this plan wants.
    let settled = applied == &plan.want && member_current;
    let snap = job.snap.as_ref();
    // The snapshot was written for this very plan.
    let same_plan = snap.is_some_and(|s| s.applied == Some(plan.fingerprint));
    match snap {
        _ if !settled => Need::Converge,
        Some(s) if same_plan => {
            let age = s.verified_at.elapsed();
            if age < settings.verify_interval {
                Need::Nothing { snap: s, age }
            } else {
                Need::Check
            }
        }
        None => Need::Check,
        Some(s) if s.verified_at.elapsed() < settings.snapshot_trust => Need::Records(s),
        Some(_) => Need::Converge,
    }
}
