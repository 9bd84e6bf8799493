//! Admission without an API server: checks a manifest of one of our kinds the
//! way kube-apiserver would when it is created or updated — schema defaults,
//! then the structural schema (types, required fields, unknown fields, enums,
//! patterns, length/item bounds, numeric ranges), then the CEL rules, evaluated
//! by kube's client-side CEL engine against the very CRDs `crds/` holds.
//!
//! Used where no API server stands in front of the objects (local mode, the
//! in-memory API, tests) so that bad input gets the same answer there as on a
//! cluster. Pure: no cluster access, no I/O. It must never be the only guard
//! before BIND: later layers still validate into strict types.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use kube::core::cel::{CompiledSchema, Validator, apply_defaults, compile_schema};
use regex::Regex;
use serde_json::Value;

use super::common::API_VERSION;
use super::crdgen::crds;

/// Longest excerpt of a rejected value quoted back in a message.
const MAX_QUOTED_VALUE: usize = 64;

/// One reason a manifest is rejected, at a JSON path such as `spec.values[1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Dotted path of the offending field (`spec.name`); empty for the root.
    pub path: String,
    /// What is wrong, written for the person who wrote the manifest.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why a manifest was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// `apiVersion` is not `bind.unkin.net/v1alpha1`.
    #[error("failed to admit object: apiVersion {0:?} is not {API_VERSION}")]
    WrongApiVersion(String),
    /// `kind` is not one of the four kinds.
    #[error(
        "failed to admit object: kind {0:?} is not one of BindCluster, BindZone, DNSRecord, BindTSIGKey"
    )]
    UnknownKind(String),
    /// The object breaks the schema or a CEL rule.
    #[error("failed to admit {kind} {name:?}: {}", join(.violations))]
    Invalid {
        /// Kind of the rejected object.
        kind: String,
        /// metadata.name of the rejected object (may be empty).
        name: String,
        /// Every violation found, schema ones first, then CEL ones.
        violations: Vec<Violation>,
    },
}

impl AdmissionError {
    /// The individual violations (empty for a wrong apiVersion or kind).
    pub fn violations(&self) -> &[Violation] {
        match self {
            AdmissionError::Invalid { violations, .. } => violations,
            _ => &[],
        }
    }
}

fn join(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The openAPIV3 schema of one kind with its CEL rules compiled once.
struct KindSchema {
    schema: Value,
    compiled: CompiledSchema,
}

fn schemas() -> &'static HashMap<String, KindSchema> {
    static SCHEMAS: OnceLock<HashMap<String, KindSchema>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        crds()
            .into_iter()
            .map(|crd| {
                let schema = crd.spec.versions[0]
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                    .map(|s| serde_json::to_value(s).expect("a CRD schema is JSON"))
                    .expect("derived CRDs carry an openAPIV3Schema");
                let compiled = compile_schema(&schema);
                (crd.spec.names.kind, KindSchema { schema, compiled })
            })
            .collect()
    })
}

thread_local! {
    // The CEL function registry is built once per thread; Validator is Send
    // but not shareable across threads.
    static VALIDATOR: RefCell<Option<Validator>> = const { RefCell::new(None) };
}

/// Admits `object` (a full manifest: apiVersion, kind, metadata, spec, ...)
/// as kube-apiserver would on create (`old` = None) or update (`old` = the
/// stored object, for transition rules such as immutable fields).
///
/// Returns the object with schema defaults applied, which is what the API
/// server would store.
pub fn admit(object: &Value, old: Option<&Value>) -> Result<Value, AdmissionError> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if api_version != API_VERSION {
        return Err(AdmissionError::WrongApiVersion(api_version.to_owned()));
    }
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(kind_schema) = schemas().get(kind) else {
        return Err(AdmissionError::UnknownKind(kind.to_owned()));
    };
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();

    let defaulted = apply_defaults(&kind_schema.schema, object);
    let mut violations = Vec::new();
    check_metadata(&defaulted, &mut violations);
    check_node(&kind_schema.schema, &defaulted, "", true, &mut violations);

    // CEL rules assume a structurally valid object (e.g. `values` is a list);
    // like the API server, only evaluate them once the schema holds.
    if violations.is_empty() {
        let result = VALIDATOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            let validator = slot.get_or_insert_with(Validator::new);
            validator.validate_compiled(&kind_schema.compiled, &defaulted, old)
        });
        if let Err(errors) = result {
            violations.extend(errors.iter().map(|e| Violation {
                path: e.field_path.clone(),
                message: e.message.clone(),
            }));
        }
    }

    if violations.is_empty() {
        Ok(defaulted)
    } else {
        Err(AdmissionError::Invalid {
            kind: kind.to_owned(),
            name,
            violations,
        })
    }
}

/// Admits a typed object (serialised first); see [`admit`].
pub fn admit_typed<K: serde::Serialize>(
    object: &K,
    old: Option<&K>,
) -> Result<Value, AdmissionError> {
    let object = serde_json::to_value(object).expect("API types serialise to JSON");
    let old = old.map(|o| serde_json::to_value(o).expect("API types serialise to JSON"));
    admit(&object, old.as_ref())
}

/// metadata.name must be a DNS-1123 subdomain (every kind here is named
/// like a Kubernetes object); metadata itself is not in the CRD schema.
fn check_metadata(object: &Value, out: &mut Vec<Violation>) {
    let name = object.pointer("/metadata/name").and_then(Value::as_str);
    let generate_name = object
        .pointer("/metadata/generateName")
        .and_then(Value::as_str);
    match name {
        Some(name) => {
            if name.len() > 253 || !regex(super::validation::K8S_NAME_PATTERN).is_match(name) {
                out.push(Violation {
                    path: "metadata.name".into(),
                    message: format!(
                        "invalid value {}: must be a lowercase DNS-1123 subdomain (letters, digits, '-', '.'; at most 253 characters)",
                        quote(name)
                    ),
                });
            }
        }
        None if generate_name.is_some() => {}
        None => out.push(Violation {
            path: "metadata.name".into(),
            message: "required value".into(),
        }),
    }
}

/// Checks `value` against one structural-schema node.
fn check_node(schema: &Value, value: &Value, path: &str, root: bool, out: &mut Vec<Violation>) {
    if value.is_null() {
        // The API server drops nulls of non-nullable fields and keeps them
        // for nullable ones; neither is an error.
        return;
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            out.push(violation(path, "must be an integer or a string"));
        }
        return;
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => check_object(schema, value, path, root, out),
        Some("array") => check_array(schema, value, path, out),
        Some("string") => check_string(schema, value, path, out),
        Some("integer") => {
            if !(value.is_i64() || value.is_u64()) {
                out.push(violation(path, "must be an integer"));
            } else {
                check_range(schema, value.as_f64().unwrap_or_default(), path, out);
            }
        }
        Some("number") => match value.as_f64() {
            Some(n) => check_range(schema, n, path, out),
            None => out.push(violation(path, "must be a number")),
        },
        Some("boolean") if !value.is_boolean() => {
            out.push(violation(path, "must be true or false"));
        }
        _ => {}
    }
    check_enum(schema, value, path, out);
}

fn check_object(schema: &Value, value: &Value, path: &str, root: bool, out: &mut Vec<Violation>) {
    let Some(obj) = value.as_object() else {
        out.push(violation(path, "must be an object"));
        return;
    };
    let empty = serde_json::Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for required in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(field) = required.as_str()
            && obj.get(field).is_none_or(Value::is_null)
        {
            out.push(violation(&join_path(path, field), "required value"));
        }
    }
    let preserve_unknown =
        schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (key, child) in obj {
        let child_path = join_path(path, key);
        if let Some(child_schema) = properties.get(key) {
            check_node(child_schema, child, &child_path, false, out);
        } else if let Some(additional) = additional {
            check_node(additional, child, &child_path, false, out);
        } else if root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            // Implicit on every object; metadata is checked by check_metadata.
        } else if !preserve_unknown {
            // kubectl apply uses strict field validation: a typo is an error,
            // not a silently dropped field.
            out.push(violation(&child_path, "unknown field"));
        }
    }
}

fn check_array(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(items) = value.as_array() else {
        out.push(violation(path, "must be a list"));
        return;
    };
    let len = items.len() as u64;
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && len < min
    {
        out.push(violation(
            path,
            &format!("must have at least {min} item(s)"),
        ));
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && len > max
    {
        out.push(violation(
            path,
            &format!("must have at most {max} items, has {len}"),
        ));
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check_node(item_schema, item, &format!("{path}[{i}]"), false, out);
        }
    }
}

fn check_string(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(s) = value.as_str() else {
        out.push(violation(path, "must be a string"));
        return;
    };
    // The API server counts characters (runes), not bytes.
    let len = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        out.push(violation(
            path,
            &format!(
                "invalid value {}: must be at least {min} character(s)",
                quote(s)
            ),
        ));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        out.push(violation(
            path,
            &format!(
                "invalid value {}: must be at most {max} characters",
                quote(s)
            ),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && !regex(pattern).is_match(s)
    {
        out.push(violation(
            path,
            &format!("invalid value {}: must match {pattern}", quote(s)),
        ));
    }
}

fn check_range(schema: &Value, n: f64, path: &str, out: &mut Vec<Violation>) {
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && n < min
    {
        out.push(violation(
            path,
            &format!("invalid value {n}: must be at least {min}"),
        ));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
        && n > max
    {
        out.push(violation(
            path,
            &format!("invalid value {n}: must be at most {max}"),
        ));
    }
}

fn check_enum(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
        return;
    };
    if !allowed.contains(value) {
        let allowed: Vec<String> = allowed
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect();
        let shown = value.as_str().map_or_else(|| value.to_string(), quote);
        out.push(violation(
            path,
            &format!(
                "unsupported value {shown}: must be one of {}",
                allowed.join(", ")
            ),
        ));
    }
}

fn violation(path: &str, message: &str) -> Violation {
    Violation {
        path: path.to_owned(),
        message: message.to_owned(),
    }
}

fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Quotes a user value for a message, shortened so a 4 KiB value does not
/// flood a terminal.
fn quote(s: &str) -> String {
    if s.chars().count() <= MAX_QUOTED_VALUE {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(MAX_QUOTED_VALUE).collect();
        format!("{head:?}...")
    }
}

/// Compiled schema patterns, shared by every call (the set is small and fixed).
fn regex(pattern: &str) -> Regex {
    static CACHE: OnceLock<Mutex<HashMap<String, Regex>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(pattern.to_owned())
        .or_insert_with(|| Regex::new(pattern).expect("CRD patterns are valid regular expressions"))
        .clone()
}
