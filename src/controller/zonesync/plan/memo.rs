//! A zone's plan kept between reconciles, so a reconcile costs what changed,
//! not what exists: the zone's DNSRecords validated by object (uid and
//! resourceVersion: any change to an object, its status and finalizers
//! included, gives it a new resourceVersion) and the last [`Desired`] with
//! what each record contributed to it. A reconcile validates only the
//! DNSRecords whose object changed and decides again only the names they
//! touch.
//!
//! Why deciding a few names again gives the same plan as deciding all of
//! them ([`super::decide`]): a conflict is between claims of one RRset or of
//! one name, or between a delegation and the claims at or below its cut.
//! So claims fall into *units* that never affect each other: the claims at
//! one name, or, below a delegation, the whole subtree of the shallowest
//! cut. Ties between incumbents are broken by the relative order of the
//! claims, the same inside a unit as in the whole zone.
//!
//! It never guesses: the whole plan is made again ([`super::plan`]) after a
//! restart (nothing remembered), when the zone's inputs changed (its spec,
//! its applied annotation, its cluster), when a change touches a
//! delegation (an NS claim moves the units) or a name a `spec.records`
//! entry also claims, and when most records changed anyway. A removed
//! DNSRecord leaves the memo with its contribution; a deleted zone's memo
//! goes with the zone's memory.
//!
//! Pure: no I/O. Holds no key material.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::api::DNSRecord;
use crate::bind::{DomainName, RecordType};
use crate::render::validate::{InlineRecord, ValidRecord, dns_record};

use super::{
    Desired, Owner, RrKey, Verdict, WantedRrset, ZoneInputs, decide, has_record_finalizer,
    plan as full_plan, serves,
};

/// One DNSRecord of a plan call: uid, resourceVersion, validated.
type Current<'r> = (Cow<'r, str>, Option<&'r str>, Arc<ValidRecord>);

/// Per zone: the validated DNSRecords and the last plan (see the module doc).
#[derive(Debug, Default)]
pub struct PlanMemo {
    /// What the validations and the plan were made under.
    basis: Option<u64>,
    /// By DNSRecord uid.
    entries: HashMap<String, Entry>,
    /// Uids of the record claims of each unit.
    units: HashMap<DomainName, Vec<String>>,
    /// Units holding a `spec.records` claim.
    inline_units: HashSet<DomainName>,
    /// Names of the delegations claimed (NS claims).
    cuts: Vec<DomainName>,
    /// How many contributions ask for each RRset to be removed (it is
    /// retired unless the plan serves it).
    candidates: HashMap<RrKey, usize>,
    desired: Option<Arc<Desired>>,
    stats: MemoStats,
}

/// What the memo did so far (for tests and debug logs).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MemoStats {
    /// DNSRecords validated.
    pub validated: u64,
    /// Plans made whole.
    pub full: u64,
    /// Plans made by deciding only the units a change touched.
    pub incremental: u64,
    /// Plans that found nothing changed.
    pub unchanged: u64,
}

#[derive(Debug)]
struct Entry {
    /// `None`: not known, validated again on every plan.
    resource_version: Option<String>,
    valid: Arc<ValidRecord>,
    /// What it asks to remove.
    retire: Vec<RrKey>,
}

/// Whether the record claims an RRset (others are decided alone).
fn claims(v: &ValidRecord) -> bool {
    v.managed && !v.deleting && v.set.is_ok()
}

/// An NS record set, whatever its state: it may move the units.
fn is_ns(v: &ValidRecord) -> bool {
    v.set.as_ref().is_ok_and(|s| s.rtype == RecordType::Ns)
}

/// The RRsets a record asks to remove, as [`super::plan`] collects them.
fn retire_of(v: &ValidRecord, accepted: Option<&RrKey>) -> Vec<RrKey> {
    if !v.managed {
        return Vec::new();
    }
    if v.deleting {
        let mut out: Vec<RrKey> = v.status_key.iter().cloned().collect();
        if let Ok(s) = &v.set {
            out.push(s.key());
        }
        return out;
    }
    if super::super::access::not_allowed(v) {
        return v.status_key.iter().cloned().collect();
    }
    match (accepted, &v.status_key) {
        (Some(k), Some(old)) if old != k => vec![old.clone()],
        _ => Vec::new(),
    }
}

/// The verdict of a record that does not claim.
fn local_verdict(v: &ValidRecord) -> Option<Verdict> {
    if !v.managed {
        return Some(Verdict::Unmanaged);
    }
    if v.deleting {
        return Some(Verdict::Deleting);
    }
    match &v.set {
        Err(e) => Some(Verdict::Rejected {
            reason: e.reason,
            message: e.message.clone(),
        }),
        Ok(_) => None,
    }
}

/// The unit of the record's claim, when it claims (`cuts` as of the last
/// whole plan: only a whole plan changes them).
fn claim_unit(cuts: &[DomainName], v: &ValidRecord) -> Option<DomainName> {
    let set = v.set.as_ref().ok().filter(|_| claims(v))?;
    Some(unit_of(cuts, &set.name))
}

/// The RRset the record owns in `d`.
fn accepted_in(d: &Desired, v: &ValidRecord) -> Option<RrKey> {
    match d.verdicts.get(&v.object_name) {
        Some(Verdict::Accepted(k)) => Some(k.clone()),
        _ => None,
    }
}

fn unit_of(cuts: &[DomainName], name: &DomainName) -> DomainName {
    cuts.iter()
        .filter(|c| name.is_within(c))
        .min_by_key(|c| c.as_str().len())
        .unwrap_or(name)
        .clone()
}

fn basis_of(z: &ZoneInputs<'_>, extra: u64) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    extra.hash(&mut h);
    format!(
        "{:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        z.access,
        z.zone,
        z.object_name,
        z.created,
        z.default_ttl,
        z.nameservers,
        z.soa_mname,
        z.inline,
        z.applied_inline
    )
    .hash(&mut h);
    h.finish()
}

impl PlanMemo {
    pub fn stats(&self) -> MemoStats {
        self.stats
    }

    /// The zone's plan for `records` (the DNSRecords naming it): the same
    /// value [`super::plan`] returns for them, validated and decided again
    /// only where an object changed. `extra` names what else the plan was
    /// made under (the zone object and its cluster, by uid and generation):
    /// when it differs from the last call, everything is made again.
    pub fn plan(
        &mut self,
        z: &ZoneInputs<'_>,
        extra: u64,
        records: &[Arc<DNSRecord>],
    ) -> Arc<Desired> {
        let basis = basis_of(z, extra);
        if self.basis != Some(basis) {
            *self = PlanMemo {
                basis: Some(basis),
                stats: self.stats,
                ..PlanMemo::default()
            };
        }
        // Validate what changed.
        let mut current: Vec<Current<'_>> = Vec::with_capacity(records.len());
        let mut changed = Vec::new();
        for r in records {
            let uid: Cow<'_, str> = match &r.metadata.uid {
                Some(u) => Cow::Borrowed(u),
                None => Cow::Owned(format!("name:{}", r.metadata.name.as_deref().unwrap_or(""))),
            };
            let rv = r.metadata.resource_version.as_deref();
            let old = self.entries.get(uid.as_ref());
            let valid = match old {
                Some(e) if rv.is_some() && e.resource_version.as_deref() == rv => e.valid.clone(),
                _ => {
                    self.stats.validated += 1;
                    changed.push(current.len());
                    let mut v = dns_record(r, z.zone, z.default_ttl, has_record_finalizer(r));
                    z.access.apply(r, &mut v);
                    Arc::new(v)
                }
            };
            current.push((uid, rv, valid));
        }
        let kept = current.len() - changed.len();
        let removed: Vec<String> = if self.entries.len() > kept {
            let now: HashSet<&str> = current.iter().map(|(u, _, _)| u.as_ref()).collect();
            self.entries
                .keys()
                .filter(|u| !now.contains(u.as_str()))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        if let Some(d) = &self.desired
            && changed.is_empty()
            && removed.is_empty()
        {
            self.stats.unchanged += 1;
            return d.clone();
        }
        let patched = self.desired.is_some()
            && (changed.len() + removed.len()) * 2 <= current.len()
            && self.patch(z, &current, &changed, &removed);
        if patched {
            self.stats.incremental += 1;
        } else {
            self.stats.full += 1;
            self.full(z, current);
        }
        self.desired.clone().expect("a plan was just made")
    }

    /// Makes the whole plan and remembers what each record contributed.
    fn full(&mut self, z: &ZoneInputs<'_>, current: Vec<Current<'_>>) {
        let valids: Vec<&ValidRecord> = current.iter().map(|(_, _, v)| v.as_ref()).collect();
        let desired = full_plan(z, &valids);
        let inline_sets = z.inline.iter().enumerate().filter_map(|(i, r)| match r {
            InlineRecord::Rrset(res) => Some((i, res)),
            InlineRecord::ApexNs { .. } => None,
        });
        let mut cuts: Vec<DomainName> = inline_sets
            .clone()
            .filter_map(|(_, res)| res.as_ref().ok())
            .filter(|s| s.rtype == RecordType::Ns)
            .map(|s| s.name.clone())
            .collect();
        cuts.extend(
            valids
                .iter()
                .filter(|v| claims(v) && is_ns(v))
                .filter_map(|v| v.set.as_ref().ok().map(|s| s.name.clone())),
        );
        cuts.sort();
        cuts.dedup();
        let inline_units = inline_sets
            .clone()
            .filter_map(|(_, res)| res.as_ref().ok())
            .map(|s| unit_of(&cuts, &s.name))
            .collect();
        // `spec.records` removals, as the plan decides them: only while
        // every entry is valid and served.
        let mut candidates: HashMap<RrKey, usize> = HashMap::new();
        let inline_ok = inline_sets.clone().all(|(i, res)| {
            res.as_ref().is_ok_and(|s| {
                desired
                    .rrsets
                    .get(&s.key())
                    .is_some_and(|w| w.owner == Owner::Inline(i))
            })
        });
        if inline_ok {
            let owned: BTreeSet<&RrKey> = desired
                .rrsets
                .iter()
                .filter(|(_, w)| matches!(w.owner, Owner::Inline(_)))
                .map(|(k, _)| k)
                .collect();
            for k in z.applied_inline.iter().filter(|k| !owned.contains(k)) {
                *candidates.entry(k.clone()).or_default() += 1;
            }
        }
        let mut entries = HashMap::with_capacity(current.len());
        let mut units: HashMap<DomainName, Vec<String>> = HashMap::new();
        for (uid, rv, valid) in current {
            let retire = retire_of(&valid, accepted_in(&desired, &valid).as_ref());
            for k in &retire {
                *candidates.entry(k.clone()).or_default() += 1;
            }
            if let Some(u) = claim_unit(&cuts, &valid) {
                units.entry(u).or_default().push(uid.to_string());
            }
            entries.insert(
                uid.into_owned(),
                Entry {
                    resource_version: rv.map(str::to_string),
                    valid,
                    retire,
                },
            );
        }
        self.entries = entries;
        self.units = units;
        self.inline_units = inline_units;
        self.cuts = cuts;
        self.candidates = candidates;
        self.desired = Some(Arc::new(desired));
    }

    /// Decides again only the units the changed and removed records touch.
    /// Returns false (nothing changed) when that cannot be done safely.
    fn patch(
        &mut self,
        z: &ZoneInputs<'_>,
        current: &[Current<'_>],
        changed: &[usize],
        removed: &[String],
    ) -> bool {
        // The units touched, and whether a change could move them.
        let mut affected: HashSet<DomainName> = HashSet::new();
        let olds = changed
            .iter()
            .filter_map(|&i| self.entries.get(current[i].0.as_ref()))
            .chain(removed.iter().filter_map(|u| self.entries.get(u)));
        for e in olds {
            if is_ns(&e.valid) {
                return false;
            }
            affected.extend(claim_unit(&self.cuts, &e.valid));
        }
        for &i in changed {
            let v = &current[i].2;
            if is_ns(v) {
                return false;
            }
            if claims(v)
                && let Ok(s) = &v.set
            {
                affected.insert(unit_of(&self.cuts, &s.name));
            }
        }
        if affected.iter().any(|u| self.inline_units.contains(u)) {
            return false;
        }

        let Some(desired) = self.desired.as_mut() else {
            return false;
        };
        let d = Arc::make_mut(desired);
        let mut keys: HashSet<RrKey> = HashSet::new();
        // Everything the touched records contributed goes.
        let mut touched: Vec<String> = removed.to_vec();
        touched.extend(changed.iter().map(|&i| current[i].0.to_string()));
        for u in &affected {
            touched.extend(self.units.get(u).into_iter().flatten().cloned());
        }
        touched.sort();
        touched.dedup();
        for uid in &touched {
            let Some(e) = self.entries.get(uid) else {
                continue;
            };
            if let Some(Verdict::Accepted(k)) = d.verdicts.remove(&e.valid.object_name) {
                d.rrsets.remove(&k);
                keys.insert(k);
            }
            for k in &e.retire {
                if let Some(n) = self.candidates.get_mut(k) {
                    *n -= 1;
                    if *n == 0 {
                        self.candidates.remove(k);
                    }
                }
                keys.insert(k.clone());
            }
        }
        // Changed and removed records leave their unit (the others of
        // an affected unit stay in it and are decided again below).
        let gone = removed
            .iter()
            .map(String::as_str)
            .chain(changed.iter().map(|&i| current[i].0.as_ref()));
        for uid in gone {
            if let Some(u) = self
                .entries
                .get(uid)
                .and_then(|e| claim_unit(&self.cuts, &e.valid))
                && let Some(list) = self.units.get_mut(&u)
            {
                list.retain(|x| x != uid);
                if list.is_empty() {
                    self.units.remove(&u);
                }
            }
        }
        for uid in removed {
            self.entries.remove(uid);
        }
        for &i in changed {
            let (uid, rv, valid) = &current[i];
            if let Some(u) = claim_unit(&self.cuts, valid) {
                self.units.entry(u).or_default().push(uid.to_string());
            }
            self.entries.insert(
                uid.to_string(),
                Entry {
                    resource_version: rv.map(str::to_string),
                    valid: valid.clone(),
                    retire: Vec::new(),
                },
            );
        }
        // Untouched members of affected units lost their contribution above
        // and get it back from the unit's decision.
        for u in &affected {
            let members: Vec<&Entry> = self
                .units
                .get(u)
                .into_iter()
                .flatten()
                .filter_map(|uid| self.entries.get(uid))
                .collect();
            let (accepted, refused) = decide_unit(&members);
            for (name, key, wanted) in accepted {
                keys.insert(key.clone());
                d.verdicts.insert(name, Verdict::Accepted(key.clone()));
                d.rrsets.insert(key, wanted);
            }
            for (name, reason, message) in refused {
                d.verdicts
                    .insert(name, Verdict::Rejected { reason, message });
            }
        }
        for uid in &touched {
            let Some(e) = self.entries.get_mut(uid) else {
                continue;
            };
            if let Some(v) = local_verdict(&e.valid) {
                d.verdicts.insert(e.valid.object_name.clone(), v);
            }
            e.retire = retire_of(&e.valid, accepted_in(d, &e.valid).as_ref());
            for k in &e.retire {
                *self.candidates.entry(k.clone()).or_default() += 1;
                keys.insert(k.clone());
            }
        }
        // The removals the touched keys now call for.
        let apex = z.zone.as_domain();
        for k in keys {
            let retire = self.candidates.contains_key(&k)
                && !d.rrsets.contains_key(&k)
                && !(k.0 == *apex && k.1 == RecordType::Ns);
            if retire {
                d.retired.insert(k);
            } else {
                d.retired.remove(&k);
            }
        }
        d.missing_glue = super::missing_glue(apex, &d.apex_ns, &d.rrsets);
        true
    }
}

/// Decided refusals of one unit: (record name, reason, message).
type Refused = Vec<(String, &'static str, String)>;

/// Decides one unit's record claims as [`super::plan`] decides them.
fn decide_unit(members: &[&Entry]) -> (Vec<(String, RrKey, WantedRrset)>, Refused) {
    let mut claimants: Vec<&ValidRecord> = members
        .iter()
        .map(|e| e.valid.as_ref())
        .filter(|v| claims(v))
        .collect();
    claimants.sort_by(|a, b| {
        (a.created.as_ref(), &a.object_name).cmp(&(b.created.as_ref(), &b.object_name))
    });
    let claims: Vec<decide::Claim> = claimants
        .iter()
        .enumerate()
        .filter_map(|(rank, v)| {
            let set = v.set.as_ref().ok()?;
            Some(decide::Claim {
                owner: Owner::Record(v.object_name.clone()),
                incumbent: serves(v, &set.key()),
                rank,
                set: set.clone(),
            })
        })
        .collect();
    let (accepted, refused) = decide::decide(claims);
    let accepted = accepted
        .into_iter()
        .filter_map(|c| match c.owner {
            Owner::Record(name) => Some((
                name.clone(),
                c.set.key(),
                WantedRrset {
                    ttl: c.set.ttl,
                    values: c.set.values,
                    owner: Owner::Record(name),
                },
            )),
            Owner::Inline(_) => None,
        })
        .collect();
    let refused = refused
        .into_iter()
        .filter_map(|r| match r.owner {
            Owner::Record(name) => Some((name, r.reason, r.message)),
            Owner::Inline(_) => None,
        })
        .collect();
    (accepted, refused)
}

#[cfg(test)]
mod tests;
