//! The verify step: after a write pass, the snapshot of what the primary
//! holds is remembered (or forgotten when the pass failed: what the
//! primary holds is unknown then); when nothing changed since a recent
//! verified write, no exec runs on the primary, only the secondaries'
//! catch-up: the recheck takes a fresh survey while a Ready secondary still
//! shows the old serial ([`catch_up`]), so `status.servers` catches up then
//! and a converged cluster's periodic check finds nothing to write.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::bind::{ViewName, ZoneName};
use crate::controller::zonesync::state::{ClusterMemory, Snapshot};
use crate::controller::zonesync::survey::{PodInfo, survey};

use super::{Converged, Job, Written};

/// Nothing to do on the primary: `snap` (verified `age` ago) answers, and
/// the next check comes sooner while a secondary lags.
pub(super) async fn unchanged(job: &Job<'_>, snap: &Snapshot, age: Duration) -> Converged {
    let settings = &job.ctx.settings;
    let interval = settings.verify_interval;
    tracing::debug!(zone = %job.zname(), age_ms = age.as_millis() as u64, "zone verified recently; nothing to do");
    let lagging = catch_up(job, snap).await;
    Converged {
        plan: complete(job, &snap.served),
        served: snap.served.clone(),
        wrote: false,
        next_check: if lagging {
            let recheck = settings.recheck_after_write;
            recheck
                .checked_sub(age)
                .unwrap_or(recheck)
                .min(interval - age)
        } else {
            interval - age
        },
        verified: false,
        restored: Vec::new(),
    }
}

/// The plan's fingerprint when `served` holds all of it (an RRset hidden
/// by another client's data is not written, so such a plan is not).
fn complete(job: &Job<'_>, served: &crate::controller::zonesync::diff::Served) -> Option<u64> {
    let desired = &job.plan.desired;
    desired
        .rrsets
        .keys()
        .all(|k| served.holds(k, desired))
        .then_some(job.plan.fingerprint)
}

/// Remembers what a successful pass left on the primary. The next check
/// is the recheck after a write while the zone's last write is younger
/// than the catch-up window ([`catch_up`]), also after a pass that wrote
/// nothing: a wake right after a write (a deleted DNSRecord's release, a
/// status arriving) must not push the recheck that write wants out to the
/// periodic check.
pub(super) fn remember(job: &Job<'_>, written: Written) -> Converged {
    let settings = &job.ctx.settings;
    let written_at = if written.wrote {
        Some(Instant::now())
    } else {
        job.snap.as_ref().and_then(|s| s.written_at)
    };
    let recheck = written_at.is_some_and(|t| t.elapsed() < catch_up_window(settings));
    job.ctx.state.set_snapshot(
        &job.zkey,
        Some(Snapshot {
            served: written.served.clone(),
            applied: Some(job.plan.fingerprint),
            verified_at: Instant::now(),
            written_at,
            primary: job.primary.identity,
        }),
    );
    Converged {
        plan: complete(job, &written.served),
        served: written.served,
        wrote: written.wrote,
        next_check: if recheck {
            settings.recheck_after_write.min(settings.verify_interval)
        } else {
            settings.verify_interval
        },
        verified: true,
        restored: written.restored,
    }
}

/// A pass failed: whatever happened, what the primary holds is unknown now.
pub(super) fn forget(job: &Job<'_>) {
    job.ctx.state.set_snapshot(&job.zkey, None);
    job.memory.invalidate_survey();
}

/// The recheck after a write: while `status.servers` (from the cluster's
/// last survey) shows a Ready secondary behind the primary's `snap`, and
/// the write is at least [`Settings::recheck_after_write`] old but younger
/// than the survey's lifetime, take a survey newer
/// than the write (shared by the cluster's zones; at most one dig per pod
/// per [`Settings::recheck_after_write`]) so the status catches up now,
/// right after the write, instead of at the next periodic check of a
/// converged cluster (an API write with nothing changed). A secondary
/// still behind then gets the zone's NOTIFY again
/// ([`renotify_surveyed`](super::notify::renotify_surveyed)). Returns
/// whether a secondary still lags (look again at the recheck, or soon
/// after it).
/// A zone in a view is checked by asking its secondaries
/// ([`view_catch_up`]): the survey cannot answer for views.
///
/// [`Settings::recheck_after_write`]: crate::controller::zonesync::Settings::recheck_after_write
async fn catch_up(job: &Job<'_>, snap: &Snapshot) -> bool {
    let (ctx, inputs, memory) = (job.ctx, job.inputs, &job.memory);
    let zone = job.zname();
    let primary = &job.primary.pod.name;
    let age = snap.verified_at.elapsed();
    if age >= catch_up_window(&ctx.settings) {
        return false;
    }
    if let Some(view) = job.view() {
        return view_catch_up(job, snap, view, age).await;
    }
    let lags = || servers_lag(memory, job, zone, primary, snap.served.serial);
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
        Some(&inputs.keys.transfer),
    )
    .await;
    if !lags() {
        return false;
    }
    // Still behind a recheck after the write: the secondary may have missed
    // the NOTIFY or failed the refresh it started (as the views' recheck
    // does, repeat it).
    if let Some(s) = memory.last_survey() {
        super::notify::renotify_surveyed(job, &s, snap.served.serial).await;
    }
    true
}

/// The recheck after a write of a zone in `view`: from
/// [`Settings::recheck_after_write`] after the write until the catch-up
/// window closes, each Ready secondary's copy of the view is asked (one
/// SOA query each, signed with the view's key); while one lags (a NOTIFY
/// sent while the primary's NOTIFY list for the view was not in place yet
/// reaches nobody, and nothing else makes the primary send it again), the
/// operator NOTIFYs it of the zone, and of its view catalog when that lags
/// too. Returns whether to look again.
///
/// [`Settings::recheck_after_write`]: crate::controller::zonesync::Settings::recheck_after_write
async fn view_catch_up(job: &Job<'_>, snap: &Snapshot, view: &ViewName, age: Duration) -> bool {
    if age < job.ctx.settings.recheck_after_write {
        return true;
    }
    let Some(catalog) = job.plan.catalog.as_ref() else {
        return false;
    };
    match super::notify::renotify_view(job, view, catalog, snap.served.serial).await {
        Ok(lagged) => lagged,
        Err(e) => {
            tracing::debug!(zone = %job.zname(), view = %view, error = %e, "failed to check the view's secondaries");
            true
        }
    }
}

/// How long after a verified pass the secondaries' catch-up is looked at
/// ([`catch_up`]): the survey's lifetime, within the periodic check.
fn catch_up_window(settings: &crate::controller::zonesync::Settings) -> Duration {
    settings.survey_max_age.min(settings.verify_interval)
}

/// Whether [`servers`] would show a Ready secondary at another serial than
/// the primary's (or not at all).
fn servers_lag(
    memory: &ClusterMemory,
    job: &Job<'_>,
    zone: &ZoneName,
    primary: &str,
    serial: u32,
) -> bool {
    let shown = servers(memory, zone, primary, serial, &job.inputs.pods);
    job.inputs
        .pods
        .iter()
        .filter(|p| p.ready && p.pod.name != primary)
        .any(|p| shown.get(&p.pod.name) != Some(&serial))
}

/// Pod name -> serial of `zone` from the cluster's last survey, with the
/// primary's entry replaced by what this process just saw. Only pods that
/// still exist (`pods`, the cluster's pods now): a pod removed by a scale
/// down leaves the status at once, not at the next survey.
pub fn servers(
    memory: &ClusterMemory,
    zone: &ZoneName,
    primary: &str,
    primary_serial: u32,
    pods: &[PodInfo],
) -> BTreeMap<String, u32> {
    let exists = |name: &str| pods.iter().any(|p| p.pod.name == name);
    let mut out: BTreeMap<String, u32> = memory
        .last_survey()
        .filter(|s| s.asked.contains(zone))
        .map(|s| {
            s.pods
                .iter()
                .filter(|(pod, _)| exists(pod))
                .filter_map(|(pod, m)| m.get(zone).map(|v| (pod.clone(), *v)))
                .collect()
        })
        .unwrap_or_default();
    out.insert(primary.to_string(), primary_serial);
    out
}
