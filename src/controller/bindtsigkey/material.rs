//! Where a BindTSIGKey's material lives and how it becomes a validated
//! [`TsigKey`]: shared by the BindTSIGKey reconciler, the BindCluster
//! reconciler (keys.conf) and the zone reconcilers (signing updates).
//!
//! [`fetch`] reads one Secret; the rest is pure. Errors name the Secret and
//! its key, never the material.

use crate::controller::error::KubeMessage;
use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Client, ResourceExt as _};
use rand::RngCore as _;

use crate::api::{
    BindTSIGKey, DEFAULT_SECRET_KEY, REASON_INVALID_KEY_NAME, REASON_INVALID_SECRET,
    REASON_SECRET_KEY_MISSING, REASON_SECRET_NOT_FOUND, TsigAlgorithm as ApiAlgorithm,
};
use crate::bind::{KeyName, TsigKey, TsigSecret};
use crate::controller::names::generated_tsig_secret_name;
use crate::render::validate as crd;

/// Why a key's material cannot be used. Permanent until the key or its
/// Secret changes, except [`MaterialError::Kube`].
#[derive(Debug, thiserror::Error)]
pub enum MaterialError {
    #[error("failed to find secret {secret} for tsig key {key}")]
    SecretNotFound { key: String, secret: String },
    #[error("failed to find key {data_key} in secret {secret} for tsig key {key}")]
    SecretKeyMissing {
        key: String,
        secret: String,
        data_key: String,
    },
    #[error(
        "failed to read key {data_key} of secret {secret} for tsig key {key}: not base64 key material"
    )]
    InvalidSecret {
        key: String,
        secret: String,
        data_key: String,
    },
    #[error("failed to use tsig key {key}: invalid key name: {reason}")]
    InvalidKeyName { key: String, reason: String },
    #[error(
        "failed to read secret {secret} for tsig key {key}: {}",
        KubeMessage(source)
    )]
    Kube {
        key: String,
        secret: String,
        #[source]
        source: kube::Error,
    },
}

impl MaterialError {
    /// Static category (Event / condition reason).
    pub fn category(&self) -> &'static str {
        match self {
            MaterialError::SecretNotFound { .. } => REASON_SECRET_NOT_FOUND,
            MaterialError::SecretKeyMissing { .. } => REASON_SECRET_KEY_MISSING,
            MaterialError::InvalidSecret { .. } => REASON_INVALID_SECRET,
            MaterialError::InvalidKeyName { .. } => REASON_INVALID_KEY_NAME,
            MaterialError::Kube { .. } => {
                crate::controller::error::Category::KubeApiFailed.as_str()
            }
        }
    }

    pub fn is_transient(&self) -> bool {
        matches!(self, MaterialError::Kube { .. })
    }
}

/// The Secret name and data key holding a key's base64 material:
/// `spec.secretRef`, else the Secret the operator generates.
pub fn secret_location(key: &BindTSIGKey) -> (String, String) {
    match &key.spec.secret_ref {
        Some(r) => (r.name.clone(), r.key.clone()),
        None => (
            generated_tsig_secret_name(&key.name_any()),
            DEFAULT_SECRET_KEY.to_string(),
        ),
    }
}

/// The key's name inside BIND: `spec.keyName`, else metadata.name.
pub fn key_name(key: &BindTSIGKey) -> Result<KeyName, MaterialError> {
    crd::key_name(key).map_err(|e| MaterialError::InvalidKeyName {
        key: key.name_any(),
        reason: e.to_string(),
    })
}

/// Builds the validated key from the Secret that holds its material.
pub fn from_secret(key: &BindTSIGKey, secret: &Secret) -> Result<TsigKey, MaterialError> {
    key_name(key)?;
    let (secret_name, data_key) = secret_location(key);
    let raw = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&data_key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(&data_key))
                .map(|s| s.clone().into_bytes())
        })
        .ok_or_else(|| MaterialError::SecretKeyMissing {
            key: key.name_any(),
            secret: secret_name.clone(),
            data_key: data_key.clone(),
        })?;
    let invalid = || MaterialError::InvalidSecret {
        key: key.name_any(),
        secret: secret_name.clone(),
        data_key: data_key.clone(),
    };
    let text = String::from_utf8(raw).map_err(|_| invalid())?;
    // The name is valid (checked above), so only the material can fail.
    crd::tsig_key(key, &text).map_err(|_| invalid())
}

/// Reads the key's Secret and builds the validated key.
pub async fn fetch(client: &Client, key: &BindTSIGKey) -> Result<TsigKey, MaterialError> {
    let ns = key.namespace().unwrap_or_default();
    let (secret_name, _) = secret_location(key);
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = api
        .get_opt(&secret_name)
        .await
        .map_err(|source| MaterialError::Kube {
            key: key.name_any(),
            secret: secret_name.clone(),
            source,
        })?
        .ok_or_else(|| MaterialError::SecretNotFound {
            key: key.name_any(),
            secret: secret_name.clone(),
        })?;
    from_secret(key, &secret)
}

/// Fresh random key material of the algorithm's size, as Secret data
/// (`secret` = base64 text, which is what BIND and nsupdate take).
pub fn generate_secret_data(alg: ApiAlgorithm) -> BTreeMap<String, ByteString> {
    let mut bytes = vec![0u8; alg.key_len()];
    rand::rng().fill_bytes(&mut bytes);
    let secret = TsigSecret::from_bytes(&bytes).expect("key_len is never zero");
    BTreeMap::from([(
        DEFAULT_SECRET_KEY.to_string(),
        ByteString(secret.expose_base64().as_bytes().to_vec()),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BindTSIGKeySpec, SecretKeyRef};
    use kube::api::ObjectMeta;

    fn key(spec: BindTSIGKeySpec) -> BindTSIGKey {
        let mut k = BindTSIGKey::new("xfer", spec);
        k.metadata.namespace = Some("ns".into());
        k
    }

    #[test]
    fn generated_material_has_the_algorithm_size_and_round_trips() {
        for alg in ApiAlgorithm::ALL {
            let data = generate_secret_data(alg);
            let k = key(BindTSIGKeySpec {
                algorithm: alg,
                ..Default::default()
            });
            let s = Secret {
                metadata: ObjectMeta::default(),
                data: Some(data.clone()),
                ..Default::default()
            };
            let t = from_secret(&k, &s).unwrap();
            use base64::Engine as _;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(t.secret.expose_base64())
                .unwrap();
            assert_eq!(raw.len(), alg.key_len());
            assert_eq!(t.algorithm.as_str(), alg.as_str());
            assert_ne!(generate_secret_data(alg), data, "keys must be random");
        }
    }

    #[test]
    fn errors_name_the_secret_not_the_material() {
        let k = key(BindTSIGKeySpec {
            secret_ref: Some(SecretKeyRef {
                name: "user".into(),
                key: "tsig".into(),
            }),
            ..Default::default()
        });
        assert_eq!(secret_location(&k), ("user".into(), "tsig".into()));
        let s = Secret {
            data: Some(BTreeMap::from([(
                "tsig".to_string(),
                ByteString(b"not base64 c2VjcmV0!!".to_vec()),
            )])),
            ..Default::default()
        };
        let e = from_secret(&k, &s).unwrap_err();
        assert_eq!(e.category(), "InvalidSecret");
        assert!(!e.to_string().contains("c2VjcmV0"), "{e}");
        let e = from_secret(&k, &Secret::default()).unwrap_err();
        assert_eq!(e.category(), "SecretKeyMissing");
        assert_eq!(
            secret_location(&key(BindTSIGKeySpec::default())),
            ("xfer-tsig".into(), "secret".into())
        );
    }
}
