//! Which namespaces the operator watches: every namespace (the default), or
//! a list (`bind-operator run --watch-namespaces a,b`), so that it needs
//! Roles in those namespaces only and no cluster-wide access to Secrets or
//! pods/exec. Every list and watch of the controllers goes through
//! [`Scope::watch`].
//!
//! A namespaced scope runs one watch per namespace and merges them into one
//! event stream a single kube reflector can consume. A reflector treats
//! `Init`..`InitDone` as "this is everything", so the merge says so once,
//! when every namespace has listed; a later re-list of one namespace is
//! turned into `Apply` events and `Delete`s of what vanished there, never
//! into an `Init` that would wipe the other namespaces from the cache.
//!
//! Touches the cluster (list/watch) only when a returned stream is polled.

use std::collections::HashMap;
use std::fmt;

use futures::StreamExt as _;
use futures::stream::{self, BoxStream};
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// A watch event stream (with kube's default backoff on errors).
pub type EventStream<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// The namespaces the controllers watch; empty means every namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    namespaces: Vec<String>,
}

/// A `--watch-namespaces` / `BIND_OPERATOR_WATCH_NAMESPACES` value that
/// names something that cannot be a namespace.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "failed to parse the watched namespaces {value:?}: {name:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"
)]
pub struct ScopeError {
    pub value: String,
    pub name: String,
}

impl Scope {
    /// Every namespace.
    pub fn cluster() -> Self {
        Scope::default()
    }

    /// A comma-separated list of namespaces; empty (or only commas and
    /// spaces) means every namespace.
    pub fn parse(value: &str) -> Result<Self, ScopeError> {
        let mut namespaces = Vec::new();
        for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !is_namespace_name(name) {
                return Err(ScopeError {
                    value: value.to_owned(),
                    name: name.to_owned(),
                });
            }
            namespaces.push(name.to_owned());
        }
        namespaces.sort();
        namespaces.dedup();
        Ok(Scope { namespaces })
    }

    pub fn is_cluster_wide(&self) -> bool {
        self.namespaces.is_empty()
    }

    /// The watched namespaces (empty: every namespace).
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// A watch of `K` over the scope, with kube's default backoff.
    pub fn watch<K>(&self, client: &Client, config: watcher::Config) -> EventStream<K>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        if self.is_cluster_wide() {
            return watcher(Api::<K>::all(client.clone()), config)
                .default_backoff()
                .boxed();
        }
        let sources = self
            .namespaces
            .iter()
            .map(|ns| {
                watcher(Api::<K>::namespaced(client.clone(), ns), config.clone())
                    .default_backoff()
                    .boxed()
            })
            .collect();
        merge(sources)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_cluster_wide() {
            f.write_str("all namespaces")
        } else {
            f.write_str(&self.namespaces.join(","))
        }
    }
}

/// A DNS-1123 label: what the API server accepts as a namespace name.
fn is_namespace_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// What the merge knows of one namespace's watch.
struct Source<K> {
    /// The objects as last seen, by name (a `Delete` needs the object).
    known: HashMap<String, K>,
    /// Objects of a list in progress.
    listing: Option<HashMap<String, K>>,
    listed: bool,
}

struct Merge<K> {
    sources: Vec<Source<K>>,
    /// Every namespace has listed once and the merged `InitDone` went out.
    synced: bool,
}

fn name_of<K: Resource>(obj: &K) -> String {
    obj.meta().name.clone().unwrap_or_default()
}

impl<K: Resource + Clone> Merge<K> {
    fn on(&mut self, i: usize, event: watcher::Event<K>) -> Vec<watcher::Event<K>> {
        use watcher::Event::*;
        let synced = self.synced;
        let src = &mut self.sources[i];
        let mut out = Vec::new();
        match event {
            Init => src.listing = Some(HashMap::new()),
            InitApply(obj) => {
                if synced {
                    out.push(Apply(obj.clone()));
                }
                src.listing
                    .get_or_insert_with(HashMap::new)
                    .insert(name_of(&obj), obj);
            }
            InitDone => {
                let listed = src.listing.take().unwrap_or_default();
                if synced {
                    for (name, old) in src.known.drain() {
                        if !listed.contains_key(&name) {
                            out.push(Delete(old));
                        }
                    }
                }
                src.known = listed;
                src.listed = true;
            }
            Apply(obj) => {
                if synced {
                    out.push(Apply(obj.clone()));
                }
                src.known.insert(name_of(&obj), obj);
            }
            Delete(obj) => {
                if synced {
                    out.push(Delete(obj.clone()));
                }
                src.known.remove(&name_of(&obj));
            }
        }
        if !self.synced && self.sources.iter().all(|s| s.listed) {
            // The first complete picture, as one list.
            self.synced = true;
            out.push(Init);
            for s in &self.sources {
                out.extend(s.known.values().cloned().map(InitApply));
            }
            out.push(InitDone);
        }
        out
    }
}

/// One event stream from one watch per namespace (see the module docs).
pub fn merge<K>(sources: Vec<EventStream<K>>) -> EventStream<K>
where
    K: Resource + Clone + Send + 'static,
{
    let mut state = Merge {
        sources: (0..sources.len())
            .map(|_| Source {
                known: HashMap::new(),
                listing: None,
                listed: false,
            })
            .collect(),
        synced: false,
    };
    stream::select_all(
        sources
            .into_iter()
            .enumerate()
            .map(|(i, s)| s.map(move |e| (i, e)).boxed()),
    )
    .flat_map(move |(i, result)| {
        let out: Vec<Result<watcher::Event<K>, watcher::Error>> = match result {
            Ok(event) => state.on(i, event).into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        stream::iter(out)
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use watcher::Event::*;

    fn cm(name: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c
    }

    fn names(events: &[watcher::Event<ConfigMap>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Init => "init".to_owned(),
                InitApply(o) => format!("initapply {}", name_of(o)),
                InitDone => "initdone".to_owned(),
                Apply(o) => format!("apply {}", name_of(o)),
                Delete(o) => format!("delete {}", name_of(o)),
            })
            .collect()
    }

    fn merge_of(n: usize) -> Merge<ConfigMap> {
        Merge {
            sources: (0..n)
                .map(|_| Source {
                    known: HashMap::new(),
                    listing: None,
                    listed: false,
                })
                .collect(),
            synced: false,
        }
    }

    #[test]
    fn parses_lists_and_refuses_non_namespaces() {
        assert!(Scope::parse("").unwrap().is_cluster_wide());
        assert!(Scope::parse(" , ").unwrap().is_cluster_wide());
        let s = Scope::parse("b, a,b").unwrap();
        assert_eq!(s.namespaces(), ["a", "b"]);
        assert_eq!(s.to_string(), "a,b");
        let e = Scope::parse("a,Kube_System").unwrap_err();
        assert_eq!(e.name, "Kube_System");
        assert!(Scope::parse("-a").is_err());
    }

    #[test]
    fn one_init_once_every_namespace_listed() {
        let mut m = merge_of(2);
        assert!(m.on(0, Init).is_empty());
        assert!(m.on(0, InitApply(cm("a1"))).is_empty());
        assert!(m.on(0, InitDone).is_empty());
        // A change in a listed namespace before the other finished listing
        // is part of the first picture, not lost.
        assert!(m.on(0, Apply(cm("a2"))).is_empty());
        assert!(m.on(1, Init).is_empty());
        assert!(m.on(1, InitApply(cm("b1"))).is_empty());
        let mut out = names(&m.on(1, InitDone));
        out[1..4].sort();
        assert_eq!(
            out,
            [
                "init",
                "initapply a1",
                "initapply a2",
                "initapply b1",
                "initdone"
            ]
        );
    }

    #[test]
    fn a_relist_of_one_namespace_keeps_the_others() {
        let mut m = merge_of(2);
        m.on(0, Init);
        m.on(0, InitApply(cm("a1")));
        m.on(0, InitApply(cm("a2")));
        m.on(1, Init);
        m.on(1, InitApply(cm("b1")));
        m.on(0, InitDone);
        m.on(1, InitDone);
        // Namespace 0 re-lists after a desync: a2 vanished meanwhile.
        assert!(m.on(0, Init).is_empty());
        assert_eq!(names(&m.on(0, InitApply(cm("a1")))), ["apply a1"]);
        assert_eq!(names(&m.on(0, InitDone)), ["delete a2"]);
        assert_eq!(names(&m.on(1, Delete(cm("b1")))), ["delete b1"]);
    }
}
