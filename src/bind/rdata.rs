//! Record types and rdata: parsing user values (presentation format) into
//! typed rdata, and writing them back in the canonical form `dig` prints, so
//! wanted and served RRsets compare equal. Pure, no I/O.
//!
//! Only a fixed set of types is accepted, each with a parser that admits no
//! newline, no unescaped quote and no `;` outside a quoted string: rdata goes
//! verbatim into nsupdate scripts, so anything looser would be an injection.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::error::ValidationError;
use super::name::{DomainName, ZoneName};

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
    const ALL: [RecordType; 17] = [
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
        tag: String,
        value: Vec<u8>,
    },
    /// SSHFP, TLSA, DS: numbers and hex, normalised to upper case.
    Fields(Vec<String>),
    Naptr {
        order: u16,
        preference: u16,
        flags: Vec<u8>,
        service: Vec<u8>,
        regexp: Vec<u8>,
        replacement: DomainName,
    },
    /// SVCB, HTTPS (priority and target normalised, parameters as given)
    /// and LOC (as given, whitespace collapsed): checked against a strict
    /// alphabet, since their presentation forms are not canonicalised here.
    Raw(String),
}

fn bad(rtype: RecordType, value: &str, reason: &str) -> ValidationError {
    ValidationError::new(&format!("{rtype} value"), value, reason)
}

fn num<T: FromStr>(
    rtype: RecordType,
    value: &str,
    field: Option<&str>,
) -> Result<T, ValidationError> {
    field
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
                    vec![v.as_bytes().to_vec()]
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
                let rest = parts.next().unwrap_or_default().trim();
                let value_bytes = if rest.starts_with('"') {
                    let mut s = parse_charstrings(rest).map_err(|r| bad(rtype, value, r))?;
                    if s.len() != 1 {
                        return Err(bad(rtype, value, "must have exactly one value string"));
                    }
                    s.remove(0)
                } else if rest.is_empty() || rest.contains(char::is_whitespace) {
                    return Err(bad(rtype, value, "must have a single value"));
                } else {
                    rest.as_bytes().to_vec()
                };
                Rdata::Caa {
                    flags,
                    tag,
                    value: value_bytes,
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
                if fields.len() < 2 {
                    return Err(bad(rtype, value, "must have a priority and a target"));
                }
                let priority: u16 = num(rtype, value, Some(fields[0]))?;
                let target = name(fields[1])?;
                let mut out = format!("{priority} {target}");
                for p in &fields[2..] {
                    if !svc_param_ok(p) {
                        return Err(bad(
                            rtype,
                            value,
                            "has a parameter outside key=value with letters, digits and ,.:/+=_-",
                        ));
                    }
                    out.push(' ');
                    out.push_str(&p.to_ascii_lowercase_key());
                }
                Rdata::Raw(out)
            }
            RecordType::Loc => {
                if !fields.iter().all(|f| {
                    f.bytes()
                        .all(|b| b.is_ascii_digit() || b"-.mNSEW".contains(&b))
                }) {
                    return Err(bad(rtype, value, "may only contain numbers, N/S/E/W and m"));
                }
                Rdata::Raw(fields.join(" "))
            }
            RecordType::Sshfp | RecordType::Tlsa | RecordType::Ds => {
                let want = match rtype {
                    RecordType::Sshfp => 3,
                    _ => 4,
                };
                if fields.len() < want {
                    return Err(bad(rtype, value, &format!("must have {want} fields")));
                }
                let (nums, hex) = fields.split_at(want - 1);
                for n in nums {
                    num::<u16>(rtype, value, Some(n))?;
                }
                let digest: String = hex.concat();
                if digest.is_empty() || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad(rtype, value, "must end in hexadecimal data"));
                }
                let mut out: Vec<String> = nums.iter().map(|s| s.to_string()).collect();
                out.push(digest.to_ascii_uppercase());
                Rdata::Fields(out)
            }
        })
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
            // Hex is twice the wire size; good enough as an upper bound.
            Rdata::Fields(f) => f.iter().map(|s| s.len() + 1).sum(),
            Rdata::Naptr {
                flags,
                service,
                regexp,
                replacement,
                ..
            } => 4 + 3 + flags.len() + service.len() + regexp.len() + replacement.wire_len(),
            // Presentation text is never shorter than SVCB/LOC wire data
            // by more than the fixed header; add slack for it.
            Rdata::Raw(text) => text.len() + 16,
        }
    }
}

impl fmt::Display for Rdata {
    /// The form `dig` prints (names absolute, strings quoted and escaped).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rdata::A(ip) => write!(f, "{ip}"),
            Rdata::Aaaa(ip) => write!(f, "{ip}"),
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
            Rdata::Fields(fields) => f.write_str(&fields.join(" ")),
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
            Rdata::Raw(text) => f.write_str(text),
        }
    }
}

/// An SVCB parameter: `key` or `key=value` (value optionally in plain
/// double quotes), from a small alphabet with no `;`, `\\` or spaces.
fn svc_param_ok(p: &str) -> bool {
    let (key, val) = p.split_once('=').unwrap_or((p, ""));
    let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let inner = val
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(val);
    key_ok
        && inner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b",.:/+=_-".contains(&b))
}

trait LowerKey {
    fn to_ascii_lowercase_key(&self) -> String;
}

impl LowerKey for str {
    /// Lowercases the `key` of `key=value`, leaving the value alone.
    fn to_ascii_lowercase_key(&self) -> String {
        match self.split_once('=') {
            Some((k, v)) => format!("{}={v}", k.to_ascii_lowercase()),
            None => self.to_ascii_lowercase(),
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
mod tests {
    use super::*;

    fn z() -> ZoneName {
        ZoneName::parse("example.com").unwrap()
    }

    fn p(t: &str, v: &str) -> Result<String, ValidationError> {
        Rdata::parse(t.parse().unwrap(), v, &z()).map(|r| r.to_string())
    }

    #[test]
    fn values_canonicalise_like_dig() {
        assert_eq!(p("a", "192.0.2.1").unwrap(), "192.0.2.1");
        assert_eq!(p("AAAA", "2001:DB8:0:0::1").unwrap(), "2001:db8::1");
        assert_eq!(p("CNAME", "www").unwrap(), "www.example.com.");
        assert_eq!(
            p("MX", "10  Mail.Other.org.").unwrap(),
            "10 mail.other.org."
        );
        assert_eq!(p("MX", "0 .").unwrap(), "0 .");
        assert_eq!(
            p("SRV", "0 5 5060 sip").unwrap(),
            "0 5 5060 sip.example.com."
        );
        assert_eq!(
            p("CAA", "0 issue letsencrypt.org").unwrap(),
            "0 issue \"letsencrypt.org\""
        );
        assert_eq!(
            p("CAA", "128 ISSUE \"ca;x\"").unwrap(),
            "128 issue \"ca;x\""
        );
        assert_eq!(p("SSHFP", "1 1 abcDEF01").unwrap(), "1 1 ABCDEF01");
        assert_eq!(p("TXT", "v=spf1 -all").unwrap(), "\"v=spf1 -all\"");
        assert_eq!(p("TXT", "say \"hi\"").unwrap(), "\"say \\\"hi\\\"\"");
        assert_eq!(
            p("TXT", "\"a b\" \"c\\\"d\" e").unwrap(),
            "\"a b\" \"c\\\"d\" \"e\""
        );
        assert_eq!(p("TXT", "\"caf\\195\\169\"").unwrap(), "\"caf\\195\\169\"");
        assert_eq!(p("TXT", "café").unwrap(), "\"caf\\195\\169\"");
        assert_eq!(
            p("NAPTR", "100 10 S SIP+D2U \"\" _sip._udp").unwrap(),
            "100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.example.com."
        );
        assert_eq!(
            p("HTTPS", "1 . ALPN=\"h2,h3\" port=443").unwrap(),
            "1 . alpn=\"h2,h3\" port=443"
        );
        assert_eq!(p("SVCB", "0 svc").unwrap(), "0 svc.example.com.");
        assert_eq!(
            p("LOC", "52 22 23.000 N  4 53 32.000 E -2.00m").unwrap(),
            "52 22 23.000 N 4 53 32.000 E -2.00m"
        );
    }

    #[test]
    fn long_txt_splits_into_255_byte_strings() {
        let long = "x".repeat(300);
        let r = Rdata::parse(RecordType::Txt, &long, &z()).unwrap();
        let Rdata::Txt(strings) = &r else { panic!() };
        assert_eq!(
            strings.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![255, 45]
        );
        assert_eq!(r.wire_len(), 302);
    }

    #[test]
    fn hostile_values_are_rejected() {
        assert!(p("TXT", "a\nupdate add evil. 1 A 1.2.3.4").is_err());
        assert!(p("TXT", "\"unterminated").is_err());
        assert!(p("TXT", "\"a\"b").is_err());
        assert!(p("TXT", "\"a\" b;c").is_err());
        assert!(p("A", "1.2.3.4; x").is_err());
        assert!(p("CNAME", "a b").is_err());
        assert!(p("CNAME", "a\"b").is_err());
        assert!(p("MX", "70000 mail").is_err());
        assert!(p("CAA", "0 issue a b").is_err());
        assert!(p("SSHFP", "1 1 xyz").is_err());
        assert!("SOA".parse::<RecordType>().is_err());
        assert!(p("HTTPS", "1 . alpn=\"h2\";x").is_err());
        assert!(p("HTTPS", "1 . alpn=h2 x\\y").is_err());
        assert!(p("LOC", "52 22 N; 4").is_err());
        assert!(p("NAPTR", "100 10 \"S\" \"SIP\" \"\"").is_err());
    }
}
