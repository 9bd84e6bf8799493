//! BindZone: one DNS zone served by a BindCluster, either a primary zone held
//! by pod 0 (handed to the secondaries through the catalog) or a secondary
//! zone transferred from external primaries.
//!
//! Types only; nothing here touches the cluster.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{MAX_TTL, Phase};
use super::dnsrecord::RecordType;
use super::validation::{
    DNS_NAME_PATTERN, IP_PATTERN, K8S_NAME_PATTERN, MAX_DNS_NAME_LEN, MAX_INLINE_RECORDS,
    MAX_INLINE_VALUE_LEN, MAX_INLINE_VALUES, MAX_IP_LEN, MAX_K8S_NAME_LEN, MAX_NAMESERVERS,
    MAX_UPDATE_GRANTS, MAX_VIEW_NAME_LEN, MSG_A_IS_IPV4, MSG_AAAA_IS_IPV6, MSG_CNAME_SINGLE,
    MSG_GRANT_NAME, MSG_GRANTS_PRIMARY, MSG_PRIMARY_ADDRESS_IP, MSG_SECONDARY_PRIMARIES,
    MSG_ZONE_NAME_IMMUTABLE, OWNER_NAME_PATTERN, RULE_A_IS_IPV4, RULE_AAAA_IS_IPV6,
    RULE_CNAME_SINGLE, RULE_GRANT_NAME, RULE_GRANTS_PRIMARY, RULE_IMMUTABLE, RULE_IS_IP,
    RULE_SECONDARY_PRIMARIES, VALUE_PATTERN, VIEW_NAME_PATTERN,
};
use super::validation::{
    GRANT_NAME_PATTERN, MAX_GRANT_NAMES, MAX_RECORD_GRANTS, MSG_RECORDS_FROM_SELECTOR,
    RULE_RECORDS_FROM_SELECTOR,
};

/// Zone default TTL when spec.defaultTTL is not set.
pub const DEFAULT_ZONE_TTL: u32 = 3600;
/// SOA refresh default (seconds).
pub const DEFAULT_SOA_REFRESH: u32 = 3600;
/// SOA retry default (seconds).
pub const DEFAULT_SOA_RETRY: u32 = 900;
/// SOA expire default (seconds, two weeks).
pub const DEFAULT_SOA_EXPIRE: u32 = 1_209_600;
/// SOA minimum (negative-caching TTL) default (seconds).
pub const DEFAULT_SOA_MINIMUM: u32 = 300;
/// Port of an external primary when primaries[].port is not set.
pub const DEFAULT_DNS_PORT: u16 = 53;

fn default_ttl() -> u32 {
    DEFAULT_ZONE_TTL
}
fn default_true() -> bool {
    true
}
fn default_refresh() -> u32 {
    DEFAULT_SOA_REFRESH
}
fn default_retry() -> u32 {
    DEFAULT_SOA_RETRY
}
fn default_expire() -> u32 {
    DEFAULT_SOA_EXPIRE
}
fn default_minimum() -> u32 {
    DEFAULT_SOA_MINIMUM
}
fn default_port() -> u16 {
    DEFAULT_DNS_PORT
}

/// Desired state of a BindZone.
// printcolumn(...) repeats `type_ = "string"`; that is data, not a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "bind.unkin.net",
    version = "v1alpha1",
    kind = "BindZone",
    namespaced,
    status = "BindZoneStatus",
    shortname = "bzone",
    shortname = "bz",
    category = "bind",
    doc = "A DNS zone served by a BindCluster: a primary zone on pod 0 (shared with the secondaries through the catalog) or a secondary zone transferred from external primaries.",
    printcolumn(name = "Zone", type_ = "string", json_path = ".spec.zoneName"),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterRef"),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Serial", type_ = "integer", json_path = ".status.serial"),
    printcolumn(name = "In Sync", type_ = "string", json_path = ".status.inSync"),
    printcolumn(
        name = "Records",
        type_ = "integer",
        priority = 1,
        json_path = ".status.recordCount"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new(RULE_SECONDARY_PRIMARIES).message(MSG_SECONDARY_PRIMARIES))]
#[x_kube(validation = Rule::new(RULE_GRANTS_PRIMARY).message(MSG_GRANTS_PRIMARY))]
#[serde(rename_all = "camelCase")]
pub struct BindZoneSpec {
    /// Name of the BindCluster (same namespace) that serves this zone.
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub cluster_ref: String,

    /// The zone's domain name, e.g. `example.com` (a trailing dot is
    /// allowed). Immutable: a different zone is a different BindZone.
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN))]
    #[x_kube(validation = Rule::new(RULE_IMMUTABLE).message(MSG_ZONE_NAME_IMMUTABLE))]
    pub zone_name: String,

    /// The cluster view (spec.views[].name) the zone lives in. Unset: the
    /// cluster has no views.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_VIEW_NAME_LEN), regex(pattern = VIEW_NAME_PATTERN))]
    pub view: Option<String>,

    /// `primary`: served by pod 0 and handed to the secondaries through the
    /// catalog. `secondary`: transferred from spec.primaries, never a catalog
    /// member.
    #[serde(default, rename = "type")]
    pub type_: ZoneType,

    /// External primaries a secondary zone transfers from (required for, and
    /// only for, type secondary).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub primaries: Vec<ZonePrimary>,

    /// Whether a primary zone is a member of the cluster's catalog zone (so
    /// the secondaries serve it). Secondary zones are never members.
    #[serde(default = "default_true")]
    pub catalog: bool,

    /// The apex NS RRset: host names of the zone's nameservers, absolute with
    /// a trailing dot or relative to the zone. Converged per rdata (BIND
    /// ignores an RRset-wide delete at the apex).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_NAMESERVERS), inner(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN)))]
    pub nameservers: Vec<String>,

    /// SOA fields of the zone; every field has a default.
    #[serde(default)]
    pub soa: SoaSpec,

    /// TTL of records that set none (`$TTL` of the zone).
    #[serde(default = "default_ttl", rename = "defaultTTL")]
    #[schemars(range(max = MAX_TTL))]
    pub default_ttl: u32,

    /// Record sets managed inline with the zone. Each entry owns its (name,
    /// type) RRset like a DNSRecord. At most 256 sets of at most 16 values
    /// of at most 2048 characters: the API server prices the A/AAAA address
    /// rules by these bounds and refuses larger ones. Larger zones, wider
    /// sets and longer values use DNSRecord objects (100 values of 4096
    /// characters each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_INLINE_RECORDS))]
    pub records: Vec<ZoneRecord>,

    /// Name of the BindTSIGKey (same namespace) allowed to send dynamic
    /// updates to this zone; the operator signs its own updates with it and
    /// external-dns may share it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub update_key_ref: Option<String>,

    /// Rights for other tools' keys (cert-manager, external-dns, ACME
    /// clients) to change parts of a primary zone by dynamic update, as
    /// BIND `update-policy` grants written after the operator's own
    /// `zonesub ANY` grant for updateKeyRef. Each grant names a BindTSIGKey
    /// (same namespace, loaded by the zone's cluster), which names it
    /// covers and which record types; e.g. only TXT at
    /// `_acme-challenge.www` for a DNS-01 client. A key the cluster does
    /// not load fails the zone (KeyNotFound) and changes nothing served.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_UPDATE_GRANTS))]
    pub update_policy: Vec<UpdateGrant>,

    /// Which namespaces may publish DNSRecords in this zone, and which
    /// names and types each may publish. Empty: only the zone's own
    /// namespace, any name and type (as before). A DNSRecord from another
    /// namespace names the zone with `zoneRef` plus `zoneNamespace` and is
    /// served only if a grant here covers its namespace, owner name and
    /// type; otherwise it is refused with reason `NotAllowed` in its own
    /// status and nothing of it is served. The zone's own namespace keeps
    /// every right unless a grant says `from: Same`: then it too is held
    /// to the grants. Narrowing a grant (or a namespace's labels no longer
    /// matching) takes the records it allowed off the servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_RECORD_GRANTS))]
    pub records_from: Vec<RecordsFrom>,

    /// Extra address match list allowed to transfer the zone (BIND
    /// `allow-transfer`), in addition to the cluster's transfer key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = super::validation::MAX_LIST_ITEMS), inner(length(min = 1, max = super::validation::MAX_ACL_ELEMENT_LEN), regex(pattern = super::validation::ACL_ELEMENT_PATTERN)))]
    pub allow_transfer: Vec<String>,

    /// BIND `dnssec-policy` name that signs the zone: `default` (BIND's
    /// built-in policy: one ECDSAP256SHA256 CSK, NSEC) or `insecure`
    /// (withdraw the keys of a signed zone); any other name must be a
    /// policy the cluster's named.conf defines, or the zone reports
    /// DnssecPolicyRefused with named's reason. The zone is Ready only once
    /// the primary serves it signed; status.dnssec then lists the key tags
    /// and the DS records (digest type 2) to give the parent zone.
    ///
    /// Removing the field from a signed zone unsigns it safely: the operator
    /// first applies `insecure`, so named withdraws the DNSKEYs and
    /// signatures while the zone stays valid (reason Unsigning), and drops
    /// the policy once the primary serves no DNSKEY. Remove the DS records
    /// at the parent *before* removing the field (and wait out the DS TTL):
    /// a DS that points at a withdrawn key makes validating resolvers fail
    /// the zone. Unset on a zone that was never signed: not signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_VIEW_NAME_LEN), regex(pattern = VIEW_NAME_PATTERN))]
    pub dnssec_policy: Option<String>,

    /// External secondaries of this zone, replacing the cluster's
    /// spec.externalSecondaries for it (an empty list: none; unset: the
    /// cluster's). The primary NOTIFYs them and lets them transfer the zone
    /// with their keys; status.externalSecondaries shows their serials.
    /// Primary zones only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = super::bindcluster::MAX_EXTERNAL_SECONDARIES))]
    #[x_kube(validation = Rule::new(super::bindcluster::RULE_ENDPOINTS_UNIQUE).message(super::bindcluster::MSG_ENDPOINTS_UNIQUE))]
    pub external_secondaries: Option<Vec<super::bindcluster::ExternalSecondary>>,
}

/// Whether the cluster is the zone's primary or a secondary of outside servers.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 9))]
pub enum ZoneType {
    /// Authoritative copy lives on pod 0; updated by TSIG dynamic update.
    #[default]
    Primary,
    /// Transferred from spec.primaries.
    Secondary,
}

impl ZoneType {
    /// The wire spelling (`primary`, `secondary`).
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneType::Primary => "primary",
            ZoneType::Secondary => "secondary",
        }
    }
}

/// Which names an [`UpdateGrant`] covers (BIND's `update-policy` rule types).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 9))]
pub enum GrantMatch {
    /// Exactly `name`.
    Name,
    /// `name` and every name below it.
    Subdomain,
    /// The names the wildcard `name` (`*.<...>`) matches.
    Wildcard,
    /// Every name in the zone (no `name`).
    Zonesub,
}

impl GrantMatch {
    /// The wire spelling (`name`, `subdomain`, `wildcard`, `zonesub`).
    pub fn as_str(self) -> &'static str {
        match self {
            GrantMatch::Name => "name",
            GrantMatch::Subdomain => "subdomain",
            GrantMatch::Wildcard => "wildcard",
            GrantMatch::Zonesub => "zonesub",
        }
    }
}

/// One right of another tool's key to update the zone (a BIND
/// `update-policy` grant).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new(RULE_GRANT_NAME).message(MSG_GRANT_NAME))]
#[serde(rename_all = "camelCase")]
pub struct UpdateGrant {
    /// Name of the BindTSIGKey (same namespace) the grant is for; clients
    /// sign their updates with its key.
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub key_ref: String,
    /// Which names the key may change: `name` (exactly `name`),
    /// `subdomain` (`name` and below), `wildcard` (what the wildcard
    /// `name`, e.g. `*.dyn`, matches) or `zonesub` (the whole zone).
    #[serde(rename = "match")]
    pub match_: GrantMatch,
    /// The name: `@` for the apex, relative to the zone (`_acme-challenge.www`)
    /// or absolute with a trailing dot; it must lie inside the zone.
    /// Required unless match is `zonesub`, which takes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = OWNER_NAME_PATTERN))]
    pub name: Option<String>,
    /// Record types the key may change there. Empty: any type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 17))]
    pub types: Vec<RecordType>,
}

/// Which namespaces a [`RecordsFrom`] grant is for (as Gateway API's
/// `allowedRoutes.namespaces.from`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 8))]
pub enum FromNamespaces {
    /// The zone's own namespace.
    Same,
    /// Every namespace the operator watches.
    All,
    /// The namespaces whose labels match `selector`.
    Selector,
}

/// One grant of `BindZone.spec.recordsFrom`: DNSRecords from these
/// namespaces may publish these names with these types.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new(RULE_RECORDS_FROM_SELECTOR).message(MSG_RECORDS_FROM_SELECTOR))]
#[serde(rename_all = "camelCase")]
pub struct RecordsFrom {
    /// `Same` (the zone's namespace), `All` (every namespace), or
    /// `Selector` (namespaces whose labels match `selector`; the operator
    /// then needs to read Namespaces, see docs/cross-namespace.md).
    pub from: FromNamespaces,
    /// Namespace label selector; required with, and only with, `from: Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<NamespaceSelector>,
    /// Owner names the grant covers, relative to the zone: `@` (the apex),
    /// an exact name (`api`, `www.team-a`), `*.suffix` (every name below
    /// `suffix`, not `suffix` itself) or `*` (every name below the apex).
    /// Empty: every name in the zone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_GRANT_NAMES), inner(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = GRANT_NAME_PATTERN)))]
    pub names: Vec<String>,
    /// Record types the grant covers. Empty: every type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 17))]
    pub types: Vec<RecordType>,
}

/// A label selector over namespaces (a Kubernetes LabelSelector, bounded
/// so the API server can price the grant's CEL rule). Every condition
/// must hold; an empty selector selects every namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelector {
    /// Labels a namespace must carry with exactly these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub match_labels: BTreeMap<String, String>,
    /// Conditions on labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub match_expressions: Vec<LabelRequirement>,
}

/// One condition of a [`NamespaceSelector`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelRequirement {
    /// The label key.
    #[schemars(length(min = 1, max = 317))]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: LabelOperator,
    /// The values for `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    pub values: Vec<String>,
}

/// How a [`LabelRequirement`] tests its key.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 12))]
pub enum LabelOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// An external primary of a secondary zone.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ZonePrimary {
    /// IP address of the primary (BIND transfers from addresses, not names).
    #[schemars(length(min = 1, max = MAX_IP_LEN), regex(pattern = IP_PATTERN))]
    #[x_kube(validation = Rule::new(RULE_IS_IP).message(MSG_PRIMARY_ADDRESS_IP))]
    pub address: String,
    /// DNS port of the primary.
    #[serde(default = "default_port")]
    #[schemars(range(min = 1))]
    pub port: u16,
    /// Name of the BindTSIGKey (same namespace) that signs transfers from this
    /// primary. Unset: unsigned transfers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub key_ref: Option<String>,
}

/// SOA fields of a zone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SoaSpec {
    /// Primary nameserver (SOA MNAME), absolute or relative to the zone.
    /// Unset: the first of spec.nameservers, else `ns1` in the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN))]
    pub mname: Option<String>,
    /// Responsible mailbox in DNS form (SOA RNAME; `hostmaster.example.com.`
    /// means hostmaster@example.com). Unset: `hostmaster` in the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN))]
    pub rname: Option<String>,
    /// Seconds between secondaries' serial checks (SOA REFRESH).
    #[serde(default = "default_refresh")]
    #[schemars(range(max = MAX_TTL))]
    pub refresh: u32,
    /// Seconds before a failed refresh is retried (SOA RETRY).
    #[serde(default = "default_retry")]
    #[schemars(range(max = MAX_TTL))]
    pub retry: u32,
    /// Seconds after which secondaries stop answering without a refresh (SOA
    /// EXPIRE).
    #[serde(default = "default_expire")]
    #[schemars(range(max = MAX_TTL))]
    pub expire: u32,
    /// Negative-caching TTL in seconds (SOA MINIMUM).
    #[serde(default = "default_minimum")]
    #[schemars(range(max = MAX_TTL))]
    pub minimum: u32,
}

impl Default for SoaSpec {
    fn default() -> Self {
        Self {
            mname: None,
            rname: None,
            refresh: DEFAULT_SOA_REFRESH,
            retry: DEFAULT_SOA_RETRY,
            expire: DEFAULT_SOA_EXPIRE,
            minimum: DEFAULT_SOA_MINIMUM,
        }
    }
}

/// A record set managed inline with its BindZone.
///
/// Unlike a DNSRecord it may name the apex NS RRset: older manifests published
/// the nameservers that way, and the zone reconciler converges it per rdata.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new(RULE_A_IS_IPV4).message(MSG_A_IS_IPV4))]
#[x_kube(validation = Rule::new(RULE_AAAA_IS_IPV6).message(MSG_AAAA_IS_IPV6))]
#[x_kube(validation = Rule::new(RULE_CNAME_SINGLE).message(MSG_CNAME_SINGLE))]
#[serde(rename_all = "camelCase")]
pub struct ZoneRecord {
    /// Owner name: `@` for the apex, relative to the zone (`www`), or
    /// absolute with a trailing dot.
    #[serde(default = "super::dnsrecord::default_name")]
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = OWNER_NAME_PATTERN))]
    pub name: String,
    /// Record type.
    #[serde(rename = "type")]
    pub type_: RecordType,
    /// TTL in seconds. Unset: the zone's defaultTTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = MAX_TTL))]
    pub ttl: Option<u32>,
    /// Record data in presentation format, one entry per record of the set:
    /// at most 16 values of at most 2048 characters inline (a DNSRecord takes
    /// 100 of 4096).
    #[schemars(length(min = 1, max = MAX_INLINE_VALUES), inner(length(min = 1, max = MAX_INLINE_VALUE_LEN), regex(pattern = VALUE_PATTERN)))]
    pub values: Vec<String>,
}

/// Observed state of a BindZone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindZoneStatus {
    /// metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pending, Ready or Error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// SOA serial the primary serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u32>,
    /// Number of RRsets the operator manages in the zone (inline records and
    /// DNSRecords).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_count: Option<u32>,
    /// Pod name -> SOA serial that pod serves; a pod missing here does not
    /// serve the zone (yet).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, u32>,
    /// `N/M`: N of the M pods in `servers` serve `serial` (every server is
    /// in sync when N equals M); shown by `kubectl get bindzones`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub in_sync: Option<String>,
    /// A hash of the RRsets and SOA fields the primary was verified to hold
    /// at `serial`: a restarted operator that finds the zone still at that
    /// serial and its plan unchanged trusts it without a zone transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub applied_plan: Option<String>,
    /// DNSSEC as the primary serves the zone (zones with spec.dnssecPolicy,
    /// and a zone whose policy was removed until its keys are withdrawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dnssec: Option<ZoneDnssecStatus>,
    /// The serial each external secondary of the zone serves (the cluster's
    /// spec.externalSecondaries or the zone's), asked by the operator with
    /// an SOA query signed with the secondary's key. Condition
    /// `ExternalSecondariesInSync` is False while any lags; Ready does not
    /// wait for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = super::bindcluster::MAX_EXTERNAL_SECONDARIES))]
    pub external_secondaries: Vec<ExternalSecondaryStatus>,
    /// Latest observations; `Ready` is True when the primary serves the zone
    /// as specified.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// DNSSEC state of a zone on its primary.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZoneDnssecStatus {
    /// The `dnssec-policy` the primary applies (`insecure` while the keys
    /// of a removed policy are withdrawn).
    pub policy: String,
    /// Whether the primary serves the zone signed (`rndc zonestatus`).
    pub signed: bool,
    /// Key tags of the DNSKEYs the primary serves, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_tags: Vec<u16>,
    /// DS records (digest type 2, SHA-256) of the key-signing keys, to add
    /// at the parent zone, e.g. `example.com. IN DS 12345 13 2 ABC...`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ds: Vec<String>,
}

/// What one external secondary serves of a zone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecondaryStatus {
    /// `address:port` (`[address]:port` for IPv6) of the secondary.
    #[schemars(length(max = 64))]
    pub server: String,
    /// SOA serial it answered with; unset when it did not answer with the
    /// zone (down, refused, not transferred yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u32>,
    /// Whether it serves the primary's serial.
    pub caught_up: bool,
    /// Why it did not answer, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub message: Option<String>,
}
