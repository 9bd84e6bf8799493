//! The readiness probe: one DNS query over UDP to a pod's port.
//!
//! A named that could not bind its port keeps running without a listener,
//! so a live process proves nothing; only an answer does. Any well-formed
//! response to our query (NOERROR, REFUSED, ...) counts: it shows named
//! is listening and processing queries. Talks to 127.0.0.1 only; no
//! cluster access.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::UdpSocket;

/// `version.bind. CH TXT`: answered by named itself whatever zones it has.
fn query(id: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(32);
    q.extend_from_slice(&id.to_be_bytes());
    // Flags 0 (a plain query, no recursion), one question.
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in ["version", "bind"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    // QTYPE TXT (16), QCLASS CH (3).
    q.extend_from_slice(&[0, 16, 0, 3]);
    q
}

fn is_answer(buf: &[u8], id: u16) -> bool {
    buf.len() >= 12 && buf[..2] == id.to_be_bytes() && buf[2] & 0x80 != 0
}

/// Whether a DNS server answers on `addr` within `timeout`.
pub async fn dns_answers(addr: SocketAddr, timeout: Duration) -> bool {
    let attempt = async {
        let sock = UdpSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        sock.connect(addr).await?;
        let id: u16 = rand::random();
        sock.send(&query(id)).await?;
        let mut buf = [0u8; 512];
        loop {
            // A refused port shows up as an error here (ICMP unreachable).
            let n = sock.recv(&mut buf).await?;
            if is_answer(&buf[..n], id) {
                return Ok::<bool, std::io::Error>(true);
            }
        }
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Ok(true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_only_with_matching_response() {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap();
        let responder = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let (n, peer) = server.recv_from(&mut buf).await.unwrap();
            assert_eq!(&buf[12..n], &query(0)[12..]);
            // A response with another id is ignored, then the right one.
            let mut wrong = buf[..n].to_vec();
            wrong[0] ^= 0xff;
            wrong[2] |= 0x80;
            server.send_to(&wrong, peer).await.unwrap();
            let mut resp = buf[..n].to_vec();
            resp[2] |= 0x80;
            server.send_to(&resp, peer).await.unwrap();
        });
        assert!(dns_answers(addr, Duration::from_secs(2)).await);
        responder.await.unwrap();

        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        assert!(!dns_answers(addr, Duration::from_millis(100)).await);
    }
}
