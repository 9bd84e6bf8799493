//! Watches: `?watch=true` turned into a stream of JSON lines
//! (`{"type":"ADDED","object":{...}}`). A watch starts with synthetic ADDED
//! events for the current objects (no resourceVersion, `0`, or
//! `sendInitialEvents=true`, the last ending with the
//! `k8s.io/initial-events-end` BOOKMARK) or with a replay of the history
//! after the given resourceVersion (410 Gone when that history was dropped),
//! then receives every committed change live. Changes are pushed into the
//! watcher's channel while the state lock is held, so order equals commit
//! order. Periodic BOOKMARKs are queued the same way.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::path::{Query, Target};
use super::registry::ResourceInfo;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{Change, EventType, ResKey, State, Subscriber, res_key};

/// One open watch.
pub(crate) struct Watcher {
    id: u64,
    res: ResKey,
    kind: String,
    api_version: String,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    meta_only: bool,
    tx: mpsc::UnboundedSender<Bytes>,
}

/// What the response stream needs: the event receiver and, for bookmarks,
/// the watcher id (gone once the watcher is dropped from the state).
pub(crate) struct WatchStart {
    pub(crate) id: u64,
    pub(crate) rx: mpsc::UnboundedReceiver<Bytes>,
    pub(crate) bookmarks: bool,
}

impl Watcher {
    fn matches(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns))
            && self.labels.matches(obj)
            && self.fields.matches(obj)
    }

    fn send(&self, ty: &str, obj: &Value) -> bool {
        let obj = if self.meta_only {
            partial_metadata(obj)
        } else {
            obj.clone()
        };
        let mut line = serde_json::to_vec(&json!({"type": ty, "object": obj}))
            .expect("json values always serialise");
        line.push(b'\n');
        self.tx.send(Bytes::from(line)).is_ok()
    }

    /// Forwards a change if this watch sees it; `false` once the client has
    /// gone away, so the state can drop the watcher.
    pub(crate) fn offer(&self, c: &Change) -> bool {
        if self.tx.is_closed() {
            return false;
        }
        if c.res != self.res {
            return true;
        }
        let now = self.matches(&c.obj);
        let before = c.prev.as_deref().is_some_and(|p| self.matches(p));
        let ty = match c.ty {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if now || before => "DELETED",
            _ => return true,
        };
        self.send(ty, &c.obj)
    }

    pub(crate) fn is_open(&self) -> bool {
        !self.tx.is_closed()
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> bool {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": meta});
        let mut line =
            serde_json::to_vec(&json!({"type": "BOOKMARK", "object": obj})).expect("json value");
        line.push(b'\n');
        self.tx.send(Bytes::from(line)).is_ok()
    }
}

impl Subscriber for Watcher {
    fn id(&self) -> u64 {
        self.id
    }

    fn offer(&self, change: &Change) -> bool {
        Watcher::offer(self, change)
    }

    fn is_open(&self) -> bool {
        Watcher::is_open(self)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> bool {
        Watcher::bookmark(self, rv, initial_end)
    }
}

/// The `PartialObjectMetadata` form of an object (metadata-only requests).
pub(crate) fn partial_metadata(obj: &Value) -> Value {
    json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

impl State {
    /// Opens a watch: queues the initial or replayed events, then registers
    /// the watcher for live changes.
    pub(crate) fn start_watch(
        &mut self,
        t: &Target,
        q: &Query,
        meta_only: bool,
    ) -> Result<WatchStart, ApiError> {
        let labels = LabelSelector::parse(q.label_selector.as_deref().unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(q.field_selector.as_deref().unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let info: &ResourceInfo = &t.info;
        let (tx, rx) = mpsc::unbounded_channel();
        self.next_watcher_id += 1;
        let w = Watcher {
            id: self.next_watcher_id,
            res: res_key(info),
            kind: info.kind.clone(),
            api_version: info.api_version(),
            namespace: t.namespace.clone(),
            labels,
            fields,
            meta_only,
            tx,
        };
        let start = WatchStart {
            id: w.id,
            rx,
            bookmarks: q.allow_bookmarks,
        };
        let from =
            match q.resource_version.as_deref() {
                _ if q.send_initial_events => None,
                None | Some("0") => None,
                Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
            };
        match from {
            None => {
                for (_, e) in self.iter(&w.res, t.namespace.as_deref()) {
                    if w.matches(&e.obj) {
                        w.send("ADDED", &e.obj);
                    }
                }
                if q.send_initial_events {
                    w.bookmark(self.rv(), true);
                }
            }
            Some(rv) if rv < self.history_floor() => {
                let err = ApiError::gone(format!(
                    "too old resource version: {rv} ({})",
                    self.history_floor() + 1
                ));
                w.send("ERROR", &err.to_status());
                // Not registered: the stream ends after the error, and the
                // client relists.
                return Ok(start);
            }
            Some(rv) => {
                let replay: Vec<Arc<Change>> = self.history_since(rv).cloned().collect();
                for c in replay {
                    w.offer(&c);
                }
            }
        }
        self.watchers.push(Box::new(w));
        Ok(start)
    }

    /// Queues a BOOKMARK at the current resourceVersion for watcher `id`;
    /// `false` when that watcher is gone.
    pub(crate) fn bookmark(&mut self, id: u64) -> bool {
        let rv = self.rv();
        match self.watchers.iter().find(|w| w.id() == id) {
            Some(w) => w.bookmark(rv, false),
            None => false,
        }
    }

    /// Ends every open watch (clients re-watch from their last version).
    pub(crate) fn close_watches(&mut self) {
        self.watchers.clear();
    }
}
