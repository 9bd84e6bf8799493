//! Custom resource types for group `bind.unkin.net`, version `v1alpha1`: one
//! module per kind, the shared pieces in `common`, and the admission rules
//! (patterns, bounds, CEL) in `validation`; `crdgen` turns the types into
//! CRDs and `admission` checks a manifest against them as kube-apiserver would.
//!
//! Types only: nothing in here talks to the cluster. Key material never lives
//! in these types; they only name the Secrets that hold it.

pub mod admission;
pub mod bindcluster;
pub mod bindtsigkey;
pub mod bindzone;
pub mod common;
pub mod crdgen;
pub mod dnsrecord;
pub mod validation;

pub use bindcluster::{
    BindCluster, BindClusterSpec, BindClusterStatus, CatalogConsumer, CatalogSpec, DnsServiceSpec,
    DnssecValidation, ExternalRndc, ExternalSecondary, ExternalServer, ExternalSpec,
    ExternalTrafficPolicy, ForwardZone, ImagePullPolicy, ServerAddress, ServiceType, StorageSpec,
    TrustAnchor, TrustAnchorType, View,
};
pub use bindtsigkey::{BindTSIGKey, BindTSIGKeySpec, BindTSIGKeyStatus, TsigAlgorithm};
pub use bindzone::{
    BindZone, BindZoneSpec, BindZoneStatus, ExternalSecondaryStatus, FromNamespaces, GrantMatch,
    LabelOperator, LabelRequirement, NamespaceSelector, RecordsFrom, SoaSpec, UpdateGrant,
    ZoneDnssecStatus, ZonePrimary, ZoneRecord, ZoneType,
};
pub use common::*;
pub use dnsrecord::{DNSRecord, DNSRecordSpec, DNSRecordStatus, RecordType, UnknownRecordType};
