//! The DNSRecord reconciler: small on purpose, because the zone is the unit
//! of write. It puts the finalizer on every DNSRecord before the zone may
//! write its RRset (so a delete can always be finished), reports a missing
//! zone (once the coalescing window after its creation is over: a record
//! applied a moment before its zone costs no Pending write), and releases a deleted DNSRecord whose zone is gone (nothing of it
//! is served anywhere). Everything else — validation, conflicts, the write,
//! Ready/Error statuses, releasing after the RRset is removed — happens in
//! the BindZone reconciler, which every DNSRecord change wakes.
//!
//! Touches the cluster (finalizer and status writes); never a BIND pod.

use std::sync::Arc;

use kube::ResourceExt as _;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use crate::api::{BindZone, DNSRecord};
use crate::controller::error::{Categorized, Category, measured, rejected};
use crate::controller::zonesync::plan::has_record_finalizer;
use crate::controller::zonesync::writes::{
    RecordReport, WriteError, add_record_finalizer, pending_grace, release_record,
    write_record_reports,
};
use crate::controller::zonesync::{ZoneContext, note_if_first_sync};

use crate::api::REASON_ZONE_NOT_FOUND;
use crate::telemetry::Controller as MetricsController;

/// A failed DNSRecord reconcile (only API writes can fail here; the
/// write error names the step: finalizer, status or release).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error(#[from] WriteError);

impl Categorized for Error {
    fn category(&self) -> &'static str {
        Category::KubeApiFailed.as_str()
    }

    /// Retried unless the API server refused the object itself.
    fn is_transient(&self) -> bool {
        !rejected(&self.0.source)
    }
}

/// The record's zone from the cache.
pub(crate) fn zone_of(ctx: &ZoneContext, r: &DNSRecord) -> Option<Arc<BindZone>> {
    let ns = r.zone_namespace()?;
    ctx.zones.get(&ObjectRef::new(&r.spec.zone_ref).within(&ns))
}

/// Reconciles one DNSRecord (see the module docs for what it leaves to the
/// zone), inside the measuring guard.
pub async fn reconcile(record: Arc<DNSRecord>, ctx: Arc<ZoneContext>) -> Result<Action, Error> {
    let run = settle(&record, &ctx);
    measured(
        &ctx.base,
        MetricsController::DNSRecord,
        record.as_ref(),
        run,
    )
    .await
}

async fn settle(record: &Arc<DNSRecord>, ctx: &ZoneContext) -> Result<Action, Error> {
    let client = &ctx.base.client;
    let zone = zone_of(ctx, record);
    if record.metadata.deletion_timestamp.is_some() {
        // With its zone present, the zone removes the RRset, then releases.
        if zone.is_none() {
            release_record(client, record).await?;
        }
        return Ok(Action::await_change());
    }
    if !has_record_finalizer(record) {
        // No wake follows the finalizer's arrival (see `zones`): go on.
        add_record_finalizer(client, record).await?;
        // A record of a zone not applied yet: a first sync is arriving,
        // and new zones wait for the rest of it (see `bindzone::primary`).
        note_if_first_sync(ctx, zone.as_deref());
    }
    if zone.is_none() {
        let report = RecordReport::Pending {
            reason: REASON_ZONE_NOT_FOUND,
            message: format!(
                "BindZone {}/{} does not exist",
                record.zone_namespace().unwrap_or_default(),
                record.spec.zone_ref
            ),
        };
        write_record_reports(ctx, vec![(record.clone(), report)]).await?;
        // A record applied just before its zone waits for it without a
        // Pending status; it looks again once that grace is over.
        if let Some(left) = pending_grace(record, ctx.settings.record_max_wait) {
            return Ok(Action::requeue(left));
        }
    }
    Ok(Action::await_change())
}

/// Logs and retries soon: only API writes fail here.
pub fn error_policy(record: Arc<DNSRecord>, err: &Error, _ctx: Arc<ZoneContext>) -> Action {
    tracing::warn!(
        namespace = record.namespace().unwrap_or_default(),
        name = record.name_any(),
        category = err.category(),
        error = %err,
        "DNSRecord reconcile failed"
    );
    crate::controller::error::retry_after(err)
}
