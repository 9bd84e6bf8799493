//! The runtime's own view of the pods it runs: where each pod's files live,
//! its ports, and what its container is doing. Pod workers write it; the
//! executor (is the pod running?), the network seam and the `local`
//! command's status output (pod endpoints) read it. A version counter moves
//! on every change so readers can wait for one.
//!
//! In-process data only; never touches the cluster.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::identity::RunAs;
use super::ports::PodPorts;

/// Where one pod's files live under the state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDirs {
    /// `<state>/<namespace>/<pod>`.
    pub root: PathBuf,
    /// The materialised config volume (the entrypoint's config dir).
    pub config: PathBuf,
    /// named's data directory (its working directory).
    pub data: PathBuf,
    /// named's stderr/stdout, appended across restarts.
    pub log: PathBuf,
}

impl PodDirs {
    pub fn new(state_dir: &Path, namespace: &str, pod: &str) -> Self {
        let root = state_dir
            .join(safe_component(namespace))
            .join(safe_component(pod));
        PodDirs {
            config: root.join("config"),
            data: root.join("data"),
            log: root.join("named.log"),
            root,
        }
    }
}

/// Object names are DNS labels, but a path must never escape the state dir
/// whatever the API hands us.
fn safe_component(s: &str) -> String {
    let cleaned: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() || cleaned.starts_with('.') {
        format!("_{cleaned}")
    } else {
        cleaned
    }
}

/// A pod's role in its BindCluster, by StatefulSet ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PodRole {
    /// Ordinal 0: holds the zones.
    Primary,
    /// Every other ordinal: transfers them through the catalog.
    Secondary,
}

impl PodRole {
    pub fn from_ordinal(ordinal: u32) -> Self {
        if ordinal == 0 {
            PodRole::Primary
        } else {
            PodRole::Secondary
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PodRole::Primary => "primary",
            PodRole::Secondary => "secondary",
        }
    }
}

/// One pod as the runtime runs it: what the `local` command shows in its
/// table and in `status.json` (the one pod type of local mode; the report
/// takes it as is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodEndpoint {
    pub namespace: String,
    pub name: String,
    /// The BindCluster (the StatefulSet's owner), else the StatefulSet.
    pub cluster: String,
    pub role: PodRole,
    pub ordinal: u32,
    /// Where named answers DNS: `127.0.0.1:PORT`.
    pub dns: SocketAddr,
    /// Where named's rndc control channel listens.
    pub control: SocketAddr,
    /// named is running (not waiting to start or restart).
    pub running: bool,
    /// The Pod is Ready (named answered the last probes).
    pub ready: bool,
    /// Container restarts of the current Pod object.
    pub restarts: u32,
    /// The Pod object's uid the runtime runs (not part of `status.json`).
    #[serde(skip)]
    pub uid: String,
    /// named's log file (not part of `status.json`).
    #[serde(skip)]
    pub log: PathBuf,
    /// Who the pod's processes run as (exec'd commands too; not part of
    /// `status.json`).
    #[serde(skip)]
    pub run_as: RunAs,
}

impl PodEndpoint {
    pub fn new(
        namespace: &str,
        name: &str,
        cluster: &str,
        ordinal: u32,
        ports: PodPorts,
        log: PathBuf,
    ) -> Self {
        PodEndpoint {
            namespace: namespace.into(),
            name: name.into(),
            cluster: cluster.into(),
            role: PodRole::from_ordinal(ordinal),
            ordinal,
            dns: SocketAddr::from((Ipv4Addr::LOCALHOST, ports.dns)),
            control: SocketAddr::from((Ipv4Addr::LOCALHOST, ports.control)),
            running: false,
            ready: false,
            restarts: 0,
            uid: String::new(),
            log,
            run_as: RunAs::default(),
        }
    }
}

/// Pods keyed by `(namespace, name)`, plus a change counter.
#[derive(Debug)]
pub struct PodTable {
    pods: Mutex<BTreeMap<(String, String), PodEndpoint>>,
    version: tokio::sync::watch::Sender<u64>,
}

impl Default for PodTable {
    fn default() -> Self {
        PodTable {
            pods: Mutex::new(BTreeMap::new()),
            version: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl PodTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), PodEndpoint>> {
        self.pods.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Inserts or replaces a pod; bumps the version only on a real change.
    pub fn set(&self, entry: PodEndpoint) {
        let key = (entry.namespace.clone(), entry.name.clone());
        let changed = {
            let mut pods = self.lock();
            let changed = pods.get(&key) != Some(&entry);
            pods.insert(key, entry);
            changed
        };
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
    }

    pub fn remove(&self, namespace: &str, name: &str) {
        let removed = self
            .lock()
            .remove(&(namespace.to_string(), name.to_string()))
            .is_some();
        if removed {
            self.version.send_modify(|v| *v += 1);
        }
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<PodEndpoint> {
        self.lock()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Every pod, sorted by namespace, cluster, ordinal.
    pub fn list(&self) -> Vec<PodEndpoint> {
        let mut out: Vec<PodEndpoint> = self.lock().values().cloned().collect();
        out.sort_by(|a, b| {
            (&a.namespace, &a.cluster, a.ordinal, &a.name).cmp(&(
                &b.namespace,
                &b.cluster,
                b.ordinal,
                &b.name,
            ))
        });
        out
    }

    /// Moves whenever any pod's entry changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.version.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_stay_inside_the_state_dir() {
        let d = PodDirs::new(Path::new("/s"), "..", "a/b");
        assert_eq!(d.root, Path::new("/s/_../a_b"));
        assert_eq!(d.data, Path::new("/s/_../a_b/data"));
    }

    #[test]
    fn table_versions_move_only_on_change() {
        let t = PodTable::default();
        let rx = t.subscribe();
        let ports = PodPorts {
            dns: 5300,
            control: 5301,
            stats: 5302,
        };
        let e = PodEndpoint::new("ns", "dns-1", "dns", 1, ports, PathBuf::from("/l"));
        t.set(e.clone());
        assert_eq!(*rx.borrow(), 1);
        t.set(e.clone());
        assert_eq!(*rx.borrow(), 1);
        assert_eq!(t.list()[0].role, PodRole::Secondary);
        assert_eq!(t.list()[0].dns.to_string(), "127.0.0.1:5300");
        t.remove("ns", "dns-1");
        assert_eq!(*rx.borrow(), 2);
        assert!(t.list().is_empty());
    }
}
