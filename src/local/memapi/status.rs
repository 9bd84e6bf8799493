//! Failures as the API server reports them: an HTTP code plus a
//! `metav1.Status` body whose `reason` kube maps onto `kube::Error::Api`
//! (`is_not_found`, `is_conflict`, ...). Pure data, no I/O.

use serde_json::{Value, json};

use super::registry::ResourceInfo;

/// A failed request: becomes a `Status` response body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: String,
    pub(crate) message: String,
    details: Option<Value>,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_owned(),
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, info: &ResourceInfo, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": info.group, "kind": info.plural}));
        self
    }

    pub(crate) fn not_found(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", resource_name(info)),
        )
        .with_details(info, name)
    }

    pub(crate) fn already_exists(info: &ResourceInfo, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", resource_name(info)),
        )
        .with_details(info, name)
    }

    /// Optimistic-concurrency failure (stale resourceVersion or precondition).
    pub(crate) fn conflict(info: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                resource_name(info)
            ),
        )
        .with_details(info, name)
    }

    pub(crate) fn stale(info: &ResourceInfo, name: &str) -> Self {
        Self::conflict(
            info,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// Validation failure (422), as for a bad name, label or a failed
    /// JSON-patch `test`.
    pub(crate) fn invalid(info: &ResourceInfo, name: &str, why: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {why}", info.kind),
        )
        .with_details(info, name)
    }

    /// What the NamespaceLifecycle admission answers a create in a
    /// namespace that is being deleted (checked on kube-apiserver v1.36).
    pub(crate) fn namespace_terminating(info: &ResourceInfo, name: &str, namespace: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                resource_name(info)
            ),
        )
        .with_details(info, name)
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub(crate) fn unsupported_media(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format: {content_type}"),
        )
    }

    /// The `Status` object sent as the response body (and inside a watch
    /// `ERROR` event).
    pub(crate) fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// `configmaps` or `bindzones.bind.unkin.net`, as the real server words it.
fn resource_name(info: &ResourceInfo) -> String {
    if info.group.is_empty() {
        info.plural.clone()
    } else {
        format!("{}.{}", info.plural, info.group)
    }
}

/// The success `Status` returned by a delete that removed the object at once.
pub(crate) fn deleted_status(info: &ResourceInfo, name: &str, uid: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "group": info.group, "kind": info.plural, "uid": uid},
    })
}
