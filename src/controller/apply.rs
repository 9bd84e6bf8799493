//! Writing to the API the one way the operator writes: server-side apply
//! with one field manager, for children and for status, skipped entirely
//! when nothing changed (a no-op apply is still a write request, and a
//! converged cluster must cost no writes).
//!
//! Touches the cluster. Callers hand it whole desired objects built by pure
//! functions; it never builds or inspects key material itself.

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest as _, Sha256};

use super::names::{ANNOTATION_APPLIED_HASH, FIELD_MANAGER};

/// The controller owner reference to `owner` (children are garbage
/// collected with it; `blockOwnerDeletion` keeps foreground deletes honest).
pub fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    owner
        .controller_owner_ref(&())
        .expect("objects from the API always have a name and uid")
}

/// sha256 hex of the canonical JSON of `value` (serde_json sorts nothing,
/// but our builders produce maps as BTreeMaps, so equal input is equal
/// output).
pub fn content_hash<T: Serialize>(value: &T) -> String {
    let bytes = serde_json::to_vec(value).expect("desired objects always serialise");
    hex::encode(Sha256::digest(&bytes))
}

/// Stamps `desired` with the hash of its own content (before stamping).
pub fn stamp<K: Resource + Serialize>(desired: &mut K) -> String {
    let hash = content_hash(desired);
    desired
        .annotations_mut()
        .insert(ANNOTATION_APPLIED_HASH.to_string(), hash.clone());
    hash
}

/// The hash a live child was last applied with.
pub fn applied_hash<K: Resource>(live: &K) -> Option<&str> {
    live.annotations()
        .get(ANNOTATION_APPLIED_HASH)
        .map(String::as_str)
}

/// Server-side apply of a whole object (forced: the operator owns what it
/// sets). Returns the object as the server holds it afterwards.
pub async fn apply<K>(api: &Api<K>, name: &str, desired: &K) -> Result<K, kube::Error>
where
    K: Resource + Serialize + DeserializeOwned + Clone + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(desired),
    )
    .await
}

/// Server-side apply of `status` (a JSON object) on the status subresource.
pub async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    status: serde_json::Value,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug,
{
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
}

/// Now, for a condition's `lastTransitionTime` (kept unless it flips).
pub fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// Applies `desired` unless the cached live object was applied from the
/// same content (its hash annotation) and `same` agrees (for drift the
/// hash cannot see, e.g. a hand-edited ConfigMap). Returns the live object.
pub async fn apply_if_changed<K>(
    client: &Client,
    store: &Store<K>,
    mut desired: K,
    same: impl Fn(&K, &K) -> bool,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let hash = stamp(&mut desired);
    let ns = desired.namespace().unwrap_or_default();
    let name = desired.name_any();
    if let Some(live) = store.get(&ObjectRef::new(&name).within(&ns))
        && applied_hash(live.as_ref()) == Some(hash.as_str())
        && same(&live, &desired)
    {
        return Ok(live.as_ref().clone());
    }
    let live = apply(&Api::namespaced(client.clone(), &ns), &name, &desired).await?;
    tracing::info!(namespace = %ns, kind = %K::kind(&()), name = %name, "applied");
    Ok(live)
}

/// [`apply_if_changed`] for Secrets, whose cache holds metadata only (so
/// only the hash annotation is compared).
pub async fn apply_secret_if_changed(
    client: &Client,
    secrets: &Store<PartialObjectMeta<Secret>>,
    mut desired: Secret,
) -> Result<(), kube::Error> {
    let hash = stamp(&mut desired);
    let ns = desired.namespace().unwrap_or_default();
    let name = desired.name_any();
    if let Some(live) = secrets.get(&ObjectRef::new(&name).within(&ns))
        && applied_hash(live.as_ref()) == Some(hash.as_str())
    {
        return Ok(());
    }
    apply(
        &Api::<Secret>::namespaced(client.clone(), &ns),
        &name,
        &desired,
    )
    .await?;
    tracing::info!(namespace = %ns, kind = "Secret", name = %name, "applied");
    Ok(())
}
