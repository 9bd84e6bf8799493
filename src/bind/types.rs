//! Strict value types for everything a user can put into BIND's config apart
//! from domain names: TTLs, TSIG keys and algorithms, view names, addresses,
//! networks and address-match-list elements. Pure, no I/O.
//!
//! Every type here is built by a validating constructor; once built it can be
//! written into named.conf or an nsupdate script without further escaping.
//! TSIG key material lives only in [`TsigSecret`], whose `Debug` is redacted
//! and which has no `Display`: it must never reach a log, an error or status.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use base64::Engine as _;
use ipnet::IpNet;

use super::error::ValidationError;
use super::name::DomainName;

/// RFC 2181: TTLs are 31-bit.
const MAX_TTL: u32 = i32::MAX as u32;

/// A record or SOA timer value in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ttl(u32);

impl Ttl {
    /// Accepts 0..=2^31-1 seconds.
    pub fn new(seconds: i64) -> Result<Self, ValidationError> {
        u32::try_from(seconds)
            .ok()
            .filter(|s| *s <= MAX_TTL)
            .map(Ttl)
            .ok_or_else(|| {
                ValidationError::new("ttl", &seconds.to_string(), "must be 0..=2147483647")
            })
    }

    /// Seconds.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Ttl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// TSIG HMAC algorithms BIND accepts, in the spelling named.conf uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TsigAlgorithm {
    HmacMd5,
    HmacSha1,
    HmacSha224,
    #[default]
    HmacSha256,
    HmacSha384,
    HmacSha512,
}

impl TsigAlgorithm {
    /// Every algorithm, for generators and tests.
    pub const ALL: [TsigAlgorithm; 6] = [
        TsigAlgorithm::HmacMd5,
        TsigAlgorithm::HmacSha1,
        TsigAlgorithm::HmacSha224,
        TsigAlgorithm::HmacSha256,
        TsigAlgorithm::HmacSha384,
        TsigAlgorithm::HmacSha512,
    ];

    /// The named.conf / nsupdate spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TsigAlgorithm::HmacMd5 => "hmac-md5",
            TsigAlgorithm::HmacSha1 => "hmac-sha1",
            TsigAlgorithm::HmacSha224 => "hmac-sha224",
            TsigAlgorithm::HmacSha256 => "hmac-sha256",
            TsigAlgorithm::HmacSha384 => "hmac-sha384",
            TsigAlgorithm::HmacSha512 => "hmac-sha512",
        }
    }

    /// Key size in bytes a generator should use: the HMAC output size.
    pub fn key_len(self) -> usize {
        match self {
            TsigAlgorithm::HmacMd5 => 16,
            TsigAlgorithm::HmacSha1 => 20,
            TsigAlgorithm::HmacSha224 => 28,
            TsigAlgorithm::HmacSha256 => 32,
            TsigAlgorithm::HmacSha384 => 48,
            TsigAlgorithm::HmacSha512 => 64,
        }
    }
}

impl FromStr for TsigAlgorithm {
    type Err = ValidationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        TsigAlgorithm::ALL
            .into_iter()
            .find(|a| a.as_str() == lower)
            .ok_or_else(|| {
                ValidationError::new(
                    "tsig algorithm",
                    s,
                    "must be one of hmac-sha256, hmac-sha384, hmac-sha512, hmac-sha224, hmac-sha1, hmac-md5",
                )
            })
    }
}

impl fmt::Display for TsigAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name of a TSIG key inside BIND (a domain name, stored lowercase,
/// without trailing dot).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyName(String);

impl KeyName {
    /// Parses a key name; trailing dot optional.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let name = DomainName::parse_absolute(text).map_err(|e| e.with_what("key name"))?;
        if name.is_root() || name.is_wildcard() {
            return Err(ValidationError::new(
                "key name",
                text,
                "must be a non-root name without wildcard",
            ));
        }
        Ok(KeyName(name.as_str().to_string()))
    }

    /// The name as named.conf quotes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for KeyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyName({})", self.0)
    }
}

/// Base64 TSIG key material. `Debug` prints `<redacted>`; there is no
/// `Display`, and the only way out is [`TsigSecret::expose_base64`], called by
/// the writers of keys.conf, rndc.key and nsupdate scripts.
#[derive(Clone, PartialEq, Eq)]
pub struct TsigSecret(String);

impl TsigSecret {
    /// Accepts canonical standard base64 of at least one byte. The error
    /// never contains the input.
    pub fn from_base64(text: &str) -> Result<Self, ValidationError> {
        let trimmed = text.trim();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(trimmed)
            .map_err(|_| {
                ValidationError::new("tsig secret", "<redacted>", "is not valid base64")
            })?;
        if decoded.is_empty() {
            return Err(ValidationError::new(
                "tsig secret",
                "<redacted>",
                "is empty",
            ));
        }
        Ok(TsigSecret(
            base64::engine::general_purpose::STANDARD.encode(decoded),
        ))
    }

    /// Encodes raw key bytes (a generated key).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ValidationError> {
        if bytes.is_empty() {
            return Err(ValidationError::new(
                "tsig secret",
                "<redacted>",
                "is empty",
            ));
        }
        Ok(TsigSecret(
            base64::engine::general_purpose::STANDARD.encode(bytes),
        ))
    }

    /// The key's length in bytes (for the weak-key warning; reveals
    /// nothing of the material).
    pub fn byte_len(&self) -> usize {
        base64::engine::general_purpose::STANDARD
            .decode(&self.0)
            .map(|b| b.len())
            .unwrap_or(0)
    }

    /// The base64 text. Only for writing BIND files and nsupdate stdin.
    pub fn expose_base64(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TsigSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A TSIG key: name, algorithm and secret. `Debug` redacts the secret and
/// `Display` shows only `name (algorithm)`.
#[derive(Clone, PartialEq, Eq)]
pub struct TsigKey {
    pub name: KeyName,
    pub algorithm: TsigAlgorithm,
    pub secret: TsigSecret,
}

impl fmt::Debug for TsigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TsigKey")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .field("secret", &self.secret)
            .finish()
    }
}

impl fmt::Display for TsigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.algorithm)
    }
}

/// A BIND view name: 1-63 of `[A-Za-z0-9_.-]`, starting with a letter,
/// digit or `_`, dot-separated parts non-empty (it also names the view's
/// catalog zone, `<view>.<catalog>`), and not BIND's own `_default`/`_bind`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ViewName(String);

impl ViewName {
    /// Parses a view name.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let ok = !text.is_empty()
            && text.len() <= 63
            && !matches!(text, "_default" | "_bind")
            && text.split('.').all(|part| {
                !part.is_empty()
                    && !part.starts_with('-')
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if !ok {
            return Err(ValidationError::new(
                "view name",
                text,
                "must be 1-63 letters, digits, '-', '_' or '.' (not _default or _bind)",
            ));
        }
        Ok(ViewName(text.to_string()))
    }

    /// The name as named.conf quotes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ViewName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ViewName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ViewName({})", self.0)
    }
}

/// Where a BIND server is reached: an IP address (BIND's `primaries`,
/// `default-primaries` and `also-notify` take addresses only) and a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub port: u16,
}

impl Endpoint {
    /// An endpoint; port 0 is rejected.
    pub fn new(ip: IpAddr, port: u16) -> Result<Self, ValidationError> {
        if port == 0 {
            return Err(ValidationError::new("port", "0", "must be 1..=65535"));
        }
        Ok(Endpoint { ip, port })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(ip) => write!(f, "{ip}:{}", self.port),
            IpAddr::V6(ip) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

/// Parses an IP address (no names: BIND wants addresses where this is used).
pub fn parse_ip(text: &str) -> Result<IpAddr, ValidationError> {
    text.parse()
        .map_err(|_| ValidationError::new("ip address", text, "is not an IPv4 or IPv6 address"))
}

/// What one element of an address match list matches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AclTarget {
    Any,
    None,
    Localhost,
    Localnets,
    /// A single address or a CIDR network (stored normalised).
    Net(IpNet),
    /// Requests signed with this TSIG key.
    Key(KeyName),
}

/// One element of a BIND address match list, optionally negated (`!`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclElement {
    pub negated: bool,
    pub target: AclTarget,
}

impl AclElement {
    /// A positive element.
    pub fn allow(target: AclTarget) -> Self {
        AclElement {
            negated: false,
            target,
        }
    }

    /// `key "<name>"`.
    pub fn key(name: KeyName) -> Self {
        Self::allow(AclTarget::Key(name))
    }

    /// Parses `any`, `none`, `localhost`, `localnets`, an address, a CIDR
    /// network, or `key NAME`, each optionally prefixed with `!`.
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let trimmed = text.trim();
        let (negated, rest) = match trimmed.strip_prefix('!') {
            Some(r) => (true, r.trim_start()),
            None => (false, trimmed),
        };
        let target = match rest {
            "any" => AclTarget::Any,
            "none" => AclTarget::None,
            "localhost" => AclTarget::Localhost,
            "localnets" => AclTarget::Localnets,
            _ => {
                if let Some(k) = rest.strip_prefix("key ") {
                    let k = k.trim();
                    let k = k
                        .strip_prefix('"')
                        .and_then(|k| k.strip_suffix('"'))
                        .unwrap_or(k);
                    AclTarget::Key(KeyName::parse(k)?)
                } else if let Ok(net) = rest.parse::<IpNet>() {
                    AclTarget::Net(net.trunc())
                } else if let Ok(ip) = rest.parse::<IpAddr>() {
                    AclTarget::Net(IpNet::from(ip))
                } else {
                    return Err(ValidationError::new(
                        "address match element",
                        text,
                        "must be any, none, localhost, localnets, an IP address, a CIDR network or key NAME, optionally prefixed with !",
                    ));
                }
            }
        };
        Ok(AclElement { negated, target })
    }
}

/// Parses a list of match elements, reporting the index of a bad one.
pub fn parse_acl(field: &str, items: &[String]) -> Result<Vec<AclElement>, ValidationError> {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| AclElement::parse(s).map_err(|e| e.at(&format!("{field}[{i}]"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let key = TsigKey {
            name: KeyName::parse("xfer").unwrap(),
            algorithm: TsigAlgorithm::HmacSha256,
            secret: TsigSecret::from_base64("c2VjcmV0LXNlY3JldC1zZWNyZXQ=").unwrap(),
        };
        let dbg = format!("{key:?} {key} {:?}", key.secret);
        assert!(!dbg.contains("c2VjcmV0"), "{dbg}");
        assert!(dbg.contains("<redacted>"));
        assert_eq!(key.to_string(), "xfer (hmac-sha256)");
        let err = TsigSecret::from_base64("not base64 \" ; }").unwrap_err();
        assert!(!err.to_string().contains("not base64"), "{err}");
    }

    #[test]
    fn acl_elements_parse_strictly() {
        let p = |s: &str| AclElement::parse(s);
        assert_eq!(p("any").unwrap().target, AclTarget::Any);
        assert!(p("!10.1.2.3/8").unwrap().negated);
        assert_eq!(
            p("10.1.2.3/8").unwrap().target,
            AclTarget::Net("10.0.0.0/8".parse().unwrap())
        );
        assert_eq!(
            p("key \"xfer\"").unwrap().target,
            AclTarget::Key(KeyName::parse("xfer").unwrap())
        );
        assert!(p("2001:db8::/32").is_ok());
        for bad in [
            "10.0.0.0/33",
            "host.example.com",
            "any; include \"x\"",
            "key a\"b",
            "",
        ] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ttl_and_algorithms() {
        assert!(Ttl::new(-1).is_err());
        assert!(Ttl::new(1 << 31).is_err());
        assert_eq!(Ttl::new(300).unwrap().get(), 300);
        assert_eq!(
            "HMAC-SHA512".parse::<TsigAlgorithm>().unwrap().key_len(),
            64
        );
        assert!("hmac-sha257".parse::<TsigAlgorithm>().is_err());
        assert!(ViewName::parse("internal").is_ok());
        assert!(ViewName::parse("_default").is_err());
        assert!(ViewName::parse("int.v2").is_ok());
        assert!(ViewName::parse("a..b").is_err());
        assert!(ViewName::parse("a b").is_err());
    }
}
