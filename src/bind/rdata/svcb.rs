//! SVCB and HTTPS rdata (RFC 9460), typed: a priority, a target and the
//! parameters by key number, printed exactly as BIND 9.18/9.20 print them
//! (keys in numeric order, `mandatory` sorted and named, `alpn` quoted with
//! its two levels of escapes, hints as BIND's `inet_ntop` writes them, `ech`
//! as unwrapped base64, any other key as `keyN="..."`). Pure.
//!
//! What BIND would refuse (a duplicate key, a mandatory key that is absent,
//! `no-default-alpn` without `alpn`, an empty `alpn` id, parameters on an
//! AliasMode record, a `dohpath` without `{?dns}`) is refused here with a
//! reason, so a bad value fails its own record instead of the zone's update.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::net::{Ipv4Addr, Ipv6Addr};

use base64::Engine as _;

use super::super::name::DomainName;
use super::text::ipv6_text;
use super::{parse_charstrings, quote_charstring};

const MANDATORY: u16 = 0;
const ALPN: u16 = 1;
const NO_DEFAULT_ALPN: u16 = 2;
const PORT: u16 = 3;
const IPV4HINT: u16 = 4;
const ECH: u16 = 5;
const IPV6HINT: u16 = 6;
/// RFC 9461's `dohpath`: BIND parses the name but prints `key7`.
const DOHPATH: u16 = 7;

/// The alpn ids BIND 9.20 counts as DNS over HTTP (measured: `h3-29` and
/// `H2` are not).
const HTTP_ALPNS: [&[u8]; 5] = [b"h2", b"h2c", b"h3", b"http/1.0", b"http/1.1"];

/// The keys BIND prints by name, by number.
const NAMES: [&str; 7] = [
    "mandatory",
    "alpn",
    "no-default-alpn",
    "port",
    "ipv4hint",
    "ech",
    "ipv6hint",
];

/// One parameter's value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SvcValue {
    /// `mandatory`: key numbers, sorted.
    Mandatory(Vec<u16>),
    /// `alpn`: protocol ids, in the order given.
    Alpn(Vec<Vec<u8>>),
    /// `no-default-alpn` (a key without a value).
    Flag,
    Port(u16),
    Ipv4(Vec<Ipv4Addr>),
    /// `ech`: the decoded ECHConfigList (may be empty).
    Ech(Vec<u8>),
    Ipv6(Vec<Ipv6Addr>),
    /// Any other key (`keyN`, `dohpath`): opaque bytes, possibly empty.
    Opaque(Vec<u8>),
}

/// SVCB/HTTPS rdata.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Svcb {
    pub priority: u16,
    pub target: DomainName,
    /// Key number -> value; the map's order is the order BIND prints.
    pub params: BTreeMap<u16, SvcValue>,
}

fn key_name(key: u16) -> String {
    NAMES
        .get(usize::from(key))
        .map_or_else(|| format!("key{key}"), |n| (*n).to_string())
}

/// `alpn`, `port`, ... (any case) or `keyN` (no sign, no leading zero).
fn key_number(text: &str) -> Result<u16, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = NAMES.iter().position(|n| *n == lower) {
        return Ok(i as u16);
    }
    if lower == "dohpath" {
        return Ok(DOHPATH);
    }
    let digits = lower
        .strip_prefix("key")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .filter(|d| *d == "0" || !d.starts_with('0'))
        .ok_or_else(|| format!("has an unknown parameter key {text:?}"))?;
    digits
        .parse()
        .map_err(|_| format!("has a parameter key above key65535: {text:?}"))
}

/// Splits an `alpn` value (already unescaped once as a character-string)
/// at commas; `\,` and `\\` are a literal comma and backslash in an id.
fn alpn_ids(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut ids = Vec::new();
    let mut cur = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                let next = bytes
                    .get(i + 1)
                    .ok_or("has an alpn value ending in a lone backslash")?;
                cur.push(*next);
                i += 2;
                continue;
            }
            b',' => ids.push(std::mem::take(&mut cur)),
            b => cur.push(b),
        }
        i += 1;
    }
    ids.push(cur);
    if ids.iter().any(|id| id.is_empty() || id.len() > 255) {
        return Err("has an empty or over-long alpn id".into());
    }
    Ok(ids)
}

fn list<T: std::str::FromStr>(bytes: &[u8], what: &str) -> Result<Vec<T>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| format!("has a bad {what}"))?;
    text.split(',')
        .map(|s| s.parse().map_err(|_| format!("has a bad {what} {s:?}")))
        .collect()
}

fn value_of(key: u16, raw: Option<&[u8]>) -> Result<SvcValue, String> {
    let name = key_name(key);
    let need = || format!("has parameter {name} without a value");
    Ok(match key {
        MANDATORY => {
            let text = std::str::from_utf8(raw.ok_or_else(need)?)
                .map_err(|_| "has a bad mandatory list".to_string())?;
            let mut keys = text
                .split(',')
                .map(key_number)
                .collect::<Result<Vec<_>, _>>()?;
            keys.sort_unstable();
            if keys.windows(2).any(|w| w[0] == w[1]) || keys.contains(&MANDATORY) {
                return Err("has a mandatory list with a repeated key or mandatory itself".into());
            }
            SvcValue::Mandatory(keys)
        }
        ALPN => SvcValue::Alpn(alpn_ids(raw.ok_or_else(need)?)?),
        NO_DEFAULT_ALPN => match raw {
            None | Some([]) => SvcValue::Flag,
            Some(_) => return Err("has a value on no-default-alpn".into()),
        },
        PORT => {
            let raw = raw.ok_or_else(need)?;
            if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
                return Err("has a port that is not a number".into());
            }
            SvcValue::Port(
                std::str::from_utf8(raw)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or("has a port above 65535")?,
            )
        }
        IPV4HINT => SvcValue::Ipv4(list(raw.ok_or_else(need)?, "ipv4hint address")?),
        IPV6HINT => SvcValue::Ipv6(list(raw.ok_or_else(need)?, "ipv6hint address")?),
        ECH => SvcValue::Ech(
            base64::engine::general_purpose::STANDARD
                .decode(raw.unwrap_or_default())
                .map_err(|_| "has an ech value that is not base64".to_string())?,
        ),
        _ => {
            let bytes = raw.unwrap_or_default().to_vec();
            if key == DOHPATH && !(bytes.starts_with(b"/") && contains(&bytes, b"{?dns}")) {
                return Err("has a dohpath that is not a path with {?dns}".into());
            }
            SvcValue::Opaque(bytes)
        }
    })
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

impl Svcb {
    /// Parses the parameters after priority and target; `tokens` come from
    /// [`super::text::tokens`] (quotes and escapes still in place).
    pub fn parse(priority: u16, target: DomainName, tokens: &[&str]) -> Result<Svcb, String> {
        if priority == 0 && !tokens.is_empty() {
            return Err("has parameters on an alias (priority 0) record".into());
        }
        let mut params = BTreeMap::new();
        for t in tokens {
            let (k, v) = match t.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (*t, None),
            };
            let key = key_number(k)?;
            if usize::from(key) < NAMES.len() && k.to_ascii_lowercase().starts_with("key") {
                return Err(format!(
                    "has {k}: write this parameter by its name ({})",
                    key_name(key)
                ));
            }
            let raw = match v {
                None | Some("") => None,
                Some(v) => {
                    let mut s = parse_charstrings(v)?;
                    if s.len() != 1 {
                        return Err(format!("has more than one string in parameter {k}"));
                    }
                    Some(s.remove(0))
                }
            };
            let value = value_of(key, raw.as_deref())?;
            if params.insert(key, value).is_some() {
                return Err(format!("has parameter {} twice", key_name(key)));
            }
        }
        if let Some(SvcValue::Mandatory(keys)) = params.get(&MANDATORY)
            && let Some(k) = keys.iter().find(|k| !params.contains_key(k))
        {
            return Err(format!(
                "lists {} as mandatory without giving it",
                key_name(*k)
            ));
        }
        if params.contains_key(&NO_DEFAULT_ALPN) && !params.contains_key(&ALPN) {
            return Err("has no-default-alpn without alpn".into());
        }
        Ok(Svcb {
            priority,
            target,
            params,
        })
    }

    /// BIND 9.20's `check-svcb` (on by default, refuses the update; 9.18
    /// has no such check): an SVCB at a DNS server's name (`_dns.*`, or
    /// `_PORT._dns.*`) must give `alpn`, and an HTTP protocol in it needs
    /// `dohpath`. Refused for every version so an upgrade breaks nothing.
    pub fn check_dns_owner(&self, owner: &DomainName) -> Result<(), String> {
        let mut labels = owner.as_str().split('.');
        let first = labels.next().unwrap_or_default();
        let second = labels.next().unwrap_or_default();
        let port = first
            .strip_prefix('_')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if !(first.eq_ignore_ascii_case("_dns") || (port && second.eq_ignore_ascii_case("_dns"))) {
            return Ok(());
        }
        let Some(SvcValue::Alpn(ids)) = self.params.get(&ALPN) else {
            return Err(format!(
                "at {owner} (a DNS server's SVCB) must have alpn (BIND 9.20 refuses it)"
            ));
        };
        let http = ids.iter().any(|id| HTTP_ALPNS.contains(&id.as_slice()));
        if http && !self.params.contains_key(&DOHPATH) {
            return Err(format!(
                "at {owner} (a DNS server's SVCB) offers HTTP in alpn without dohpath (BIND 9.20 refuses it)"
            ));
        }
        Ok(())
    }

    /// Upper bound of the wire length.
    pub fn wire_len(&self) -> usize {
        let values: usize = self
            .params
            .values()
            .map(|v| {
                4 + match v {
                    SvcValue::Mandatory(k) => 2 * k.len(),
                    SvcValue::Alpn(ids) => ids.iter().map(|i| 1 + i.len()).sum(),
                    SvcValue::Flag => 0,
                    SvcValue::Port(_) => 2,
                    SvcValue::Ipv4(a) => 4 * a.len(),
                    SvcValue::Ech(b) | SvcValue::Opaque(b) => b.len(),
                    SvcValue::Ipv6(a) => 16 * a.len(),
                }
            })
            .sum();
        2 + self.target.wire_len() + values
    }
}

/// One alpn id inside the quotes BIND puts around the list: bytes outside
/// `!`..`~` as `\DDD`, `"` as `\"`, and a comma or backslash escaped twice
/// (once for the list, once for the character-string).
fn alpn_id_text(out: &mut String, id: &[u8]) {
    for &b in id {
        match b {
            b',' => out.push_str("\\\\,"),
            b'\\' => out.push_str("\\\\\\\\"),
            b'"' => out.push_str("\\\""),
            0x21..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03}");
            }
        }
    }
}

impl fmt::Display for Svcb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.priority, self.target)?;
        for (key, value) in &self.params {
            write!(f, " {}", key_name(*key))?;
            match value {
                SvcValue::Mandatory(keys) => {
                    let names: Vec<String> = keys.iter().map(|k| key_name(*k)).collect();
                    write!(f, "={}", names.join(","))?;
                }
                SvcValue::Alpn(ids) => {
                    let mut s = String::new();
                    for (i, id) in ids.iter().enumerate() {
                        if i > 0 {
                            s.push(',');
                        }
                        alpn_id_text(&mut s, id);
                    }
                    write!(f, "=\"{s}\"")?;
                }
                SvcValue::Flag => {}
                SvcValue::Port(p) => write!(f, "={p}")?,
                SvcValue::Ipv4(a) => {
                    let t: Vec<String> = a.iter().map(ToString::to_string).collect();
                    write!(f, "={}", t.join(","))?;
                }
                SvcValue::Ipv6(a) => {
                    let t: Vec<String> = a.iter().map(ipv6_text).collect();
                    write!(f, "={}", t.join(","))?;
                }
                SvcValue::Ech(b) if b.is_empty() => {}
                SvcValue::Ech(b) => write!(
                    f,
                    "={}",
                    base64::engine::general_purpose::STANDARD.encode(b)
                )?,
                SvcValue::Opaque(b) if b.is_empty() => {}
                SvcValue::Opaque(b) => write!(f, "={}", quote_charstring(b))?,
            }
        }
        Ok(())
    }
}
