//! Which files a pod's config volume should hold, decided as kubelet would:
//! the volume mounted at the in-container config directory (a projected,
//! ConfigMap or Secret volume), its sources' keys (all of them, or the
//! `items` the pod spec lists, at their `path`s), modes from `mode` /
//! `defaultMode`, and whether a missing object or key blocks the pod or is
//! `optional`.
//!
//! Pure: objects come in through [`Sources`]; writing the files is
//! `atomic_writer.rs`'s job. Also tells whether the pod's data directory
//! is a claim (kept when the pod is re-created) or an emptyDir. Never logs
//! file contents: Secret payloads pass through here.

use std::collections::BTreeMap;
use std::path::{Component, Path};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, Pod, Secret, Volume};

use crate::bind::layout::defaults;

/// Kubernetes' default file mode for projected files (0644).
const DEFAULT_MODE: u32 = 0o644;

/// One file of a volume. `Debug` hides the bytes (they may be a Secret).
#[derive(Clone, PartialEq, Eq)]
pub struct FileContent {
    pub bytes: Vec<u8>,
    pub mode: u32,
}

impl std::fmt::Debug for FileContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileContent")
            .field("len", &self.bytes.len())
            .field("mode", &format_args!("{:o}", self.mode))
            .finish()
    }
}

/// Relative path in the volume -> content.
pub type Payload = BTreeMap<String, FileContent>;

/// Why a volume cannot be set up yet (the pod waits, as in
/// `ContainerCreating`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error("failed to find a projected, configMap or secret volume mounted at {0}")]
    NoConfigVolume(String),
    #[error("failed to mount volume {volume}: {kind} {name} not found")]
    MissingObject {
        volume: String,
        kind: &'static str,
        name: String,
    },
    #[error("failed to mount volume {volume}: {kind} {name} has no key {key}")]
    MissingKey {
        volume: String,
        kind: &'static str,
        name: String,
        key: String,
    },
    #[error("failed to mount volume {volume}: invalid path {path}")]
    BadPath { volume: String, path: String },
}

/// Read access to the ConfigMaps and Secrets a volume refers to.
pub trait Sources {
    fn config_map(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>>;
    fn secret(&self, namespace: &str, name: &str) -> Option<Arc<Secret>>;
}

fn first_container_mount<'a>(pod: &'a Pod, mount_path: &str) -> Option<&'a str> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .first()?
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path.trim_end_matches('/') == mount_path)
        .map(|m| m.name.as_str())
}

fn volume<'a>(pod: &'a Pod, name: &str) -> Option<&'a Volume> {
    pod.spec
        .as_ref()?
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == name)
}

fn is_config_like(v: &Volume) -> bool {
    v.projected.is_some() || v.config_map.is_some() || v.secret.is_some()
}

/// The volume the entrypoint reads as its config directory: the one the
/// first container mounts at the in-cluster config path, else the first
/// projected / ConfigMap / Secret volume.
pub fn config_volume(pod: &Pod) -> Result<&Volume, VolumeError> {
    first_container_mount(pod, defaults::CONFIG_DIR)
        .and_then(|n| volume(pod, n))
        .filter(|v| is_config_like(v))
        .or_else(|| {
            pod.spec
                .as_ref()?
                .volumes
                .iter()
                .flatten()
                .find(|v| is_config_like(v))
        })
        .ok_or_else(|| VolumeError::NoConfigVolume(defaults::CONFIG_DIR.into()))
}

/// Whether the data directory outlives the pod: true when the volume
/// mounted at the in-cluster data path is a claim or a host path; an
/// emptyDir (or no volume at all) dies with the pod.
pub fn data_volume_is_persistent(pod: &Pod) -> bool {
    first_container_mount(pod, defaults::DATA_DIR)
        .and_then(|n| volume(pod, n))
        .is_some_and(|v| v.persistent_volume_claim.is_some() || v.host_path.is_some())
}

fn check_path(volume: &str, path: &str) -> Result<(), VolumeError> {
    let p = Path::new(path);
    let ok = !path.is_empty()
        && !path.starts_with("..")
        && p.components().all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(VolumeError::BadPath {
            volume: volume.into(),
            path: path.into(),
        })
    }
}

struct Source<'a> {
    kind: &'static str,
    name: &'a str,
    items: Option<&'a [KeyToPath]>,
    optional: bool,
    mode: u32,
}

fn add_source(
    volume: &str,
    src: &Source<'_>,
    data: Option<BTreeMap<String, Vec<u8>>>,
    out: &mut Payload,
) -> Result<(), VolumeError> {
    let Some(data) = data else {
        if src.optional {
            return Ok(());
        }
        return Err(VolumeError::MissingObject {
            volume: volume.into(),
            kind: src.kind,
            name: src.name.into(),
        });
    };
    match src.items {
        None => {
            for (key, bytes) in data {
                check_path(volume, &key)?;
                out.insert(
                    key,
                    FileContent {
                        bytes,
                        mode: src.mode,
                    },
                );
            }
        }
        Some(items) => {
            for item in items {
                check_path(volume, &item.path)?;
                let Some(bytes) = data.get(&item.key) else {
                    if src.optional {
                        continue;
                    }
                    return Err(VolumeError::MissingKey {
                        volume: volume.into(),
                        kind: src.kind,
                        name: src.name.into(),
                        key: item.key.clone(),
                    });
                };
                let mode = item.mode.map_or(src.mode, |m| m as u32);
                out.insert(
                    item.path.clone(),
                    FileContent {
                        bytes: bytes.clone(),
                        mode,
                    },
                );
            }
        }
    }
    Ok(())
}

fn config_map_data(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in cm.data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    out
}

fn secret_data(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    // A real API server folds stringData into data on write; an in-memory
    // one may not, so honour it here too.
    for (k, v) in s.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    out
}

/// The files `volume` of `pod` should hold now.
pub fn resolve(pod: &Pod, volume: &Volume, sources: &dyn Sources) -> Result<Payload, VolumeError> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let vname = volume.name.as_str();
    let mode_of = |m: Option<i32>| m.map_or(DEFAULT_MODE, |m| m as u32);
    let mut out = Payload::new();
    let cm = |src: &Source<'_>, out: &mut Payload| {
        let data = sources
            .config_map(ns, src.name)
            .map(|c| config_map_data(&c));
        add_source(vname, src, data, out)
    };
    let secret = |src: &Source<'_>, out: &mut Payload| {
        let data = sources.secret(ns, src.name).map(|s| secret_data(&s));
        add_source(vname, src, data, out)
    };
    if let Some(p) = &volume.projected {
        let mode = mode_of(p.default_mode);
        for s in p.sources.iter().flatten() {
            if let Some(c) = &s.config_map {
                let src = Source {
                    kind: "ConfigMap",
                    name: &c.name,
                    items: c.items.as_deref(),
                    optional: c.optional.unwrap_or(false),
                    mode,
                };
                cm(&src, &mut out)?;
            }
            if let Some(c) = &s.secret {
                let src = Source {
                    kind: "Secret",
                    name: &c.name,
                    items: c.items.as_deref(),
                    optional: c.optional.unwrap_or(false),
                    mode,
                };
                secret(&src, &mut out)?;
            }
        }
    } else if let Some(c) = &volume.config_map {
        let src = Source {
            kind: "ConfigMap",
            name: &c.name,
            items: c.items.as_deref(),
            optional: c.optional.unwrap_or(false),
            mode: mode_of(c.default_mode),
        };
        cm(&src, &mut out)?;
    } else if let Some(c) = &volume.secret {
        let src = Source {
            kind: "Secret",
            name: c.secret_name.as_deref().unwrap_or_default(),
            items: c.items.as_deref(),
            optional: c.optional.unwrap_or(false),
            mode: mode_of(c.default_mode),
        };
        secret(&src, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    struct Objects {
        cms: BTreeMap<String, Arc<ConfigMap>>,
        secrets: BTreeMap<String, Arc<Secret>>,
    }
    impl Sources for Objects {
        fn config_map(&self, _: &str, name: &str) -> Option<Arc<ConfigMap>> {
            self.cms.get(name).cloned()
        }
        fn secret(&self, _: &str, name: &str) -> Option<Arc<Secret>> {
            self.secrets.get(name).cloned()
        }
    }

    fn pod(volume: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p-0", "namespace": "ns"},
            "spec": {
                "containers": [{"name": "bind", "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/bind/operator"},
                    {"name": "data", "mountPath": "/var/lib/bind"}]}],
                "volumes": [{"name": "data", "emptyDir": {}}, volume]
            }
        }))
        .unwrap()
    }

    #[test]
    fn projected_items_and_whole_objects_resolve() {
        let objects = Objects {
            cms: BTreeMap::from([(
                "cfg".to_string(),
                Arc::new(ConfigMap {
                    data: Some(BTreeMap::from([
                        ("a".to_string(), "A".to_string()),
                        ("b".to_string(), "B".to_string()),
                    ])),
                    ..Default::default()
                }),
            )]),
            secrets: BTreeMap::from([(
                "keys".to_string(),
                Arc::new(Secret {
                    data: Some(BTreeMap::from([(
                        "keys.conf".to_string(),
                        ByteString(b"k".to_vec()),
                    )])),
                    ..Default::default()
                }),
            )]),
        };
        let p = pod(
            serde_json::json!({"name": "config", "projected": {"sources": [
                {"configMap": {"name": "cfg"}},
                {"secret": {"name": "keys", "items": [{"key": "keys.conf", "path": "k/keys.conf", "mode": 0o600}]}},
                {"secret": {"name": "absent", "optional": true}}
            ]}}),
        );
        assert!(!data_volume_is_persistent(&p));
        let v = config_volume(&p).unwrap();
        let out = resolve(&p, v, &objects).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), ["a", "b", "k/keys.conf"]);
        assert_eq!(out["k/keys.conf"].mode, 0o600);
        assert_eq!(out["a"].mode, 0o644);
        assert!(!format!("{out:?}").contains("\"k\""));

        let missing = pod(
            serde_json::json!({"name": "config", "projected": {"sources": [
                {"secret": {"name": "keys", "items": [{"key": "nope", "path": "x"}]}}
            ]}}),
        );
        assert!(matches!(
            resolve(&missing, config_volume(&missing).unwrap(), &objects),
            Err(VolumeError::MissingKey { .. })
        ));
        let escape = pod(
            serde_json::json!({"name": "config", "projected": {"sources": [
                {"configMap": {"name": "cfg", "items": [{"key": "a", "path": "../x"}]}}
            ]}}),
        );
        assert!(matches!(
            resolve(&escape, config_volume(&escape).unwrap(), &objects),
            Err(VolumeError::BadPath { .. })
        ));
        let absent = pod(serde_json::json!({"name": "config", "configMap": {"name": "gone"}}));
        assert!(matches!(
            resolve(&absent, config_volume(&absent).unwrap(), &objects),
            Err(VolumeError::MissingObject { .. })
        ));
    }
}
