//! Record sets, validated: a `spec.records` entry of a BindZone
//! ([`InlineRecord`]) and a DNSRecord ([`ValidRecord`]) into the typed
//! [`RecordSet`] the zone's plan takes, or into the [`RecordError`] (status
//! reason and message naming the field) it is refused alone with. Pure.
//!
//! Everything the nsupdate batch builder would refuse for one RRset alone
//! is refused here with the same reason
//! ([`crate::bind::nsupdate::check_change`]), so no batch is ever built to
//! find out.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{self, DNSRecord, Phase};
use crate::api::{REASON_APEX_NS_UNSUPPORTED, REASON_INVALID_RECORD, REASON_TOO_MANY_VALUES};
use crate::bind::nsupdate::{BatchError, RrsetChange, check_change};
use crate::bind::{DomainName, Rdata, RecordType, Ttl, ValidationError, ZoneName};

/// One RRset a user asks for, validated: the owner resolved against the
/// zone, the rdata parsed (duplicates collapse, as in DNS), and the limits
/// one RRset must meet on its own checked (value count, message size).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordSet {
    pub name: DomainName,
    pub rtype: RecordType,
    pub ttl: Ttl,
    pub values: BTreeSet<Rdata>,
}

impl RecordSet {
    /// The RRset's identity: owner name and type.
    pub fn key(&self) -> (DomainName, RecordType) {
        (self.name.clone(), self.rtype)
    }
}

/// Why a record set is refused: a status reason and a message naming the
/// field (relative to the record: `name`, `ttl`, `values[1]`, or `spec.`
/// in front for a DNSRecord).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub reason: &'static str,
    pub message: String,
}

impl RecordError {
    fn invalid(e: ValidationError) -> RecordError {
        RecordError {
            reason: REASON_INVALID_RECORD,
            message: e.to_string(),
        }
    }
}

/// The message of a record set addressing the zone's apex NS RRset.
const APEX_NS_MESSAGE: &str = "the apex NS RRset is converged per rdata from BindZone.spec.nameservers (BIND ignores an RRset-wide delete at a zone apex)";

/// One `spec.records` entry of a primary BindZone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InlineRecord {
    /// An ordinary record set, or why it cannot be served.
    Rrset(Result<RecordSet, RecordError>),
    /// An apex NS entry: older manifests published the nameservers this
    /// way; it feeds the apex NS when `spec.nameservers` is empty. What
    /// validated is kept, the rest is in `errors`.
    ApexNs {
        ttl: Option<Ttl>,
        names: Vec<DomainName>,
        errors: Vec<RecordError>,
    },
}

/// The raw fields of a record set (a DNSRecord's spec or a `spec.records`
/// entry); `at` prefixes field paths in messages.
struct RawSet<'a> {
    at: &'a str,
    name: &'a str,
    rtype: api::RecordType,
    ttl: Option<u32>,
    values: &'a [String],
}

fn parse_type(raw: &RawSet<'_>) -> Result<RecordType, RecordError> {
    raw.rtype
        .as_str()
        .parse::<RecordType>()
        .map_err(|e| RecordError::invalid(e.at(&format!("{}type", raw.at))))
}

fn parse_ttl(raw: &RawSet<'_>, default_ttl: Ttl) -> Result<Ttl, RecordError> {
    match raw.ttl {
        Some(t) => Ttl::new(i64::from(t))
            .map_err(|e| RecordError::invalid(e.at(&format!("{}ttl", raw.at)))),
        None => Ok(default_ttl),
    }
}

/// Validates one record set in `zone`. The apex NS RRset is refused (it
/// converges from `spec.nameservers`); so is anything the nsupdate batch
/// builder would refuse for this RRset alone, with the same reason.
fn record_set(
    zone: &ZoneName,
    raw: &RawSet<'_>,
    default_ttl: Ttl,
) -> Result<RecordSet, RecordError> {
    let at = raw.at;
    let rtype = parse_type(raw)?;
    let name = DomainName::resolve(raw.name, zone)
        .map_err(|e| RecordError::invalid(e.at(&format!("{at}name"))))?;
    if rtype == RecordType::Ns && name == *zone.as_domain() {
        return Err(RecordError {
            reason: REASON_APEX_NS_UNSUPPORTED,
            message: APEX_NS_MESSAGE.into(),
        });
    }
    Rdata::check_owner_name(rtype, &name)
        .map_err(|e| RecordError::invalid(e.at(&format!("{at}name"))))?;
    let ttl = parse_ttl(raw, default_ttl)?;
    let values = raw
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Rdata::parse(rtype, v, zone)
                .and_then(|r| r.check_owner(rtype, &name).map(|()| r))
                .map_err(|e| RecordError::invalid(e.at(&format!("{at}values[{i}]"))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let change = RrsetChange::Replace {
        name,
        rtype,
        ttl,
        values,
    };
    check_change(zone, &change).map_err(|e| RecordError {
        reason: match e {
            BatchError::TooManyValues { .. } => REASON_TOO_MANY_VALUES,
            BatchError::ApexNsRecord { .. } => REASON_APEX_NS_UNSUPPORTED,
            _ => REASON_INVALID_RECORD,
        },
        message: e.to_string(),
    })?;
    let RrsetChange::Replace {
        name,
        rtype,
        ttl,
        values,
    } = change
    else {
        unreachable!("built as a replace above")
    };
    Ok(RecordSet {
        name,
        rtype,
        ttl,
        values: values.into_iter().collect(),
    })
}

/// Whether a record set addresses the zone's apex NS RRset.
fn is_apex_ns(zone: &ZoneName, raw: &RawSet<'_>) -> bool {
    parse_type(raw).is_ok_and(|t| t == RecordType::Ns)
        && DomainName::resolve(raw.name, zone).is_ok_and(|n| n == *zone.as_domain())
}

/// Validates one `spec.records` entry of a primary zone (field paths in
/// its messages are relative to the entry). [`super::zone_config`] runs it on
/// every entry.
pub fn inline_record(zone: &ZoneName, r: &api::ZoneRecord, default_ttl: Ttl) -> InlineRecord {
    let raw = RawSet {
        at: "",
        name: &r.name,
        rtype: r.type_,
        ttl: r.ttl,
        values: &r.values,
    };
    if !is_apex_ns(zone, &raw) {
        return InlineRecord::Rrset(record_set(zone, &raw, default_ttl));
    }
    let mut errors = Vec::new();
    let ttl = match raw.ttl.map(|_| parse_ttl(&raw, default_ttl)).transpose() {
        Ok(t) => t,
        Err(e) => {
            errors.push(e);
            None
        }
    };
    let mut names = Vec::new();
    for (j, v) in r.values.iter().enumerate() {
        match DomainName::resolve_target(v, zone) {
            Ok(n) => names.push(n),
            Err(e) => errors.push(RecordError::invalid(e.at(&format!("values[{j}]")))),
        }
    }
    InlineRecord::ApexNs { ttl, names, errors }
}

/// A DNSRecord validated against its zone: the record set it asks for,
/// and what its metadata and status tell the zone's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidRecord {
    /// metadata.name; the zone's plan makes it `namespace/name` for a
    /// record from another namespace (`zonesync::access::record_id`).
    pub object_name: String,
    pub created: Option<Time>,
    /// It carries the operator's finalizer: only then may it be written
    /// (its delete could not be guaranteed otherwise).
    pub managed: bool,
    /// It is being deleted.
    pub deleting: bool,
    /// The RRset its status names: written there once served, kept while
    /// the record waits for its zone.
    pub status_key: Option<(DomainName, RecordType)>,
    /// The status reason while its status is in Error.
    pub error_reason: Option<String>,
    /// `spec`, validated (field paths start with `spec.`).
    pub set: Result<RecordSet, RecordError>,
}

/// Validates a DNSRecord in `zone` (its BindZone's validated name) with the
/// zone's default TTL; `managed` says whether it carries the operator's
/// finalizer.
pub fn dns_record(
    record: &DNSRecord,
    zone: &ZoneName,
    default_ttl: Ttl,
    managed: bool,
) -> ValidRecord {
    let spec = &record.spec;
    let raw = RawSet {
        at: "spec.",
        name: &spec.name,
        rtype: spec.type_,
        ttl: spec.ttl,
        values: &spec.values,
    };
    let status = record.status.as_ref();
    ValidRecord {
        object_name: record.metadata.name.clone().unwrap_or_default(),
        created: record.metadata.creation_timestamp.clone(),
        managed,
        deleting: record.metadata.deletion_timestamp.is_some(),
        status_key: status.and_then(|s| {
            let name = DomainName::parse_absolute(s.fqdn.as_deref()?).ok()?;
            let rtype: RecordType = s.record_type?.as_str().parse().ok()?;
            Some((name, rtype))
        }),
        error_reason: status
            .filter(|s| s.phase == Some(Phase::Error))
            .and_then(|s| s.reason.clone()),
        set: record_set(zone, &raw, default_ttl),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DNSRecordSpec, DNSRecordStatus, ZoneRecord};

    fn zone() -> ZoneName {
        ZoneName::parse("example.com").unwrap()
    }

    fn ttl(s: i64) -> Ttl {
        Ttl::new(s).unwrap()
    }

    fn rec(name: &str, t: api::RecordType, ttl: Option<u32>, values: &[&str]) -> DNSRecord {
        let mut r = DNSRecord::new(
            "r",
            DNSRecordSpec {
                zone_ref: "z".into(),
                zone_namespace: None,
                name: name.into(),
                type_: t,
                ttl,
                values: values.iter().map(|v| v.to_string()).collect(),
            },
        );
        r.metadata.namespace = Some("ns".into());
        r
    }

    fn refused(r: &DNSRecord) -> RecordError {
        dns_record(r, &zone(), ttl(300), true).set.unwrap_err()
    }

    #[test]
    fn a_record_set_resolves_its_owner_and_collapses_duplicate_values() {
        let r = rec(
            "www",
            api::RecordType::A,
            None,
            &["192.0.2.1", "192.0.2.1", "192.0.2.2"],
        );
        let v = dns_record(&r, &zone(), ttl(300), true);
        let set = v.set.unwrap();
        assert_eq!(set.name.fqdn(), "www.example.com.");
        assert_eq!((set.rtype, set.ttl), (RecordType::A, ttl(300)));
        assert_eq!(set.values.len(), 2);
        let abs = rec(
            "mail.example.com.",
            api::RecordType::MX,
            Some(60),
            &["10 mx"],
        );
        let set = dns_record(&abs, &zone(), ttl(300), true).set.unwrap();
        assert_eq!(set.ttl, ttl(60));
        assert_eq!(
            set.values.iter().next().unwrap().to_string(),
            "10 mx.example.com."
        );
    }

    #[test]
    fn each_refusal_has_its_reason_and_names_the_field() {
        let cases: Vec<(DNSRecord, &str, &str)> = vec![
            (
                rec("www.example.org.", api::RecordType::A, None, &["192.0.2.1"]),
                REASON_INVALID_RECORD,
                "spec.name",
            ),
            (
                rec("mx", api::RecordType::MX, None, &["10 ok.", "not an mx"]),
                REASON_INVALID_RECORD,
                "spec.values[1]",
            ),
            (
                rec("t", api::RecordType::TXT, Some(1 << 31), &["\"x\""]),
                REASON_INVALID_RECORD,
                "spec.ttl",
            ),
            (
                rec(
                    "example.com.",
                    api::RecordType::NS,
                    None,
                    &["ns9.example.org."],
                ),
                REASON_APEX_NS_UNSUPPORTED,
                "spec.nameservers",
            ),
            (
                rec("@", api::RecordType::CNAME, None, &["x.example.org."]),
                REASON_INVALID_RECORD,
                "apex",
            ),
        ];
        for (r, reason, field) in cases {
            let e = refused(&r);
            assert_eq!(e.reason, reason, "{:?}: {e:?}", r.spec);
            assert!(e.message.contains(field), "{:?}: {}", r.spec, e.message);
        }
        let many: Vec<String> = (0..101).map(|i| format!("10.0.0.{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = refused(&rec("big", api::RecordType::A, None, &many));
        assert_eq!(e.reason, REASON_TOO_MANY_VALUES);
        let huge: Vec<String> = (0..100)
            .map(|i| format!("\"{i}{}\"", "x".repeat(1000)))
            .collect();
        let huge: Vec<&str> = huge.iter().map(String::as_str).collect();
        let e = refused(&rec("t", api::RecordType::TXT, None, &huge));
        assert_eq!(e.reason, REASON_INVALID_RECORD);
        assert!(
            e.message.contains("more than one message holds"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_dnsrecord_carries_what_its_status_says() {
        let mut r = rec("www", api::RecordType::A, None, &["192.0.2.1"]);
        r.status = Some(DNSRecordStatus {
            fqdn: Some("old.example.com.".into()),
            record_type: Some(api::RecordType::TXT),
            phase: Some(Phase::Error),
            reason: Some("Conflict".into()),
            ..Default::default()
        });
        let v = dns_record(&r, &zone(), ttl(300), false);
        assert!(!v.managed && !v.deleting);
        assert_eq!(v.object_name, "r");
        assert_eq!(
            v.status_key,
            Some((
                DomainName::parse_absolute("old.example.com").unwrap(),
                RecordType::Txt
            ))
        );
        assert_eq!(v.error_reason.as_deref(), Some("Conflict"));
        r.status.as_mut().unwrap().phase = Some(Phase::Ready);
        assert_eq!(dns_record(&r, &zone(), ttl(300), true).error_reason, None);
    }

    #[test]
    fn an_inline_apex_ns_entry_keeps_what_validates() {
        let entry = ZoneRecord {
            name: "@".into(),
            type_: api::RecordType::NS,
            ttl: Some(7200),
            values: vec!["ns2".into(), "bad name!".into()],
        };
        let InlineRecord::ApexNs {
            ttl: t,
            names,
            errors,
        } = inline_record(&zone(), &entry, ttl(300))
        else {
            panic!("an apex NS entry")
        };
        assert_eq!(t, Some(ttl(7200)));
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].fqdn(), "ns2.example.com.");
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].reason, REASON_INVALID_RECORD);
        assert!(
            errors[0].message.contains("values[1]"),
            "{}",
            errors[0].message
        );
        let entry = ZoneRecord {
            name: "www".into(),
            type_: api::RecordType::MX,
            ttl: None,
            values: vec!["bogus".into()],
        };
        let InlineRecord::Rrset(Err(e)) = inline_record(&zone(), &entry, ttl(300)) else {
            panic!("a refused record set")
        };
        assert!(e.message.starts_with("invalid values[0]"), "{}", e.message);
    }

    #[test]
    fn a_bad_owner_is_reported_against_the_name_not_a_value() {
        let entry = ZoneRecord {
            name: "-bad".into(),
            type_: api::RecordType::A,
            ttl: None,
            values: vec!["192.0.2.1".into()],
        };
        let InlineRecord::Rrset(Err(e)) = inline_record(&zone(), &entry, ttl(300)) else {
            panic!("a refused record set")
        };
        assert_eq!(e.reason, REASON_INVALID_RECORD);
        assert!(e.message.starts_with("invalid name"), "{}", e.message);
        assert!(!e.message.contains("values["), "{}", e.message);
    }
}
