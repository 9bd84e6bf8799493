//! The checker's probe: SOA serials and A answers asked of a pod over UDP
//! by the bench process itself, as any client asks (plain queries, no
//! recursion, no key). Messages are built and read with hickory-proto, not
//! with the operator's own DNS code ([`crate::bind::wire`]), so the bench
//! does not check the operator with the operator's codec.
//!
//! Why not `dig` here: one dig process per probe cost 20-80 ms of a core on
//! the loaded 2-core machine the bench runs on, so the check could afford
//! one probe per 100 ms per pod, which set the resolution of every
//! measured time (a tenth of a 1,000-record scenario) and took CPU from
//! what it measured. A probe here is a few datagrams. Whether a zone holds
//! every expected record is still decided by `dig` AXFRs
//! ([`super::check`]); a probe only says which serial a pod served when.
//!
//! Touches only the pod's DNS port on loopback; no key, nothing written.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use tokio::net::UdpSocket;
use tokio::time::Instant;

/// How long a probe waits for its answers; an unanswered query (a
/// datagram lost, a server busy) only leaves its zone unseen this time.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Queries in flight at once on the probe's socket, so a thousand zones
/// never overflow the server's receive buffer.
const IN_FLIGHT: usize = 64;

/// What a probe heard: each zone's served SOA serial (by the zone's
/// lowercase name with its trailing dot) with when its answer arrived, and
/// each queried name's A addresses (same form), for the queries that were
/// answered.
#[derive(Debug, Default)]
pub struct Heard {
    pub serials: BTreeMap<String, (u32, std::time::Instant)>,
    pub a: HashMap<String, BTreeSet<String>>,
}

/// What a probe asks: `(name, is_soa)`, a SOA query for a zone's apex or an
/// A query for a name.
pub type Ask = (String, bool);

/// Asks `dns` every query of `asks` over one UDP socket, 64 at a time, and
/// returns what was answered within half a second.
pub async fn probe(dns: SocketAddr, asks: &[Ask]) -> Heard {
    let mut heard = Heard::default();
    let local: SocketAddr = (Ipv4Addr::LOCALHOST, 0).into();
    let Ok(socket) = UdpSocket::bind(local).await else {
        return heard;
    };
    if socket.connect(dns).await.is_err() {
        return heard;
    }
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let base: u16 = rand::random();
    let mut next = 0usize;
    let mut waiting = 0usize;
    let mut buf = vec![0u8; 4096];
    loop {
        while waiting < IN_FLIGHT && next < asks.len() {
            let (name, soa) = &asks[next];
            let id = base.wrapping_add(next as u16);
            next += 1;
            let Some(bytes) = encode(id, name, *soa) else {
                continue;
            };
            if socket.send(&bytes).await.is_ok() {
                waiting += 1;
            }
        }
        if waiting == 0 {
            return heard;
        }
        let Ok(Ok(n)) = tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await else {
            return heard;
        };
        let Ok(answer) = Message::from_vec(&buf[..n]) else {
            continue;
        };
        if answer.metadata.message_type != MessageType::Response {
            continue;
        }
        waiting = waiting.saturating_sub(1);
        let arrived = std::time::Instant::now();
        for record in &answer.answers {
            let owner = record.name.to_ascii().to_ascii_lowercase();
            match &record.data {
                RData::SOA(soa) => {
                    heard.serials.insert(owner, (soa.serial, arrived));
                }
                RData::A(a) => {
                    heard.a.entry(owner).or_default().insert(a.0.to_string());
                }
                _ => {}
            }
        }
    }
}

/// One query message (SOA or A, no recursion); `None` for a name hickory
/// cannot hold. The latency scenario's prober sends these too.
pub(super) fn encode(id: u16, name: &str, soa: bool) -> Option<Vec<u8>> {
    let name = Name::from_ascii(name).ok()?;
    let rtype = if soa { RecordType::SOA } else { RecordType::A };
    let mut query = Message::new(id, MessageType::Query, OpCode::Query);
    query.add_query(Query::query(name, rtype));
    query.to_vec().ok()
}
