//! The object store: every object as JSON keyed by (group, plural) and
//! (namespace, name), the global resourceVersion counter, uid and
//! owner->dependents indexes, the bounded change history watches replay
//! from, and the live watchers each change is pushed to. All mutation goes
//! through `put` and `remove` so indexes, history and watchers never diverge.
//! Callers hold the one state lock; nothing here blocks or awaits.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use super::faults::Hooks;
use super::meta;
use super::registry::{Registry, ResourceInfo};

/// (group, plural): one collection, whatever the version.
pub(crate) type ResKey = (String, String);
/// (namespace or "" for cluster-scoped, name).
pub(crate) type ObjKey = (String, String);

pub(crate) fn res_key(info: &ResourceInfo) -> ResKey {
    (info.group.clone(), info.plural.clone())
}

pub(crate) fn obj_key(namespace: Option<&str>, name: &str) -> ObjKey {
    (namespace.unwrap_or_default().to_owned(), name.to_owned())
}

/// A stored object plus the apply configurations its field managers last
/// sent (server-side apply bookkeeping, never shown to clients).
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) obj: Arc<Value>,
    pub(crate) applied: BTreeMap<String, Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One committed change, as watches see it.
#[derive(Debug)]
pub(crate) struct Change {
    pub(crate) rv: u64,
    pub(crate) res: ResKey,
    pub(crate) ty: EventType,
    pub(crate) obj: Arc<Value>,
    /// The object before a modification, so a watch with a selector can turn
    /// "stopped matching" into DELETED and "started matching" into ADDED.
    pub(crate) prev: Option<Arc<Value>>,
    /// `obj` as watch events carry it (whole / metadata-only), serialised
    /// once by the first watch that sends it and shared by every other one:
    /// a change costs one serialisation, not one per open watch.
    pub(crate) json: OnceLock<Bytes>,
    pub(crate) meta_json: OnceLock<Bytes>,
}

/// A live watch as the store sees it (`watch::Watcher` is the one kind):
/// every committed change is offered to it, in commit order, and it is
/// dropped once it reports its client gone. A trait so the store does not
/// depend on the watch module that builds on it.
pub(crate) trait Subscriber: Send + Sync {
    fn id(&self) -> u64;
    /// Forwards `change` if this watch sees it; `false` once its client has
    /// gone away.
    fn offer(&self, change: &Change) -> bool;
    fn is_open(&self) -> bool;
    /// Queues a BOOKMARK at `rv`; `false` once its client has gone away.
    fn bookmark(&self, rv: u64, initial_end: bool) -> bool;
}

/// Where an object names its owners (indexed in `dependents`).
const OWNERS: &str = "/metadata/ownerReferences";

pub(crate) struct State {
    pub(crate) registry: Registry,
    pub(crate) hooks: Hooks,
    pub(crate) watchers: Vec<Box<dyn Subscriber>>,
    pub(crate) next_watcher_id: u64,
    rv: u64,
    objects: HashMap<ResKey, BTreeMap<ObjKey, Entry>>,
    by_uid: HashMap<String, (ResKey, ObjKey)>,
    dependents: HashMap<String, BTreeSet<(ResKey, ObjKey)>>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Every change with a resourceVersion above this is still in `history`.
    history_floor: u64,
    changed: tokio::sync::watch::Sender<u64>,
}

impl State {
    pub(crate) fn new(history_limit: usize, changed: tokio::sync::watch::Sender<u64>) -> Self {
        Self {
            registry: Registry::with_builtins(),
            hooks: Hooks::default(),
            watchers: Vec::new(),
            next_watcher_id: 0,
            rv: 0,
            objects: HashMap::new(),
            by_uid: HashMap::new(),
            dependents: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            history_floor: 0,
            changed,
        }
    }

    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    /// Takes every stored object, the change history and the watches out
    /// of the state (resourceVersions keep counting), for the caller to drop
    /// outside the lock.
    pub(crate) fn take_contents(&mut self) -> impl Send + use<> {
        // A watch resuming from before now must relist (410), not miss
        // the objects that went.
        self.history_floor = self.rv;
        (
            std::mem::take(&mut self.objects),
            std::mem::take(&mut self.by_uid),
            std::mem::take(&mut self.dependents),
            std::mem::take(&mut self.history),
            std::mem::take(&mut self.watchers),
        )
    }

    pub(crate) fn history_floor(&self) -> u64 {
        self.history_floor
    }

    pub(crate) fn get(&self, res: &ResKey, key: &ObjKey) -> Option<&Entry> {
        self.objects.get(res).and_then(|m| m.get(key))
    }

    /// Objects of one collection in key order, optionally in one namespace.
    pub(crate) fn iter<'a>(
        &'a self,
        res: &ResKey,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Entry)> + 'a {
        self.iter_after(res, namespace, None)
    }

    /// Like `iter`, starting after `after` (the key a list page ended on).
    pub(crate) fn iter_after<'a>(
        &'a self,
        res: &ResKey,
        namespace: Option<&'a str>,
        after: Option<ObjKey>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Entry)> + 'a {
        // Keys sort by namespace first: a namespace's objects are one run,
        // so a namespaced list starts at it and stops after it.
        let lower = match (after, namespace) {
            (Some(k), ns) if ns.is_none_or(|ns| k.0.as_str() >= ns) => Bound::Excluded(k),
            (_, Some(ns)) => Bound::Included((ns.to_owned(), String::new())),
            _ => Bound::Unbounded,
        };
        self.objects
            .get(res)
            .into_iter()
            .flat_map(move |m| m.range((lower.clone(), Bound::Unbounded)))
            .take_while(move |(k, _)| namespace.is_none_or(|ns| k.0 == ns))
    }

    pub(crate) fn collections(&self) -> Vec<ResKey> {
        let mut v: Vec<ResKey> = self.objects.keys().cloned().collect();
        v.sort();
        v
    }

    pub(crate) fn locate_uid(&self, uid: &str) -> Option<&(ResKey, ObjKey)> {
        self.by_uid.get(uid)
    }

    pub(crate) fn dependents_of(&self, uid: &str) -> Vec<(ResKey, ObjKey)> {
        self.dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Stores `obj` under a fresh resourceVersion (ADDED or MODIFIED).
    pub(crate) fn put(
        &mut self,
        res: &ResKey,
        key: &ObjKey,
        mut obj: Value,
        applied: BTreeMap<String, Value>,
    ) -> Arc<Value> {
        self.rv += 1;
        meta::meta_mut(&mut obj).insert("resourceVersion".into(), self.rv.to_string().into());
        let obj = Arc::new(obj);
        let prev = self
            .objects
            .entry(res.clone())
            .or_default()
            .insert(
                key.clone(),
                Entry {
                    obj: obj.clone(),
                    applied,
                },
            )
            .map(|e| e.obj);
        match &prev {
            // Most writes (statuses, finalizers) keep the uid and owners:
            // nothing to index again.
            Some(p)
                if meta::uid(p) == meta::uid(&obj)
                    && meta::at(p, OWNERS) == meta::at(&obj, OWNERS) => {}
            Some(p) => {
                self.unindex(res, key, p);
                self.index(res, key, &obj);
            }
            None => self.index(res, key, &obj),
        }
        let ty = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(res, ty, obj.clone(), prev);
        obj
    }

    /// Replaces only the apply bookkeeping (a no-op apply changes no object).
    pub(crate) fn set_applied(
        &mut self,
        res: &ResKey,
        key: &ObjKey,
        applied: BTreeMap<String, Value>,
    ) {
        if let Some(e) = self.objects.get_mut(res).and_then(|m| m.get_mut(key)) {
            e.applied = applied;
        }
    }

    /// Removes an object; the DELETED event carries `last` (the final state)
    /// under a fresh resourceVersion.
    pub(crate) fn remove(
        &mut self,
        res: &ResKey,
        key: &ObjKey,
        last: Option<Value>,
    ) -> Option<Arc<Value>> {
        let entry = self.objects.get_mut(res)?.remove(key)?;
        self.unindex(res, key, &entry.obj);
        self.rv += 1;
        let mut obj = last.unwrap_or_else(|| (*entry.obj).clone());
        meta::meta_mut(&mut obj).insert("resourceVersion".into(), self.rv.to_string().into());
        let obj = Arc::new(obj);
        self.record(res, EventType::Deleted, obj.clone(), Some(entry.obj));
        Some(obj)
    }

    fn index(&mut self, res: &ResKey, key: &ObjKey, obj: &Value) {
        let uid = meta::uid(obj);
        if !uid.is_empty() {
            self.by_uid
                .insert(uid.to_owned(), (res.clone(), key.clone()));
        }
        for owner in meta::owner_uids(obj) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert((res.clone(), key.clone()));
        }
    }

    fn unindex(&mut self, res: &ResKey, key: &ObjKey, obj: &Value) {
        self.by_uid.remove(meta::uid(obj));
        for owner in meta::owner_uids(obj) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(&(res.clone(), key.clone()));
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
    }

    fn record(&mut self, res: &ResKey, ty: EventType, obj: Arc<Value>, prev: Option<Arc<Value>>) {
        let mut change = Change {
            rv: self.rv,
            res: res.clone(),
            ty,
            obj,
            prev,
            json: OnceLock::new(),
            meta_json: OnceLock::new(),
        };
        self.watchers.retain(|w| w.offer(&change));
        // The history keeps the object, not its serialised copies (a replay
        // serialises again): memory stays one object per kept change.
        change.json.take();
        change.meta_json.take();
        self.history.push_back(Arc::new(change));
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.history_floor = old.rv;
            }
        }
        self.changed.send_replace(self.rv);
    }

    /// Changes after `rv`, oldest first (the caller checked `history_floor`).
    pub(crate) fn history_since(&self, rv: u64) -> impl Iterator<Item = &Arc<Change>> {
        let start = self.history.partition_point(|c| c.rv <= rv);
        self.history.range(start..)
    }

    /// Forgets all history: watches from any earlier resourceVersion get 410.
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.history_floor = self.rv;
    }
}
