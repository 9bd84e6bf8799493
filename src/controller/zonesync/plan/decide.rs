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
        match group.iter().position(|c| c.incumbent) {
            Some(i) => {
                let winner = group.swap_remove(i);
                for c in &group {
                    refused.push(refuse(
                        &c.owner,
                        REASON_CONFLICT,
                        format!("{} is already served for {}", key_text(&key), winner.owner),
                    ));
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
        let data_incumbent = data.iter().any(|c| c.incumbent);
        let data_first = data.iter().map(|c| c.rank).min() < Some(cname.rank);
        let cname_wins = match (cname.incumbent, data_incumbent) {
            (true, false) => Some(true),
            (false, true) => Some(false),
            (true, true) => Some(!data_first),
            (false, false) => None,
        };
        match cname_wins {
            Some(true) => {
                for c in &data {
                    refused.push(refuse(
                        &c.owner,
                        REASON_CNAME_CONFLICT,
                        format!(
                            "{} holds a CNAME served for {}; a CNAME cannot share its name with other data",
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
                        "{} already serves {types} for {}; a CNAME cannot share its name with other data",
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
        let hidden_incumbent = hidden.iter().any(|&i| claims[i].incumbent);
        let mut drop = Vec::new();
        if ns.incumbent || !hidden_incumbent {
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
        if !ns.incumbent {
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
