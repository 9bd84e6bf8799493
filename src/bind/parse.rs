//! Parsers for what BIND's tools print: `named-checkconf` errors, nsupdate
//! failures, `rndc` errors and `zonestatus`, `dig` SOA answers and AXFR
//! output. Pure, no I/O.
//!
//! Parsed rdata of known types is canonicalised through [`Rdata`], so a
//! served RRset compares equal to the wanted one built from user input.

use std::collections::{BTreeMap, BTreeSet};

use super::name::{DomainName, ZoneName};
use super::rdata::{Rdata, RecordType};

/// One `file:line: message` from named-checkconf (which prints to stdout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckconfIssue {
    pub file: String,
    pub line: Option<u32>,
    pub message: String,
}

impl std::fmt::Display for CheckconfIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// Parses named-checkconf output. Lines without `file:line:` (zone-load
/// summaries, generic failures) become issues with `line: None` when they
/// look like errors; anything else is ignored.
pub fn parse_checkconf(output: &str) -> Vec<CheckconfIssue> {
    let mut out = Vec::new();
    for raw in output.lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, ':');
        let (a, b, c) = (parts.next(), parts.next(), parts.next());
        if let (Some(file), Some(num), Some(msg)) = (a, b, c)
            && let Ok(n) = num.trim().parse::<u32>()
        {
            out.push(CheckconfIssue {
                file: file.to_string(),
                line: Some(n),
                message: msg.trim().to_string(),
            });
            continue;
        }
        if let Some((file, msg)) = line.split_once(": ")
            && !file.contains(' ')
        {
            out.push(CheckconfIssue {
                file: file.to_string(),
                line: None,
                message: msg.trim().to_string(),
            });
        }
    }
    out
}

/// Why an nsupdate run failed, as nsupdate reports it on stderr.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NsupdateError {
    #[error("update refused (key not allowed, or sent to a secondary)")]
    Refused,
    #[error("update not authorized: unknown key (BADKEY)")]
    BadKey,
    #[error("update not authorized: bad signature (BADSIG)")]
    BadSig,
    #[error("update not authorized: clock skew (BADTIME)")]
    BadTime,
    #[error("update not authorized: server is not authoritative for the zone")]
    NotAuth,
    #[error("update names a record outside the zone (NOTZONE)")]
    NotZone,
    #[error("update prerequisite failed (YXDOMAIN)")]
    YxDomain,
    #[error("update prerequisite failed (NXDOMAIN)")]
    NxDomain,
    #[error("update prerequisite failed (YXRRSET)")]
    YxRrset,
    #[error("update prerequisite failed (NXRRSET)")]
    NxRrset,
    #[error("update failed on the server (SERVFAIL)")]
    ServFail,
    #[error("update message too large")]
    MessageTooLarge,
    #[error("could not reach the server")]
    Unreachable,
    #[error("update failed: {0}")]
    Other(String),
}

/// Longest stderr excerpt kept in [`NsupdateError::Other`].
const MAX_EXCERPT: usize = 200;

/// Classifies a failed nsupdate run from its stderr.
pub fn parse_nsupdate_failure(stderr: &str) -> NsupdateError {
    if let Some(rest) = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("update failed: "))
    {
        return match rest.trim() {
            "REFUSED" => NsupdateError::Refused,
            "NOTAUTH(BADKEY)" => NsupdateError::BadKey,
            "NOTAUTH(BADSIG)" => NsupdateError::BadSig,
            "NOTAUTH(BADTIME)" => NsupdateError::BadTime,
            "NOTAUTH" => NsupdateError::NotAuth,
            "NOTZONE" => NsupdateError::NotZone,
            "YXDOMAIN" => NsupdateError::YxDomain,
            "NXDOMAIN" => NsupdateError::NxDomain,
            "YXRRSET" => NsupdateError::YxRrset,
            "NXRRSET" => NsupdateError::NxRrset,
            "SERVFAIL" => NsupdateError::ServFail,
            other => NsupdateError::Other(excerpt(other)),
        };
    }
    let lower = stderr.to_ascii_lowercase();
    if lower.contains("ran out of space") || lower.contains("too large") {
        return NsupdateError::MessageTooLarge;
    }
    if lower.contains("connection refused")
        || lower.contains("timed out")
        || lower.contains("could not talk")
        || lower.contains("communications error")
    {
        return NsupdateError::Unreachable;
    }
    NsupdateError::Other(excerpt(stderr.lines().last().unwrap_or_default()))
}

fn excerpt(s: &str) -> String {
    s.trim().chars().take(MAX_EXCERPT).collect()
}

/// An rndc failure as the operator needs to tell it apart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RndcError {
    #[error("zone not found")]
    NotFound,
    #[error("zone already exists")]
    AlreadyExists,
    #[error("could not reach the control channel")]
    Unreachable,
    /// named could not configure the zone from the clause (addzone or
    /// modzone): `configure_zone failed: <why>`, e.g. a `dnssec-policy`
    /// named.conf does not define (named's log names it; rndc says only
    /// "not found", which is not about the zone).
    #[error("named refused the zone's configuration ({0})")]
    ClauseRefused(String),
    #[error("rndc failed: {0}")]
    Other(String),
}

/// Classifies rndc's stderr.
pub fn parse_rndc_error(stderr: &str) -> RndcError {
    let lower = stderr.to_ascii_lowercase();
    if let Some(line) = stderr
        .lines()
        .find(|l| l.to_ascii_lowercase().contains("configure_zone failed"))
    {
        RndcError::ClauseRefused(excerpt(line.trim()))
    } else if lower.contains("not found") || lower.contains("no matching zone") {
        RndcError::NotFound
    } else if lower.contains("already exists") {
        RndcError::AlreadyExists
    } else if lower.contains("connection refused")
        || lower.contains("connect failed")
        || lower.contains("timed out")
    {
        RndcError::Unreachable
    } else {
        RndcError::Other(excerpt(
            stderr
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default(),
        ))
    }
}

/// What `rndc zonestatus` says about a zone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ZoneStatus {
    /// `primary`, `secondary`, ...
    pub zone_type: String,
    /// None when the zone is not loaded.
    pub serial: Option<u32>,
    pub files: Vec<String>,
    pub dynamic: bool,
    /// False when named configured the zone but could not load it (a
    /// missing zone file: reconfig succeeds but the zone SERVFAILs).
    pub loaded: bool,
    /// `secure: yes`: the zone is served signed.
    pub secure: bool,
    /// The `dnssec-policy` named applies to the zone; None when it shows
    /// none (BIND 9.20 after a modzone that added one: not applied yet).
    pub dnssec_policy: Option<String>,
}

/// Parses `rndc zonestatus` output (`key: value` lines).
pub fn parse_zonestatus(stdout: &str) -> ZoneStatus {
    let mut st = ZoneStatus::default();
    for line in stdout.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "type" => st.zone_type = v.to_string(),
            "serial" => st.serial = v.parse().ok(),
            "files" => st.files = v.split(',').map(|s| s.trim().to_string()).collect(),
            "dynamic" => st.dynamic = v == "yes",
            "secure" => st.secure = v == "yes",
            "dnssec-policy" => st.dnssec_policy = Some(v.to_string()),
            "loaded serial" | "last loaded" => st.loaded = true,
            _ => {}
        }
    }
    if st.serial.is_some() {
        st.loaded = true;
    }
    if stdout.contains("not loaded") {
        st.loaded = false;
    }
    st
}

/// One RR line of dig output: owner, ttl, type and the rdata text (the
/// rest of the line, inner spacing kept for quoted strings).
fn rr_fields(line: &str) -> Option<(&str, u32, &str, &str)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with(';') {
        return None;
    }
    let mut rest = line;
    let mut fields = [""; 4];
    for f in &mut fields {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        *f = &rest[..end];
        rest = &rest[end..];
    }
    let [owner, ttl, class, rtype] = fields;
    if class != "IN" || rtype.is_empty() {
        return None;
    }
    Some((owner, ttl.parse().ok()?, rtype, rest.trim()))
}

/// Serials from `dig +noall +answer ... Z SOA ...`, by zone.
pub fn parse_dig_soa(stdout: &str) -> BTreeMap<ZoneName, u32> {
    let mut out = BTreeMap::new();
    for line in stdout.lines() {
        let Some((owner, _, rtype, rdata)) = rr_fields(line) else {
            continue;
        };
        if rtype != "SOA" {
            continue;
        }
        let Ok(zone) = ZoneName::parse(owner) else {
            continue;
        };
        if let Some(serial) = rdata.split_whitespace().nth(2).and_then(|s| s.parse().ok()) {
            out.insert(zone, serial);
        }
    }
    out
}

/// An RRset as a server holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedRrset {
    pub name: DomainName,
    /// The mnemonic; types this crate does not manage keep their own text.
    pub rtype: String,
    pub ttl: u32,
    /// Canonical rdata text (see [`Rdata`]'s `Display`) for known types, the
    /// server's text otherwise.
    pub values: BTreeSet<String>,
}

impl ServedRrset {
    /// The record type, when it is one this crate manages.
    pub fn record_type(&self) -> Option<RecordType> {
        self.rtype.parse().ok()
    }
}

/// Groups `dig AXFR` output into RRsets, sorted by (name, type). Transfer
/// errors come back as `Err` with dig's message.
pub fn parse_axfr(stdout: &str, zone: &ZoneName) -> Result<Vec<ServedRrset>, String> {
    if let Some(l) = stdout.lines().find(|l| {
        l.contains("Transfer failed")
            || l.contains("; communications error")
            || l.contains("connection refused")
    }) {
        return Err(excerpt(l.trim_start_matches(';').trim()));
    }
    let mut sets: BTreeMap<(DomainName, String), ServedRrset> = BTreeMap::new();
    let mut saw_soa = false;
    for line in stdout.lines() {
        let Some((owner, ttl, rtype, rdata)) = rr_fields(line) else {
            continue;
        };
        if rtype == "TSIG" {
            continue;
        }
        saw_soa |= rtype == "SOA";
        let Ok(name) = DomainName::parse_absolute(owner) else {
            continue;
        };
        let value = rtype
            .parse::<RecordType>()
            .ok()
            .and_then(|t| Rdata::parse(t, rdata, zone).ok())
            .map(|r| r.to_string())
            .unwrap_or_else(|| rdata.to_string());
        sets.entry((name.clone(), rtype.to_string()))
            .or_insert_with(|| ServedRrset {
                name,
                rtype: rtype.to_string(),
                ttl,
                values: BTreeSet::new(),
            })
            .values
            .insert(value);
    }
    if !saw_soa {
        return Err("transfer returned no SOA".into());
    }
    Ok(sets.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkconf_lines() {
        let out = "named.conf:12: unknown option 'bogus'\nconfig/keys.conf:3: missing ';' before '}'\nnamed.conf: could not open\n";
        let issues = parse_checkconf(out);
        assert_eq!(issues.len(), 3);
        assert_eq!(
            issues[0].to_string(),
            "named.conf:12: unknown option 'bogus'"
        );
        assert_eq!(issues[1].line, Some(3));
        assert_eq!(issues[2].line, None);
    }

    #[test]
    fn nsupdate_failures() {
        let p = parse_nsupdate_failure;
        assert_eq!(
            p("; TSIG error with server: tsig indicates error\nupdate failed: NOTAUTH(BADSIG)\n"),
            NsupdateError::BadSig
        );
        assert_eq!(p("update failed: NOTAUTH(BADKEY)"), NsupdateError::BadKey);
        assert_eq!(p("update failed: NOTAUTH"), NsupdateError::NotAuth);
        assert_eq!(p("update failed: REFUSED"), NsupdateError::Refused);
        assert_eq!(p("update failed: NOTZONE"), NsupdateError::NotZone);
        assert_eq!(p("update failed: YXDOMAIN"), NsupdateError::YxDomain);
        assert_eq!(p("update failed: SERVFAIL"), NsupdateError::ServFail);
        assert_eq!(
            p("dns_request_createvia: ran out of space"),
            NsupdateError::MessageTooLarge
        );
        assert_eq!(
            p("; Communication with 127.0.0.1#53 failed: connection refused"),
            NsupdateError::Unreachable
        );
    }

    #[test]
    fn dig_soa_and_axfr() {
        let soa = "example.com.\t\t300\tIN\tSOA\tns1.example.com. hostmaster.example.com. 1700000001 3600 600 604800 300\nb.org. 60 IN SOA a. b. 7 1 1 1 1\n";
        let m = parse_dig_soa(soa);
        assert_eq!(m[&ZoneName::parse("example.com").unwrap()], 1_700_000_001);
        assert_eq!(m.len(), 2);

        let z = ZoneName::parse("example.com").unwrap();
        let axfr = "example.com.\t300\tIN\tSOA\tns1.example.com. hostmaster.example.com. 5 3600 600 604800 300\n\
                    example.com.\t300\tIN\tNS\tns1.example.com.\n\
                    www.example.com.\t60\tIN\tA\t192.0.2.2\n\
                    www.example.com.\t60\tIN\tA\t192.0.2.1\n\
                    t.example.com.\t60\tIN\tTXT\t\"a\\\"b\" \"c\"\n\
                    xfer.\t0\tANY\tTSIG\thmac-sha256. 1 300 32 X 1 NOERROR 0\n";
        let sets = parse_axfr(axfr, &z).unwrap();
        let www = sets
            .iter()
            .find(|s| s.name.as_str() == "www.example.com")
            .unwrap();
        assert_eq!(
            www.values.iter().cloned().collect::<Vec<_>>(),
            ["192.0.2.1", "192.0.2.2"]
        );
        let t = sets.iter().find(|s| s.rtype == "TXT").unwrap();
        assert!(t.values.contains("\"a\\\"b\" \"c\""));
        assert!(parse_axfr("; Transfer failed.\n", &z).is_err());
    }

    #[test]
    fn zonestatus_fields() {
        let st = parse_zonestatus(
            "name: q.test\ntype: primary\nfiles: zones/q.test.db\nserial: 1\nnodes: 2\nlast loaded: Wed\ndynamic: yes\n",
        );
        assert_eq!(st.serial, Some(1));
        assert!(st.loaded && st.dynamic);
        assert_eq!(st.zone_type, "primary");
        assert_eq!(
            parse_rndc_error(
                "rndc: 'zonestatus' failed: not found\nno matching zone 'x' in any view\n"
            ),
            RndcError::NotFound
        );
    }

    #[test]
    fn zonestatus_dnssec_fields_and_refused_clauses() {
        // BIND 9.20 output of an inline-signed zone.
        let st = parse_zonestatus(
            "name: a.test\ntype: primary\nfiles: zones/a.test.db\nserial: 1\nsigned serial: 3\nsecure: yes\ninline signing: yes\nkey maintenance: automatic\ndynamic: no\ndnssec-policy: default\n",
        );
        assert_eq!(st.serial, Some(1));
        assert!(st.secure);
        assert_eq!(st.dnssec_policy.as_deref(), Some("default"));
        let plain = parse_zonestatus("name: b.test\ntype: primary\nserial: 1\nsecure: no\n");
        assert!(!plain.secure && plain.dnssec_policy.is_none());
        // What rndc prints for `dnssec-policy nosuch` (both 9.18 and 9.20):
        // not a missing zone.
        assert_eq!(
            parse_rndc_error(
                "rndc: 'addzone' failed: not found\nconfigure_zone failed: not found\n"
            ),
            RndcError::ClauseRefused("configure_zone failed: not found".into())
        );
    }
}
