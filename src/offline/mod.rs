//! `bind-operator render -f DIR --out OUT`: renders every BindCluster found in
//! the manifests of DIR into `OUT/<namespace>/<cluster>/`, offline: the files
//! a pod mounts (named.conf.primary, named.conf.secondary, keys.conf,
//! rndc.key, entrypoint.sh) and, in [`OBJECTS_FILE`], the Kubernetes objects
//! the operator would create for the cluster. Reads and writes local files
//! only; never talks to a cluster.
//!
//! DIR is read by local mode's loader ([`crate::local::manifest_dir`]): the
//! same files (YAML and JSON, recursively), the same document numbering and
//! the same client-side admission, so any directory `local` accepts renders.
//! Key material is never invented and, unless asked, never copied: a key the
//! operator generates in the cluster (a BindTSIGKey without
//! `spec.secretRef`, the rndc key, a cluster's own transfer key) gets a
//! marked placeholder (see [`placeholder`]), and so does a key read
//! from a Secret unless [`RenderOptions::secrets_from_dir`] is set. The
//! report says which files hold placeholders.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;

pub mod objects;
pub mod placeholder;

use self::objects::{OBJECTS_FILE, cluster_objects};
use self::placeholder::{Placeholder, PlaceholderKey};
use crate::api::{BindCluster, BindTSIGKey, SecretKeyRef};
use crate::bind::entrypoint::{RNDC_KEY_NAME, render_rndc_key};
use crate::bind::layout::mount;
use crate::bind::render::{RenderError, render_cluster};
use crate::bind::{Endpoint, KeyName, TsigKey};
use crate::controller::bindcluster::build::{RNDC_ALGORITHM, TRANSFER_ALGORITHM};
use crate::controller::names::GENERATED_TRANSFER_KEY_NAME;
use crate::local::manifest_dir::load_dir;
use crate::local::manifests::{ManifestKind, Problem};
use crate::render::validate::{
    ConfigError, LoadedKey, algorithm, cluster_config, keys_for_cluster, tsig_key,
};

pub use crate::local::manifests::ManifestError;

/// How to render.
#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    /// Where rendered secondaries reach the primary, since no Service
    /// exists offline.
    pub primary: Endpoint,
    /// Take the material of keys with `spec.secretRef` from the Secrets in
    /// the manifest directory (else they get a placeholder too).
    pub secrets_from_dir: bool,
}

/// A rendered file that holds placeholder key material, and for which keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceholderFile {
    pub file: PathBuf,
    pub keys: Vec<PlaceholderKey>,
}

/// What was written for one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// `OUT/<namespace>/<cluster>`.
    pub dir: PathBuf,
    /// Every file written, sorted.
    pub files: Vec<PathBuf>,
    /// The files among them with placeholder key material.
    pub placeholders: Vec<PlaceholderFile>,
}

/// What happened to one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOutcome {
    pub namespace: String,
    pub name: String,
    /// The files written, or why none were.
    pub result: Result<Rendered, String>,
}

/// The whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderReport {
    pub clusters: Vec<ClusterOutcome>,
    /// Bad documents and unreadable files; their paths include DIR.
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

/// Loads DIR with local mode's loader and keeps what rendering needs.
fn load(dir: &Path) -> Result<(Manifests, Vec<ManifestError>), RenderDirError> {
    // An unreadable DIR is a failed run, not an empty one.
    std::fs::read_dir(dir).map_err(|source| RenderDirError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let loaded = load_dir(dir);
    let mut errors = loaded.errors;
    let mut m = Manifests::default();
    for manifest in loaded.manifests {
        let kind = manifest.key.kind;
        let parsed = match kind {
            ManifestKind::BindCluster => {
                serde_json::from_value(manifest.object).map(|c| m.clusters.push(c))
            }
            ManifestKind::BindTSIGKey => {
                serde_json::from_value(manifest.object).map(|k| m.keys.push(k))
            }
            ManifestKind::Secret => serde_json::from_value::<Secret>(manifest.object).map(|s| {
                let key = (
                    manifest.key.namespace.clone().unwrap_or_default(),
                    manifest.key.name.clone(),
                );
                m.secrets.insert(key, s);
            }),
            _ => Ok(()),
        };
        if let Err(e) = parsed {
            // serde's message names the field, never a Secret's value.
            errors.push(ManifestError::new(
                manifest.at,
                Problem::Invalid,
                format!("failed to read {kind}: {e}"),
            ));
        }
    }
    // Paths the user can open: the loader's are relative to DIR.
    for e in &mut errors {
        e.at.file = dir.join(&e.at.file);
    }
    m.clusters.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    Ok((m, errors))
}

/// The base64 material of a key from its Secret in DIR. Messages name the
/// Secret and key, never the contents.
fn material(m: &Manifests, key: &BindTSIGKey, r: &SecretKeyRef) -> Result<String, String> {
    let ns = key.metadata.namespace.clone().unwrap_or_default();
    let name = key.metadata.name.clone().unwrap_or_default();
    let secret = m
        .secrets
        .get(&(ns.clone(), r.name.clone()))
        .ok_or_else(|| {
            format!(
                "BindTSIGKey {ns}/{name}: Secret {ns}/{} is not among the manifests (without --secrets-from-dir its key gets a placeholder)",
                r.name
            )
        })?;
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

/// The rendered files of one cluster, before they are written.
struct ClusterFiles {
    /// File name -> content.
    files: BTreeMap<&'static str, String>,
    placeholders: BTreeMap<&'static str, Vec<PlaceholderKey>>,
}

fn render_one(
    m: &Manifests,
    cluster: &BindCluster,
    opts: &RenderOptions,
) -> Result<ClusterFiles, String> {
    let mut keys_conf_placeholders = Vec::new();
    let mut loaded = Vec::new();
    for object in keys_for_cluster(cluster, &m.keys) {
        let (text, placeholder) = match (&object.spec.secret_ref, opts.secrets_from_dir) {
            (Some(r), true) => (material(m, object, r)?, None),
            (Some(_), false) => (
                Placeholder::FromClusterSecret.base64(),
                Some(Placeholder::FromClusterSecret),
            ),
            (None, _) => (
                Placeholder::Generated.base64(),
                Some(Placeholder::Generated),
            ),
        };
        let key = tsig_key(object, &text).map_err(|e: ConfigError| e.to_string())?;
        if let Some(placeholder) = placeholder {
            keys_conf_placeholders.push(PlaceholderKey {
                key: key.name.to_string(),
                placeholder,
            });
        }
        loaded.push(LoadedKey { object, key });
    }
    // Without a transferKeyRef the operator generates the cluster's own.
    let generated_transfer = cluster.transfer_key_ref().is_none().then(|| TsigKey {
        name: KeyName::parse(GENERATED_TRANSFER_KEY_NAME).expect("a valid key name"),
        algorithm: algorithm(TRANSFER_ALGORITHM),
        secret: Placeholder::Generated.secret(),
    });
    if let Some(key) = &generated_transfer {
        keys_conf_placeholders.push(PlaceholderKey {
            key: key.name.to_string(),
            placeholder: Placeholder::Generated,
        });
    }
    let cfg = cluster_config(cluster, &loaded, generated_transfer.as_ref(), opts.primary)
        .map_err(|e| e.to_string())?;
    let rendered = render_cluster(&cfg).map_err(|e: RenderError| e.to_string())?;

    let rndc_placeholders = vec![PlaceholderKey {
        key: RNDC_KEY_NAME.to_string(),
        placeholder: Placeholder::Generated,
    }];
    let mut files: BTreeMap<&'static str, String> = rendered
        .files()
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
    files.insert(
        mount::KEYS_CONF,
        placeholder::header(&keys_conf_placeholders) + &rendered.keys_conf,
    );
    files.insert(
        mount::RNDC_KEY,
        placeholder::header(&rndc_placeholders)
            + &render_rndc_key(RNDC_ALGORITHM, &Placeholder::Generated.secret()),
    );
    files.insert(OBJECTS_FILE, cluster_objects(cluster, &rendered));
    let mut placeholders = BTreeMap::from([(mount::RNDC_KEY, rndc_placeholders)]);
    if !keys_conf_placeholders.is_empty() {
        placeholders.insert(mount::KEYS_CONF, keys_conf_placeholders);
    }
    Ok(ClusterFiles {
        files,
        placeholders,
    })
}

/// Key files are readable by the invoking user only.
fn is_private(file: &str) -> bool {
    file == mount::KEYS_CONF || file == mount::RNDC_KEY
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

fn write_cluster(target: &Path, rendered: ClusterFiles) -> Result<Rendered, RenderDirError> {
    std::fs::create_dir_all(target).map_err(|source| RenderDirError::Write {
        path: target.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    for (file, text) in &rendered.files {
        let path = target.join(file);
        write_file(&path, text, is_private(file))?;
        files.push(path);
    }
    Ok(Rendered {
        dir: target.to_path_buf(),
        files,
        placeholders: rendered
            .placeholders
            .into_iter()
            .map(|(file, keys)| PlaceholderFile {
                file: target.join(file),
                keys,
            })
            .collect(),
    })
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
        if let Some(ext) = cluster.external() {
            report.notes.push(format!(
                "BindCluster {namespace}/{name} is an external BIND at {}:{}: the operator deploys nothing for it, so nothing is rendered",
                ext.primary.address, ext.primary.port
            ));
            continue;
        }
        let result = match render_one(&m, cluster, opts) {
            Ok(files) => Ok(write_cluster(&out.join(&namespace).join(&name), files)?),
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
    let from_secrets = report
        .clusters
        .iter()
        .filter_map(|c| c.result.as_ref().ok())
        .flat_map(|r| &r.placeholders)
        .flat_map(|p| &p.keys)
        .any(|k| k.placeholder == Placeholder::FromClusterSecret);
    if from_secrets {
        report.notes.push(
            "keys with spec.secretRef got placeholder material too: OUT holds no secret; --secrets-from-dir reads it from the Secrets in the manifests".into(),
        );
    }
    Ok(report)
}

/// The default primary address offline: loopback, port 53.
pub fn default_primary() -> Endpoint {
    Endpoint {
        ip: IpAddr::from([127, 0, 0, 1]),
        port: 53,
    }
}
