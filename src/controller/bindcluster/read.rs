//! Reads what a BindCluster refers to: the BindTSIGKeys it loads (from the
//! cache) and their material (one Secret read each), the rndc Secret
//! (generated once), and its pods (from the cache).
//!
//! Touches the cluster (Secret reads; one create of the rndc Secret).
//! Returned key material lives only in redacting types.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource as _, ResourceExt as _};

use super::Error;
use super::build::{generate_rndc_material, read_rndc_secret, rndc_secret};
use crate::api::{BindCluster, BindTSIGKey};
use crate::bind::TsigKey;
use crate::controller::bindtsigkey::material;
use crate::controller::context::Context;
use crate::controller::names::{LABEL_CLUSTER, rndc_secret_name};
use crate::render::validate::LoadedKey;

/// The keys a cluster loads, resolved: each BindTSIGKey with its key.
pub struct ClusterKeys {
    pub loaded: Vec<(Arc<BindTSIGKey>, TsigKey)>,
}

impl ClusterKeys {
    /// The form the shared validation takes.
    pub fn as_loaded(&self) -> Vec<LoadedKey<'_>> {
        self.loaded
            .iter()
            .map(|(object, key)| LoadedKey {
                object: object.as_ref(),
                key: key.clone(),
            })
            .collect()
    }

    /// The key a `*KeyRef` (a BindTSIGKey's name) names, if loaded.
    pub fn by_ref(&self, object_name: &str) -> Option<&TsigKey> {
        self.loaded
            .iter()
            .find(|(o, _)| o.name_any() == object_name)
            .map(|(_, k)| k)
    }

    /// The cluster's transfer key (spec.catalog.transferKeyRef), if loaded.
    pub fn transfer(&self, cluster: &BindCluster) -> Option<&TsigKey> {
        self.by_ref(cluster.transfer_key_ref()?)
    }
}

/// Whether `key` is loaded by `cluster`: same namespace, naming the cluster
/// or none (a shared key), and not being deleted.
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
    let mut out: Vec<_> = keys
        .state()
        .into_iter()
        .filter(|k| loads(cluster, k))
        .collect();
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
            p.namespace() == cluster.namespace() && p.labels().get(LABEL_CLUSTER) == Some(&name)
        })
        .collect();
    out.sort_by_key(|p| p.name_any());
    out
}

/// How many of the cluster's pods are Ready.
pub fn ready_pod_count(pods: &Store<Pod>, cluster: &BindCluster) -> i32 {
    let n = cluster_pods(pods, cluster)
        .iter()
        .filter(|p| pod_ready(p))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
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

/// Makes sure the rndc Secret exists, creating it with fresh material the
/// first time. Never regenerates an existing one (named and rndc in the
/// pods read it from the mount; the operator never needs the material).
pub async fn ensure_rndc_secret(ctx: &Context, cluster: &BindCluster) -> Result<(), Error> {
    let name = rndc_secret_name(&cluster.name_any());
    let ns = cluster.namespace().unwrap_or_default();
    if ctx
        .stores
        .secrets
        .get(&ObjectRef::new(&name).within(&ns))
        .is_some()
    {
        return Ok(());
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let existing = api.get_opt(&name).await.map_err(|source| Error::Kube {
        action: "read",
        object: format!("secret {name}"),
        source,
    })?;
    if let Some(existing) = existing {
        return read_rndc_secret(&existing)
            .map(|_| ())
            .ok_or(Error::RndcSecretInvalid { secret: name });
    }
    let material = generate_rndc_material();
    api.create(
        &PostParams::default(),
        &rndc_secret(cluster, &material.rndc),
    )
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
    Ok(())
}

/// Resolves every key the cluster loads (one Secret read each). Public for
/// the zone reconcilers, which sign with these keys.
pub async fn cluster_keys(ctx: &Context, cluster: &BindCluster) -> Result<ClusterKeys, Error> {
    let mut loaded = Vec::new();
    for key in loaded_keys(&ctx.stores.keys, cluster) {
        let resolved = material::fetch(&ctx.client, &key).await?;
        loaded.push((key, resolved));
    }
    Ok(ClusterKeys { loaded })
}
