//! The TSIG keys a zone needs: the cluster's transfer key (signs catalog
//! updates) and the BindTSIGKeys the zone names (its update key, its
//! external primaries' keys), each with its material read from its Secret
//! on demand (never cached).
//!
//! Touches the cluster (Secret reads). Errors name the key and Secret, never
//! the material.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use kube::api::Api;

use crate::api::{BindCluster, BindTSIGKey, DEFAULT_SECRET_KEY};
use crate::bind::TsigKey;
use crate::controller::names::generated_tsig_secret_name;
use crate::render::validate::{LoadedKey, tsig_key};

use super::ZoneContext;

/// Why a key cannot be used yet.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "failed to find the cluster's transfer key: BindCluster {cluster} sets no spec.catalog.transferKeyRef"
    )]
    NoTransferKey { cluster: String },
    #[error("failed to find BindTSIGKey {key} loaded by the cluster")]
    NotLoaded { key: String },
    #[error("failed to find secret {secret} holding tsig key {key}")]
    SecretMissing { key: String, secret: String },
    #[error("failed to read tsig key {key} from secret {secret}: {reason}")]
    BadMaterial {
        key: String,
        secret: String,
        reason: String,
    },
    #[error("failed to read secret {secret}: {source}")]
    Kube {
        secret: String,
        #[source]
        source: kube::Error,
    },
}

impl KeyError {
    /// Static category (condition reason).
    pub fn category(&self) -> &'static str {
        match self {
            KeyError::NoTransferKey { .. } => "TransferKeyNotSet",
            KeyError::NotLoaded { .. } => "KeyNotFound",
            KeyError::SecretMissing { .. } => "KeySecretNotFound",
            KeyError::BadMaterial { .. } => "KeySecretInvalid",
            KeyError::Kube { .. } => "KubeApiFailed",
        }
    }
}

/// Keys resolved for one zone.
pub struct ZoneKeys {
    /// The BindTSIGKeys the zone names that its cluster loads, with material.
    pub loaded: Vec<(Arc<BindTSIGKey>, TsigKey)>,
    /// The cluster's transfer key.
    pub transfer: TsigKey,
}

impl ZoneKeys {
    /// The key a `*KeyRef` (BindTSIGKey name) names, if loaded.
    pub fn by_object(&self, name: &str) -> Option<&TsigKey> {
        self.loaded
            .iter()
            .find(|(o, _)| o.name_any() == name)
            .map(|(_, k)| k)
    }

    /// The form [`crate::render::validate::zone_config`] takes.
    pub fn as_loaded(&self) -> Vec<LoadedKey<'_>> {
        self.loaded
            .iter()
            .map(|(o, k)| LoadedKey {
                object: o,
                key: k.clone(),
            })
            .collect()
    }
}

/// Whether `cluster` loads `key` (same namespace, not being deleted, and
/// naming the cluster or none).
pub fn cluster_loads(cluster: &BindCluster, key: &BindTSIGKey) -> bool {
    key.namespace() == cluster.namespace()
        && key.metadata.deletion_timestamp.is_none()
        && key
            .spec
            .cluster_ref
            .as_deref()
            .is_none_or(|c| c == cluster.name_any())
}

/// Reads the material of one BindTSIGKey: `spec.secretRef`, else the Secret
/// the operator generates for it.
pub async fn fetch(ctx: &ZoneContext, key: &BindTSIGKey) -> Result<TsigKey, KeyError> {
    let (secret, data_key) = match &key.spec.secret_ref {
        Some(r) => (r.name.clone(), r.key.clone()),
        None => (
            generated_tsig_secret_name(&key.name_any()),
            DEFAULT_SECRET_KEY.to_string(),
        ),
    };
    let api: Api<Secret> = Api::namespaced(
        ctx.base.client.clone(),
        &key.namespace().unwrap_or_default(),
    );
    let found = api
        .get_opt(&secret)
        .await
        .map_err(|source| KeyError::Kube {
            secret: secret.clone(),
            source,
        })?
        .ok_or_else(|| KeyError::SecretMissing {
            key: key.name_any(),
            secret: secret.clone(),
        })?;
    let bad = |reason: &str| KeyError::BadMaterial {
        key: key.name_any(),
        secret: secret.clone(),
        reason: reason.to_string(),
    };
    let bytes = found
        .data
        .as_ref()
        .and_then(|d| d.get(&data_key))
        .ok_or_else(|| bad(&format!("it has no key {data_key}")))?;
    let text = std::str::from_utf8(&bytes.0).map_err(|_| bad("the material is not text"))?;
    // The validation error names the field, not the value, for secrets.
    tsig_key(key, text.trim()).map_err(|_| bad("the material is not valid base64 key material"))
}

/// Resolves the cluster's transfer key and the BindTSIGKeys named in
/// `refs` that the cluster loads. Keys the cluster does not load are left
/// out (zone validation then names them).
pub async fn resolve(
    ctx: &ZoneContext,
    cluster: &BindCluster,
    refs: &[&str],
) -> Result<ZoneKeys, KeyError> {
    let ns = cluster.namespace().unwrap_or_default();
    let transfer_ref = cluster
        .transfer_key_ref()
        .ok_or_else(|| KeyError::NoTransferKey {
            cluster: format!("{ns}/{}", cluster.name_any()),
        })?;
    let mut names: Vec<&str> = refs.to_vec();
    names.push(transfer_ref);
    names.sort_unstable();
    names.dedup();
    let mut loaded = Vec::new();
    for name in names {
        let found = ctx
            .base
            .stores
            .keys
            .state()
            .into_iter()
            .find(|k| k.namespace().as_deref() == Some(ns.as_str()) && k.name_any() == name)
            .filter(|k| cluster_loads(cluster, k));
        let Some(obj) = found else {
            continue;
        };
        let key = fetch(ctx, &obj).await?;
        loaded.push((obj, key));
    }
    let transfer = loaded
        .iter()
        .find(|(o, _)| o.name_any() == transfer_ref)
        .map(|(_, k)| k.clone())
        .ok_or_else(|| KeyError::NotLoaded {
            key: transfer_ref.to_string(),
        })?;
    Ok(ZoneKeys { loaded, transfer })
}
