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
}
