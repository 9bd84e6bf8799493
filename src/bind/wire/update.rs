//! RFC 2136 UPDATE messages from a zone's typed batch ([`UpdateBatch`]).
//! Pure, no I/O.
//!
//! Ordering inside one message (BIND applies a message's updates in
//! order, atomically): every RRset delete first, then every add, so a
//! CNAME replaced by an A (or the reverse) lands in one message whatever
//! order the changes came in; the apex NS last, its new rdata added
//! before the old ones are deleted one by one (BIND never deletes a
//! zone's last NS and ignores an RRset-wide apex NS delete; glue added
//! earlier in the message lets an in-zone NS target in). Messages are cut
//! below the 64 KiB cap between RRset changes, never inside one: each
//! replace is atomic in its message. The batch's checks (CNAME conflicts,
//! 100-rdata cap, out-of-zone names) are the nsupdate builder's, run
//! before anything is built.

use std::collections::BTreeSet;

use super::codec::{
    CLASS_ANY, CLASS_IN, CLASS_NONE, Message, Opcode, Question, Record, TYPE_SOA, wire_name,
};
use super::rdata::{encode, type_code};
use crate::bind::nsupdate::{ApexNs, BatchError, RrsetChange, UpdateBatch, check};
use crate::bind::zone::Soa;
use crate::bind::{DomainName, Rdata, RecordType, Ttl, ZoneName};

/// Bytes of update records one message may carry: the 65,535-byte cap
/// less the header, the zone section (a name of at most 255 bytes) and a
/// TSIG record (key and algorithm names, a 64-byte MAC).
pub const MESSAGE_BUDGET: usize = 64_000;

/// One update operation, typed (what a fake server applies to its model
/// and what [`UpdateMessage::to_message`] writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Delete the RRset (class ANY).
    DeleteRrset { name: DomainName, rtype: RecordType },
    /// Add one rdata (class IN).
    Add {
        name: DomainName,
        rtype: RecordType,
        ttl: Ttl,
        rdata: Rdata,
    },
    /// Delete one rdata (class NONE).
    DeleteRdata {
        name: DomainName,
        rtype: RecordType,
        rdata: Rdata,
    },
    /// Replace the zone's SOA (names, timers and serial).
    Soa { ttl: Ttl, soa: Soa, serial: u32 },
}

impl Op {
    fn record(&self, zone: &ZoneName) -> Record {
        let (name, rtype, class, ttl, rdata) = match self {
            Op::DeleteRrset { name, rtype } => (name, type_code(*rtype), CLASS_ANY, 0, Vec::new()),
            Op::Add {
                name,
                rtype,
                ttl,
                rdata,
            } => (name, type_code(*rtype), CLASS_IN, ttl.get(), encode(rdata)),
            Op::DeleteRdata { name, rtype, rdata } => {
                (name, type_code(*rtype), CLASS_NONE, 0, encode(rdata))
            }
            Op::Soa { ttl, soa, serial } => {
                let mut r = wire_name(soa.mname.as_str());
                r.extend(wire_name(soa.rname.as_str()));
                for v in [
                    *serial,
                    soa.refresh.get(),
                    soa.retry.get(),
                    soa.expire.get(),
                    soa.minimum.get(),
                ] {
                    r.extend_from_slice(&v.to_be_bytes());
                }
                (zone.as_domain(), TYPE_SOA, CLASS_IN, ttl.get(), r)
            }
        };
        Record {
            name: wire_name(name.as_str()),
            rtype,
            class,
            ttl,
            rdata,
        }
    }
}

/// One UPDATE message of a zone: applied by the server atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateMessage {
    pub zone: ZoneName,
    pub ops: Vec<Op>,
    /// RRset changes it carries (the apex NS counts as one).
    pub changes: usize,
}

impl UpdateMessage {
    /// The unsigned message, with `id`.
    pub fn to_message(&self, id: u16) -> Message {
        let mut m = Message::new(
            id,
            Opcode::Update,
            Question {
                name: wire_name(self.zone.as_str()),
                qtype: TYPE_SOA,
                class: CLASS_IN,
            },
        );
        m.authority = self.ops.iter().map(|op| op.record(&self.zone)).collect();
        m
    }
}

/// The ops of one RRset change, deletes and adds apart.
struct Unit {
    deletes: Vec<Op>,
    adds: Vec<Op>,
    size: usize,
}

fn size(zone: &ZoneName, ops: &[Op]) -> usize {
    ops.iter().map(|o| o.record(zone).wire_len()).sum()
}

fn change_unit(zone: &ZoneName, c: &RrsetChange) -> Unit {
    let deletes = vec![Op::DeleteRrset {
        name: c.name().clone(),
        rtype: c.rtype(),
    }];
    let adds: Vec<Op> = match c {
        RrsetChange::Replace {
            name,
            rtype,
            ttl,
            values,
        } => values
            .iter()
            .collect::<BTreeSet<&Rdata>>()
            .into_iter()
            .map(|v| Op::Add {
                name: name.clone(),
                rtype: *rtype,
                ttl: *ttl,
                rdata: v.clone(),
            })
            .collect(),
        RrsetChange::Delete { .. } => Vec::new(),
    };
    let size = size(zone, &deletes) + size(zone, &adds);
    Unit {
        deletes,
        adds,
        size,
    }
}

/// The apex NS ops: adds (every wanted rdata when the TTL changes), then
/// per-rdata deletes. `None` when converged.
fn apex_ops(zone: &ZoneName, ns: &ApexNs) -> Option<Vec<Op>> {
    let apex = zone.as_domain();
    let wanted: BTreeSet<&DomainName> = ns.wanted.iter().collect();
    let current: BTreeSet<&DomainName> = ns.current.iter().collect();
    let ttl_changed = ns.current_ttl.is_some_and(|t| t != ns.ttl);
    let adds: Vec<&DomainName> = if ttl_changed {
        wanted.iter().copied().collect()
    } else {
        wanted.difference(&current).copied().collect()
    };
    let deletes: Vec<&DomainName> = current.difference(&wanted).copied().collect();
    if adds.is_empty() && deletes.is_empty() {
        return None;
    }
    let mut ops: Vec<Op> = adds
        .into_iter()
        .map(|n| Op::Add {
            name: apex.clone(),
            rtype: RecordType::Ns,
            ttl: ns.ttl,
            rdata: Rdata::Name(n.clone()),
        })
        .collect();
    ops.extend(deletes.into_iter().map(|n| Op::DeleteRdata {
        name: apex.clone(),
        rtype: RecordType::Ns,
        rdata: Rdata::Name(n.clone()),
    }));
    Some(ops)
}

/// The batch as UPDATE messages (see the module doc), or none when it
/// changes nothing.
pub fn messages(batch: &UpdateBatch) -> Result<Vec<UpdateMessage>, BatchError> {
    check(batch)?;
    let zone = &batch.zone;
    let mut out = Vec::new();
    let mut open: Option<(Vec<Op>, Vec<Op>, usize, usize)> = None;
    for c in &batch.changes {
        let u = change_unit(zone, c);
        if u.size > MESSAGE_BUDGET {
            return Err(BatchError::ChangeTooLarge {
                name: c.name().fqdn(),
                rtype: c.rtype(),
                size: u.size,
            });
        }
        if let Some((_, _, used, _)) = &open
            && used + u.size > MESSAGE_BUDGET
        {
            let (deletes, adds, _, changes) = open.take().expect("checked");
            out.push(finish(zone, deletes, adds, changes));
        }
        let (deletes, adds, used, changes) =
            open.get_or_insert_with(|| (Vec::new(), Vec::new(), 0, 0));
        deletes.extend(u.deletes);
        adds.extend(u.adds);
        *used += u.size;
        *changes += 1;
    }
    if let Some(ops) = batch.apex_ns.as_ref().and_then(|ns| apex_ops(zone, ns)) {
        let s = size(zone, &ops);
        if s > MESSAGE_BUDGET {
            return Err(BatchError::ChangeTooLarge {
                name: zone.fqdn(),
                rtype: RecordType::Ns,
                size: s,
            });
        }
        if let Some((_, _, used, _)) = &open
            && used + s > MESSAGE_BUDGET
        {
            let (deletes, adds, _, changes) = open.take().expect("checked");
            out.push(finish(zone, deletes, adds, changes));
        }
        let (_, adds, used, changes) = open.get_or_insert_with(|| (Vec::new(), Vec::new(), 0, 0));
        // After every add of the message: glue first, then the NS.
        adds.extend(ops);
        *used += s;
        *changes += 1;
    }
    if let Some((deletes, adds, _, changes)) = open {
        out.push(finish(zone, deletes, adds, changes));
    }
    Ok(out)
}

fn finish(zone: &ZoneName, mut deletes: Vec<Op>, adds: Vec<Op>, changes: usize) -> UpdateMessage {
    deletes.extend(adds);
    UpdateMessage {
        zone: zone.clone(),
        ops: deletes,
        changes,
    }
}

/// One message replacing the zone's SOA with `serial` (which must be
/// above the served one: BIND ignores an SOA update that does not move
/// the serial forward).
pub fn soa_message(zone: &ZoneName, soa: &Soa, serial: u32, ttl: Ttl) -> UpdateMessage {
    UpdateMessage {
        zone: zone.clone(),
        ops: vec![Op::Soa {
            ttl,
            soa: soa.clone(),
            serial,
        }],
        changes: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone() -> ZoneName {
        ZoneName::parse("example.com").unwrap()
    }

    fn replace(name: &str, t: &str, values: &[&str]) -> RrsetChange {
        let v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        RrsetChange::parse_replace(&zone(), name, t, Some(300), Ttl::new(3600).unwrap(), &v)
            .unwrap()
    }

    fn n(s: &str) -> DomainName {
        DomainName::parse_absolute(s).unwrap()
    }

    fn kinds(m: &UpdateMessage) -> Vec<String> {
        m.ops
            .iter()
            .map(|o| match o {
                Op::DeleteRrset { name, rtype } => format!("del {name} {rtype}"),
                Op::Add { name, rtype, .. } => format!("add {name} {rtype}"),
                Op::DeleteRdata { name, rdata, .. } => format!("delrd {name} {rdata}"),
                Op::Soa { .. } => "soa".into(),
            })
            .collect()
    }

    #[test]
    fn deletes_first_then_adds_then_apex_ns_adds_before_deletes() {
        let batch = UpdateBatch {
            zone: zone(),
            changes: vec![
                replace("www", "A", &["192.0.2.1"]),
                RrsetChange::Delete {
                    name: n("www.example.com"),
                    rtype: RecordType::Cname,
                },
                replace("ns3", "A", &["192.0.2.3"]),
            ],
            apex_ns: Some(ApexNs {
                ttl: Ttl::new(3600).unwrap(),
                wanted: vec![n("ns1.example.com"), n("ns3.example.com")],
                current: vec![n("ns1.example.com"), n("ns2.example.com")],
                current_ttl: Some(Ttl::new(3600).unwrap()),
            }),
        };
        let m = messages(&batch).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].changes, 4);
        assert_eq!(
            kinds(&m[0]),
            [
                "del www.example.com. A",
                "del www.example.com. CNAME",
                "del ns3.example.com. A",
                "add www.example.com. A",
                "add ns3.example.com. A",
                "add example.com. NS",
                "delrd example.com. ns2.example.com.",
            ]
        );
    }

    #[test]
    fn splits_below_64k_between_rrsets() {
        let changes: Vec<RrsetChange> = (0..3000)
            .map(|i| replace(&format!("host{i}"), "A", &["192.0.2.1", "192.0.2.2"]))
            .collect();
        let batch = UpdateBatch {
            zone: zone(),
            changes,
            apex_ns: None,
        };
        let m = messages(&batch).unwrap();
        assert!(m.len() >= 2, "{}", m.len());
        assert_eq!(m.iter().map(|m| m.changes).sum::<usize>(), 3000);
        for msg in &m {
            let bytes = msg.to_message(1).encode();
            assert!(bytes.len() < MESSAGE_BUDGET + 600, "{}", bytes.len());
            // Every RRset deleted in a message is added in the same one.
            let k = kinds(msg);
            let dels = k.iter().filter(|s| s.starts_with("del ")).count();
            assert_eq!(dels * 2, k.len() - dels);
        }
        assert!(
            messages(&UpdateBatch {
                zone: zone(),
                changes: vec![],
                apex_ns: None
            })
            .unwrap()
            .is_empty()
        );
    }
}
