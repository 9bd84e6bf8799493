//! The verbs on one collection: get, list (selectors, limit/continue),
//! create, replace, the three patch flavours, and the shared update path
//! that enforces resourceVersion preconditions, server-owned metadata, the
//! status subresource split, generation, finalizer rules and no-op
//! detection. Deletion and garbage collection live in `gc.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::meta::{self, SERVER_OWNED};
use super::patch::{self, Section};
use super::path::{Query, Target};
use super::registry::ResourceInfo;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{ObjKey, State, obj_key, res_key};
use super::watch::partial_metadata;

/// Patch body formats, by `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchKind {
    Merge,
    Json,
    Apply,
    Strategic,
}

impl PatchKind {
    pub(crate) fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            _ => Err(ApiError::unsupported_media(ct)),
        }
    }
}

fn target_name(t: &Target) -> &str {
    t.name.as_deref().unwrap_or_default()
}

fn rv_of(obj: &Value) -> Option<&str> {
    meta::str_at(obj, "/metadata/resourceVersion").filter(|s| !s.is_empty())
}

/// Checks `apiVersion`/`kind` of a body against the URL, filling them when
/// absent.
fn check_type(info: &ResourceInfo, obj: &mut Value, required: bool) -> Result<(), ApiError> {
    let Some(root) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    for (field, want) in [
        ("apiVersion", info.api_version()),
        ("kind", info.kind.clone()),
    ] {
        match root.get(field).and_then(Value::as_str) {
            Some(got) if got != want => {
                return Err(ApiError::bad_request(format!(
                    "{field} {got:?} in the body does not match {want:?} of the request path"
                )));
            }
            Some(_) => {}
            None if required => {
                return Err(ApiError::bad_request(format!(
                    "Object '{field}' is missing in the request body"
                )));
            }
            None => {
                root.insert(field.into(), want.into());
            }
        }
    }
    Ok(())
}

/// Makes `metadata.namespace`/`name` agree with the URL (400 on mismatch).
fn check_identity(t: &Target, obj: &mut Value, name: Option<&str>) -> Result<(), ApiError> {
    let m = meta::meta_mut(obj);
    if t.info.namespaced {
        let ns = t.namespace.clone().unwrap_or_default();
        match m.get("namespace").and_then(Value::as_str) {
            Some(got) if !got.is_empty() && got != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                m.insert("namespace".into(), ns.into());
            }
        }
    } else {
        m.remove("namespace");
    }
    if let Some(name) = name {
        match m.get("name").and_then(Value::as_str) {
            Some(got) if !got.is_empty() && got != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({got}) does not match the name on the URL ({name})"
                )));
            }
            _ => {
                m.insert("name".into(), name.into());
            }
        }
    }
    Ok(())
}

impl State {
    /// The stored object (shared, not copied).
    fn current(&self, t: &Target) -> Result<(ObjKey, Arc<Value>), ApiError> {
        let name = target_name(t);
        let key = obj_key(t.namespace.as_deref(), name);
        let e = self
            .get(&res_key(&t.info), &key)
            .ok_or_else(|| ApiError::not_found(&t.info, name))?;
        Ok((key, e.obj.clone()))
    }

    /// Whether Namespace `ns` exists and is being deleted (held by a
    /// finalizer). Like the real server, no new object may be created in it;
    /// a namespace with no Namespace object is not checked (this API does
    /// not require namespaces to be created first).
    fn namespace_terminating(&self, ns: &str) -> bool {
        let namespaces = (String::new(), "namespaces".to_owned());
        self.get(&namespaces, &obj_key(None, ns))
            .is_some_and(|e| meta::is_deleting(&e.obj))
    }

    pub(crate) fn get_object(&self, t: &Target) -> Result<Arc<Value>, ApiError> {
        self.current(t).map(|(_, o)| o)
    }

    pub(crate) fn list_objects(
        &self,
        t: &Target,
        q: &Query,
        meta_only: bool,
    ) -> Result<Value, ApiError> {
        let labels = LabelSelector::parse(q.label_selector.as_deref().unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(q.field_selector.as_deref().unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        // Every page reports the resourceVersion of the first one, so a
        // watch started from it replays whatever changed while paging.
        let (list_rv, after) = match &q.continue_token {
            Some(tok) => decode_continue(tok)?,
            None => (self.rv(), None),
        };
        let mut items = Vec::new();
        let mut more = false;
        let mut last: Option<ObjKey> = None;
        for (k, e) in self.iter_after(&res_key(&t.info), t.namespace.as_deref(), after) {
            if !(labels.matches(&e.obj) && fields.matches(&e.obj)) {
                continue;
            }
            if q.limit.is_some_and(|l| items.len() >= l) {
                // One more is enough to know there is a next page; counting
                // the rest made paging a large collection quadratic.
                // `remainingItemCount` is optional, and the real server
                // omits it too whenever a selector applies.
                more = true;
                break;
            }
            last = Some(k.clone());
            items.push(if meta_only {
                partial_metadata(&e.obj)
            } else {
                (*e.obj).clone()
            });
        }
        let mut list_meta = json!({"resourceVersion": list_rv.to_string()});
        if more && let Some(last) = last {
            list_meta["continue"] = encode_continue(list_rv, &last).into();
        }
        let (api_version, kind) = if meta_only {
            (
                "meta.k8s.io/v1".to_owned(),
                "PartialObjectMetadataList".to_owned(),
            )
        } else {
            (t.info.api_version(), format!("{}List", t.info.kind))
        };
        Ok(json!({"apiVersion": api_version, "kind": kind, "metadata": list_meta, "items": items}))
    }

    pub(crate) fn create(
        &mut self,
        t: &Target,
        mut obj: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        if t.status || t.name.is_some() {
            return Err(ApiError::method_not_allowed(
                "create is only allowed on a collection",
            ));
        }
        if t.info.namespaced && t.namespace.is_none() {
            return Err(ApiError::path_not_found());
        }
        check_type(&t.info, &mut obj, false)?;
        check_identity(t, &mut obj, None)?;
        let res = res_key(&t.info);
        let m = meta::meta_mut(&mut obj);
        let mut name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if name.is_empty() {
            let prefix = m
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    &t.info,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
            loop {
                name = format!("{prefix}{}", meta::random_suffix());
                if self
                    .get(&res, &obj_key(t.namespace.as_deref(), &name))
                    .is_none()
                {
                    break;
                }
            }
        }
        meta::check_name(&name).map_err(|e| ApiError::invalid(&t.info, &name, &e))?;
        let key = obj_key(t.namespace.as_deref(), &name);
        if self.get(&res, &key).is_some() {
            return Err(ApiError::already_exists(&t.info, &name));
        }
        if let Some(ns) = t.namespace.as_deref()
            && self.namespace_terminating(ns)
        {
            return Err(ApiError::namespace_terminating(&t.info, &name, ns));
        }
        let m = meta::meta_mut(&mut obj);
        for k in SERVER_OWNED {
            m.remove(k);
        }
        m.insert("name".into(), name.clone().into());
        m.insert("uid".into(), meta::new_uid().into());
        m.insert("creationTimestamp".into(), meta::now().into());
        m.insert("generation".into(), 1.into());
        if t.info.status_subresource
            && let Some(root) = obj.as_object_mut()
        {
            root.remove("status");
        }
        if is_crd(&t.info) {
            // The real CRD controller accepts names and establishes the CRD
            // right away; waiters such as `is_crd_established` rely on it.
            let names = obj.pointer("/spec/names").cloned().unwrap_or_default();
            obj["status"] = json!({
                "acceptedNames": names,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "lastTransitionTime": meta::now()},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "lastTransitionTime": meta::now()},
                ],
            });
        }
        meta::normalize(&mut obj);
        meta::check_labels(&obj).map_err(|e| ApiError::invalid(&t.info, &name, &e))?;
        if dry_run {
            return Ok(Arc::new(obj));
        }
        self.created(t, &key, obj, BTreeMap::new())
    }

    /// Stores a new object and runs what the control plane does on create.
    fn created(
        &mut self,
        t: &Target,
        key: &ObjKey,
        obj: Value,
        applied: BTreeMap<String, Value>,
    ) -> Result<Arc<Value>, ApiError> {
        let stored = self.put(&res_key(&t.info), key, obj, applied);
        self.on_crd_change(&t.info, Some(&stored));
        self.collect_if_orphaned(&res_key(&t.info), key);
        Ok(stored)
    }

    pub(crate) fn replace(
        &mut self,
        t: &Target,
        mut body: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        if !t.status {
            check_type(&t.info, &mut body, false)?;
        }
        self.update(t, body, None, dry_run)
    }

    pub(crate) fn patch(
        &mut self,
        t: &Target,
        kind: PatchKind,
        body: &[u8],
        q: &Query,
    ) -> Result<(u16, Arc<Value>), ApiError> {
        let parse_err = |e: &dyn std::fmt::Display| {
            ApiError::bad_request(format!("failed to parse patch: {e}"))
        };
        if kind == PatchKind::Apply {
            let applied: Value = match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(_) => crate::yaml::from_slice(body).map_err(|e| parse_err(&e))?,
            };
            return self.apply(t, applied, q);
        }
        if kind == PatchKind::Strategic
            && !t.info.group.is_empty()
            && !is_builtin_group(&t.info.group)
        {
            return Err(ApiError::unsupported_media(
                "application/strategic-merge-patch+json is not supported for custom resources",
            ));
        }
        let (_, cur) = self.current(t)?;
        let mut doc = (*cur).clone();
        match kind {
            PatchKind::Json => {
                let ops: json_patch::Patch =
                    serde_json::from_slice(body).map_err(|e| parse_err(&e))?;
                patch::json(&mut doc, &ops.0)
                    .map_err(|e| ApiError::invalid(&t.info, target_name(t), &e))?;
            }
            // Strategic merge on built-ins is approximated by a merge patch
            // whose `conditions` lists merge by type (see patch::strategic).
            PatchKind::Strategic => {
                let p: Value = serde_json::from_slice(body).map_err(|e| parse_err(&e))?;
                if !p.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                patch::strategic(&mut doc, &p);
            }
            _ => {
                let p: Value = serde_json::from_slice(body).map_err(|e| parse_err(&e))?;
                if !p.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                patch::merge(&mut doc, &p);
            }
        }
        self.update(t, doc, None, q.dry_run).map(|o| (200, o))
    }

    fn apply(
        &mut self,
        t: &Target,
        mut applied: Value,
        q: &Query,
    ) -> Result<(u16, Arc<Value>), ApiError> {
        let manager = q.field_manager.clone().ok_or_else(|| {
            ApiError::bad_request("PATCH requests of type apply require a fieldManager")
        })?;
        check_type(&t.info, &mut applied, true)?;
        let name = target_name(t).to_owned();
        check_identity(t, &mut applied, Some(&name))?;
        let section = if t.status {
            Section::Status
        } else {
            Section::Main
        };
        let owned = patch::owned_fields(&applied, section, t.info.status_subresource);
        let res = res_key(&t.info);
        let key = obj_key(t.namespace.as_deref(), &name);
        let Some((cur, mut records)) = self
            .get(&res, &key)
            .map(|e| (e.obj.clone(), e.applied.clone()))
        else {
            if t.status {
                return Err(ApiError::not_found(&t.info, &name));
            }
            // Apply to an absent object creates it.
            let coll = Target {
                name: None,
                ..t.clone()
            };
            let created = self.create(&coll, applied, true)?;
            if q.dry_run {
                return Ok((201, created));
            }
            let applied = BTreeMap::from([(manager, patch::record_with(None, section, &owned))]);
            return self
                .created(t, &key, Arc::unwrap_or_clone(created), applied)
                .map(|o| (201, o));
        };
        for (other, record) in records.iter_mut().filter(|(m, _)| **m != manager) {
            let clashes = patch::conflicts(&owned, &patch::section_of(record, section));
            if clashes.is_empty() {
                continue;
            }
            if !q.force {
                let paths: Vec<String> = clashes
                    .iter()
                    .map(|p| format!(".{}", p.join(".")))
                    .collect();
                return Err(ApiError::conflict(
                    &t.info,
                    &name,
                    &format!(
                        "Apply failed with {} conflict(s): conflict with {other:?}: {}",
                        paths.len(),
                        paths.join(", ")
                    ),
                ));
            }
            for p in &clashes {
                patch::release(record, p);
            }
        }
        let prev = records.get(&manager).map(|r| patch::section_of(r, section));
        // A status apply owns and changes only `status`, and `update` reads
        // only that (and the resourceVersion) from a status write: no need
        // to copy the rest of the object first.
        let mut doc = if t.status {
            Value::Object(
                cur.get("status")
                    .map(|s| serde_json::Map::from_iter([("status".to_owned(), s.clone())]))
                    .unwrap_or_default(),
            )
        } else {
            (*cur).clone()
        };
        patch::apply(&mut doc, prev.as_ref(), &owned);
        // A resourceVersion in the apply body is an optimistic-lock precondition.
        let current_rv = rv_of(&cur).unwrap_or_default().to_owned();
        let wanted_rv = rv_of(&applied).unwrap_or(&current_rv).to_owned();
        meta::meta_mut(&mut doc).insert("resourceVersion".into(), wanted_rv.into());
        let record = patch::record_with(records.get(&manager), section, &owned);
        records.insert(manager, record);
        self.update(t, doc, Some(records), q.dry_run)
            .map(|o| (200, o))
    }

    /// The one update path for PUT, patches and apply. `candidate` is the
    /// whole object as the client wants it; `applied` replaces the apply
    /// bookkeeping when set.
    pub(crate) fn update(
        &mut self,
        t: &Target,
        candidate: Value,
        applied: Option<BTreeMap<String, Value>>,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let (key, cur) = self.current(t)?;
        let name = key.1.clone();
        let res = res_key(&t.info);
        if rv_of(&candidate).is_some_and(|rv| Some(rv) != rv_of(&cur)) {
            return Err(ApiError::stale(&t.info, &name));
        }
        let mut new = if t.status {
            let mut n = (*cur).clone();
            match (n.as_object_mut(), candidate.get("status")) {
                (Some(root), Some(s)) => root.insert("status".into(), s.clone()),
                (Some(root), None) => root.remove("status"),
                _ => None,
            };
            n
        } else {
            let mut n = candidate;
            check_type(&t.info, &mut n, false)?;
            check_identity(t, &mut n, Some(&name))?;
            if t.info.status_subresource
                && let Some(root) = n.as_object_mut()
            {
                match cur.get("status") {
                    Some(s) => root.insert("status".into(), s.clone()),
                    None => root.remove("status"),
                };
            }
            let cur_meta = cur.get("metadata").and_then(Value::as_object);
            let m = meta::meta_mut(&mut n);
            for k in SERVER_OWNED {
                match cur_meta.and_then(|cm| cm.get(k)) {
                    Some(v) => m.insert(k.into(), v.clone()),
                    None => m.remove(k),
                };
            }
            n
        };
        meta::normalize(&mut new);
        meta::check_labels(&new).map_err(|e| ApiError::invalid(&t.info, &name, &e))?;
        if meta::is_deleting(&cur) {
            let had = meta::finalizers(&cur);
            if meta::finalizers(&new).iter().any(|f| !had.contains(f)) {
                return Err(ApiError::invalid(
                    &t.info,
                    &name,
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted",
                ));
            }
        }
        // A status write took everything but the status from `cur`.
        if !t.status && meta::spec_changed(&cur, &new, t.info.status_subresource) {
            let generation = meta::at(&cur, "/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta::meta_mut(&mut new).insert("generation".into(), (generation + 1).into());
        }
        // The status first: a status write that changes it needs no
        // compare of the whole object.
        let unchanged = (!t.status || new.get("status") == cur.get("status")) && new == *cur;
        if unchanged || dry_run {
            // Nothing changed: no new resourceVersion, no watch event.
            if !dry_run && let Some(applied) = applied {
                self.set_applied(&res, &key, applied);
            }
            return Ok(Arc::new(new));
        }
        let applied = applied.unwrap_or_else(|| {
            self.get(&res, &key)
                .map(|e| e.applied.clone())
                .unwrap_or_default()
        });
        if meta::is_deleting(&new) && meta::finalizers(&new).is_empty() {
            // The write that drops the last finalizer of a deleted object
            // deletes it (watchers see only DELETED).
            let gone = self
                .remove(&res, &key, Some(new))
                .expect("object checked above");
            self.after_removed(&res, &gone);
            return Ok(gone);
        }
        let stored = self.put(&res, &key, new, applied);
        self.on_crd_change(&t.info, Some(&stored));
        self.collect_if_orphaned(&res, &key);
        Ok(stored)
    }

    /// Keeps the registry in step with CustomResourceDefinition objects, so
    /// a CRD created through the API is served like on a real server.
    pub(crate) fn on_crd_change(&mut self, info: &ResourceInfo, crd: Option<&Value>) {
        if !is_crd(info) {
            return;
        }
        if let Some(infos) = crd.and_then(|c| ResourceInfo::from_crd_json(c).ok()) {
            for i in infos {
                self.registry.insert(i);
            }
        }
    }
}

fn is_crd(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions"
}

fn is_builtin_group(group: &str) -> bool {
    group.ends_with(".k8s.io") || matches!(group, "apps" | "batch" | "policy")
}

fn encode_continue(rv: u64, after: &ObjKey) -> String {
    URL_SAFE_NO_PAD.encode(json!([rv, after.0, after.1]).to_string())
}

fn decode_continue(tok: &str) -> Result<(u64, Option<ObjKey>), ApiError> {
    let bad = || ApiError::bad_request("invalid continue token");
    let raw = URL_SAFE_NO_PAD.decode(tok).map_err(|_| bad())?;
    let v: (u64, String, String) = serde_json::from_slice(&raw).map_err(|_| bad())?;
    Ok((v.0, Some((v.1, v.2))))
}
