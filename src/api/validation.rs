//! Admission-time validation shared by the CRD types: the `pattern`s, length
//! bounds and CEL rules the generated CRDs carry.
//!
//! Nothing here touches the cluster. Every string a user writes that can reach
//! named.conf, a zone file or an nsupdate script is fenced here first: the
//! patterns admit no space, quote, brace, semicolon or newline, so nothing a
//! user writes can escape into BIND's configuration. Later layers validate
//! again into strict types; this is the first gate, not the only one.
//!
//! The API server estimates each CEL rule's worst-case cost from the schema's
//! bounds and refuses the whole CRD when it is too high, so every list and
//! string a rule touches carries a `maxItems` / `maxLength` (see
//! KUBE_FACTS.md). Rules written here were accepted by a real API server.

/// Longest DNS name in presentation form (RFC 1035: 255 octets on the wire).
pub const MAX_DNS_NAME_LEN: u32 = 255;
/// Longest Kubernetes object name (DNS-1123 subdomain).
pub const MAX_K8S_NAME_LEN: u32 = 253;
/// Longest record type mnemonic we accept (`TLSA`, `NAPTR`, ...).
pub const MAX_TYPE_LEN: u32 = 10;
/// Longest single rdata value in presentation format.
pub const MAX_VALUE_LEN: u32 = 4096;
/// Most values in one RRset: BIND's own per-RRset limit in this operator.
pub const MAX_VALUES: u32 = 100;
/// Most inline record sets in one BindZone.
///
/// The API server multiplies a CEL rule's cost through every enclosing list:
/// the inline A/AAAA `isIP` rules cost about records x values x value length,
/// and a kube-apiserver v1.36 refuses the whole CRD above ~12.4 million
/// (measured: 256 x 32 x 2048 and 256 x 16 x 4096 are refused at 1.35x the
/// budget). Inline records favour many small RRsets (256 x 16 x 2048 = 8.4
/// million, 0.68 of the budget): a round-robin set wider than 16 values, a
/// value longer than 2048 characters or a zone with more than 256 inline sets
/// uses DNSRecord objects, whose own limits are [`MAX_VALUES`] and
/// [`MAX_VALUE_LEN`].
pub const MAX_INLINE_RECORDS: u32 = 256;
/// Most values in one inline record set (see [`MAX_INLINE_RECORDS`]).
pub const MAX_INLINE_VALUES: u32 = 16;
/// Longest value of an inline record set (see [`MAX_INLINE_RECORDS`]): a
/// 4096-bit DKIM key (~800 characters) fits.
pub const MAX_INLINE_VALUE_LEN: u32 = 2048;
/// Most apex nameservers of one zone.
pub const MAX_NAMESERVERS: u32 = 32;
/// Most entries in an address match list or forwarder list.
pub const MAX_LIST_ITEMS: u32 = 64;
/// Longest address-match-list element (`!key <255-char name>` fits).
pub const MAX_ACL_ELEMENT_LEN: u32 = 262;
/// Longest IP address in text form (IPv6 with embedded IPv4).
pub const MAX_IP_LEN: u32 = 45;
/// Longest view name.
pub const MAX_VIEW_NAME_LEN: u32 = 63;

/// A Kubernetes object name (DNS-1123 subdomain), as used by every `*Ref`.
pub const K8S_NAME_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Longest namespace name (DNS-1123 label).
pub const MAX_NAMESPACE_LEN: u32 = 63;
/// A namespace name (DNS-1123 label).
pub const NAMESPACE_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// A domain name (zone name, nameserver, key name): dot-separated labels of
/// letters, digits, `_` and `-`, optionally with a trailing dot. Rejects
/// everything that could escape a quoted named.conf string.
pub const DNS_NAME_PATTERN: &str = r"^([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?$";

/// A record owner name: `@`, relative (`www`, `_sip._tcp`, `*.app`) or
/// absolute with a trailing dot. The pattern that a real API server used to
/// reject a name carrying `"; include` at admission.
pub const OWNER_NAME_PATTERN: &str = r"^(@|[A-Za-z0-9_*]([A-Za-z0-9_.-]*[A-Za-z0-9_.])?)$";

/// One rdata value in presentation format: anything printable on one line.
/// Newlines and other control characters would start a new nsupdate command.
pub const VALUE_PATTERN: &str = r"^[^\x00-\x1F\x7F]+$";

/// A view name: a plain word BIND can take unquoted or quoted.
pub const VIEW_NAME_PATTERN: &str = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$";

/// An element of a BIND address match list: optional `!`, then `any`,
/// `none`, `localhost`, `localnets`, an IP address or CIDR, or `key <name>`.
pub const ACL_ELEMENT_PATTERN: &str =
    r"^!?(any|none|localhost|localnets|[0-9A-Fa-f:.]+(/[0-9]{1,3})?|key [A-Za-z0-9_.-]+)$";

/// An IP address (checked precisely by a CEL `isIP` rule; the pattern keeps
/// the character set safe for rendering).
pub const IP_PATTERN: &str = r"^[0-9A-Fa-f:.]+$";

/// CEL: the seed's apex-NS rule (accepted by a real API server). An absolute
/// apex name (`example.com.`) passes because CEL does not know the zone; the
/// DNSRecord reconciler reports that case as `ApexNSUnsupported`.
pub const RULE_NO_APEX_NS: &str = "!(self.type.lowerAscii() == 'ns' && (!has(self.name) || self.name == '@' || self.name.size() == 0))";
/// Message for [`RULE_NO_APEX_NS`]; it names the field to use instead.
pub const MSG_NO_APEX_NS: &str = "an apex NS RRset cannot be managed by a DNSRecord: BIND ignores an RRset-wide delete at a zone apex, so this would only append. Use BindZone.spec.nameservers";

/// CEL: every value of an A RRset is an IPv4 address.
pub const RULE_A_IS_IPV4: &str =
    "self.type != 'A' || self.values.all(v, isIP(v) && ip(v).family() == 4)";
/// Message for [`RULE_A_IS_IPV4`].
pub const MSG_A_IS_IPV4: &str =
    "every value of an A record must be an IPv4 address such as 192.0.2.10";

/// CEL: every value of an AAAA RRset is an IPv6 address.
pub const RULE_AAAA_IS_IPV6: &str =
    "self.type != 'AAAA' || self.values.all(v, isIP(v) && ip(v).family() == 6)";
/// Message for [`RULE_AAAA_IS_IPV6`].
pub const MSG_AAAA_IS_IPV6: &str =
    "every value of an AAAA record must be an IPv6 address such as 2001:db8::10";

/// CEL: a CNAME RRset has exactly one value.
pub const RULE_CNAME_SINGLE: &str = "self.type != 'CNAME' || self.values.size() == 1";
/// Message for [`RULE_CNAME_SINGLE`].
pub const MSG_CNAME_SINGLE: &str =
    "a CNAME record must have exactly one value (a name can alias only one target)";

/// CEL: a field keeps its first value (`zoneRef`, `zoneName`).
pub const RULE_IMMUTABLE: &str = "self == oldSelf";
/// Message for `zoneRef` immutability.
pub const MSG_ZONE_REF_IMMUTABLE: &str =
    "zoneRef is immutable: delete this DNSRecord and create one in the other zone";
/// CEL on a DNSRecord spec (a transition rule): `zoneNamespace` keeps its
/// first value and cannot be added or removed later (the RRset already
/// written lives in the other zone).
pub const RULE_ZONE_NAMESPACE_IMMUTABLE: &str = "(has(self.zoneNamespace) ? self.zoneNamespace : '') == (has(oldSelf.zoneNamespace) ? oldSelf.zoneNamespace : '')";
/// Message for [`RULE_ZONE_NAMESPACE_IMMUTABLE`].
pub const MSG_ZONE_NAMESPACE_IMMUTABLE: &str = "zoneNamespace is immutable (it cannot be set, changed or removed later): delete this DNSRecord and create one for the other zone";
/// Most `spec.recordsFrom` grants on one zone.
pub const MAX_RECORD_GRANTS: u32 = 32;
/// Most owner names one `recordsFrom` grant lists.
pub const MAX_GRANT_NAMES: u32 = 32;
/// CEL on a `recordsFrom` grant: a selector with, and only with, `from: Selector`.
pub const RULE_RECORDS_FROM_SELECTOR: &str = "(self.from == 'Selector') == has(self.selector)";
/// Message for [`RULE_RECORDS_FROM_SELECTOR`].
pub const MSG_RECORDS_FROM_SELECTOR: &str = "recordsFrom[].selector is required when from is Selector and not allowed when from is Same or All";
/// A `recordsFrom` name: `@`, `*` (every name below the apex), an exact
/// relative name, or `*.` and a relative suffix (every name below it).
pub const GRANT_NAME_PATTERN: &str = r"^(@|\*|(\*\.)?[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?)$";
/// Message for `zoneName` immutability.
pub const MSG_ZONE_NAME_IMMUTABLE: &str =
    "zoneName is immutable: create a new BindZone for the other zone name and delete this one";

/// CEL on a cluster's catalog (a transition rule; `spec.catalog` defaults
/// to `{}`, so it runs on every update and adding or removing the whole
/// block is judged too, not only a change inside it): the catalog zone
/// keeps its name. Secondaries keep a catalog's members only while that
/// catalog lives; a renamed catalog left a secondary answering none of its
/// zones while every object said Ready. A block with only `transferKeyRef` may come and go (the
/// name stays the derived one).
pub const RULE_CATALOG_NAME_KEPT: &str =
    "(has(self.zoneName) ? self.zoneName : '') == (has(oldSelf.zoneName) ? oldSelf.zoneName : '')";
/// Message for [`RULE_CATALOG_NAME_KEPT`].
pub const MSG_CATALOG_NAME_KEPT: &str = "spec.catalog.zoneName cannot be set, changed or removed on an existing BindCluster, in place or by adding or removing the whole spec.catalog block (the secondaries would lose every zone of the old catalog): keep spec.catalog.zoneName as it is, or create a new BindCluster with the new catalog name and move the zones to it";

/// CEL: every entry of a list is an IP address.
pub const RULE_ALL_IPS: &str = "self.all(a, isIP(a))";
/// Message for [`RULE_ALL_IPS`] on forwarders.
pub const MSG_FORWARDERS_IPS: &str =
    "forwarders must be IP addresses such as 192.0.2.53 or 2001:db8::53";

/// CEL: a single string is an IP address.
pub const RULE_IS_IP: &str = "isIP(self)";
/// Message for [`RULE_IS_IP`] on a zone's primaries.
pub const MSG_PRIMARY_ADDRESS_IP: &str =
    "primaries[].address must be an IP address (BIND transfers from addresses, not host names)";

/// CEL: a secondary zone names where to transfer from; a primary zone does not.
pub const RULE_SECONDARY_PRIMARIES: &str = "(has(self.type) && self.type == 'secondary') == (has(self.primaries) && self.primaries.size() > 0)";
/// Message for [`RULE_SECONDARY_PRIMARIES`].
pub const MSG_SECONDARY_PRIMARIES: &str = "spec.primaries is required when spec.type is secondary and not allowed when spec.type is primary";

/// Most `spec.updatePolicy` grants on one zone.
pub const MAX_UPDATE_GRANTS: u32 = 32;
/// CEL on an update grant: a name for every rule but `zonesub`, which takes none.
pub const RULE_GRANT_NAME: &str = "self.match == 'zonesub' ? !has(self.name) : has(self.name)";
/// Message for [`RULE_GRANT_NAME`].
pub const MSG_GRANT_NAME: &str = "updatePolicy[].name is required for match name, subdomain and wildcard, and not allowed for match zonesub";
/// CEL on a zone: update grants only on primary zones.
pub const RULE_GRANTS_PRIMARY: &str = "!(has(self.type) && self.type == 'secondary') || !has(self.updatePolicy) || self.updatePolicy.size() == 0";
/// Message for [`RULE_GRANTS_PRIMARY`].
pub const MSG_GRANTS_PRIMARY: &str =
    "spec.updatePolicy is only for primary zones (a secondary zone takes no dynamic updates)";

// `dnssecValidation: yes` without trustAnchors is refused by the cluster
// controller's validation (status InvalidSpec, nothing renders), not by CEL:
// a rule on BindClusterSpec would put the whole spec (affinity,
// tolerations, ...) under the cost estimate.
/// CEL on a trust anchor: the fields its type needs.
pub const RULE_ANCHOR_FIELDS: &str = "self.type.endsWith('-ds') ? (has(self.keyTag) && has(self.digestType) && has(self.digest)) : (has(self.flags) && has(self.publicKey))";
/// Message for [`RULE_ANCHOR_FIELDS`].
pub const MSG_ANCHOR_FIELDS: &str = "a static-ds or initial-ds anchor needs keyTag, digestType and digest; a static-key or initial-key anchor needs flags and publicKey";

/// CEL on BindCluster.spec: an external cluster deploys nothing, so no field
/// that shapes pods, Services or named.conf may be set beside `external`.
/// `replicas` and `image` carry schema defaults, so only their defaults pass.
pub const RULE_EXTERNAL_DEPLOYS_NOTHING: &str = "!has(self.external) || (self.replicas == 2 && self.image == 'internetsystemsconsortium/bind9:9.20' && !has(self.imagePullPolicy) && !has(self.imagePullSecrets) && !has(self.resources) && !has(self.nodeSelector) && !has(self.tolerations) && !has(self.affinity) && !has(self.podAnnotations) && !has(self.podSecurityContext) && !has(self.securityContext) && !has(self.podDisruptionBudget) && !has(self.service) && !has(self.storage) && (!has(self.recursion) || !self.recursion) && !has(self.allowQuery) && !has(self.allowRecursion) && !has(self.forwarders) && (!has(self.forwardOnly) || !self.forwardOnly) && !has(self.dnssecValidation) && !has(self.trustAnchors) && !has(self.validateExcept) && !has(self.forwardZones) && !has(self.views) && !has(self.externalSecondaries) && !has(self.catalogConsumers) && (!has(self.catalog) || (!has(self.catalog.zoneName) && !has(self.catalog.transferKeyRef))))";
/// Message for [`RULE_EXTERNAL_DEPLOYS_NOTHING`].
pub const MSG_EXTERNAL_DEPLOYS_NOTHING: &str = "spec.external is a BIND the operator did not deploy: it cannot be set together with fields that deploy or configure pods (replicas, image, resources, scheduling, service, storage, catalog, views, externalSecondaries, catalogConsumers, recursion and the other named.conf options); configure those on that server itself";
/// Message for [`RULE_IS_IP`] on an external secondary's or a consumed
/// catalog primary's address.
pub const MSG_EXTERNAL_ADDRESS_IP: &str =
    "address must be an IP address (BIND notifies and transfers by address, not by host name)";
