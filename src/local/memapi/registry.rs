//! The kinds the in-memory API serves: which URL plural maps to which kind,
//! whether a kind is namespaced, whether it has a `status` subresource, and
//! the discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/G/V`, plain
//! and aggregated) built from that table. Pure data; no I/O, no locking.
//!
//! Built-in kinds are registered up front; custom kinds come from
//! CustomResourceDefinitions (registered by the caller or created through the
//! API). A path for an unregistered kind is a 404, as on a real server where
//! the CRD is not installed.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// One served resource: the URL plural of a kind in one group/version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group, empty for the core group.
    pub group: String,
    pub version: String,
    /// Lowercase plural used in URLs (`configmaps`).
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    /// Whether writes to the main resource ignore `.status` and `/status`
    /// writes change only `.status`.
    pub status_subresource: bool,
}

impl ResourceInfo {
    /// A namespaced resource without a status subresource.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.to_owned(),
            namespaced: true,
            status_subresource: false,
        }
    }

    /// Marks the resource as having a `status` subresource.
    pub fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// Marks the resource as cluster-scoped.
    pub fn cluster_scoped(mut self) -> Self {
        self.namespaced = false;
        self
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Reads every served version of a CustomResourceDefinition (as JSON).
    pub fn from_crd_json(crd: &Value) -> Result<Vec<Self>, String> {
        let spec = crd.get("spec").ok_or("crd has no spec")?;
        let field = |v: &Value, k: &str| -> Result<String, String> {
            v.get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("crd spec has no {k}"))
        };
        let group = field(spec, "group")?;
        let names = spec.get("names").ok_or("crd spec has no names")?;
        let kind = field(names, "kind")?;
        let plural = field(names, "plural")?;
        let singular = field(names, "singular").unwrap_or_else(|_| kind.to_ascii_lowercase());
        let namespaced = field(spec, "scope")? != "Cluster";
        let versions = spec
            .get("versions")
            .and_then(Value::as_array)
            .ok_or("crd spec has no versions")?;
        let mut out = Vec::new();
        for v in versions {
            if v.get("served").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            out.push(Self {
                group: group.clone(),
                version: field(v, "name")?,
                plural: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                namespaced,
                status_subresource: v.pointer("/subresources/status").is_some(),
            });
        }
        Ok(out)
    }
}

/// The table of served resources, keyed by (group, version, plural).
#[derive(Clone, Debug)]
pub(crate) struct Registry {
    by_path: BTreeMap<(String, String, String), ResourceInfo>,
}

impl Registry {
    /// The built-in kinds controllers and the local runtime touch, plus the
    /// usual neighbours so a stray call does not 404 for no reason.
    pub(crate) fn with_builtins() -> Self {
        let mut r = Self {
            by_path: BTreeMap::new(),
        };
        let core = |k: &str, p: &str| ResourceInfo::new("", "v1", k, p);
        let apps = |k: &str, p: &str| ResourceInfo::new("apps", "v1", k, p).with_status();
        for info in [
            core("Namespace", "namespaces")
                .cluster_scoped()
                .with_status(),
            core("Node", "nodes").cluster_scoped().with_status(),
            core("PersistentVolume", "persistentvolumes")
                .cluster_scoped()
                .with_status(),
            core("Pod", "pods").with_status(),
            core("Service", "services").with_status(),
            core("PersistentVolumeClaim", "persistentvolumeclaims").with_status(),
            core("ConfigMap", "configmaps"),
            core("Secret", "secrets"),
            core("Event", "events"),
            core("ServiceAccount", "serviceaccounts"),
            core("Endpoints", "endpoints"),
            apps("StatefulSet", "statefulsets"),
            apps("Deployment", "deployments"),
            apps("ReplicaSet", "replicasets"),
            apps("DaemonSet", "daemonsets"),
            ResourceInfo::new("coordination.k8s.io", "v1", "Lease", "leases"),
            ResourceInfo::new("events.k8s.io", "v1", "Event", "events"),
            ResourceInfo::new("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
            ResourceInfo::new(
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
            )
            .with_status(),
            ResourceInfo::new("batch", "v1", "Job", "jobs").with_status(),
            ResourceInfo::new("batch", "v1", "CronJob", "cronjobs").with_status(),
            ResourceInfo::new(
                "networking.k8s.io",
                "v1",
                "NetworkPolicy",
                "networkpolicies",
            ),
            ResourceInfo::new("networking.k8s.io", "v1", "Ingress", "ingresses").with_status(),
            ResourceInfo::new("rbac.authorization.k8s.io", "v1", "Role", "roles"),
            ResourceInfo::new(
                "rbac.authorization.k8s.io",
                "v1",
                "RoleBinding",
                "rolebindings",
            ),
            ResourceInfo::new(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRole",
                "clusterroles",
            )
            .cluster_scoped(),
            ResourceInfo::new(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRoleBinding",
                "clusterrolebindings",
            )
            .cluster_scoped(),
            ResourceInfo::new(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            )
            .cluster_scoped()
            .with_status(),
        ] {
            r.insert(info);
        }
        r
    }

    pub(crate) fn insert(&mut self, info: ResourceInfo) {
        self.by_path.insert(
            (
                info.group.clone(),
                info.version.clone(),
                info.plural.clone(),
            ),
            info,
        );
    }

    pub(crate) fn remove_group_plural(&mut self, group: &str, plural: &str) {
        self.by_path
            .retain(|(g, _, p), _| !(g == group && p == plural));
    }

    pub(crate) fn get(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceInfo> {
        self.by_path
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
    }

    /// Resource by kind in an apiVersion (`apps/v1`, `Deployment`).
    pub(crate) fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceInfo> {
        self.by_path
            .values()
            .find(|i| i.api_version() == api_version && i.kind == kind)
    }

    fn group_versions(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (g, v, _) in self.by_path.keys() {
            let vs = out.entry(g.clone()).or_default();
            if !vs.contains(v) {
                vs.push(v.clone());
            }
        }
        out
    }

    /// `GET /api`
    pub(crate) fn core_versions(&self) -> Value {
        json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
    }

    /// `GET /apis`
    pub(crate) fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .group_versions()
            .into_iter()
            .filter(|(g, _)| !g.is_empty())
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs
                    .iter()
                    .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                    .collect();
                let preferred = versions[0].clone();
                json!({"name": g, "versions": versions, "preferredVersion": preferred})
            })
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `GET /api/v1` or `GET /apis/G/V`; `None` when nothing is served there.
    pub(crate) fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let infos: Vec<&ResourceInfo> = self
            .by_path
            .values()
            .filter(|i| i.group == group && i.version == version)
            .collect();
        if infos.is_empty() {
            return None;
        }
        let mut resources = Vec::new();
        for i in &infos {
            resources.push(json!({
                "name": i.plural, "singularName": i.singular, "namespaced": i.namespaced,
                "kind": i.kind, "verbs": VERBS,
            }));
            if i.status_subresource {
                resources.push(json!({
                    "name": format!("{}/status", i.plural), "singularName": "",
                    "namespaced": i.namespaced, "kind": i.kind, "verbs": ["get", "patch", "update"],
                }));
            }
        }
        Some(json!({
            "kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": infos[0].api_version(), "resources": resources,
        }))
    }

    /// Aggregated discovery (`apidiscovery.k8s.io/v2`) for the core group
    /// (`core == true`) or for every named group.
    pub(crate) fn aggregated(&self, core: bool) -> Value {
        let items: Vec<Value> = self
            .group_versions()
            .into_iter()
            .filter(|(g, _)| g.is_empty() == core)
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs
                    .iter()
                    .map(|v| {
                        let resources: Vec<Value> = self
                            .by_path
                            .values()
                            .filter(|i| i.group == g && &i.version == v)
                            .map(|i| {
                                let kind =
                                    json!({"group": i.group, "version": i.version, "kind": i.kind});
                                let subs: Vec<Value> = if i.status_subresource {
                                    vec![json!({"subresource": "status", "responseKind": kind,
                                        "verbs": ["get", "patch", "update"]})]
                                } else {
                                    vec![]
                                };
                                json!({
                                    "resource": i.plural, "responseKind": kind,
                                    "scope": if i.namespaced { "Namespaced" } else { "Cluster" },
                                    "singularResource": i.singular, "verbs": VERBS,
                                    "subresources": subs,
                                })
                            })
                            .collect();
                        json!({"version": v, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": g}, "versions": versions})
            })
            .collect();
        json!({
            "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items,
        })
    }
}

const VERBS: [&str; 7] = [
    "create", "delete", "get", "list", "patch", "update", "watch",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_json_yields_one_info_per_served_version() {
        let crd = json!({"spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "versions": [
            {"name": "v1", "served": true, "subresources": {"status": {}}},
            {"name": "v0", "served": false},
        ]}});
        let infos = ResourceInfo::from_crd_json(&crd).unwrap();
        assert_eq!(infos.len(), 1);
        assert_eq!(infos[0].api_version(), "example.com/v1");
        assert!(infos[0].namespaced && infos[0].status_subresource);
    }

    #[test]
    fn builtins_know_scope_and_status() {
        let r = Registry::with_builtins();
        assert!(!r.get("", "v1", "namespaces").unwrap().namespaced);
        assert!(
            r.get("apps", "v1", "statefulsets")
                .unwrap()
                .status_subresource
        );
        assert!(!r.get("", "v1", "configmaps").unwrap().status_subresource);
        assert!(r.get("", "v1", "widgets").is_none());
    }
}
