//! Warnings for weak but valid input: accepted and served, yet probably not
//! what the user meant. Shown as a `Warning` condition (status True) beside
//! Ready, and in the local session's table.
//!
//! - TSIG keys: hmac-md5 / hmac-sha1, or material shorter than the
//!   algorithm's output (RFC 8945 section 6 recommends at least that).
//! - Zones at a top-level domain or a common public suffix. The list is
//!   small and built in (every single-label name counts as a TLD, plus the
//!   multi-label suffixes in [`PUBLIC_SUFFIXES`]); it is not the Public
//!   Suffix List.
//! - A target (CNAME, NS, PTR, MX, SRV) without a trailing dot that looks
//!   absolute: it ends with the zone's own name or a well-known TLD, so it
//!   is probably meant absolute but is read relative to the zone
//!   (`mail.bars.example` in bars.example becomes
//!   `mail.bars.example.bars.example.`).
//!
//! Pure: no I/O, never sees key material (only its length).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{
    self, BindZone, CONDITION_WARNING, DNSRecord, REASON_PUBLIC_SUFFIX, REASON_RELATIVE_TARGET,
    REASON_WEAK_KEY, RecordType, ZoneRecord, new_condition, set_condition,
};

/// One warning: a reason from the reason table and a message.
pub type Warning = (&'static str, String);

/// Multi-label public suffixes where a zone is almost surely a mistake.
pub const PUBLIC_SUFFIXES: &[&str] = &[
    "co.uk",
    "org.uk",
    "ac.uk",
    "gov.uk",
    "com.au",
    "net.au",
    "org.au",
    "co.nz",
    "co.jp",
    "ne.jp",
    "com.br",
    "com.cn",
    "co.in",
    "co.za",
    "com.mx",
    "github.io",
    "gitlab.io",
    "herokuapp.com",
    "appspot.com",
    "blogspot.com",
    "cloudfront.net",
    "amazonaws.com",
    "azurewebsites.net",
    "netlify.app",
    "vercel.app",
    "pages.dev",
    "workers.dev",
];

/// Top-level domains a name "looks absolute" with.
const TLDS: &[&str] = &[
    "com", "net", "org", "info", "biz", "io", "co", "dev", "app", "cloud", "uk", "de", "fr", "nl",
    "eu", "us", "ca", "au", "jp", "cn", "ru", "br", "in", "it", "es", "ch", "se", "no", "dk", "fi",
    "pl", "be", "at", "nz", "za", "mx", "arpa", "example", "test", "invalid", "local", "internal",
    "lan", "home", "corp",
];

fn norm(s: &str) -> String {
    s.trim_end_matches('.').to_ascii_lowercase()
}

/// A TSIG key's weaknesses; `secret_len` is the key's length in bytes,
/// when known.
pub fn key_warnings(algorithm: api::TsigAlgorithm, secret_len: Option<usize>) -> Vec<Warning> {
    let mut out = Vec::new();
    let alg = crate::render::validate::algorithm(algorithm);
    if matches!(
        algorithm,
        api::TsigAlgorithm::HmacMd5 | api::TsigAlgorithm::HmacSha1
    ) {
        out.push((
            REASON_WEAK_KEY,
            format!("{algorithm} is a weak TSIG algorithm; prefer hmac-sha256"),
        ));
    }
    if let Some(len) = secret_len
        && len < alg.key_len()
    {
        out.push((
            REASON_WEAK_KEY,
            format!(
                "the key is {len} bytes, shorter than {algorithm}'s {} byte output",
                alg.key_len()
            ),
        ));
    }
    out
}

/// Whether `zone` is a TLD or a listed public suffix.
pub fn is_public_suffix(zone: &str) -> bool {
    let z = norm(zone);
    !z.is_empty() && (!z.contains('.') || PUBLIC_SUFFIXES.contains(&z.as_str()))
}

/// The target name inside one value of `rtype`, if the type has one.
fn target(rtype: RecordType, value: &str) -> Option<&str> {
    let fields: Vec<&str> = value.split_whitespace().collect();
    match rtype {
        RecordType::CNAME | RecordType::NS | RecordType::PTR => fields.first().copied(),
        RecordType::MX => fields.get(1).copied(),
        RecordType::SRV => fields.get(3).copied(),
        _ => None,
    }
}

/// Whether a relative `name` looks like it was meant absolute.
fn looks_absolute(name: &str, zone: &str) -> bool {
    if name.ends_with('.') || name == "@" || !name.contains('.') {
        return false;
    }
    let n = name.to_ascii_lowercase();
    let zone = norm(zone);
    let tld = n.rsplit('.').next().unwrap_or_default();
    n == zone || n.ends_with(&format!(".{zone}")) || TLDS.contains(&tld)
}

fn target_warnings(zone: &str, at: &str, rtype: RecordType, values: &[String]) -> Vec<Warning> {
    let zone = norm(zone);
    values
        .iter()
        .filter_map(|v| target(rtype, v))
        .filter(|t| looks_absolute(t, &zone))
        .map(|t| {
            (
                REASON_RELATIVE_TARGET,
                if zone.is_empty() {
                    format!(
                        "{at}: {t} has no trailing dot, so it is read relative to the zone; write {t}. if it is absolute"
                    )
                } else {
                    format!(
                        "{at}: {t} has no trailing dot, so it means {}.{zone}.; write {t}. if it is absolute",
                        t.to_ascii_lowercase()
                    )
                },
            )
        })
        .collect()
}

/// A BindZone's warnings: its name, and its inline records' targets.
pub fn zone_warnings(zone: &BindZone) -> Vec<Warning> {
    let mut out = Vec::new();
    let name = &zone.spec.zone_name;
    if is_public_suffix(name) {
        out.push((
            REASON_PUBLIC_SUFFIX,
            format!(
                "zone {} is a top-level domain or public suffix: this cluster answers for every name under it",
                norm(name)
            ),
        ));
    }
    for (i, r) in zone.spec.records.iter().enumerate() {
        let ZoneRecord { type_, values, .. } = r;
        out.extend(target_warnings(
            name,
            &format!("spec.records[{i}]"),
            *type_,
            values,
        ));
    }
    out
}

/// A DNSRecord's warnings (its targets). Its zone's name is not at hand
/// where its status is written, so only the TLD test applies.
pub fn record_warnings(record: &DNSRecord) -> Vec<Warning> {
    target_warnings("", "spec.values", record.spec.type_, &record.spec.values)
}

/// Sets the `Warning` condition from `warnings` (True, first reason, every
/// message), or removes it when there are none. Returns whether it changed.
pub fn set_warning_condition(
    conditions: &mut Vec<Condition>,
    warnings: &[Warning],
    generation: Option<i64>,
    now: Time,
) -> bool {
    let Some((reason, _)) = warnings.first() else {
        let before = conditions.len();
        conditions.retain(|c| c.type_ != CONDITION_WARNING);
        return conditions.len() != before;
    };
    let message = warnings
        .iter()
        .map(|(_, m)| m.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    set_condition(
        conditions,
        new_condition(CONDITION_WARNING, true, reason, message, generation, now),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_keys() {
        assert_eq!(
            key_warnings(api::TsigAlgorithm::HmacSha256, Some(32)),
            vec![]
        );
        let w = key_warnings(api::TsigAlgorithm::HmacSha256, Some(3));
        assert_eq!(w.len(), 1);
        assert!(w[0].1.contains("3 bytes"), "{w:?}");
        assert_eq!(
            key_warnings(api::TsigAlgorithm::HmacMd5, None)[0].0,
            REASON_WEAK_KEY
        );
        assert_eq!(
            key_warnings(api::TsigAlgorithm::HmacSha1, Some(20)).len(),
            1
        );
    }

    #[test]
    fn public_suffixes_and_tlds() {
        for z in ["com", "com.", "CO.UK", "github.io"] {
            assert!(is_public_suffix(z), "{z}");
        }
        for z in ["example.com", "bars.co.uk", "x.github.io"] {
            assert!(!is_public_suffix(z), "{z}");
        }
    }

    #[test]
    fn targets_that_look_absolute() {
        let w = target_warnings(
            "bars.example",
            "spec.values",
            RecordType::MX,
            &[
                "10 mail.bars.example".into(),
                "20 mail".into(),
                "30 mx.other.org.".into(),
            ],
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].1.contains("mail.bars.example.bars.example."), "{w:?}");
        assert_eq!(
            target_warnings("z.test", "x", RecordType::CNAME, &["www.google.com".into()]).len(),
            1
        );
        assert_eq!(
            target_warnings("z.test", "x", RecordType::CNAME, &["host.sub".into()]).len(),
            0
        );
        assert_eq!(
            target_warnings("z.test", "x", RecordType::TXT, &["a.com".into()]).len(),
            0
        );
    }
}
