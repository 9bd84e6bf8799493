//! The answer records of one DNS response message, read from its wire
//! bytes (names decompressed) into presentation text the operator's rdata
//! parsers read: every admitted type spelled the way BIND spells it, LOC and
//! SVCB/HTTPS through the operator's own typed values. DNSSEC and other
//! types keep their mnemonic only (the importer leaves them out). Pure.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::bind::DomainName;
use crate::bind::rdata::{Loc, SvcValue, Svcb, quote_charstring};

/// Most compression pointers followed in one name.
const MAX_POINTERS: usize = 64;

/// One answer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireRecord {
    /// Absolute, lowercase, trailing dot.
    pub owner: String,
    pub rtype: String,
    pub ttl: u32,
    /// Presentation text (empty for types not converted).
    pub rdata: String,
}

fn u16_at(b: &[u8], i: usize) -> Result<u16, String> {
    b.get(i..i + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .ok_or_else(|| "truncated message".to_string())
}

fn u32_at(b: &[u8], i: usize) -> Result<u32, String> {
    b.get(i..i + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| "truncated message".to_string())
}

/// Reads a (possibly compressed) name at `pos`; returns its text and the
/// position after it.
fn name(msg: &[u8], mut pos: usize) -> Result<(String, usize), String> {
    let mut out = String::new();
    let mut end = None;
    let mut hops = 0;
    loop {
        let len = *msg.get(pos).ok_or("truncated name")?;
        match len {
            0 => {
                if out.is_empty() {
                    out.push('.');
                }
                return Ok((out, end.unwrap_or(pos + 1)));
            }
            l if l & 0xC0 == 0xC0 => {
                hops += 1;
                if hops > MAX_POINTERS {
                    return Err("compression loop".into());
                }
                let ptr = usize::from(u16_at(msg, pos)? & 0x3FFF);
                end.get_or_insert(pos + 2);
                pos = ptr;
            }
            l if l & 0xC0 != 0 => return Err("bad label type".into()),
            l => {
                let label = msg
                    .get(pos + 1..pos + 1 + usize::from(l))
                    .ok_or("truncated label")?;
                for &c in label {
                    let c = c.to_ascii_lowercase();
                    match c {
                        b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'*' => out.push(c as char),
                        b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => {
                            out.push('\\');
                            out.push(c as char);
                        }
                        0x21..=0x7e => out.push(c as char),
                        _ => out.push_str(&format!("\\{c:03}")),
                    }
                }
                out.push('.');
                pos += 1 + usize::from(l);
            }
        }
    }
}

fn mnemonic(t: u16) -> String {
    match t {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        25 => "KEY",
        28 => "AAAA",
        29 => "LOC",
        33 => "SRV",
        35 => "NAPTR",
        39 => "DNAME",
        43 => "DS",
        44 => "SSHFP",
        46 => "RRSIG",
        47 => "NSEC",
        48 => "DNSKEY",
        50 => "NSEC3",
        51 => "NSEC3PARAM",
        52 => "TLSA",
        59 => "CDS",
        60 => "CDNSKEY",
        64 => "SVCB",
        65 => "HTTPS",
        257 => "CAA",
        other => return format!("TYPE{other}"),
    }
    .to_owned()
}

/// Character-strings from `start` to `end`, each quoted; returns the
/// position after the last one read (`count` strings, or all if None).
fn strings(
    msg: &[u8],
    mut pos: usize,
    end: usize,
    count: Option<usize>,
) -> Result<(Vec<String>, usize), String> {
    let mut out = Vec::new();
    while pos < end && count.is_none_or(|c| out.len() < c) {
        let l = usize::from(msg[pos]);
        let s = msg
            .get(pos + 1..pos + 1 + l)
            .filter(|_| pos + 1 + l <= end)
            .ok_or("truncated string")?;
        out.push(quote_charstring(s));
        pos += 1 + l;
    }
    Ok((out, pos))
}

/// The presentation text of one rdata of type `t` at `msg[start..end]`.
fn rdata(msg: &[u8], t: u16, start: usize, end: usize) -> Result<String, String> {
    let r = &msg[start..end];
    let byte = |i: usize| {
        r.get(i)
            .copied()
            .ok_or_else(|| "truncated rdata".to_string())
    };
    Ok(match t {
        1 => Ipv4Addr::from(<[u8; 4]>::try_from(r).map_err(|_| "bad A rdata")?).to_string(),
        28 => Ipv6Addr::from(<[u8; 16]>::try_from(r).map_err(|_| "bad AAAA rdata")?).to_string(),
        2 | 5 | 12 | 39 => name(msg, start)?.0,
        15 => format!("{} {}", u16_at(msg, start)?, name(msg, start + 2)?.0),
        33 => format!(
            "{} {} {} {}",
            u16_at(msg, start)?,
            u16_at(msg, start + 2)?,
            u16_at(msg, start + 4)?,
            name(msg, start + 6)?.0
        ),
        6 => {
            let (mname, p) = name(msg, start)?;
            let (rname, p) = name(msg, p)?;
            let n: Vec<String> = (0..5)
                .map(|i| u32_at(msg, p + 4 * i).map(|v| v.to_string()))
                .collect::<Result<_, _>>()?;
            format!("{mname} {rname} {}", n.join(" "))
        }
        16 => strings(msg, start, end, None)?.0.join(" "),
        257 => {
            let tag_len = usize::from(byte(1)?);
            let tag = r.get(2..2 + tag_len).ok_or("truncated CAA")?;
            format!(
                "{} {} {}",
                byte(0)?,
                String::from_utf8_lossy(tag),
                quote_charstring(&r[2 + tag_len..])
            )
        }
        44 => format!(
            "{} {} {}",
            byte(0)?,
            byte(1)?,
            hex::encode_upper(r.get(2..).unwrap_or_default())
        ),
        52 => format!(
            "{} {} {} {}",
            byte(0)?,
            byte(1)?,
            byte(2)?,
            hex::encode_upper(r.get(3..).unwrap_or_default())
        ),
        43 => format!(
            "{} {} {} {}",
            u16_at(msg, start)?,
            byte(2)?,
            byte(3)?,
            hex::encode_upper(r.get(4..).unwrap_or_default())
        ),
        35 => {
            let (s, p) = strings(msg, start + 4, end, Some(3))?;
            format!(
                "{} {} {} {}",
                u16_at(msg, start)?,
                u16_at(msg, start + 2)?,
                s.join(" "),
                name(msg, p)?.0
            )
        }
        29 => {
            if r.len() != 16 || r[0] != 0 {
                return Err("LOC rdata is not version 0".into());
            }
            Loc {
                size: r[1],
                horiz_pre: r[2],
                vert_pre: r[3],
                latitude: u32_at(msg, start + 4)?,
                longitude: u32_at(msg, start + 8)?,
                altitude: u32_at(msg, start + 12)?,
            }
            .to_string()
        }
        64 | 65 => svcb(msg, start, end)?,
        _ => String::new(),
    })
}

fn svcb(msg: &[u8], start: usize, end: usize) -> Result<String, String> {
    let priority = u16_at(msg, start)?;
    let (target, mut p) = name(msg, start + 2)?;
    let target = DomainName::parse_absolute(&target).map_err(|e| e.to_string())?;
    let mut params = BTreeMap::new();
    while p < end {
        let key = u16_at(msg, p)?;
        let len = usize::from(u16_at(msg, p + 2)?);
        let v = msg
            .get(p + 4..p + 4 + len)
            .ok_or("truncated SVCB parameter")?;
        p += 4 + len;
        let value = match key {
            0 => SvcValue::Mandatory(
                v.chunks(2)
                    .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                    .collect(),
            ),
            1 => {
                let mut ids = Vec::new();
                let mut i = 0;
                while i < v.len() {
                    let l = usize::from(v[i]);
                    ids.push(v.get(i + 1..i + 1 + l).ok_or("truncated alpn")?.to_vec());
                    i += 1 + l;
                }
                SvcValue::Alpn(ids)
            }
            2 => SvcValue::Flag,
            3 => SvcValue::Port(u16_at(v, 0)?),
            4 => SvcValue::Ipv4(
                v.chunks_exact(4)
                    .map(|c| Ipv4Addr::new(c[0], c[1], c[2], c[3]))
                    .collect(),
            ),
            5 => SvcValue::Ech(v.to_vec()),
            6 => SvcValue::Ipv6(
                v.chunks_exact(16)
                    .map(|c| Ipv6Addr::from(<[u8; 16]>::try_from(c).unwrap_or_default()))
                    .collect(),
            ),
            _ => SvcValue::Opaque(v.to_vec()),
        };
        params.insert(key, value);
    }
    Ok(Svcb {
        priority,
        target,
        params,
    }
    .to_string())
}

/// A record whose rdata could not be read: owner, type, why.
pub type Unreadable = (String, String, String);

/// The answer section of `msg`; a record whose rdata cannot be read has an
/// `Err` in its place.
pub fn answers(msg: &[u8]) -> Result<Vec<Result<WireRecord, Unreadable>>, String> {
    let qd = u16_at(msg, 4)?;
    let an = u16_at(msg, 6)?;
    let mut pos = 12;
    for _ in 0..qd {
        pos = name(msg, pos)?.1 + 4;
    }
    let mut out = Vec::with_capacity(usize::from(an));
    for _ in 0..an {
        let (owner, p) = name(msg, pos)?;
        let t = u16_at(msg, p)?;
        let ttl = u32_at(msg, p + 4)?;
        let len = usize::from(u16_at(msg, p + 8)?);
        let start = p + 10;
        let end = start + len;
        if end > msg.len() {
            return Err("truncated record".into());
        }
        pos = end;
        let rtype = mnemonic(t);
        out.push(match rdata(msg, t, start, end) {
            Ok(rdata) => Ok(WireRecord {
                owner,
                rtype,
                ttl,
                rdata,
            }),
            Err(e) => Err((owner, rtype, e)),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_names_and_strings_read_back() {
        // Header: 0 questions, 2 answers.
        let mut m = vec![0, 1, 0x84, 0, 0, 0, 0, 2, 0, 0, 0, 0];
        // example.com. A 192.0.2.1
        let owner = 12;
        m.extend_from_slice(b"\x07example\x03com\x00");
        m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 192, 0, 2, 1]);
        // www.<ptr> TXT "a b" "\""
        m.extend_from_slice(b"\x03www\xc0");
        m.push(owner as u8);
        m.extend_from_slice(&[0, 16, 0, 1, 0, 0, 0, 60, 0, 6]);
        m.extend_from_slice(b"\x03a b\x01\"");
        let a = answers(&m).unwrap();
        let a: Vec<WireRecord> = a.into_iter().map(Result::unwrap).collect();
        assert_eq!(a[0].owner, "example.com.");
        assert_eq!(a[0].rdata, "192.0.2.1");
        assert_eq!(a[1].owner, "www.example.com.");
        assert_eq!(a[1].rtype, "TXT");
        assert_eq!(a[1].rdata, "\"a b\" \"\\\"\"");
        assert_eq!(a[1].ttl, 60);
    }
}
