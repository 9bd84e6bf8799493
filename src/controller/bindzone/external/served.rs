//! What an external primary serves, from a verified AXFR over the wire, in
//! the form the zone pipeline compares with ([`Served`]: RRsets of
//! canonical rdata text). The comparison is made in wire form: a served
//! rdata equal, as canonical bytes, to a wanted value takes that value's
//! text, so "served as wanted" never depends on how a type prints. Other
//! rdata (other clients' data) keeps a text that only has to be stable
//! and tell names apart: names for the name types (the apex NS diff and
//! the CNAME/delegation checks read those), addresses for A/AAAA, the
//! SOA as `mname rname serial refresh retry expire minimum`, and RFC 3597
//! `\# len hex` for the rest.
//!
//! Pure; no I/O.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::bind::wire::Record;
use crate::bind::wire::codec::{TYPE_SOA, name_text};
use crate::bind::wire::primitives::Reader;
use crate::bind::wire::rdata::{encode, type_code};
use crate::bind::{DomainName, RecordType, ZoneName};
use crate::controller::zonesync::diff::{Served, ServedSet};
use crate::controller::zonesync::plan::Desired;

/// The mnemonic of a type code (`TYPE<n>` for types not managed here).
fn mnemonic(code: u16) -> String {
    if code == TYPE_SOA {
        return "SOA".into();
    }
    RecordType::ALL
        .iter()
        .find(|t| type_code(**t) == code)
        .map_or_else(|| format!("TYPE{code}"), |t| t.as_str().to_string())
}

fn fqdn(name: &[u8]) -> Option<String> {
    DomainName::parse_absolute(&name_text(name))
        .ok()
        .map(|n| n.fqdn())
}

/// A stable text of served rdata nobody asked for (see the module doc).
fn foreign_text(code: u16, rdata: &[u8]) -> String {
    let generic = || format!("\\# {} {}", rdata.len(), hex::encode(rdata));
    let name_types = [
        RecordType::Ns,
        RecordType::Cname,
        RecordType::Ptr,
        RecordType::Dname,
    ];
    if name_types.iter().any(|t| type_code(*t) == code) {
        return fqdn(rdata).unwrap_or_else(generic);
    }
    match (code, rdata.len()) {
        (1, 4) => Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3]).to_string(),
        (28, 16) => {
            let b: [u8; 16] = rdata.try_into().expect("length checked");
            Ipv6Addr::from(b).to_string()
        }
        (TYPE_SOA, _) => soa_text(rdata).unwrap_or_else(generic),
        _ => generic(),
    }
}

fn soa_text(rdata: &[u8]) -> Option<String> {
    let mut r = Reader::new(rdata);
    let mname = fqdn(&r.name().ok()?)?;
    let rname = fqdn(&r.name().ok()?)?;
    let mut nums = Vec::with_capacity(5);
    for _ in 0..5 {
        nums.push(r.u32().ok()?.to_string());
    }
    Some(format!("{mname} {rname} {}", nums.join(" ")))
}

/// A wanted rdata: canonical wire bytes and its text.
type WantedRdata = (Vec<u8>, String);

/// The zone as served, from its AXFR (records in canonical wire form);
/// `None` without the zone's SOA.
pub fn from_axfr(zone: &ZoneName, records: &[Record], desired: &Desired) -> Option<Served> {
    // Wanted rdata, by (owner, type code), as canonical wire bytes.
    let mut wanted: BTreeMap<(String, u16), Vec<WantedRdata>> = BTreeMap::new();
    for ((name, rtype), w) in &desired.rrsets {
        let entry = wanted.entry((name.fqdn(), type_code(*rtype))).or_default();
        for v in &w.values {
            entry.push((encode(v), v.to_string()));
        }
    }
    let apex = zone.as_domain().fqdn();
    let mut serial = None;
    let mut rrsets: BTreeMap<(DomainName, String), ServedSet> = BTreeMap::new();
    for rec in records {
        let Some(owner) = fqdn(&rec.name) else {
            continue;
        };
        let Ok(name) = DomainName::parse_absolute(&owner) else {
            continue;
        };
        if rec.rtype == TYPE_SOA && owner == apex {
            serial = crate::bind::wire::client::soa_serial(&rec.rdata);
        }
        let text = wanted
            .get(&(owner, rec.rtype))
            .and_then(|vs| vs.iter().find(|(bytes, _)| *bytes == rec.rdata))
            .map_or_else(|| foreign_text(rec.rtype, &rec.rdata), |(_, t)| t.clone());
        let set = rrsets
            .entry((name, mnemonic(rec.rtype)))
            .or_insert_with(|| ServedSet {
                ttl: rec.ttl,
                values: Default::default(),
            });
        set.values.insert(text);
    }
    Some(Served {
        serial: serial?,
        rrsets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::wire::primitives::wire_name;

    fn rec(name: &str, rtype: u16, rdata: Vec<u8>) -> Record {
        Record {
            name: wire_name(name),
            rtype,
            class: 1,
            ttl: 300,
            rdata,
        }
    }

    fn soa_rdata() -> Vec<u8> {
        let mut v = wire_name("ns1.example.com");
        v.extend(wire_name("hostmaster.example.com"));
        for n in [7u32, 3600, 600, 86400, 300] {
            v.extend(n.to_be_bytes());
        }
        v
    }

    fn empty_desired() -> Desired {
        Desired {
            rrsets: Default::default(),
            apex_ns: crate::controller::zonesync::plan::ApexWanted {
                ttl: crate::bind::Ttl::new(300).unwrap(),
                names: vec![],
            },
            retired: Default::default(),
            verdicts: Default::default(),
            inline_errors: vec![],
            inline_owned: Default::default(),
            missing_glue: vec![],
        }
    }

    #[test]
    fn foreign_data_gets_stable_text_and_the_soa_its_serial() {
        let zone = ZoneName::parse("example.com").unwrap();
        let records = vec![
            rec("example.com", TYPE_SOA, soa_rdata()),
            rec("example.com", 2, wire_name("ns1.example.com")),
            rec("www.example.com", 1, vec![192, 0, 2, 1]),
            rec("alias.example.com", 5, wire_name("www.example.com")),
            rec("t.example.com", 16, b"\x02hi".to_vec()),
        ];
        let s = from_axfr(&zone, &records, &empty_desired()).unwrap();
        assert_eq!(s.serial, 7);
        let get = |n: &str, t: &str| {
            s.rrsets
                .get(&(DomainName::parse_absolute(n).unwrap(), t.to_string()))
                .map(|s| s.values.iter().cloned().collect::<Vec<_>>())
        };
        assert_eq!(
            get("example.com", "NS"),
            Some(vec!["ns1.example.com.".into()])
        );
        assert_eq!(get("www.example.com", "A"), Some(vec!["192.0.2.1".into()]));
        assert_eq!(
            get("alias.example.com", "CNAME"),
            Some(vec!["www.example.com.".into()])
        );
        assert_eq!(
            get("t.example.com", "TXT"),
            Some(vec!["\\# 3 026869".into()])
        );
        assert_eq!(
            get("example.com", "SOA"),
            Some(vec![
                "ns1.example.com. hostmaster.example.com. 7 3600 600 86400 300".into()
            ])
        );
    }

    #[test]
    fn without_the_zones_soa_there_is_no_served_zone() {
        let zone = ZoneName::parse("example.com").unwrap();
        let records = vec![rec("www.example.com", 1, vec![192, 0, 2, 1])];
        assert!(from_axfr(&zone, &records, &empty_desired()).is_none());
    }
}
