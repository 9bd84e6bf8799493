//! Kubernetes object names for imported objects: readable
//! (`<zone>-<owner>-<type>`, e.g. `example-com-www-a`), stable (the same
//! RRset always gets the same name) and collision-free. Owner labels are
//! joined with `-`, `_` dropped and `*` spelled `wildcard`; when two RRsets
//! of a zone would get one name this way (`_sip._tcp` and `sip.tcp`), or a
//! name would be longer than Kubernetes allows, every such RRset gets a
//! short hash of its owner and type appended instead. Pure.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// Longest object name (a DNS-1123 subdomain).
const MAX_NAME_LEN: usize = 253;
/// Hex digits of the disambiguating hash.
const HASH_LEN: usize = 8;

/// A name part made of `[a-z0-9-]`: lowercase, `.` and `_` become `-`, `*`
/// becomes `wildcard`, other characters dropped, dashes collapsed and
/// trimmed.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        match c {
            'a'..='z' | '0'..='9' => out.push(c),
            '*' => out.push_str("wildcard"),
            '.' | '-' | '_' | '/' if !out.is_empty() && !out.ends_with('-') => out.push('-'),
            _ => {}
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// The object name of a zone: its name sanitized, behind its view's if any
/// (`internal-example-com`).
pub fn zone_object(zone: &str, view: Option<&str>) -> String {
    let base = sanitize(zone);
    let base = if base.is_empty() { "root".into() } else { base };
    match view {
        Some(v) => format!("{}-{base}", sanitize(v)),
        None => base,
    }
}

fn hash(owner: &str, rtype: &str) -> String {
    let digest = Sha256::digest(format!("{owner} {rtype}").as_bytes());
    hex::encode(digest)[..HASH_LEN].to_owned()
}

/// Object names for the RRsets `(relative owner, type)` of the zone whose
/// object name is `zone_object`; the result is in the input's order.
pub fn record_objects(zone_object: &str, rrsets: &[(String, String)]) -> Vec<String> {
    let base: Vec<String> = rrsets
        .iter()
        .map(|(owner, rtype)| {
            let owner = if owner == "@" {
                String::new()
            } else {
                sanitize(owner)
            };
            let rtype = sanitize(rtype);
            if owner.is_empty() {
                format!("{zone_object}-{rtype}")
            } else {
                format!("{zone_object}-{owner}-{rtype}")
            }
        })
        .collect();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for b in &base {
        *count.entry(b).or_default() += 1;
    }
    base.iter()
        .zip(rrsets)
        .map(|(b, (owner, rtype))| {
            if count[b.as_str()] == 1 && b.len() <= MAX_NAME_LEN {
                return b.clone();
            }
            let suffix = hash(owner, rtype);
            let keep = MAX_NAME_LEN - HASH_LEN - 1;
            let mut head = b.clone();
            if head.len() > keep {
                head.truncate(keep);
                while head.ends_with('-') {
                    head.pop();
                }
            }
            format!("{head}-{suffix}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(o: &str, t: &str) -> (String, String) {
        (o.into(), t.into())
    }

    #[test]
    fn names_are_readable_and_collisions_get_a_hash() {
        let names = record_objects(
            "example-com",
            &[
                pair("@", "MX"),
                pair("www", "A"),
                pair("*.app", "A"),
                pair("_sip._tcp", "SRV"),
                pair("sip.tcp", "SRV"),
            ],
        );
        assert_eq!(names[0], "example-com-mx");
        assert_eq!(names[1], "example-com-www-a");
        assert_eq!(names[2], "example-com-wildcard-app-a");
        assert!(
            names[3].starts_with("example-com-sip-tcp-srv-"),
            "{}",
            names[3]
        );
        assert!(
            names[4].starts_with("example-com-sip-tcp-srv-"),
            "{}",
            names[4]
        );
        assert_ne!(names[3], names[4]);
        assert_eq!(
            zone_object("2.0.192.in-addr.arpa", Some("inside")),
            "inside-2-0-192-in-addr-arpa"
        );
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let owner =
            "a".repeat(63) + "." + &"b".repeat(63) + "." + &"c".repeat(63) + "." + &"d".repeat(50);
        let names = record_objects("example-com", &[pair(&owner, "TXT")]);
        assert!(names[0].len() <= MAX_NAME_LEN);
        assert!(!names[0].contains("--"));
    }
}
