//! TSIG (RFC 8945): signing a request and verifying every response to it,
//! including each message of a zone transfer (a chain: each MAC covers
//! the previous one).
//!
//! All six algorithms the CRD admits (hmac-md5, hmac-sha1, hmac-sha224,
//! hmac-sha256, hmac-sha384, hmac-sha512) come from RustCrypto's `hmac`
//! with `md-5`, `sha1` and `sha2`: one code path, compared in constant
//! time. (hickory-proto 0.26 signs only with hmac-sha256/384/512 and
//! reports the other three "not supported for cryptographic operations",
//! so it could not serve a cluster whose key is hmac-sha1 or hmac-md5.)
//!
//! Key material stays in memory: it is decoded from the [`TsigKey`] for
//! each MAC and never formatted; errors name the key, never the secret.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, Mac};

use super::codec::{CLASS_ANY, HEADER_LEN, Reader, Record, TYPE_TSIG, WireName, lower, wire_name};
use crate::bind::{TsigAlgorithm, TsigKey};

/// Seconds of clock difference a signature is valid for (BIND's default).
pub const FUDGE: u16 = 300;

/// Why a response's signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TsigFailure {
    #[error("the response is not signed")]
    Unsigned,
    #[error("the response is signed with another key or algorithm")]
    OtherKey,
    #[error("the response's signature does not verify")]
    BadMac,
    #[error("the response's signature is outside the allowed time window")]
    BadTime,
    #[error("the response's signature record is malformed")]
    Malformed,
}

/// The algorithm's name in TSIG records.
pub fn algorithm_name(alg: TsigAlgorithm) -> &'static str {
    match alg {
        TsigAlgorithm::HmacMd5 => "hmac-md5.sig-alg.reg.int",
        other => other.as_str(),
    }
}

fn secret(key: &TsigKey) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(key.secret.expose_base64())
        .unwrap_or_default()
}

fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]], tag: Option<&[u8]>) -> Vec<u8> {
    let mut m = <M as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    match tag {
        // Constant-time comparison; an empty vector says it failed.
        Some(tag) => {
            if m.verify_slice(tag).is_ok() {
                vec![1]
            } else {
                Vec::new()
            }
        }
        None => m.finalize().into_bytes().to_vec(),
    }
}

pub(crate) fn mac_with(
    alg: TsigAlgorithm,
    key: &[u8],
    parts: &[&[u8]],
    tag: Option<&[u8]>,
) -> Vec<u8> {
    match alg {
        TsigAlgorithm::HmacMd5 => run::<Hmac<md5::Md5>>(key, parts, tag),
        TsigAlgorithm::HmacSha1 => run::<Hmac<sha1::Sha1>>(key, parts, tag),
        TsigAlgorithm::HmacSha224 => run::<Hmac<sha2::Sha224>>(key, parts, tag),
        TsigAlgorithm::HmacSha256 => run::<Hmac<sha2::Sha256>>(key, parts, tag),
        TsigAlgorithm::HmacSha384 => run::<Hmac<sha2::Sha384>>(key, parts, tag),
        TsigAlgorithm::HmacSha512 => run::<Hmac<sha2::Sha512>>(key, parts, tag),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn time48(t: u64) -> [u8; 6] {
    let b = t.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// The TSIG variables (RFC 8945 section 4.3.3) after the message.
fn variables(
    key_name: &[u8],
    alg: &[u8],
    time: u64,
    fudge: u16,
    error: u16,
    other: &[u8],
) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(&lower(key_name));
    v.extend_from_slice(&CLASS_ANY.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(&lower(alg));
    v.extend_from_slice(&time48(time));
    v.extend_from_slice(&fudge.to_be_bytes());
    v.extend_from_slice(&error.to_be_bytes());
    v.extend_from_slice(&(other.len() as u16).to_be_bytes());
    v.extend_from_slice(other);
    v
}

/// Signs an encoded request in place (appends the TSIG record and counts
/// it) and returns the verifier of its responses.
pub fn sign(msg: &mut Vec<u8>, key: &TsigKey) -> Verifier {
    sign_at(msg, key, now())
}

fn sign_at(msg: &mut Vec<u8>, key: &TsigKey, time: u64) -> Verifier {
    let key_name = wire_name(key.name.as_str());
    let alg = wire_name(algorithm_name(key.algorithm));
    let vars = variables(&key_name, &alg, time, FUDGE, 0, &[]);
    let mac = mac_with(key.algorithm, &secret(key), &[msg, &vars], None);
    let id = u16::from_be_bytes([msg[0], msg[1]]);
    let mut rdata = alg.clone();
    rdata.extend_from_slice(&time48(time));
    rdata.extend_from_slice(&FUDGE.to_be_bytes());
    rdata.extend_from_slice(&(mac.len() as u16).to_be_bytes());
    rdata.extend_from_slice(&mac);
    rdata.extend_from_slice(&id.to_be_bytes());
    rdata.extend_from_slice(&0u16.to_be_bytes());
    rdata.extend_from_slice(&0u16.to_be_bytes());
    let rec = Record {
        name: key_name,
        rtype: TYPE_TSIG,
        class: CLASS_ANY,
        ttl: 0,
        rdata,
    };
    let arcount = u16::from_be_bytes([msg[10], msg[11]]) + 1;
    msg[10..12].copy_from_slice(&arcount.to_be_bytes());
    let mut tail = Vec::new();
    rec.write_to(&mut tail);
    msg.extend_from_slice(&tail);
    Verifier {
        key: key.clone(),
        prior: mac,
        first: true,
    }
}

/// The fields of a received TSIG record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsigFields {
    pub key_name: WireName,
    pub algorithm: WireName,
    pub time: u64,
    pub fudge: u16,
    pub mac: Vec<u8>,
    pub original_id: u16,
    pub error: u16,
    pub other: Vec<u8>,
}

/// Reads a TSIG record's rdata.
pub fn fields(rec: &Record) -> Option<TsigFields> {
    let mut r = Reader::new(&rec.rdata);
    let algorithm = r.name().ok()?;
    let hi = u64::from(r.u16().ok()?);
    let lo = u64::from(r.u32().ok()?);
    let fudge = r.u16().ok()?;
    let n = usize::from(r.u16().ok()?);
    let mac = r.bytes(n).ok()?.to_vec();
    let original_id = r.u16().ok()?;
    let error = r.u16().ok()?;
    let n = usize::from(r.u16().ok()?);
    let other = r.bytes(n).ok()?.to_vec();
    Some(TsigFields {
        key_name: rec.name.clone(),
        algorithm,
        time: (hi << 32) | lo,
        fudge,
        mac,
        original_id,
        error,
        other,
    })
}

/// Verifies the responses to one signed request, in order: the first
/// covers the request's MAC and the full TSIG variables, each later one
/// (a transfer's next message) the previous MAC and the timers only.
pub struct Verifier {
    key: TsigKey,
    prior: Vec<u8>,
    first: bool,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// Checks one response: `raw` is the message as received, `tsig` its
    /// TSIG record and where it starts (from [`super::codec::decode`]).
    /// A response carrying a TSIG error (BADKEY, BADSIG, BADTIME) is not
    /// signed by the server (it could not); the caller reports the error
    /// and must not call this.
    pub fn verify(
        &mut self,
        raw: &[u8],
        tsig: Option<&(Record, usize)>,
    ) -> Result<(), TsigFailure> {
        let (rec, start) = tsig.ok_or(TsigFailure::Unsigned)?;
        let f = fields(rec).ok_or(TsigFailure::Malformed)?;
        if lower(&f.key_name) != wire_name(self.key.name.as_str())
            || lower(&f.algorithm) != wire_name(algorithm_name(self.key.algorithm))
        {
            return Err(TsigFailure::OtherKey);
        }
        if raw.len() < HEADER_LEN || *start > raw.len() {
            return Err(TsigFailure::Malformed);
        }
        // The message as it was before the TSIG record was added.
        let mut body = raw[..*start].to_vec();
        body[0..2].copy_from_slice(&f.original_id.to_be_bytes());
        let arcount = u16::from_be_bytes([body[10], body[11]]).saturating_sub(1);
        body[10..12].copy_from_slice(&arcount.to_be_bytes());
        let prior_len = (self.prior.len() as u16).to_be_bytes();
        let tail = if self.first {
            variables(
                &f.key_name,
                &f.algorithm,
                f.time,
                f.fudge,
                f.error,
                &f.other,
            )
        } else {
            let mut t = time48(f.time).to_vec();
            t.extend_from_slice(&f.fudge.to_be_bytes());
            t
        };
        let parts: [&[u8]; 4] = [&prior_len, &self.prior, &body, &tail];
        if f.mac.is_empty()
            || mac_with(self.key.algorithm, &secret(&self.key), &parts, Some(&f.mac)).is_empty()
        {
            return Err(TsigFailure::BadMac);
        }
        if now().abs_diff(f.time) > u64::from(f.fudge) {
            return Err(TsigFailure::BadTime);
        }
        self.prior = f.mac;
        self.first = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::{KeyName, TsigSecret};

    fn key(alg: TsigAlgorithm) -> TsigKey {
        TsigKey {
            name: KeyName::parse("k").unwrap(),
            algorithm: alg,
            secret: TsigSecret::from_bytes(&[7u8; 32]).unwrap(),
        }
    }

    /// RFC 4231 test case 2 ("Jefe"), which every digest in it shares.
    #[test]
    fn hmacs_match_published_vectors() {
        let data: &[&[u8]] = &[b"what do ya want ", b"for nothing?"];
        let hex = |alg| hex::encode(mac_with(alg, b"Jefe", data, None));
        assert_eq!(
            hex(TsigAlgorithm::HmacMd5),
            "750c783e6ab0b503eaa86e310a5db738"
        );
        assert_eq!(
            hex(TsigAlgorithm::HmacSha1),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
        assert_eq!(
            hex(TsigAlgorithm::HmacSha224),
            "a30e01098bc6dbbf45690f3a7e9e6d0f8bbea2a39e6148008fd05e44"
        );
        assert_eq!(
            hex(TsigAlgorithm::HmacSha256),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            mac_with(TsigAlgorithm::HmacSha384, b"Jefe", data, None).len(),
            48
        );
        assert_eq!(
            mac_with(TsigAlgorithm::HmacSha512, b"Jefe", data, None).len(),
            64
        );
    }

    /// A response signed the way a server signs it verifies; one byte
    /// changed, or another key, does not.
    #[test]
    fn verifies_a_server_style_response_and_the_chain() {
        for alg in TsigAlgorithm::ALL {
            let k = key(alg);
            let mut req = vec![0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            let mut v = sign(&mut req, &k);
            assert_eq!(u16::from_be_bytes([req[10], req[11]]), 1);
            let request_mac = v.prior.clone();
            // The server's response: its own header, signed over the
            // request MAC.
            let body = vec![0, 9, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            let t = now();
            let respond = |body: &[u8], prior: &[u8], first: bool| {
                let kn = wire_name("k");
                let an = wire_name(algorithm_name(alg));
                let tail = if first {
                    variables(&kn, &an, t, FUDGE, 0, &[])
                } else {
                    let mut x = time48(t).to_vec();
                    x.extend_from_slice(&FUDGE.to_be_bytes());
                    x
                };
                let len = (prior.len() as u16).to_be_bytes();
                let mac = mac_with(alg, &secret(&k), &[&len, prior, body, &tail], None);
                let mut msg = body.to_vec();
                let mut rdata = an.clone();
                rdata.extend_from_slice(&time48(t));
                rdata.extend_from_slice(&FUDGE.to_be_bytes());
                rdata.extend_from_slice(&(mac.len() as u16).to_be_bytes());
                rdata.extend_from_slice(&mac);
                rdata.extend_from_slice(&[0, 9, 0, 0, 0, 0]);
                let rec = Record {
                    name: kn,
                    rtype: TYPE_TSIG,
                    class: CLASS_ANY,
                    ttl: 0,
                    rdata,
                };
                let start = msg.len();
                msg[11] = 1;
                rec.write_to(&mut msg);
                (msg, (rec, start), mac)
            };
            let (m1, t1, mac1) = respond(&body, &request_mac, true);
            v.verify(&m1, Some(&t1)).unwrap();
            let (m2, t2, _) = respond(&body, &mac1, false);
            v.verify(&m2, Some(&t2)).unwrap();
            let (mut m3, t3, _) = respond(&body, &[1, 2], false);
            assert_eq!(v.verify(&m3, Some(&t3)), Err(TsigFailure::BadMac), "{alg}");
            m3[3] ^= 1;
            assert!(v.verify(&m3, None).is_err());
            let mut other = Verifier {
                key: key(TsigAlgorithm::HmacSha256),
                prior: request_mac,
                first: true,
            };
            if alg != TsigAlgorithm::HmacSha256 {
                assert_eq!(other.verify(&m1, Some(&t1)), Err(TsigFailure::OtherKey));
            }
        }
    }
}
