//! Validation from the CRD types into the BIND layer's strict types: which
//! BindTSIGKeys a cluster loads, a BindTSIGKey plus its key material into a
//! [`TsigKey`], a BindCluster into a [`ClusterConfig`], a BindZone into its
//! zone clause (its `spec.updatePolicy` grants in the `grants` submodule),
//! skeleton and typed `spec.records` entries ([`InlineRecord`]),
//! a DNSRecord into the typed record set it asks for ([`ValidRecord`]; both
//! in the `records` submodule), and a BindZone into where it lives on the
//! servers ([`ZonePlacement`], what deleting it needs). Pure: no cluster
//! access, no I/O.
//!
//! This is the one place raw CRD strings are read; nothing after it handles
//! them: the zone's plan, its cleanup and the writers take these values.
//! The reconcilers and the offline `render` command both call it, so they
//! render the same bytes from the same objects. Error messages name the
//! field and never contain key material.
//!
//! A bad record set fails alone: it becomes a [`RecordError`] (a status
//! reason and a message) inside an otherwise valid zone, so the rest of
//! the zone is still served.

use std::net::IpAddr;

use crate::api::{self, BindCluster, BindTSIGKey, BindZone, ZoneType};
use crate::bind::dnssec::{AnchorFields, AnchorKind, TrustAnchor};
use crate::bind::render::{
    ClusterConfig, ConsumedCatalog, DnssecValidation, ExternalSecondary, ForwardZone, View,
};
use crate::bind::types::parse_acl;
use crate::bind::viewkey::view_key_name;
use crate::bind::zone::{
    ExternalPrimary, PolicyName, PrimaryZone, SecondaryZone, Soa, catalog_zone_for, parse_rname,
};
use crate::bind::{
    DomainName, Endpoint, KeyName, TsigAlgorithm, TsigKey, TsigSecret, Ttl, ValidationError,
    ViewName, ZoneName,
};

mod grants;
mod records;

pub use records::{InlineRecord, RecordError, RecordSet, ValidRecord, dns_record, inline_record};

/// The DNS port forwarders are asked on.
const DNS_PORT: u16 = 53;

/// One CRD trust anchor into the BIND layer's type.
fn trust_anchor(a: &api::TrustAnchor) -> Result<TrustAnchor, ValidationError> {
    let kind = match a.type_ {
        api::TrustAnchorType::StaticDs => AnchorKind::StaticDs,
        api::TrustAnchorType::InitialDs => AnchorKind::InitialDs,
        api::TrustAnchorType::StaticKey => AnchorKind::StaticKey,
        api::TrustAnchorType::InitialKey => AnchorKind::InitialKey,
    };
    TrustAnchor::parse(
        &a.name,
        kind,
        &AnchorFields {
            key_tag: a.key_tag,
            algorithm: Some(a.algorithm),
            digest_type: a.digest_type,
            digest: a.digest.as_deref(),
            flags: a.flags,
            public_key: a.public_key.as_deref(),
        },
    )
}

/// Why an object cannot become BIND input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("failed to validate {kind} {name}: {source}")]
    Invalid {
        kind: &'static str,
        name: String,
        #[source]
        source: ValidationError,
    },
    #[error(
        "failed to validate BindCluster {0}: spec.catalog.transferKeyRef is not set, and the transfer key the operator generates for the cluster is not known here; point transferKeyRef at a BindTSIGKey"
    )]
    NoTransferKey(String),
    #[error(
        "failed to validate BindCluster {cluster}: transfer key {key} is not a BindTSIGKey the cluster loads"
    )]
    TransferKeyNotLoaded { cluster: String, key: String },
    #[error(
        "failed to validate BindZone {zone}: {what} key {key} is not a BindTSIGKey the cluster loads"
    )]
    ZoneKeyNotLoaded {
        zone: String,
        what: &'static str,
        key: String,
    },
    #[error(
        "failed to validate BindZone {0}: spec.updateKeyRef is not set; the operator signs its updates with it"
    )]
    NoUpdateKey(String),
}

fn full_name(meta: &kube::api::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn invalid(
    kind: &'static str,
    meta: &kube::api::ObjectMeta,
) -> impl Fn(ValidationError) -> ConfigError {
    let name = full_name(meta);
    move |source| ConfigError::Invalid {
        kind,
        name: name.clone(),
        source,
    }
}

/// The BindTSIGKeys `cluster` loads: same namespace, and `spec.clusterRef`
/// naming it or unset (shared), sorted by name.
pub fn keys_for_cluster<'a>(
    cluster: &BindCluster,
    keys: &'a [BindTSIGKey],
) -> Vec<&'a BindTSIGKey> {
    let ns = cluster.metadata.namespace.as_deref().unwrap_or("default");
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let mut out: Vec<&BindTSIGKey> = keys
        .iter()
        .filter(|k| k.metadata.namespace.as_deref().unwrap_or("default") == ns)
        .filter(|k| k.spec.cluster_ref.as_deref().is_none_or(|c| c == name))
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// The key's name inside BIND: `spec.keyName`, else `metadata.name`.
pub fn key_name(key: &BindTSIGKey) -> Result<KeyName, ConfigError> {
    let raw = key
        .spec
        .key_name
        .as_deref()
        .or(key.metadata.name.as_deref())
        .unwrap_or_default();
    KeyName::parse(raw).map_err(|e| invalid("BindTSIGKey", &key.metadata)(e.at("spec.keyName")))
}

/// The BIND layer's algorithm for the CRD's.
pub fn algorithm(a: api::TsigAlgorithm) -> TsigAlgorithm {
    match a {
        api::TsigAlgorithm::HmacSha256 => TsigAlgorithm::HmacSha256,
        api::TsigAlgorithm::HmacSha384 => TsigAlgorithm::HmacSha384,
        api::TsigAlgorithm::HmacSha512 => TsigAlgorithm::HmacSha512,
        api::TsigAlgorithm::HmacSha224 => TsigAlgorithm::HmacSha224,
        api::TsigAlgorithm::HmacSha1 => TsigAlgorithm::HmacSha1,
        api::TsigAlgorithm::HmacMd5 => TsigAlgorithm::HmacMd5,
    }
}

/// A BindTSIGKey with its base64 key material (from its Secret).
pub fn tsig_key(key: &BindTSIGKey, material_base64: &str) -> Result<TsigKey, ConfigError> {
    let secret = TsigSecret::from_base64(material_base64)
        .map_err(|e| invalid("BindTSIGKey", &key.metadata)(e.at("secret")))?;
    Ok(TsigKey {
        name: key_name(key)?,
        algorithm: algorithm(key.spec.algorithm),
        secret,
    })
}

/// A key the cluster loads, resolved: the object and its validated key.
#[derive(Debug, Clone)]
pub struct LoadedKey<'a> {
    pub object: &'a BindTSIGKey,
    pub key: TsigKey,
}

/// Finds the loaded key a `*KeyRef` (a BindTSIGKey's metadata.name) names.
pub fn find_key<'a>(keys: &'a [LoadedKey<'_>], object_name: &str) -> Option<&'a TsigKey> {
    keys.iter()
        .find(|k| k.object.metadata.name.as_deref() == Some(object_name))
        .map(|k| &k.key)
}

fn ips(
    field: &str,
    items: &[String],
    err: &dyn Fn(ValidationError) -> ConfigError,
) -> Result<Vec<Endpoint>, ConfigError> {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let ip: IpAddr =
                crate::bind::types::parse_ip(s).map_err(|e| err(e.at(&format!("{field}[{i}]"))))?;
            Ok(Endpoint { ip, port: DNS_PORT })
        })
        .collect()
}

/// Validates a BindCluster into render input. `keys` are the keys it loads
/// (see [`keys_for_cluster`]), resolved; `generated_transfer` is the
/// transfer key the operator generated for a cluster whose spec names none
/// (ignored when `spec.catalog.transferKeyRef` is set; loaded alongside
/// `keys`); `primary` is where secondaries reach the primary (the primary
/// Service's ClusterIP:53, or 127.0.0.1 and the primary pod's port locally).
pub fn cluster_config(
    cluster: &BindCluster,
    keys: &[LoadedKey<'_>],
    generated_transfer: Option<&TsigKey>,
    primary: Endpoint,
) -> Result<ClusterConfig, ConfigError> {
    let err = invalid("BindCluster", &cluster.metadata);
    let spec = &cluster.spec;
    let name = full_name(&cluster.metadata);
    let mut all_keys: Vec<TsigKey> = keys.iter().map(|k| k.key.clone()).collect();
    let transfer_key = match cluster.transfer_key_ref() {
        Some(transfer_ref) => find_key(keys, transfer_ref)
            .ok_or_else(|| ConfigError::TransferKeyNotLoaded {
                cluster: name.clone(),
                key: transfer_ref.to_string(),
            })?
            .name
            .clone(),
        None => {
            let generated =
                generated_transfer.ok_or_else(|| ConfigError::NoTransferKey(name.clone()))?;
            all_keys.push(generated.clone());
            generated.name.clone()
        }
    };
    let zone = |field: &str, s: &str| ZoneName::parse(s).map_err(|e| err(e.at(field)));
    let dnssec = match spec.dnssec_validation {
        Some(api::DnssecValidation::Auto) => DnssecValidation::Auto,
        Some(api::DnssecValidation::Yes) => DnssecValidation::Yes,
        Some(api::DnssecValidation::No) => DnssecValidation::No,
        None if spec.recursion => DnssecValidation::Auto,
        None => DnssecValidation::No,
    };
    let trust_anchors = spec
        .trust_anchors
        .iter()
        .enumerate()
        .map(|(i, a)| trust_anchor(a).map_err(|e| err(e.at(&format!("spec.trustAnchors[{i}]")))))
        .collect::<Result<Vec<_>, ConfigError>>()?;
    // named refuses a static root anchor beside its built-in one (9.18 and
    // 9.20 named-checkconf, measured).
    if dnssec == DnssecValidation::Auto
        && let Some(i) = trust_anchors.iter().position(|a| {
            a.name.is_root() && matches!(a.kind, AnchorKind::StaticDs | AnchorKind::StaticKey)
        })
    {
        return Err(err(ValidationError::new(
            "trust anchor",
            ".",
            "a static anchor for the root cannot be used with dnssecValidation auto; use initial-ds or initial-key, or dnssecValidation yes",
        )
        .at(&format!("spec.trustAnchors[{i}]"))));
    }
    // BIND 9.20 will not start with `yes` and no anchors (9.18 would start
    // and validate nothing): refused here, before anything renders.
    if dnssec == DnssecValidation::Yes && trust_anchors.is_empty() {
        return Err(err(ValidationError::new(
            "dnssec validation",
            "yes",
            "needs spec.trustAnchors; use auto for BIND's built-in root trust anchor, or no to not validate",
        )
        .at("spec.dnssecValidation")));
    }
    let forward_zones = spec
        .forward_zones
        .iter()
        .enumerate()
        .map(|(i, f)| {
            Ok(ForwardZone {
                zone: zone(&format!("spec.forwardZones[{i}].zone"), &f.zone)?,
                forwarders: ips(
                    &format!("spec.forwardZones[{i}].forwarders"),
                    &f.forwarders,
                    &err,
                )?,
                forward_only: f.forward_only,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let views = spec
        .views
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let at = |f: &str| format!("spec.views[{i}].{f}");
            Ok(View {
                name: ViewName::parse(&v.name).map_err(|e| err(e.at(&at("name"))))?,
                match_clients: parse_acl(&at("matchClients"), &v.match_clients).map_err(&err)?,
                match_destinations: parse_acl(&at("matchDestinations"), &v.match_destinations)
                    .map_err(&err)?,
                recursion: v.recursion,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let loaded = |field: &str, r: &str| {
        find_key(keys, r).map(|k| k.name.clone()).ok_or_else(|| {
            err(ValidationError::new("key", r, "is not a BindTSIGKey the cluster loads").at(field))
        })
    };
    let endpoint = |field: &str, address: &str, port: u16| {
        let ip = address.parse().map_err(|_| {
            err(ValidationError::new("address", address, "must be an IP address").at(field))
        })?;
        Endpoint::new(ip, port).map_err(|e| err(e.at(field)))
    };
    let external_secondaries = spec
        .external_secondaries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let at = |f: &str| format!("spec.externalSecondaries[{i}].{f}");
            Ok(ExternalSecondary {
                endpoint: endpoint(&at("address"), &e.address, e.port)?,
                key: loaded(&at("keyRef"), &e.key_ref)?,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let catalog_consumers = spec
        .catalog_consumers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = |f: &str| format!("spec.catalogConsumers[{i}].{f}");
            Ok(ConsumedCatalog {
                zone: zone(&at("catalogZone"), &c.catalog_zone)?,
                primaries: c
                    .primaries
                    .iter()
                    .enumerate()
                    .map(|(j, p)| endpoint(&at(&format!("primaries[{j}]")), &p.address, p.port))
                    .collect::<Result<_, _>>()?,
                key: loaded(&at("transferKeyRef"), &c.transfer_key_ref)?,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    Ok(ClusterConfig {
        external_secondaries,
        catalog_consumers,
        recursion: spec.recursion,
        allow_query: parse_acl("spec.allowQuery", &spec.allow_query).map_err(&err)?,
        allow_recursion: parse_acl("spec.allowRecursion", &spec.allow_recursion).map_err(&err)?,
        forwarders: ips("spec.forwarders", &spec.forwarders, &err)?,
        forward_only: spec.forward_only,
        dnssec_validation: dnssec,
        trust_anchors,
        validate_except: spec
            .validate_except
            .iter()
            .enumerate()
            .map(|(i, s)| zone(&format!("spec.validateExcept[{i}]"), s))
            .collect::<Result<_, _>>()?,
        forward_zones,
        views,
        catalog_zone: zone("spec.catalog.zoneName", &cluster.catalog_zone_name())?,
        transfer_key,
        primary_endpoint: primary,
        keys: all_keys,
    })
}

/// A BindZone, validated: what the server needs to serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneConfig {
    Primary(Box<PrimaryZoneConfig>),
    Secondary(SecondaryZone),
}

/// A primary zone: its clause, the skeleton inputs and its `spec.records`
/// entries, each validated on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryZoneConfig {
    pub clause: PrimaryZone,
    pub soa: Soa,
    pub default_ttl: Ttl,
    /// Apex NS targets (`spec.nameservers`; empty: the SOA MNAME).
    pub nameservers: Vec<DomainName>,
    /// `spec.records`, one entry each, in order.
    pub records: Vec<InlineRecord>,
    /// Whether the zone is a catalog member.
    pub catalog: bool,
}

/// Validates a BindZone. `keys` are the keys its cluster loads; `transfer_key`
/// the cluster's transfer key (a zone in a view transfers with the view's
/// key derived from it instead, see [`crate::bind::viewkey`]). A bad
/// `spec.records` entry does not fail the zone: it is an [`InlineRecord`]
/// holding its error, refused alone by the plan.
///
/// `cluster_external` is the cluster's spec.externalSecondaries, which the
/// zone's own list replaces when set.
pub fn zone_config(
    zone: &BindZone,
    keys: &[LoadedKey<'_>],
    transfer_key: &KeyName,
    cluster_external: &[api::ExternalSecondary],
) -> Result<ZoneConfig, ConfigError> {
    let err = invalid("BindZone", &zone.metadata);
    let spec = &zone.spec;
    let name = ZoneName::parse(&spec.zone_name).map_err(|e| err(e.at("spec.zoneName")))?;
    let view = spec
        .view
        .as_deref()
        .map(|v| ViewName::parse(v).map_err(|e| err(e.at("spec.view"))))
        .transpose()?;
    let allow_transfer = parse_acl("spec.allowTransfer", &spec.allow_transfer).map_err(&err)?;
    let zone_key = |what: &'static str, r: &str| {
        find_key(keys, r)
            .cloned()
            .ok_or_else(|| ConfigError::ZoneKeyNotLoaded {
                zone: full_name(&zone.metadata),
                what,
                key: r.to_string(),
            })
    };
    if spec.type_ == ZoneType::Secondary {
        let primaries = spec
            .primaries
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let ip = crate::bind::types::parse_ip(&p.address)
                    .map_err(|e| err(e.at(&format!("spec.primaries[{i}].address"))))?;
                let endpoint = Endpoint::new(ip, p.port)
                    .map_err(|e| err(e.at(&format!("spec.primaries[{i}].port"))))?;
                let key = p
                    .key_ref
                    .as_deref()
                    .map(|r| zone_key("primary", r).map(|k| k.name))
                    .transpose()?;
                Ok(ExternalPrimary { endpoint, key })
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        return Ok(ZoneConfig::Secondary(SecondaryZone {
            zone: name,
            view,
            primaries,
            allow_transfer,
        }));
    }
    let update_ref = spec
        .update_key_ref
        .as_deref()
        .ok_or_else(|| ConfigError::NoUpdateKey(full_name(&zone.metadata)))?;
    let update_key = zone_key("update", update_ref)?.name;
    let ttl = |field: &str, v: u32| Ttl::new(i64::from(v)).map_err(|e| err(e.at(field)));
    let nameservers = spec
        .nameservers
        .iter()
        .enumerate()
        .map(|(i, n)| {
            DomainName::resolve_target(n, &name)
                .map_err(|e| err(e.at(&format!("spec.nameservers[{i}]"))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut soa = Soa::defaults_for(&name);
    // MNAME unset: the first of spec.nameservers (what the CRD promises),
    // else `ns1` in the zone.
    if let Some(m) = &spec.soa.mname {
        soa.mname =
            DomainName::resolve_target(m, &name).map_err(|e| err(e.at("spec.soa.mname")))?;
    } else if let Some(first) = nameservers.first() {
        soa.mname = first.clone();
    }
    if let Some(r) = &spec.soa.rname {
        soa.rname = parse_rname(r, &name).map_err(|e| err(e.at("spec.soa.rname")))?;
    }
    soa.refresh = ttl("spec.soa.refresh", spec.soa.refresh)?;
    soa.retry = ttl("spec.soa.retry", spec.soa.retry)?;
    soa.expire = ttl("spec.soa.expire", spec.soa.expire)?;
    soa.minimum = ttl("spec.soa.minimum", spec.soa.minimum)?;
    let default_ttl = ttl("spec.defaultTTL", spec.default_ttl)?;
    let records = spec
        .records
        .iter()
        .map(|r| inline_record(&name, r, default_ttl))
        .collect();
    let dnssec_policy = spec
        .dnssec_policy
        .as_deref()
        .map(|p| PolicyName::parse(p).map_err(|e| err(e.at("spec.dnssecPolicy"))))
        .transpose()?;
    let grants = spec
        .update_policy
        .iter()
        .enumerate()
        .map(|(i, g)| grants::update_grant(&name, i, g, &zone_key).map_err(|e| e.into_config(&err)))
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let (external_list, external_field) = match &spec.external_secondaries {
        Some(own) => (own.as_slice(), "spec.externalSecondaries"),
        None => (cluster_external, "cluster spec.externalSecondaries"),
    };
    let external_secondaries = external_list
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let at = format!("{external_field}[{i}]");
            let ip = e.address.parse().map_err(|_| {
                err(ValidationError::new("address", &e.address, "must be an IP address").at(&at))
            })?;
            Ok(ExternalSecondary {
                endpoint: Endpoint::new(ip, e.port).map_err(|x| err(x.at(&at)))?,
                key: zone_key("external secondary", &e.key_ref)?.name,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let zone_transfer_key = match &view {
        Some(v) => view_key_name(transfer_key, v).map_err(|e| err(e.at("spec.view")))?,
        None => transfer_key.clone(),
    };
    Ok(ZoneConfig::Primary(Box::new(PrimaryZoneConfig {
        clause: PrimaryZone {
            zone: name,
            view,
            update_key,
            transfer_key: zone_transfer_key,
            allow_transfer,
            also_notify: Vec::new(),
            dnssec_policy,
            external_secondaries,
            notify_override: spec.external_secondaries.is_some(),
            grants,
        },
        soa,
        default_ttl,
        nameservers,
        records,
        catalog: spec.catalog,
    })))
}

/// Where a BindZone's spec places the zone on its cluster's servers: what
/// deleting it needs (no keys, nothing else of the spec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZonePlacement {
    pub zone: ZoneName,
    /// `spec.view`. A view that does not validate is `None`: the zone was
    /// never placed in it (the applied annotation says where it was).
    pub view: Option<ViewName>,
    pub type_: ZoneType,
    /// The catalog the spec makes the zone a member of (`spec.catalog`:
    /// the cluster's, or its view's): `None` when not a member or when the
    /// cluster's catalog name does not validate.
    pub catalog: Option<ZoneName>,
}

/// Validates where a BindZone lives on `cluster`. Fails only on a zone
/// name that does not validate: such a zone was never placed anywhere.
pub fn zone_placement(
    zone: &BindZone,
    cluster: &BindCluster,
) -> Result<ZonePlacement, ConfigError> {
    let spec = &zone.spec;
    let zname = ZoneName::parse(&spec.zone_name)
        .map_err(|e| invalid("BindZone", &zone.metadata)(e.at("spec.zoneName")))?;
    let view = spec.view.as_deref().and_then(|v| ViewName::parse(v).ok());
    let catalog = spec
        .catalog
        .then(|| ZoneName::parse(&cluster.catalog_zone_name()).ok())
        .flatten()
        .and_then(|base| catalog_zone_for(&base, view.as_ref()).ok());
    Ok(ZonePlacement {
        zone: zname,
        view,
        type_: spec.type_,
        catalog,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone() -> ZoneName {
        ZoneName::parse("example.com").unwrap()
    }

    #[test]
    fn a_placement_needs_only_a_valid_zone_name() {
        let mut cluster = BindCluster::new("c", Default::default());
        cluster.metadata.namespace = Some("ns".into());
        let mut z: BindZone = serde_json::from_value(serde_json::json!({
            "apiVersion": "bind.unkin.net/v1alpha1",
            "kind": "BindZone",
            "metadata": {"name": "z"},
            "spec": {
                "clusterRef": "c", "zoneName": "example.com", "view": "internal",
                "catalog": true, "updateKeyRef": "upd",
            },
        }))
        .unwrap();
        z.metadata.namespace = Some("ns".into());
        let p = zone_placement(&z, &cluster).unwrap();
        assert_eq!(p.zone, zone());
        assert_eq!(p.view.as_ref().map(ViewName::as_str), Some("internal"));
        let base = ZoneName::parse(&cluster.catalog_zone_name()).unwrap();
        assert_eq!(
            p.catalog,
            Some(catalog_zone_for(&base, p.view.as_ref()).unwrap())
        );
        z.spec.view = Some("not a view\"".into());
        assert_eq!(zone_placement(&z, &cluster).unwrap().view, None);
        z.spec.zone_name = "bad zone\"".into();
        let e = zone_placement(&z, &cluster).unwrap_err().to_string();
        assert!(e.contains("spec.zoneName"), "{e}");
    }

    fn primary_zone(spec: serde_json::Value) -> PrimaryZoneConfig {
        let key: BindTSIGKey = serde_json::from_value(serde_json::json!({
            "apiVersion": "bind.unkin.net/v1alpha1",
            "kind": "BindTSIGKey",
            "metadata": {"name": "upd", "namespace": "ns"},
            "spec": {"clusterRef": "c"},
        }))
        .unwrap();
        let loaded = [LoadedKey {
            object: &key,
            key: tsig_key(&key, "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM0NTY3").unwrap(),
        }];
        let z: BindZone = serde_json::from_value(serde_json::json!({
            "apiVersion": "bind.unkin.net/v1alpha1",
            "kind": "BindZone",
            "metadata": {"name": "z", "namespace": "ns"},
            "spec": spec,
        }))
        .unwrap();
        match zone_config(&z, &loaded, &loaded[0].key.name, &[]).unwrap() {
            ZoneConfig::Primary(p) => *p,
            ZoneConfig::Secondary(_) => panic!("a primary zone"),
        }
    }

    #[test]
    fn soa_mname_defaults_to_the_first_nameserver_as_the_crd_says() {
        let base = serde_json::json!({
            "clusterRef": "c", "zoneName": "example.com", "updateKeyRef": "upd",
        });
        let mut with_ns = base.clone();
        with_ns["nameservers"] = serde_json::json!(["edge-a.example.net.", "ns2"]);
        let p = primary_zone(with_ns.clone());
        assert_eq!(p.soa.mname.to_string(), "edge-a.example.net.");
        // A relative first nameserver resolves in the zone.
        with_ns["nameservers"] = serde_json::json!(["dns1", "ns2"]);
        assert_eq!(
            primary_zone(with_ns.clone()).soa.mname.to_string(),
            "dns1.example.com."
        );
        // An explicit mname still wins; no nameservers: ns1 in the zone.
        with_ns["soa"] = serde_json::json!({"mname": "master.example.org."});
        assert_eq!(
            primary_zone(with_ns).soa.mname.to_string(),
            "master.example.org."
        );
        assert_eq!(primary_zone(base).soa.mname.to_string(), "ns1.example.com.");
    }
}
