//! Reads what a BindCluster refers to: the BindTSIGKeys it loads (from the
//! cache) and their material (one Secret read each), the rndc Secret and,
//! without a transferKeyRef, the transfer-key Secret (both generated once),
//! and how many of its pods are Ready (from the cache, via `controller::pods`).
//!
//! Touches the cluster (Secret reads; one create each of the generated
//! Secrets).
//! Returned key material lives only in redacting types.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource as _, ResourceExt as _};

use super::Error;
use super::build::{
    generate_rndc_material, generate_transfer_material, read_rndc_secret, read_transfer_secret,
    rndc_secret, transfer_secret,
};
use crate::api::{BindCluster, BindTSIGKey};
use crate::bind::TsigKey;
use crate::controller::bindtsigkey::{material, names};
use crate::controller::context::Context;
use crate::controller::names::{pod_ordinal, rndc_secret_name, transfer_secret_name};
use crate::controller::pods::{cluster_pods, pod_ready};
use crate::render::validate::LoadedKey;

/// The keys a cluster loads, resolved: each BindTSIGKey with its key, and
/// the transfer key the cluster generated when it names none.
pub struct ClusterKeys {
    pub loaded: Vec<(Arc<BindTSIGKey>, TsigKey)>,
    /// Set only without `spec.catalog.transferKeyRef`, once the cluster
    /// reconciler generated it.
    pub generated_transfer: Option<TsigKey>,
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

    /// The cluster's transfer key: the one spec.catalog.transferKeyRef
    /// names (if loaded), else the generated one (once it exists).
    pub fn transfer(&self, cluster: &BindCluster) -> Option<&TsigKey> {
        match cluster.transfer_key_ref() {
            Some(r) => self.by_ref(r),
            None => self.generated_transfer.as_ref(),
        }
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

/// How many of the cluster's pods that should exist (ordinal below
/// `spec.replicas`) are Ready: during a scale-down the pods on their way
/// out are not counted, so the cluster never says "3/1 pods ready".
pub fn ready_pod_count(pods: &Store<Pod>, cluster: &BindCluster) -> i32 {
    let name = cluster.name_any();
    let wanted = u32::try_from(cluster.spec.replicas).unwrap_or(0);
    let n = cluster_pods(pods, cluster)
        .iter()
        .filter(|p| pod_ordinal(&name, &p.name_any()).is_some_and(|o| o < wanted))
        .filter(|p| pod_ready(p))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Makes sure the rndc Secret exists, creating it with fresh material the
/// first time. Never regenerates an existing one (named and rndc in the
/// pods read it from the mount; the operator never needs the material).
pub async fn ensure_rndc_secret(ctx: &Context, cluster: &BindCluster) -> Result<(), Error> {
    ensure_generated_secret(
        ctx,
        cluster,
        GeneratedSecret {
            name: rndc_secret_name(&cluster.name_any()),
            what: "rndc",
            usable: |s| read_rndc_secret(s).is_some(),
            fresh: || rndc_secret(cluster, &generate_rndc_material().rndc),
            invalid: |secret| Error::RndcSecretInvalid { secret },
        },
    )
    .await
}

/// Without `spec.catalog.transferKeyRef`, makes sure the cluster's own
/// transfer key exists, generating it the first time; never regenerates
/// it (deleting the Secret is the way to rotate). With a ref, does nothing.
pub async fn ensure_transfer_secret(ctx: &Context, cluster: &BindCluster) -> Result<(), Error> {
    if cluster.transfer_key_ref().is_some() {
        return Ok(());
    }
    ensure_generated_secret(
        ctx,
        cluster,
        GeneratedSecret {
            name: transfer_secret_name(&cluster.name_any()),
            what: "transfer key",
            usable: |s| read_transfer_secret(s).is_some(),
            fresh: || transfer_secret(cluster, generate_transfer_material()),
            invalid: |secret| Error::TransferSecretInvalid { secret },
        },
    )
    .await
}

/// A Secret a cluster generates once and keeps.
struct GeneratedSecret<F> {
    name: String,
    /// For the log line.
    what: &'static str,
    /// Whether an existing Secret holds usable material.
    usable: fn(&Secret) -> bool,
    /// The Secret with fresh material.
    fresh: F,
    /// The error for an existing Secret that is not usable.
    invalid: fn(String) -> Error,
}

async fn ensure_generated_secret<F>(
    ctx: &Context,
    cluster: &BindCluster,
    wanted: GeneratedSecret<F>,
) -> Result<(), Error>
where
    F: FnOnce() -> Secret,
{
    let GeneratedSecret {
        name,
        what,
        usable,
        fresh,
        invalid,
    } = wanted;
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
        return if usable(&existing) {
            Ok(())
        } else {
            Err(invalid(name))
        };
    }
    api.create(&PostParams::default(), &fresh())
        .await
        .map_err(|source| Error::Kube {
            action: "create",
            object: format!("secret {name}"),
            source,
        })?;
    tracing::info!(
        namespace = ns,
        cluster = cluster.name_any(),
        secret = %name,
        "generated {what} secret"
    );
    Ok(())
}

/// The generated transfer key, read from its Secret (None if it does not
/// exist yet). Public for the zone reconcilers of a cluster that names no
/// `transferKeyRef`.
pub async fn generated_transfer_key(
    ctx: &Context,
    cluster: &BindCluster,
) -> Result<Option<TsigKey>, Error> {
    let name = transfer_secret_name(&cluster.name_any());
    let ns = cluster.namespace().unwrap_or_default();
    let Some(secret) = ctx
        .secrets
        .get(&ctx.client, &ctx.stores.secrets, &ns, &name)
        .await
        .map_err(|source| Error::Kube {
            action: "read",
            object: format!("secret {name}"),
            source,
        })?
    else {
        return Ok(None);
    };
    read_transfer_secret(&secret)
        .map(Some)
        .ok_or(Error::TransferSecretInvalid { secret: name })
}

/// Resolves every usable key the cluster loads (one Secret read each; a
/// key with a bad Secret or a reserved or duplicate name is left out), and its
/// generated transfer key when it names none (one more read). Public for
/// the zone reconcilers, which sign with these keys.
pub async fn cluster_keys(ctx: &Context, cluster: &BindCluster) -> Result<ClusterKeys, Error> {
    let mut loaded = Vec::new();
    let all = ctx.stores.keys.state();
    for key in loaded_keys(&ctx.stores.keys, cluster) {
        // A bad key fails alone (its own status says why): keys.conf leaves
        // it out and the cluster's other changes still render. Only the
        // transfer key is needed by the cluster itself.
        let transfer = cluster.transfer_key_ref() == Some(key.name_any().as_str());
        if let Some((reason, message)) = names::name_problem(&key, &all) {
            if transfer {
                return Err(Error::InvalidSpec {
                    message: format!("spec.catalog.transferKeyRef: {message}"),
                });
            }
            tracing::warn!(key = %key.name_any(), reason, "leaving the key out of keys.conf");
            continue;
        }
        match material::fetch(ctx, &key).await {
            Ok(resolved) => loaded.push((key, resolved)),
            Err(e) if transfer || e.is_transient() => return Err(e.into()),
            Err(e) => {
                tracing::warn!(key = %key.name_any(), reason = e.category(), "leaving the key out of keys.conf");
            }
        }
    }
    let generated_transfer = match cluster.transfer_key_ref() {
        Some(_) => None,
        None => generated_transfer_key(ctx, cluster).await?,
    };
    Ok(ClusterKeys {
        loaded,
        generated_transfer,
    })
}
