//! `import axfr`: the zone as a running server serves it, by one AXFR over
//! TCP, TSIG-signed when a key is given. hickory-proto builds and signs the
//! request and verifies every signed response message (RFC 8945 chaining);
//! the answer records are read from the verified bytes by [`wire`], which
//! turns each into the presentation text the operator's rdata parsers read,
//! so a transferred zone goes through exactly the checks a zone file does.
//!
//! The key comes from a BIND key file or the `BIND_OPERATOR_TSIG`
//! environment variable, never an argument; its material stays in memory
//! (never printed: [`TransferKey`]'s `Debug` hides it). Talks to the one
//! server it is given; writes nothing.

pub mod wire;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::rdata::tsig::TsigAlgorithm;
use hickory_proto::rr::{Name, RecordType, TSigner};

use crate::bind::ZoneName;

use super::lexer::tokenize;
use super::zone::{Collector, Target, ZoneOutput};
use super::zonefile::{Item, Location, RawRecord};

/// Environment variable holding `[algorithm:]name:secret` (dig's `-y` form).
pub const TSIG_ENV: &str = "BIND_OPERATOR_TSIG";
/// How long the server may be silent mid-transfer.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// TSIG fudge (seconds), as dig and named use.
const FUDGE: u16 = 300;

/// The transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum AxfrError {
    #[error("invalid server {0:?}: expected HOST or HOST:PORT")]
    Server(String),
    #[error("failed to reach {server}: {source}")]
    Connect {
        server: String,
        source: std::io::Error,
    },
    #[error("failed to transfer from {server}: {message}")]
    Transfer { server: String, message: String },
    #[error("the server refused the transfer: {0}")]
    Refused(String),
    #[error("invalid TSIG key: {0}")]
    Key(String),
    #[error(transparent)]
    Zone(#[from] super::zone::ZoneError),
}

/// A TSIG key, held in memory only.
pub struct TransferKey {
    pub name: String,
    algorithm: TsigAlgorithm,
    secret: Vec<u8>,
}

impl std::fmt::Debug for TransferKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransferKey")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

fn algorithm(name: &str) -> Result<TsigAlgorithm, AxfrError> {
    Ok(
        match name.trim_end_matches('.').to_ascii_lowercase().as_str() {
            "hmac-sha1" => TsigAlgorithm::HmacSha1,
            "hmac-sha224" => TsigAlgorithm::HmacSha224,
            "hmac-sha256" => TsigAlgorithm::HmacSha256,
            "hmac-sha384" => TsigAlgorithm::HmacSha384,
            "hmac-sha512" => TsigAlgorithm::HmacSha512,
            other => {
                return Err(AxfrError::Key(format!(
                    "algorithm {other:?} is not supported (hmac-sha1, -sha224, -sha256, -sha384, -sha512)"
                )));
            }
        },
    )
}

impl TransferKey {
    fn new(name: &str, alg: &str, secret_b64: &str) -> Result<Self, AxfrError> {
        let secret = base64::engine::general_purpose::STANDARD
            .decode(secret_b64.trim())
            // Never the value itself in the message.
            .map_err(|_| AxfrError::Key(format!("the secret of key {name:?} is not base64")))?;
        Ok(TransferKey {
            name: name.to_owned(),
            algorithm: algorithm(alg)?,
            secret,
        })
    }

    /// `[algorithm:]name:secret`; the algorithm defaults to hmac-sha256.
    pub fn from_env_value(value: &str) -> Result<Self, AxfrError> {
        let parts: Vec<&str> = value.trim().splitn(3, ':').collect();
        match parts.as_slice() {
            [name, secret] => Self::new(name, "hmac-sha256", secret),
            [alg, name, secret] => Self::new(name, alg, secret),
            _ => Err(AxfrError::Key(format!(
                "{TSIG_ENV} must be [algorithm:]name:secret"
            ))),
        }
    }

    /// The first `key` statement of a BIND key file (`tsig-keygen` output).
    pub fn from_file(path: &Path) -> Result<Self, AxfrError> {
        let (name, alg, secret) =
            super::namedconf::read_key_file(path).map_err(|e| AxfrError::Key(e.to_string()))?;
        Self::new(&name, &alg, &secret)
    }
}

/// Splits `HOST[:PORT]` (`[v6]:port` for IPv6) into an address.
fn server_addr(server: &str) -> Result<SocketAddr, AxfrError> {
    let bad = || AxfrError::Server(server.to_owned());
    if let Ok(ip) = server.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, 53));
    }
    let with_port = if server.rsplit_once(':').is_some_and(|(h, p)| {
        !h.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty()
    }) {
        server.to_owned()
    } else {
        format!("{server}:53")
    };
    with_port
        .to_socket_addrs()
        .map_err(|_| bad())?
        .next()
        .ok_or_else(bad)
}

/// Transfers `zone` from `server` and imports it.
pub fn import(
    server: &str,
    zone: &ZoneName,
    key: Option<&TransferKey>,
    target: &Target,
) -> Result<ZoneOutput, AxfrError> {
    let mut collector = Collector::new(zone.clone(), None);
    transfer(server, zone, key, &mut |item| collector.add(item))?;
    Ok(collector.finish(target)?)
}

/// Transfers `zone`, handing every record to `sink` as a zone file would.
pub fn transfer(
    server: &str,
    zone: &ZoneName,
    key: Option<&TransferKey>,
    sink: &mut dyn FnMut(Item),
) -> Result<(), AxfrError> {
    let addr = server_addr(server)?;
    let fail = |message: String| AxfrError::Transfer {
        server: server.to_owned(),
        message,
    };
    let name = Name::from_ascii(zone.fqdn()).map_err(|e| fail(e.to_string()))?;
    let mut request = Message::query();
    request.add_query(Query::query(name, RecordType::AXFR));
    let mut verifier = match key {
        Some(k) => {
            let signer = TSigner::new(
                k.secret.clone(),
                k.algorithm.clone(),
                Name::from_ascii(&k.name).map_err(|e| AxfrError::Key(e.to_string()))?,
                FUDGE,
            )
            .map_err(|e| AxfrError::Key(e.to_string()))?;
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            request
                .finalize(&signer, now)
                .map_err(|e| fail(e.to_string()))?
        }
        None => None,
    };
    let bytes = request.to_vec().map_err(|e| fail(e.to_string()))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|source| AxfrError::Connect {
            server: server.to_owned(),
            source,
        })?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| fail(e.to_string()))?;
    let len = u16::try_from(bytes.len()).map_err(|_| fail("request too large".into()))?;
    let mut framed = len.to_be_bytes().to_vec();
    framed.extend_from_slice(&bytes);
    stream.write_all(&framed).map_err(|e| fail(e.to_string()))?;

    let origin: Arc<str> = Arc::from(zone.fqdn());
    let file: Arc<str> = Arc::from(format!("axfr {server}"));
    let (mut soas, mut index) = (0usize, 0usize);
    while soas < 2 {
        let mut len = [0u8; 2];
        stream
            .read_exact(&mut len)
            .map_err(|e| fail(format!("the transfer ended early: {e}")))?;
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream
            .read_exact(&mut msg)
            .map_err(|e| fail(format!("the transfer ended early: {e}")))?;
        let code = match verifier.as_mut() {
            Some(v) => {
                v.verify(&msg)
                    .map_err(|e| fail(format!("TSIG verification failed: {e}")))?
                    .response_code
            }
            None => {
                Message::from_vec(&msg)
                    .map_err(|e| fail(e.to_string()))?
                    .response_code
            }
        };
        if code != ResponseCode::NoError {
            return Err(AxfrError::Refused(code.to_string()));
        }
        let records = wire::answers(&msg).map_err(|e| fail(e.to_string()))?;
        if records.is_empty() {
            return Err(fail("the server sent no records".into()));
        }
        for r in records {
            index += 1;
            let at = Location {
                file: file.clone(),
                line: index,
            };
            let r = match r {
                Ok(r) => r,
                Err((owner, rtype, e)) => {
                    sink(Item::Problem {
                        at,
                        message: format!("{owner} {rtype}: unreadable rdata: {e}"),
                    });
                    continue;
                }
            };
            if r.rtype == "SOA" {
                soas += 1;
                if soas == 2 {
                    break;
                }
            }
            let mut rdata = Vec::new();
            tokenize(&r.rdata, 0, &mut rdata).map_err(|e| fail(e.to_owned()))?;
            sink(Item::Record(RawRecord {
                at,
                owner: r.owner,
                ttl: r.ttl,
                rtype: r.rtype,
                rdata,
                origin: origin.clone(),
            }));
        }
    }
    Ok(())
}
