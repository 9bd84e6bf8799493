//! Checks for the built-in kinds a manifest directory may hold (Secret,
//! ConfigMap, Namespace), standing in for kube-apiserver's own validation:
//! DNS-1123 names, data key names, base64 values; and Secret `stringData`
//! folded into `data` as the API server does on write.
//!
//! Pure functions over JSON; no I/O, no cluster. Messages name the field
//! and key, never the value: a Secret's value is key material.

use std::sync::OnceLock;

use base64::Engine as _;
use regex::Regex;
use serde_json::{Map, Value};

use crate::api::validation::K8S_NAME_PATTERN;

/// Longest DNS-1123 label (namespace names).
const MAX_LABEL_LEN: usize = 63;
/// Longest DNS-1123 subdomain (object names, data keys).
const MAX_SUBDOMAIN_LEN: usize = 253;

fn regex(pattern: &'static str, cell: &'static OnceLock<Regex>) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("constant pattern compiles"))
}

pub(crate) fn is_dns_label(s: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    s.len() <= MAX_LABEL_LEN && regex(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", &RE).is_match(s)
}

pub(crate) fn check_name(name: &str) -> Result<(), String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    if name.len() <= MAX_SUBDOMAIN_LEN && regex(K8S_NAME_PATTERN, &RE).is_match(name) {
        Ok(())
    } else {
        Err(format!(
            "metadata.name {name:?} must be a lowercase DNS-1123 subdomain (letters, digits, '-', '.'; at most 253 characters)"
        ))
    }
}

/// Keys of Secret/ConfigMap data, as the API server allows them.
fn check_data_key(field: &str, key: &str) -> Result<(), String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    if !key.is_empty()
        && key.len() <= MAX_SUBDOMAIN_LEN
        && regex(r"^[-._a-zA-Z0-9]+$", &RE).is_match(key)
    {
        Ok(())
    } else {
        Err(format!(
            "{field} key {key:?} must consist of alphanumeric characters, '-', '_' or '.'"
        ))
    }
}

/// A map field of strings (`data`, `stringData`, `binaryData`), absent = empty.
fn string_map(object: &Map<String, Value>, field: &str) -> Result<Map<String, Value>, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => {
            for (key, value) in map {
                check_data_key(field, key)?;
                if !value.is_string() {
                    // The value is not quoted back: it may be key material.
                    return Err(format!("{field}.{key} must be a string"));
                }
            }
            Ok(map.clone())
        }
        Some(_) => Err(format!("{field} must be a mapping of strings")),
    }
}

fn check_base64(field: &str, map: &Map<String, Value>) -> Result<(), String> {
    for (key, value) in map {
        let text = value.as_str().unwrap_or_default();
        if base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_err()
        {
            return Err(format!("{field}.{key} is not valid base64"));
        }
    }
    Ok(())
}

/// Secret: data must be base64; stringData is merged into data (stringData
/// wins, as on the API server) so readers only ever see `data`.
pub(crate) fn check_secret(mut object: Map<String, Value>) -> Result<Value, String> {
    let mut data = string_map(&object, "data")?;
    check_base64("data", &data)?;
    let string_data = string_map(&object, "stringData")?;
    for (key, value) in string_data {
        let plain = value.as_str().unwrap_or_default();
        let encoded = base64::engine::general_purpose::STANDARD.encode(plain);
        data.insert(key, Value::String(encoded));
    }
    object.remove("stringData");
    if !data.is_empty() {
        object.insert("data".into(), Value::Object(data));
    }
    match object.get("type") {
        None | Some(Value::Null) => {
            object.insert("type".into(), Value::String("Opaque".into()));
        }
        Some(Value::String(_)) => {}
        Some(_) => return Err("type must be a string".into()),
    }
    Ok(Value::Object(object))
}

pub(crate) fn check_config_map(object: Map<String, Value>) -> Result<Value, String> {
    let data = string_map(&object, "data")?;
    let binary = string_map(&object, "binaryData")?;
    check_base64("binaryData", &binary)?;
    if let Some(key) = data.keys().find(|k| binary.contains_key(*k)) {
        return Err(format!("key {key:?} is in both data and binaryData"));
    }
    let value = Value::Object(object);
    serde_json::from_value::<k8s_openapi::api::core::v1::ConfigMap>(value.clone())
        .map_err(|e| format!("not a valid ConfigMap: {e}"))?;
    Ok(value)
}

pub(crate) fn check_namespace(name: &str, object: Map<String, Value>) -> Result<Value, String> {
    if !is_dns_label(name) {
        return Err(format!(
            "metadata.name {name:?} must be a lowercase DNS-1123 label (at most 63 characters)"
        ));
    }
    let value = Value::Object(object);
    serde_json::from_value::<k8s_openapi::api::core::v1::Namespace>(value.clone())
        .map_err(|e| format!("not a valid Namespace: {e}"))?;
    Ok(value)
}
