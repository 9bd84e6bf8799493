//! Deletion and what the control plane does after it: preconditions,
//! finalizers (deletionTimestamp set, object kept until the last finalizer
//! goes), propagation policies, and the garbage collector (dependents whose
//! owners are all gone are deleted, dangling owner references to a gone
//! owner are dropped when other owners remain, a Namespace takes its
//! contents with it). GC runs synchronously when an owner disappears, so
//! the order watchers see (owner DELETED, then dependents) matches a real
//! cluster's background GC without any timing in tests.

use serde_json::Value;

use super::meta;
use super::path::Target;
use super::status::{ApiError, deleted_status};
use super::store::{ObjKey, ResKey, State, obj_key, res_key};

const FOREGROUND: &str = "foregroundDeletion";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Propagation {
    Background,
    Foreground,
    Orphan,
}

impl State {
    /// `DELETE` on one object. Returns the object while finalizers hold it,
    /// or a success `Status` once it is gone.
    pub(crate) fn delete(
        &mut self,
        t: &Target,
        opts: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let name = t.name.clone().unwrap_or_default();
        let res = res_key(&t.info);
        let key = obj_key(t.namespace.as_deref(), &name);
        let cur = self
            .get(&res, &key)
            .map(|e| e.obj.clone())
            .ok_or_else(|| ApiError::not_found(&t.info, &name))?;
        if let Some(want) = opts.pointer("/preconditions/uid").and_then(Value::as_str)
            && want != meta::uid(&cur)
        {
            return Err(ApiError::conflict(
                &t.info,
                &name,
                &format!(
                    "Precondition failed: UID in precondition: {want}, UID in object meta: {}",
                    meta::uid(&cur)
                ),
            ));
        }
        if let Some(want) = opts
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            && Some(want) != meta::str_at(&cur, "/metadata/resourceVersion")
        {
            return Err(ApiError::conflict(
                &t.info,
                &name,
                &format!("Precondition failed: ResourceVersion in precondition: {want}"),
            ));
        }
        let policy = match opts.get("propagationPolicy").and_then(Value::as_str) {
            None | Some("Background") => Propagation::Background,
            Some("Foreground") => Propagation::Foreground,
            Some("Orphan") => Propagation::Orphan,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "unknown propagationPolicy {other:?}"
                )));
            }
        };
        if dry_run {
            return Ok((*cur).clone());
        }
        match self.delete_key(&res, &key, policy) {
            Some(still_there) => Ok(still_there),
            None => Ok(deleted_status(&t.info, &name, meta::uid(&cur))),
        }
    }

    /// Deletes or marks for deletion; returns the object if it remains.
    fn delete_key(&mut self, res: &ResKey, key: &ObjKey, policy: Propagation) -> Option<Value> {
        let cur = (*self.get(res, key)?.obj).clone();
        let uid = meta::uid(&cur).to_owned();
        if policy == Propagation::Orphan {
            for (dres, dkey) in self.dependents_of(&uid) {
                self.drop_owner_refs(&dres, &dkey, |u| u == uid);
            }
        }
        let mut finalizers = meta::finalizers(&cur);
        let foreground = policy == Propagation::Foreground && !self.dependents_of(&uid).is_empty();
        if foreground && !finalizers.iter().any(|f| f == FOREGROUND) {
            finalizers.push(FOREGROUND.to_owned());
        }
        if finalizers.is_empty() {
            let gone = self.remove(res, key, None)?;
            self.after_removed(res, &gone);
            return None;
        }
        let mut marked = cur.clone();
        let m = meta::meta_mut(&mut marked);
        if !meta::is_deleting(&cur) {
            m.insert("deletionTimestamp".into(), meta::now().into());
            m.insert("deletionGracePeriodSeconds".into(), 0.into());
        }
        m.insert("finalizers".into(), finalizers.into());
        let out = if marked == cur {
            cur
        } else {
            let applied = self
                .get(res, key)
                .map(|e| e.applied.clone())
                .unwrap_or_default();
            (*self.put(res, key, marked, applied)).clone()
        };
        if foreground {
            for (dres, dkey) in self.dependents_of(&uid) {
                self.delete_key(&dres, &dkey, Propagation::Background);
            }
            self.release_foreground(&uid);
        }
        self.get(res, key).map(|e| (*e.obj).clone()).or(Some(out))
    }

    /// What follows an object's disappearance: its dependents are collected,
    /// a foreground-deleting owner may be released, a Namespace's contents
    /// and a CRD's instances go with it.
    pub(crate) fn after_removed(&mut self, res: &ResKey, gone: &Value) {
        let uid = meta::uid(gone).to_owned();
        for (dres, dkey) in self.dependents_of(&uid) {
            self.collect_if_orphaned(&dres, &dkey);
        }
        for owner in meta::owner_uids(gone) {
            self.release_foreground(&owner);
        }
        if res.0.is_empty() && res.1 == "namespaces" {
            let ns = meta::name(gone).to_owned();
            for coll in self.collections() {
                let keys: Vec<ObjKey> = self
                    .iter(&coll, Some(&ns))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in keys.into_iter().filter(|k| !k.0.is_empty()) {
                    self.delete_key(&coll, &k, Propagation::Background);
                }
            }
        }
        if res.0 == "apiextensions.k8s.io" && res.1 == "customresourcedefinitions" {
            let group = meta::str_at(gone, "/spec/group")
                .unwrap_or_default()
                .to_owned();
            let plural = meta::str_at(gone, "/spec/names/plural")
                .unwrap_or_default()
                .to_owned();
            let coll = (group.clone(), plural.clone());
            let keys: Vec<ObjKey> = self.iter(&coll, None).map(|(k, _)| k.clone()).collect();
            for k in keys {
                if let Some(o) = self.remove(&coll, &k, None) {
                    self.after_removed(&coll, &o);
                }
            }
            self.registry.remove_group_plural(&group, &plural);
        }
    }

    /// Garbage-collects one object if it has owner references and none of
    /// its owners exists any more; drops dangling references otherwise.
    pub(crate) fn collect_if_orphaned(&mut self, res: &ResKey, key: &ObjKey) {
        let Some(obj) = self.get(res, key).map(|e| e.obj.clone()) else {
            return;
        };
        let owners = meta::owner_uids(&obj);
        if owners.is_empty() {
            return;
        }
        let live: Vec<bool> = owners
            .iter()
            .map(|u| self.locate_uid(u).is_some())
            .collect();
        if live.iter().all(|l| !l) {
            self.delete_key(res, key, Propagation::Background);
        } else if live.iter().any(|l| !l) {
            let present: Vec<String> = owners
                .into_iter()
                .zip(live)
                .filter(|(_, l)| *l)
                .map(|(u, _)| u)
                .collect();
            self.drop_owner_refs(res, key, |u| !present.iter().any(|p| p == u));
        }
    }

    /// Removes owner references whose uid satisfies `dangling`.
    fn drop_owner_refs(&mut self, res: &ResKey, key: &ObjKey, dangling: impl Fn(&str) -> bool) {
        let Some(entry) = self.get(res, key).cloned() else {
            return;
        };
        let mut obj = (*entry.obj).clone();
        let m = meta::meta_mut(&mut obj);
        if let Some(Value::Array(refs)) = m.get_mut("ownerReferences") {
            refs.retain(|r| !dangling(r.get("uid").and_then(Value::as_str).unwrap_or_default()));
        }
        meta::normalize(&mut obj);
        if obj != *entry.obj {
            self.put(res, key, obj, entry.applied);
        }
    }

    /// Drops the `foregroundDeletion` finalizer of a deleting owner whose
    /// dependents are all gone (which may complete its deletion).
    fn release_foreground(&mut self, owner_uid: &str) {
        if !self.dependents_of(owner_uid).is_empty() {
            return;
        }
        let Some((res, key)) = self.locate_uid(owner_uid).cloned() else {
            return;
        };
        let Some(entry) = self.get(&res, &key).cloned() else {
            return;
        };
        if !meta::is_deleting(&entry.obj)
            || !meta::finalizers(&entry.obj).iter().any(|f| f == FOREGROUND)
        {
            return;
        }
        let mut obj = (*entry.obj).clone();
        let rest: Vec<String> = meta::finalizers(&obj)
            .into_iter()
            .filter(|f| f != FOREGROUND)
            .collect();
        meta::meta_mut(&mut obj).insert("finalizers".into(), rest.clone().into());
        meta::normalize(&mut obj);
        if rest.is_empty() {
            if let Some(gone) = self.remove(&res, &key, Some(obj)) {
                self.after_removed(&res, &gone);
            }
        } else {
            self.put(&res, &key, obj, entry.applied);
        }
    }
}
