//! The one validation error every BIND newtype returns. Pure, no I/O.
//!
//! The offending value is printed with Rust's escaping (`{:?}`), so a newline
//! or quote in user input shows up as `\n` / `\"` in a status message instead
//! of breaking it. Secret values (TSIG key material) must never be put here:
//! their validators pass a placeholder instead.

use std::fmt;

/// A user-supplied value that BIND must never see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    what: String,
    value: String,
    reason: String,
}

impl ValidationError {
    /// `what` names the field kind ("zone name"), `value` is the rejected
    /// input, `reason` says why in lowercase.
    pub fn new(what: &str, value: &str, reason: &str) -> Self {
        ValidationError {
            what: what.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Renames the kind of value (a domain-name error raised for a zone name).
    pub fn with_what(mut self, what: &str) -> Self {
        self.what = what.to_string();
        self
    }

    /// Prefixes a location such as `spec.records[2].values[0]`.
    pub fn at(mut self, field: &str) -> Self {
        self.what = format!("{field}: {}", self.what);
        self
    }

    /// Why the value was rejected.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {} {:?}: {}", self.what, self.value, self.reason)
    }
}
