//! DNS message encoding and decoding (RFC 1035 section 4, RFC 2136 section
//! 2): header, question, resource records. Names are written uncompressed
//! (a message the operator builds never needs compression to fit: the
//! update splitter budgets for uncompressed names) and read with
//! compression pointers followed, bounded so a hostile message cannot loop.
//! Rdata is kept as bytes in canonical form: names inside the rdata of the
//! types that may carry compressed names are expanded (see
//! [`super::rdata::canonical`]), so two equal RRsets compare equal byte for
//! byte whatever the server compressed. Pure, no I/O.

pub use super::primitives::{Malformed, Reader, WireName, lower, wire_name};
use super::rdata::canonical;

/// Class IN.
pub const CLASS_IN: u16 = 1;
/// Class NONE (RFC 2136: delete one rdata).
pub const CLASS_NONE: u16 = 254;
/// Class ANY (RFC 2136: delete an RRset; TSIG).
pub const CLASS_ANY: u16 = 255;
/// Type SOA.
pub const TYPE_SOA: u16 = 6;
/// Type TSIG (RFC 8945).
pub const TYPE_TSIG: u16 = 250;
/// Type AXFR.
pub const TYPE_AXFR: u16 = 252;
pub const TYPE_IXFR: u16 = 251;
/// Header length.
pub const HEADER_LEN: usize = 12;
/// The largest DNS message (a TCP length prefix is 16 bits).
pub const MAX_MESSAGE: usize = 65_535;
/// Message opcodes the operator sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    Query = 0,
    Notify = 4,
    Update = 5,
}

/// Response codes, extended by the TSIG error of a signed response (RFC
/// 8945 section 5.3: BADSIG, BADKEY, BADTIME travel in the TSIG record with
/// rcode NOTAUTH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rcode {
    #[error("NOERROR")]
    NoError,
    #[error("FORMERR")]
    FormErr,
    #[error("SERVFAIL")]
    ServFail,
    #[error("NXDOMAIN")]
    NxDomain,
    #[error("NOTIMP")]
    NotImp,
    #[error("REFUSED")]
    Refused,
    #[error("YXDOMAIN")]
    YxDomain,
    #[error("YXRRSET")]
    YxRrset,
    #[error("NXRRSET")]
    NxRrset,
    #[error("NOTAUTH")]
    NotAuth,
    #[error("NOTZONE")]
    NotZone,
    #[error("NOTAUTH(BADSIG)")]
    BadSig,
    #[error("NOTAUTH(BADKEY)")]
    BadKey,
    #[error("NOTAUTH(BADTIME)")]
    BadTime,
    #[error("RCODE{0}")]
    Other(u16),
}

impl Rcode {
    /// The header rcode, refined by the TSIG error when there is one.
    pub fn from_parts(header: u16, tsig_error: u16) -> Rcode {
        match tsig_error {
            16 => return Rcode::BadSig,
            17 => return Rcode::BadKey,
            18 => return Rcode::BadTime,
            _ => {}
        }
        match header {
            0 => Rcode::NoError,
            1 => Rcode::FormErr,
            2 => Rcode::ServFail,
            3 => Rcode::NxDomain,
            4 => Rcode::NotImp,
            5 => Rcode::Refused,
            6 => Rcode::YxDomain,
            7 => Rcode::YxRrset,
            8 => Rcode::NxRrset,
            9 => Rcode::NotAuth,
            10 => Rcode::NotZone,
            n => Rcode::Other(n),
        }
    }
}

/// The dotted text of a wire name (lower case, no trailing dot; `.` for
/// the root). Bytes outside `[A-Za-z0-9_*-]` are written `\DDD`.
pub fn name_text(name: &[u8]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < name.len() && name[i] != 0 {
        let len = usize::from(name[i]);
        if !out.is_empty() {
            out.push('.');
        }
        for &b in name.get(i + 1..i + 1 + len).unwrap_or_default() {
            match b {
                b'A'..=b'Z' => out.push(b.to_ascii_lowercase() as char),
                b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'*' => out.push(b as char),
                _ => out.push_str(&format!("\\{b:03}")),
            }
        }
        i += 1 + len;
    }
    if out.is_empty() { ".".into() } else { out }
}

/// One resource record. `rdata` is canonical when read (see the module
/// doc).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Record {
    pub name: WireName,
    pub rtype: u16,
    pub class: u16,
    pub ttl: u32,
    pub rdata: Vec<u8>,
}

impl Record {
    /// Bytes the record takes in a message (uncompressed).
    pub fn wire_len(&self) -> usize {
        self.name.len() + 10 + self.rdata.len()
    }

    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&self.rtype.to_be_bytes());
        out.extend_from_slice(&self.class.to_be_bytes());
        out.extend_from_slice(&self.ttl.to_be_bytes());
        out.extend_from_slice(&(self.rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.rdata);
    }
}

/// A question (or, in an UPDATE, the zone section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub name: WireName,
    pub qtype: u16,
    pub class: u16,
}

/// A message to send: header fields and sections. In an UPDATE the
/// sections are zone, prerequisite, update and additional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: u16,
    pub opcode: Opcode,
    /// Authoritative answer (NOTIFY sets it, RFC 1996).
    pub aa: bool,
    pub question: Vec<Question>,
    pub answer: Vec<Record>,
    pub authority: Vec<Record>,
    pub additional: Vec<Record>,
}

impl Message {
    /// A message with no records.
    pub fn new(id: u16, opcode: Opcode, question: Question) -> Self {
        Message {
            id,
            opcode,
            aa: false,
            question: vec![question],
            answer: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
        }
    }

    /// The unsigned wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(&self.id.to_be_bytes());
        let mut flags: u16 = (self.opcode as u16) << 11;
        if self.aa {
            flags |= 0x0400;
        }
        out.extend_from_slice(&flags.to_be_bytes());
        for n in [
            self.question.len(),
            self.answer.len(),
            self.authority.len(),
            self.additional.len(),
        ] {
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        for q in &self.question {
            out.extend_from_slice(&q.name);
            out.extend_from_slice(&q.qtype.to_be_bytes());
            out.extend_from_slice(&q.class.to_be_bytes());
        }
        for r in self
            .answer
            .iter()
            .chain(&self.authority)
            .chain(&self.additional)
        {
            r.write_to(&mut out);
        }
        out
    }
}

/// A received message, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub id: u16,
    pub qr: bool,
    pub opcode: u16,
    pub aa: bool,
    /// The header's rcode (4 bits; no EDNS is sent, so no extension).
    pub rcode: u16,
    pub question: Vec<Question>,
    pub answer: Vec<Record>,
    pub authority: Vec<Record>,
    /// Additional records, without the TSIG record.
    pub additional: Vec<Record>,
    /// The TSIG record (last in the additional section) and the offset in
    /// the message where it starts.
    pub tsig: Option<(Record, usize)>,
}

/// Reads one resource record.
fn read_record(r: &mut Reader<'_>) -> Result<Record, Malformed> {
    let name = r.name()?;
    let rtype = r.u16()?;
    let class = r.u16()?;
    let ttl = r.u32()?;
    let len = usize::from(r.u16()?);
    let start = r.pos();
    r.bytes(len)?;
    let rdata = canonical(r.msg(), start, len, rtype)?;
    Ok(Record {
        name,
        rtype,
        class,
        ttl,
        rdata,
    })
}

/// Reads a received message.
pub fn decode(msg: &[u8]) -> Result<Response, Malformed> {
    let mut r = Reader::new(msg);
    let id = r.u16()?;
    let flags = r.u16()?;
    let counts = [r.u16()?, r.u16()?, r.u16()?, r.u16()?];
    let mut question = Vec::new();
    for _ in 0..counts[0] {
        question.push(Question {
            name: r.name()?,
            qtype: r.u16()?,
            class: r.u16()?,
        });
    }
    let mut sections: [Vec<Record>; 3] = Default::default();
    let mut tsig = None;
    for (s, count) in counts[1..].iter().enumerate() {
        for i in 0..*count {
            let start = r.pos();
            let rec = read_record(&mut r)?;
            if rec.rtype == TYPE_TSIG {
                if s != 2 || i + 1 != *count {
                    return Err(Malformed("TSIG record not last"));
                }
                tsig = Some((rec, start));
            } else {
                sections[s].push(rec);
            }
        }
    }
    let [answer, authority, additional] = sections;
    Ok(Response {
        id,
        qr: flags & 0x8000 != 0,
        opcode: (flags >> 11) & 0xF,
        aa: flags & 0x0400 != 0,
        rcode: flags & 0xF,
        question,
        answer,
        authority,
        additional,
        tsig,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_pointers_expand() {
        assert_eq!(wire_name("a.Example."), b"\x01a\x07Example\x00");
        assert_eq!(wire_name("."), b"\x00");
        assert_eq!(name_text(b"\x01a\x07Example\x00"), "a.example");
        // "www" + pointer to offset 0 ("a.example").
        let mut msg = wire_name("a.example");
        msg.extend_from_slice(b"\x03www\xC0\x00");
        let mut r = Reader::at(&msg, 11);
        assert_eq!(r.name().unwrap(), wire_name("www.a.example"));
        assert_eq!(r.pos(), msg.len());
        // A pointer to itself is refused, not followed forever.
        let looped = b"\xC0\x00";
        assert!(Reader::new(looped).name().is_err());
    }

    #[test]
    fn header_and_sections_round_trip() {
        let mut m = Message::new(
            7,
            Opcode::Update,
            Question {
                name: wire_name("example.com"),
                qtype: TYPE_SOA,
                class: CLASS_IN,
            },
        );
        m.authority.push(Record {
            name: wire_name("www.example.com"),
            rtype: 1,
            class: CLASS_IN,
            ttl: 300,
            rdata: vec![192, 0, 2, 1],
        });
        let bytes = m.encode();
        let r = decode(&bytes).unwrap();
        assert_eq!((r.id, r.opcode, r.qr, r.rcode), (7, 5, false, 0));
        assert_eq!(r.authority, m.authority);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn tsig_errors_refine_notauth() {
        assert_eq!(Rcode::from_parts(9, 17), Rcode::BadKey);
        assert_eq!(Rcode::from_parts(9, 16), Rcode::BadSig);
        assert_eq!(Rcode::from_parts(9, 0), Rcode::NotAuth);
        assert_eq!(Rcode::from_parts(5, 0), Rcode::Refused);
        assert_eq!(Rcode::from_parts(10, 0), Rcode::NotZone);
    }
}
