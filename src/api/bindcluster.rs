//! BindCluster: one BIND deployment, a StatefulSet whose ordinal 0 is the
//! primary and every other ordinal a secondary, plus its server options and
//! catalog zone.
//!
//! Types only; nothing here touches the cluster. Status carries hashes, never
//! rendered config or key material.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, LocalObjectReference, PodSecurityContext, ResourceRequirements, SecurityContext,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::validation::{
    ACL_ELEMENT_PATTERN, DNS_NAME_PATTERN, IP_PATTERN, K8S_NAME_PATTERN, MAX_ACL_ELEMENT_LEN,
    MAX_DNS_NAME_LEN, MAX_IP_LEN, MAX_K8S_NAME_LEN, MAX_LIST_ITEMS, MAX_VIEW_NAME_LEN,
    MSG_ANCHOR_FIELDS, MSG_CATALOG_NAME_KEPT, MSG_FORWARDERS_IPS, RULE_ALL_IPS, RULE_ANCHOR_FIELDS,
    RULE_CATALOG_NAME_KEPT, VIEW_NAME_PATTERN,
};
use super::validation::{MSG_EXTERNAL_ADDRESS_IP, RULE_IS_IP};
use super::validation::{MSG_EXTERNAL_DEPLOYS_NOTHING, RULE_EXTERNAL_DEPLOYS_NOTHING};

/// Most trust anchors a cluster takes (bounds the CEL cost of their rules).
pub const MAX_TRUST_ANCHORS: u32 = 16;
/// Longest DS digest (hex of SHA-384) or public key (base64) accepted.
pub const MAX_ANCHOR_DATA_LEN: u32 = 2048;

/// Image used when spec.image is not set.
pub const DEFAULT_IMAGE: &str = "internetsystemsconsortium/bind9:9.20";
/// Replicas when spec.replicas is not set: one primary, one secondary.
pub const DEFAULT_REPLICAS: i32 = 2;
/// Size of the primary's zone-data volume when spec.storage.size is not set.
pub const DEFAULT_STORAGE_SIZE: &str = "1Gi";

fn default_replicas() -> i32 {
    DEFAULT_REPLICAS
}

fn default_image() -> String {
    DEFAULT_IMAGE.to_owned()
}

fn default_storage_size() -> Quantity {
    Quantity(DEFAULT_STORAGE_SIZE.to_owned())
}

/// Desired state of a BindCluster.
// printcolumn(...) repeats `type_ = "string"`; that is data, not a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "bind.unkin.net",
    version = "v1alpha1",
    kind = "BindCluster",
    namespaced,
    status = "BindClusterStatus",
    shortname = "bcluster",
    shortname = "bc",
    category = "bind",
    doc = "A BIND9 deployment: a StatefulSet whose pod 0 is the primary and the other pods secondaries fed by a catalog zone.",
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "ConfigApplied",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"ConfigApplied\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type==\"ConfigApplied\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(RULE_EXTERNAL_DEPLOYS_NOTHING).message(MSG_EXTERNAL_DEPLOYS_NOTHING))]
pub struct BindClusterSpec {
    /// Number of BIND pods. Pod 0 is the primary; every other pod is a
    /// secondary that follows the primary through the catalog zone.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1))]
    pub replicas: i32,

    /// Container image running named (an ISC bind9 image or compatible).
    #[serde(default = "default_image")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,

    /// When the kubelet pulls the image; Kubernetes' default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,

    /// Secrets used to pull the image from a private registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,

    /// CPU and memory requests and limits of the named container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Node labels the BIND pods must be scheduled on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// Tolerations of the BIND pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Affinity rules of the BIND pods (e.g. spread across nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Extra annotations on the BIND pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_annotations: BTreeMap<String, String>,

    /// Pod-level security settings, laid over the operator's defaults (which
    /// pass the Pod Security "restricted" profile): runAsNonRoot, runAsUser,
    /// runAsGroup and fsGroup 53 (the `bind` user of ISC's image),
    /// fsGroupChangePolicy OnRootMismatch, seccompProfile RuntimeDefault.
    /// A field set here replaces the default of that field; unset fields keep
    /// theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,

    /// Security settings of the named container, laid over the operator's
    /// defaults the same way: runAsNonRoot, allowPrivilegeEscalation false,
    /// capabilities drop ALL, readOnlyRootFilesystem, seccompProfile
    /// RuntimeDefault. named listens on unprivileged ports, so it needs no
    /// capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,

    /// The PodDisruptionBudget that lets voluntary disruptions (node drains)
    /// take at most one BIND pod at a time. On unless `enabled: false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<PodDisruptionBudgetSpec>,

    /// The DNS Service in front of all pods (53/UDP and 53/TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<DnsServiceSpec>,

    /// Persistent storage for the primary's zone data. Unset: an emptyDir (the
    /// operator re-creates zones and records after a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageSpec>,

    /// Whether the servers answer recursive queries. Off for authoritative-only
    /// clusters.
    #[serde(default)]
    pub recursion: bool,

    /// Address match list of clients allowed to query (BIND `allow-query`):
    /// IPs, CIDRs, `any`, `none`, `localhost`, `localnets`, `key <name>`, each
    /// optionally negated with `!`. Unset: BIND's default (any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_ACL_ELEMENT_LEN), regex(pattern = ACL_ELEMENT_PATTERN)))]
    pub allow_query: Vec<String>,

    /// Address match list of clients allowed recursion (BIND
    /// `allow-recursion`); same element syntax as allowQuery.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_ACL_ELEMENT_LEN), regex(pattern = ACL_ELEMENT_PATTERN)))]
    pub allow_recursion: Vec<String>,

    /// IP addresses of upstream resolvers for recursion (BIND `forwarders`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_IP_LEN), regex(pattern = IP_PATTERN)))]
    #[x_kube(validation = Rule::new(RULE_ALL_IPS).message(MSG_FORWARDERS_IPS))]
    pub forwarders: Vec<String>,

    /// Only forward, never resolve iteratively when forwarders fail (BIND
    /// `forward only`).
    #[serde(default)]
    pub forward_only: bool,

    /// DNSSEC validation of recursive answers (BIND `dnssec-validation`):
    /// `auto` validates from BIND's built-in root trust anchor, `no` does not
    /// validate, `yes` validates only from spec.trustAnchors and is refused
    /// without them (BIND 9.20 will not start with `yes` and no anchors).
    /// Unset: `no` when recursion is off, `auto` when it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dnssec_validation: Option<DnssecValidation>,

    /// Trust anchors for `dnssecValidation: yes` (BIND `trust-anchors`),
    /// e.g. the root's KSK as `{name: ".", type: initial-ds, keyTag: 20326,
    /// algorithm: 8, digestType: 2, digest: "E06D..."}` or an internal
    /// zone's key as `{name: corp.example, type: static-key, flags: 257,
    /// algorithm: 13, publicKey: "..."}`. Also honoured with `auto` (beside
    /// the built-in root anchor; a static root anchor is refused there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_TRUST_ANCHORS))]
    pub trust_anchors: Vec<TrustAnchor>,

    /// Domains whose answers are not DNSSEC-validated (BIND
    /// `validate-except`), e.g. internal zones with no chain of trust.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN)))]
    pub validate_except: Vec<String>,

    /// Zones answered by forwarding to other servers (BIND `type forward`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS))]
    pub forward_zones: Vec<ForwardZone>,

    /// Views (split horizon). Unset: a single implicit view. A BindZone
    /// selects one with spec.view.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS))]
    pub views: Vec<View>,

    /// The catalog zone (RFC 9432, schema version 2) through which the primary
    /// hands its zones to the secondaries.
    /// Unset: `{}` (a derived name, a generated transfer key). Its zoneName
    /// cannot change once the cluster exists.
    // Defaulted to `{}` by the API server so the transition rule, which
    // runs only when the old and the new object both have the field, also
    // judges a whole block added or removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    #[x_kube(validation = Rule::new(RULE_CATALOG_NAME_KEPT).message(MSG_CATALOG_NAME_KEPT))]
    pub catalog: Option<CatalogSpec>,

    /// A BIND the operator did not deploy (on a VM, another cluster): its
    /// zones' records are written to `primary` over TSIG-signed DNS, and
    /// with `rndc` set missing zones are created there. Set, the operator
    /// deploys nothing for this cluster, and none of the fields above that
    /// shape pods or named.conf may be set. See docs/external.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalSpec>,
    /// Secondaries outside the cluster (a DNS provider's secondary service,
    /// the operator being their hidden primary): the primary NOTIFYs each,
    /// signed with its key, and lets it transfer (AXFR/IXFR) every zone of
    /// the cluster with that key. A BindZone's spec.externalSecondaries
    /// replaces this list for that zone. Each zone's
    /// status.externalSecondaries shows the serial every one serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_EXTERNAL_SECONDARIES))]
    #[x_kube(validation = Rule::new(RULE_ENDPOINTS_UNIQUE).message(MSG_ENDPOINTS_UNIQUE))]
    pub external_secondaries: Vec<ExternalSecondary>,

    /// Catalog zones (RFC 9432) of other BIND servers this cluster follows:
    /// every pod serves, as a secondary, every member zone of each catalog
    /// beside the cluster's own zones; zones added to or removed from the
    /// source catalog appear or disappear here with nothing applied on this
    /// cluster. A member named like one of this cluster's own zones is not
    /// served from the catalog (the own zone stays); status condition
    /// `CatalogsConsumed` names it. Not with spec.views.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_CATALOG_CONSUMERS))]
    #[x_kube(validation = Rule::new(RULE_CATALOGS_UNIQUE).message(MSG_CATALOGS_UNIQUE))]
    pub catalog_consumers: Vec<CatalogConsumer>,
}

/// Most external secondaries a cluster or zone lists.
pub const MAX_EXTERNAL_SECONDARIES: u32 = 16;
/// Most catalogs a cluster consumes.
pub const MAX_CATALOG_CONSUMERS: u32 = 8;
/// No two external secondaries at one address and port.
pub const RULE_ENDPOINTS_UNIQUE: &str =
    "self.all(a, self.exists_one(b, b.address == a.address && b.port == a.port))";
/// Message of [`RULE_ENDPOINTS_UNIQUE`].
pub const MSG_ENDPOINTS_UNIQUE: &str =
    "each external secondary (address and port) may be listed once";
/// No catalog consumed twice.
pub const RULE_CATALOGS_UNIQUE: &str =
    "self.all(a, self.exists_one(b, b.catalogZone == a.catalogZone))";
/// Message of [`RULE_CATALOGS_UNIQUE`].
pub const MSG_CATALOGS_UNIQUE: &str = "each catalogZone may be consumed once";

/// A secondary outside the cluster that the primary feeds.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecondary {
    /// IP address of the secondary (BIND notifies addresses, not names).
    #[schemars(length(min = 1, max = MAX_IP_LEN), regex(pattern = IP_PATTERN))]
    #[x_kube(validation = Rule::new(RULE_IS_IP).message(MSG_EXTERNAL_ADDRESS_IP))]
    pub address: String,
    /// Its DNS port.
    #[serde(default = "default_dns_port")]
    #[schemars(range(min = 1))]
    pub port: u16,
    /// Name of the BindTSIGKey (same namespace, loaded by the cluster) the
    /// secondary signs its transfers with; the primary signs its NOTIFYs and
    /// the operator its serial queries with it too.
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub key_ref: String,
}

/// A server address: IP and port.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerAddress {
    /// IP address (BIND takes no host names here).
    #[schemars(length(min = 1, max = MAX_IP_LEN), regex(pattern = IP_PATTERN))]
    #[x_kube(validation = Rule::new(RULE_IS_IP).message(MSG_EXTERNAL_ADDRESS_IP))]
    pub address: String,
    /// DNS port.
    #[serde(default = "default_dns_port")]
    #[schemars(range(min = 1))]
    pub port: u16,
}

/// Another BIND's catalog zone this cluster follows.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CatalogConsumer {
    /// Name of the catalog zone on the source, e.g. the source BindCluster's
    /// `<name>.<namespace>.catalog.invalid` or its spec.catalog.zoneName.
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN))]
    pub catalog_zone: String,
    /// Where the catalog and its member zones are transferred from (the
    /// source's primary; several for redundancy).
    #[schemars(length(min = 1, max = 8))]
    pub primaries: Vec<ServerAddress>,
    /// Name of the BindTSIGKey (same namespace, loaded by this cluster) that
    /// the source accepts for transfers of the catalog and its members: a
    /// copy of the source cluster's transfer key, or a key the source lists
    /// in its spec.externalSecondaries.
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub transfer_key_ref: String,
}

impl Default for BindClusterSpec {
    fn default() -> Self {
        Self {
            replicas: DEFAULT_REPLICAS,
            image: DEFAULT_IMAGE.to_owned(),
            image_pull_policy: None,
            image_pull_secrets: Vec::new(),
            resources: None,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            affinity: None,
            pod_annotations: BTreeMap::new(),
            pod_security_context: None,
            security_context: None,
            pod_disruption_budget: None,
            service: None,
            storage: None,
            recursion: false,
            allow_query: Vec::new(),
            allow_recursion: Vec::new(),
            forwarders: Vec::new(),
            forward_only: false,
            dnssec_validation: None,
            trust_anchors: vec![],
            validate_except: Vec::new(),
            forward_zones: Vec::new(),
            views: Vec::new(),
            catalog: None,
            external: None,
            external_secondaries: Vec::new(),
            catalog_consumers: Vec::new(),
        }
    }
}

/// Suffix of a derived catalog zone name. `.invalid` (RFC 6761) can never
/// collide with a real zone the cluster serves.
pub const CATALOG_ZONE_SUFFIX: &str = "catalog.invalid";

impl BindCluster {
    /// Name of the cluster's catalog zone: spec.catalog.zoneName, else
    /// `<name>.<namespace>.catalog.invalid` (stable, unique per cluster).
    pub fn catalog_zone_name(&self) -> String {
        if let Some(name) = self
            .spec
            .catalog
            .as_ref()
            .and_then(|c| c.zone_name.as_deref())
        {
            return name.trim_end_matches('.').to_owned();
        }
        let name = self.metadata.name.as_deref().unwrap_or_default();
        let namespace = self.metadata.namespace.as_deref().unwrap_or("default");
        format!("{name}.{namespace}.{CATALOG_ZONE_SUFFIX}")
    }

    /// Name of the BindTSIGKey that signs transfers and NOTIFY, if set (on
    /// an external cluster: the key its primary already trusts for AXFR).
    pub fn transfer_key_ref(&self) -> Option<&str> {
        if let Some(ext) = &self.spec.external {
            return Some(&ext.transfer_key_ref);
        }
        self.spec.catalog.as_ref()?.transfer_key_ref.as_deref()
    }

    /// The external BIND this cluster stands for, if it is one.
    pub fn external(&self) -> Option<&ExternalSpec> {
        self.spec.external.as_ref()
    }
}

/// Kubernetes image pull policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 12))]
pub enum ImagePullPolicy {
    /// Pull on every pod start.
    Always,
    /// Pull only when the node lacks the image.
    IfNotPresent,
    /// Never pull; the image must be on the node.
    Never,
}

impl ImagePullPolicy {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ImagePullPolicy::Always => "Always",
            ImagePullPolicy::IfNotPresent => "IfNotPresent",
            ImagePullPolicy::Never => "Never",
        }
    }
}

/// BIND `dnssec-validation` setting.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 4))]
pub enum DnssecValidation {
    /// Validate with the built-in root trust anchor.
    Auto,
    /// Validate with configured trust anchors only.
    Yes,
    /// Do not validate.
    No,
}

impl DnssecValidation {
    /// The named.conf spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DnssecValidation::Auto => "auto",
            DnssecValidation::Yes => "yes",
            DnssecValidation::No => "no",
        }
    }
}

/// One trust anchor (BIND `trust-anchors` entry). A DS type (`static-ds`,
/// `initial-ds`) needs keyTag, algorithm, digestType and digest; a key type
/// (`static-key`, `initial-key`) needs flags, algorithm and publicKey. The
/// `initial-*` types start RFC 5011 tracking; `static-*` never roll.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[x_kube(validation = Rule::new(RULE_ANCHOR_FIELDS).message(MSG_ANCHOR_FIELDS))]
#[serde(rename_all = "camelCase")]
pub struct TrustAnchor {
    /// The domain the anchor is for (`.` for the root).
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = r"^(\.|([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?)$"))]
    pub name: String,
    /// `static-ds`, `initial-ds`, `static-key` or `initial-key`.
    #[serde(rename = "type")]
    pub type_: TrustAnchorType,
    /// DS key tag (DS types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_tag: Option<u16>,
    /// DNSSEC algorithm number (e.g. 8 RSASHA256, 13 ECDSAP256SHA256).
    pub algorithm: u8,
    /// DS digest type (DS types): 2 (SHA-256) or 4 (SHA-384).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest_type: Option<u8>,
    /// DS digest in hex (DS types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_ANCHOR_DATA_LEN))]
    pub digest: Option<String>,
    /// DNSKEY flags (key types): 257 for a key-signing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<u16>,
    /// DNSKEY public key in base64 (key types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_ANCHOR_DATA_LEN))]
    pub public_key: Option<String>,
}

/// How a trust anchor is given and kept.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 11))]
pub enum TrustAnchorType {
    /// A DS that is never rolled.
    StaticDs,
    /// A DS that starts RFC 5011 tracking.
    InitialDs,
    /// A DNSKEY that is never rolled.
    StaticKey,
    /// A DNSKEY that starts RFC 5011 tracking.
    InitialKey,
}

/// Kubernetes Service type of the DNS Service.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 12))]
pub enum ServiceType {
    /// Reachable inside the cluster only.
    #[default]
    ClusterIP,
    /// Also exposed on every node's port.
    NodePort,
    /// Exposed through a cloud or bare-metal load balancer.
    LoadBalancer,
}

/// How external traffic reaches the pods of a NodePort/LoadBalancer Service.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 7))]
pub enum ExternalTrafficPolicy {
    /// Any node forwards to any pod (source IP is lost).
    Cluster,
    /// Only nodes with a local pod answer (source IP is kept, so ACLs work).
    Local,
}

/// The DNS Service in front of all BIND pods.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DnsServiceSpec {
    /// Service type: ClusterIP (default), NodePort or LoadBalancer.
    #[serde(default, rename = "type")]
    pub type_: ServiceType,
    /// Annotations on the Service (e.g. for a load-balancer controller).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Extra labels on the Service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Requested load-balancer address (type LoadBalancer only).
    #[serde(
        default,
        rename = "loadBalancerIP",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = MAX_IP_LEN), regex(pattern = IP_PATTERN))]
    pub load_balancer_ip: Option<String>,
    /// Load-balancer implementation class (type LoadBalancer only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer_class: Option<String>,
    /// Client CIDRs allowed through the load balancer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_balancer_source_ranges: Vec<String>,
    /// Whether external traffic may hop between nodes (Cluster) or stays on
    /// the receiving node (Local, keeps client IPs for ACLs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_traffic_policy: Option<ExternalTrafficPolicy>,
}

/// The cluster's PodDisruptionBudget.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodDisruptionBudgetSpec {
    /// Whether the operator keeps a PodDisruptionBudget (maxUnavailable 1)
    /// for the cluster's pods. `false` deletes the one it made.
    #[serde(default = "default_true")]
    pub enabled: bool,
}

fn default_true() -> bool {
    true
}

impl BindClusterSpec {
    /// Whether the cluster gets a PodDisruptionBudget (the default).
    pub fn pod_disruption_budget_enabled(&self) -> bool {
        self.pod_disruption_budget
            .as_ref()
            .is_none_or(|p| p.enabled)
    }
}

/// Persistent storage for the primary's zone data.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// Requested volume size.
    #[serde(default = "default_storage_size")]
    pub size: Quantity,
    /// StorageClass of the claim. Unset: the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// A zone answered by forwarding (BIND `zone "<zone>" { type forward; }`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ForwardZone {
    /// The forwarded zone, e.g. `corp.example.com`.
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN))]
    pub zone: String,
    /// IP addresses of the servers queries for this zone go to.
    #[schemars(length(min = 1, max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_IP_LEN), regex(pattern = IP_PATTERN)))]
    #[x_kube(validation = Rule::new(RULE_ALL_IPS).message(MSG_FORWARDERS_IPS))]
    pub forwarders: Vec<String>,
    /// Only forward (`forward only`); false lets BIND fall back to iterative
    /// resolution when the forwarders fail (`forward first`).
    #[serde(default)]
    pub forward_only: bool,
}

/// A BIND view: which clients see which zones.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// View name; BindZones select it with spec.view.
    #[schemars(length(min = 1, max = MAX_VIEW_NAME_LEN), regex(pattern = VIEW_NAME_PATTERN))]
    pub name: String,
    /// Address match list of clients (by source) this view answers (BIND
    /// `match-clients`). Unset: any. The operator puts a key of its own
    /// first (`key <view>.view.<transfer key name>`, derived from the
    /// transfer key): messages signed with it always reach this view, which
    /// is how the operator's updates and the secondaries' transfers find it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_ACL_ELEMENT_LEN), regex(pattern = ACL_ELEMENT_PATTERN)))]
    pub match_clients: Vec<String>,
    /// Address match list of server addresses (by destination) this view
    /// answers (BIND `match-destinations`). Unset: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_ACL_ELEMENT_LEN), regex(pattern = ACL_ELEMENT_PATTERN)))]
    pub match_destinations: Vec<String>,
    /// Recursion inside this view. Unset: the cluster's spec.recursion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursion: Option<bool>,
}

/// The cluster's catalog zone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSpec {
    /// Name of the catalog zone. Unset: `<name>.<namespace>.catalog.invalid`
    /// (derived from the cluster, never a real zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN))]
    pub zone_name: Option<String>,
    /// Name of the BindTSIGKey (same namespace) that signs zone transfers and
    /// NOTIFY between the primary and the secondaries. Unset: the operator
    /// generates a key once into the Secret `<cluster>-transfer`, owned by
    /// the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub transfer_key_ref: Option<String>,
}

/// Observed state of a BindCluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindClusterStatus {
    /// metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods of the StatefulSet that are Ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Pod name -> sha256 (hex) of the named.conf plus keys.conf that pod last
    /// loaded with `rndc reconfig`. Pods that no longer exist drop out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub applied_config: BTreeMap<String, String>,
    /// Latest observations: `Ready`, and `ConfigApplied` with reasons Applied,
    /// Propagating, ReconfigFailed (message carries named-checkconf file:line)
    /// and ExecFailed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

// --- spec.external: a BIND the operator did not deploy -----------------------

/// DNS port when an external server's `port` is not set.
pub const DEFAULT_DNS_PORT: u16 = 53;
/// rndc control-channel port when `rndc.port` is not set (BIND's default).
pub const DEFAULT_RNDC_PORT: u16 = 953;

fn default_dns_port() -> u16 {
    DEFAULT_DNS_PORT
}

fn default_rndc_port() -> u16 {
    DEFAULT_RNDC_PORT
}

/// A BIND server the operator did not deploy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSpec {
    /// The primary: every write (TSIG-signed DNS UPDATE, rndc) goes here
    /// and nowhere else.
    pub primary: ExternalServer,
    /// Servers that only ever get read (SOA serials shown in each zone's
    /// status), e.g. the primary's secondaries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS))]
    pub secondaries: Vec<ExternalServer>,
    /// Name of the BindTSIGKey (same namespace) the primary already trusts
    /// for zone transfers (`allow-transfer { key ...; }`): the operator
    /// reads zones with it to find drift and other clients' data.
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub transfer_key_ref: String,
    /// The primary's rndc control channel. Set: a BindZone whose zone the
    /// primary does not serve is created there (`rndc addzone`) and removed
    /// again (`rndc delzone`) when the BindZone is deleted. Unset: such a
    /// zone is reported `ZoneNotFound`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rndc: Option<ExternalRndc>,
}

/// An external server's DNS address.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalServer {
    /// IP address (no hostname: what is written to must not move with DNS).
    #[schemars(length(min = 1, max = MAX_IP_LEN), regex(pattern = IP_PATTERN))]
    pub address: String,
    /// DNS port (TCP). Default 53.
    #[serde(default = "default_dns_port")]
    #[schemars(range(min = 1))]
    pub port: u16,
}

/// An external primary's rndc control channel (BIND `controls`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalRndc {
    /// IP address of the control channel.
    #[schemars(length(min = 1, max = MAX_IP_LEN), regex(pattern = IP_PATTERN))]
    pub address: String,
    /// Control-channel port. Default 953.
    #[serde(default = "default_rndc_port")]
    #[schemars(range(min = 1))]
    pub port: u16,
    /// Name of the BindTSIGKey (same namespace) whose algorithm and secret
    /// are those of a key in the server's `controls ... keys { }`. The
    /// control channel carries no key name, so its keyName need not match
    /// (and cannot be `rndc-key`, which the operator keeps for its own
    /// clusters).
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub key_ref: String,
}
