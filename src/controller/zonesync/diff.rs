//! What a zone holds on the primary ([`Served`]: from an AXFR, or from the
//! skeleton we just wrote and the updates we sent since) and the difference
//! to the desired owned contents as one [`UpdateBatch`].
//!
//! Pure. Only keys the plan owns are compared or changed: an RRset nobody
//! owns (external-dns, hand-made) never appears in a batch.

use std::collections::{BTreeMap, BTreeSet};

use crate::bind::nsupdate::{ApexNs, RrsetChange, UpdateBatch};
use crate::bind::wire;
use crate::bind::zone::{Soa, ZoneSkeleton};
use crate::bind::{DomainName, Rdata, RecordType, Ttl, ZoneName};

use super::plan::{Desired, RrKey};

/// One served RRset: TTL and each rdata in canonical wire form (RFC 4034
/// section 6.2: names expanded and lower-cased), so served and wanted data
/// compare as bytes and BIND's presentation of a value can never make it
/// look changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedSet {
    pub ttl: u32,
    pub values: BTreeSet<Vec<u8>>,
}

/// A zone's contents on the primary at one serial.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Served {
    pub serial: u32,
    /// (owner, type mnemonic) -> RRset. Types the operator does not manage
    /// (SOA, RRSIG, ...) keep their own mnemonic (`TYPEn` for most, see
    /// [`wire::rdata::type_mnemonic`]) and are never touched.
    pub rrsets: BTreeMap<(DomainName, String), ServedSet>,
    /// Built from what a zone verified before is known to hold
    /// ([`Served::assumed`]), not read from the server: other clients'
    /// RRsets are missing, so it is no base for the server's differences
    /// ([`Served::apply_ixfr`]).
    pub assumed: bool,
}

fn skey(k: &RrKey) -> (DomainName, String) {
    (k.0.clone(), k.1.as_str().to_string())
}

/// Rdata the operator writes, in the form a transfer yields.
pub fn wire_rdata(rdata: &Rdata) -> Vec<u8> {
    wire::rdata::encode(rdata)
}

fn wire_names(names: &[DomainName]) -> BTreeSet<Vec<u8>> {
    names
        .iter()
        .map(|n| wire::codec::wire_name(n.as_str()))
        .collect()
}

impl Served {
    /// From the records of an AXFR (canonical rdata, as
    /// [`wire::Client::axfr`] returns them); the serial is the apex SOA's.
    /// Records of the class IN only; an owner name the operator's name
    /// type cannot hold (escaped bytes) is left out: nothing of the
    /// operator's lives there. `None`: no apex SOA.
    pub fn from_records(zone: &ZoneName, records: &[wire::Record]) -> Option<Served> {
        let apex = wire::codec::wire_name(zone.as_str());
        let mut serial = None;
        let mut rrsets: BTreeMap<(DomainName, String), ServedSet> = BTreeMap::new();
        for r in records.iter().filter(|r| r.class == wire::codec::CLASS_IN) {
            let owner = wire::codec::lower(&r.name);
            if r.rtype == wire::codec::TYPE_SOA && owner == apex {
                serial = wire::client::soa_serial(&r.rdata);
            }
            let Ok(name) = DomainName::parse_absolute(&wire::codec::name_text(&owner)) else {
                continue;
            };
            rrsets
                .entry((name, wire::rdata::type_mnemonic(r.rtype)))
                .or_insert_with(|| ServedSet {
                    ttl: r.ttl,
                    values: BTreeSet::new(),
                })
                .values
                .insert(r.rdata.clone());
        }
        Some(Served {
            serial: serial?,
            rrsets,
            assumed: false,
        })
    }

    /// What a freshly written skeleton holds (besides the SOA): its apex NS
    /// and the records written with it (glue).
    pub fn from_skeleton(skeleton: &ZoneSkeleton) -> Served {
        let mut s = Served {
            serial: skeleton.serial,
            rrsets: BTreeMap::new(),
            assumed: false,
        };
        s.rrsets.insert(
            (skeleton.zone.as_domain().clone(), "NS".into()),
            ServedSet {
                ttl: skeleton.default_ttl.get(),
                values: wire_names(&skeleton.nameservers),
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
                .insert(wire_rdata(rdata));
        }
        s
    }

    /// What a zone verified to hold `desired` (and `soa`) at `serial`
    /// holds while it is still at that serial: every wanted RRset, the
    /// apex NS and the SOA. Other clients' RRsets are unknown: a write
    /// that adds data reads the zone back anyway (BIND drops an add that
    /// clashes with them and answers NOERROR).
    pub fn assumed(
        zone: &ZoneName,
        desired: &Desired,
        soa: &Soa,
        soa_ttl: Ttl,
        serial: u32,
    ) -> Served {
        let mut s = Served {
            serial,
            assumed: true,
            rrsets: desired
                .rrsets
                .iter()
                .map(|(k, w)| {
                    let set = ServedSet {
                        ttl: w.ttl.get(),
                        values: w.values.iter().map(wire_rdata).collect(),
                    };
                    (skey(k), set)
                })
                .collect(),
        };
        s.rrsets.insert(
            (zone.as_domain().clone(), "NS".into()),
            ServedSet {
                ttl: desired.apex_ns.ttl.get(),
                values: wire_names(&desired.apex_ns.names),
            },
        );
        s.set_soa(zone.as_domain(), soa, serial, soa_ttl);
        s
    }

    /// Records the SOA as it is served now.
    pub fn set_soa(&mut self, apex: &DomainName, soa: &Soa, serial: u32, ttl: Ttl) {
        self.rrsets.insert(
            (apex.clone(), "SOA".into()),
            ServedSet {
                ttl: ttl.get(),
                values: [soa_rdata(soa, serial)].into(),
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
        // Names and timers as bytes: the serial (after the two names) is
        // zeroed on both sides.
        let zeroed = |rdata: &[u8]| {
            let mut r = wire::codec::Reader::new(rdata);
            let at = r.name().ok().and(r.name().ok()).map(|_| r.pos());
            at.filter(|at| rdata.len() >= at + 20).map(|at| {
                let mut out = rdata.to_vec();
                out[at..at + 4].fill(0);
                out
            })
        };
        match zeroed(v) {
            Some(served) => served != soa_rdata(soa, 0),
            None => false,
        }
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
                    && w.values.iter().all(|v| s.values.contains(&wire_rdata(v)))
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
                            values: values.iter().map(wire_rdata).collect(),
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
                    values: wire_names(&ns.wanted),
                },
            );
        }
    }
}

impl Served {
    /// Follows the server's differences (an IXFR from this serial, oldest
    /// first: deleted records, then added ones, each version's SOA among
    /// them) to `serial`: what the server holds then, other clients'
    /// changes included.
    pub fn apply_ixfr(&mut self, deltas: &[(Vec<wire::Record>, Vec<wire::Record>)], serial: u32) {
        let key = |r: &wire::Record| {
            let owner = wire::codec::lower(&r.name);
            let name = DomainName::parse_absolute(&wire::codec::name_text(&owner)).ok()?;
            Some((name, wire::rdata::type_mnemonic(r.rtype)))
        };
        for (deleted, added) in deltas {
            for r in deleted.iter().filter(|r| r.class == wire::codec::CLASS_IN) {
                let Some(k) = key(r) else { continue };
                if let Some(set) = self.rrsets.get_mut(&k) {
                    set.values.remove(&r.rdata);
                    if set.values.is_empty() {
                        self.rrsets.remove(&k);
                    }
                }
            }
            for r in added.iter().filter(|r| r.class == wire::codec::CLASS_IN) {
                let Some(k) = key(r) else { continue };
                let set = self.rrsets.entry(k).or_insert_with(|| ServedSet {
                    ttl: r.ttl,
                    values: BTreeSet::new(),
                });
                set.ttl = r.ttl;
                set.values.insert(r.rdata.clone());
            }
        }
        self.serial = serial;
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

/// SOA rdata in canonical wire form.
fn soa_rdata(soa: &Soa, serial: u32) -> Vec<u8> {
    let mut out = wire::codec::wire_name(soa.mname.as_str());
    out.extend(wire::codec::wire_name(soa.rname.as_str()));
    for v in [
        serial,
        soa.refresh.get(),
        soa.retry.get(),
        soa.expire.get(),
        soa.minimum.get(),
    ] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out
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
                .filter_map(|v| {
                    DomainName::parse_absolute(&wire::codec::name_text(&wire::codec::lower(v))).ok()
                })
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
