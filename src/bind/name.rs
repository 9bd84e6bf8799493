//! Domain names as BIND sees them: zone names, absolute names and owner-name
//! resolution (`@`, relative, absolute with trailing dot). Pure values, no I/O.
//!
//! Names are deliberately stricter than DNS allows: only letters, digits,
//! hyphen and underscore in labels (plus a leading `*` wildcard label for
//! owners). That alphabet can never break out of a quoted named.conf string,
//! an nsupdate line or a shell argument, and it is what real zones use.
//! Names are stored lowercase so equal names compare and render equal.

use std::fmt;

use super::error::ValidationError;

/// Longest textual name (without the trailing dot) DNS can encode in 255 wire octets.
const MAX_NAME_TEXT_LEN: usize = 253;
/// Longest DNS label.
const MAX_LABEL_LEN: usize = 63;

/// An absolute domain name, stored lowercase without the trailing dot; the
/// root is the empty string. Labels use `[a-z0-9_-]`, and the leftmost label
/// may be `*` (a wildcard owner).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DomainName(String);

/// The name of a zone: a [`DomainName`] without a wildcard label.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ZoneName(DomainName);

fn check_label(label: &str, whole: &str, allow_wildcard: bool) -> Result<(), ValidationError> {
    let bad = |reason: &str| ValidationError::new("domain name", whole, reason);
    if label.is_empty() {
        return Err(bad("has an empty label"));
    }
    if label.len() > MAX_LABEL_LEN {
        return Err(bad("has a label longer than 63 characters"));
    }
    if label == "*" {
        return if allow_wildcard {
            Ok(())
        } else {
            Err(bad("has a wildcard label where none is allowed"))
        };
    }
    if !label
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(bad(
            "may only contain letters, digits, '-', '_' and '.' (and a leading '*' label)",
        ));
    }
    Ok(())
}

impl DomainName {
    /// The root name `.`.
    pub fn root() -> Self {
        DomainName(String::new())
    }

    /// Parses an absolute name; the trailing dot is optional here because the
    /// caller has already decided the text is absolute (a zone name, a key
    /// name). Use [`DomainName::resolve`] for owner names that may be relative.
    pub fn parse_absolute(text: &str) -> Result<Self, ValidationError> {
        let t = text.strip_suffix('.').unwrap_or(text);
        if t.is_empty() {
            if text == "." {
                return Ok(Self::root());
            }
            return Err(ValidationError::new("domain name", text, "is empty"));
        }
        Self::from_labels_text(t, text)
    }

    fn from_labels_text(t: &str, whole: &str) -> Result<Self, ValidationError> {
        if t.len() > MAX_NAME_TEXT_LEN {
            return Err(ValidationError::new(
                "domain name",
                whole,
                "is longer than 253 characters",
            ));
        }
        for (i, label) in t.split('.').enumerate() {
            check_label(label, whole, i == 0)?;
        }
        Ok(DomainName(t.to_ascii_lowercase()))
    }

    /// Resolves an owner name against its zone, the way a zone file does:
    /// `@` or empty is the apex, a name with a trailing dot is absolute,
    /// anything else is relative to the zone. The result must lie inside the
    /// zone.
    pub fn resolve(owner: &str, zone: &ZoneName) -> Result<Self, ValidationError> {
        let name = if owner.is_empty() || owner == "@" {
            zone.as_domain().clone()
        } else if owner.ends_with('.') {
            Self::parse_absolute(owner)?
        } else {
            let rel = Self::from_labels_text(owner, owner)?;
            rel.join(zone.as_domain())
                .ok_or_else(|| ValidationError::new("owner name", owner, "is too long"))?
        };
        if !name.is_within(zone.as_domain()) {
            return Err(ValidationError::new(
                "owner name",
                owner,
                &format!("is outside zone {zone}"),
            ));
        }
        Ok(name)
    }

    /// Like [`DomainName::resolve`] but for names inside rdata (CNAME
    /// targets, MX exchanges): relative names are relative to the zone, yet
    /// the result may lie anywhere.
    pub fn resolve_target(target: &str, zone: &ZoneName) -> Result<Self, ValidationError> {
        if target == "@" {
            return Ok(zone.as_domain().clone());
        }
        if target.ends_with('.') {
            return Self::parse_absolute(target);
        }
        let rel = Self::from_labels_text(target, target)?;
        rel.join(zone.as_domain())
            .ok_or_else(|| ValidationError::new("domain name", target, "is too long"))
    }

    fn join(&self, suffix: &DomainName) -> Option<DomainName> {
        let joined = match (self.0.is_empty(), suffix.0.is_empty()) {
            (true, _) => suffix.0.clone(),
            (false, true) => self.0.clone(),
            (false, false) => format!("{}.{}", self.0, suffix.0),
        };
        (joined.len() <= MAX_NAME_TEXT_LEN).then_some(DomainName(joined))
    }

    /// True when `self` equals `ancestor` or lies below it.
    pub fn is_within(&self, ancestor: &DomainName) -> bool {
        ancestor.0.is_empty()
            || self.0 == ancestor.0
            || self
                .0
                .strip_suffix(&ancestor.0)
                .is_some_and(|head| head.ends_with('.'))
    }

    /// True for the root name.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The name with its trailing dot, as BIND and nsupdate want it.
    pub fn fqdn(&self) -> String {
        format!("{}.", self.0)
    }

    /// The name without the trailing dot (`.` for the root).
    pub fn as_str(&self) -> &str {
        if self.0.is_empty() { "." } else { &self.0 }
    }

    /// Conservative wire length: one length octet per label plus the root.
    pub fn wire_len(&self) -> usize {
        if self.0.is_empty() {
            1
        } else {
            self.0.len() + 2
        }
    }

    /// The leftmost label is `*`.
    pub fn is_wildcard(&self) -> bool {
        self.0 == "*" || self.0.starts_with("*.")
    }
}

impl fmt::Display for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.fqdn())
    }
}

impl fmt::Debug for DomainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DomainName({})", self.fqdn())
    }
}

impl ZoneName {
    /// Parses a zone name (trailing dot optional; `.` is the root zone).
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let name = DomainName::parse_absolute(text).map_err(|e| e.with_what("zone name"))?;
        if name.is_wildcard() {
            return Err(ValidationError::new(
                "zone name",
                text,
                "must not contain a wildcard label",
            ));
        }
        Ok(ZoneName(name))
    }

    /// The zone's apex as a domain name.
    pub fn as_domain(&self) -> &DomainName {
        &self.0
    }

    /// The zone name without the trailing dot, as named.conf writes it.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The zone name with its trailing dot.
    pub fn fqdn(&self) -> String {
        self.0.fqdn()
    }

    /// A file-name stem for this zone. Zone names cannot contain `/`, so the
    /// name itself is safe; the root zone gets `@` (which no label can hold).
    pub fn file_stem(&self) -> &str {
        if self.0.is_root() { "@" } else { &self.0.0 }
    }

    /// Builds a zone name from an already valid domain name.
    pub fn from_domain(name: DomainName) -> Result<Self, ValidationError> {
        if name.is_wildcard() {
            return Err(ValidationError::new(
                "zone name",
                name.as_str(),
                "must not contain a wildcard label",
            ));
        }
        Ok(ZoneName(name))
    }
}

impl fmt::Display for ZoneName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ZoneName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZoneName({})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(z: &str) -> ZoneName {
        ZoneName::parse(z).unwrap()
    }

    #[test]
    fn owner_names_resolve_like_a_zone_file() {
        let z = zone("Example.COM");
        let r = |o: &str| DomainName::resolve(o, &z).map(|n| n.fqdn());
        assert_eq!(r("@").unwrap(), "example.com.");
        assert_eq!(r("").unwrap(), "example.com.");
        assert_eq!(r("www").unwrap(), "www.example.com.");
        assert_eq!(r("WWW.example.com.").unwrap(), "www.example.com.");
        assert_eq!(r("example.com.").unwrap(), "example.com.");
        // No trailing dot means relative, even when it spells the zone.
        assert_eq!(r("example.com").unwrap(), "example.com.example.com.");
        assert_eq!(r("*.dev").unwrap(), "*.dev.example.com.");
        assert_eq!(r("_sip._tcp").unwrap(), "_sip._tcp.example.com.");
        assert!(r("www.other.org.").is_err());
        assert!(r("notexample.com.").is_err());
    }

    #[test]
    fn hostile_names_are_rejected() {
        for bad in [
            "a\"b", "a;b", "a b", "a{b", "a}b", "a\nb", "a..b", "a\\046b", "include", "é", "a/b",
            "dev.*",
        ] {
            let res = ZoneName::parse(bad);
            if bad == "include" {
                assert!(res.is_ok(), "a plain label is fine");
            } else {
                assert!(res.is_err(), "{bad:?} must be rejected");
            }
        }
        assert!(DomainName::parse_absolute(&"a".repeat(64)).is_err());
        assert!(DomainName::parse_absolute(&["abc"; 70].join(".")).is_err());
        assert!(ZoneName::parse("*.example.com").is_err());
    }

    #[test]
    fn root_zone_and_within() {
        let root = zone(".");
        assert_eq!(root.fqdn(), ".");
        assert_eq!(root.file_stem(), "@");
        let n = DomainName::parse_absolute("a.b.c").unwrap();
        assert!(n.is_within(root.as_domain()));
        assert!(n.is_within(&DomainName::parse_absolute("b.c").unwrap()));
        assert!(!n.is_within(&DomainName::parse_absolute("a.b").unwrap()));
        assert_eq!(n.wire_len(), 7);
    }

    #[test]
    fn targets_resolve_relative_to_zone() {
        let z = zone("example.com");
        let t = |s: &str| DomainName::resolve_target(s, &z).unwrap().fqdn();
        assert_eq!(t("mail"), "mail.example.com.");
        assert_eq!(t("mail.other.org."), "mail.other.org.");
        assert_eq!(t("@"), "example.com.");
    }
}
