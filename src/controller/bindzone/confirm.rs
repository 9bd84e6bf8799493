//! Ready only once every server answers: a DNSRecord whose RRset the
//! primary serves at serial S says Ready only when every Ready secondary
//! serves the zone at S or later (a secondary's copy at a serial is the
//! primary's content at that serial), asked over DNS with SOA queries
//! signed with the key of the zone's view ([`zonesync::served`]: one watch
//! per pod for all zones waiting there). Resolvers are sent to every Ready
//! pod, so until then a resolver may get the old answer or NXDOMAIN.
//!
//! The wait runs as a task of its own, so the zone's next write does not
//! wait for the secondaries' transfers. When every secondary serves S, the
//! Ready reports are queued. When one does not within
//! [`Settings::served_wait`], the reports become Pending (`NotServed`,
//! naming each lagging pod and the serial it serves) and the wait goes on,
//! so the record turns Ready as soon as the pod catches up (the zone's
//! recheck after a write NOTIFYs a lagging secondary); after [`GIVE_UP`]
//! it ends, and the zone's next pass (its periodic check) waits again.
//!
//! A record's wait belongs to its report: a later pass of the zone that
//! derives the same Ready report leaves the running wait alone (under a
//! steady stream of changes a record still turns Ready once the serial
//! that first held it is served), one that derives another report (a new
//! generation, a conflict) replaces it, and the old wait writes nothing.
//! A Ready the record shows already (written by this process, or cached
//! at its generation after a restart) is not waited for again: a record
//! stays Ready while a later change of its zone travels.
//!
//! A BindZone's Ready follows the same rule for what the zone itself asks
//! for (its SOA, nameservers and `spec.records`): once a generation of the
//! zone is first served by the primary, the zone says Ready at that
//! generation only when every Ready secondary serves that serial or later
//! ([`zone_served`]). Meanwhile its status is left as it was (a new zone
//! shows nothing yet, a changed one its last Ready at the older
//! generation), so a record change never makes a zone's Ready flap; a
//! secondary that has not caught up within [`Settings::served_wait`]
//! makes it Pending, `NotServed`, naming the pod. The wait wakes the zone
//! when it ends.
//!
//! Touches the secondaries (SOA queries) and DNSRecord statuses.
//!
//! [`zonesync::served`]: crate::controller::zonesync::served
//! [`Settings::served_wait`]: crate::controller::zonesync::Settings::served_wait

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;

use crate::api::{BindZone, DNSRecord, Phase, REASON_NOT_SERVED};
use crate::bind::{TsigKey, ZoneName};
use crate::controller::exec::PodRef;
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::served::{Lag, ZoneWait};
use crate::controller::zonesync::writes::{
    RecordReport, WriteError, queue_record_reports, queue_reports,
};

/// How long a record's wait for the secondaries goes on at most.
pub const GIVE_UP: Duration = Duration::from_secs(60);

/// What the Ready reports of a zone's pass wait for.
#[derive(Debug, Clone)]
pub struct Confirm {
    pub zone: ZoneName,
    /// Every Ready pod but the primary.
    pub secondaries: Vec<PodRef>,
    /// The transfer key of the zone's view (it steers the query there).
    pub key: TsigKey,
    /// The primary's serial that holds the reports' RRsets.
    pub serial: u32,
}

/// Queues `reports` (Ready ones of `confirm`'s zone) once every secondary
/// serves `confirm.serial`; see the module docs. Reports the records show
/// already, and zones without secondaries, are queued at once.
pub async fn ready_when_served(
    ctx: &ZoneContext,
    confirm: Confirm,
    reports: Vec<(Arc<DNSRecord>, RecordReport)>,
) -> Result<(), WriteError> {
    let queue = &ctx.state.statuses;
    let (known, new): (Vec<_>, Vec<_>) = reports
        .into_iter()
        .partition(|(r, rep)| confirm.secondaries.is_empty() || queue.confirmed(r, rep));
    for (r, _) in &known {
        queue.cancel_await(r);
    }
    if !known.is_empty() {
        queue_record_reports(ctx, known).await?;
    }
    // Each with its wait's ticket; those that wait already are left to it.
    let waits: Vec<_> = new
        .into_iter()
        .filter_map(|(r, rep)| {
            let ticket = queue.await_served(&r, &rep)?;
            let uid = r.metadata.uid.clone().unwrap_or_default();
            Some((uid, ticket, r, rep))
        })
        .collect();
    if waits.is_empty() {
        return Ok(());
    }
    let (servers, batcher, watch) = (
        ctx.servers.clone(),
        ctx.batcher.clone(),
        ctx.state.served.clone(),
    );
    let (queue, base, settings) = (queue.clone(), ctx.base.clone(), ctx.settings.clone());
    tokio::spawn(async move {
        let started = Instant::now();
        let wait_all = |pods: Vec<PodRef>, until: Instant| {
            let (servers, batcher, watch, confirm) = (&servers, &batcher, &watch, &confirm);
            async move {
                let lags = futures::future::join_all(pods.iter().map(|pod| {
                    watch.wait(
                        servers,
                        batcher,
                        pod,
                        &confirm.zone,
                        &confirm.key,
                        confirm.serial,
                        started,
                        until,
                    )
                }))
                .await;
                pods.into_iter()
                    .zip(lags)
                    .filter_map(|(pod, r)| r.err().map(|lag| (pod, lag)))
                    .collect::<Vec<(PodRef, Lag)>>()
            }
        };
        let mut lagging =
            wait_all(confirm.secondaries.clone(), started + settings.served_wait).await;
        if !lagging.is_empty() {
            let message = not_served(&lagging, confirm.serial);
            let pending = waits
                .iter()
                .filter(|(uid, ticket, _, _)| queue.holds_await(uid, *ticket, false))
                .map(|(_, _, r, _)| {
                    let report = RecordReport::Pending {
                        reason: REASON_NOT_SERVED,
                        message: message.clone(),
                    };
                    (r.clone(), report)
                })
                .collect();
            if let Err(e) = queue_reports(&queue, &base, &settings, pending).await {
                tracing::warn!(zone = %confirm.zone, error = %e, "failed to write DNSRecord statuses");
            }
            let pods = lagging.into_iter().map(|(pod, _)| pod).collect();
            lagging = wait_all(pods, started + GIVE_UP).await;
        }
        // Only the waits no later pass replaced end here.
        let ended: Vec<_> = waits
            .into_iter()
            .filter(|(uid, ticket, _, _)| queue.holds_await(uid, *ticket, true))
            .map(|(_, _, r, rep)| (r, rep))
            .collect();
        if !lagging.is_empty() {
            tracing::debug!(zone = %confirm.zone, records = ended.len(), "a secondary still lags; the zone's next pass waits again");
            return;
        }
        if let Err(e) = queue_reports(&queue, &base, &settings, ended).await {
            tracing::warn!(zone = %confirm.zone, error = %e, "failed to write DNSRecord statuses");
        }
    });
    Ok(())
}

/// Whether a zone's Ready may be written (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneServed {
    /// Every Ready secondary serves this generation of the zone.
    Yes,
    /// A wait runs: write nothing new yet (the wait wakes the zone).
    Waiting,
    /// A secondary did not catch up within the wait: Pending, this message.
    Lagging(String),
}

/// Whether every Ready secondary serves the generation of `zone` that the
/// primary serves at `confirm.serial` (or serves since): a zone Ready at
/// its generation already, or without secondaries, is; else a wait starts
/// on the pods' watches (once per generation), and wakes the zone when it
/// ends.
pub fn zone_served(ctx: &ZoneContext, zone: &BindZone, confirm: &Confirm) -> ZoneServed {
    let watch = &ctx.state.served;
    let uid = zone.metadata.uid.clone().unwrap_or_default();
    let generation = zone.metadata.generation;
    match watch.zone_wait(&uid) {
        Some(w) if w.generation() == generation => {
            return match w {
                ZoneWait::Served { .. } => ZoneServed::Yes,
                ZoneWait::Waiting { .. } => ZoneServed::Waiting,
                ZoneWait::Lagging { serial, lag, .. } => {
                    ZoneServed::Lagging(zone_not_served(&lag, serial))
                }
            };
        }
        _ => {}
    }
    let shown = zone
        .status
        .as_ref()
        .is_some_and(|s| s.phase == Some(Phase::Ready) && s.observed_generation == generation);
    if shown || confirm.secondaries.is_empty() {
        watch.set_zone_wait(&uid, ZoneWait::Served { generation }, None);
        return ZoneServed::Yes;
    }
    let serial = confirm.serial;
    watch.set_zone_wait(&uid, ZoneWait::Waiting { generation, serial }, None);
    let (servers, batcher, watch) = (
        ctx.servers.clone(),
        ctx.batcher.clone(),
        ctx.state.served.clone(),
    );
    let (wake, first_wait) = (ctx.wake.clone(), ctx.settings.served_wait);
    let (zone_name, key, pods) = (
        confirm.zone.clone(),
        confirm.key.clone(),
        confirm.secondaries.clone(),
    );
    let obj = ObjectRef::from_obj(zone);
    tokio::spawn(async move {
        let started = Instant::now();
        let wait_all = |pods: Vec<PodRef>, until: Instant| {
            let (servers, batcher, watch, zone_name, key) =
                (&servers, &batcher, &watch, &zone_name, &key);
            async move {
                let lags = futures::future::join_all(pods.iter().map(|pod| {
                    watch.wait(
                        servers, batcher, pod, zone_name, key, serial, started, until,
                    )
                }))
                .await;
                pods.into_iter()
                    .zip(lags)
                    .filter_map(|(pod, r)| r.err().map(|lag| (pod, lag)))
                    .collect::<Vec<(PodRef, Lag)>>()
            }
        };
        let only = Some(generation);
        let mut lag = wait_all(pods, started + first_wait).await;
        if !lag.is_empty() {
            let lagging = ZoneWait::Lagging {
                generation,
                serial,
                lag: lag.clone(),
            };
            if !watch.set_zone_wait(&uid, lagging, only) {
                return;
            }
            let _ = wake.unbounded_send(obj.clone());
            let pods = lag.into_iter().map(|(pod, _)| pod).collect();
            lag = wait_all(pods, started + GIVE_UP).await;
        }
        if lag.is_empty() {
            if watch.set_zone_wait(&uid, ZoneWait::Served { generation }, only) {
                let _ = wake.unbounded_send(obj);
            }
        } else {
            // The zone's next pass waits again.
            watch.forget_zone(&uid, only);
        }
    });
    ZoneServed::Waiting
}

/// The message of a zone a secondary does not serve yet.
fn zone_not_served(lagging: &[(PodRef, Lag)], serial: u32) -> String {
    let pods: Vec<String> = lagging.iter().map(|(pod, s)| lag_text(pod, *s)).collect();
    format!(
        "{}; the zone is at serial {serial} on the primary, and resolvers asking the other pods do not get it yet",
        pods.join(", ")
    )
}

fn lag_text(pod: &PodRef, served: Lag) -> String {
    match served {
        Some(s) => format!("pod {} serves serial {s}", pod.name),
        None => format!("pod {} does not answer for the zone", pod.name),
    }
}

/// The message of records a secondary does not serve yet.
fn not_served(lagging: &[(PodRef, Lag)], serial: u32) -> String {
    let pods: Vec<String> = lagging.iter().map(|(pod, s)| lag_text(pod, *s)).collect();
    format!(
        "{}; the record set is at serial {serial} on the primary, and resolvers asking the other pods do not get it yet",
        pods.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_lagging_pod() {
        let pod = |n: &str| PodRef {
            namespace: "dns".into(),
            name: n.into(),
        };
        let m = not_served(&[(pod("c-1"), Some(7)), (pod("c-2"), None)], 9);
        assert_eq!(
            m,
            "pod c-1 serves serial 7, pod c-2 does not answer for the zone; the record set is at serial 9 on the primary, and resolvers asking the other pods do not get it yet"
        );
    }
}
