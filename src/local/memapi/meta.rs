//! Object metadata rules the API server enforces: which fields the server
//! owns, how stored JSON is normalised (nulls and empty metadata collections
//! dropped, as Go's `omitempty` and CRD pruning do), name and label
//! validation, and when `generation` moves. Pure functions over JSON.

use serde_json::{Map, Value};

/// Metadata fields a client cannot set; the server keeps its own values.
pub(crate) const SERVER_OWNED: [&str; 8] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Metadata collections the server omits when empty; kube's finalizer helper
/// relies on an absent (not empty) `finalizers` list.
const OMIT_EMPTY: [&str; 5] = [
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "managedFields",
];

/// The value at `pointer`, a JSON pointer of object keys (no `~` escapes,
/// no array indexes: every caller passes a literal path into metadata or
/// spec). Unlike `Value::pointer` it allocates nothing; that one unescapes
/// each token into a new string, and the server looks up labels and
/// metadata for every change and every watch.
pub(crate) fn at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a Value> {
    debug_assert!(!pointer.contains('~'), "{pointer}");
    pointer
        .strip_prefix('/')?
        .split('/')
        .try_fold(obj, |v, key| v.as_object()?.get(key))
}

pub(crate) fn str_at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a str> {
    at(obj, pointer).and_then(Value::as_str)
}

pub(crate) fn name(obj: &Value) -> &str {
    str_at(obj, "/metadata/name").unwrap_or_default()
}

pub(crate) fn uid(obj: &Value) -> &str {
    str_at(obj, "/metadata/uid").unwrap_or_default()
}

pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    at(obj, "/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn is_deleting(obj: &Value) -> bool {
    at(obj, "/metadata/deletionTimestamp").is_some()
}

/// The uids named in `metadata.ownerReferences`.
pub(crate) fn owner_uids(obj: &Value) -> Vec<String> {
    at(obj, "/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata` as a mutable map, creating it when missing or not an object.
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let root = obj.as_object_mut().expect("object ensured above");
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("object ensured above")
}

/// Drops nulls everywhere and empty metadata collections.
pub(crate) fn normalize(obj: &mut Value) {
    drop_nulls(obj);
    let meta = meta_mut(obj);
    for k in OMIT_EMPTY {
        let empty = match meta.get(k) {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            _ => false,
        };
        if empty {
            meta.remove(k);
        }
    }
}

pub(crate) fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Whether anything outside metadata (and outside status when status is a
/// subresource) differs: the only changes that bump `generation`.
pub(crate) fn spec_changed(old: &Value, new: &Value, status_subresource: bool) -> bool {
    let skip = |k: &str| {
        matches!(k, "metadata" | "apiVersion" | "kind") || (status_subresource && k == "status")
    };
    let empty = Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    o.iter()
        .filter(|(k, _)| !skip(k))
        .any(|(k, v)| n.get(k) != Some(v))
        || n.keys().filter(|k| !skip(k)).any(|k| !o.contains_key(k))
}

/// RFC 1123 subdomain, the rule for most object names.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

fn qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Label/annotation key: `[prefix/]name`, prefix a DNS subdomain.
fn check_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => check_name(prefix).is_ok() && qualified_name_part(name),
        None => qualified_name_part(key),
    }
}

/// Validates label keys and values and annotation keys.
pub(crate) fn check_labels(obj: &Value) -> Result<(), String> {
    if let Some(labels) = at(obj, "/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if !check_key(k) {
                return Err(format!(
                    "metadata.labels: Invalid value: {k:?}: invalid label key"
                ));
            }
            let v = v
                .as_str()
                .ok_or_else(|| format!("metadata.labels.{k}: must be a string"))?;
            if !(v.is_empty() || qualified_name_part(v)) {
                return Err(format!(
                    "metadata.labels: Invalid value: {v:?}: a valid label value must be 63 characters or less, alphanumeric, '-', '_' or '.'"
                ));
            }
        }
    }
    if let Some(ann) = at(obj, "/metadata/annotations").and_then(Value::as_object) {
        for (k, v) in ann {
            if !check_key(k) {
                return Err(format!(
                    "metadata.annotations: Invalid value: {k:?}: invalid annotation key"
                ));
            }
            if !v.is_string() {
                return Err(format!("metadata.annotations.{k}: must be a string"));
            }
        }
    }
    Ok(())
}

/// RFC 3339 with second precision, as `metav1.Time` serialises.
pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A random version-4 UUID.
pub(crate) fn new_uid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Five random lowercase alphanumerics, the suffix for `generateName`.
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalize_drops_nulls_and_empty_metadata_lists() {
        let mut o = json!({"metadata": {"name": "a", "finalizers": [], "labels": {}, "x": null},
            "spec": {"a": null, "b": [1, null]}});
        normalize(&mut o);
        assert_eq!(
            o,
            json!({"metadata": {"name": "a"}, "spec": {"b": [1, null]}})
        );
    }

    #[test]
    fn generation_only_for_non_metadata_changes() {
        let a = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}, "status": {"s": 1}});
        let meta = json!({"metadata": {}, "spec": {"x": 1}, "status": {"s": 1}});
        let status = json!({"metadata": {}, "spec": {"x": 1}, "status": {"s": 2}});
        let spec = json!({"metadata": {}, "spec": {"x": 2}, "status": {"s": 1}});
        let extra = json!({"metadata": {}, "spec": {"x": 1}, "status": {"s": 1}, "data": {}});
        assert!(!spec_changed(&a, &meta, true));
        assert!(!spec_changed(&a, &status, true));
        assert!(spec_changed(&a, &status, false));
        assert!(spec_changed(&a, &spec, true));
        assert!(spec_changed(&a, &extra, true));
    }

    #[test]
    fn names_and_labels() {
        assert!(check_name("a-b.c").is_ok());
        for bad in ["", "A", "-a", "a_b", "a-"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(
            check_labels(&json!({"metadata": {"labels": {"app.kubernetes.io/name": "x_y"}}}))
                .is_ok()
        );
        assert!(check_labels(&json!({"metadata": {"labels": {"a": "has space"}}})).is_err());
        assert!(check_labels(&json!({"metadata": {"labels": {"a": "x".repeat(64)}}})).is_err());
    }

    #[test]
    fn at_finds_what_value_pointer_finds() {
        let o = json!({"metadata": {"name": "a", "labels": {"k": "v"}, "finalizers": ["f"],
            "deletionTimestamp": null}, "spec": "text"});
        for p in [
            "/metadata/name",
            "/metadata/labels",
            "/metadata/labels/k",
            "/metadata/labels/missing",
            "/metadata/finalizers",
            "/metadata/deletionTimestamp",
            "/metadata/name/deeper",
            "/spec/names/plural",
            "/missing",
        ] {
            assert_eq!(at(&o, p), o.pointer(p), "{p}");
        }
        assert_eq!(at(&o, "/metadata/name"), Some(&json!("a")));
        assert_eq!(at(&o, "metadata/name"), None);
    }

    #[test]
    fn uid_shape() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_ne!(u, new_uid());
    }
}
