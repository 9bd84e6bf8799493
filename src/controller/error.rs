//! The error pattern every reconciler follows, and the one guard every
//! reconcile runs through.
//!
//! Errors: a thiserror enum per controller whose variants carry the failed
//! step's context, plus a static, bounded category per variant. The
//! category is the Event reason and the log/metric label (never a Debug
//! string): a condition reason of the API (`crate::api::REASON_*`) where
//! the failure is reported in status, else a [`Category`].
//! [`is_transient`](Categorized::is_transient) tells a failure worth
//! retrying with backoff from a bad spec that must wait for a change.
//!
//! [`measured`]: every controller's reconcile runs inside it (like
//! controller-rs's measurer). It runs the reconcile in a tracing span with
//! kind/namespace/name, counts and times it in the metrics, counts a
//! failure by category, and reports a failure by a Warning Event on the
//! object (once per new problem: a failure that repeats unchanged is not
//! published again). A reconcile that handles a bad spec (writes it to
//! status) still returns the error, so that it is counted and reported
//! here; the guard turns it into a long requeue (no retry storm: the next
//! change of the object wakes it anyway).
//!
//! Touches the cluster only through the Event of a failure. Error messages
//! never carry key material.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use tracing::Instrument as _;

use super::context::{Context, REQUEUE_LONG, REQUEUE_SHORT};
use crate::telemetry::{Controller as MetricsController, Metrics};

/// The operator's own error categories (those that are not a condition
/// reason of the API): one enum, so no category is a string spelled twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Category {
    /// An API request failed (retried).
    KubeApiFailed,
    /// The finalizer could not be added or removed.
    FinalizerFailed,
    /// The network seam found no address for the primary yet.
    PrimaryAddressUnknown,
    /// named in a pod could not be reached (pod down, exec refused).
    PrimaryUnavailable,
    /// rndc refused a zone command.
    ZoneCommandFailed,
    /// The primary refused or failed a dynamic update.
    UpdateFailed,
    /// A signed zone transfer failed.
    TransferFailed,
    /// An update batch could not be built (a plan bug).
    InvalidBatch,
}

impl Category {
    /// The label: the variant's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Category::KubeApiFailed => "KubeApiFailed",
            Category::FinalizerFailed => "FinalizerFailed",
            Category::PrimaryAddressUnknown => "PrimaryAddressUnknown",
            Category::PrimaryUnavailable => "PrimaryUnavailable",
            Category::ZoneCommandFailed => "ZoneCommandFailed",
            Category::UpdateFailed => "UpdateFailed",
            Category::TransferFailed => "TransferFailed",
            Category::InvalidBatch => "InvalidBatch",
        }
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The API server refused the object itself (422 Invalid, e.g. a change
/// to an immutable field): retrying unchanged cannot help.
pub fn rejected(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422)
}

// Re-exported: the formatter is a leaf that `exec` uses too, and `exec`
// may not depend on this module (which depends on the context).
pub use super::kube_message::{KubeMessage, kube_message};

/// A reconcile error with a category.
pub trait Categorized: std::error::Error {
    /// Static, PascalCase, bounded: the Event reason and the log label.
    fn category(&self) -> &'static str;
    /// True: retry with backoff (API hiccup, pod busy). False: the object
    /// (or what it refers to) is wrong; retrying before it changes is waste.
    fn is_transient(&self) -> bool;
    /// True: a wait for something the operator itself is about to do (a
    /// Secret it generates): no Warning Event, logged quietly.
    fn is_expected(&self) -> bool {
        false
    }
}

/// How long to wait before retrying after `err`.
pub fn retry_after<E: Categorized>(err: &E) -> Action {
    if err.is_transient() {
        Action::requeue(REQUEUE_SHORT)
    } else {
        Action::requeue(REQUEUE_LONG)
    }
}

/// The `error_policy` every controller passes to `Controller::run`: logs
/// with the category as a field and picks the retry delay. (It cannot
/// publish Events: it is synchronous; [`measured`] does.)
pub fn error_policy<K, E>(obj: Arc<K>, err: &E, _ctx: Arc<Context>) -> Action
where
    K: Resource<DynamicType = ()>,
    E: Categorized,
{
    if err.is_expected() {
        tracing::debug!(
            kind = %K::kind(&()),
            namespace = obj.meta().namespace.as_deref().unwrap_or_default(),
            name = obj.meta().name.as_deref().unwrap_or_default(),
            category = err.category(),
            error = %err,
            "reconcile waiting"
        );
        return retry_after(err);
    }
    tracing::warn!(
        kind = %K::kind(&()),
        namespace = obj.meta().namespace.as_deref().unwrap_or_default(),
        name = obj.meta().name.as_deref().unwrap_or_default(),
        category = err.category(),
        error = %err,
        "reconcile failed"
    );
    retry_after(err)
}

/// Runs one reconcile of `obj` inside the guard every controller uses
/// (see the module docs): a span with kind/namespace/name, the reconcile
/// metrics (count, duration, failure category), and a Warning Event on a
/// new failure (reason = category). A transient failure is returned (the
/// controller's `error_policy` backs off); a permanent one, which the
/// reconcile reported in status, becomes a long requeue.
pub async fn measured<K, E>(
    ctx: &Context,
    controller: MetricsController,
    obj: &K,
    reconcile: impl Future<Output = Result<Action, E>>,
) -> Result<Action, E>
where
    K: Resource<DynamicType = ()>,
    E: Categorized,
{
    let meta = obj.meta();
    let span = tracing::info_span!(
        "reconcile",
        kind = %K::kind(&()),
        namespace = meta.namespace.as_deref().unwrap_or_default(),
        name = meta.name.as_deref().unwrap_or_default(),
    );
    let started = Instant::now();
    let result = reconcile.instrument(span.clone()).await;
    count(&ctx.metrics, controller, started, &result);
    let uid = meta.uid.as_deref().unwrap_or_default();
    let e = match result {
        Ok(action) => {
            ctx.problems.clear(uid);
            return Ok(action);
        }
        Err(e) => e,
    };
    let message = e.to_string();
    if !e.is_expected() && ctx.problems.is_new(uid, e.category(), &message) {
        ctx.publish_event(obj, EventType::Warning, e.category(), "Reconcile", message)
            .instrument(span.clone())
            .await;
    }
    if e.is_transient() {
        // `error_policy` logs it and backs off.
        return Err(e);
    }
    // Handled: the reconcile said so in status. Retrying before the object
    // (or what it names) changes is waste; the long requeue is a safety net.
    span.in_scope(|| {
        tracing::warn!(
            category = e.category(),
            error = %e,
            "reconcile failed; waiting for a change"
        );
    });
    Ok(Action::requeue(REQUEUE_LONG))
}

/// One finished reconcile in the metrics.
fn count<E: Categorized>(
    metrics: &Metrics,
    controller: MetricsController,
    started: Instant,
    result: &Result<Action, E>,
) {
    let category = result.as_ref().err().map(Categorized::category);
    metrics.reconcile(controller, started.elapsed(), category);
}

/// Exponential backoff after `failures` failures in a row: `base`, doubled
/// each time, capped at `max`.
pub fn backoff(failures: u32, base: Duration, max: Duration) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(10);
    base.saturating_mul(factor).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_read_as_one_sentence() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "code": 400,
            "reason": "BadRequest",
            "message": "pod edge-0 does not have a host assigned",
        }))
        .unwrap();
        let e = kube::Error::Api(Box::new(status));
        let text = kube_message(&e);
        assert_eq!(
            text,
            "pod edge-0 does not have a host assigned (BadRequest)"
        );
        assert!(
            !text.contains("Status {") && !text.contains("Some("),
            "{text}"
        );
        let bare = kube::Error::Api(Box::new(
            serde_json::from_value(serde_json::json!({"code": 503})).unwrap(),
        ));
        assert_eq!(kube_message(&bare), "the API server answered HTTP 503");
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = |n| backoff(n, Duration::from_secs(5), Duration::from_secs(120));
        assert_eq!(b(1), Duration::from_secs(5));
        assert_eq!(b(2), Duration::from_secs(10));
        assert_eq!(b(4), Duration::from_secs(40));
        assert_eq!(b(9), Duration::from_secs(120));
        assert_eq!(b(100), Duration::from_secs(120));
    }
}
