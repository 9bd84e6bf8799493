//! The DNS client: TSIG-signed messages over TCP to one server address,
//! with a timeout on connecting and on every read. Each operation opens
//! its own connection (a pod's named is one hop away; no pool to go
//! stale when a pod restarts) and closes it when done.
//!
//! TCP only: an UPDATE of a large RRset or a zone transfer does not fit
//! UDP, and TCP needs no retry logic of our own.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::codec::{
    CLASS_IN, MAX_MESSAGE, Message, Opcode, Question, Record, Response, TYPE_AXFR, TYPE_IXFR,
    TYPE_SOA, decode, lower, wire_name,
};
use super::tsig::{self, Verifier};
use super::update::UpdateMessage;
use super::{Rcode, WireError};
use crate::bind::{TsigKey, ZoneName};

/// Default time allowed to connect and for each response.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// SOA queries in flight on one connection (pipelined, RFC 7766).
const PIPELINE: usize = 64;
/// Connections one serial read of many zones uses at most: named answers
/// a connection's queries one after another (1,000 zones on one connection
/// took ~0.5 s at the first sync of 1,000 zones), and each connection is
/// served by whichever of its threads is free.
const CONNECTIONS: usize = 4;

/// A server, by address.
#[derive(Debug, Clone)]
pub struct Client {
    pub addr: SocketAddr,
    pub timeout: Duration,
}

fn next_id() -> u16 {
    rand::random()
}

struct Conn {
    addr: SocketAddr,
    timeout: Duration,
    stream: TcpStream,
}

impl Conn {
    async fn write(&mut self, msg: &[u8]) -> Result<(), WireError> {
        if msg.len() > MAX_MESSAGE {
            return Err(WireError::TooLarge { size: msg.len() });
        }
        let mut framed = Vec::with_capacity(msg.len() + 2);
        framed.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        framed.extend_from_slice(msg);
        let addr = self.addr;
        match tokio::time::timeout(self.timeout, self.stream.write_all(&framed)).await {
            Ok(r) => r.map_err(|source| WireError::Io { addr, source }),
            Err(_) => Err(WireError::Timeout {
                addr,
                what: "accept the request",
            }),
        }
    }

    async fn read(&mut self) -> Result<Vec<u8>, WireError> {
        let addr = self.addr;
        let io = |source| WireError::Io { addr, source };
        let read = async {
            let mut len = [0u8; 2];
            self.stream.read_exact(&mut len).await.map_err(io)?;
            let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
            self.stream.read_exact(&mut buf).await.map_err(io)?;
            Ok(buf)
        };
        tokio::time::timeout(self.timeout, read)
            .await
            .unwrap_or(Err(WireError::Timeout {
                addr,
                what: "answer",
            }))
    }
}

/// The rcode a response carries, its TSIG error folded in.
fn rcode_of(resp: &Response) -> Rcode {
    let tsig_error = resp
        .tsig
        .as_ref()
        .and_then(|(rec, _)| tsig::fields(rec))
        .map_or(0, |f| f.error);
    Rcode::from_parts(resp.rcode, tsig_error)
}

impl Client {
    pub fn new(addr: SocketAddr) -> Self {
        Client {
            addr,
            timeout: TIMEOUT,
        }
    }

    async fn connect(&self) -> Result<Conn, WireError> {
        let addr = self.addr;
        let stream = match tokio::time::timeout(self.timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => return Err(WireError::Connect { addr, source }),
            Err(_) => {
                return Err(WireError::Timeout {
                    addr,
                    what: "accept the connection",
                });
            }
        };
        let _ = stream.set_nodelay(true);
        Ok(Conn {
            addr,
            timeout: self.timeout,
            stream,
        })
    }

    /// Reads the response to request `id`, checks it answers it, and
    /// verifies its signature when `verifier` is given. A rejected
    /// request is a [`WireError::Rejected`] with its rcode (a TSIG error
    /// reply is unsigned: the server could not sign it, so BADKEY and
    /// BADSIG are reported as the server said).
    async fn response(
        &self,
        conn: &mut Conn,
        id: u16,
        verifier: Option<&mut Verifier>,
    ) -> Result<Response, WireError> {
        let raw = conn.read().await?;
        let addr = self.addr;
        let resp = decode(&raw).map_err(|source| WireError::Malformed { addr, source })?;
        if resp.id != id || !resp.qr {
            return Err(WireError::Malformed {
                addr,
                source: super::codec::Malformed("a response to another request"),
            });
        }
        let rcode = rcode_of(&resp);
        if matches!(rcode, Rcode::BadKey | Rcode::BadSig | Rcode::BadTime) {
            return Err(WireError::Rejected { addr, rcode });
        }
        if let Some(v) = verifier {
            v.verify(&raw, resp.tsig.as_ref())
                .map_err(|source| WireError::Tsig { addr, source })?;
        }
        if rcode != Rcode::NoError {
            return Err(WireError::Rejected { addr, rcode });
        }
        Ok(resp)
    }

    async fn signed(
        &self,
        conn: &mut Conn,
        msg: &Message,
        key: &TsigKey,
    ) -> Result<Response, WireError> {
        let mut bytes = msg.encode();
        let mut v = tsig::sign(&mut bytes, key);
        conn.write(&bytes).await?;
        self.response(conn, msg.id, Some(&mut v)).await
    }

    /// Sends the messages in order on one connection, each signed with
    /// `key`, each waiting for its answer. Stops at the first message the
    /// server rejects: the messages before it are applied (each message is
    /// atomic, a sequence of them is not). Ok: how many were sent.
    pub async fn update(
        &self,
        messages: &[UpdateMessage],
        key: &TsigKey,
    ) -> Result<usize, WireError> {
        if messages.is_empty() {
            return Ok(0);
        }
        let mut conn = self.connect().await?;
        for m in messages {
            self.signed(&mut conn, &m.to_message(next_id()), key)
                .await?;
        }
        Ok(messages.len())
    }

    /// The serial the server serves `zone` with: `None` when it does not
    /// serve it authoritatively (not configured, not loaded, or only
    /// known as a referral). Signed with `key` when given (a signed query
    /// lands in the key's view).
    pub async fn serial(
        &self,
        zone: &ZoneName,
        key: Option<&TsigKey>,
    ) -> Result<Option<u32>, WireError> {
        let mut conn = self.connect().await?;
        let msg = soa_query(zone, next_id());
        let resp = match key {
            Some(k) => self.signed(&mut conn, &msg, k).await,
            None => {
                conn.write(&msg.encode()).await?;
                self.response(&mut conn, msg.id, None).await
            }
        };
        not_served_is_none(resp).map(|r| r.and_then(|r| served_serial(zone, &r)))
    }

    /// Like [`Self::serial`], but a zone the server does not serve comes
    /// back as the server's answer in words (`REFUSED`, `NXDOMAIN`, `a
    /// non-authoritative answer`...), for a status that says what the
    /// server said.
    pub async fn soa_answer(
        &self,
        zone: &ZoneName,
        key: Option<&TsigKey>,
    ) -> Result<Result<u32, String>, WireError> {
        let mut conn = self.connect().await?;
        let msg = soa_query(zone, next_id());
        let resp = match key {
            Some(k) => self.signed(&mut conn, &msg, k).await,
            None => {
                conn.write(&msg.encode()).await?;
                self.response(&mut conn, msg.id, None).await
            }
        };
        match resp {
            Ok(r) => Ok(served_serial(zone, &r).ok_or_else(|| {
                if r.aa {
                    "an answer without the zone's SOA".to_string()
                } else {
                    "a non-authoritative answer (the server does not serve the zone)".to_string()
                }
            })),
            Err(WireError::Rejected { rcode, .. })
                if matches!(
                    rcode,
                    Rcode::Refused | Rcode::ServFail | Rcode::NotAuth | Rcode::NxDomain
                ) =>
            {
                Ok(Err(rcode.to_string()))
            }
            Err(e) => Err(e),
        }
    }

    /// Serials of many zones, queries pipelined on up to four connections
    /// side by side (64 queries in flight on each),
    /// each signed with `key` when given (and its answer's signature
    /// checked). A zone missing from the result is not served (or its
    /// answer was refused: a server answers REFUSED for a zone it does not
    /// have).
    pub async fn serials(
        &self,
        zones: &[ZoneName],
        key: Option<&TsigKey>,
    ) -> Result<BTreeMap<ZoneName, u32>, WireError> {
        let per = zones.len().div_ceil(CONNECTIONS).max(PIPELINE);
        let parts = futures::future::try_join_all(
            zones.chunks(per).map(|part| self.serials_on_one(part, key)),
        )
        .await?;
        Ok(parts.into_iter().flatten().collect())
    }

    /// [`Self::serials`] on one connection.
    async fn serials_on_one(
        &self,
        zones: &[ZoneName],
        key: Option<&TsigKey>,
    ) -> Result<BTreeMap<ZoneName, u32>, WireError> {
        let mut out = BTreeMap::new();
        if zones.is_empty() {
            return Ok(out);
        }
        let mut conn = self.connect().await?;
        let addr = self.addr;
        for chunk in zones.chunks(PIPELINE) {
            let mut ids: BTreeMap<u16, (&ZoneName, Option<Verifier>)> = BTreeMap::new();
            let mut batch = Vec::new();
            for z in chunk {
                let mut id = next_id();
                while ids.contains_key(&id) {
                    id = id.wrapping_add(1);
                }
                let mut bytes = soa_query(z, id).encode();
                let verifier = key.map(|k| tsig::sign(&mut bytes, k));
                ids.insert(id, (z, verifier));
                batch.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                batch.extend_from_slice(&bytes);
            }
            tokio::time::timeout(self.timeout, conn.stream.write_all(&batch))
                .await
                .map_err(|_| WireError::Timeout {
                    addr,
                    what: "accept the queries",
                })?
                .map_err(|source| WireError::Io { addr, source })?;
            while !ids.is_empty() {
                let raw = conn.read().await?;
                let resp = decode(&raw).map_err(|source| WireError::Malformed { addr, source })?;
                let Some((zone, verifier)) = ids.remove(&resp.id) else {
                    continue;
                };
                let rcode = rcode_of(&resp);
                if matches!(rcode, Rcode::BadKey | Rcode::BadSig | Rcode::BadTime) {
                    return Err(WireError::Rejected { addr, rcode });
                }
                if let Some(mut v) = verifier {
                    v.verify(&raw, resp.tsig.as_ref())
                        .map_err(|source| WireError::Tsig { addr, source })?;
                }
                if rcode == Rcode::NoError
                    && let Some(s) = served_serial(zone, &resp)
                {
                    out.insert(zone.clone(), s);
                }
            }
        }
        Ok(out)
    }

    /// A signed AXFR of `zone`: every record, the closing SOA dropped.
    /// Every message of the stream must carry a TSIG record that
    /// verifies against the one before.
    pub async fn axfr(&self, zone: &ZoneName, key: &TsigKey) -> Result<Vec<Record>, WireError> {
        let mut conn = self.connect().await?;
        let id = next_id();
        let msg = Message::new(
            id,
            Opcode::Query,
            Question {
                name: wire_name(zone.as_str()),
                qtype: TYPE_AXFR,
                class: CLASS_IN,
            },
        );
        let mut bytes = msg.encode();
        let mut v = tsig::sign(&mut bytes, key);
        conn.write(&bytes).await?;
        let mut records: Vec<Record> = Vec::new();
        let mut soas = 0;
        loop {
            let resp = self.response(&mut conn, id, Some(&mut v)).await?;
            if records.is_empty() && resp.answer.first().is_none_or(|r| r.rtype != TYPE_SOA) {
                return Err(WireError::Rejected {
                    addr: self.addr,
                    rcode: Rcode::NotAuth,
                });
            }
            for r in resp.answer {
                if r.rtype == TYPE_SOA {
                    soas += 1;
                    if soas == 2 {
                        return Ok(records);
                    }
                }
                records.push(r);
            }
        }
    }

    /// A TSIG-signed IXFR of `zone` from `serial` (RFC 1995): the
    /// differences the server's journal holds since, or the whole zone when
    /// it has none that reach back so far (an AXFR-style answer, which a
    /// server may always give).
    pub async fn ixfr(
        &self,
        zone: &ZoneName,
        serial: u32,
        key: &TsigKey,
    ) -> Result<Ixfr, WireError> {
        let mut conn = self.connect().await?;
        let id = next_id();
        let mut msg = Message::new(
            id,
            Opcode::Query,
            Question {
                name: wire_name(zone.as_str()),
                qtype: TYPE_IXFR,
                class: CLASS_IN,
            },
        );
        // The client's version: only its serial counts (root names, zero
        // timers).
        let mut rdata = vec![0u8, 0u8];
        rdata.extend_from_slice(&serial.to_be_bytes());
        rdata.extend_from_slice(&[0u8; 16]);
        msg.authority.push(Record {
            name: wire_name(zone.as_str()),
            rtype: TYPE_SOA,
            class: CLASS_IN,
            ttl: 0,
            rdata,
        });
        let mut bytes = msg.encode();
        let mut v = tsig::sign(&mut bytes, key);
        conn.write(&bytes).await?;
        let rejected = || WireError::Rejected {
            addr: self.addr,
            rcode: Rcode::NotAuth,
        };
        let mut parser = IxfrParser::default();
        loop {
            let resp = self.response(&mut conn, id, Some(&mut v)).await?;
            if resp.answer.is_empty() {
                return Err(rejected());
            }
            for r in resp.answer {
                if let Some(done) = parser.push(r).ok_or_else(rejected)? {
                    return Ok(done);
                }
            }
            // A lone SOA at the client's serial: nothing changed.
            if let Some(done) = parser.up_to_date(serial) {
                return Ok(done);
            }
        }
    }

    /// Sends a signed NOTIFY for `zone` (RFC 1996) and waits for its
    /// acknowledgement.
    pub async fn notify(&self, zone: &ZoneName, key: &TsigKey) -> Result<(), WireError> {
        let mut conn = self.connect().await?;
        let mut msg = Message::new(
            next_id(),
            Opcode::Notify,
            Question {
                name: wire_name(zone.as_str()),
                qtype: TYPE_SOA,
                class: CLASS_IN,
            },
        );
        msg.aa = true;
        self.signed(&mut conn, &msg, key).await.map(|_| ())
    }
}

fn soa_query(zone: &ZoneName, id: u16) -> Message {
    Message::new(
        id,
        Opcode::Query,
        Question {
            name: wire_name(zone.as_str()),
            qtype: TYPE_SOA,
            class: CLASS_IN,
        },
    )
}

/// Answers that say "this server does not serve the zone" become `None`.
fn not_served_is_none(r: Result<Response, WireError>) -> Result<Option<Response>, WireError> {
    match r {
        Ok(r) => Ok(Some(r)),
        Err(WireError::Rejected {
            rcode: Rcode::Refused | Rcode::ServFail | Rcode::NotAuth | Rcode::NxDomain,
            ..
        }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The serial of an authoritative SOA answer for the zone's apex.
fn served_serial(zone: &ZoneName, resp: &Response) -> Option<u32> {
    if !resp.aa {
        return None;
    }
    let apex = wire_name(zone.as_str());
    resp.answer
        .iter()
        .find(|r| r.rtype == TYPE_SOA && lower(&r.name) == apex)
        .and_then(|r| soa_serial(&r.rdata))
}

/// What an IXFR answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ixfr {
    /// The zone is still at the serial asked from.
    UpToDate,
    /// The differences, oldest first, each the records it deleted and
    /// the records it added (the SOA of each version among them: the old
    /// one deleted, the new one added); the last ends at `serial`.
    Deltas {
        serial: u32,
        deltas: Vec<(Vec<Record>, Vec<Record>)>,
    },
    /// The whole zone (AXFR-style), as [`Client::axfr`] returns it.
    Full(Vec<Record>),
}

/// Reads an IXFR answer record by record (RFC 1995 section 4): the
/// current SOA, then either the whole zone up to the current SOA again,
/// or difference sequences (old SOA, deleted records, new SOA, added
/// records) up to the current SOA.
#[derive(Default)]
struct IxfrParser {
    /// The current version's SOA serial, from the first record.
    current: Option<u32>,
    first: Option<Record>,
    state: IxfrState,
    records: Vec<Record>,
    deltas: Vec<(Vec<Record>, Vec<Record>)>,
}

#[derive(Default, PartialEq, Eq)]
enum IxfrState {
    #[default]
    Start,
    /// After the first SOA: the next record tells the form.
    Form,
    Full,
    /// Expecting a difference's old SOA (or the closing SOA).
    DeltaStart,
    Deleted,
    Added,
}

impl IxfrParser {
    /// Takes one record; `Some(Some(_))` when the answer is complete,
    /// `None` when it is malformed.
    fn push(&mut self, r: Record) -> Option<Option<Ixfr>> {
        let soa = (r.rtype == TYPE_SOA)
            .then(|| soa_serial(&r.rdata))
            .flatten();
        match self.state {
            IxfrState::Start => {
                self.current = Some(soa?);
                self.first = Some(r);
                self.state = IxfrState::Form;
            }
            IxfrState::Form => match soa {
                // A second SOA: incremental, this is the first old SOA
                // (or, at the current serial, an empty difference list).
                Some(s) if Some(s) == self.current => {
                    return Some(Some(Ixfr::Deltas {
                        serial: s,
                        deltas: Vec::new(),
                    }));
                }
                Some(_) => {
                    self.deltas.push((vec![r], Vec::new()));
                    self.state = IxfrState::Deleted;
                }
                None => {
                    self.records.push(self.first.take()?);
                    self.records.push(r);
                    self.state = IxfrState::Full;
                }
            },
            IxfrState::Full => {
                if soa.is_some() && soa == self.current && r.name == self.records[0].name {
                    return Some(Some(Ixfr::Full(std::mem::take(&mut self.records))));
                }
                self.records.push(r);
            }
            IxfrState::DeltaStart => match soa {
                Some(s) if Some(s) == self.current => {
                    return Some(Some(Ixfr::Deltas {
                        serial: s,
                        deltas: std::mem::take(&mut self.deltas),
                    }));
                }
                Some(_) => {
                    self.deltas.push((vec![r], Vec::new()));
                    self.state = IxfrState::Deleted;
                }
                None => return None,
            },
            IxfrState::Deleted => {
                let (_, added) = self.deltas.last_mut()?;
                if soa.is_some() {
                    self.state = IxfrState::Added;
                }
                if self.state == IxfrState::Added {
                    added.push(r);
                } else {
                    self.deltas.last_mut()?.0.push(r);
                }
            }
            IxfrState::Added => {
                if soa.is_some() {
                    // The next difference's old SOA, or the closing SOA.
                    self.state = IxfrState::DeltaStart;
                    return self.push(r);
                }
                self.deltas.last_mut()?.1.push(r);
            }
        }
        Some(None)
    }

    /// After a whole message: a lone SOA at the client's own serial.
    fn up_to_date(&self, asked: u32) -> Option<Ixfr> {
        (self.state == IxfrState::Form && self.current == Some(asked)).then_some(Ixfr::UpToDate)
    }
}

/// The serial field of canonical SOA rdata (after the two names).
pub fn soa_serial(rdata: &[u8]) -> Option<u32> {
    let mut r = super::codec::Reader::new(rdata);
    r.name().ok()?;
    r.name().ok()?;
    r.u32().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soa(serial: u32) -> Record {
        let mut rdata = vec![0u8, 0u8];
        rdata.extend_from_slice(&serial.to_be_bytes());
        rdata.extend_from_slice(&[0u8; 16]);
        Record {
            name: wire_name("z.test"),
            rtype: TYPE_SOA,
            class: CLASS_IN,
            ttl: 300,
            rdata,
        }
    }

    fn a(name: &str, last: u8) -> Record {
        Record {
            name: wire_name(name),
            rtype: 1,
            class: CLASS_IN,
            ttl: 60,
            rdata: vec![192, 0, 2, last],
        }
    }

    /// Feeds `records` in messages of `per` records, as a transfer may
    /// split them anywhere.
    fn parse(records: Vec<Record>, per: usize, asked: u32) -> Option<Ixfr> {
        let mut p = IxfrParser::default();
        for chunk in records.chunks(per) {
            for r in chunk {
                if let Some(done) = p.push(r.clone())? {
                    return Some(done);
                }
            }
            if let Some(done) = p.up_to_date(asked) {
                return Some(done);
            }
        }
        None
    }

    #[test]
    fn ixfr_answers_parse_into_differences_whole_zones_or_nothing() {
        // Two differences, 5 -> 6 -> 7, split at every possible size.
        let deltas = vec![
            soa(7),
            soa(5),
            a("old.z.test", 1),
            soa(6),
            a("new.z.test", 2),
            soa(6),
            soa(7),
            a("x.z.test", 3),
            a("y.z.test", 4),
            soa(7),
        ];
        for per in 1..=deltas.len() {
            assert_eq!(
                parse(deltas.clone(), per, 5),
                Some(Ixfr::Deltas {
                    serial: 7,
                    deltas: vec![
                        (
                            vec![soa(5), a("old.z.test", 1)],
                            vec![soa(6), a("new.z.test", 2)]
                        ),
                        (
                            vec![soa(6)],
                            vec![soa(7), a("x.z.test", 3), a("y.z.test", 4)]
                        ),
                    ],
                }),
                "{per} records per message"
            );
        }
        // AXFR-style: the whole zone between the two SOAs.
        let full = vec![soa(9), a("a.z.test", 1), a("b.z.test", 2), soa(9)];
        assert_eq!(
            parse(full, 2, 5),
            Some(Ixfr::Full(vec![soa(9), a("a.z.test", 1), a("b.z.test", 2)]))
        );
        // A lone SOA at the asked serial: up to date.
        assert_eq!(parse(vec![soa(5)], 1, 5), Some(Ixfr::UpToDate));
        // Not opened by an SOA: refused as malformed.
        assert_eq!(parse(vec![a("a.z.test", 1), soa(5)], 2, 5), None);
    }
}
