//! Manifest documents for local mode: which kinds a manifest directory may
//! hold, how one YAML/JSON file splits into documents, and how each document
//! is checked and normalised into the object that would be applied — the
//! answer kube-apiserver would give, without one: our four kinds go through
//! [`crate::api::admission::admit`] (schema defaults, structural schema, CEL);
//! Secret, ConfigMap and Namespace get the checks their built-in validation
//! does (in `builtin`).
//!
//! Pure: no I/O, no cluster. Every problem is a [`ManifestError`] value that
//! names the file and the 1-based document (and its first line); nothing here
//! panics on user input. It must never put Secret contents into an error
//! message or a `Debug` string. Reading a directory is in `manifest_dir`.

use std::fmt;
use std::path::PathBuf;

use kube::core::ApiResource;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::builtin::{check_config_map, check_name, check_namespace, check_secret, is_dns_label};
use crate::api::admission::{AdmissionError, admit};
use crate::api::{API_VERSION, BindCluster, BindTSIGKey, BindZone, DNSRecord};

/// Namespace of a namespaced object whose manifest names none (as kubectl).
pub const DEFAULT_NAMESPACE: &str = "default";

/// Metadata the server owns; a manifest exported with `kubectl get -o yaml`
/// carries them, and sending `resourceVersion` back would turn the apply into
/// a conditional write that fails once the object moved on.
const SERVER_OWNED_METADATA: &[&str] = &[
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The kinds a manifest directory may hold, in the order they are applied
/// (what others refer to first) — deletions run in the reverse order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ManifestKind {
    Namespace,
    Secret,
    ConfigMap,
    BindTSIGKey,
    BindCluster,
    BindZone,
    DNSRecord,
}

impl ManifestKind {
    /// Every kind, in apply order.
    pub const ALL: [ManifestKind; 7] = [
        ManifestKind::Namespace,
        ManifestKind::Secret,
        ManifestKind::ConfigMap,
        ManifestKind::BindTSIGKey,
        ManifestKind::BindCluster,
        ManifestKind::BindZone,
        ManifestKind::DNSRecord,
    ];

    /// The kind written as `apiVersion`/`kind` in a manifest, if supported.
    pub fn from_manifest(api_version: &str, kind: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == kind && k.api_version() == api_version)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ManifestKind::Namespace => "Namespace",
            ManifestKind::Secret => "Secret",
            ManifestKind::ConfigMap => "ConfigMap",
            ManifestKind::BindTSIGKey => "BindTSIGKey",
            ManifestKind::BindCluster => "BindCluster",
            ManifestKind::BindZone => "BindZone",
            ManifestKind::DNSRecord => "DNSRecord",
        }
    }

    pub fn api_version(self) -> &'static str {
        if self.is_custom() { API_VERSION } else { "v1" }
    }

    /// One of the four `bind.unkin.net` kinds (admitted against the CRDs).
    pub fn is_custom(self) -> bool {
        !matches!(
            self,
            ManifestKind::Namespace | ManifestKind::Secret | ManifestKind::ConfigMap
        )
    }

    pub fn is_namespaced(self) -> bool {
        self != ManifestKind::Namespace
    }

    /// What a `DynamicObject` request for this kind needs (URL plural, ...).
    pub fn api_resource(self) -> ApiResource {
        use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
        match self {
            ManifestKind::Namespace => ApiResource::erase::<Namespace>(&()),
            ManifestKind::Secret => ApiResource::erase::<Secret>(&()),
            ManifestKind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
            ManifestKind::BindTSIGKey => ApiResource::erase::<BindTSIGKey>(&()),
            ManifestKind::BindCluster => ApiResource::erase::<BindCluster>(&()),
            ManifestKind::BindZone => ApiResource::erase::<BindZone>(&()),
            ManifestKind::DNSRecord => ApiResource::erase::<DNSRecord>(&()),
        }
    }
}

impl fmt::Display for ManifestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Identity of one object: two documents with the same key are duplicates.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: ManifestKind,
    /// None for cluster-scoped kinds (Namespace).
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Where a document came from: a file relative to the manifest directory,
/// and which document in it (1-based, counting documents with content).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DocRef {
    pub file: PathBuf,
    /// None when the problem is the whole file (unreadable, ...).
    pub document: Option<usize>,
    /// 1-based line where the document starts.
    pub line: Option<usize>,
}

impl DocRef {
    pub fn file(file: impl Into<PathBuf>) -> Self {
        Self {
            file: file.into(),
            document: None,
            line: None,
        }
    }
}

impl fmt::Display for DocRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(doc) = self.document {
            write!(f, " document {doc}")?;
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// What class of problem a [`ManifestError`] is (a stable category).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Problem {
    /// The file or directory could not be read.
    Read,
    /// Not YAML/JSON, or not a mapping.
    Parse,
    /// apiVersion/kind missing or not one local mode loads.
    UnknownKind,
    /// metadata.name missing or empty.
    MissingName,
    /// Names, schema or CEL rules reject the object.
    Invalid,
    /// The same object is defined earlier in the directory.
    Duplicate,
    /// The API server refused to apply or delete it.
    Rejected,
}

impl Problem {
    pub fn as_str(self) -> &'static str {
        match self {
            Problem::Read => "ReadFailed",
            Problem::Parse => "ParseFailed",
            Problem::UnknownKind => "UnknownKind",
            Problem::MissingName => "MissingName",
            Problem::Invalid => "Invalid",
            Problem::Duplicate => "Duplicate",
            Problem::Rejected => "Rejected",
        }
    }
}

/// One bad document (or file). `kind`/`namespace`/`name` are filled as far
/// as the document told them, so the report can show which object it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct ManifestError {
    pub at: DocRef,
    pub problem: Problem,
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Written for the person who wrote the manifest; never Secret contents.
    pub message: String,
}

impl ManifestError {
    pub fn new(at: DocRef, problem: Problem, message: impl Into<String>) -> Self {
        Self {
            at,
            problem,
            kind: None,
            namespace: None,
            name: None,
            message: message.into(),
        }
    }

    /// The object this error is about, when the document named one fully.
    pub fn key(&self) -> Option<ObjectKey> {
        let kind = ManifestKind::ALL
            .into_iter()
            .find(|k| Some(k.as_str()) == self.kind.as_deref())?;
        Some(ObjectKey {
            kind,
            namespace: if kind.is_namespaced() {
                self.namespace.clone()
            } else {
                None
            },
            name: self.name.clone().filter(|n| !n.is_empty())?,
        })
    }

    fn about(mut self, kind: &str, namespace: Option<&str>, name: Option<&str>) -> Self {
        self.kind = Some(kind.to_owned()).filter(|k| !k.is_empty());
        self.namespace = namespace.map(str::to_owned);
        self.name = name.map(str::to_owned).filter(|n| !n.is_empty());
        self
    }
}

/// One accepted document: the object exactly as it is applied.
#[derive(Clone)]
pub struct Manifest {
    pub at: DocRef,
    pub key: ObjectKey,
    /// apiVersion, kind, metadata (namespace filled in, server-owned fields
    /// dropped), and the rest with schema defaults applied; no status.
    pub object: Value,
    /// sha256 of `object`, to tell a changed document from an unchanged one.
    pub hash: String,
}

// Manual so a Secret's data never reaches a log line through `{:?}`.
impl fmt::Debug for Manifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Manifest")
            .field("at", &self.at)
            .field("key", &self.key)
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

/// Splits `text` (the content of `file`) into documents and checks each.
/// `.json` files hold one JSON value or several concatenated; anything else
/// is read as multi-document YAML ([`crate::yaml::documents`]: split at
/// `---` lines, empty documents skipped). Documents are numbered 1, 2, ...
/// in the order they appear, whether they parse or not; the items of a
/// `kind: List` share their List's number.
pub fn parse_file(file: &std::path::Path, text: &str) -> Vec<Result<Manifest, ManifestError>> {
    let is_json = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let mut out = Vec::new();
    let mut number = 0;
    let mut next_at = |line: usize| {
        number += 1;
        DocRef {
            file: file.to_owned(),
            document: Some(number),
            line: Some(line),
        }
    };
    if is_json {
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        loop {
            // The value starts after the whitespace that follows the previous one.
            let rest = &text[stream.byte_offset()..];
            let skipped = rest.len() - rest.trim_start().len();
            let line = 1 + text[..stream.byte_offset() + skipped].matches('\n').count();
            let Some(item) = stream.next() else { break };
            match item {
                Ok(value) => check_each(&mut out, next_at(line), value),
                Err(e) => {
                    let at = next_at(e.line());
                    out.push(Err(ManifestError::new(
                        at,
                        Problem::Parse,
                        format!("failed to parse JSON: {e}"),
                    )));
                    // The stream cannot resynchronise after a syntax error.
                    break;
                }
            }
        }
        return out;
    }
    for doc in crate::yaml::documents(text) {
        match doc.value {
            Ok(value) => check_each(&mut out, next_at(doc.line), value),
            Err(message) => out.push(Err(ManifestError::new(
                next_at(doc.line),
                Problem::Parse,
                format!("failed to parse YAML: {message}"),
            ))),
        }
    }
    out
}

/// Checks one document: a `v1` `List` (what `kubectl get -o yaml` prints
/// for several objects) is its items, each checked as an object of its own
/// under the List's document reference; anything else is one object.
fn check_each(out: &mut Vec<Result<Manifest, ManifestError>>, at: DocRef, value: Value) {
    let items = value
        .as_object()
        .filter(|o| str_field(o, "apiVersion") == "v1" && str_field(o, "kind") == "List")
        .and_then(|o| o.get("items"))
        .and_then(Value::as_array);
    match items {
        Some(items) => {
            for item in items {
                out.push(check_document(at.clone(), item.clone()));
            }
        }
        None => out.push(check_document(at, value)),
    }
}

/// Checks one parsed document and normalises it into what is applied.
// The error is a value that is collected and reported, never bubbled up
// with `?` through hot paths, so its size does not matter.
#[allow(clippy::result_large_err)]
pub fn check_document(at: DocRef, value: Value) -> Result<Manifest, ManifestError> {
    let Value::Object(mut object) = value else {
        return Err(ManifestError::new(
            at,
            Problem::Parse,
            "document is not a mapping (expected an object with apiVersion, kind and metadata)",
        ));
    };
    let api_version = str_field(&object, "apiVersion");
    let kind_name = str_field(&object, "kind");
    let meta_str = |field: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let name = meta_str("name").unwrap_or_default();
    let given_namespace = meta_str("namespace").filter(|n| !n.is_empty());

    let Some(kind) = ManifestKind::from_manifest(&api_version, &kind_name) else {
        let err = ManifestError::new(
            at,
            Problem::UnknownKind,
            unknown_kind(&api_version, &kind_name),
        );
        return Err(err.about(&kind_name, given_namespace.as_deref(), Some(&name)));
    };
    let namespace = kind
        .is_namespaced()
        .then(|| given_namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()));
    let fail = |problem: Problem, message: String| {
        ManifestError::new(at.clone(), problem, message).about(
            kind.as_str(),
            namespace.as_deref(),
            Some(&name),
        )
    };

    if !object.get("metadata").is_none_or(Value::is_object) {
        return Err(fail(Problem::Invalid, "metadata must be a mapping".into()));
    }
    if name.is_empty() {
        let hint = if meta_str("generateName").is_some() {
            " (generateName is not supported: an applied object needs a fixed name)"
        } else {
            ""
        };
        return Err(fail(
            Problem::MissingName,
            format!("metadata.name is required{hint}"),
        ));
    }
    if let Some(ns) = &namespace
        && !is_dns_label(ns)
    {
        return Err(fail(
            Problem::Invalid,
            format!(
                "metadata.namespace {ns:?} must be a lowercase DNS-1123 label (at most 63 characters)"
            ),
        ));
    }

    // Normalise metadata: namespace explicit, server-owned fields gone.
    object.remove("status");
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .expect("checked to be a mapping above");
    for field in SERVER_OWNED_METADATA {
        metadata.remove(*field);
    }
    match &namespace {
        Some(ns) => {
            metadata.insert("namespace".into(), Value::String(ns.clone()));
        }
        None => {
            metadata.remove("namespace");
        }
    }

    let object = match kind {
        ManifestKind::Namespace => check_namespace(&name, object),
        ManifestKind::Secret => check_name(&name).and_then(|()| check_secret(object)),
        ManifestKind::ConfigMap => check_name(&name).and_then(|()| check_config_map(object)),
        _ => admit(&Value::Object(object), None).map_err(admission_message),
    }
    .map_err(|message| fail(Problem::Invalid, message))?;

    let hash = hex::encode(Sha256::digest(
        serde_json::to_vec(&object).expect("JSON values serialise"),
    ));
    Ok(Manifest {
        at,
        key: ObjectKey {
            kind,
            namespace,
            name,
        },
        object,
        hash,
    })
}

fn str_field(object: &Map<String, Value>, field: &str) -> String {
    object
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn unknown_kind(api_version: &str, kind: &str) -> String {
    const SUPPORTED: &str = "local mode loads BindCluster, BindZone, DNSRecord, BindTSIGKey \
        (bind.unkin.net/v1alpha1) and Secret, ConfigMap, Namespace (v1)";
    if api_version.is_empty() || kind.is_empty() {
        return format!("apiVersion and kind are required; {SUPPORTED}");
    }
    match ManifestKind::ALL.into_iter().find(|k| k.as_str() == kind) {
        Some(k) => format!(
            "kind {kind} needs apiVersion {}, not {api_version:?}",
            k.api_version()
        ),
        None => format!("unsupported kind {kind:?} (apiVersion {api_version:?}); {SUPPORTED}"),
    }
}

/// The violations alone: the file/document prefix already says which object.
pub(crate) fn admission_message(err: AdmissionError) -> String {
    match &err {
        AdmissionError::Invalid { violations, .. } => violations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The built-in kinds' checks (`builtin`), through the document checker.
    #[test]
    fn secret_string_data_becomes_base64_data() {
        let doc = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"},
            "data": {"a": "YQ=="},
            "stringData": {"b": "bb"}
        });
        let m = check_document(DocRef::file("s.yaml"), doc).unwrap();
        assert_eq!(m.object["data"]["b"], "YmI=");
        assert_eq!(m.object["data"]["a"], "YQ==");
        assert_eq!(m.object["type"], "Opaque");
        assert!(m.object.get("stringData").is_none());
        assert!(!format!("{m:?}").contains("YmI="));
    }

    #[test]
    fn bad_base64_is_reported_without_the_value() {
        let doc = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"},
            "data": {"k": "not base64 secret!"}
        });
        let err = check_document(DocRef::file("s.yaml"), doc).unwrap_err();
        assert_eq!(err.problem, Problem::Invalid);
        assert!(err.message.contains("data.k is not valid base64"));
        assert!(!err.to_string().contains("secret!"));
    }
}
