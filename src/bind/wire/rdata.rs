//! Rdata in wire form: the operator's typed [`Rdata`] written as RFC 1035
//! / RFC 3597 bytes (what an UPDATE carries), and received rdata made
//! canonical (names the server compressed expanded), so what a server
//! serves and what the operator wants compare as bytes, never as
//! presentation text. Pure, no I/O.

use super::primitives::{Malformed, Reader, lower, wire_name};
use crate::bind::rdata::svcb::SvcValue;
use crate::bind::{DomainName, Rdata, RecordType};

/// The type's number (IANA registry).
pub fn type_code(rtype: RecordType) -> u16 {
    match rtype {
        RecordType::A => 1,
        RecordType::Ns => 2,
        RecordType::Cname => 5,
        RecordType::Ptr => 12,
        RecordType::Mx => 15,
        RecordType::Txt => 16,
        RecordType::Aaaa => 28,
        RecordType::Loc => 29,
        RecordType::Srv => 33,
        RecordType::Naptr => 35,
        RecordType::Dname => 39,
        RecordType::Ds => 43,
        RecordType::Sshfp => 44,
        RecordType::Tlsa => 52,
        RecordType::Svcb => 64,
        RecordType::Https => 65,
        RecordType::Caa => 257,
    }
}

/// The managed type of a type number, `None` for any other type.
pub fn record_type(code: u16) -> Option<RecordType> {
    RecordType::ALL.into_iter().find(|t| type_code(*t) == code)
}

/// A type's mnemonic: the managed types' names, `SOA`, else RFC 3597's
/// `TYPEn` (only ever compared, never written).
pub fn type_mnemonic(code: u16) -> String {
    match (record_type(code), code) {
        (Some(t), _) => t.as_str().to_string(),
        (None, 6) => "SOA".into(),
        (None, n) => format!("TYPE{n}"),
    }
}

fn name(out: &mut Vec<u8>, n: &DomainName) {
    out.extend_from_slice(&wire_name(n.as_str()));
}

fn charstring(out: &mut Vec<u8>, s: &[u8]) {
    // Validation caps character-strings at 255 bytes.
    out.push(s.len().min(255) as u8);
    out.extend_from_slice(&s[..s.len().min(255)]);
}

/// The rdata's wire form (names uncompressed, as RFC 3597 requires for
/// every type but the RFC 1035 ones, and canonical for those too).
pub fn encode(rdata: &Rdata) -> Vec<u8> {
    let mut out = Vec::with_capacity(rdata.wire_len());
    match rdata {
        Rdata::A(ip) => out.extend_from_slice(&ip.octets()),
        Rdata::Aaaa(ip) => out.extend_from_slice(&ip.octets()),
        Rdata::Name(n) => name(&mut out, n),
        Rdata::Mx {
            preference,
            exchange,
        } => {
            out.extend_from_slice(&preference.to_be_bytes());
            name(&mut out, exchange);
        }
        Rdata::Txt(strings) => {
            for s in strings {
                charstring(&mut out, s);
            }
        }
        Rdata::Srv {
            priority,
            weight,
            port,
            target,
        } => {
            for v in [priority, weight, port] {
                out.extend_from_slice(&v.to_be_bytes());
            }
            name(&mut out, target);
        }
        Rdata::Caa { flags, tag, value } => {
            out.push(*flags);
            charstring(&mut out, tag.as_bytes());
            out.extend_from_slice(value);
        }
        Rdata::Sshfp {
            algorithm,
            fp_type,
            fingerprint,
        } => {
            out.extend_from_slice(&[*algorithm, *fp_type]);
            out.extend_from_slice(fingerprint);
        }
        Rdata::Tlsa {
            usage,
            selector,
            matching,
            data,
        } => {
            out.extend_from_slice(&[*usage, *selector, *matching]);
            out.extend_from_slice(data);
        }
        Rdata::Ds {
            key_tag,
            algorithm,
            digest_type,
            digest,
        } => {
            out.extend_from_slice(&key_tag.to_be_bytes());
            out.extend_from_slice(&[*algorithm, *digest_type]);
            out.extend_from_slice(digest);
        }
        Rdata::Naptr {
            order,
            preference,
            flags,
            service,
            regexp,
            replacement,
        } => {
            out.extend_from_slice(&order.to_be_bytes());
            out.extend_from_slice(&preference.to_be_bytes());
            charstring(&mut out, flags);
            charstring(&mut out, service);
            charstring(&mut out, regexp);
            name(&mut out, replacement);
        }
        Rdata::Svcb(s) => {
            out.extend_from_slice(&s.priority.to_be_bytes());
            name(&mut out, &s.target);
            // RFC 9460: parameters in increasing key order (the map's).
            for (key, value) in &s.params {
                let mut v = Vec::new();
                match value {
                    SvcValue::Mandatory(keys) => {
                        for k in keys {
                            v.extend_from_slice(&k.to_be_bytes());
                        }
                    }
                    SvcValue::Alpn(ids) => {
                        for id in ids {
                            charstring(&mut v, id);
                        }
                    }
                    SvcValue::Flag => {}
                    SvcValue::Port(p) => v.extend_from_slice(&p.to_be_bytes()),
                    SvcValue::Ipv4(ips) => {
                        for ip in ips {
                            v.extend_from_slice(&ip.octets());
                        }
                    }
                    SvcValue::Ipv6(ips) => {
                        for ip in ips {
                            v.extend_from_slice(&ip.octets());
                        }
                    }
                    SvcValue::Ech(b) | SvcValue::Opaque(b) => v.extend_from_slice(b),
                }
                out.extend_from_slice(&key.to_be_bytes());
                out.extend_from_slice(&(v.len() as u16).to_be_bytes());
                out.extend_from_slice(&v);
            }
        }
        Rdata::Loc(l) => {
            out.extend_from_slice(&[0, l.size, l.horiz_pre, l.vert_pre]);
            for v in [l.latitude, l.longitude, l.altitude] {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
    }
    out
}

/// Where a type's rdata holds names a server may have compressed (or
/// that must be expanded to compare): fixed bytes before each name, and
/// whether character-strings sit between (NAPTR).
enum Shape {
    /// Opaque bytes.
    Raw,
    /// `skip` fixed bytes, then a name, then opaque bytes (CNAME, MX, SRV,
    /// SVCB, TSIG).
    NameAt(usize),
    /// SOA: two names, then the fixed fields.
    Soa,
    /// NAPTR: four fixed bytes, three character-strings, a name.
    Naptr,
}

fn shape(rtype: u16) -> Shape {
    match rtype {
        // NS, CNAME, PTR, DNAME; the algorithm name of TSIG.
        2 | 5 | 12 | 39 | 250 => Shape::NameAt(0),
        // MX, SVCB, HTTPS: a 16-bit field first.
        15 | 64 | 65 => Shape::NameAt(2),
        33 => Shape::NameAt(6),
        6 => Shape::Soa,
        35 => Shape::Naptr,
        _ => Shape::Raw,
    }
}

/// The rdata at `msg[start..start + len]` in canonical form (RFC 4034
/// section 6.2): every name expanded and lower-cased (NS, CNAME, PTR,
/// DNAME, SOA, MX, SRV, NAPTR, SVCB, HTTPS, TSIG), so the operator's
/// encoding of the same data ([`encode`], whose names are lower case)
/// compares equal as bytes. Errors when a name runs past the rdata.
pub fn canonical(msg: &[u8], start: usize, len: usize, rtype: u16) -> Result<Vec<u8>, Malformed> {
    let end = start + len;
    let raw = msg.get(start..end).ok_or(Malformed("truncated rdata"))?;
    let mut r = Reader::at(msg, start);
    let mut out = Vec::with_capacity(len + 16);
    match shape(rtype) {
        Shape::Raw => return Ok(raw.to_vec()),
        Shape::NameAt(skip) => {
            out.extend_from_slice(r.bytes(skip)?);
            out.extend_from_slice(&lower(&r.name()?));
        }
        Shape::Soa => {
            out.extend_from_slice(&lower(&r.name()?));
            out.extend_from_slice(&lower(&r.name()?));
        }
        Shape::Naptr => {
            out.extend_from_slice(r.bytes(4)?);
            for _ in 0..3 {
                let n = usize::from(r.u8()?);
                out.push(n as u8);
                out.extend_from_slice(r.bytes(n)?);
            }
            out.extend_from_slice(&lower(&r.name()?));
        }
    }
    if r.pos() > end {
        return Err(Malformed("name runs past its rdata"));
    }
    out.extend_from_slice(&msg[r.pos()..end]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::ZoneName;

    fn rd(t: RecordType, v: &str) -> Vec<u8> {
        let zone = ZoneName::parse("example.com").unwrap();
        encode(&Rdata::parse(t, v, &zone).unwrap())
    }

    #[test]
    fn encodes_as_rfc_1035_and_3597_say() {
        assert_eq!(rd(RecordType::A, "192.0.2.1"), [192, 0, 2, 1]);
        assert_eq!(rd(RecordType::Mx, "10 mail"), {
            let mut v = vec![0, 10];
            v.extend(wire_name("mail.example.com"));
            v
        });
        assert_eq!(rd(RecordType::Txt, "\"a\" \"bc\""), b"\x01a\x02bc");
        assert_eq!(
            rd(RecordType::Caa, "0 issue \"ca.example\""),
            b"\x00\x05issueca.example"
        );
        assert_eq!(
            rd(RecordType::Https, "1 . alpn=h2 port=443"),
            b"\x00\x01\x00\x00\x01\x00\x03\x02h2\x00\x03\x00\x02\x01\xbb"
        );
    }

    #[test]
    fn canonical_expands_compressed_names() {
        // A message holding "example.com" at 0, then an MX rdata whose
        // exchange is "mail" + pointer.
        let mut msg = wire_name("example.com");
        let start = msg.len();
        msg.extend_from_slice(b"\x00\x0a\x04mail\xc0\x00");
        let got = canonical(&msg, start, msg.len() - start, 15).unwrap();
        let mut want = vec![0, 10];
        want.extend(wire_name("mail.example.com"));
        assert_eq!(got, want);
        // TXT stays as it is.
        let txt = b"\x03abc";
        assert_eq!(canonical(txt, 0, 4, 16).unwrap(), txt);
    }
}
