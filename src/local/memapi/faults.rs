//! Test hooks: per-verb request counters and injected failures ("the next N
//! patches of configmaps answer 409"). Pure bookkeeping; the service consults
//! it before handling each resource request.

use std::collections::BTreeMap;
use std::fmt;

use super::status::ApiError;

/// The API verb of a resource request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    /// Whether the verb changes state (create, update, patch, delete).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
        )
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        };
        f.write_str(s)
    }
}

/// A failure to inject: the next `count` requests matching every set filter
/// answer with `code`/`reason` instead of being handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// `None` matches every verb.
    pub verb: Option<Verb>,
    /// URL plural (`configmaps`); `None` matches every resource.
    pub resource: Option<String>,
    /// Object name; `None` matches every object and collection requests.
    pub name: Option<String>,
    /// `Some(true)` only `/status` requests, `Some(false)` only the main
    /// resource, `None` both.
    pub status_subresource: Option<bool>,
    pub count: usize,
    pub code: u16,
    pub reason: String,
    pub message: String,
}

impl Fault {
    /// Fails the next `verb` request on `resource` with 500 InternalError.
    pub fn new(verb: Verb, resource: &str) -> Self {
        Self {
            verb: Some(verb),
            resource: Some(resource.to_owned()),
            name: None,
            status_subresource: None,
            count: 1,
            code: 500,
            reason: "InternalError".into(),
            message: "injected fault".into(),
        }
    }

    /// How many matching requests fail.
    pub fn times(mut self, count: usize) -> Self {
        self.count = count;
        self
    }

    /// The HTTP code and `Status.reason` to answer with.
    pub fn status(mut self, code: u16, reason: &str) -> Self {
        self.code = code;
        self.reason = reason.to_owned();
        self
    }

    pub fn message(mut self, message: &str) -> Self {
        self.message = message.to_owned();
        self
    }

    /// Only requests for this object name.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Only `/status` requests (`true`) or only main-resource ones (`false`).
    pub fn on_status(mut self, status: bool) -> Self {
        self.status_subresource = Some(status);
        self
    }

    fn matches(&self, req: &RequestKey<'_>) -> bool {
        self.verb.is_none_or(|v| v == req.verb)
            && self.resource.as_deref().is_none_or(|r| r == req.resource)
            && self.name.as_deref().is_none_or(|n| Some(n) == req.name)
            && self.status_subresource.is_none_or(|s| s == req.status)
    }
}

/// What a fault or counter is matched against.
pub(crate) struct RequestKey<'a> {
    pub(crate) verb: Verb,
    pub(crate) resource: &'a str,
    pub(crate) name: Option<&'a str>,
    pub(crate) status: bool,
}

/// Counters and pending faults.
#[derive(Debug, Default)]
pub(crate) struct Hooks {
    counts: BTreeMap<(Verb, String), u64>,
    faults: Vec<Fault>,
}

impl Hooks {
    /// Counts the request, then consumes a matching fault if one is pending.
    pub(crate) fn on_request(&mut self, req: &RequestKey<'_>) -> Result<(), ApiError> {
        *self
            .counts
            .entry((req.verb, req.resource.to_owned()))
            .or_default() += 1;
        let Some(i) = self.faults.iter().position(|f| f.matches(req)) else {
            return Ok(());
        };
        let f = &mut self.faults[i];
        let err = ApiError::new(f.code, &f.reason, f.message.clone());
        f.count -= 1;
        if f.count == 0 {
            self.faults.remove(i);
        }
        Err(err)
    }

    pub(crate) fn add_fault(&mut self, fault: Fault) {
        if fault.count > 0 {
            self.faults.push(fault);
        }
    }

    pub(crate) fn clear_faults(&mut self) {
        self.faults.clear();
    }

    pub(crate) fn pending_faults(&self) -> usize {
        self.faults.iter().map(|f| f.count).sum()
    }

    pub(crate) fn count(&self, verb: Option<Verb>, resource: Option<&str>) -> u64 {
        self.counts
            .iter()
            .filter(|((v, r), _)| verb.is_none_or(|x| x == *v) && resource.is_none_or(|x| x == r))
            .map(|(_, n)| n)
            .sum()
    }

    pub(crate) fn writes(&self) -> u64 {
        self.counts
            .iter()
            .filter(|((v, _), _)| v.is_write())
            .map(|(_, n)| n)
            .sum()
    }

    pub(crate) fn reset_counts(&mut self) {
        self.counts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(verb: Verb, resource: &str) -> RequestKey<'_> {
        RequestKey {
            verb,
            resource,
            name: Some("a"),
            status: false,
        }
    }

    #[test]
    fn fault_fires_count_times_then_stops() {
        let mut h = Hooks::default();
        h.add_fault(
            Fault::new(Verb::Patch, "configmaps")
                .times(2)
                .status(409, "Conflict"),
        );
        assert!(h.on_request(&key(Verb::Get, "configmaps")).is_ok());
        assert!(h.on_request(&key(Verb::Patch, "secrets")).is_ok());
        let e = h.on_request(&key(Verb::Patch, "configmaps")).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
        assert!(h.on_request(&key(Verb::Patch, "configmaps")).is_err());
        assert!(h.on_request(&key(Verb::Patch, "configmaps")).is_ok());
        assert_eq!(h.count(Some(Verb::Patch), Some("configmaps")), 3);
        assert_eq!(h.writes(), 4);
    }
}
