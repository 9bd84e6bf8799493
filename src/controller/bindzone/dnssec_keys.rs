//! A signed zone's DNSSEC keys kept outside the primary: named keeps them
//! only in its key directory (the data volume, an emptyDir by default), so
//! a primary rebuilt on an empty volume would sign with new keys and the DS
//! at the parent would no longer match (validating resolvers then fail the
//! zone). The operator copies the key files (`K<zone>.+alg+tag.key`,
//! `.private`, `.state`) into a Secret owned by the BindZone
//! (`<name>-dnssec-keys`, gone with the zone) whenever the key tags the
//! primary serves differ from the ones kept, and writes them back into the
//! key directory before it creates the zone on a primary that lacks it, so
//! named finds them and signs with the same keys.
//!
//! Both BIND 9.18 and 9.20 look for a `dnssec-policy` zone's keys in the
//! key directory (no `key-directory` is set: named's working directory,
//! the data directory) when the zone is loaded, and use keys that match the
//! policy, with the timing their `.state` files hold, instead of making
//! new ones. Files go only there, and only where no file of the name is.
//!
//! Key material is read from the pod and written to the Secret; it is
//! never logged, never in a status, Event or error (the files' `Debug`
//! prints their names). Touches the cluster (the Secret) and the primary
//! pod (exec).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::ObjectRef;

use crate::api::{BindZone, ZoneDnssecStatus};
use crate::bind::ZoneName;
use crate::bind::dnssec::{KeyFile, key_file_tags, policy_signs};
use crate::controller::apply::{apply_secret_if_changed, owner_ref};
use crate::controller::names::{LABEL_MANAGED_BY, MANAGER};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::server::{ServerError, Target};
use crate::controller::zonesync::writes::WriteError;

use super::Error;

/// On the keys Secret: the key tags the primary served when the files
/// were copied (comma-separated): the files are copied again when that
/// changes (a rollover).
pub const ANNOTATION_KEY_TAGS: &str = "bind.unkin.net/dnssec-key-tags";
/// On the keys Secret: the zone (FQDN) its files belong to.
pub const ANNOTATION_ZONE: &str = "bind.unkin.net/zone";

/// The Secret a BindZone's DNSSEC keys are kept in.
pub fn secret_name(zone: &BindZone) -> String {
    format!("{}-dnssec-keys", zone.name_any())
}

fn tags_text(tags: &[u16]) -> String {
    tags.iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether the cached Secret metadata says the Secret is this zone
/// object's (owned by its uid: a Secret of an earlier zone of the same
/// name is not).
fn owned_meta(ctx: &ZoneContext, zone: &BindZone) -> Option<BTreeMap<String, String>> {
    let ns = zone.namespace().unwrap_or_default();
    let meta = ctx
        .base
        .stores
        .secrets
        .get(&ObjectRef::new(&secret_name(zone)).within(&ns))?;
    let uid = zone.metadata.uid.as_deref()?;
    meta.owner_references()
        .iter()
        .any(|o| o.uid == uid)
        .then(|| meta.annotations().clone())
}

/// The zone's kept key files, when the zone signs and a Secret of it
/// holds them for this zone name (read once per Secret version).
pub async fn kept(
    ctx: &ZoneContext,
    zone: &BindZone,
    zname: &ZoneName,
) -> Result<Option<Vec<KeyFile>>, Error> {
    if !zone.spec.dnssec_policy.as_deref().is_some_and(policy_signs) {
        return Ok(None);
    }
    let Some(annotations) = owned_meta(ctx, zone) else {
        return Ok(None);
    };
    if annotations.get(ANNOTATION_ZONE).map(String::as_str) != Some(zname.fqdn().as_str()) {
        return Ok(None);
    }
    let ns = zone.namespace().unwrap_or_default();
    let name = secret_name(zone);
    let secret = ctx
        .base
        .secrets
        .get(&ctx.base.client, &ctx.base.stores.secrets, &ns, &name)
        .await
        .map_err(|source| WriteError {
            action: "read",
            kind: "Secret".into(),
            name: name.clone(),
            source,
        })?;
    let Some(secret) = secret else {
        return Ok(None);
    };
    let files: Vec<KeyFile> = secret
        .data
        .iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = String::from_utf8(v.0.clone()).ok()?;
            KeyFile::parse_name(zname, k, text)
        })
        .collect();
    Ok((!files.is_empty()).then_some(files))
}

/// Puts the kept key files back on the primary before the zone is created
/// there (files already there are left alone).
pub async fn restore(
    target: &Target<'_>,
    zname: &ZoneName,
    files: &[KeyFile],
) -> Result<(), ServerError> {
    let written = target.restore_key_files(zname, files).await?;
    if written > 0 {
        tracing::info!(pod = %target.pod, zone = %zname, files = written, key_tags = ?key_file_tags(files), "restored the zone's DNSSEC keys from its Secret before creating it");
    }
    Ok(())
}

/// Keeps the primary's key files of a signed zone in the zone's Secret
/// when the key tags it serves (`d`) are not the ones kept.
pub async fn keep(
    ctx: &ZoneContext,
    zone: &BindZone,
    target: &Target<'_>,
    zname: &ZoneName,
    d: &ZoneDnssecStatus,
) -> Result<(), Error> {
    if !policy_signs(&d.policy) || !d.signed || d.key_tags.is_empty() {
        return Ok(());
    }
    let tags = tags_text(&d.key_tags);
    let ns = zone.namespace().unwrap_or_default();
    let name = secret_name(zone);
    match owned_meta(ctx, zone) {
        Some(a)
            if a.get(ANNOTATION_KEY_TAGS) == Some(&tags)
                && a.get(ANNOTATION_ZONE) == Some(&zname.fqdn()) =>
        {
            return Ok(());
        }
        Some(_) => {}
        None => {
            if ctx
                .base
                .stores
                .secrets
                .get(&ObjectRef::new(&name).within(&ns))
                .is_some()
            {
                tracing::warn!(namespace = %ns, zone = %zname, secret = %name, "a Secret of that name exists and is not this zone's; its DNSSEC keys are not kept");
                return Ok(());
            }
        }
    }
    let files = target
        .key_files(zname)
        .await
        .map_err(|source| Error::Server {
            zone: zname.to_string(),
            source,
        })?;
    let on_disk = key_file_tags(&files);
    if !d.key_tags.iter().all(|t| on_disk.contains(t)) {
        // Keys served that the key directory does not hold: nothing
        // sound to keep (a key directory elsewhere?); look again later.
        tracing::warn!(pod = %target.pod, zone = %zname, served = ?d.key_tags, files = ?on_disk, "the primary's key directory lacks key files of served DNSKEYs; DNSSEC keys not kept");
        return Ok(());
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some([(LABEL_MANAGED_BY.to_string(), MANAGER.to_string())].into()),
            annotations: Some(
                [
                    (ANNOTATION_KEY_TAGS.to_string(), tags),
                    (ANNOTATION_ZONE.to_string(), zname.fqdn()),
                ]
                .into(),
            ),
            owner_references: Some(vec![owner_ref(zone)]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(
            files
                .iter()
                .map(|f| (f.short_name(), ByteString(f.text.clone().into_bytes())))
                .collect(),
        ),
        ..Default::default()
    };
    apply_secret_if_changed(&ctx.base.client, &ctx.base.stores.secrets, secret)
        .await
        .map_err(|source| WriteError {
            action: "apply",
            kind: "Secret".into(),
            name: name.clone(),
            source,
        })?;
    tracing::info!(namespace = %ns, zone = %zname, secret = %name, key_tags = ?d.key_tags, "kept the zone's DNSSEC keys in its Secret");
    Ok(())
}

/// Drops the zone's keys Secret once its policy is withdrawn (no key is
/// served any more; a policy added again later gets new keys).
pub async fn forget(ctx: &ZoneContext, zone: &BindZone) -> Result<(), Error> {
    if owned_meta(ctx, zone).is_none() {
        return Ok(());
    }
    let ns = zone.namespace().unwrap_or_default();
    let name = secret_name(zone);
    match Api::<Secret>::namespaced(ctx.base.client.clone(), &ns)
        .delete(&name, &DeleteParams::default())
        .await
    {
        Ok(_) => {
            tracing::info!(namespace = %ns, secret = %name, "the zone is unsigned; deleted its DNSSEC keys Secret");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(WriteError {
            action: "delete",
            kind: "Secret".into(),
            name,
            source,
        }
        .into()),
    }
}
