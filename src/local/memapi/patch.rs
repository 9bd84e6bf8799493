//! The three patch flavours kube sends: JSON merge patch (RFC 7386), JSON
//! patch (RFC 6902) and server-side apply, reduced to what one field manager
//! per object needs. Pure functions over JSON; the caller stores the result.
//!
//! Server-side apply model: each manager's last applied configuration is
//! remembered. Applying again merges the new configuration into the live
//! object (maps recursively, lists and scalars replaced whole) and removes the
//! fields the manager set last time but no longer sets. Two managers setting
//! one field to different values is a conflict unless `force` moves it.

use json_patch::PatchOperation;
use serde_json::{Map, Value};

use super::meta::SERVER_OWNED;

/// RFC 7386: `null` removes a key, objects merge, anything else replaces.
pub(crate) fn merge(doc: &mut Value, patch: &Value) {
    json_patch::merge(doc, patch);
}

/// Lists a strategic merge patch merges by a key rather than replacing:
/// (field name, merge key). Only `conditions` by `type`, which is what lets
/// a kubelet and a controller owning a readiness gate each patch their own
/// conditions of one Pod.
const STRATEGIC_LIST_KEYS: [(&str, &str); 1] = [("conditions", "type")];

/// Strategic merge patch on a built-in, approximated: a merge patch except
/// that the lists of [`STRATEGIC_LIST_KEYS`] merge element-wise by their
/// key (an element of the patch replaces the live one with the same key,
/// others are kept, new ones are appended). Every other list is replaced.
pub(crate) fn strategic(doc: &mut Value, patch: &Value) {
    let (Some(live), Some(p)) = (doc.as_object_mut(), patch.as_object()) else {
        json_patch::merge(doc, patch);
        return;
    };
    for (k, pv) in p {
        let key = STRATEGIC_LIST_KEYS
            .iter()
            .find(|(f, _)| f == k)
            .map(|(_, key)| *key);
        match (key, live.get_mut(k), pv) {
            (_, _, Value::Null) => {
                live.remove(k);
            }
            (Some(key), Some(Value::Array(cur)), Value::Array(items)) => {
                for item in items {
                    let id = item.get(key);
                    match cur.iter_mut().find(|c| id.is_some() && c.get(key) == id) {
                        Some(c) => *c = item.clone(),
                        None => cur.push(item.clone()),
                    }
                }
            }
            (_, Some(cur), Value::Object(_)) if cur.is_object() => strategic(cur, pv),
            _ => {
                let mut fresh = Value::Null;
                json_patch::merge(&mut fresh, pv);
                live.insert(k.clone(), fresh);
            }
        }
    }
}

/// RFC 6902, applied atomically. A `test` for `null` at a path that does not
/// exist passes, as on the real server (kube's finalizer helper sends exactly
/// that before adding the first finalizer).
pub(crate) fn json(doc: &mut Value, ops: &[PatchOperation]) -> Result<(), String> {
    let mut work = doc.clone();
    for (i, op) in ops.iter().enumerate() {
        if let PatchOperation::Test(t) = op
            && t.value.is_null()
            && work.pointer(t.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch(&mut work, std::slice::from_ref(op))
            .map_err(|e| format!("json patch operation {i} failed: {e}"))?;
    }
    *doc = work;
    Ok(())
}

/// Which part of an object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    /// The main resource: everything but status (when status is a subresource).
    Main,
    /// The `/status` subresource: only `.status`.
    Status,
}

/// The fields of an apply configuration a manager comes to own: no type
/// meta, no identity or server-owned metadata, only the addressed section.
pub(crate) fn owned_fields(applied: &Value, section: Section, status_subresource: bool) -> Value {
    let mut v = applied.clone();
    super::meta::drop_nulls(&mut v);
    let Some(root) = v.as_object_mut() else {
        return Value::Object(Map::new());
    };
    match section {
        Section::Status => {
            let status = root.remove("status");
            let mut out = Map::new();
            if let Some(s) = status {
                out.insert("status".into(), s);
            }
            Value::Object(out)
        }
        Section::Main => {
            root.remove("apiVersion");
            root.remove("kind");
            if status_subresource {
                root.remove("status");
            }
            if let Some(Value::Object(meta)) = root.get_mut("metadata") {
                for k in SERVER_OWNED
                    .iter()
                    .chain(&["name", "namespace", "generateName"])
                {
                    meta.remove(*k);
                }
                if meta.is_empty() {
                    root.remove("metadata");
                }
            }
            v
        }
    }
}

/// The part of a recorded configuration that belongs to `section`.
pub(crate) fn section_of(record: &Value, section: Section) -> Value {
    let mut out = record.as_object().cloned().unwrap_or_default();
    match section {
        Section::Status => out.retain(|k, _| k == "status"),
        Section::Main => {
            out.remove("status");
        }
    }
    Value::Object(out)
}

/// Replaces `section` of a recorded configuration with `owned`.
pub(crate) fn record_with(record: Option<&Value>, section: Section, owned: &Value) -> Value {
    let other = match section {
        Section::Main => Section::Status,
        Section::Status => Section::Main,
    };
    let mut out = record
        .map(|r| section_of(r, other))
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    if let Some(o) = owned.as_object() {
        out.extend(o.clone());
    }
    Value::Object(out)
}

/// Applies `owned` (this manager's new configuration for one section) to
/// `live`, removing what `prev` (its previous one) set and `owned` does not.
pub(crate) fn apply(live: &mut Value, prev: Option<&Value>, owned: &Value) {
    if let Some(prev) = prev {
        remove_released(live, prev, owned);
    }
    deep_merge(live, owned);
}

fn remove_released(live: &mut Value, prev: &Value, new: &Value) {
    let (Some(live), Some(prev)) = (live.as_object_mut(), prev.as_object()) else {
        return;
    };
    for (k, pv) in prev {
        match new.get(k) {
            Some(nv) if pv.is_object() && nv.is_object() => {
                if let Some(lv) = live.get_mut(k) {
                    remove_released(lv, pv, nv);
                }
            }
            Some(_) => {}
            None => {
                let emptied = match live.get_mut(k) {
                    Some(lv) if pv.is_object() && lv.is_object() => {
                        remove_released(lv, pv, &Value::Object(Map::new()));
                        lv.as_object().is_some_and(Map::is_empty)
                    }
                    Some(_) => true,
                    None => false,
                };
                if emptied {
                    live.remove(k);
                }
            }
        }
    }
}

fn deep_merge(live: &mut Value, new: &Value) {
    let Some(new) = new.as_object() else {
        *live = new.clone();
        return;
    };
    if !live.is_object() {
        *live = Value::Object(Map::new());
    }
    let live = live.as_object_mut().expect("object ensured above");
    for (k, nv) in new {
        match live.get_mut(k) {
            Some(lv) if lv.is_object() && nv.is_object() => deep_merge(lv, nv),
            _ => {
                live.insert(k.clone(), nv.clone());
            }
        }
    }
}

/// Leaf paths both configurations set, to different values.
pub(crate) fn conflicts(mine: &Value, other: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    walk_conflicts(mine, other, &mut Vec::new(), &mut out);
    out
}

fn walk_conflicts(a: &Value, b: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            for (k, av) in a {
                if let Some(bv) = b.get(k) {
                    path.push(k.clone());
                    walk_conflicts(av, bv, path, out);
                    path.pop();
                }
            }
        }
        _ if a != b => out.push(path.clone()),
        _ => {}
    }
}

/// Drops `path` from a recorded configuration (ownership moved by `force`).
pub(crate) fn release(record: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = record;
    for p in parents {
        match cur.get_mut(p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_null_test_on_missing_path_passes() {
        let mut doc = json!({"metadata": {"name": "a"}});
        let ops: json_patch::Patch = serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]},
        ]))
        .unwrap();
        json(&mut doc, &ops).unwrap();
        assert_eq!(doc["metadata"]["finalizers"], json!(["f"]));
        // Now the list exists, so the same patch fails and changes nothing.
        let before = doc.clone();
        assert!(json(&mut doc, &ops).is_err());
        assert_eq!(doc, before);
    }

    #[test]
    fn apply_removes_fields_the_manager_stopped_setting() {
        let mut live = json!({"spec": {"a": 1, "b": 2, "other": 9}, "metadata": {"labels": {"x": "1", "y": "2"}}});
        let prev = json!({"spec": {"a": 1, "b": 2}, "metadata": {"labels": {"x": "1"}}});
        let new = json!({"spec": {"a": 5}});
        apply(&mut live, Some(&prev), &new);
        assert_eq!(
            live,
            json!({"spec": {"a": 5, "other": 9}, "metadata": {"labels": {"y": "2"}}})
        );
    }

    #[test]
    fn owned_fields_strip_identity_and_other_section() {
        let applied = json!({"apiVersion": "v1", "kind": "X",
            "metadata": {"name": "a", "namespace": "n", "labels": {"k": "v"}, "resourceVersion": "3"},
            "spec": {"a": 1, "n": null}, "status": {"s": 1}});
        assert_eq!(
            owned_fields(&applied, Section::Main, true),
            json!({"metadata": {"labels": {"k": "v"}}, "spec": {"a": 1}})
        );
        assert_eq!(
            owned_fields(&applied, Section::Status, true),
            json!({"status": {"s": 1}})
        );
    }

    #[test]
    fn conflicting_leaves_are_found_and_released() {
        let mine = json!({"spec": {"a": 1, "b": 2, "l": [1]}});
        let mut other = json!({"spec": {"a": 1, "b": 3, "l": [2], "c": 1}});
        let c = conflicts(&mine, &other);
        assert_eq!(
            c,
            vec![
                vec!["spec".to_string(), "b".into()],
                vec!["spec".into(), "l".into()]
            ]
        );
        for p in &c {
            release(&mut other, p);
        }
        assert_eq!(other, json!({"spec": {"a": 1, "c": 1}}));
    }

    #[test]
    fn strategic_merge_keeps_other_conditions_and_replaces_by_type() {
        let mut pod = serde_json::json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "bind.unkin.net/zones-served", "status": "False"},
        ], "podIPs": [{"ip": "1"}]}});
        strategic(
            &mut pod,
            &serde_json::json!({"status": {"conditions": [
                {"type": "bind.unkin.net/zones-served", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
            ], "podIPs": [{"ip": "2"}], "phase": null}}),
        );
        assert_eq!(
            pod,
            serde_json::json!({"status": {"conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "bind.unkin.net/zones-served", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
            ], "podIPs": [{"ip": "2"}]}})
        );
    }
}
