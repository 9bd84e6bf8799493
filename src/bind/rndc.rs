//! A client of BIND's rndc control channel (`controls { inet ... keys { }; }`):
//! what the operator uses to add and delete zones on a BIND it did not
//! deploy, where there is no pod to exec `rndc` in.
//!
//! Why hand-written: no Rust crate speaks this protocol, and running the
//! `rndc` binary would need the key in a file or in argv (the operator's
//! image need not ship rndc, and key material must never reach either).
//! The protocol is small: ISC's "ccmsg" framing (a 4-byte length before
//! each message) around an "isccc" message — version 1, then a table of
//! `_auth` (an HMAC of everything after it), `_ctrl` (serial, time,
//! expiry, the server's nonce) and `_data` (`type` holds the command
//! text). Tables are `len-prefixed key, type byte, 4-byte length, value`
//! with types binary (1), table (2) and list (3). A session is two
//! exchanges on one connection: a `null` command whose reply carries a
//! nonce, then the real command carrying that nonce (replay protection).
//! The reply's `_data` holds `result` (0 = success), `err` (the failure's
//! text) and `text` (the command's output). Reference: BIND's
//! lib/isccc/cc.c and bin/rndc/rndc.c (read, not copied).
//!
//! Signing: HMAC over the serialized message after `_auth`, base64 with
//! padding; hmac-md5 carries the 22 characters that fit as `hmd5`, the
//! other algorithms carry a one-byte algorithm number and the base64
//! zero-padded to 88 bytes as `hsha`. Every reply's signature is checked.
//!
//! Pure protocol plus one TCP socket; no Kubernetes. Key material is held
//! in [`TsigKey`] and only turned into bytes to compute a MAC; no error
//! or log line here carries it.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::wire::tsig::mac_with;
use super::{TsigAlgorithm, TsigKey};

/// Time allowed to connect and for each reply.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request stays valid on the server (`_exp`), as rndc does.
const EXPIRY: u64 = 60;
/// Largest reply accepted (a `showzone` or `status` is a few KiB).
const MAX_REPLY: usize = 1 << 20;

const TYPE_BINARY: u8 = 1;
const TYPE_TABLE: u8 = 2;
const TYPE_LIST: u8 = 3;
/// Base64 of an HMAC-MD5 (16 bytes) without its padding.
const HMD5_LEN: usize = 22;
/// Room for the base64 of the longest HMAC (SHA-512) in `hsha`.
const HSHA_LEN: usize = 88;

/// A failed control-channel exchange. Never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum RndcError {
    #[error("failed to connect to the rndc channel at {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("timed out waiting for the rndc channel at {addr}")]
    Timeout { addr: SocketAddr },
    #[error("rndc channel at {addr} failed: {source}")]
    Io {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("rndc channel at {addr} sent a reply that could not be read: {what}")]
    Malformed {
        addr: SocketAddr,
        what: &'static str,
    },
    /// The reply was not signed with our key (or the server dropped the
    /// connection: what named does with a request whose key it rejects).
    #[error(
        "rndc channel at {addr} did not answer with a valid signature (is the key the one in its controls statement?)"
    )]
    BadAuth { addr: SocketAddr },
    /// The server ran the command and it failed: `err` is named's reason
    /// (`not found`, `already exists`, `permission denied`, ...), `text`
    /// its details.
    #[error("rndc '{command}' failed: {err}{}", if text.is_empty() { String::new() } else { format!(" ({text})") })]
    Failed {
        command: String,
        err: String,
        text: String,
    },
}

impl RndcError {
    /// named's reason, when it ran the command and refused it.
    pub fn server_reason(&self) -> Option<&str> {
        match self {
            RndcError::Failed { err, .. } => Some(err),
            _ => None,
        }
    }
}

/// One value of an isccc table.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Binary(Vec<u8>),
    Table(Vec<(String, Value)>),
    List(Vec<Value>),
}

impl Value {
    fn text(s: &str) -> Value {
        Value::Binary(s.as_bytes().to_vec())
    }

    fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Table(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_text(&self) -> Option<String> {
        match self {
            Value::Binary(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

fn put_table(out: &mut Vec<u8>, kv: &[(String, Value)]) {
    for (k, v) in kv {
        // Keys are ours: short ASCII names.
        out.push(k.len() as u8);
        out.extend_from_slice(k.as_bytes());
        put_value(out, v);
    }
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    let mut body = Vec::new();
    let t = match v {
        Value::Binary(b) => {
            body.extend_from_slice(b);
            TYPE_BINARY
        }
        Value::Table(kv) => {
            put_table(&mut body, kv);
            TYPE_TABLE
        }
        Value::List(items) => {
            for i in items {
                put_value(&mut body, i);
            }
            TYPE_LIST
        }
    };
    out.push(t);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

/// A table's entries, in wire order.
type Entries = Vec<(String, Value)>;

/// Parses table entries until the end of `buf`; also returns where the
/// bytes after a leading `_auth` entry start (what its HMAC covers).
fn read_table(buf: &[u8], depth: u8) -> Option<(Entries, Option<usize>)> {
    let mut r = Reader { buf, pos: 0 };
    let mut kv = Vec::new();
    let mut after_auth = None;
    while !r.done() {
        let klen = usize::from(*r.take(1)?.first()?);
        let key = String::from_utf8_lossy(r.take(klen)?).into_owned();
        let v = read_value(&mut r, depth)?;
        if kv.is_empty() && key == "_auth" {
            after_auth = Some(r.pos);
        }
        kv.push((key, v));
    }
    Some((kv, after_auth))
}

fn read_value(r: &mut Reader<'_>, depth: u8) -> Option<Value> {
    // Replies are a few levels deep; a deeper one is not named's.
    if depth > 8 {
        return None;
    }
    let t = *r.take(1)?.first()?;
    let len = usize::try_from(r.u32()?).ok()?;
    let body = r.take(len)?;
    match t {
        TYPE_BINARY => Some(Value::Binary(body.to_vec())),
        TYPE_TABLE => read_table(body, depth + 1).map(|(kv, _)| Value::Table(kv)),
        TYPE_LIST => {
            let mut lr = Reader { buf: body, pos: 0 };
            let mut items = Vec::new();
            while !lr.done() {
                items.push(read_value(&mut lr, depth + 1)?);
            }
            Some(Value::List(items))
        }
        _ => None,
    }
}

/// The algorithm number isccc puts before an `hsha` signature (BIND's
/// DST algorithm numbers).
fn algorithm_number(alg: TsigAlgorithm) -> u8 {
    match alg {
        TsigAlgorithm::HmacMd5 => 157,
        TsigAlgorithm::HmacSha1 => 161,
        TsigAlgorithm::HmacSha224 => 162,
        TsigAlgorithm::HmacSha256 => 163,
        TsigAlgorithm::HmacSha384 => 164,
        TsigAlgorithm::HmacSha512 => 165,
    }
}

fn secret_bytes(key: &TsigKey) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(key.secret.expose_base64())
        .unwrap_or_default()
}

/// The signature field's value for `signed` (the bytes after `_auth`).
fn signature(key: &TsigKey, signed: &[u8]) -> (&'static str, Vec<u8>) {
    let mac = mac_with(key.algorithm, &secret_bytes(key), &[signed], None);
    let b64 = base64::engine::general_purpose::STANDARD.encode(mac);
    if key.algorithm == TsigAlgorithm::HmacMd5 {
        let mut v = b64.into_bytes();
        v.truncate(HMD5_LEN);
        ("hmd5", v)
    } else {
        let mut v = vec![algorithm_number(key.algorithm)];
        let mut field = b64.into_bytes();
        field.resize(HSHA_LEN, 0);
        v.extend_from_slice(&field);
        ("hsha", v)
    }
}

/// A signed message: version, `_auth`, then `body` (the `_ctrl` and
/// `_data` entries), framed with its length.
fn encode(key: &TsigKey, body: &[(String, Value)]) -> Vec<u8> {
    let mut signed = Vec::new();
    put_table(&mut signed, body);
    let (field, sig) = signature(key, &signed);
    let mut msg = Vec::with_capacity(signed.len() + 128);
    msg.extend_from_slice(&1u32.to_be_bytes());
    put_table(
        &mut msg,
        &[(
            "_auth".into(),
            Value::Table(vec![(field.into(), Value::Binary(sig))]),
        )],
    );
    msg.extend_from_slice(&signed);
    let mut framed = Vec::with_capacity(msg.len() + 4);
    framed.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    framed.extend_from_slice(&msg);
    framed
}

/// Parses a reply (after its frame length) and checks its signature.
fn decode(key: &TsigKey, msg: &[u8]) -> Result<Value, &'static str> {
    let version = msg.get(..4).ok_or("too short")?;
    if version != [0, 0, 0, 1] {
        return Err("unknown version");
    }
    let rest = &msg[4..];
    let (kv, after_auth) = read_table(rest, 0).ok_or("bad table")?;
    let table = Value::Table(kv);
    let start = after_auth.ok_or("unsigned")?;
    let (field, want) = signature(key, &rest[start..]);
    let got = match table.get("_auth").and_then(|a| a.get(field)) {
        Some(Value::Binary(b)) => b,
        _ => return Err("unsigned"),
    };
    // Not secret-dependent timing that matters here (the reply is the
    // server's), but compare whole fields anyway.
    if got.len() != want.len() || got.iter().zip(&want).fold(0u8, |a, (x, y)| a | (x ^ y)) != 0 {
        return Err("bad signature");
    }
    Ok(table)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn request(command: &str, nonce: Option<&str>) -> Vec<(String, Value)> {
    let t = now();
    let mut ctrl = vec![
        (
            "_ser".to_string(),
            Value::text(&rand::random::<u32>().to_string()),
        ),
        ("_tim".to_string(), Value::text(&t.to_string())),
        ("_exp".to_string(), Value::text(&(t + EXPIRY).to_string())),
    ];
    if let Some(n) = nonce {
        ctrl.push(("_nonce".to_string(), Value::text(n)));
    }
    vec![
        ("_ctrl".into(), Value::Table(ctrl)),
        (
            "_data".into(),
            Value::Table(vec![("type".into(), Value::text(command))]),
        ),
    ]
}

/// A control channel, by address and key.
#[derive(Debug, Clone)]
pub struct Client {
    pub addr: SocketAddr,
    key: TsigKey,
    pub timeout: Duration,
}

impl Client {
    pub fn new(addr: SocketAddr, key: TsigKey) -> Self {
        Client {
            addr,
            key,
            timeout: TIMEOUT,
        }
    }

    /// Runs one command (`addzone ...`, `delzone -clean ...`, `status`)
    /// and returns its output text.
    pub async fn command(&self, command: &str) -> Result<String, RndcError> {
        let addr = self.addr;
        let mut stream = match tokio::time::timeout(self.timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => return Err(RndcError::Connect { addr, source }),
            Err(_) => return Err(RndcError::Timeout { addr }),
        };
        let hello = self.exchange(&mut stream, &request("null", None)).await?;
        let nonce = hello
            .get("_ctrl")
            .and_then(|c| c.get("_nonce"))
            .and_then(Value::as_text)
            .ok_or(RndcError::Malformed {
                addr,
                what: "no nonce in the first reply",
            })?;
        let reply = self
            .exchange(&mut stream, &request(command, Some(&nonce)))
            .await?;
        let data = reply.get("_data");
        let field = |k: &str| data.and_then(|d| d.get(k)).and_then(Value::as_text);
        let text = field("text").unwrap_or_default();
        match field("result").as_deref() {
            Some("0") | None if field("err").is_none() => Ok(text),
            _ => Err(RndcError::Failed {
                command: command.split_whitespace().next().unwrap_or("").to_string(),
                err: field("err").unwrap_or_else(|| "failure".into()),
                text: text.trim().to_string(),
            }),
        }
    }

    async fn exchange(
        &self,
        stream: &mut TcpStream,
        body: &[(String, Value)],
    ) -> Result<Value, RndcError> {
        let addr = self.addr;
        let io = |source| RndcError::Io { addr, source };
        let bytes = encode(&self.key, body);
        let round = async {
            stream.write_all(&bytes).await.map_err(io)?;
            let mut len = [0u8; 4];
            if let Err(e) = stream.read_exact(&mut len).await {
                // named closes the connection on a request it cannot
                // authenticate, without a word.
                return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    RndcError::BadAuth { addr }
                } else {
                    io(e)
                });
            }
            let len = u32::from_be_bytes(len) as usize;
            if len > MAX_REPLY {
                return Err(RndcError::Malformed {
                    addr,
                    what: "reply too large",
                });
            }
            let mut buf = vec![0u8; len];
            stream.read_exact(&mut buf).await.map_err(io)?;
            Ok(buf)
        };
        let raw = tokio::time::timeout(self.timeout, round)
            .await
            .map_err(|_| RndcError::Timeout { addr })??;
        decode(&self.key, &raw).map_err(|what| match what {
            "bad signature" | "unsigned" => RndcError::BadAuth { addr },
            what => RndcError::Malformed { addr, what },
        })
    }
}

/// Quotes a string for an rndc command's zone clause (validated names and
/// paths only reach here; the quoting keeps it one token regardless).
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::{KeyName, TsigSecret};

    fn key(alg: TsigAlgorithm) -> TsigKey {
        TsigKey {
            name: KeyName::parse("rndc-key").unwrap(),
            algorithm: alg,
            secret: TsigSecret::from_bytes(&[7u8; 32]).unwrap(),
        }
    }

    #[test]
    fn a_signed_message_reads_back_and_verifies() {
        for alg in [
            TsigAlgorithm::HmacMd5,
            TsigAlgorithm::HmacSha1,
            TsigAlgorithm::HmacSha256,
            TsigAlgorithm::HmacSha512,
        ] {
            let k = key(alg);
            let framed = encode(&k, &request("status", Some("123")));
            let len = u32::from_be_bytes(framed[..4].try_into().unwrap()) as usize;
            assert_eq!(len, framed.len() - 4);
            let v = decode(&k, &framed[4..]).expect("own message verifies");
            assert_eq!(
                v.get("_data").and_then(|d| d.get("type")),
                Some(&Value::text("status"))
            );
            assert_eq!(
                v.get("_ctrl")
                    .and_then(|c| c.get("_nonce"))
                    .and_then(Value::as_text),
                Some("123".into())
            );
        }
    }

    #[test]
    fn the_auth_section_has_isccc_layout() {
        let framed = encode(&key(TsigAlgorithm::HmacSha256), &request("null", None));
        // version, then "_auth" table of 99 bytes holding "hsha" of 89.
        assert_eq!(&framed[4..8], &[0, 0, 0, 1]);
        assert_eq!(&framed[8..14], b"\x05_auth");
        assert_eq!(&framed[14..19], &[TYPE_TABLE, 0, 0, 0, 99]);
        assert_eq!(&framed[19..24], b"\x04hsha");
        assert_eq!(&framed[24..29], &[TYPE_BINARY, 0, 0, 0, 89]);
        assert_eq!(framed[29], 163);
        let md5 = encode(&key(TsigAlgorithm::HmacMd5), &request("null", None));
        assert_eq!(&md5[14..19], &[TYPE_TABLE, 0, 0, 0, 32]);
    }

    #[test]
    fn a_tampered_or_foreign_reply_is_refused() {
        let k = key(TsigAlgorithm::HmacSha256);
        let mut framed = encode(&k, &request("status", None));
        let last = framed.len() - 1;
        framed[last] ^= 1;
        assert_eq!(decode(&k, &framed[4..]).unwrap_err(), "bad signature");
        let framed = encode(&k, &request("status", None));
        let other = TsigKey {
            secret: TsigSecret::from_bytes(&[8u8; 32]).unwrap(),
            ..k
        };
        assert!(decode(&other, &framed[4..]).is_err());
        assert!(decode(&other, &[0, 0, 0, 2]).is_err());
        assert!(decode(&other, &[0, 0, 0, 1, 5, b'_']).is_err());
    }

    #[test]
    fn errors_never_carry_the_secret() {
        let k = key(TsigAlgorithm::HmacSha256);
        let c = Client::new("127.0.0.1:1".parse().unwrap(), k.clone());
        let text = format!("{c:?}");
        assert!(!text.contains(k.secret.expose_base64()), "{text}");
    }

    #[test]
    fn quoting_keeps_one_token() {
        assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
    }
}
