//! The one place an Event is published: [`Events`] (truncated to the API
//! limit, failures logged and ignored), and [`Problems`], the memory that
//! reports a repeating failure once. The context's `publish_event`, the
//! measuring guard and the stores' report of undeserialisable objects all
//! go through it.
//!
//! Touches the cluster only to publish Events. Never holds key material.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::names::EVENT_REPORTER;

/// Longest Event note (the API limit is 1 KiB).
const MAX_EVENT_NOTE: usize = 1000;

/// Publishes Events as the operator (one recorder per process).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    pub fn new(client: Client) -> Self {
        let reporter = Reporter {
            controller: EVENT_REPORTER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Events {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Publishes an Event regarding `regarding` (and `related`, if any).
    /// A failure to publish is logged and otherwise ignored: Events are a
    /// courtesy, never a reason to fail. `note` must not hold key material
    /// (no error of ours does); it is cut to the API's limit.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let mut note = note;
        if note.len() > MAX_EVENT_NOTE {
            let mut end = MAX_EVENT_NOTE;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
        }
        let ev = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: related,
        };
        if let Err(e) = self.recorder.publish(&ev, regarding).await {
            tracing::warn!(reason, error = %e, "failed to publish event");
        }
    }
}

/// The last failure reported by an Event per object (by uid), so a failure
/// that repeats is reported once, and again only when it changes or after
/// the object reconciled cleanly.
#[derive(Default)]
pub struct Problems {
    last: Mutex<HashMap<String, (&'static str, String)>>,
}

impl Problems {
    /// Records `category`/`message` for `uid`; true when it is new.
    pub fn is_new(&self, uid: &str, category: &'static str, message: &str) -> bool {
        let mut last = self.last.lock().expect("problems lock");
        match last.get(uid) {
            Some((c, m)) if *c == category && m == message => false,
            _ => {
                last.insert(uid.to_owned(), (category, message.to_owned()));
                true
            }
        }
    }

    /// Forgets `uid`'s problem (it reconciled cleanly, or is gone).
    pub fn clear(&self, uid: &str) {
        self.last.lock().expect("problems lock").remove(uid);
    }
}
