//! The desired owned contents of one zone: the apex NS RRset, the RRsets of
//! `spec.records` and of every DNSRecord naming the zone, with conflicts
//! decided before anything is sent, plus the RRsets the operator owned
//! before and must now remove (a deleted DNSRecord, a renamed one, a removed
//! `spec.records` entry).
//!
//! Conflicts (one RRset claimed twice, a CNAME beside other data, an RRset
//! hidden by a delegation) are decided by `decide`: the claimant the
//! servers already serve keeps the name, claimants new together are all
//! refused; names and creation times never pick a winner.
//!
//! Its inputs are typed values from [`crate::render::validate`] (the zone's
//! validated `spec.records` and each DNSRecord validated against the zone):
//! nothing here reads a CRD string, and a record set that did not validate
//! arrives as its refusal and is refused alone.
//!
//! Pure: it reads the values it is handed and touches nothing. It never
//! lets an RRset nobody owns into the remove set: only keys named by a
//! DNSRecord's status or spec, or by the zone's own applied-inline list,
//! can be retired.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt as _;

use crate::api::DNSRecord;
use crate::bind::{DomainName, Rdata, RecordType, Ttl, ZoneName};

use crate::render::validate::{InlineRecord, RecordError, RecordSet, ValidRecord};

use super::RECORD_FINALIZER;

pub use memo::{MemoStats, PlanMemo};

use crate::api::REASON_APEX_NS_UNSUPPORTED;
use crate::api::REASON_CONFLICT;
use crate::api::REASON_INVALID_RECORD;
use crate::api::REASON_TOO_MANY_VALUES;

/// An RRset's identity: owner name and type.
pub type RrKey = (DomainName, RecordType);

/// `www.example.com. A`: how an RRset is named in messages and annotations.
pub fn key_text(key: &RrKey) -> String {
    format!("{} {}", key.0.fqdn(), key.1)
}

/// Parses [`key_text`] back.
pub fn parse_key_text(text: &str) -> Option<RrKey> {
    let (name, rtype) = text.split_once(' ')?;
    Some((DomainName::parse_absolute(name).ok()?, rtype.parse().ok()?))
}

/// Who asked for an RRset.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    /// `spec.records[i]` of the zone.
    Inline(usize),
    /// A DNSRecord, by its plan id: its name in the zone's namespace,
    /// `namespace/name` from another ([`super::access::record_id`]).
    Record(String),
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Inline(i) => write!(f, "spec.records[{i}] of the BindZone"),
            Owner::Record(n) => write!(f, "DNSRecord {n}"),
        }
    }
}

/// One RRset as it should be served.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WantedRrset {
    pub ttl: Ttl,
    pub values: BTreeSet<Rdata>,
    pub owner: Owner,
}

/// What the zone decided about one DNSRecord.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Owns this RRset; it is served once the zone's flush succeeds.
    Accepted(RrKey),
    /// Nothing of it is sent; the reason is a status reason.
    Rejected {
        reason: &'static str,
        message: String,
    },
    /// Being deleted: its RRsets are retired, then its finalizer released.
    Deleting,
    /// Without our finalizer yet: never written (its delete could not be
    /// guaranteed), picked up once the DNSRecord reconciler adds it.
    Unmanaged,
}

/// The apex NS RRset as it should be served.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApexWanted {
    pub ttl: Ttl,
    pub names: Vec<DomainName>,
}

/// The zone-level inputs, validated from the BindZone
/// ([`crate::render::validate::PrimaryZoneConfig`]).
pub struct ZoneInputs<'a> {
    pub zone: &'a ZoneName,
    /// The BindZone's metadata.name and creationTimestamp (inline records
    /// claim with them).
    pub object_name: &'a str,
    pub created: Option<&'a Time>,
    pub default_ttl: Ttl,
    /// `spec.nameservers`, validated.
    pub nameservers: &'a [DomainName],
    /// The fallback apex NS (SOA MNAME) when no nameserver is given.
    pub soa_mname: &'a DomainName,
    /// `spec.records`, validated entry by entry.
    pub inline: &'a [InlineRecord],
    /// Inline RRsets applied before (from the zone's applied annotation).
    pub applied_inline: &'a BTreeSet<RrKey>,
    /// Who may publish what (`spec.recordsFrom`): applied to each
    /// DNSRecord as it is validated ([`PlanMemo`]).
    pub access: &'a super::access::Access,
}

/// Everything the zone should hold, and what to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub rrsets: BTreeMap<RrKey, WantedRrset>,
    pub apex_ns: ApexWanted,
    /// Owned before, owned no more: deleted when served.
    pub retired: BTreeSet<RrKey>,
    /// DNSRecord plan id ([`super::access::record_id`]) -> verdict (every
    /// DNSRecord of the zone).
    pub verdicts: BTreeMap<String, Verdict>,
    /// `spec.records` problems (`spec.records[i]: ...`).
    pub inline_errors: Vec<(&'static str, String)>,
    /// The inline RRsets the zone owns after this plan (for the annotation).
    pub inline_owned: BTreeSet<RrKey>,
    /// In-zone nameservers with no A/AAAA RRset in the plan: BIND refuses
    /// to load such a zone (whatever check-integrity says) and refuses an
    /// update adding such an NS, so the zone cannot be written.
    pub missing_glue: Vec<DomainName>,
}

impl Desired {
    /// A fingerprint of what would be sent: equal fingerprints need no new
    /// write if the server still holds what the last one produced.
    pub fn fingerprint(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (k, v) in &self.rrsets {
            k.hash(&mut h);
            v.ttl.hash(&mut h);
            v.values.hash(&mut h);
        }
        self.apex_ns.hash(&mut h);
        self.retired.hash(&mut h);
        h.finish()
    }

    /// DNSRecords to release (finalizer) once a flush succeeded.
    pub fn deleting(&self) -> impl Iterator<Item = &str> {
        self.verdicts
            .iter()
            .filter(|(_, v)| matches!(v, Verdict::Deleting))
            .map(|(n, _)| n.as_str())
    }
}

/// Whether our finalizer is on the DNSRecord.
pub fn has_record_finalizer(r: &DNSRecord) -> bool {
    r.finalizers().iter().any(|f| f == RECORD_FINALIZER)
}

struct Claimant<'a> {
    created: Option<&'a Time>,
    /// The servers hold this RRset for this claimant (see [`decide`]).
    incumbent: bool,
    name: &'a str,
    index: usize,
    owner: Owner,
    result: &'a Result<RecordSet, RecordError>,
}

/// Reasons the plan refuses a record with: a record refused this way is
/// not served, whatever its status still names.
const PLAN_REFUSALS: &[&str] = &[
    REASON_CONFLICT,
    crate::api::REASON_CNAME_CONFLICT,
    crate::api::REASON_OCCLUDED,
    crate::api::REASON_DELEGATION_CONFLICT,
    REASON_INVALID_RECORD,
    REASON_TOO_MANY_VALUES,
    REASON_APEX_NS_UNSUPPORTED,
    crate::api::REASON_NOT_ALLOWED,
];

/// Whether the DNSRecord's status says the servers hold `key` for it: the
/// status names the RRset only once it was served (and keeps naming it
/// while the record waits for its zone), unless the plan refused it since.
fn serves(r: &ValidRecord, key: &RrKey) -> bool {
    let refused = r
        .error_reason
        .as_deref()
        .is_some_and(|x| PLAN_REFUSALS.contains(&x));
    !refused && r.status_key.as_ref() == Some(key)
}

/// Computes the zone's desired owned contents. `records` are the DNSRecords
/// whose zoneRef names this zone (any order), validated against it.
/// Conflicts are decided by `decide`: the claimant already serving keeps
/// a name; new claimants that clash are all refused.
pub fn plan<R: Borrow<ValidRecord>>(z: &ZoneInputs<'_>, records: &[R]) -> Desired {
    let mut inline_errors = Vec::new();
    let mut verdicts = BTreeMap::new();
    let mut claimants = Vec::new();
    let mut inline_apex = Vec::new();

    for (i, r) in z.inline.iter().enumerate() {
        let result = match r {
            InlineRecord::Rrset(result) => result,
            InlineRecord::ApexNs { .. } => {
                inline_apex.push((i, r));
                continue;
            }
        };
        claimants.push(Claimant {
            created: z.created,
            incumbent: result
                .as_ref()
                .is_ok_and(|c| z.applied_inline.contains(&c.key())),
            name: z.object_name,
            index: i,
            owner: Owner::Inline(i),
            result,
        });
    }

    let mut retired = BTreeSet::new();
    for r in records {
        let r = r.borrow();
        let name = r.object_name.clone();
        if !r.managed {
            verdicts.insert(name, Verdict::Unmanaged);
            continue;
        }
        if r.deleting {
            retired.extend(r.status_key.clone());
            if let Ok(c) = &r.set {
                retired.insert(c.key());
            }
            verdicts.insert(name, Verdict::Deleting);
            continue;
        }
        if super::access::not_allowed(r) {
            // What it was served for goes (a narrowed grant); the retain
            // below keeps an RRset someone allowed now owns.
            retired.extend(r.status_key.clone());
        }
        claimants.push(Claimant {
            created: r.created.as_ref(),
            incumbent: r.set.as_ref().is_ok_and(|c| serves(r, &c.key())),
            name: &r.object_name,
            index: 0,
            owner: Owner::Record(name),
            result: &r.set,
        });
    }

    // The legacy order only breaks ties between two incumbents.
    claimants.sort_by(|a, b| (a.created, a.name, a.index).cmp(&(b.created, b.name, b.index)));
    let mut inline_ok = true;
    let mut refuse = |owner: Owner,
                      reason: &'static str,
                      message: String,
                      verdicts: &mut BTreeMap<String, Verdict>| match owner {
        Owner::Record(n) => {
            verdicts.insert(n, Verdict::Rejected { reason, message });
        }
        Owner::Inline(i) => {
            inline_ok = false;
            inline_errors.push((reason, format!("spec.records[{i}]: {message}")));
        }
    };
    let mut claims = Vec::new();
    for (rank, c) in claimants.into_iter().enumerate() {
        match c.result {
            Ok(set) => claims.push(decide::Claim {
                owner: c.owner,
                incumbent: c.incumbent,
                rank,
                set: set.clone(),
            }),
            Err(e) => refuse(c.owner, e.reason, e.message.clone(), &mut verdicts),
        }
    }
    let (accepted, refused) = decide::decide(claims);
    for r in refused {
        refuse(r.owner, r.reason, r.message, &mut verdicts);
    }
    let mut rrsets: BTreeMap<RrKey, WantedRrset> = BTreeMap::new();
    for c in accepted {
        let key = c.set.key();
        if let Owner::Record(n) = &c.owner {
            verdicts.insert(n.clone(), Verdict::Accepted(key.clone()));
        }
        rrsets.insert(
            key,
            WantedRrset {
                ttl: c.set.ttl,
                values: c.set.values,
                owner: c.owner,
            },
        );
    }
    // Entries reported in `spec.records` order.
    inline_errors.sort_by_key(|(_, m)| inline_index(m));

    let apex_ns = apex_wanted(z, &inline_apex, &mut inline_errors);

    // A renamed DNSRecord's old RRset; a bad edit keeps the old one serving.
    for r in records {
        let r = r.borrow();
        if let Some(Verdict::Accepted(k)) = verdicts.get(&r.object_name)
            && let Some(old) = &r.status_key
            && old != k
        {
            retired.insert(old.clone());
        }
    }
    let accepted_inline: BTreeSet<RrKey> = rrsets
        .iter()
        .filter(|(_, w)| matches!(w.owner, Owner::Inline(_)))
        .map(|(k, _)| k.clone())
        .collect();
    // Which old inline RRset a now-invalid entry stood for is unknown, so
    // inline removals wait until every entry is valid again.
    let inline_owned = if inline_ok {
        retired.extend(z.applied_inline.difference(&accepted_inline).cloned());
        accepted_inline
    } else {
        accepted_inline.union(z.applied_inline).cloned().collect()
    };
    let apex = z.zone.as_domain();
    let is_apex_ns_key = |k: &RrKey| k.0 == *apex && k.1 == RecordType::Ns;
    retired.retain(|k| !(rrsets.contains_key(k) || is_apex_ns_key(k)));

    let missing_glue = missing_glue(apex, &apex_ns, &rrsets);

    Desired {
        rrsets,
        apex_ns,
        retired,
        verdicts,
        inline_errors,
        inline_owned,
        missing_glue,
    }
}

/// In-zone nameservers of the apex NS with no A/AAAA RRset in `rrsets`.
fn missing_glue(
    apex: &DomainName,
    apex_ns: &ApexWanted,
    rrsets: &BTreeMap<RrKey, WantedRrset>,
) -> Vec<DomainName> {
    apex_ns
        .names
        .iter()
        .filter(|n| n.is_within(apex))
        .filter(|n| {
            ![RecordType::A, RecordType::Aaaa]
                .iter()
                .any(|t| rrsets.contains_key(&((*n).clone(), *t)))
        })
        .cloned()
        .collect()
}

/// The apex NS: `spec.nameservers`; else inline apex NS entries (older
/// manifests published nameservers that way); else the SOA MNAME.
fn apex_wanted(
    z: &ZoneInputs<'_>,
    inline_apex: &[(usize, &InlineRecord)],
    errors: &mut Vec<(&'static str, String)>,
) -> ApexWanted {
    if !z.nameservers.is_empty() {
        for (i, _) in inline_apex {
            errors.push((
                REASON_CONFLICT,
                format!(
                    "spec.records[{i}]: the apex NS RRset comes from spec.nameservers; remove this entry"
                ),
            ));
        }
        return ApexWanted {
            ttl: z.default_ttl,
            names: dedup(z.nameservers.to_vec()),
        };
    }
    let mut names = Vec::new();
    let mut ttl = z.default_ttl;
    for (i, r) in inline_apex {
        let InlineRecord::ApexNs {
            ttl: t,
            names: n,
            errors: e,
        } = r
        else {
            continue;
        };
        if let Some(t) = t {
            ttl = *t;
        }
        names.extend(n.iter().cloned());
        errors.extend(
            e.iter()
                .map(|e| (e.reason, format!("spec.records[{i}]: {}", e.message))),
        );
    }
    if names.is_empty() {
        names.push(z.soa_mname.clone());
    }
    ApexWanted {
        ttl,
        names: dedup(names),
    }
}

/// `spec.records[i]: ...` -> i (messages are built that way above).
fn inline_index(message: &str) -> usize {
    message
        .strip_prefix("spec.records[")
        .and_then(|m| m.split(']').next())
        .and_then(|i| i.parse().ok())
        .unwrap_or(usize::MAX)
}

fn dedup(mut v: Vec<DomainName>) -> Vec<DomainName> {
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod access_tests;
mod decide;
mod memo;
#[cfg(test)]
mod tests;
