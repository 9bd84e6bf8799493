//! Reads what a BindCluster refers to: the BindTSIGKeys it loads (from the
//! cache) and their material (one Secret read each), the rndc Secret
//! (generated once), and its pods (from the cache).
//!
//! Touches the cluster (Secret reads; one create of the rndc Secret).
//! Returned key material lives only in redacting types.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::Store;
use kube::{Resource as _, ResourceExt as _};

use super::Error;
use super::build::{RndcMaterial, generate_rndc_material, read_rndc_secret, rndc_secret};
use super::validate::default_transfer_key_name;
use crate::api::{BindCluster, BindTSIGKey};
use crate::bind::{TsigAlgorithm, TsigKey};
use crate::controller::bindtsigkey::material;
use crate::controller::context::Context;
use crate::controller::names::{LABEL_CLUSTER, rndc_secret_name};

/// The keys a cluster loads, resolved.
pub struct ClusterKeys {
    /// BindTSIGKey name -> key, for every key the cluster loads.
    pub by_object: BTreeMap<String, TsigKey>,
    /// The key signing transfers and NOTIFY inside the cluster (a loaded
    /// BindTSIGKey, or the operator's generated one).
    pub transfer: TsigKey,
    /// Whether `transfer` is the generated key (it is then not one of
    /// `by_object` and must be added to keys.conf).
    pub transfer_generated: bool,
}

impl ClusterKeys {
    /// Every key keys.conf must hold.
    pub fn all(&self) -> Vec<TsigKey> {
        let mut keys: Vec<TsigKey> = self.by_object.values().cloned().collect();
        if self.transfer_generated {
            keys.push(self.transfer.clone());
        }
        keys
    }
}

/// Whether `key` is loaded by `cluster`: same namespace, and naming the
/// cluster or none (a shared key).
pub fn loads(cluster: &BindCluster, key: &BindTSIGKey) -> bool {
    key.namespace() == cluster.namespace()
        && key.meta().deletion_timestamp.is_none()
        && key
            .spec
            .cluster_ref
            .as_deref()
            .is_none_or(|c| c == cluster.name_any())
}

/// The BindTSIGKeys a cluster loads, by name, from the cache.
pub fn loaded_keys(keys: &Store<BindTSIGKey>, cluster: &BindCluster) -> Vec<Arc<BindTSIGKey>> {
    let mut out: Vec<_> = keys.state().into_iter().filter(|k| loads(cluster, k)).collect();
    out.sort_by_key(|k| k.name_any());
    out
}

/// The cluster's pods (labelled with its name), by name, from the cache.
pub fn cluster_pods(pods: &Store<Pod>, cluster: &BindCluster) -> Vec<Arc<Pod>> {
    let name = cluster.name_any();
    let mut out: Vec<_> = pods
        .state()
        .into_iter()
        .filter(|p| {
            p.namespace() == cluster.namespace()
                && p.labels().get(LABEL_CLUSTER) == Some(&name)
        })
        .collect();
    out.sort_by_key(|p| p.name_any());
    out
}

/// Whether a pod is Ready and not on its way out.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.meta().deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Reads the rndc Secret, creating it with fresh material the first time.
/// Never regenerates an existing one.
pub async fn ensure_rndc_secret(ctx: &Context, cluster: &BindCluster) -> Result<RndcMaterial, Error> {
    let name = rndc_secret_name(&cluster.name_any());
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let kube_err = |source| Error::Kube {
        action: "read",
        object: format!("secret {name}"),
        source,
    };
    if let Some(existing) = api.get_opt(&name).await.map_err(kube_err)? {
        return read_rndc_secret(&existing).ok_or(Error::RndcSecretInvalid { secret: name });
    }
    let material = generate_rndc_material();
    let secret = rndc_secret(cluster, &material.rndc, &material.transfer);
    api.create(&PostParams::default(), &secret)
        .await
        .map_err(|source| Error::Kube {
            action: "create",
            object: format!("secret {name}"),
            source,
        })?;
    tracing::info!(
        namespace = cluster.namespace().unwrap_or_default(),
        cluster = cluster.name_any(),
        secret = %name,
        "generated rndc secret"
    );
    Ok(material)
}

/// Resolves every key the cluster loads and its transfer key. Public for
/// the zone reconcilers (they sign with these keys).
pub async fn cluster_keys(
    ctx: &Context,
    cluster: &BindCluster,
    rndc: &RndcMaterial,
) -> Result<ClusterKeys, Error> {
    let mut by_object = BTreeMap::new();
    for key in loaded_keys(&ctx.stores.keys, cluster) {
        let resolved = material::fetch(&ctx.client, &key).await?;
        by_object.insert(key.name_any(), resolved);
    }
    let transfer_ref = cluster
        .spec
        .catalog
        .as_ref()
        .and_then(|c| c.transfer_key_ref.clone());
    let (transfer, transfer_generated) = match transfer_ref {
        Some(r) => match by_object.get(&r) {
            Some(k) => (k.clone(), false),
            None => return Err(Error::TransferKeyNotFound { key: r }),
        },
        None => (
            TsigKey {
                name: default_transfer_key_name(cluster).map_err(|e| Error::InvalidSpec {
                    message: e.to_string(),
                })?,
                algorithm: TsigAlgorithm::HmacSha256,
                secret: rndc.transfer.clone(),
            },
            true,
        ),
    };
    Ok(ClusterKeys {
        by_object,
        transfer,
        transfer_generated,
    })
}
