//! Watches: `?watch=true` turned into a stream of JSON lines
//! (`{"type":"ADDED","object":{...}}`). A watch starts with synthetic ADDED
//! events for the current objects (no resourceVersion, `0`, or
//! `sendInitialEvents=true`, the last ending with the
//! `k8s.io/initial-events-end` BOOKMARK) or with a replay of the history
//! after the given resourceVersion (410 Gone when that history was dropped),
//! then receives every committed change live. Changes are pushed into the
//! watcher's channel while the state lock is held, so order equals commit
//! order; a change is serialised once per form (whole object, metadata
//! only) however many watches get it. Periodic BOOKMARKs are queued the
//! same way.

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
            .is_none_or(|ns| super::meta::str_at(obj, "/metadata/namespace") == Some(ns))
            && self.labels.matches(obj)
            && self.fields.matches(obj)
    }

    /// Queues one event for `obj` (initial events, errors).
    fn send(&self, ty: &str, obj: &Value) -> bool {
        let json = if self.meta_only {
            to_json(&partial_metadata(obj))
        } else {
            to_json(obj)
        };
        self.send_line(ty, &json)
    }

    /// Queues one event line for an object already serialised.
    fn send_line(&self, ty: &str, obj_json: &[u8]) -> bool {
        self.tx.send(event_line(ty, obj_json)).is_ok()
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
        self.send_line(ty, c.object_json(self.meta_only))
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

fn to_json(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("json values always serialise")
}

/// One line of a watch stream: `{"type":"ADDED","object":{...}}`. The type
/// comes first, so a client decoding the adjacently tagged event knows the
/// variant before the object and need not buffer it.
fn event_line(ty: &str, obj_json: &[u8]) -> Bytes {
    const HEAD: &[u8] = br#"{"type":""#;
    const MID: &[u8] = br#"","object":"#;
    let mut line = Vec::with_capacity(HEAD.len() + ty.len() + MID.len() + obj_json.len() + 2);
    line.extend_from_slice(HEAD);
    line.extend_from_slice(ty.as_bytes());
    line.extend_from_slice(MID);
    line.extend_from_slice(obj_json);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

impl Change {
    /// The changed object as this kind of watch sends it, serialised on
    /// first use and shared by every watch after.
    fn object_json(&self, meta_only: bool) -> &[u8] {
        if meta_only {
            self.meta_json
                .get_or_init(|| to_json(&partial_metadata(&self.obj)).into())
        } else {
            self.json.get_or_init(|| to_json(&self.obj).into())
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    fn watcher(meta_only: bool) -> (Watcher, mpsc::UnboundedReceiver<Bytes>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let w = Watcher {
            id: 1,
            res: (String::new(), "configmaps".into()),
            kind: "ConfigMap".into(),
            api_version: "v1".into(),
            namespace: None,
            labels: LabelSelector::parse("").unwrap(),
            fields: FieldSelector::parse("").unwrap(),
            meta_only,
            tx,
        };
        (w, rx)
    }

    fn line(rx: &mut mpsc::UnboundedReceiver<Bytes>) -> Value {
        let b = rx.try_recv().expect("an event line");
        assert!(b.ends_with(b"\n"), "one event per line");
        assert!(
            b.starts_with(br#"{"type":""#),
            "the type comes before the object"
        );
        serde_json::from_slice(&b).expect("a JSON event")
    }

    #[test]
    fn a_change_is_sent_to_each_watch_in_its_own_form() {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7"},
            "data": {"k": "v"}});
        let change = Change {
            rv: 7,
            res: (String::new(), "configmaps".into()),
            ty: EventType::Modified,
            obj: Arc::new(obj.clone()),
            prev: Some(Arc::new(obj.clone())),
            json: OnceLock::new(),
            meta_json: OnceLock::new(),
        };
        let (full1, mut rx1) = watcher(false);
        let (full2, mut rx2) = watcher(false);
        let (meta, mut rx3) = watcher(true);
        for w in [&full1, &meta, &full2] {
            assert!(w.offer(&change));
        }
        let want = json!({"type": "MODIFIED", "object": obj});
        assert_eq!(line(&mut rx1), want);
        assert_eq!(line(&mut rx2), want);
        assert_eq!(
            line(&mut rx3),
            json!({"type": "MODIFIED", "object": partial_metadata(&obj)})
        );
        // The same from a plain send (initial events, replays).
        full1.send("ADDED", &obj);
        assert_eq!(line(&mut rx1), json!({"type": "ADDED", "object": obj}));
    }
}
