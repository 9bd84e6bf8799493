//! Writes to BindZone and DNSRecord objects: statuses (server-side apply of
//! the whole status with the operator's field manager, only when something
//! but a timestamp changed), the DNSRecord finalizer (JSON patches guarded
//! by `test`, so a concurrent writer's finalizers are never clobbered) and
//! the zone's applied annotation. Every status the zone controllers write,
//! a zone's or a record's, goes through one [`StatusMemo`] (what this
//! process last wrote, by uid: never the same report twice, a different one
//! whatever the cache shows). A zone flush's many DNSRecord statuses go
//! through [`StatusQueue`], written by a background task, so the next
//! flush does not wait for them.
//!
//! Touches the cluster (patches). Nothing written here holds key material.

use crate::controller::error::KubeMessage;
use crate::render::warnings::{record_warnings, set_warning_condition, zone_warnings};
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::{
    BindZone, BindZoneStatus, CONDITION_READY, DNSRecord, DNSRecordStatus, Phase, RecordType,
    new_condition, set_condition,
};
use crate::controller::context::Context;
use crate::controller::names::FIELD_MANAGER;

use super::plan::RrKey;
use super::{ANNOTATION_APPLIED, RECORD_FINALIZER};

use crate::api::REASON_SERVED;
/// Status writes in flight at once (a zone flush may settle 1,000 records).
const WRITE_CONCURRENCY: usize = 16;

/// A failed write.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {kind} {name}: {}", KubeMessage(source))]
pub struct WriteError {
    pub action: &'static str,
    pub kind: String,
    pub name: String,
    #[source]
    pub source: kube::Error,
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

fn api<K>(client: &kube::Client, obj: &K) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    Api::namespaced(client.clone(), &obj.namespace().unwrap_or_default())
}

async fn apply_status<K, S>(client: &kube::Client, obj: &K, status: &S) -> Result<(), WriteError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize,
{
    let body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api(client, obj)
        .patch_status(
            &obj.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map(|_| ())
        .map_err(|source| WriteError {
            action: "write the status of",
            kind: K::kind(&()).into_owned(),
            name: obj.name_any(),
            source,
        })
}

/// What a DNSRecord's status should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordReport {
    /// Served as specified; `key` is the RRset it owns.
    Ready(RrKey),
    /// Waiting (zone not ready, primary down, update failed).
    Pending {
        reason: &'static str,
        message: String,
    },
    /// Rejected; nothing of it was sent.
    Error {
        reason: &'static str,
        message: String,
    },
}

/// The status `report` gives `record`, keeping timestamps when only the
/// observation repeats. `fqdn`/`recordType` move only when a new RRset is
/// served: otherwise they keep naming what the finalizer must remove.
pub fn record_status(record: &DNSRecord, report: &RecordReport) -> DNSRecordStatus {
    let old = record.status.clone().unwrap_or_default();
    let generation = record.metadata.generation;
    let mut s = DNSRecordStatus {
        conditions: old.conditions.clone(),
        fqdn: old.fqdn.clone(),
        record_type: old.record_type,
        observed_generation: generation,
        ..Default::default()
    };
    let cond = match report {
        RecordReport::Ready(key) => {
            s.phase = Some(Phase::Ready);
            s.fqdn = Some(key.0.fqdn());
            s.record_type = key.1.as_str().parse::<RecordType>().ok();
            new_condition(CONDITION_READY, true, REASON_SERVED, "", generation, now())
        }
        RecordReport::Pending { reason, message } | RecordReport::Error { reason, message } => {
            s.phase = Some(if matches!(report, RecordReport::Error { .. }) {
                Phase::Error
            } else {
                Phase::Pending
            });
            s.reason = Some(reason.to_string());
            s.message = Some(message.clone());
            new_condition(
                CONDITION_READY,
                false,
                reason,
                message.clone(),
                generation,
                now(),
            )
        }
    };
    set_condition(&mut s.conditions, cond);
    set_warning_condition(
        &mut s.conditions,
        &record_warnings(record),
        generation,
        now(),
    );
    s
}

/// Writes each record's status when it differs from what it has, every
/// write tried even when one fails: the count written, whether each
/// report's status now holds (written or already there), and the first
/// error. A report marked `force` is written even when the cached record
/// already shows it (the cache may be older than a write of ours). A record
/// newly rejected (or rejected for a new reason) also gets a Warning Event,
/// once per change, not per look.
async fn write_each(
    ctx: &Context,
    reports: Vec<(Arc<DNSRecord>, RecordReport, bool)>,
) -> (usize, Vec<bool>, Option<WriteError>) {
    let mut holds = vec![true; reports.len()];
    let changed: Vec<(usize, Arc<DNSRecord>, DNSRecordStatus)> = reports
        .into_iter()
        .enumerate()
        .filter_map(|(i, (r, rep, force))| {
            let s = record_status(&r, &rep);
            (force || r.status.as_ref() != Some(&s)).then_some((i, r, s))
        })
        .collect();
    let client = &ctx.client;
    let results: Vec<_> = futures::stream::iter(changed)
        .map(|(i, r, s)| async move {
            let result = apply_status(client, r.as_ref(), &s).await;
            (i, r, s, result)
        })
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    let mut written = 0;
    let mut error = None;
    for (i, r, s, result) in results {
        if let Err(e) = result {
            // A record deleted meanwhile has nothing left to report.
            if !matches!(&e.source, kube::Error::Api(s) if s.code == 404) {
                holds[i] = false;
                error.get_or_insert(e);
            }
            continue;
        }
        written += 1;
        let old = r.status.as_ref();
        let newly = s.phase == Some(Phase::Error)
            && (old.and_then(|o| o.phase) != Some(Phase::Error)
                || old.and_then(|o| o.reason.as_ref()) != s.reason.as_ref());
        if newly {
            let reason = s.reason.clone().unwrap_or_default();
            let note = s.message.clone().unwrap_or_default();
            ctx.publish_event(r.as_ref(), EventType::Warning, &reason, "Validate", note)
                .await;
        }
    }
    (written, holds, error)
}

/// Writes the records' statuses through the [`StatusMemo`], skipping a
/// report this process already wrote for the record's generation (the cache may
/// not show it yet when the zone flushes again at once): one status write
/// per change, not one per flush. A report that differs from the one this
/// process wrote last is written even when the cache shows it: the cache
/// may predate that last write (a Pending written a moment ago over a
/// cached Ready must be followed by Ready again). Each write that landed is
/// remembered even when another failed, so the retry rewrites only the
/// failed ones. A report of the same record still queued for the
/// background writer ([`queue_record_reports`]) is replaced by this one.
///
/// A Pending report of a record never reported yet waits out the
/// coalescing window from its creation ([`pending_grace`]): a created
/// DNSRecord costs its finalizer and its final status, not a Pending in
/// between, when its flush lands within that window (a flush that failed
/// once and landed at the retry, a record whose zone is created a moment
/// after it). The callers look again later in every case (a failed flush
/// is retried, a blocked zone requeued, a record without its zone
/// requeued for the grace), and a record still waiting then says so.
pub async fn write_record_reports(
    ctx: &super::ZoneContext,
    reports: Vec<(Arc<DNSRecord>, RecordReport)>,
) -> Result<usize, WriteError> {
    write_now(ctx, reports, Some(ctx.settings.record_max_wait)).await
}

/// [`write_record_reports`] without the Pending grace, for a caller that
/// does not look again: the zone's cleanup tells its records the zone is
/// gone, and nothing reports on them until a zone of that name comes.
pub async fn write_record_reports_final(
    ctx: &super::ZoneContext,
    reports: Vec<(Arc<DNSRecord>, RecordReport)>,
) -> Result<usize, WriteError> {
    write_now(ctx, reports, None).await
}

async fn write_now(
    ctx: &super::ZoneContext,
    reports: Vec<(Arc<DNSRecord>, RecordReport)>,
    grace: Option<std::time::Duration>,
) -> Result<usize, WriteError> {
    let queue = &ctx.state.statuses;
    let fresh = queue.fresh(reports, grace, true);
    let _writing = queue.writing.lock().await;
    let (n, _, error) = queue.write(&ctx.base, fresh).await;
    error.map_or(Ok(n), Err)
}

/// [`write_record_reports`] for a zone's flush: a few statuses (at most
/// [`WRITE_NOW`]) are written at once, more are queued and written by a
/// background task (the latest report of a record replaces one not written
/// yet), so a zone's next flush does not wait for the status writes of its
/// last one: 10,000 records' statuses take seconds of API writes, and the
/// records that arrive meanwhile join the next flush. A queued write that
/// fails is retried by the task after [`Settings::retry_base`] (doubling to
/// [`Settings::retry_max`]) unless a newer report replaced it. Returns the
/// statuses written now.
///
/// [`Settings::retry_base`]: super::Settings::retry_base
/// [`Settings::retry_max`]: super::Settings::retry_max
pub async fn queue_record_reports(
    ctx: &super::ZoneContext,
    reports: Vec<(Arc<DNSRecord>, RecordReport)>,
) -> Result<usize, WriteError> {
    queue_reports(&ctx.state.statuses, &ctx.base, &ctx.settings, reports).await
}

/// [`queue_record_reports`] from the parts of the zone context it uses
/// (for a task that outlives the zone's pass).
pub async fn queue_reports(
    queue: &Arc<StatusQueue>,
    base: &Arc<Context>,
    settings: &super::Settings,
    reports: Vec<(Arc<DNSRecord>, RecordReport)>,
) -> Result<usize, WriteError> {
    let fresh = queue.fresh(reports, Some(settings.record_max_wait), false);
    if fresh.len() <= WRITE_NOW {
        let writing = queue.writing.lock().await;
        // Written meanwhile by the background writer (see `run`).
        let fresh: Vec<Fresh> = fresh
            .into_iter()
            .filter(|(uid, f, _, _)| queue.memo.last(uid) != Some(*f))
            .collect();
        {
            let mut q = lock(&queue.inner);
            for (uid, _, _, _) in &fresh {
                q.queued.remove(uid);
            }
        }
        let (n, _, error) = queue.write(base, fresh).await;
        drop(writing);
        return error.map_or(Ok(n), Err);
    }
    let start = {
        let mut q = lock(&queue.inner);
        for (uid, f, r, rep) in fresh {
            q.queued.insert(uid, (f, r, rep));
        }
        !std::mem::replace(&mut q.worker, true)
    };
    if start {
        let (queue, base) = (queue.clone(), base.clone());
        let backoff = (settings.retry_base, settings.retry_max);
        tokio::spawn(async move { queue.run(&base, backoff).await });
    }
    Ok(0)
}

/// Status writes one chunk of the background writer holds: a synchronous
/// write of a record waits at most for one chunk.
pub const QUEUE_CHUNK: usize = 256;

/// Most statuses a zone's flush writes itself before its reconcile ends;
/// more go to the background writer. Small: a burst's flush of a hundred
/// records used to write their hundred statuses before the zone's next
/// flush could start, holding the records that arrived meanwhile back by
/// as long (a lone change still gets its status from its own flush).
pub const WRITE_NOW: usize = 8;

/// One queued or fresh report: uid, fingerprint, record, report.
type Fresh = (String, u64, Arc<DNSRecord>, RecordReport);

/// What this process last wrote as the status of each object the zone
/// controllers report on — BindZones and DNSRecords alike, by uid (a
/// deleted and re-created object is a new one) — as a fingerprint of the
/// object's generation and the report. One rule for both kinds
/// ([`StatusMemo::decide`]): write what differs from our last write,
/// whatever the (possibly stale) cache shows; never the same report twice.
/// A status write lands in the cache a moment later, so until it does the
/// cache may still show the status before it: a Pending written a moment
/// ago over a cached Ready must be followed by Ready again, even though the
/// cached copy already says Ready. Every status these controllers write
/// goes through it (a write that bypassed it would leave it remembering a
/// report the object no longer shows, and the next write of that report
/// would be skipped).
#[derive(Debug, Default)]
pub struct StatusMemo {
    written: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

/// What [`StatusMemo::decide`] says of one report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// This process wrote this very report last: nothing to do.
    Written,
    /// Never written by this process, and the cached object shows it
    /// already (an operator restart): remember it, write nothing.
    Shown,
    /// Write it; `force`: even if the cached object shows it (the cache may
    /// predate our last write).
    Write { force: bool },
}

impl StatusMemo {
    /// The fingerprint of the status last written for `uid`.
    pub fn last(&self, uid: &str) -> Option<u64> {
        lock(&self.written).get(uid).copied()
    }

    /// Records that the status with `fingerprint` holds for `uid`.
    pub fn remember(&self, uid: &str, fingerprint: u64) {
        lock(&self.written).insert(uid.to_string(), fingerprint);
    }

    /// Forgets a released record or a deleted zone.
    pub fn forget(&self, uid: &str) {
        lock(&self.written).remove(uid);
    }

    /// Whether a report with `fingerprint` needs a write for `uid`;
    /// `cache_shows` tells whether the cached object shows it already (only
    /// asked when this process never wrote a status for `uid`).
    pub fn decide(
        &self,
        uid: &str,
        fingerprint: u64,
        cache_shows: impl FnOnce() -> bool,
    ) -> Decision {
        match self.last(uid) {
            Some(last) if last == fingerprint => Decision::Written,
            Some(_) => Decision::Write { force: true },
            None if cache_shows() => Decision::Shown,
            None => Decision::Write { force: false },
        }
    }
}

/// The DNSRecord statuses of the zone controllers: the [`StatusMemo`] of
/// every status they write (zones' too, see [`write_zone_report`]) and the
/// record reports queued for the background writer
/// ([`queue_record_reports`]).
#[derive(Debug, Default)]
pub struct StatusQueue {
    /// What this process last wrote, per object uid.
    pub memo: StatusMemo,
    inner: std::sync::Mutex<QueueInner>,
    /// Held while statuses are written (a chunk of the background writer,
    /// or a synchronous write), so two writes of one record never race
    /// and the later report always lands last.
    writing: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct QueueInner {
    /// DNSRecord uid -> the report waiting to be written.
    queued: std::collections::HashMap<String, (u64, Arc<DNSRecord>, RecordReport)>,
    /// Whether the background writer runs.
    worker: bool,
    /// DNSRecord uid -> the Ready report that waits for every secondary
    /// to serve it (its fingerprint) and the wait's ticket
    /// ([`StatusQueue::await_served`]).
    awaiting: std::collections::HashMap<String, (u64, u64)>,
    /// The ticket the next wait gets.
    next_ticket: u64,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data behind the lock: a panic elsewhere leaves it usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl StatusQueue {
    /// Forgets a released record (and drops its queued report).
    pub fn forget(&self, uid: &str) {
        self.memo.forget(uid);
        let mut q = lock(&self.inner);
        q.queued.remove(uid);
        q.awaiting.remove(uid);
    }

    /// Reports queued and not written yet.
    pub fn queued(&self) -> usize {
        lock(&self.inner).queued.len()
    }

    /// Whether `record` shows `report` (a Ready one) already: this process
    /// wrote it last, or wrote nothing for it and the cached object is
    /// Ready at its generation (an operator restart). Such a Ready does
    /// not wait for the secondaries again.
    pub fn confirmed(&self, record: &DNSRecord, report: &RecordReport) -> bool {
        let uid = record.metadata.uid.as_deref().unwrap_or_default();
        match self.memo.last(uid) {
            Some(last) => last == fingerprint(record.metadata.generation, report),
            None => record.status.as_ref().is_some_and(|s| {
                s.phase == Some(crate::api::Phase::Ready)
                    && s.observed_generation == record.metadata.generation
            }),
        }
    }

    /// Starts `record`'s wait for its Ready `report` to be served
    /// everywhere: a ticket, or `None` when a wait for this very report
    /// runs already (a zone's later pass derived it again: the wait that
    /// runs still holds, so it is not restarted).
    pub fn await_served(&self, record: &DNSRecord, report: &RecordReport) -> Option<u64> {
        let uid = record.metadata.uid.clone().unwrap_or_default();
        let f = fingerprint(record.metadata.generation, report);
        let mut q = lock(&self.inner);
        if q.awaiting.get(&uid).is_some_and(|(af, _)| *af == f) {
            return None;
        }
        q.next_ticket += 1;
        let ticket = q.next_ticket;
        q.awaiting.insert(uid, (f, ticket));
        Some(ticket)
    }

    /// Ends `record`'s wait, if any: a pass derived another report for it.
    pub fn cancel_await(&self, record: &DNSRecord) {
        let uid = record.metadata.uid.as_deref().unwrap_or_default();
        lock(&self.inner).awaiting.remove(uid);
    }

    /// Whether the wait with `ticket` is still `uid`'s; `end`: and it ends.
    pub fn holds_await(&self, uid: &str, ticket: u64, end: bool) -> bool {
        let mut q = lock(&self.inner);
        let holds = q.awaiting.get(uid).is_some_and(|(_, t)| *t == ticket);
        if holds && end {
            q.awaiting.remove(uid);
        }
        holds
    }

    /// Waits for the secondaries that run.
    pub fn awaiting(&self) -> usize {
        lock(&self.inner).awaiting.len()
    }

    /// The reports that need a write: not the one last written (unless a
    /// different one is queued, which the report then replaces), not one
    /// queued already, not a Pending that may wait ([`pending_grace`],
    /// within `grace` when given). `take`: a queued report of the same
    /// record is dropped (the caller writes this one now).
    fn fresh(
        &self,
        reports: Vec<(Arc<DNSRecord>, RecordReport)>,
        grace: Option<std::time::Duration>,
        take: bool,
    ) -> Vec<Fresh> {
        let mut q = lock(&self.inner);
        let mut out = Vec::new();
        for (r, rep) in reports {
            let uid = r.metadata.uid.clone().unwrap_or_default();
            let f = fingerprint(r.metadata.generation, &rep);
            let queued = q.queued.get(&uid).map(|(qf, _, _)| *qf);
            let last = self.memo.last(&uid);
            if queued == Some(f) && !take {
                continue;
            }
            if last == Some(f) {
                q.queued.remove(&uid);
                continue;
            }
            if matches!(rep, RecordReport::Pending { .. })
                && last.is_none()
                && grace.is_some_and(|window| pending_grace(&r, window).is_some())
            {
                continue;
            }
            if take {
                q.queued.remove(&uid);
            }
            out.push((uid, f, r, rep));
        }
        out
    }

    /// Writes `fresh` (the caller holds `writing`) and remembers each write
    /// that landed.
    async fn write(
        &self,
        ctx: &Context,
        fresh: Vec<Fresh>,
    ) -> (usize, Vec<bool>, Option<WriteError>) {
        let (keys, reports): (Vec<_>, Vec<_>) = fresh
            .into_iter()
            .map(|(uid, f, r, rep)| {
                // `fresh` dropped the report last written; what is left is
                // written unless never written and shown by the cache.
                let force = self.memo.last(&uid).is_some();
                ((uid, f), (r, rep, force))
            })
            .unzip();
        let (n, holds, error) = write_each(ctx, reports).await;
        for ((uid, f), held) in keys.into_iter().zip(&holds) {
            if *held {
                self.memo.remember(&uid, f);
            }
        }
        (n, holds, error)
    }

    /// The background writer: writes queued reports a chunk at a time
    /// until none is left; a failed one goes back to the queue (unless a
    /// newer report of its record came meanwhile) and is retried after a
    /// backoff.
    async fn run(&self, ctx: &Context, (base, max): (std::time::Duration, std::time::Duration)) {
        let mut failures = 0u32;
        loop {
            let chunk: Vec<Fresh> = {
                let mut q = lock(&self.inner);
                let uids: Vec<String> = q.queued.keys().take(QUEUE_CHUNK).cloned().collect();
                if uids.is_empty() {
                    q.worker = false;
                    return;
                }
                uids.into_iter()
                    .filter_map(|uid| {
                        let (f, r, rep) = q.queued.remove(&uid)?;
                        Some((uid, f, r, rep))
                    })
                    .collect()
            };
            let writing = self.writing.lock().await;
            // A report queued while the same one was being written (taken
            // from the queue, not yet remembered) is written already.
            let chunk: Vec<Fresh> = chunk
                .into_iter()
                .filter(|(uid, f, _, _)| self.memo.last(uid) != Some(*f))
                .collect();
            if chunk.is_empty() {
                continue;
            }
            let retry: Vec<Fresh> = chunk.clone();
            let (_, holds, error) = self.write(ctx, chunk).await;
            let Some(error) = error else {
                failures = 0;
                continue;
            };
            // Back to the queue before another write of the record can run.
            {
                let mut q = lock(&self.inner);
                for ((uid, f, r, rep), held) in retry.into_iter().zip(holds) {
                    if !held && !q.queued.contains_key(&uid) {
                        q.queued.insert(uid, (f, r, rep));
                    }
                }
            }
            drop(writing);
            failures = failures.saturating_add(1);
            let delay = crate::controller::error::backoff(failures, base, max);
            tracing::warn!(error = %error, retry_in_ms = delay.as_millis() as u64, "DNSRecord status write failed; retrying");
            tokio::time::sleep(delay).await;
        }
    }
}

/// How much longer a Pending report of `r` may wait before it is written,
/// when it may wait at all: `r` has no status yet (its first status write
/// is still to come) and was created less than `window` (the coalescing
/// window of DNSRecord changes) ago. A record without a creation time or
/// with a status does not wait.
pub fn pending_grace(r: &DNSRecord, window: std::time::Duration) -> Option<std::time::Duration> {
    let reported = r.status.as_ref().is_some_and(|s| s.phase.is_some());
    grace_left(reported, &r.metadata, window)
}

/// [`pending_grace`] for a BindZone: a zone created a moment ago whose
/// primary is not Ready yet (a GitOps first apply creates the cluster and
/// its zones together; the pods come up a second later) goes straight to
/// Ready, without a Pending written in between, when it gets there within
/// the window. [`write_zone_report`] holds back such a Pending; the caller
/// looks again when the grace ends ([`zone_pending_grace`] says when), so a
/// zone still waiting then says so.
pub fn zone_pending_grace(
    zone: &BindZone,
    window: std::time::Duration,
) -> Option<std::time::Duration> {
    let reported = zone.status.as_ref().is_some_and(|s| s.phase.is_some());
    grace_left(reported, &zone.metadata, window)
}

fn grace_left(
    reported: bool,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    window: std::time::Duration,
) -> Option<std::time::Duration> {
    if reported {
        return None;
    }
    let created = meta.creation_timestamp.as_ref()?.0;
    let age = jiff::Timestamp::now().duration_since(created);
    let age = std::time::Duration::try_from(age).unwrap_or_default();
    window.checked_sub(age).filter(|left| !left.is_zero())
}

/// What identifies a report for one generation of an object.
fn fingerprint(generation: Option<i64>, report: &impl std::fmt::Debug) -> u64 {
    use std::fmt::Write as _;
    use std::hash::{Hash, Hasher};
    /// Feeds formatted text straight into the hasher: a flush fingerprints
    /// every record of its zone, and a `String` per record was most of it.
    struct HashText<'h>(&'h mut std::collections::hash_map::DefaultHasher);
    impl std::fmt::Write for HashText<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    generation.hash(&mut h);
    let _ = write!(HashText(&mut h), "{report:?}");
    h.finish()
}

/// [`release_records`] for the zone controllers, forgetting what
/// [`write_record_reports`] remembered of them.
pub async fn release_record_reports(
    ctx: &super::ZoneContext,
    records: Vec<Arc<DNSRecord>>,
) -> Result<(), WriteError> {
    let uids: Vec<String> = records
        .iter()
        .filter_map(|r| r.metadata.uid.clone())
        .collect();
    release_records(&ctx.base.client, records).await?;
    for uid in uids {
        ctx.state.forget_report(&uid);
    }
    Ok(())
}

/// What a BindZone's status should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneReport {
    pub phase: Phase,
    pub reason: &'static str,
    pub message: String,
    pub serial: Option<u32>,
    pub record_count: Option<u32>,
    /// `None`: keep what the status says.
    pub servers: Option<BTreeMap<String, u32>>,
    /// `None`: keep what the status says; `Some(None)` clears it.
    pub dnssec: Option<Option<crate::api::ZoneDnssecStatus>>,
    /// See [`crate::api::BindZoneStatus::applied_plan`]. `None`: keep what
    /// the status says; `Some(None)` clears it.
    pub applied_plan: Option<Option<String>>,
    /// `None`: keep what the status says.
    pub external_secondaries: Option<Vec<crate::api::ExternalSecondaryStatus>>,
}

/// Condition type: every external secondary serves the primary's serial.
pub const CONDITION_EXTERNAL_IN_SYNC: &str = "ExternalSecondariesInSync";
/// Reasons of [`CONDITION_EXTERNAL_IN_SYNC`].
pub const REASON_CAUGHT_UP: &str = "CaughtUp";
pub const REASON_LAGGING: &str = "Lagging";

/// The `ExternalSecondariesInSync` condition's status and message.
fn external_condition(list: &[crate::api::ExternalSecondaryStatus]) -> (bool, String) {
    let lagging: Vec<String> = list
        .iter()
        .filter(|e| !e.caught_up)
        .map(|e| match (e.serial, &e.message) {
            (Some(s), _) => format!("{} serves serial {s}", e.server),
            (None, Some(m)) => format!("{}: {m}", e.server),
            (None, None) => format!("{} does not serve the zone", e.server),
        })
        .collect();
    if lagging.is_empty() {
        (
            true,
            format!(
                "{} external secondaries serve the primary's serial",
                list.len()
            ),
        )
    } else {
        (false, lagging.join("; "))
    }
}

/// `N/M` servers at `serial` (`None` without servers or serial).
pub fn in_sync(serial: Option<u32>, servers: &BTreeMap<String, u32>) -> Option<String> {
    let serial = serial?;
    if servers.is_empty() {
        return None;
    }
    let at = servers.values().filter(|s| **s == serial).count();
    Some(format!("{at}/{}", servers.len()))
}

/// The status `report` gives `zone`. Serial, count and servers keep their
/// last values when the report does not know them.
pub fn zone_status(zone: &BindZone, report: &ZoneReport) -> BindZoneStatus {
    let old = zone.status.clone().unwrap_or_default();
    let generation = zone.metadata.generation;
    let mut s = BindZoneStatus {
        observed_generation: generation,
        phase: Some(report.phase),
        serial: report.serial.or(old.serial),
        record_count: report.record_count.or(old.record_count),
        servers: report.servers.clone().unwrap_or(old.servers),
        in_sync: None,
        applied_plan: report.applied_plan.clone().unwrap_or(old.applied_plan),
        dnssec: report.dnssec.clone().unwrap_or(old.dnssec),
        external_secondaries: report
            .external_secondaries
            .clone()
            .unwrap_or(old.external_secondaries),
        conditions: old.conditions,
    };
    s.in_sync = in_sync(s.serial, &s.servers);
    set_condition(
        &mut s.conditions,
        new_condition(
            CONDITION_READY,
            report.phase == Phase::Ready,
            report.reason,
            report.message.clone(),
            generation,
            now(),
        ),
    );
    set_warning_condition(&mut s.conditions, &zone_warnings(zone), generation, now());
    if s.external_secondaries.is_empty() {
        s.conditions
            .retain(|c| c.type_ != CONDITION_EXTERNAL_IN_SYNC);
    } else {
        let (ok, message) = external_condition(&s.external_secondaries);
        set_condition(
            &mut s.conditions,
            new_condition(
                CONDITION_EXTERNAL_IN_SYNC,
                ok,
                if ok { REASON_CAUGHT_UP } else { REASON_LAGGING },
                message,
                generation,
                now(),
            ),
        );
    }
    s
}

/// Writes the zone's status when it changed, through the same
/// [`StatusMemo`] as the records' ([`write_record_reports`]): the report
/// this process wrote last is not written again, a different one is
/// written whatever the cache shows. A Pending of a zone never reported
/// waits out its grace ([`zone_pending_grace`], the coalescing window of
/// DNSRecord changes): a zone created with its cluster costs its Ready
/// writes, not a Pending first. Returns whether it wrote.
pub async fn write_zone_report(
    ctx: &super::ZoneContext,
    zone: &BindZone,
    report: &ZoneReport,
) -> Result<bool, WriteError> {
    let memo = &ctx.state.statuses.memo;
    let uid = zone.metadata.uid.as_deref().unwrap_or_default();
    if report.phase == Phase::Pending
        && memo.last(uid).is_none()
        && zone_pending_grace(zone, ctx.settings.record_max_wait).is_some()
    {
        return Ok(false);
    }
    let f = fingerprint(zone.metadata.generation, report);
    let s = zone_status(zone, report);
    match memo.decide(uid, f, || zone.status.as_ref() == Some(&s)) {
        Decision::Written => return Ok(false),
        Decision::Shown => {
            memo.remember(uid, f);
            return Ok(false);
        }
        Decision::Write { .. } => {}
    }
    tracing::debug!(
        zone = %zone.name_any(),
        phase = report.phase.as_str(),
        reason = report.reason,
        serial = report.serial,
        "writing the zone's status"
    );
    apply_status(&ctx.base.client, zone, &s).await?;
    memo.remember(uid, f);
    Ok(true)
}

fn finalizer_error(action: &'static str, r: &DNSRecord, source: kube::Error) -> WriteError {
    WriteError {
        action,
        kind: "DNSRecord".into(),
        name: r.name_any(),
        source,
    }
}

/// Whether a failed finalizer patch only lost a race (object gone, or its
/// finalizers changed under us): the next reconcile sees the new state.
fn lost_race(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if matches!(s.code, 404 | 409 | 422))
}

/// Sends a guarded JSON patch of a DNSRecord's finalizers; a lost race is
/// not an error (see [`lost_race`]).
async fn patch_finalizers(
    client: &kube::Client,
    r: &DNSRecord,
    patch: json_patch::Patch,
    action: &'static str,
) -> Result<(), WriteError> {
    match api(client, r)
        .patch(
            &r.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if lost_race(&e) => Ok(()),
        Err(e) => Err(finalizer_error(action, r, e)),
    }
}

/// Adds the DNSRecord finalizer (before anything of the record is written).
pub async fn add_record_finalizer(client: &kube::Client, r: &DNSRecord) -> Result<(), WriteError> {
    let patch: json_patch::Patch = if r.finalizers().is_empty() {
        serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [RECORD_FINALIZER]},
        ]))
    } else {
        serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": r.finalizers()},
            {"op": "add", "path": "/metadata/finalizers/-", "value": RECORD_FINALIZER},
        ]))
    }
    .expect("a fixed json patch");
    patch_finalizers(client, r, patch, "add the finalizer to").await
}

/// Removes the DNSRecord finalizer: its RRset is gone (or never existed).
pub async fn release_record(client: &kube::Client, r: &DNSRecord) -> Result<(), WriteError> {
    let Some(i) = r.finalizers().iter().position(|f| f == RECORD_FINALIZER) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{i}");
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": path, "value": RECORD_FINALIZER},
        {"op": "remove", "path": path},
    ]))
    .expect("a fixed json patch");
    patch_finalizers(client, r, patch, "remove the finalizer from").await
}

/// Releases several records at once.
pub async fn release_records(
    client: &kube::Client,
    records: Vec<Arc<DNSRecord>>,
) -> Result<(), WriteError> {
    futures::stream::iter(records)
        .map(|r| async move { release_record(client, &r).await })
        .buffer_unordered(WRITE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Sets the zone's applied annotation (a merge patch of that one key).
pub async fn write_applied(
    client: &kube::Client,
    zone: &BindZone,
    value: &str,
) -> Result<(), WriteError> {
    let patch = json!({"metadata": {"annotations": {ANNOTATION_APPLIED: value}}});
    match api(client, zone)
        .patch(
            &zone.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 404) => Ok(()),
        Err(source) => Err(WriteError {
            action: "annotate",
            kind: "BindZone".into(),
            name: zone.name_any(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DNSRecordSpec;
    use std::time::Duration;

    fn record(age: Duration, phase: Option<Phase>) -> DNSRecord {
        let mut r = DNSRecord::new(
            "www",
            DNSRecordSpec {
                zone_ref: "z".into(),
                zone_namespace: None,
                name: "www".into(),
                type_: RecordType::A,
                ttl: None,
                values: vec!["192.0.2.1".into()],
            },
        );
        let created = jiff::Timestamp::now() - jiff::SignedDuration::try_from(age).unwrap();
        r.metadata.creation_timestamp = Some(Time(created));
        r.status = phase.map(|p| DNSRecordStatus {
            phase: Some(p),
            ..Default::default()
        });
        r
    }

    #[test]
    fn only_a_young_record_without_a_status_waits_for_its_pending() {
        let window = Duration::from_secs(2);
        let left = pending_grace(&record(Duration::from_millis(500), None), window);
        assert!(
            left.is_some_and(|l| l <= Duration::from_millis(1500)),
            "{left:?}"
        );
        // Older than the window: its Pending is written.
        assert_eq!(
            pending_grace(&record(Duration::from_secs(3), None), window),
            None
        );
        // Reported before (Ready, say): a Pending is news, written at once.
        assert_eq!(
            pending_grace(
                &record(Duration::from_millis(100), Some(Phase::Ready)),
                window
            ),
            None
        );
        // No creation time: nothing to wait on.
        let mut r = record(Duration::ZERO, None);
        r.metadata.creation_timestamp = None;
        assert_eq!(pending_grace(&r, window), None);
    }

    #[test]
    fn only_a_young_zone_never_reported_waits_for_its_pending() {
        let window = Duration::from_secs(2);
        let zone = |age: Duration, phase: Option<&str>| -> BindZone {
            let created = jiff::Timestamp::now() - jiff::SignedDuration::try_from(age).unwrap();
            serde_json::from_value(json!({
                "apiVersion": "bind.unkin.net/v1alpha1",
                "kind": "BindZone",
                "metadata": {"name": "z", "creationTimestamp": created.to_string()},
                "spec": {"clusterRef": "c", "zoneName": "example.com"},
                "status": phase.map(|p| json!({"phase": p})),
            }))
            .unwrap()
        };
        let left = zone_pending_grace(&zone(Duration::from_millis(300), None), window);
        assert!(
            left.is_some_and(|l| l <= Duration::from_millis(1700)),
            "{left:?}"
        );
        assert_eq!(
            zone_pending_grace(&zone(Duration::from_secs(3), None), window),
            None
        );
        assert_eq!(
            zone_pending_grace(&zone(Duration::from_millis(300), Some("Ready")), window),
            None
        );
    }
}

#[cfg(test)]
mod in_sync_tests {
    use super::*;

    #[test]
    fn in_sync_counts_servers_at_the_serial() {
        let servers = BTreeMap::from([("c-0".to_string(), 7), ("c-1".to_string(), 6)]);
        assert_eq!(in_sync(Some(7), &servers).as_deref(), Some("1/2"));
        assert_eq!(in_sync(Some(6), &servers).as_deref(), Some("1/2"));
        let both = BTreeMap::from([("c-0".to_string(), 7), ("c-1".to_string(), 7)]);
        assert_eq!(in_sync(Some(7), &both).as_deref(), Some("2/2"));
        assert_eq!(in_sync(None, &both), None);
        assert_eq!(in_sync(Some(7), &BTreeMap::new()), None);
    }
}
