//! Record types and rdata: parsing user values (presentation format) into
//! typed rdata, and writing them back in exactly the form `dig` prints in an
//! AXFR (BIND 9.18 and 9.20 print the same), so a wanted RRset and the one
//! named serves compare equal as text and nothing is rewritten on the next
//! transfer. Pure, no I/O.
//!
//! Every admitted type is typed down to its wire fields, so two spellings of
//! one rdata are one value: names lowercase and absolute, AAAA and SVCB
//! hints as BIND's `inet_ntop` writes them ([`text`]), DS/SSHFP/TLSA hex
//! upper case in dig's 56-digit chunks, SVCB/HTTPS parameters sorted and
//! quoted as BIND quotes them ([`svcb`]), LOC with every field and BIND's
//! rounding ([`loc`]). Parsing dig's own text gives the same value back.
//!
//! Hand-written rather than `hickory-proto` or `domain`, decided by
//! correctness against BIND's text: hickory-proto's SVCB `alpn` prints its
//! ids unquoted with a trailing comma (named: `alpn="h2,h3"`) and it has no
//! LOC type; both crates print addresses with Rust's `Ipv6Addr` (`::c000:201`
//! where named prints `::192.0.2.1`) and neither splits hex the way dig
//! does. A printer of our own would be needed on top of either, and the
//! names here are deliberately narrower than DNS allows (see
//! [`super::name`]), so a crate would add a second name type to police.
//!
//! Only a fixed set of types is accepted, each with a parser that admits no
//! newline or other control character. What goes into an nsupdate script is
//! never the user's text but this module's `Display` of the typed value, in
//! which every string is quoted and escaped: nothing can break out of its
//! line.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::error::ValidationError;
use super::name::{DomainName, ZoneName};

pub mod loc;
pub mod svcb;
pub mod text;

pub use loc::Loc;
pub use svcb::{SvcValue, Svcb};

/// Longest character-string inside TXT/CAA rdata.
pub const MAX_CHARSTRING_LEN: usize = 255;

/// Record types the operator manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordType {
    A,
    Aaaa,
    Cname,
    Dname,
    Ns,
    Ptr,
    Mx,
    Txt,
    Srv,
    Caa,
    Sshfp,
    Tlsa,
    Ds,
    Naptr,
    Svcb,
    Https,
    Loc,
}

impl RecordType {
    pub const ALL: [RecordType; 17] = [
        RecordType::A,
        RecordType::Aaaa,
        RecordType::Cname,
        RecordType::Dname,
        RecordType::Ns,
        RecordType::Ptr,
        RecordType::Mx,
        RecordType::Txt,
        RecordType::Srv,
        RecordType::Caa,
        RecordType::Sshfp,
        RecordType::Tlsa,
        RecordType::Ds,
        RecordType::Naptr,
        RecordType::Svcb,
        RecordType::Https,
        RecordType::Loc,
    ];

    /// The mnemonic as BIND writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordType::A => "A",
            RecordType::Aaaa => "AAAA",
            RecordType::Cname => "CNAME",
            RecordType::Dname => "DNAME",
            RecordType::Ns => "NS",
            RecordType::Ptr => "PTR",
            RecordType::Mx => "MX",
            RecordType::Txt => "TXT",
            RecordType::Srv => "SRV",
            RecordType::Caa => "CAA",
            RecordType::Sshfp => "SSHFP",
            RecordType::Tlsa => "TLSA",
            RecordType::Ds => "DS",
            RecordType::Naptr => "NAPTR",
            RecordType::Svcb => "SVCB",
            RecordType::Https => "HTTPS",
            RecordType::Loc => "LOC",
        }
    }
}

impl FromStr for RecordType {
    type Err = ValidationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let upper = s.to_ascii_uppercase();
        RecordType::ALL
            .into_iter()
            .find(|t| t.as_str() == upper)
            .ok_or_else(|| {
                ValidationError::new(
                    "record type",
                    s,
                    "must be one of A, AAAA, CNAME, DNAME, NS, PTR, MX, TXT, SRV, CAA, SSHFP, TLSA, DS, NAPTR, SVCB, HTTPS, LOC",
                )
            })
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One record's data, typed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rdata {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    /// CNAME, DNAME, NS, PTR targets.
    Name(DomainName),
    Mx {
        preference: u16,
        exchange: DomainName,
    },
    /// Character-strings, each at most 255 bytes.
    Txt(Vec<Vec<u8>>),
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: DomainName,
    },
    Caa {
        flags: u8,
        /// Lowercase: CAA tags match case-insensitively (RFC 8659).
        tag: String,
        value: Vec<u8>,
    },
    Sshfp {
        algorithm: u8,
        fp_type: u8,
        fingerprint: Vec<u8>,
    },
    Tlsa {
        usage: u8,
        selector: u8,
        matching: u8,
        data: Vec<u8>,
    },
    Ds {
        key_tag: u16,
        algorithm: u8,
        digest_type: u8,
        digest: Vec<u8>,
    },
    Naptr {
        order: u16,
        preference: u16,
        flags: Vec<u8>,
        service: Vec<u8>,
        regexp: Vec<u8>,
        replacement: DomainName,
    },
    /// SVCB and HTTPS (same rdata, the type tells them apart).
    Svcb(Svcb),
    Loc(Loc),
}

/// Digest lengths BIND checks for DS (SHA-1, SHA-256, SHA-384) and SSHFP
/// (SHA-1, SHA-256); other digest types take any length.
fn digest_len(rtype: RecordType, digest_type: u8) -> Option<usize> {
    match (rtype, digest_type) {
        (RecordType::Ds | RecordType::Sshfp, 1) => Some(20),
        (RecordType::Ds | RecordType::Sshfp, 2) => Some(32),
        (RecordType::Ds, 4) => Some(48),
        _ => None,
    }
}

/// BIND's host name rule (`dns_name_ishostname`): every label of letters,
/// digits and '-', starting and ending with a letter or digit; with
/// `wildcard`, a leading `*` label too. The root is one (a null MX or SRV
/// target).
fn is_hostname(name: &DomainName, wildcard: bool) -> bool {
    if name.is_root() {
        return true;
    }
    let mut labels = name.as_str().split('.').peekable();
    if wildcard && labels.peek() == Some(&"*") {
        labels.next();
    }
    labels.all(|l| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    })
}

/// Why a name is refused where BIND's check-names wants a host name.
const HOST_NAME_RULE: &str = "BIND's check-names wants a host name here (labels of letters, digits and '-', not starting or ending with '-')";

fn bad(rtype: RecordType, value: &str, reason: &str) -> ValidationError {
    ValidationError::new(&format!("{rtype} value"), value, reason)
}

fn num<T: FromStr>(
    rtype: RecordType,
    value: &str,
    field: Option<&str>,
) -> Result<T, ValidationError> {
    field
        .filter(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| bad(rtype, value, "has a missing or out-of-range number"))
}

impl Rdata {
    /// Parses one value of `rtype`. Relative names in rdata are relative to
    /// `zone`, like in a zone file.
    pub fn parse(rtype: RecordType, value: &str, zone: &ZoneName) -> Result<Self, ValidationError> {
        if value.chars().any(|c| c.is_control()) {
            return Err(bad(
                rtype,
                value,
                "must not contain control characters such as newlines",
            ));
        }
        let v = value.trim();
        if v.is_empty() {
            return Err(bad(rtype, value, "is empty"));
        }
        let fields: Vec<&str> = v.split_whitespace().collect();
        let name = |s: &str| {
            DomainName::resolve_target(s, zone).map_err(|e| e.at(&format!("{rtype} value")))
        };
        let count = |n: usize| {
            if fields.len() == n {
                Ok(())
            } else {
                Err(bad(rtype, value, &format!("must have {n} field(s)")))
            }
        };
        Ok(match rtype {
            RecordType::A => Rdata::A(
                v.parse()
                    .map_err(|_| bad(rtype, value, "is not an IPv4 address"))?,
            ),
            RecordType::Aaaa => Rdata::Aaaa(
                v.parse()
                    .map_err(|_| bad(rtype, value, "is not an IPv6 address"))?,
            ),
            RecordType::Cname | RecordType::Dname | RecordType::Ns | RecordType::Ptr => {
                count(1)?;
                Rdata::Name(name(v)?)
            }
            RecordType::Mx => {
                count(2)?;
                Rdata::Mx {
                    preference: num(rtype, value, fields.first().copied())?,
                    exchange: name(fields[1])?,
                }
            }
            RecordType::Srv => {
                count(4)?;
                Rdata::Srv {
                    priority: num(rtype, value, Some(fields[0]))?,
                    weight: num(rtype, value, Some(fields[1]))?,
                    port: num(rtype, value, Some(fields[2]))?,
                    target: name(fields[3])?,
                }
            }
            RecordType::Txt => {
                let strings = if v.starts_with('"') {
                    parse_charstrings(v).map_err(|r| bad(rtype, value, r))?
                } else {
                    // A bare value is one string, taken as written: its
                    // leading and trailing spaces are part of the text.
                    vec![value.as_bytes().to_vec()]
                };
                Rdata::Txt(split_long(strings))
            }
            RecordType::Caa => {
                let mut parts = v.splitn(3, char::is_whitespace);
                let flags = num(rtype, value, parts.next())?;
                let tag = parts.next().unwrap_or_default().to_ascii_lowercase();
                if tag.is_empty()
                    || tag.len() > 15
                    || !tag.bytes().all(|b| b.is_ascii_alphanumeric())
                {
                    return Err(bad(rtype, value, "has an invalid tag"));
                }
                // One character-string, quoted or a bare word (escapes
                // decoded either way, as BIND does).
                let mut s = parse_charstrings(parts.next().unwrap_or_default().trim())
                    .map_err(|r| bad(rtype, value, r))?;
                if s.len() != 1 {
                    return Err(bad(rtype, value, "must have a single value"));
                }
                Rdata::Caa {
                    flags,
                    tag,
                    value: s.remove(0),
                }
            }
            RecordType::Naptr => {
                let t = parse_charstrings(v).map_err(|r| bad(rtype, value, r))?;
                if t.len() != 6 {
                    return Err(bad(
                        rtype,
                        value,
                        "must have 6 fields: order preference flags service regexp replacement",
                    ));
                }
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                Rdata::Naptr {
                    order: num(rtype, value, Some(&text(&t[0])))?,
                    preference: num(rtype, value, Some(&text(&t[1])))?,
                    flags: t[2].clone(),
                    service: t[3].clone(),
                    regexp: t[4].clone(),
                    replacement: name(&text(&t[5]))?,
                }
            }
            RecordType::Svcb | RecordType::Https => {
                let tokens = text::tokens(v).map_err(|r| bad(rtype, value, r))?;
                if tokens.len() < 2 {
                    return Err(bad(rtype, value, "must have a priority and a target"));
                }
                let priority = num(rtype, value, Some(tokens[0]))?;
                let target = name(tokens[1])?;
                Rdata::Svcb(
                    Svcb::parse(priority, target, &tokens[2..])
                        .map_err(|r| bad(rtype, value, &r))?,
                )
            }
            RecordType::Loc => Rdata::Loc(Loc::parse(&fields).map_err(|r| bad(rtype, value, &r))?),
            RecordType::Sshfp => {
                if fields.len() < 3 {
                    return Err(bad(rtype, value, "must have 3 fields"));
                }
                let fp_type = num(rtype, value, Some(fields[1]))?;
                Rdata::Sshfp {
                    algorithm: num(rtype, value, Some(fields[0]))?,
                    fp_type,
                    fingerprint: hex_field(rtype, value, &fields[2..], fp_type)?,
                }
            }
            RecordType::Tlsa => {
                if fields.len() < 4 {
                    return Err(bad(rtype, value, "must have 4 fields"));
                }
                let matching = num(rtype, value, Some(fields[2]))?;
                Rdata::Tlsa {
                    usage: num(rtype, value, Some(fields[0]))?,
                    selector: num(rtype, value, Some(fields[1]))?,
                    matching,
                    data: hex_field(rtype, value, &fields[3..], matching)?,
                }
            }
            RecordType::Ds => {
                if fields.len() < 4 {
                    return Err(bad(rtype, value, "must have 4 fields"));
                }
                let digest_type = num(rtype, value, Some(fields[2]))?;
                Rdata::Ds {
                    key_tag: num(rtype, value, Some(fields[0]))?,
                    algorithm: num(rtype, value, Some(fields[1]))?,
                    digest_type,
                    digest: hex_field(rtype, value, &fields[3..], digest_type)?,
                }
            }
        })
    }

    /// Checks that depend on the owner name as well as the rdata (BIND
    /// refuses the whole update otherwise): an SVCB at a `_dns` name; the
    /// host names BIND's `check-names` wants (the owner of an A/AAAA, the
    /// target of an MX, NS or SRV: nsupdate refuses them before sending
    /// and aborts its whole run, named refuses them in an update and
    /// refuses to load a zone file holding one; measured, BIND_FACTS); and
    /// a wildcard NS (an update drops it silently, a zone file holding one
    /// does not load).
    pub fn check_owner(
        &self,
        rtype: RecordType,
        owner: &DomainName,
    ) -> Result<(), ValidationError> {
        let host = |what: &str, name: &DomainName, wildcard: bool| {
            if is_hostname(name, wildcard) {
                Ok(())
            } else {
                Err(ValidationError::new(
                    &format!("{rtype} {what}"),
                    name.as_str(),
                    HOST_NAME_RULE,
                ))
            }
        };
        Self::check_owner_name(rtype, owner)?;
        match self {
            Rdata::Svcb(s) if rtype == RecordType::Svcb => s
                .check_dns_owner(owner)
                .map_err(|r| bad(rtype, &self.to_string(), &r)),
            Rdata::Mx { exchange, .. } => host("target", exchange, false),
            Rdata::Srv { target, .. } => host("target", target, false),
            Rdata::Name(target) if rtype == RecordType::Ns => host("target", target, false),
            _ => Ok(()),
        }
    }

    /// The checks of [`Self::check_owner`] on the owner name alone, whatever
    /// the values: an A/AAAA owner must be a host name (a wildcard allowed),
    /// an NS owner no wildcard. Callers that know the owner's field report
    /// these against it, not against a value.
    pub fn check_owner_name(rtype: RecordType, owner: &DomainName) -> Result<(), ValidationError> {
        if matches!(rtype, RecordType::A | RecordType::Aaaa) && !is_hostname(owner, true) {
            return Err(ValidationError::new(
                &format!("{rtype} owner"),
                owner.as_str(),
                HOST_NAME_RULE,
            ));
        }
        if rtype == RecordType::Ns && owner.is_wildcard() {
            return Err(ValidationError::new(
                "NS owner",
                owner.as_str(),
                "BIND does not serve a wildcard NS (an update drops it, a zone file holding one does not load)",
            ));
        }
        Ok(())
    }

    /// A conservative estimate of the rdata's wire length (never below it).
    pub fn wire_len(&self) -> usize {
        match self {
            Rdata::A(_) => 4,
            Rdata::Aaaa(_) => 16,
            Rdata::Name(n) => n.wire_len(),
            Rdata::Mx { exchange, .. } => 2 + exchange.wire_len(),
            Rdata::Txt(strings) => strings.iter().map(|s| 1 + s.len()).sum(),
            Rdata::Srv { target, .. } => 6 + target.wire_len(),
            Rdata::Caa { tag, value, .. } => 2 + tag.len() + value.len(),
            Rdata::Sshfp { fingerprint, .. } => 2 + fingerprint.len(),
            Rdata::Tlsa { data, .. } => 3 + data.len(),
            Rdata::Ds { digest, .. } => 4 + digest.len(),
            Rdata::Naptr {
                flags,
                service,
                regexp,
                replacement,
                ..
            } => 4 + 3 + flags.len() + service.len() + regexp.len() + replacement.wire_len(),
            Rdata::Svcb(s) => s.wire_len(),
            Rdata::Loc(_) => 16,
        }
    }
}

/// The hex data of DS/SSHFP/TLSA, checked against the digest length BIND
/// enforces for `digest_type`.
fn hex_field(
    rtype: RecordType,
    value: &str,
    fields: &[&str],
    digest_type: u8,
) -> Result<Vec<u8>, ValidationError> {
    let data = text::hex_data(fields).ok_or_else(|| {
        bad(
            rtype,
            value,
            "must end in hexadecimal data (an even number of digits)",
        )
    })?;
    match digest_len(rtype, digest_type) {
        Some(n) if data.len() != n => Err(bad(
            rtype,
            value,
            &format!("must have a {n}-byte digest for digest type {digest_type}"),
        )),
        _ => Ok(data),
    }
}

impl fmt::Display for Rdata {
    /// The form `dig` prints (names absolute, strings quoted and escaped).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rdata::A(ip) => write!(f, "{ip}"),
            Rdata::Aaaa(ip) => f.write_str(&text::ipv6_text(ip)),
            Rdata::Name(n) => write!(f, "{n}"),
            Rdata::Mx {
                preference,
                exchange,
            } => write!(f, "{preference} {exchange}"),
            Rdata::Txt(strings) => {
                let parts: Vec<String> = strings.iter().map(|s| quote_charstring(s)).collect();
                f.write_str(&parts.join(" "))
            }
            Rdata::Srv {
                priority,
                weight,
                port,
                target,
            } => write!(f, "{priority} {weight} {port} {target}"),
            Rdata::Caa { flags, tag, value } => {
                write!(f, "{flags} {tag} {}", quote_charstring(value))
            }
            Rdata::Sshfp {
                algorithm,
                fp_type,
                fingerprint,
            } => write!(f, "{algorithm} {fp_type} {}", text::hex_text(fingerprint)),
            Rdata::Tlsa {
                usage,
                selector,
                matching,
                data,
            } => write!(f, "{usage} {selector} {matching} {}", text::hex_text(data)),
            Rdata::Ds {
                key_tag,
                algorithm,
                digest_type,
                digest,
            } => write!(
                f,
                "{key_tag} {algorithm} {digest_type} {}",
                text::hex_text(digest)
            ),
            Rdata::Naptr {
                order,
                preference,
                flags,
                service,
                regexp,
                replacement,
            } => write!(
                f,
                "{order} {preference} {} {} {} {replacement}",
                quote_charstring(flags),
                quote_charstring(service),
                quote_charstring(regexp)
            ),
            Rdata::Svcb(s) => write!(f, "{s}"),
            Rdata::Loc(l) => write!(f, "{l}"),
        }
    }
}

/// Quotes one character-string the way BIND prints it: printable ASCII as
/// is, `"` and `\` backslash-escaped, every other byte as `\DDD`.
pub fn quote_charstring(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03}")),
        }
    }
    out.push('"');
    out
}

/// Parses presentation-format character-strings: quoted strings (with `\"`,
/// `\\`, `\DDD` escapes) or bare words, separated by whitespace.
pub fn parse_charstrings(text: &str) -> Result<Vec<Vec<u8>>, &'static str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let quoted = bytes[i] == b'"';
        if quoted {
            i += 1;
        }
        let mut cur = Vec::new();
        let mut closed = !quoted;
        while i < bytes.len() {
            let b = bytes[i];
            if quoted && b == b'"' {
                closed = true;
                i += 1;
                break;
            }
            if !quoted && b.is_ascii_whitespace() {
                break;
            }
            if !quoted && (b == b'"' || b == b';') {
                return Err("has a quote or ';' outside a quoted string");
            }
            if b == b'\\' {
                let rest = &bytes[i + 1..];
                if rest.len() >= 3 && rest[..3].iter().all(u8::is_ascii_digit) {
                    let n: u32 = std::str::from_utf8(&rest[..3])
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(256);
                    let byte = u8::try_from(n).map_err(|_| "has a \\DDD escape above 255")?;
                    cur.push(byte);
                    i += 4;
                } else if let Some(&next) = rest.first() {
                    cur.push(next);
                    i += 2;
                } else {
                    return Err("ends in a lone backslash");
                }
                continue;
            }
            cur.push(b);
            i += 1;
        }
        if !closed {
            return Err("has an unterminated quoted string");
        }
        if quoted && i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            return Err("needs whitespace between quoted strings");
        }
        out.push(cur);
    }
    if out.is_empty() {
        return Err("has no strings");
    }
    Ok(out)
}

fn split_long(strings: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(strings.len());
    for s in strings {
        if s.len() <= MAX_CHARSTRING_LEN {
            out.push(s);
        } else {
            out.extend(s.chunks(MAX_CHARSTRING_LEN).map(<[u8]>::to_vec));
        }
    }
    out
}

#[cfg(test)]
mod tests;
