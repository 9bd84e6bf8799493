//! The BindZone reconciler: the zone is the unit of write. One reconcile
//! reads the zone's cluster, keys and DNSRecords (caches), validates, plans
//! the zone's owned RRsets (its apex NS, `spec.records`, every DNSRecord
//! naming it; conflicts decided first), converges the zone on the servers
//! (primary: zone, catalog membership, one nsupdate run; secondary: the zone
//! on every pod), then writes statuses — its own and its DNSRecords' — and
//! releases the finalizers of deleted DNSRecords whose RRsets are gone.
//!
//! Pipeline (see [`apply::apply`]): read -> validate -> plan -> converge ->
//! status. A zone of an external cluster (`spec.external`, a BIND the
//! operator did not deploy) takes the same read and plan but converges over
//! the network only ([`external`]). A zone with a `dnssec-policy` is Ready only once the primary
//! serves it signed ([`dnssec`]). Deletion ([`cleanup::cleanup`]) removes
//! the zone from its catalog and the servers, with every file named keeps
//! for it (journal, signed copies, keys), behind kube's finalizer helper;
//! a finalizer patch that fails its `test` against a cached copy older than
//! our own last finalizer write is retried within ~100 ms, not reported as
//! a failure ([`FINALIZER_RACE_RETRY`]).
//!
//! Touches the cluster (status, finalizer and annotation writes; Secret
//! reads) and BIND pods (exec). Never logs key material.

pub mod applied;
pub mod apply;
pub mod catalog;
pub mod cleanup;
pub mod confirm;
pub mod dnssec;
pub mod dnssec_keys;
pub mod external;
pub mod external_secondaries;
pub mod primary;
pub mod read;
pub mod secondary;
pub mod serials;

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, Event, finalizer};
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument as _;

use crate::api::BindZone;
use crate::controller::error::backoff;
use crate::controller::error::{Categorized, Category, KubeMessage, measured, rejected};
use crate::controller::zonesync::keys::KeyError;
use crate::controller::zonesync::server::ServerError;
use crate::controller::zonesync::writes::WriteError;
use crate::controller::zonesync::{ZONE_FINALIZER, ZoneContext};
use crate::telemetry::Controller as MetricsController;

/// A failed BindZone reconcile. Server failures come back here after the
/// statuses that report them were written, so `error_policy` backs off.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// A step of a primary zone's convergence (names step, zone, pod).
    #[error(transparent)]
    Primary(#[from] primary::StepError),
    #[error("failed to converge zone {zone}: {source}")]
    Server {
        zone: String,
        #[source]
        source: ServerError,
    },
    #[error("failed to delete zone {zone}: {message}")]
    Blocked {
        zone: String,
        reason: &'static str,
        message: String,
    },
    #[error(
        "failed to manage the finalizer of BindZone {zone}: {}",
        finalizer_message(source)
    )]
    Finalizer {
        zone: String,
        #[source]
        source: Box<finalizer::Error<Error>>,
    },
}

/// A finalizer bookkeeping failure in one sentence (kube's own message
/// would carry the API error's Debug dump).
fn finalizer_message(e: &finalizer::Error<Error>) -> String {
    match e {
        finalizer::Error::AddFinalizer(k) => format!("failed to add it: {}", KubeMessage(k)),
        finalizer::Error::RemoveFinalizer(k) => format!("failed to remove it: {}", KubeMessage(k)),
        other => other.to_string(),
    }
}

impl Categorized for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Write(_) => Category::KubeApiFailed.as_str(),
            Error::Keys(e) => e.category(),
            Error::Server { source, .. } | Error::Primary(primary::StepError { source, .. }) => {
                source.category()
            }
            Error::Blocked { reason, .. } => reason,
            Error::Finalizer { .. } => Category::FinalizerFailed.as_str(),
        }
    }

    /// Servers down, API hiccups and deletions waiting for pods are
    /// retried with backoff; an API refusal of the object itself or a
    /// batch that cannot be built waits for a change. (A bad spec or a
    /// missing key never gets here: it is reported in status and the zone
    /// waits for the change that wakes it.)
    fn is_transient(&self) -> bool {
        match self {
            Error::Write(e) => !rejected(&e.source),
            Error::Keys(e) => e.is_api(),
            Error::Server { source, .. } | Error::Primary(primary::StepError { source, .. }) => {
                !matches!(source, ServerError::Batch { .. })
            }
            Error::Blocked { .. } | Error::Finalizer { .. } => true,
        }
    }
}

/// Reconciles one BindZone behind the zone finalizer, inside the
/// measuring guard.
pub async fn reconcile(zone: Arc<BindZone>, ctx: Arc<ZoneContext>) -> Result<Action, Error> {
    // On a task of its own: reading and planning a zone of 10,000 records
    // takes whole milliseconds between awaits, and zones run side by side
    // on every worker thread instead of inside the controller's one task.
    let run = {
        let (zone, ctx) = (zone.clone(), ctx.clone());
        // Aborted if this reconcile is dropped: on a lost Lease the
        // controllers are dropped at once and nothing may go on writing.
        let task = AbortOnDropHandle::new(tokio::spawn(
            async move { converge(zone, &ctx).await }.in_current_span(),
        ));
        async move {
            match task.await {
                Ok(result) => result,
                Err(e) => match e.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    // Cancelled: only when the runtime shuts down.
                    Err(_) => Ok(Action::await_change()),
                },
            }
        }
    };
    measured(&ctx.base, MetricsController::BindZone, zone.as_ref(), run).await
}

async fn converge(zone: Arc<BindZone>, ctx: &ZoneContext) -> Result<Action, Error> {
    let api: Api<BindZone> = Api::namespaced(
        ctx.base.client.clone(),
        &zone.namespace().unwrap_or_default(),
    );
    let name = zone.name_any();
    let key = (zone.namespace().unwrap_or_default(), name.clone());
    let result = finalizer(&api, ZONE_FINALIZER, zone, |event| async {
        match event {
            Event::Apply(z) if external::on_external_cluster(ctx, &z) => {
                external::reconcile(&z, ctx).await
            }
            Event::Apply(z) => apply::apply(&z, ctx).await,
            Event::Cleanup(z) => cleanup::cleanup(&z, ctx).await,
        }
    })
    .await;
    match result {
        Ok(action) => Ok(action),
        // The step's own error names the step; only a failure of the
        // finalizer bookkeeping itself is reported as one.
        Err(finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e)) => Err(e),
        Err(finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e))
            if stale_finalizers(&e) =>
        {
            // The cached zone predates a finalizer write (ours, a moment
            // ago: the watch event is on its way). Not a failure: look
            // again soon, from the fresher copy the event brings (it wakes
            // the zone itself, the earlier of the two wins).
            let failures = ctx.state.failed(&key);
            let retry = backoff(failures, FINALIZER_RACE_RETRY, ctx.settings.retry_max);
            tracing::debug!(zone = %name, error = %KubeMessage(&e), retry_ms = retry.as_millis() as u64, "cached BindZone predates its finalizers; looking again");
            Ok(Action::requeue(retry))
        }
        Err(e) => Err(Error::Finalizer {
            zone: name,
            source: Box::new(e),
        }),
    }
}

/// First retry of a zone whose finalizer patch met a stale cache (doubling
/// per repeat, up to the zone's longest retry, should it persist).
pub const FINALIZER_RACE_RETRY: Duration = Duration::from_millis(100);

/// Whether a finalizer patch of kube's finalizer helper failed its `test`
/// against the object we hold (the cache): the API answers 422 (a JSON
/// patch `test` that fails, e.g. `finalizers` is not `null` because our own
/// add landed and the cache does not show it yet) or 409. A zone that is
/// gone (404) ends here too: the next event says so.
fn stale_finalizers(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if matches!(s.code, 404 | 409 | 422))
}

/// Logs the failure and retries with exponential backoff per zone (a down
/// primary is retried, never given up on, and never hot-looped). Only
/// transient failures get here (see [`measured`]).
pub fn error_policy(zone: Arc<BindZone>, err: &Error, ctx: Arc<ZoneContext>) -> Action {
    let key = (zone.namespace().unwrap_or_default(), zone.name_any());
    let failures = ctx.state.failed(&key);
    let delay = backoff(failures, ctx.settings.retry_base, ctx.settings.retry_max);
    tracing::warn!(
        namespace = %key.0,
        name = %key.1,
        category = err.category(),
        failures,
        retry_secs = delay.as_secs(),
        error = %err,
        "BindZone reconcile failed"
    );
    Action::requeue(delay)
}
