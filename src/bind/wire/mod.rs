//! DNS on the wire: the operator's own TSIG-signed DNS client, for talking
//! to a BIND pod's DNS port over TCP without a process inside the pod.
//! Pure BIND/DNS knowledge plus a TCP socket: no Kubernetes here; callers
//! say which address a pod's DNS listens on.
//!
//! - [`update`]: a zone's typed batch ([`crate::bind::nsupdate::UpdateBatch`])
//!   as RFC 2136 UPDATE messages (deletes before adds, apex NS last adds
//!   first, split below 64 KiB between RRset changes, never inside one);
//! - [`client`]: sending them, SOA serial queries (one, or many pipelined
//!   on one connection), AXFR and IXFR with every message's TSIG verified,
//!   NOTIFY;
//! - [`tsig`]: RFC 8945 signing and verification;
//! - [`codec`] and [`rdata`]: the message format, and rdata in canonical
//!   wire form so served and wanted RRsets compare as bytes.
//!
//! Why no DNS crate for the message layer: hickory-proto 0.26 (the usual
//! choice) signs TSIG only with hmac-sha256/384/512 and calls hmac-md5,
//! hmac-sha1 and hmac-sha224 "not supported for cryptographic
//! operations", while the BindTSIGKey CRD admits all six; and its typed
//! rdata decoding reads a whole message or nothing, so one record it
//! parses differently from BIND (a CAA or SVCB value, an unknown type)
//! would fail a whole transfer. The part of DNS needed here (RFC 1035
//! section 4 framing and names, RFC 2136, RFC 8945) is small and tested
//! here and against BIND 9.18 (tests/bind_wire.rs); the cryptography is
//! RustCrypto's `hmac`, `md-5`, `sha1` and `sha2`, which cover all six
//! algorithms in one code path.
//!
//! Secrets: key material is held by [`crate::bind::TsigKey`] and only ever
//! turned into bytes to compute a MAC; no error, log line or `Debug`
//! output here carries it.

pub mod client;
pub mod codec;
pub mod primitives;
pub mod rdata;
pub mod tsig;
pub mod update;

use std::net::SocketAddr;

pub use client::Client;
pub use codec::{Rcode, Record};
pub use update::{Op, UpdateMessage};

/// A DNS exchange that failed. Never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Nothing accepted the connection (pod down, named not listening, a
    /// NetworkPolicy dropping the operator's traffic).
    #[error("failed to connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("timed out waiting for {addr} to {what}")]
    Timeout {
        addr: SocketAddr,
        what: &'static str,
    },
    #[error("connection to {addr} failed: {source}")]
    Io {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{addr} sent a message that could not be read: {source}")]
    Malformed {
        addr: SocketAddr,
        #[source]
        source: primitives::Malformed,
    },
    /// The server answered with an error (REFUSED, NOTAUTH, NOTZONE,
    /// SERVFAIL, or a TSIG error: BADKEY, BADSIG, BADTIME).
    #[error("{addr} answered {rcode}")]
    Rejected { addr: SocketAddr, rcode: Rcode },
    /// The response's signature did not verify (or was missing).
    #[error("failed to verify the response of {addr}: {source}")]
    Tsig {
        addr: SocketAddr,
        #[source]
        source: tsig::TsigFailure,
    },
    #[error("failed to send a message of {size} bytes: more than one DNS message holds")]
    TooLarge { size: usize },
    /// Where the pod's DNS listens is not known (no pod IP yet).
    #[error("failed to find the DNS address of pod {pod}: {why}")]
    NoAddress { pod: String, why: String },
}

impl WireError {
    /// The server could not be reached or stopped answering: the failure
    /// is the transport's, not an answer.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            WireError::Connect { .. }
                | WireError::Timeout { .. }
                | WireError::Io { .. }
                | WireError::NoAddress { .. }
        )
    }

    /// The server's answer, when it answered with an error.
    pub fn rcode(&self) -> Option<Rcode> {
        match self {
            WireError::Rejected { rcode, .. } => Some(*rcode),
            _ => None,
        }
    }
}
