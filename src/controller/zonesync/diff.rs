//! What a zone holds on the primary ([`Served`]: from an AXFR, or from the
//! skeleton we just wrote and the updates we sent since) and the difference
//! to the desired owned contents as one [`UpdateBatch`].
//!
//! Pure. Only keys the plan owns are compared or changed: an RRset nobody
//! owns (external-dns, hand-made) never appears in a batch.

use std::collections::{BTreeMap, BTreeSet};

use crate::bind::nsupdate::{ApexNs, RrsetChange, UpdateBatch};
use crate::bind::parse::ServedRrset;
use crate::bind::zone::{Soa, ZoneSkeleton};
use crate::bind::{DomainName, RecordType, Ttl, ZoneName};

use super::plan::{Desired, RrKey};

/// One served RRset: TTL and canonical rdata text (as [`crate::bind::Rdata`]
/// prints it, which is also what the AXFR parser produces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedSet {
    pub ttl: u32,
    pub values: BTreeSet<String>,
}

/// A zone's contents on the primary at one serial.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Served {
    pub serial: u32,
    /// (owner, type mnemonic) -> RRset. Types the operator does not manage
    /// (SOA, RRSIG, ...) keep their own mnemonic and are never touched.
    pub rrsets: BTreeMap<(DomainName, String), ServedSet>,
}

fn skey(k: &RrKey) -> (DomainName, String) {
    (k.0.clone(), k.1.as_str().to_string())
}

impl Served {
    /// From a parsed AXFR; the serial is the SOA's.
    pub fn from_axfr(zone: &ZoneName, sets: Vec<ServedRrset>) -> Option<Served> {
        let mut serial = None;
        let mut rrsets = BTreeMap::new();
        for s in sets {
            if s.rtype == "SOA" && s.name == *zone.as_domain() {
                serial = s
                    .values
                    .iter()
                    .next()
                    .and_then(|v| v.split_whitespace().nth(2))
                    .and_then(|v| v.parse().ok());
            }
            rrsets.insert(
                (s.name, s.rtype),
                ServedSet {
                    ttl: s.ttl,
                    values: s.values,
                },
            );
        }
        Some(Served {
            serial: serial?,
            rrsets,
        })
    }

    /// What a freshly written skeleton holds (besides the SOA): its apex NS
    /// and the records written with it (glue).
    pub fn from_skeleton(skeleton: &ZoneSkeleton) -> Served {
        let mut s = Served {
            serial: skeleton.serial,
            rrsets: BTreeMap::new(),
        };
        s.rrsets.insert(
            (skeleton.zone.as_domain().clone(), "NS".into()),
            ServedSet {
                ttl: skeleton.default_ttl.get(),
                values: skeleton.nameservers.iter().map(|n| n.fqdn()).collect(),
            },
        );
        s.set_soa(
            skeleton.zone.as_domain(),
            &skeleton.soa,
            skeleton.serial,
            skeleton.default_ttl,
        );
        for (name, rtype, ttl, rdata) in &skeleton.records {
            s.rrsets
                .entry((name.clone(), rtype.as_str().to_string()))
                .or_insert_with(|| ServedSet {
                    ttl: ttl.get(),
                    values: BTreeSet::new(),
                })
                .values
                .insert(rdata.to_string());
        }
        s
    }

    /// Records the SOA as it is served now.
    pub fn set_soa(&mut self, apex: &DomainName, soa: &Soa, serial: u32, ttl: Ttl) {
        self.rrsets.insert(
            (apex.clone(), "SOA".into()),
            ServedSet {
                ttl: ttl.get(),
                values: [soa_text(soa, serial)].into(),
            },
        );
    }

    /// Whether the served SOA's names or timers differ from `soa` (the
    /// serial is BIND's business). Unknown counts as current: a zone is
    /// only ever created from `soa`.
    pub fn soa_differs(&self, apex: &DomainName, soa: &Soa) -> bool {
        let Some(v) = self
            .rrsets
            .get(&(apex.clone(), "SOA".into()))
            .and_then(|s| s.values.iter().next())
        else {
            return false;
        };
        let mut served: Vec<String> = v.split_whitespace().map(str::to_ascii_lowercase).collect();
        let mut wanted: Vec<String> = soa_text(soa, 0)
            .split_whitespace()
            .map(str::to_ascii_lowercase)
            .collect();
        if served.len() != 7 {
            return false;
        }
        served.remove(2);
        wanted.remove(2);
        served != wanted
    }

    /// The served RRset at `key`.
    pub fn get(&self, key: &RrKey) -> Option<&ServedSet> {
        self.rrsets.get(&skey(key))
    }

    /// Whether the RRset at `key` is served exactly as wanted.
    pub fn holds(&self, key: &RrKey, desired: &Desired) -> bool {
        match (desired.rrsets.get(key), self.get(key)) {
            (Some(w), Some(s)) => {
                s.ttl == w.ttl.get()
                    && s.values.len() == w.values.len()
                    && w.values.iter().all(|v| s.values.contains(&v.to_string()))
            }
            _ => false,
        }
    }

    /// Records what an applied batch changed (the serial is unknown until
    /// read back).
    pub fn apply(&mut self, batch: &UpdateBatch) {
        for c in &batch.changes {
            match c {
                RrsetChange::Replace {
                    name,
                    rtype,
                    ttl,
                    values,
                } => {
                    self.rrsets.insert(
                        (name.clone(), rtype.as_str().to_string()),
                        ServedSet {
                            ttl: ttl.get(),
                            values: values.iter().map(ToString::to_string).collect(),
                        },
                    );
                }
                RrsetChange::Delete { name, rtype } => {
                    self.rrsets
                        .remove(&(name.clone(), rtype.as_str().to_string()));
                }
            }
        }
        if let Some(ns) = &batch.apex_ns {
            self.rrsets.insert(
                (batch.zone.as_domain().clone(), "NS".into()),
                ServedSet {
                    ttl: ns.ttl.get(),
                    values: ns.wanted.iter().map(DomainName::fqdn).collect(),
                },
            );
        }
    }
}

/// Data the operator does not own that hides an owned RRset from
/// resolvers: a CNAME at its name (BIND ignores other data added beside a
/// CNAME, and a CNAME added beside other data), other data at the name of
/// an owned CNAME, or a delegation (NS below the apex) at or above its
/// name. Built once per zone from what is served (an AXFR: foreign data
/// only shows there).
pub struct Foreign<'a> {
    served: &'a Served,
    desired: &'a Desired,
    /// Served NS RRsets below the apex that the plan does not own.
    cuts: Vec<&'a DomainName>,
}

impl<'a> Foreign<'a> {
    pub fn new(zone: &ZoneName, served: &'a Served, desired: &'a Desired) -> Self {
        let apex = zone.as_domain();
        let cuts = served
            .rrsets
            .keys()
            .filter(|(n, t)| t == "NS" && n != apex)
            .filter(|(n, _)| {
                let k = (n.clone(), RecordType::Ns);
                !(desired.rrsets.contains_key(&k) || desired.retired.contains(&k))
            })
            .map(|(n, _)| n)
            .collect();
        Foreign {
            served,
            desired,
            cuts,
        }
    }

    /// The foreign RRset (`name TYPE`) that hides `key`, if any.
    pub fn blocker(&self, key: &RrKey) -> Option<String> {
        let (name, rtype) = key;
        // Ours, kept or being removed (a type change retires the old one).
        let owned = |t: RecordType| {
            let k = (name.clone(), t);
            self.desired.rrsets.contains_key(&k) || self.desired.retired.contains(&k)
        };
        let at_name = self
            .served
            .rrsets
            .range((name.clone(), String::new())..)
            .take_while(|((n, _), _)| n == name)
            .filter_map(|((_, t), _)| t.parse::<RecordType>().ok());
        let mut clash = at_name.filter(|t| match rtype {
            RecordType::Cname => *t != RecordType::Cname && !owned(*t),
            _ => *t == RecordType::Cname && !owned(RecordType::Cname),
        });
        if let Some(t) = clash.next() {
            return Some(format!("{} {t}", name.fqdn()));
        }
        self.cuts
            .iter()
            .find(|cut| {
                name.is_within(cut)
                    && !(name == **cut && matches!(rtype, RecordType::Ns | RecordType::Ds))
            })
            .map(|cut| format!("{} NS", cut.fqdn()))
    }
}

/// SOA rdata as dig prints it.
fn soa_text(soa: &Soa, serial: u32) -> String {
    format!(
        "{} {} {serial} {} {} {} {}",
        soa.mname, soa.rname, soa.refresh, soa.retry, soa.expire, soa.minimum
    )
}

/// The changes that make `served` hold `desired` (owned RRsets only).
/// Empty changes and an unchanged apex make [`crate::bind::nsupdate::build_script`]
/// return `None`.
///
/// An RRset hidden by foreign data ([`Foreign`]) is not written: BIND
/// would drop it (answering NOERROR) or resolvers would not reach it; its
/// owner is told instead, and it is written once the other data is gone.
pub fn diff(zone: &ZoneName, desired: &Desired, served: &Served) -> UpdateBatch {
    let mut changes = Vec::new();
    let foreign = Foreign::new(zone, served, desired);
    for (k, w) in &desired.rrsets {
        if !served.holds(k, desired) && foreign.blocker(k).is_none() {
            changes.push(RrsetChange::Replace {
                name: k.0.clone(),
                rtype: k.1,
                ttl: w.ttl,
                values: w.values.iter().cloned().collect(),
            });
        }
    }
    for k in &desired.retired {
        if served.get(k).is_some() {
            changes.push(RrsetChange::Delete {
                name: k.0.clone(),
                rtype: k.1,
            });
        }
    }
    let apex_key = (zone.as_domain().clone(), RecordType::Ns);
    let current_set = served.get(&apex_key);
    let current = current_set
        .map(|s| {
            s.values
                .iter()
                .filter_map(|v| DomainName::parse_absolute(v).ok())
                .collect()
        })
        .unwrap_or_default();
    let current_ttl = current_set.and_then(|s| Ttl::new(i64::from(s.ttl)).ok());
    UpdateBatch {
        zone: zone.clone(),
        changes,
        apex_ns: Some(ApexNs {
            ttl: desired.apex_ns.ttl,
            wanted: desired.apex_ns.names.clone(),
            current,
            current_ttl,
        }),
    }
}
