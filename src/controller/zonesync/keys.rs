//! The TSIG keys a zone needs: the cluster's transfer key (signs catalog
//! updates), each view's key derived from it (signs everything the
//! operator sends to a zone in that view) and the BindTSIGKeys the zone names (its update key, its
//! external primaries' keys), each with its material read from its Secret
//! on demand (never cached). Only the keys the zone names are read, not
//! every key the cluster loads.
//!
//! Touches the cluster (Secret reads, through the BindTSIGKey module's
//! [`material::fetch`]). Errors name the key and Secret, never the material.

use std::sync::Arc;

use kube::ResourceExt as _;

use crate::api::{BindCluster, BindTSIGKey};
use crate::bind::viewkey::view_key;
use crate::bind::{TsigKey, ViewName};
use crate::controller::bindcluster::read::{generated_transfer_key, loads};
use crate::controller::bindtsigkey::material::{self, MaterialError};
use crate::controller::bindtsigkey::names;
use crate::render::validate::LoadedKey;

use super::ZoneContext;

/// Why a key cannot be used yet.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "failed to find the cluster's generated transfer key: BindCluster {cluster} has not created it yet"
    )]
    NoTransferKey { cluster: String },
    #[error("failed to read the cluster's generated transfer key")]
    Generated(#[source] crate::controller::bindcluster::Error),
    #[error("failed to find BindTSIGKey {key} loaded by the cluster")]
    NotLoaded { key: String },
    #[error("failed to use BindTSIGKey {key}: {reason} (see its status)")]
    Refused { key: String, reason: &'static str },
    #[error("failed to derive the key of view {view}: {reason}")]
    ViewKey { view: String, reason: String },
    #[error(transparent)]
    Material(#[from] MaterialError),
}

impl KeyError {
    /// Static category (condition reason).
    pub fn category(&self) -> &'static str {
        match self {
            KeyError::NoTransferKey { .. } => crate::api::REASON_TRANSFER_KEY_NOT_READY,
            KeyError::Generated(_) => crate::api::REASON_TRANSFER_KEY_INVALID,
            KeyError::NotLoaded { .. } => crate::api::REASON_KEY_NOT_FOUND,
            KeyError::Refused { .. } => crate::api::REASON_KEY_FAILED,
            KeyError::ViewKey { .. } => crate::api::REASON_INVALID_SPEC,
            KeyError::Material(e) => e.category(),
        }
    }

    /// An API failure (retry soon) rather than a missing or bad key.
    pub fn is_api(&self) -> bool {
        matches!(self, KeyError::Material(MaterialError::Kube { .. }))
    }
}

/// Keys resolved for one zone.
pub struct ZoneKeys {
    /// The BindTSIGKeys the zone names that its cluster loads, with material.
    pub loaded: Vec<(Arc<BindTSIGKey>, TsigKey)>,
    /// The cluster's transfer key.
    pub transfer: TsigKey,
    /// Each of the cluster's views with its key (derived from `transfer`).
    pub views: Vec<(ViewName, TsigKey)>,
}

impl ZoneKeys {
    /// The key a `*KeyRef` (BindTSIGKey name) names, if loaded.
    pub fn by_object(&self, name: &str) -> Option<&TsigKey> {
        self.loaded
            .iter()
            .find(|(o, _)| o.name_any() == name)
            .map(|(_, k)| k)
    }

    /// The key the operator signs with for a zone in `view` (updates,
    /// catalog membership, AXFR reads) and secondaries transfer it with:
    /// the view's key, so the message lands in that view; the transfer key
    /// outside views (or for a view the cluster does not have).
    pub fn transfer_for(&self, view: Option<&ViewName>) -> &TsigKey {
        view.and_then(|v| self.views.iter().find(|(name, _)| name == v))
            .map_or(&self.transfer, |(_, k)| k)
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

/// Resolves the cluster's transfer key and the BindTSIGKeys named in
/// `refs` that the cluster loads. Keys the cluster does not load are left
/// out (zone validation then names them).
pub async fn resolve(
    ctx: &ZoneContext,
    cluster: &BindCluster,
    refs: &[&str],
) -> Result<ZoneKeys, KeyError> {
    let ns = cluster.namespace().unwrap_or_default();
    // Without spec.catalog.transferKeyRef the cluster reconciler generates
    // the transfer key into an owned Secret; sign with that one.
    let transfer_ref = cluster.transfer_key_ref();
    let mut names: Vec<&str> = refs.to_vec();
    names.extend(transfer_ref);
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
            .filter(|k| loads(cluster, k));
        let Some(obj) = found else {
            continue;
        };
        if let Some((reason, _)) = names::name_problem(&obj, &ctx.base.stores.keys.state()) {
            return Err(KeyError::Refused {
                key: obj.name_any(),
                reason,
            });
        }
        let key = material::fetch(&ctx.base, &obj).await?;
        loaded.push((obj, key));
    }
    let transfer = match transfer_ref {
        Some(transfer_ref) => loaded
            .iter()
            .find(|(o, _)| o.name_any() == transfer_ref)
            .map(|(_, k)| k.clone())
            .ok_or_else(|| KeyError::NotLoaded {
                key: transfer_ref.to_string(),
            })?,
        None => generated_transfer_key(&ctx.base, cluster)
            .await
            .map_err(KeyError::Generated)?
            .ok_or_else(|| KeyError::NoTransferKey {
                cluster: format!("{ns}/{}", cluster.name_any()),
            })?,
    };
    let views = cluster
        .spec
        .views
        .iter()
        .filter_map(|v| ViewName::parse(&v.name).ok())
        .map(|v| {
            view_key(&transfer, &v)
                .map(|k| (v.clone(), k))
                .map_err(|e| KeyError::ViewKey {
                    view: v.to_string(),
                    reason: e.to_string(),
                })
        })
        .collect::<Result<_, _>>()?;
    Ok(ZoneKeys {
        loaded,
        transfer,
        views,
    })
}
