//! The error pattern every reconciler follows: a thiserror enum per step
//! whose variants carry context, plus a static, bounded category string per
//! variant. The category is the Event reason and the log/metric label
//! (never a Debug string); [`is_transient`](Categorized::is_transient) tells
//! a failure worth retrying from a bad spec that must wait for a change.
//!
//! Touches the cluster only through [`report`] (one Event). Error messages
//! never carry key material.

use std::sync::Arc;

use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::context::{Context, REQUEUE_LONG, REQUEUE_SHORT};

/// A reconcile error with a category.
pub trait Categorized: std::error::Error {
    /// Static, PascalCase, bounded: the Event reason and the log label.
    fn category(&self) -> &'static str;
    /// True: retry with backoff (API hiccup, pod busy). False: the object
    /// (or what it refers to) is wrong; retrying before it changes is waste.
    fn is_transient(&self) -> bool;
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
/// publish Events: it is synchronous; reconcilers call [`report`].)
pub fn error_policy<K, E>(obj: Arc<K>, err: &E, _ctx: Arc<Context>) -> Action
where
    K: Resource<DynamicType = ()>,
    E: Categorized,
{
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

/// Publishes a Warning Event for `err` on `obj` (reason = category).
pub async fn report<K, E>(ctx: &Context, obj: &K, action: &str, err: &E)
where
    K: Resource<DynamicType = ()>,
    E: Categorized,
{
    ctx.publish_event(
        obj,
        EventType::Warning,
        err.category(),
        action,
        err.to_string(),
    )
    .await;
}
