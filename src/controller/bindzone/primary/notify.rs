//! The notify step: a pass that wrote nothing repeats the NOTIFY when a
//! Ready secondary lags (it missed one, e.g. sent while the primary's
//! NOTIFY list was being restored after a restart, or failed the refresh
//! it started): seen in the survey outside views (also at the recheck
//! after a write), asked per secondary with `rndc zonestatus` in a view
//! ([`renotify_view`], on periodic checks only).

use crate::bind::{ViewName, ZoneName};
use crate::controller::zonesync::server::ServerError;
use crate::controller::zonesync::state::Survey;

use super::super::serials::{behind, secondaries_lag, view_secondaries};
use super::{Job, Need, Seen, Step, StepError, Written};

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

async fn renotify(
    job: &Job<'_>,
    need: Need<'_>,
    seen: &Seen,
    written: &Written,
) -> Result<(), ServerError> {
    let serial = written.served.serial;
    match (&seen.survey, job.view(), job.plan.catalog.as_ref()) {
        (Some(s), _, Some(_)) if !written.wrote => renotify_surveyed(job, s, serial).await?,
        // In a view the survey has no answer: ask the view's secondaries.
        (None, Some(v), Some(cat)) if matches!(need, Need::Check) && !written.wrote => {
            renotify_view(job, v, cat, serial).await?;
        }
        _ => {}
    }
    Ok(())
}

/// When `survey` shows a secondary behind the primary's `serial` of a
/// catalog member zone (outside views), repeats the zone's NOTIFY, and its
/// catalog's when a secondary lags there too. Used by the periodic check
/// and by the recheck after a write (`verify::catch_up`): a secondary whose refresh failed (its transfer key
/// changed between the primary's reconfig and its own, say) retries only
/// at the zone's SOA retry timer unless NOTIFYed again.
pub(super) async fn renotify_surveyed(
    job: &Job<'_>,
    survey: &Survey,
    serial: u32,
) -> Result<(), ServerError> {
    let target = &job.target;
    let (zname, view) = (job.zname(), job.view());
    let primary = &target.pod.name;
    let Some(cat) = job.plan.catalog.as_ref() else {
        return Ok(());
    };
    if !secondaries_lag(survey, primary, zname, serial) {
        return Ok(());
    }
    tracing::info!(zone = %zname, "a secondary lags behind the primary; sending NOTIFY");
    target.notify(zname, view).await?;
    if let Some(cat_serial) = survey.pods.get(primary).and_then(|m| m.get(cat))
        && secondaries_lag(survey, primary, cat, *cat_serial)
    {
        target.notify(cat, view).await?;
    }
    Ok(())
}

/// The periodic check of a zone in `view` that wrote nothing, and the
/// recheck after a write (`verify::view_catch_up`): when a Ready
/// secondary's copy of the view lags the primary's `serial` (or lacks the
/// zone), repeat the NOTIFY, and the view catalog's when one lags there too
/// (as [`secondaries_lag`] does from the survey outside views). Returns
/// whether a secondary lagged.
///
/// Cost per view zone per check: one `rndc zonestatus` per Ready secondary
/// (none with a single replica); only when one lags, one `rndc notify` of
/// the zone, one zonestatus of the catalog on the primary and on each Ready
/// secondary, and at most one `rndc notify` of the catalog.
pub(super) async fn renotify_view(
    job: &Job<'_>,
    view: &ViewName,
    catalog: &ZoneName,
    serial: u32,
) -> Result<bool, ServerError> {
    let (ctx, inputs, target) = (job.ctx, job.inputs, &job.target);
    let zone = job.zname();
    let primary = &target.pod.name;
    if !behind(
        view_secondaries(ctx, inputs, primary, zone, view).await,
        serial,
    ) {
        return Ok(false);
    }
    tracing::info!(zone = %zone, view = %view, "a secondary's view lags behind the primary; sending NOTIFY");
    target.notify(zone, Some(view)).await?;
    if let Some(cat_serial) = target.serial_of(catalog, Some(view), None).await?
        && behind(
            view_secondaries(ctx, inputs, primary, catalog, view).await,
            cat_serial,
        )
    {
        target.notify(catalog, Some(view)).await?;
    }
    Ok(true)
}
