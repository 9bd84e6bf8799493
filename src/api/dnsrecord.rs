//! DNSRecord: one record set (owner name + type) in a BindZone, written by
//! TSIG dynamic update — the external-dns write path as a CRD.
//!
//! Types only; nothing here touches the cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{MAX_TTL, Phase};
use super::validation::{
    K8S_NAME_PATTERN, MAX_DNS_NAME_LEN, MAX_K8S_NAME_LEN, MAX_NAMESPACE_LEN, MAX_VALUE_LEN,
    MAX_VALUES, MSG_A_IS_IPV4, MSG_AAAA_IS_IPV6, MSG_CNAME_SINGLE, MSG_NO_APEX_NS,
    MSG_ZONE_NAMESPACE_IMMUTABLE, MSG_ZONE_REF_IMMUTABLE, NAMESPACE_PATTERN, OWNER_NAME_PATTERN,
    RULE_A_IS_IPV4, RULE_AAAA_IS_IPV6, RULE_CNAME_SINGLE, RULE_IMMUTABLE, RULE_NO_APEX_NS,
    RULE_ZONE_NAMESPACE_IMMUTABLE, VALUE_PATTERN,
};

/// Owner name when spec.name is not set: the zone apex.
pub const APEX: &str = "@";

pub(crate) fn default_name() -> String {
    APEX.to_owned()
}

/// Desired state of a DNSRecord.
// printcolumn(...) repeats `type_ = "string"`; that is data, not a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "bind.unkin.net",
    version = "v1alpha1",
    kind = "DNSRecord",
    namespaced,
    status = "DNSRecordStatus",
    shortname = "bdr",
    shortname = "binddnsrecord",
    category = "bind",
    doc = "One record set (owner name and type) in a BindZone, kept on the zone's primary by TSIG-signed dynamic update.",
    printcolumn(name = "Zone", type_ = "string", json_path = ".spec.zoneRef"),
    printcolumn(
        name = "Zone Namespace",
        type_ = "string",
        priority = 1,
        json_path = ".spec.zoneNamespace"
    ),
    printcolumn(name = "Name", type_ = "string", json_path = ".spec.name"),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "FQDN",
        type_ = "string",
        priority = 1,
        json_path = ".status.fqdn"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        priority = 1,
        json_path = ".status.reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new(RULE_NO_APEX_NS).message(MSG_NO_APEX_NS))]
#[x_kube(validation = Rule::new(RULE_A_IS_IPV4).message(MSG_A_IS_IPV4))]
#[x_kube(validation = Rule::new(RULE_AAAA_IS_IPV6).message(MSG_AAAA_IS_IPV6))]
#[x_kube(validation = Rule::new(RULE_CNAME_SINGLE).message(MSG_CNAME_SINGLE))]
#[x_kube(validation = Rule::new(RULE_ZONE_NAMESPACE_IMMUTABLE).message(MSG_ZONE_NAMESPACE_IMMUTABLE))]
#[serde(rename_all = "camelCase")]
pub struct DNSRecordSpec {
    /// Name of the BindZone this record set belongs to (in zoneNamespace,
    /// else the record's own namespace); the cluster, view and update key
    /// come from it. Immutable.
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    #[x_kube(validation = Rule::new(RULE_IMMUTABLE).message(MSG_ZONE_REF_IMMUTABLE))]
    pub zone_ref: String,

    /// Namespace of the BindZone named by zoneRef. Unset: the record's own
    /// namespace. A zone in another namespace serves the record only if
    /// its `spec.recordsFrom` grants this namespace the name and type;
    /// otherwise the record is refused (`NotAllowed`). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_NAMESPACE_LEN), regex(pattern = NAMESPACE_PATTERN))]
    pub zone_namespace: Option<String>,

    /// Owner name: `@` for the apex, relative to the zone (`www`,
    /// `_sip._tcp`, `*.app`), or absolute with a trailing dot.
    #[serde(default = "default_name")]
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = OWNER_NAME_PATTERN))]
    pub name: String,

    /// Record type. The apex NS RRset is not allowed here: use
    /// BindZone.spec.nameservers.
    #[serde(rename = "type")]
    pub type_: RecordType,

    /// TTL in seconds. Unset: the zone's defaultTTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = MAX_TTL))]
    pub ttl: Option<u32>,

    /// Record data in presentation format, one entry per record of the set
    /// (e.g. `192.0.2.10`, `10 mail.example.com.`, `"v=spf1 -all"`).
    #[schemars(length(min = 1, max = MAX_VALUES), inner(length(min = 1, max = MAX_VALUE_LEN), regex(pattern = VALUE_PATTERN)))]
    pub values: Vec<String>,
}

impl DNSRecord {
    /// The namespace of the BindZone the record names: `spec.zoneNamespace`,
    /// else its own (`None` only for an object without a namespace).
    pub fn zone_namespace(&self) -> Option<String> {
        self.spec
            .zone_namespace
            .clone()
            .or_else(|| self.metadata.namespace.clone())
    }
}

/// Record types a DNSRecord or inline zone record may manage.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[allow(clippy::upper_case_acronyms)]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 10))]
pub enum RecordType {
    /// IPv4 address.
    A,
    /// IPv6 address.
    AAAA,
    /// Alias to one canonical name.
    CNAME,
    /// Mail exchanger (`<preference> <host>`).
    MX,
    /// Text strings.
    TXT,
    /// Service location (`<priority> <weight> <port> <target>`).
    SRV,
    /// Reverse pointer.
    PTR,
    /// Certification authority authorization.
    CAA,
    /// Delegation to nameservers (not at the apex).
    NS,
    /// Delegation signer of a signed child zone.
    DS,
    /// DANE certificate association.
    TLSA,
    /// SSH host key fingerprint.
    SSHFP,
    /// Naming authority pointer.
    NAPTR,
    /// Service binding.
    SVCB,
    /// HTTPS service binding.
    HTTPS,
    /// Subtree alias.
    DNAME,
    /// Geographic location.
    LOC,
}

impl RecordType {
    /// Every type, in the order the CRD lists them.
    pub const ALL: [RecordType; 17] = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::CNAME,
        RecordType::MX,
        RecordType::TXT,
        RecordType::SRV,
        RecordType::PTR,
        RecordType::CAA,
        RecordType::NS,
        RecordType::DS,
        RecordType::TLSA,
        RecordType::SSHFP,
        RecordType::NAPTR,
        RecordType::SVCB,
        RecordType::HTTPS,
        RecordType::DNAME,
        RecordType::LOC,
    ];

    /// The mnemonic as written in zone files and nsupdate (`A`, `AAAA`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            RecordType::A => "A",
            RecordType::AAAA => "AAAA",
            RecordType::CNAME => "CNAME",
            RecordType::MX => "MX",
            RecordType::TXT => "TXT",
            RecordType::SRV => "SRV",
            RecordType::PTR => "PTR",
            RecordType::CAA => "CAA",
            RecordType::NS => "NS",
            RecordType::DS => "DS",
            RecordType::TLSA => "TLSA",
            RecordType::SSHFP => "SSHFP",
            RecordType::NAPTR => "NAPTR",
            RecordType::SVCB => "SVCB",
            RecordType::HTTPS => "HTTPS",
            RecordType::DNAME => "DNAME",
            RecordType::LOC => "LOC",
        }
    }
}

impl std::fmt::Display for RecordType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RecordType {
    type Err = UnknownRecordType;

    /// Parses a mnemonic case-insensitively (dig and AXFR output are upper
    /// case, hand-written zone text may not be).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RecordType::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownRecordType(s.to_owned()))
    }
}

/// A record type mnemonic outside [`RecordType::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown record type {0:?}")]
pub struct UnknownRecordType(pub String);

/// Observed state of a DNSRecord.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DNSRecordStatus {
    /// Pending (waiting for the zone or primary), Ready (served), or Error
    /// (see reason and message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Machine-readable cause of the phase, e.g. ApexNSUnsupported, Conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail of the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Absolute owner name (trailing dot) of the RRset last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fqdn: Option<String>,
    /// Type of the RRset last written. With fqdn it names what the finalizer
    /// removes, even after spec.name or spec.type changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_type: Option<RecordType>,
    /// metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations; `Ready` mirrors phase Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
