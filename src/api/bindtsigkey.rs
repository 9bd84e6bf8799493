//! BindTSIGKey: a TSIG key that BIND loads and that clients (the operator,
//! external-dns, secondaries) sign with.
//!
//! Types only; nothing here touches the cluster. The spec names where the key
//! material lives (a Secret); the material itself must never be copied into
//! this object, its status, or any Debug/log output.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::SecretKeyRef;
use super::validation::{DNS_NAME_PATTERN, K8S_NAME_PATTERN, MAX_DNS_NAME_LEN, MAX_K8S_NAME_LEN};

/// Desired state of a BindTSIGKey.
// printcolumn(...) repeats `type_ = "string"`; that is data, not a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "bind.unkin.net",
    version = "v1alpha1",
    kind = "BindTSIGKey",
    namespaced,
    status = "BindTSIGKeyStatus",
    shortname = "tsigkey",
    shortname = "btk",
    category = "bind",
    doc = "A TSIG key loaded by BIND clusters and used to sign dynamic updates, zone transfers and NOTIFY.",
    printcolumn(name = "Algorithm", type_ = "string", json_path = ".spec.algorithm"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterRef",
        description = "Empty means every cluster in the namespace loads the key"
    ),
    printcolumn(name = "Secret", type_ = "string", json_path = ".status.secretName"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BindTSIGKeySpec {
    /// Name of the BindCluster (same namespace) that loads this key. Empty: every
    /// BindCluster in the namespace loads it (a shared key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_K8S_NAME_LEN), regex(pattern = K8S_NAME_PATTERN))]
    pub cluster_ref: Option<String>,

    /// Name of the key inside BIND (what `key "<name>"` and clients' `-y
    /// <alg>:<name>:...` use). Defaults to metadata.name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_DNS_NAME_LEN), regex(pattern = DNS_NAME_PATTERN))]
    pub key_name: Option<String>,

    /// HMAC algorithm of the key. hmac-sha256 unless another is required by a
    /// peer; hmac-md5 and hmac-sha1 exist only for old clients.
    #[serde(default)]
    pub algorithm: TsigAlgorithm,

    /// Where the base64 key material lives. Absent: the operator generates a
    /// random key of the algorithm's size into a Secret it owns (named in
    /// status.secretName) and never rotates it by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyRef>,
}

/// TSIG HMAC algorithms BIND accepts, spelled as in named.conf.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default, JsonSchema)]
#[schemars(transform = super::common::drop_type_description, extend("maxLength" = 11))]
pub enum TsigAlgorithm {
    /// HMAC-SHA256 (the default; 32-byte key).
    #[default]
    #[serde(rename = "hmac-sha256")]
    HmacSha256,
    /// HMAC-SHA384 (48-byte key).
    #[serde(rename = "hmac-sha384")]
    HmacSha384,
    /// HMAC-SHA512 (64-byte key).
    #[serde(rename = "hmac-sha512")]
    HmacSha512,
    /// HMAC-SHA224 (28-byte key).
    #[serde(rename = "hmac-sha224")]
    HmacSha224,
    /// HMAC-SHA1 (20-byte key); only for old clients.
    #[serde(rename = "hmac-sha1")]
    HmacSha1,
    /// HMAC-MD5 (16-byte key); only for old clients.
    #[serde(rename = "hmac-md5")]
    HmacMd5,
}

impl TsigAlgorithm {
    /// Every algorithm, in the order the CRD lists them.
    pub const ALL: [TsigAlgorithm; 6] = [
        TsigAlgorithm::HmacSha256,
        TsigAlgorithm::HmacSha384,
        TsigAlgorithm::HmacSha512,
        TsigAlgorithm::HmacSha224,
        TsigAlgorithm::HmacSha1,
        TsigAlgorithm::HmacMd5,
    ];

    /// The spelling BIND, nsupdate and the CRD use (`hmac-sha256`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TsigAlgorithm::HmacSha256 => "hmac-sha256",
            TsigAlgorithm::HmacSha384 => "hmac-sha384",
            TsigAlgorithm::HmacSha512 => "hmac-sha512",
            TsigAlgorithm::HmacSha224 => "hmac-sha224",
            TsigAlgorithm::HmacSha1 => "hmac-sha1",
            TsigAlgorithm::HmacMd5 => "hmac-md5",
        }
    }

    /// Size in bytes of a generated key: the HMAC's output size, which is what
    /// RFC 8945 recommends as the minimum useful key length.
    pub fn key_len(self) -> usize {
        match self {
            TsigAlgorithm::HmacSha256 => 32,
            TsigAlgorithm::HmacSha384 => 48,
            TsigAlgorithm::HmacSha512 => 64,
            TsigAlgorithm::HmacSha224 => 28,
            TsigAlgorithm::HmacSha1 => 20,
            TsigAlgorithm::HmacMd5 => 16,
        }
    }
}

impl std::fmt::Display for TsigAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Observed state of a BindTSIGKey.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindTSIGKeyStatus {
    /// Name of the Secret holding the key material in use (spec.secretRef.name,
    /// or the Secret the operator generated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations; `Ready` is True once the key material resolves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
