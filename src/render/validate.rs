//! Validation from the CRD types into the BIND layer's strict types: which
//! BindTSIGKeys a cluster loads, a BindTSIGKey plus its key material into a
//! [`TsigKey`], a BindCluster into a [`ClusterConfig`], a BindZone into its
//! zone clause, skeleton and typed `spec.records` entries ([`InlineRecord`]),
//! a DNSRecord into the typed record set it asks for ([`ValidRecord`]), and
//! a BindZone into where it lives on the servers ([`ZonePlacement`], what
//! deleting it needs). Pure: no cluster access, no I/O.
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

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{self, BindCluster, BindTSIGKey, BindZone, DNSRecord, Phase, ZoneType};
use crate::api::{REASON_APEX_NS_UNSUPPORTED, REASON_INVALID_RECORD, REASON_TOO_MANY_VALUES};
use crate::bind::dnssec::{AnchorFields, AnchorKind, TrustAnchor};
use crate::bind::nsupdate::{BatchError, RrsetChange, check_change};
use crate::bind::render::{ClusterConfig, DnssecValidation, ForwardZone, View};
use crate::bind::types::parse_acl;
use crate::bind::viewkey::view_key_name;
use crate::bind::zone::{
    ExternalPrimary, PolicyName, PrimaryZone, SecondaryZone, Soa, catalog_zone_for, parse_rname,
};
use crate::bind::{
    DomainName, Endpoint, KeyName, Rdata, RecordType, TsigAlgorithm, TsigKey, TsigSecret, Ttl,
    ValidationError, ViewName, ZoneName,
};

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
    Ok(ClusterConfig {
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

/// One RRset a user asks for, validated: the owner resolved against the
/// zone, the rdata parsed (duplicates collapse, as in DNS), and the limits
/// one RRset must meet on its own checked (value count, message size).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordSet {
    pub name: DomainName,
    pub rtype: RecordType,
    pub ttl: Ttl,
    pub values: BTreeSet<Rdata>,
}

impl RecordSet {
    /// The RRset's identity: owner name and type.
    pub fn key(&self) -> (DomainName, RecordType) {
        (self.name.clone(), self.rtype)
    }
}

/// Why a record set is refused: a status reason and a message naming the
/// field (relative to the record: `name`, `ttl`, `values[1]`, or `spec.`
/// in front for a DNSRecord).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub reason: &'static str,
    pub message: String,
}

impl RecordError {
    fn invalid(e: ValidationError) -> RecordError {
        RecordError {
            reason: REASON_INVALID_RECORD,
            message: e.to_string(),
        }
    }
}

/// The message of a record set addressing the zone's apex NS RRset.
const APEX_NS_MESSAGE: &str = "the apex NS RRset is converged per rdata from BindZone.spec.nameservers (BIND ignores an RRset-wide delete at a zone apex)";

/// One `spec.records` entry of a primary BindZone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InlineRecord {
    /// An ordinary record set, or why it cannot be served.
    Rrset(Result<RecordSet, RecordError>),
    /// An apex NS entry: older manifests published the nameservers this
    /// way; it feeds the apex NS when `spec.nameservers` is empty. What
    /// validated is kept, the rest is in `errors`.
    ApexNs {
        ttl: Option<Ttl>,
        names: Vec<DomainName>,
        errors: Vec<RecordError>,
    },
}

/// The raw fields of a record set (a DNSRecord's spec or a `spec.records`
/// entry); `at` prefixes field paths in messages.
struct RawSet<'a> {
    at: &'a str,
    name: &'a str,
    rtype: api::RecordType,
    ttl: Option<u32>,
    values: &'a [String],
}

fn parse_type(raw: &RawSet<'_>) -> Result<RecordType, RecordError> {
    raw.rtype
        .as_str()
        .parse::<RecordType>()
        .map_err(|e| RecordError::invalid(e.at(&format!("{}type", raw.at))))
}

fn parse_ttl(raw: &RawSet<'_>, default_ttl: Ttl) -> Result<Ttl, RecordError> {
    match raw.ttl {
        Some(t) => Ttl::new(i64::from(t))
            .map_err(|e| RecordError::invalid(e.at(&format!("{}ttl", raw.at)))),
        None => Ok(default_ttl),
    }
}

/// Validates one record set in `zone`. The apex NS RRset is refused (it
/// converges from `spec.nameservers`); so is anything the nsupdate batch
/// builder would refuse for this RRset alone, with the same reason.
fn record_set(
    zone: &ZoneName,
    raw: &RawSet<'_>,
    default_ttl: Ttl,
) -> Result<RecordSet, RecordError> {
    let at = raw.at;
    let rtype = parse_type(raw)?;
    let name = DomainName::resolve(raw.name, zone)
        .map_err(|e| RecordError::invalid(e.at(&format!("{at}name"))))?;
    if rtype == RecordType::Ns && name == *zone.as_domain() {
        return Err(RecordError {
            reason: REASON_APEX_NS_UNSUPPORTED,
            message: APEX_NS_MESSAGE.into(),
        });
    }
    let ttl = parse_ttl(raw, default_ttl)?;
    let values = raw
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Rdata::parse(rtype, v, zone)
                .map_err(|e| RecordError::invalid(e.at(&format!("{at}values[{i}]"))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let change = RrsetChange::Replace {
        name,
        rtype,
        ttl,
        values,
    };
    check_change(zone, &change).map_err(|e| RecordError {
        reason: match e {
            BatchError::TooManyValues { .. } => REASON_TOO_MANY_VALUES,
            BatchError::ApexNsRecord { .. } => REASON_APEX_NS_UNSUPPORTED,
            _ => REASON_INVALID_RECORD,
        },
        message: e.to_string(),
    })?;
    let RrsetChange::Replace {
        name,
        rtype,
        ttl,
        values,
    } = change
    else {
        unreachable!("built as a replace above")
    };
    Ok(RecordSet {
        name,
        rtype,
        ttl,
        values: values.into_iter().collect(),
    })
}

/// Whether a record set addresses the zone's apex NS RRset.
fn is_apex_ns(zone: &ZoneName, raw: &RawSet<'_>) -> bool {
    parse_type(raw).is_ok_and(|t| t == RecordType::Ns)
        && DomainName::resolve(raw.name, zone).is_ok_and(|n| n == *zone.as_domain())
}

/// Validates one `spec.records` entry of a primary zone (field paths in
/// its messages are relative to the entry). [`zone_config`] runs it on
/// every entry.
pub fn inline_record(zone: &ZoneName, r: &api::ZoneRecord, default_ttl: Ttl) -> InlineRecord {
    let raw = RawSet {
        at: "",
        name: &r.name,
        rtype: r.type_,
        ttl: r.ttl,
        values: &r.values,
    };
    if !is_apex_ns(zone, &raw) {
        return InlineRecord::Rrset(record_set(zone, &raw, default_ttl));
    }
    let mut errors = Vec::new();
    let ttl = match raw.ttl.map(|_| parse_ttl(&raw, default_ttl)).transpose() {
        Ok(t) => t,
        Err(e) => {
            errors.push(e);
            None
        }
    };
    let mut names = Vec::new();
    for (j, v) in r.values.iter().enumerate() {
        match DomainName::resolve_target(v, zone) {
            Ok(n) => names.push(n),
            Err(e) => errors.push(RecordError::invalid(e.at(&format!("values[{j}]")))),
        }
    }
    InlineRecord::ApexNs { ttl, names, errors }
}

/// A DNSRecord validated against its zone: the record set it asks for,
/// and what its metadata and status tell the zone's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidRecord {
    /// metadata.name (same namespace as the zone).
    pub object_name: String,
    pub created: Option<Time>,
    /// It carries the operator's finalizer: only then may it be written
    /// (its delete could not be guaranteed otherwise).
    pub managed: bool,
    /// It is being deleted.
    pub deleting: bool,
    /// The RRset its status names: written there once served, kept while
    /// the record waits for its zone.
    pub status_key: Option<(DomainName, RecordType)>,
    /// The status reason while its status is in Error.
    pub error_reason: Option<String>,
    /// `spec`, validated (field paths start with `spec.`).
    pub set: Result<RecordSet, RecordError>,
}

/// Validates a DNSRecord in `zone` (its BindZone's validated name) with the
/// zone's default TTL; `managed` says whether it carries the operator's
/// finalizer.
pub fn dns_record(
    record: &DNSRecord,
    zone: &ZoneName,
    default_ttl: Ttl,
    managed: bool,
) -> ValidRecord {
    let spec = &record.spec;
    let raw = RawSet {
        at: "spec.",
        name: &spec.name,
        rtype: spec.type_,
        ttl: spec.ttl,
        values: &spec.values,
    };
    let status = record.status.as_ref();
    ValidRecord {
        object_name: record.metadata.name.clone().unwrap_or_default(),
        created: record.metadata.creation_timestamp.clone(),
        managed,
        deleting: record.metadata.deletion_timestamp.is_some(),
        status_key: status.and_then(|s| {
            let name = DomainName::parse_absolute(s.fqdn.as_deref()?).ok()?;
            let rtype: RecordType = s.record_type?.as_str().parse().ok()?;
            Some((name, rtype))
        }),
        error_reason: status
            .filter(|s| s.phase == Some(Phase::Error))
            .and_then(|s| s.reason.clone()),
        set: record_set(zone, &raw, default_ttl),
    }
}

/// Validates a BindZone. `keys` are the keys its cluster loads; `transfer_key`
/// the cluster's transfer key (a zone in a view transfers with the view's
/// key derived from it instead, see [`crate::bind::viewkey`]). A bad
/// `spec.records` entry does not fail the zone: it is an [`InlineRecord`]
/// holding its error, refused alone by the plan.
pub fn zone_config(
    zone: &BindZone,
    keys: &[LoadedKey<'_>],
    transfer_key: &KeyName,
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
    let mut soa = Soa::defaults_for(&name);
    if let Some(m) = &spec.soa.mname {
        soa.mname =
            DomainName::resolve_target(m, &name).map_err(|e| err(e.at("spec.soa.mname")))?;
    }
    if let Some(r) = &spec.soa.rname {
        soa.rname = parse_rname(r, &name).map_err(|e| err(e.at("spec.soa.rname")))?;
    }
    soa.refresh = ttl("spec.soa.refresh", spec.soa.refresh)?;
    soa.retry = ttl("spec.soa.retry", spec.soa.retry)?;
    soa.expire = ttl("spec.soa.expire", spec.soa.expire)?;
    soa.minimum = ttl("spec.soa.minimum", spec.soa.minimum)?;
    let default_ttl = ttl("spec.defaultTTL", spec.default_ttl)?;
    let nameservers = spec
        .nameservers
        .iter()
        .enumerate()
        .map(|(i, n)| {
            DomainName::resolve_target(n, &name)
                .map_err(|e| err(e.at(&format!("spec.nameservers[{i}]"))))
        })
        .collect::<Result<Vec<_>, _>>()?;
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
    use crate::api::{DNSRecordSpec, DNSRecordStatus, ZoneRecord};

    fn zone() -> ZoneName {
        ZoneName::parse("example.com").unwrap()
    }

    fn ttl(s: i64) -> Ttl {
        Ttl::new(s).unwrap()
    }

    fn rec(name: &str, t: api::RecordType, ttl: Option<u32>, values: &[&str]) -> DNSRecord {
        let mut r = DNSRecord::new(
            "r",
            DNSRecordSpec {
                zone_ref: "z".into(),
                name: name.into(),
                type_: t,
                ttl,
                values: values.iter().map(|v| v.to_string()).collect(),
            },
        );
        r.metadata.namespace = Some("ns".into());
        r
    }

    fn refused(r: &DNSRecord) -> RecordError {
        dns_record(r, &zone(), ttl(300), true).set.unwrap_err()
    }

    #[test]
    fn a_record_set_resolves_its_owner_and_collapses_duplicate_values() {
        let r = rec(
            "www",
            api::RecordType::A,
            None,
            &["192.0.2.1", "192.0.2.1", "192.0.2.2"],
        );
        let v = dns_record(&r, &zone(), ttl(300), true);
        let set = v.set.unwrap();
        assert_eq!(set.name.fqdn(), "www.example.com.");
        assert_eq!((set.rtype, set.ttl), (RecordType::A, ttl(300)));
        assert_eq!(set.values.len(), 2);
        let abs = rec(
            "mail.example.com.",
            api::RecordType::MX,
            Some(60),
            &["10 mx"],
        );
        let set = dns_record(&abs, &zone(), ttl(300), true).set.unwrap();
        assert_eq!(set.ttl, ttl(60));
        assert_eq!(
            set.values.iter().next().unwrap().to_string(),
            "10 mx.example.com."
        );
    }

    #[test]
    fn each_refusal_has_its_reason_and_names_the_field() {
        let cases: Vec<(DNSRecord, &str, &str)> = vec![
            (
                rec("www.example.org.", api::RecordType::A, None, &["192.0.2.1"]),
                REASON_INVALID_RECORD,
                "spec.name",
            ),
            (
                rec("mx", api::RecordType::MX, None, &["10 ok.", "not an mx"]),
                REASON_INVALID_RECORD,
                "spec.values[1]",
            ),
            (
                rec("t", api::RecordType::TXT, Some(1 << 31), &["\"x\""]),
                REASON_INVALID_RECORD,
                "spec.ttl",
            ),
            (
                rec(
                    "example.com.",
                    api::RecordType::NS,
                    None,
                    &["ns9.example.org."],
                ),
                REASON_APEX_NS_UNSUPPORTED,
                "spec.nameservers",
            ),
            (
                rec("@", api::RecordType::CNAME, None, &["x.example.org."]),
                REASON_INVALID_RECORD,
                "apex",
            ),
        ];
        for (r, reason, field) in cases {
            let e = refused(&r);
            assert_eq!(e.reason, reason, "{:?}: {e:?}", r.spec);
            assert!(e.message.contains(field), "{:?}: {}", r.spec, e.message);
        }
        let many: Vec<String> = (0..101).map(|i| format!("10.0.0.{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = refused(&rec("big", api::RecordType::A, None, &many));
        assert_eq!(e.reason, REASON_TOO_MANY_VALUES);
        let huge: Vec<String> = (0..100)
            .map(|i| format!("\"{i}{}\"", "x".repeat(1000)))
            .collect();
        let huge: Vec<&str> = huge.iter().map(String::as_str).collect();
        let e = refused(&rec("t", api::RecordType::TXT, None, &huge));
        assert_eq!(e.reason, REASON_INVALID_RECORD);
        assert!(
            e.message.contains("more than one message holds"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_dnsrecord_carries_what_its_status_says() {
        let mut r = rec("www", api::RecordType::A, None, &["192.0.2.1"]);
        r.status = Some(DNSRecordStatus {
            fqdn: Some("old.example.com.".into()),
            record_type: Some(api::RecordType::TXT),
            phase: Some(Phase::Error),
            reason: Some("Conflict".into()),
            ..Default::default()
        });
        let v = dns_record(&r, &zone(), ttl(300), false);
        assert!(!v.managed && !v.deleting);
        assert_eq!(v.object_name, "r");
        assert_eq!(
            v.status_key,
            Some((
                DomainName::parse_absolute("old.example.com").unwrap(),
                RecordType::Txt
            ))
        );
        assert_eq!(v.error_reason.as_deref(), Some("Conflict"));
        r.status.as_mut().unwrap().phase = Some(Phase::Ready);
        assert_eq!(dns_record(&r, &zone(), ttl(300), true).error_reason, None);
    }

    #[test]
    fn an_inline_apex_ns_entry_keeps_what_validates() {
        let entry = ZoneRecord {
            name: "@".into(),
            type_: api::RecordType::NS,
            ttl: Some(7200),
            values: vec!["ns2".into(), "bad name!".into()],
        };
        let InlineRecord::ApexNs {
            ttl: t,
            names,
            errors,
        } = inline_record(&zone(), &entry, ttl(300))
        else {
            panic!("an apex NS entry")
        };
        assert_eq!(t, Some(ttl(7200)));
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].fqdn(), "ns2.example.com.");
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].reason, REASON_INVALID_RECORD);
        assert!(
            errors[0].message.contains("values[1]"),
            "{}",
            errors[0].message
        );
        let entry = ZoneRecord {
            name: "www".into(),
            type_: api::RecordType::MX,
            ttl: None,
            values: vec!["bogus".into()],
        };
        let InlineRecord::Rrset(Err(e)) = inline_record(&zone(), &entry, ttl(300)) else {
            panic!("a refused record set")
        };
        assert!(e.message.starts_with("invalid values[0]"), "{}", e.message);
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
}
