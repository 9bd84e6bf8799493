//! DNSSEC knowledge that is pure: trust anchors (validated, rendered into
//! `trust-anchors { }` by the typed writer), the key tag and DS record of a
//! DNSKEY (RFC 4034 appendix B and section 5.1.4, digest type 2 = SHA-256,
//! as `dnssec-dsfromkey -2` prints it), DNSKEY records read from dig output,
//! and the key files named keeps for a signed zone (`K<zone>.+alg+tag.*`).
//!
//! Nothing here runs a process or talks to Kubernetes.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::conf::{ConfWriter, Tok};
use super::error::ValidationError;
use super::name::{DomainName, ZoneName};

/// The DNSKEY flag that marks a key-signing key (SEP): the keys a parent's
/// DS records point at.
const FLAG_SEP: u16 = 0x0001;
/// DNSKEY protocol field, always 3 (RFC 4034 section 2.1.2).
const DNSKEY_PROTOCOL: u8 = 3;
/// DS digest type SHA-256 (RFC 4509), the one parents expect today.
pub const DIGEST_SHA256: u8 = 2;
/// `dnssec-policy` names that do not sign: `none` never signed, `insecure`
/// withdraws the keys of a zone that was signed.
pub const POLICY_NONE: &str = "none";
/// See [`POLICY_NONE`].
pub const POLICY_INSECURE: &str = "insecure";

/// Whether a `dnssec-policy` name makes named sign the zone.
pub fn policy_signs(policy: &str) -> bool {
    policy != POLICY_NONE && policy != POLICY_INSECURE
}

/// How a trust anchor is given and kept (BIND `trust-anchors` types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnchorKind {
    /// A DS, never rolled (`static-ds`).
    StaticDs,
    /// A DS to start RFC 5011 tracking from (`initial-ds`).
    InitialDs,
    /// A DNSKEY, never rolled (`static-key`).
    StaticKey,
    /// A DNSKEY to start RFC 5011 tracking from (`initial-key`).
    InitialKey,
}

impl AnchorKind {
    /// The named.conf keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            AnchorKind::StaticDs => "static-ds",
            AnchorKind::InitialDs => "initial-ds",
            AnchorKind::StaticKey => "static-key",
            AnchorKind::InitialKey => "initial-key",
        }
    }

    fn is_ds(self) -> bool {
        matches!(self, AnchorKind::StaticDs | AnchorKind::InitialDs)
    }
}

/// What an anchor holds: a DS (key tag, algorithm, digest type, hex digest)
/// or a DNSKEY (flags, algorithm, base64 public key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorData {
    Ds {
        key_tag: u16,
        algorithm: u8,
        digest_type: u8,
        /// Uppercase hex, no spaces.
        digest: String,
    },
    Key {
        flags: u16,
        algorithm: u8,
        /// Base64, no spaces.
        public_key: String,
    },
}

/// One validated trust anchor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustAnchor {
    pub name: DomainName,
    pub kind: AnchorKind,
    pub data: AnchorData,
}

/// The raw fields of a trust anchor, as the CRD carries them.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnchorFields<'a> {
    pub key_tag: Option<u16>,
    pub algorithm: Option<u8>,
    pub digest_type: Option<u8>,
    pub digest: Option<&'a str>,
    pub flags: Option<u16>,
    pub public_key: Option<&'a str>,
}

impl TrustAnchor {
    /// Validates one anchor: a DS kind needs keyTag, algorithm, digestType
    /// and a hex digest of the length its type implies; a key kind needs
    /// flags, algorithm and a base64 public key. Errors name the field.
    pub fn parse(
        name: &str,
        kind: AnchorKind,
        f: &AnchorFields<'_>,
    ) -> Result<Self, ValidationError> {
        let name = DomainName::parse_absolute(name)
            .map_err(|e| e.with_what("trust anchor name").at("name"))?;
        let missing = |field: &str| {
            ValidationError::new(
                "trust anchor",
                kind.keyword(),
                &format!(
                    "needs {field} (a DS anchor needs keyTag, algorithm, digestType and digest; a key anchor needs flags, algorithm and publicKey)"
                ),
            )
        };
        let algorithm = f.algorithm.ok_or_else(|| missing("algorithm"))?;
        let data = if kind.is_ds() {
            let key_tag = f.key_tag.ok_or_else(|| missing("keyTag"))?;
            let digest_type = f.digest_type.ok_or_else(|| missing("digestType"))?;
            let raw = f.digest.ok_or_else(|| missing("digest"))?;
            let digest: String = raw.split_whitespace().collect::<String>().to_uppercase();
            let want = match digest_type {
                1 => Some(40),
                2 => Some(64),
                4 => Some(96),
                _ => None,
            };
            if digest.is_empty()
                || !digest.bytes().all(|b| b.is_ascii_hexdigit())
                || want.is_some_and(|n| digest.len() != n)
            {
                return Err(ValidationError::new(
                    "trust anchor digest",
                    raw,
                    "must be the hex digest of the digest type (40 digits for type 1, 64 for 2, 96 for 4)",
                )
                .at("digest"));
            }
            AnchorData::Ds {
                key_tag,
                algorithm,
                digest_type,
                digest,
            }
        } else {
            let flags = f.flags.ok_or_else(|| missing("flags"))?;
            let raw = f.public_key.ok_or_else(|| missing("publicKey"))?;
            let public_key: String = raw.split_whitespace().collect();
            let decoded = base64::engine::general_purpose::STANDARD.decode(&public_key);
            if public_key.is_empty() || decoded.is_err() {
                return Err(ValidationError::new(
                    "trust anchor public key",
                    raw,
                    "must be the DNSKEY's base64 public key",
                )
                .at("publicKey"));
            }
            AnchorData::Key {
                flags,
                algorithm,
                public_key,
            }
        };
        Ok(TrustAnchor { name, kind, data })
    }
}

/// Writes `trust-anchors { "name" kind ...; ... };` (nothing when empty).
pub fn write_trust_anchors(w: &mut ConfWriter, anchors: &[TrustAnchor]) {
    if anchors.is_empty() {
        return;
    }
    w.block(&[Tok::Kw("trust-anchors")], |w| {
        for a in anchors {
            let name = a.name.fqdn();
            let mut toks = vec![Tok::Str(&name), Tok::Kw(a.kind.keyword())];
            match &a.data {
                AnchorData::Ds {
                    key_tag,
                    algorithm,
                    digest_type,
                    digest,
                } => {
                    toks.extend([
                        Tok::Num(u64::from(*key_tag)),
                        Tok::Num(u64::from(*algorithm)),
                        Tok::Num(u64::from(*digest_type)),
                        Tok::Str(digest),
                    ]);
                }
                AnchorData::Key {
                    flags,
                    algorithm,
                    public_key,
                } => {
                    toks.extend([
                        Tok::Num(u64::from(*flags)),
                        Tok::Num(u64::from(DNSKEY_PROTOCOL)),
                        Tok::Num(u64::from(*algorithm)),
                        Tok::Str(public_key),
                    ]);
                }
            }
            w.stmt(&toks);
        }
    });
}

/// One DNSKEY of a zone, as served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dnskey {
    pub flags: u16,
    pub protocol: u8,
    pub algorithm: u8,
    pub public_key: Vec<u8>,
}

impl Dnskey {
    /// The RDATA in wire format.
    fn rdata(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.public_key.len());
        out.extend(self.flags.to_be_bytes());
        out.push(self.protocol);
        out.push(self.algorithm);
        out.extend(&self.public_key);
        out
    }

    /// A key-signing key (SEP flag): the parent's DS points at it.
    pub fn is_ksk(&self) -> bool {
        self.flags & FLAG_SEP != 0
    }

    /// The key tag (RFC 4034 appendix B; algorithm 1 is long obsolete and
    /// refused by current BIND, so its special case is not needed).
    pub fn key_tag(&self) -> u16 {
        let mut ac: u32 = 0;
        for (i, b) in self.rdata().iter().enumerate() {
            ac += if i & 1 == 1 {
                u32::from(*b)
            } else {
                u32::from(*b) << 8
            };
        }
        ac += (ac >> 16) & 0xFFFF;
        (ac & 0xFFFF) as u16
    }

    /// The DS record (digest type 2) for the parent, in presentation form:
    /// `zone. IN DS tag alg 2 HEX`, as `dnssec-dsfromkey -2` prints it.
    pub fn ds(&self, zone: &ZoneName) -> String {
        let mut h = Sha256::new();
        h.update(owner_wire(zone));
        h.update(self.rdata());
        format!(
            "{} IN DS {} {} {} {}",
            zone.fqdn(),
            self.key_tag(),
            self.algorithm,
            DIGEST_SHA256,
            hex::encode_upper(h.finalize())
        )
    }
}

/// A name in canonical wire form (lowercase labels, RFC 4034 section 6.2).
fn owner_wire(zone: &ZoneName) -> Vec<u8> {
    let mut out = Vec::new();
    for label in zone.as_str().split('.').filter(|l| !l.is_empty()) {
        out.push(label.len() as u8);
        out.extend(label.to_ascii_lowercase().bytes());
    }
    out.push(0);
    out
}

/// The DNSKEY records of `zone` in dig output (`+noall +answer`), other
/// lines (RRSIGs, comments) skipped.
pub fn parse_dnskeys(stdout: &str, zone: &ZoneName) -> Vec<Dnskey> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // owner ttl IN DNSKEY flags protocol algorithm key...
        if f.len() < 8 || f[2] != "IN" || f[3] != "DNSKEY" {
            continue;
        }
        if !f[0]
            .trim_end_matches('.')
            .eq_ignore_ascii_case(zone.as_str())
        {
            continue;
        }
        let (Ok(flags), Ok(protocol), Ok(algorithm)) = (f[4].parse(), f[5].parse(), f[6].parse())
        else {
            continue;
        };
        let Ok(public_key) = base64::engine::general_purpose::STANDARD.decode(f[7..].concat())
        else {
            continue;
        };
        out.push(Dnskey {
            flags,
            protocol,
            algorithm,
            public_key,
        });
    }
    out
}

/// The prefix of every key file named writes for `zone` in its key
/// directory: `K<zone>.+` (then `alg+tag.key|.private|.state`).
pub fn key_file_prefix(zone: &ZoneName) -> String {
    format!("K{}+", zone.fqdn())
}

/// One of the files named keeps for a signed zone's key in its key
/// directory (`K<zone>.+<alg>+<tag>.<ext>`), with its text. The text is
/// key material (`.private`): its `Debug` prints the name only.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyFile {
    /// The algorithm as named writes it, three digits (`013`).
    pub algorithm: String,
    pub tag: u16,
    pub ext: KeyFileExt,
    pub text: String,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyFile({})", self.short_name())
    }
}

/// Which of a key's files: the public DNSKEY, the private key, the key's
/// timing state (`dnssec-policy` keeps its rollover state there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyFileExt {
    Key,
    Private,
    State,
}

impl KeyFileExt {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyFileExt::Key => "key",
            KeyFileExt::Private => "private",
            KeyFileExt::State => "state",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "key" => Some(KeyFileExt::Key),
            "private" => Some(KeyFileExt::Private),
            "state" => Some(KeyFileExt::State),
            _ => None,
        }
    }
}

impl KeyFile {
    /// The file's name in the key directory: `K<zone>.+013+12345.key`.
    pub fn file_name(&self, zone: &ZoneName) -> String {
        format!(
            "{}{}+{}.{}",
            key_file_prefix(zone),
            self.algorithm,
            self.tag_text(),
            self.ext.as_str()
        )
    }

    /// The name without the zone, usable as a Secret data key (no `+`):
    /// `013-12345.key`.
    pub fn short_name(&self) -> String {
        format!(
            "{}-{}.{}",
            self.algorithm,
            self.tag_text(),
            self.ext.as_str()
        )
    }

    fn tag_text(&self) -> String {
        format!("{:05}", self.tag)
    }

    /// Reads a key file's name in the key directory (`file_name`'s form)
    /// or a Secret data key (`short_name`'s form).
    pub fn parse_name(zone: &ZoneName, name: &str, text: String) -> Option<KeyFile> {
        let rest = name.strip_prefix(&key_file_prefix(zone)).unwrap_or(name);
        let (stem, ext) = rest.rsplit_once('.')?;
        let (alg, tag) = stem.split_once(['+', '-'])?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(alg) || alg.len() != 3 || !digits(tag) || tag.len() != 5 {
            return None;
        }
        Some(KeyFile {
            algorithm: alg.to_string(),
            tag: tag.parse().ok()?,
            ext: KeyFileExt::parse(ext)?,
            text,
        })
    }
}

/// Marks each file in the stream of key files between the operator and a
/// pod (`@@file NAME`, then its lines).
const FILE_MARK: &str = "@@file ";

/// The key files of `zone` as `read_keys.sh` prints them (`@@file NAME`
/// then its lines); names that are not the zone's key files are skipped.
pub fn parse_key_files(stdout: &str, zone: &ZoneName) -> Vec<KeyFile> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    let mut push = |cur: Option<(String, String)>| {
        if let Some((name, text)) = cur
            && let Some(f) = KeyFile::parse_name(zone, &name, text)
        {
            out.push(f);
        }
    };
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix(FILE_MARK) {
            push(current.take());
            current = Some((name.trim().to_string(), String::new()));
        } else if let Some((_, text)) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    push(current.take());
    out.sort_by_key(|a| (a.tag, a.ext));
    out
}

/// The stdin of `restore_keys.sh`: each file as `@@file NAME` then its
/// lines. Key files are text and no line of theirs starts with `@@`.
pub fn render_key_files(files: &[KeyFile], zone: &ZoneName) -> String {
    let mut out = String::new();
    for f in files {
        out.push_str(FILE_MARK);
        out.push_str(&f.file_name(zone));
        out.push('\n');
        for line in f.text.lines() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The key tags of a set of key files (from their `.key` files).
pub fn key_file_tags(files: &[KeyFile]) -> Vec<u16> {
    let mut tags: Vec<u16> = files
        .iter()
        .filter(|f| f.ext == KeyFileExt::Key)
        .map(|f| f.tag)
        .collect();
    tags.sort_unstable();
    tags.dedup();
    tags
}

/// The files beside a zone file that named keeps for it: its journal,
/// the inline-signing pair's backup journal, signed copy and its journal.
pub const ZONE_FILE_SUFFIXES: &[&str] = &[".jnl", ".jbk", ".signed", ".signed.jnl"];

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6605 section 6.1's example DNSKEY; its DS is what the RFC and
    /// `dnssec-dsfromkey -2` (BIND 9.18) print.
    const KEY: &str = "example.net. 3600 IN DNSKEY 257 3 13 GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edb krSqQpF64cYbcB7wNcP+e+MAnLr+Wi9xMWyQLc8NAA==";

    #[test]
    fn key_tag_and_ds_match_rfc_and_dnssec_dsfromkey() {
        let z = ZoneName::parse("example.net").unwrap();
        let keys = parse_dnskeys(&format!("; comment\n{KEY}\n"), &z);
        assert_eq!(keys.len(), 1);
        assert!(keys[0].is_ksk());
        assert_eq!(keys[0].key_tag(), 55648);
        assert_eq!(
            keys[0].ds(&z),
            "example.net. IN DS 55648 13 2 B4C8C1FE2E7477127B27115656AD6256F424625BF5C1E2770CE6D6E37DF61D17"
        );
    }

    #[test]
    fn anchors_are_checked_per_kind_and_rendered_quoted() {
        let ds = TrustAnchor::parse(
            ".",
            AnchorKind::InitialDs,
            &AnchorFields {
                key_tag: Some(20326),
                algorithm: Some(8),
                digest_type: Some(2),
                digest: Some("e06d44b80b8f1d39a95c0b0d7c65d08458e880409bbc683457104237c7f8ec8d"),
                ..Default::default()
            },
        )
        .unwrap();
        let key = TrustAnchor::parse(
            "example.com",
            AnchorKind::StaticKey,
            &AnchorFields {
                flags: Some(257),
                algorithm: Some(13),
                public_key: Some("mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+Gq JxpVXckHAeF+"),
                ..Default::default()
            },
        )
        .unwrap();
        let mut w = ConfWriter::new();
        write_trust_anchors(&mut w, &[ds, key]);
        assert_eq!(
            w.finish(),
            "trust-anchors {\n\t\".\" initial-ds 20326 8 2 \"E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D\";\n\t\"example.com.\" static-key 257 3 13 \"mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+\";\n};\n"
        );
        let no_digest = TrustAnchor::parse(
            ".",
            AnchorKind::StaticDs,
            &AnchorFields {
                key_tag: Some(1),
                algorithm: Some(8),
                digest_type: Some(2),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            no_digest.to_string().contains("needs digest"),
            "{no_digest}"
        );
        let short = TrustAnchor::parse(
            ".",
            AnchorKind::StaticDs,
            &AnchorFields {
                key_tag: Some(1),
                algorithm: Some(8),
                digest_type: Some(2),
                digest: Some("abcd"),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(short.to_string().contains("64 for 2"), "{short}");
        let injected = TrustAnchor::parse(
            ".",
            AnchorKind::InitialKey,
            &AnchorFields {
                flags: Some(257),
                algorithm: Some(8),
                public_key: Some("AAAA\"; }; include \"/etc/passwd"),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(injected.to_string().contains("base64"), "{injected}");
    }

    #[test]
    fn key_files_round_trip_between_pod_and_secret_names() {
        let z = ZoneName::parse("a.test").unwrap();
        let stdout = "@@file Ka.test.+013+01234.key\n; comment\na.test. 3600 IN DNSKEY 257 3 13 AAAA\n@@file Ka.test.+013+01234.private\nPrivate-key-format: v1.3\n@@file Kother.test.+013+00001.key\nx\n@@file Ka.test.+013+01234.jnl\nx\n";
        let files = parse_key_files(stdout, &z);
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!(files[0].file_name(&z), "Ka.test.+013+01234.key");
        assert_eq!(files[0].short_name(), "013-01234.key");
        assert_eq!(files[1].text, "Private-key-format: v1.3\n");
        assert!(!format!("{files:?}").contains("Private-key"));
        assert_eq!(key_file_tags(&files), vec![1234]);
        let back = KeyFile::parse_name(&z, "013-01234.private", "t\n".into()).unwrap();
        assert_eq!(back.file_name(&z), "Ka.test.+013+01234.private");
        assert_eq!(parse_key_files(&render_key_files(&files, &z), &z), files);
        assert!(KeyFile::parse_name(&z, "../x+01234.key", String::new()).is_none());
    }

    #[test]
    fn only_signing_policies_sign() {
        assert!(policy_signs("default"));
        assert!(!policy_signs("insecure"));
        assert!(!policy_signs("none"));
        let z = ZoneName::parse("a.test").unwrap();
        assert_eq!(key_file_prefix(&z), "Ka.test.+");
    }
}
