//! `bind-operator render -f DIR --out OUT`: renders every BindCluster found in
//! the manifests of DIR into `OUT/<namespace>/<cluster>/`, offline. Reads and
//! writes local files only; never talks to a cluster.
//!
//! Manifests go through the same client-side admission as local mode, then
//! through [`super::validate`]. Key material comes only from Secrets in DIR:
//! a BindTSIGKey without `spec.secretRef` has operator-generated material
//! that cannot be known offline, so its clusters fail with a clear message
//! rather than render with invented keys. The rndc key is likewise generated
//! in the cluster and is not rendered here.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;
use serde_json::Value;

use super::validate::{ConfigError, LoadedKey, cluster_config, keys_for_cluster, tsig_key};
use crate::api::{BindCluster, BindTSIGKey, admission};
use crate::bind::Endpoint;
use crate::bind::layout::mount;
use crate::bind::render::{RenderError, render_cluster};

/// Where rendered secondaries reach the primary, since no Service exists
/// offline.
#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    pub primary: Endpoint,
}

/// A problem with one manifest document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub file: PathBuf,
    /// 0-based index of the YAML document in the file.
    pub document: usize,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (document {}): {}",
            self.file.display(),
            self.document,
            self.message
        )
    }
}

/// What happened to one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOutcome {
    pub namespace: String,
    pub name: String,
    /// The files written, or why none were.
    pub result: Result<Vec<PathBuf>, String>,
}

/// The whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderReport {
    pub clusters: Vec<ClusterOutcome>,
    pub manifest_errors: Vec<ManifestError>,
    /// Things the reader must know about the output.
    pub notes: Vec<String>,
}

impl RenderReport {
    /// True when every manifest loaded and every cluster rendered.
    pub fn success(&self) -> bool {
        self.manifest_errors.is_empty() && self.clusters.iter().all(|c| c.result.is_ok())
    }
}

/// Reading DIR or writing OUT failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderDirError {
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Default)]
struct Manifests {
    clusters: Vec<BindCluster>,
    keys: Vec<BindTSIGKey>,
    /// (namespace, name) -> Secret.
    secrets: BTreeMap<(String, String), Secret>,
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), RenderDirError> {
    let read = |path: &Path| -> Result<std::fs::ReadDir, RenderDirError> {
        std::fs::read_dir(path).map_err(|source| RenderDirError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let mut entries: Vec<PathBuf> = read(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
    Ok(())
}

fn with_namespace(mut v: Value) -> Value {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.entry("namespace")
            .or_insert_with(|| Value::String("default".into()));
    }
    v
}

fn load(dir: &Path) -> Result<(Manifests, Vec<ManifestError>), RenderDirError> {
    let mut files = Vec::new();
    yaml_files(dir, &mut files)?;
    let mut m = Manifests::default();
    let mut errors = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| RenderDirError::Read {
            path: file.clone(),
            source,
        })?;
        for (document, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let mut fail = |message: String| {
                errors.push(ManifestError {
                    file: file.clone(),
                    document,
                    message,
                })
            };
            let value = match serde_yaml::Value::deserialize(doc) {
                Ok(serde_yaml::Value::Null) => continue,
                Ok(v) => v,
                Err(e) => {
                    fail(format!("failed to parse YAML: {e}"));
                    continue;
                }
            };
            let value = match serde_json::to_value(value) {
                Ok(v) => with_namespace(v),
                Err(e) => {
                    fail(format!("failed to read document: {e}"));
                    continue;
                }
            };
            let kind = value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            match kind.as_str() {
                "BindCluster" | "BindTSIGKey" | "BindZone" | "DNSRecord" => {
                    let admitted = match admission::admit(&value, None) {
                        Ok(v) => v,
                        Err(e) => {
                            fail(e.to_string());
                            continue;
                        }
                    };
                    let parsed = match kind.as_str() {
                        "BindCluster" => {
                            serde_json::from_value(admitted).map(|c| m.clusters.push(c))
                        }
                        "BindTSIGKey" => serde_json::from_value(admitted).map(|k| m.keys.push(k)),
                        _ => Ok(()),
                    };
                    if let Err(e) = parsed {
                        fail(format!("failed to read {kind}: {e}"));
                    }
                }
                "Secret" => match serde_json::from_value::<Secret>(value) {
                    Ok(s) => {
                        let key = (
                            s.metadata.namespace.clone().unwrap_or_default(),
                            s.metadata.name.clone().unwrap_or_default(),
                        );
                        m.secrets.insert(key, s);
                    }
                    Err(e) => fail(format!("failed to read Secret: {e}")),
                },
                _ => {}
            }
        }
    }
    m.clusters.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    Ok((m, errors))
}

/// The base64 material of a key from its Secret in DIR. Messages name the
/// Secret and key, never the contents.
fn material(m: &Manifests, key: &BindTSIGKey) -> Result<String, String> {
    let ns = key.metadata.namespace.clone().unwrap_or_default();
    let name = key.metadata.name.clone().unwrap_or_default();
    let Some(r) = &key.spec.secret_ref else {
        return Err(format!(
            "BindTSIGKey {ns}/{name} has no spec.secretRef: its key material is generated by the operator inside the cluster and cannot be known offline; put the material in a Secret in the manifests and point spec.secretRef at it"
        ));
    };
    let secret = m
        .secrets
        .get(&(ns.clone(), r.name.clone()))
        .ok_or_else(|| {
            format!(
                "BindTSIGKey {ns}/{name}: Secret {ns}/{} is not among the manifests",
                r.name
            )
        })?;
    if let Some(v) = secret.string_data.as_ref().and_then(|d| d.get(&r.key)) {
        return Ok(v.clone());
    }
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&r.key))
        .ok_or_else(|| {
            format!(
                "BindTSIGKey {ns}/{name}: Secret {ns}/{} has no key {:?}",
                r.name, r.key
            )
        })?;
    String::from_utf8(bytes.0.clone()).map_err(|_| {
        format!(
            "BindTSIGKey {ns}/{name}: Secret {ns}/{} key {:?} is not text",
            r.name, r.key
        )
    })
}

fn render_one(
    m: &Manifests,
    cluster: &BindCluster,
    opts: &RenderOptions,
) -> Result<BTreeMap<&'static str, String>, String> {
    let objects = keys_for_cluster(cluster, &m.keys);
    let mut loaded = Vec::with_capacity(objects.len());
    for object in objects {
        let text = material(m, object)?;
        let key = tsig_key(object, &text).map_err(|e: ConfigError| e.to_string())?;
        loaded.push(LoadedKey { object, key });
    }
    let cfg = cluster_config(cluster, &loaded, None, opts.primary).map_err(|e| e.to_string())?;
    let files = render_cluster(&cfg).map_err(|e: RenderError| e.to_string())?;
    Ok(files
        .files()
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect())
}

fn write_file(path: &Path, text: &str, private: bool) -> Result<(), RenderDirError> {
    let err = |source| RenderDirError::Write {
        path: path.to_path_buf(),
        source,
    };
    std::fs::write(path, text).map_err(err)?;
    if private {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    Ok(())
}

/// Renders every BindCluster in `dir` into `out/<namespace>/<cluster>/`.
/// A cluster that cannot render gets no directory and an error in the
/// report; the others still render.
pub fn render_dir(
    dir: &Path,
    out: &Path,
    opts: &RenderOptions,
) -> Result<RenderReport, RenderDirError> {
    let (m, manifest_errors) = load(dir)?;
    let mut report = RenderReport {
        manifest_errors,
        ..Default::default()
    };
    for cluster in &m.clusters {
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let result = match render_one(&m, cluster, opts) {
            Ok(files) => {
                let target = out.join(&namespace).join(&name);
                std::fs::create_dir_all(&target).map_err(|source| RenderDirError::Write {
                    path: target.clone(),
                    source,
                })?;
                let mut written = Vec::new();
                for (file, text) in files {
                    let path = target.join(file);
                    write_file(&path, &text, file == mount::KEYS_CONF)?;
                    written.push(path);
                }
                Ok(written)
            }
            Err(e) => Err(e),
        };
        report.clusters.push(ClusterOutcome {
            namespace,
            name,
            result,
        });
    }
    report.notes.push(format!(
        "secondaries reach the primary at {} (default-primaries); in a cluster this is the primary Service's ClusterIP:53",
        opts.primary
    ));
    report
        .notes
        .push("rndc.key is generated once inside the cluster and is not rendered offline".into());
    Ok(report)
}

/// The default primary address offline: loopback, port 53.
pub fn default_primary() -> Endpoint {
    Endpoint {
        ip: IpAddr::from([127, 0, 0, 1]),
        port: 53,
    }
}
