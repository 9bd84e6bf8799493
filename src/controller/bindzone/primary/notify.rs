//! The notify step: a pass that wrote nothing repeats the NOTIFY when a
//! Ready secondary lags (it missed one, e.g. sent while the primary's
//! NOTIFY list was being restored after a restart, or failed the refresh
//! it started): seen in the survey outside views (also at the recheck
//! after a write), where the operator NOTIFYs the lagging secondary itself
//! over DNS ([`renotify_surveyed`]); in a view, each secondary is asked by
//! a SOA query signed with the view's key, and the operator NOTIFYs a
//! lagging one itself with that key ([`renotify_view`], on periodic checks
//! and the recheck after a write).

use crate::bind::{ViewName, ZoneName};
use crate::controller::zonesync::server::ServerError;
use crate::controller::zonesync::state::Survey;

use super::super::serials::{behind, view_secondaries};
use super::{Job, Need, Seen, Step, StepError, Written};
use crate::controller::zonesync::survey::PodInfo;

/// Repeats the NOTIFY of the zone (and its catalog) for lagging secondaries.
pub(super) async fn lagging(
    job: &Job<'_>,
    need: Need<'_>,
    seen: &Seen,
    written: &Written,
) -> Result<(), StepError> {
    renotify(job, need, seen, written)
        .await
        .map_err(job.at(Step::Notify))
}

/// How long a secondary must have lacked a zone its catalog already lists
/// before the zone's NOTIFY is repeated: catalog processing takes a new
/// member in within seconds (1,000 members on a loaded secondary: ~5-10
/// s), and a NOTIFY of a zone it has not added yet is refused; one sent
/// to each of a first sync's zones while the secondary takes them in
/// (hundreds at once) only slowed it down. A member whose first transfer
/// failed is listed but unloaded, and retries at its retry timer unless
/// NOTIFYed: it gets the NOTIFY from a check this long after.
const MISSING_BEFORE_NOTIFY: std::time::Duration = std::time::Duration::from_secs(30);

async fn renotify(
    job: &Job<'_>,
    need: Need<'_>,
    seen: &Seen,
    written: &Written,
) -> Result<(), ServerError> {
    let serial = written.served.serial;
    match (&seen.survey, job.view(), job.plan.catalog.as_ref()) {
        (Some(s), _, Some(_)) if !written.wrote => renotify_surveyed(job, s, serial).await,
        // In a view the survey has no answer: ask the view's secondaries.
        (None, Some(v), Some(cat)) if matches!(need, Need::Check) && !written.wrote => {
            renotify_view(job, v, cat, serial).await?;
        }
        _ => {}
    }
    Ok(())
}

/// When `survey` shows a secondary behind the primary's `serial` of a
/// catalog member zone (outside views), the operator NOTIFYs that
/// secondary of the zone itself, over DNS signed with the transfer key
/// (no exec; the secondary takes a NOTIFY signed with that key from any
/// address), and of the catalog when it lags there too. A secondary that
/// lacks the zone gets the zone's NOTIFY only once it has lacked it for
/// [`MISSING_BEFORE_NOTIFY`] with its catalog current (before, the zone's
/// would be refused: the catalog brings the zone). Used by
/// the periodic check and by the recheck after a write
/// (`verify::catch_up`): a secondary whose refresh failed (its transfer
/// key changed between the primary's reconfig and its own, say) retries
/// only at the zone's SOA retry timer unless NOTIFYed again. A NOTIFY a
/// secondary does not take is logged and left: the secondary's lag shows
/// in `status.servers`, and the next check tries again.
///
/// Cost: one DNS exchange per lagging secondary (two when its catalog
/// lags too); nothing for one that is current. A secondary is NOTIFYed of
/// a zone at a serial at most once per `recheck_after_write`
/// ([`ClusterMemory::take_notify`]): the zones of a first sync that look
/// while a secondary still takes them in (1,000 catalog members take it
/// seconds) share one catalog NOTIFY instead of sending one each.
///
/// [`ClusterMemory::take_notify`]: crate::controller::zonesync::state::ClusterMemory::take_notify
pub(super) async fn renotify_surveyed(job: &Job<'_>, survey: &Survey, serial: u32) {
    let Some(cat) = job.plan.catalog.as_ref() else {
        return;
    };
    let (ctx, inputs) = (job.ctx, job.inputs);
    let zone = job.zname();
    let primary = &job.target.pod.name;
    let cat_serial = survey.pods.get(primary).and_then(|m| m.get(cat)).copied();
    let key = &inputs.keys.transfer;
    let every = ctx.settings.recheck_after_write;
    for (name, served) in survey.pods.iter().filter(|(p, _)| *p != primary) {
        let zone_lags = behind([served.get(zone).copied()], serial);
        let cat_lags = cat_serial.is_some_and(|s| behind([served.get(cat).copied()], s));
        let Some(pod) = inputs.pods.iter().find(|p| p.ready && p.pod.name == *name) else {
            continue;
        };
        let missing = !served.contains_key(zone);
        let missing_for = job.memory.missing_for(name, zone, missing);
        if !zone_lags {
            continue;
        }
        let mut notify = Vec::new();
        // Missing with its catalog behind: the catalog brings the zone.
        // Missing with its catalog current: the secondary is taking the
        // zone in (or failed its first transfer, which only a NOTIFY
        // retries soon): NOTIFYed only once it has been missing a while.
        if !missing || (!cat_lags && missing_for >= MISSING_BEFORE_NOTIFY) {
            notify.push((zone, serial));
        }
        if let Some(s) = cat_serial.filter(|_| cat_lags) {
            notify.push((cat, s));
        }
        for (z, at) in notify {
            if !job.memory.take_notify(name, z, at, every) {
                continue;
            }
            tracing::info!(zone = %z, pod = %pod.pod, "a secondary lags behind the primary; sending it a NOTIFY");
            if let Err(e) = ctx.target(&pod.pod).notify_secondary(z, key).await {
                tracing::debug!(zone = %z, pod = %pod.pod, error = %e, "the secondary did not take the NOTIFY");
            }
        }
    }
}

/// The periodic check of a zone in `view` that wrote nothing, and the
/// recheck after a write (`verify::view_catch_up`): when a Ready
/// secondary's copy of the view lags the primary's `serial` (or lacks the
/// zone), the operator NOTIFYs that secondary of the zone itself, and of
/// the view's catalog when the secondary lags there too (as
/// [`renotify_surveyed`] does outside views), each NOTIFY signed with the
/// view's key: the secondary's view takes NOTIFYs signed with it (its
/// `allow-notify`), and the key steers the message into that view. Returns
/// whether a secondary lagged.
///
/// Cost per view zone per check: one SOA query per Ready secondary (none
/// with a single replica); only when one lags, one SOA query of the
/// catalog on the primary and on each lagging secondary, and one NOTIFY
/// per zone that lags there. No exec.
pub(super) async fn renotify_view(
    job: &Job<'_>,
    view: &ViewName,
    catalog: &ZoneName,
    serial: u32,
) -> Result<bool, ServerError> {
    let (ctx, inputs, target) = (job.ctx, job.inputs, &job.target);
    let zone = job.zname();
    let primary = &target.pod.name;
    let key = inputs.keys.transfer_for(Some(view));
    let lagging: Vec<&PodInfo> = view_secondaries(ctx, inputs, primary, zone, view)
        .await
        .into_iter()
        .filter(|(_, s)| behind([*s], serial))
        .map(|(p, _)| p)
        .collect();
    if lagging.is_empty() {
        return Ok(false);
    }
    let cat_serial = target.serial_of(catalog, key).await?;
    for pod in lagging {
        let secondary = ctx.target(&pod.pod);
        let mut notify = vec![zone];
        // A catalog it cannot be asked about gets the NOTIFY too: one
        // secondary's failed read must not keep the others waiting.
        if let Some(s) = cat_serial
            && secondary
                .serial_of(catalog, key)
                .await
                .map_or(true, |c| behind([c], s))
        {
            notify.push(catalog);
        }
        for z in notify {
            tracing::info!(zone = %z, view = %view, pod = %pod.pod, "a secondary's view lags behind the primary; sending it a NOTIFY");
            if let Err(e) = secondary.notify_secondary(z, key).await {
                tracing::debug!(zone = %z, view = %view, pod = %pod.pod, error = %e, "the secondary did not take the NOTIFY");
            }
        }
    }
    Ok(true)
}
