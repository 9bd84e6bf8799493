//! Per-view TSIG keys, derived from the cluster's transfer key so nothing
//! new is stored. Pure, no I/O.
//!
//! Why: every operator command runs inside the pod against 127.0.0.1, and
//! transfers and NOTIFYs arrive from pod addresses; by address alone they
//! land in the first view whose match-clients fits. Standard BIND
//! multi-view practice steers by key instead: each view's match-clients
//! starts with `key <its key>; !key <every other view key>;`, so a message
//! signed with view V's key always lands in V. The operator signs its
//! updates and reads of a view's zones with that key, and secondaries
//! transfer a view's zones (and the primary NOTIFYs them) with it.
//!
//! The derived secret must never be logged: it is a [`TsigKey`], whose
//! `Debug` redacts it.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::error::ValidationError;
use super::types::{KeyName, TsigAlgorithm, TsigKey, TsigSecret, ViewName};

/// Domain-separation label mixed into every view key.
const LABEL: &[u8] = b"bind-operator view key";

/// The name of view `view`'s key: `<view>.view.<transfer key name>`. Fails
/// only when the result is not a valid key name (too long).
pub fn view_key_name(transfer: &KeyName, view: &ViewName) -> Result<KeyName, ValidationError> {
    KeyName::parse(&format!("{}.view.{}", view.as_str(), transfer.as_str()))
        .map_err(|e| e.with_what("view key name"))
}

/// View `view`'s key: [`view_key_name`], hmac-sha256, secret
/// `sha256(transfer secret bytes || 0 || "bind-operator view key" || 0 || view)`.
/// Deterministic, so every renderer and controller derives the same key.
pub fn view_key(transfer: &TsigKey, view: &ViewName) -> Result<TsigKey, ValidationError> {
    let name = view_key_name(&transfer.name, view)?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(transfer.secret.expose_base64())
        .map_err(|_| ValidationError::new("tsig secret", "<redacted>", "is not valid base64"))?;
    let mut h = Sha256::new();
    h.update(&raw);
    h.update([0u8]);
    h.update(LABEL);
    h.update([0u8]);
    h.update(view.as_str().as_bytes());
    Ok(TsigKey {
        name,
        algorithm: TsigAlgorithm::HmacSha256,
        secret: TsigSecret::from_bytes(&h.finalize())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transfer(secret: &str) -> TsigKey {
        TsigKey {
            name: KeyName::parse("xfer.edge").unwrap(),
            algorithm: TsigAlgorithm::HmacSha512,
            secret: TsigSecret::from_base64(secret).unwrap(),
        }
    }

    fn v(s: &str) -> ViewName {
        ViewName::parse(s).unwrap()
    }

    #[test]
    fn derivation_is_deterministic_and_distinct() {
        let t = transfer("c2VjcmV0LXNlY3JldC1zZWNyZXQ=");
        let a = view_key(&t, &v("internal")).unwrap();
        assert_eq!(a, view_key(&t, &v("internal")).unwrap());
        assert_eq!(a.name.as_str(), "internal.view.xfer.edge");
        assert_eq!(a.algorithm, TsigAlgorithm::HmacSha256);
        let b = view_key(&t, &v("external")).unwrap();
        assert_ne!(a.secret, b.secret);
        assert_ne!(a.name, b.name);
        // Another transfer secret, another view key.
        let other = view_key(&transfer("b3RoZXI="), &v("internal")).unwrap();
        assert_ne!(a.secret, other.secret);
        assert_ne!(a.secret, t.secret);
        // The exact construction (so a change is deliberate): sha256 of
        // "secret-secret-secret" 0 label 0 "internal".
        let mut h = Sha256::new();
        h.update(b"secret-secret-secret\0bind-operator view key\0internal");
        assert_eq!(
            a.secret.expose_base64(),
            base64::engine::general_purpose::STANDARD.encode(h.finalize())
        );
    }

    #[test]
    fn secret_never_prints_and_names_stay_valid() {
        let t = transfer("c2VjcmV0LXNlY3JldC1zZWNyZXQ=");
        let k = view_key(&t, &v("int.v2")).unwrap();
        let shown = format!("{k:?} {k}");
        assert!(!shown.contains(k.secret.expose_base64()), "{shown}");
        assert!(shown.contains("<redacted>"));
        assert_eq!(k.name.as_str(), "int.v2.view.xfer.edge");
        // Too long for a key name: refused, not truncated.
        let long = TsigKey {
            name: KeyName::parse(&format!("{0}.{0}.{0}", "a".repeat(63))).unwrap(),
            ..t
        };
        let err = view_key(&long, &v(&"b".repeat(63))).unwrap_err();
        assert!(!err.to_string().contains("c2VjcmV0"));
    }
}
