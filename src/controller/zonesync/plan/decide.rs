//! Who keeps a contested name: the conflict rule of a zone's plan.
//!
//! Content-neutral and restart-proof. A claimant is the *incumbent* of an
//! RRset when the servers hold it for that claimant: a DNSRecord whose
//! status names this RRset (`fqdn`/`recordType`, written only once it was
//! served) and is not in Error, or a `spec.records` entry whose RRset is in
//! the zone's applied annotation. Both survive an operator restart, so a
//! restart never changes the outcome.
//!
//! - Same RRset (name and type) claimed twice: the incumbent keeps it; the
//!   others are refused with `Conflict` naming it. With no incumbent every
//!   party is refused with `Conflict` naming the others, and none is served
//!   until all but one are removed. Names and creation times never decide
//!   (objects applied together share a creationTimestamp, and an attacker
//!   picks names).
//! - CNAME and other data at one name: the same rule, with `CNAMEConflict`.
//! - A delegation (NS below the apex) and the RRsets it would hide (at or
//!   below its name, except the NS and DS at the cut and the address
//!   records its targets need as glue): an incumbent delegation keeps
//!   serving and the hidden ones are refused as `Occluded` (a resolver would
//!   get a referral instead); a new delegation that would hide served
//!   RRsets is refused as `DelegationConflict`; a new delegation over new
//!   RRsets refuses all parties.
//!
//! Above all of this, a zone's own `spec.records` win over any DNSRecord
//! (they come from whoever owns the zone, and a DNSRecord must never take
//! a zone's own data, its nameservers' glue for one, away): an inline entry
//! ranks above a DNSRecord whether or not either is served, and the
//! DNSRecord is refused naming the inline entry. Among claimants of one
//! kind the incumbent rule above applies.
//!
//! Only where two incumbents meet (state left by an older operator) does a
//! fixed order decide: creation time, then name, then entry order.
//!
//! Pure: no I/O.

use std::collections::BTreeMap;

use crate::bind::{Rdata, RecordType};

use crate::render::validate::RecordSet;

use super::{Owner, RrKey, key_text};

use crate::api::{
    REASON_CNAME_CONFLICT, REASON_CONFLICT, REASON_DELEGATION_CONFLICT, REASON_OCCLUDED,
};

/// One valid claim on an RRset.
pub(super) struct Claim {
    pub owner: Owner,
    pub incumbent: bool,
    /// Position in the legacy order (only breaks ties between incumbents).
    pub rank: usize,
    pub set: RecordSet,
}

/// A refused claim and why.
pub(super) struct Refusal {
    pub owner: Owner,
    pub reason: &'static str,
    pub message: String,
}

/// How strongly a claim holds its name: a zone's own entry over a
/// DNSRecord, then the incumbent over a newcomer.
type Standing = (bool, bool);

fn standing(c: &Claim) -> Standing {
    (matches!(c.owner, Owner::Inline(_)), c.incumbent)
}

/// Who wins between two sides of a conflict, by [`Standing`]: `Some(true)`
/// the first, `Some(false)` the second, `None` a tie (broken by rank only
/// between incumbents; the caller decides).
fn stronger(a: Standing, b: Standing) -> Option<bool> {
    match a.cmp(&b) {
        std::cmp::Ordering::Greater => Some(true),
        std::cmp::Ordering::Less => Some(false),
        std::cmp::Ordering::Equal => None,
    }
}

/// Why `winner` keeps `key` against another claimant.
fn kept_by(key: &RrKey, winner: &Claim) -> String {
    match &winner.owner {
        Owner::Inline(_) => format!(
            "{} is set by {}; a zone's own records win over a DNSRecord",
            key_text(key),
            winner.owner
        ),
        Owner::Record(_) => format!("{} is already served for {}", key_text(key), winner.owner),
    }
}

fn refuse(owner: &Owner, reason: &'static str, message: String) -> Refusal {
    Refusal {
        owner: owner.clone(),
        reason,
        message,
    }
}

fn owners<'a>(claims: impl Iterator<Item = &'a Claim>) -> String {
    claims
        .map(|c| c.owner.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Splits valid claims into the accepted ones (at most one per RRset, no
/// CNAME beside other data, nothing hidden by a delegation) and refusals.
pub(super) fn decide(claims: Vec<Claim>) -> (Vec<Claim>, Vec<Refusal>) {
    let mut refused = Vec::new();
    let survivors = same_rrset(claims, &mut refused);
    let survivors = cname_beside_data(survivors, &mut refused);
    let survivors = delegations(survivors, &mut refused);
    (survivors, refused)
}

fn same_rrset(claims: Vec<Claim>, refused: &mut Vec<Refusal>) -> Vec<Claim> {
    let mut by_key: BTreeMap<RrKey, Vec<Claim>> = BTreeMap::new();
    for c in claims {
        by_key.entry(c.set.key()).or_default().push(c);
    }
    let mut out = Vec::new();
    for (key, mut group) in by_key {
        if group.len() == 1 {
            out.extend(group);
            continue;
        }
        group.sort_by_key(|c| c.rank);
        // The strongest standing wins: alone, or among incumbents by rank.
        let best = group.iter().map(standing).max();
        let top = group.iter().filter(|c| Some(standing(c)) == best).count();
        let winner = group
            .iter()
            .position(|c| Some(standing(c)) == best && (top == 1 || c.incumbent));
        match winner {
            Some(i) => {
                let winner = group.remove(i);
                for c in &group {
                    refused.push(refuse(&c.owner, REASON_CONFLICT, kept_by(&key, &winner)));
                }
                out.push(winner);
            }
            None => {
                for c in &group {
                    let others = owners(group.iter().filter(|o| o.owner != c.owner));
                    refused.push(refuse(
                        &c.owner,
                        REASON_CONFLICT,
                        format!(
                            "{} is also claimed by {others} and none of them served it before; none is served until all but one are removed",
                            key_text(&key)
                        ),
                    ));
                }
            }
        }
    }
    out
}

fn cname_beside_data(claims: Vec<Claim>, refused: &mut Vec<Refusal>) -> Vec<Claim> {
    let mut by_name: BTreeMap<crate::bind::DomainName, Vec<Claim>> = BTreeMap::new();
    for c in claims {
        by_name.entry(c.set.name.clone()).or_default().push(c);
    }
    let mut out = Vec::new();
    for (name, group) in by_name {
        let (cname, data): (Vec<Claim>, Vec<Claim>) = group
            .into_iter()
            .partition(|c| c.set.rtype == RecordType::Cname);
        // After same_rrset at most one CNAME claim is left per name.
        let Some(cname) = cname.into_iter().next() else {
            out.extend(data);
            continue;
        };
        if data.is_empty() {
            out.push(cname);
            continue;
        }
        let types = data
            .iter()
            .map(|c| c.set.rtype.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let data_standing = data.iter().map(standing).max().unwrap_or_default();
        let data_first = data.iter().map(|c| c.rank).min() < Some(cname.rank);
        let cname_wins = match stronger(standing(&cname), data_standing) {
            Some(w) => Some(w),
            None if cname.incumbent => Some(!data_first),
            None => None,
        };
        match cname_wins {
            Some(true) => {
                for c in &data {
                    refused.push(refuse(
                        &c.owner,
                        REASON_CNAME_CONFLICT,
                        format!(
                            "{} holds a CNAME for {}; a CNAME cannot share its name with other data",
                            name.fqdn(),
                            cname.owner
                        ),
                    ));
                }
                out.push(cname);
            }
            Some(false) => {
                refused.push(refuse(
                    &cname.owner,
                    REASON_CNAME_CONFLICT,
                    format!(
                        "{} holds {types} for {}; a CNAME cannot share its name with other data",
                        name.fqdn(),
                        owners(data.iter())
                    ),
                ));
                out.extend(data);
            }
            None => {
                let message = format!(
                    "{} is claimed for a CNAME by {} and for {types} by {}, none served before; a CNAME cannot share its name with other data, so none is served until one side is removed",
                    name.fqdn(),
                    cname.owner,
                    owners(data.iter())
                );
                for c in std::iter::once(&cname).chain(&data) {
                    refused.push(refuse(&c.owner, REASON_CNAME_CONFLICT, message.clone()));
                }
            }
        }
    }
    out
}

/// Whether `hidden` lies under the delegation `ns` and a resolver asking
/// for it would get a referral.
fn hides(ns: &Claim, hidden: &Claim) -> bool {
    let cut = &ns.set.name;
    let (name, rtype) = (&hidden.set.name, &hidden.set.rtype);
    if !name.is_within(cut) {
        return false;
    }
    if name == cut && matches!(rtype, RecordType::Ns | RecordType::Ds) {
        return false;
    }
    let glue = matches!(rtype, RecordType::A | RecordType::Aaaa)
        && ns
            .set
            .values
            .iter()
            .any(|v| matches!(v, Rdata::Name(t) if t == name));
    !glue
}

fn delegations(mut claims: Vec<Claim>, refused: &mut Vec<Refusal>) -> Vec<Claim> {
    // Shallowest cut first: a cut inside another is itself hidden by it.
    let mut cuts: Vec<RrKey> = claims
        .iter()
        .filter(|c| c.set.rtype == RecordType::Ns)
        .map(|c| c.set.key())
        .collect();
    cuts.sort_by_key(|k| k.0.as_str().len());
    for cut in cuts {
        let Some(ns_at) = claims
            .iter()
            .position(|c| c.set.name == cut.0 && c.set.rtype == cut.1)
        else {
            continue; // refused under a shallower cut
        };
        let ns = &claims[ns_at];
        let hidden: Vec<usize> = (0..claims.len())
            .filter(|&i| i != ns_at && hides(ns, &claims[i]))
            .collect();
        if hidden.is_empty() {
            continue;
        }
        let list = owners(hidden.iter().map(|&i| &claims[i]));
        let keys = hidden
            .iter()
            .map(|&i| key_text(&claims[i].set.key()))
            .collect::<Vec<_>>()
            .join(", ");
        let hidden_standing = hidden
            .iter()
            .map(|&i| standing(&claims[i]))
            .max()
            .unwrap_or_default();
        // Equal standing: an incumbent delegation keeps serving; new ones
        // over new records refuse all parties.
        let (ns_keeps, hidden_keep) = match stronger(standing(ns), hidden_standing) {
            Some(true) => (true, false),
            Some(false) => (false, true),
            None => (ns.incumbent, false),
        };
        let mut drop = Vec::new();
        if !hidden_keep {
            for &i in &hidden {
                refused.push(refuse(
                    &claims[i].owner,
                    REASON_OCCLUDED,
                    format!(
                        "{} lies under the delegation {} ({}): resolvers get a referral, not this record set",
                        key_text(&claims[i].set.key()),
                        key_text(&cut),
                        ns.owner
                    ),
                ));
                drop.push(i);
            }
        }
        if !ns_keeps {
            refused.push(refuse(
                &ns.owner,
                REASON_DELEGATION_CONFLICT,
                format!(
                    "{} would delegate away {keys} ({list}); remove them or move the delegation",
                    key_text(&cut)
                ),
            ));
            drop.push(ns_at);
        }
        drop.sort_unstable();
        for i in drop.into_iter().rev() {
            claims.remove(i);
        }
    }
    claims
}
