//! Namespace labels, for the zones whose `spec.recordsFrom` selects
//! namespaces by label. Started on first use: an operator none of whose
//! zones uses a selector never lists or watches Namespaces, so it needs no
//! right to (a namespaced install keeps its Roles). Once started, every
//! label change (and a namespace created or deleted) wakes the zones that
//! use a selector, so their records are granted or refused again.
//!
//! If RBAC refuses the list, the labels are reported unknown with the
//! reason, and selector grants cover nobody; the watch keeps retrying with
//! kube's backoff, so granting the right later heals it. Any other failure
//! before the first list keeps the zones waiting (judging with no labels
//! would take served records down over a network blip).
//!
//! Touches the cluster: list/watch of Namespaces, once started.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use futures::StreamExt as _;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use tokio_util::task::AbortOnDropHandle;

use super::access::{Labels, NamespaceLabels, uses_selector};
use crate::api::BindZone;

/// What the watch knows so far.
#[derive(Default)]
struct WatchState {
    /// The first list is in the store.
    listed: bool,
    /// The last error, while no list succeeded since.
    error: Option<String>,
}

struct Started {
    store: Store<Namespace>,
    state: Arc<Mutex<WatchState>>,
    _task: AbortOnDropHandle<()>,
}

/// The lazily started Namespace watch of the zone controllers.
pub struct NamespaceWatch {
    client: Client,
    zones: Store<BindZone>,
    wake: mpsc::UnboundedSender<ObjectRef<BindZone>>,
    started: OnceLock<Started>,
}

impl NamespaceWatch {
    /// A watch that starts on first [`NamespaceWatch::labels`] and wakes
    /// through `wake` the zones of `zones` that use a selector.
    pub fn new(
        client: Client,
        zones: Store<BindZone>,
        wake: mpsc::UnboundedSender<ObjectRef<BindZone>>,
    ) -> Self {
        NamespaceWatch {
            client,
            zones,
            wake,
            started: OnceLock::new(),
        }
    }

    /// The labels of `namespaces` (starting the watch if needed); `None`
    /// while the first list is still under way (the caller waits: a
    /// half-known set of labels would refuse served records).
    pub fn labels<'a>(&self, namespaces: impl Iterator<Item = &'a str>) -> Option<NamespaceLabels> {
        let started = self.started.get_or_init(|| self.start());
        let state = started.state.lock().unwrap_or_else(|e| e.into_inner());
        if !state.listed {
            return state.error.clone().map(Err);
        }
        let mut out = BTreeMap::new();
        for ns in namespaces {
            if let Some(n) = started.store.get(&ObjectRef::new(ns)) {
                out.insert(ns.to_string(), labels_of(&n));
            }
        }
        Some(Ok(out))
    }

    fn start(&self) -> Started {
        tracing::info!("a zone selects namespaces by label: watching Namespaces");
        let (store, writer) = reflector::store();
        let state = Arc::new(Mutex::new(WatchState::default()));
        let api = Api::<Namespace>::all(self.client.clone());
        let events = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).default_backoff(),
        );
        let (zones, wake, st) = (self.zones.clone(), self.wake.clone(), state.clone());
        let task = async move {
            let mut seen: HashMap<String, Labels> = HashMap::new();
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let wake_zones = {
                    let mut s = st.lock().unwrap_or_else(|e| e.into_inner());
                    match event {
                        // Before the first list a "change" is only the list
                        // arriving: InitDone wakes once for all of it.
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                            let labels = labels_of(&n);
                            seen.insert(n.name_any(), labels.clone()) != Some(labels) && s.listed
                        }
                        Ok(watcher::Event::Delete(n)) => {
                            seen.remove(&n.name_any()).is_some() && s.listed
                        }
                        Ok(watcher::Event::InitDone) => {
                            s.listed = true;
                            s.error = None;
                            true
                        }
                        Ok(watcher::Event::Init) => false,
                        Err(e) => {
                            tracing::warn!(error = %e, "failed to watch Namespaces");
                            // Refused by RBAC (no list will come until the
                            // right is granted): the zones stop waiting and
                            // go on with the labels unknown. Any other
                            // failure is retried and the zones keep waiting:
                            // a blip must not take served records down.
                            match forbidden(&e) {
                                Some(why) if !s.listed => {
                                    let first = s.error.is_none();
                                    s.error = Some(why);
                                    first
                                }
                                _ => false,
                            }
                        }
                    }
                };
                if wake_zones {
                    for z in zones.state().iter().filter(|z| uses_selector(z)) {
                        let _ = wake.unbounded_send(ObjectRef::from_obj(z.as_ref()));
                    }
                }
            }
        };
        Started {
            store,
            state,
            _task: AbortOnDropHandle::new(tokio::spawn(task)),
        }
    }
}

fn labels_of(n: &Namespace) -> Labels {
    n.metadata.labels.clone().unwrap_or_default()
}

/// When RBAC refuses the watch: why labels are unknown, as a record's
/// status says it (naming the right to add).
fn forbidden(e: &watcher::Error) -> Option<String> {
    let code = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code,
        watcher::Error::WatchError(s) => s.code,
        _ => return None,
    };
    (code == 403).then(|| {
        "the operator may not list Namespaces (grant it get, list and watch on namespaces: docs/cross-namespace.md)".to_string()
    })
}
