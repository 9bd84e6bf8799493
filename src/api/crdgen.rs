//! Generates the CustomResourceDefinitions of the four kinds from the Rust
//! types, as committed under `crds/` and printed by `bind-operator crds`.
//!
//! Pure: no cluster access. Output is deterministic (fixed kind order, sorted
//! map keys from serde_json), so the committed files can be compared byte for
//! byte with what the code generates.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::{BindCluster, BindTSIGKey, BindZone, DNSRecord};

/// Failure to turn a CRD into YAML.
#[derive(Debug, thiserror::Error)]
pub enum CrdGenError {
    /// The YAML writer refused the CRD value.
    #[error("failed to serialise CRD {name} to YAML")]
    Yaml {
        /// CRD name, e.g. `bindzones.bind.unkin.net`.
        name: String,
        /// Underlying serialiser error.
        #[source]
        source: crate::yaml::SerializeError,
    },
}

/// One generated CRD with the file name it is committed under in `crds/`.
#[derive(Debug, Clone)]
pub struct GeneratedCrd {
    /// File name inside `crds/`, e.g. `bindzones.bind.unkin.net.yaml`.
    pub file_name: String,
    /// The CRD itself.
    pub crd: CustomResourceDefinition,
}

/// File name of the all-in-one manifest inside `crds/`.
pub const ALL_IN_ONE_FILE: &str = "all.yaml";

/// The four CRDs in a fixed order (keys and clusters first, so `kubectl
/// apply -f crds/all.yaml` reads in dependency order), with only formats
/// the API server knows.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        BindTSIGKey::crd(),
        BindCluster::crd(),
        BindZone::crd(),
        DNSRecord::crd(),
    ]
    .into_iter()
    .map(known_formats_only)
    .collect()
}

/// The `format`s a kube-apiserver recognises (apiextensions' supported
/// formats). schemars writes `uint32`/`uint16` for unsigned integers, which
/// the server accepts but warns about ("unrecognized format") on every
/// apply; the bounds those types need are explicit `minimum`s anyway.
const KNOWN_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
    "int32",
    "int64",
    "float",
    "double",
];

fn known_formats_only(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn strip(node: &mut serde_json::Value) {
        match node {
            serde_json::Value::Object(map) => {
                let unknown = map
                    .get("format")
                    .and_then(|f| f.as_str())
                    .is_some_and(|f| !KNOWN_FORMATS.contains(&f));
                if unknown {
                    map.remove("format");
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(&crd).expect("a CRD serialises");
    if let Some(versions) = value.pointer_mut("/spec/versions") {
        strip(versions);
    }
    serde_json::from_value(value).expect("a CRD without formats is still a CRD")
}

/// The four CRDs paired with their `crds/` file names (`<plural>.<group>.yaml`).
pub fn generated() -> Vec<GeneratedCrd> {
    crds()
        .into_iter()
        .map(|crd| GeneratedCrd {
            file_name: format!("{}.yaml", crd.metadata.name.clone().unwrap_or_default()),
            crd,
        })
        .collect()
}

/// One CRD as a YAML document (no leading `---`).
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdGenError> {
    crate::yaml::to_string(crd)
        .map(|text| quote_yaml11_booleans(&text))
        .map_err(|source| CrdGenError::Yaml {
            name: crd.metadata.name.clone().unwrap_or_default(),
            source,
        })
}

/// Words YAML 1.1 reads as booleans that a YAML 1.2 writer may leave
/// unquoted.
const YAML11_BOOLEANS: &[&str] = &[
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
    "OFF",
];

/// Quotes plain scalars that YAML 1.1 reads as booleans. A YAML 1.2 writer
/// may leave them plain (serde_yaml did; `crate::yaml`'s writer quotes them
/// itself, this stays as the guarantee), but kubectl and the API server read
/// YAML 1.1: an unquoted `- yes` in an enum became `true`, and the API
/// server then refused `dnssecValidation: "yes"` (measured on v1.36).
/// Lines inside block scalars (descriptions) are left as they are.
fn quote_yaml11_booleans(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Indentation of the key that opened a block scalar we are inside.
    let mut block: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let indent = body.len() - body.trim_start().len();
        if let Some(b) = block {
            if body.trim().is_empty() || indent > b {
                out.push_str(line);
                continue;
            }
            block = None;
        }
        let trimmed = body.trim_end();
        if trimmed.ends_with('|') || trimmed.ends_with("|-") || trimmed.ends_with('>') {
            block = Some(indent);
            out.push_str(line);
            continue;
        }
        let split = if let Some(rest) = body.trim_start().strip_prefix("- ") {
            Some((body.len() - rest.len(), rest))
        } else {
            body.find(": ").map(|i| (i + 2, &body[i + 2..]))
        };
        match split {
            Some((at, value)) if YAML11_BOOLEANS.contains(&value) => {
                out.push_str(&body[..at]);
                out.push('\'');
                out.push_str(value);
                out.push('\'');
                out.push_str(&line[body.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// All four CRDs as one multi-document YAML stream, each document opened by
/// `---`. This is the content of `crds/all.yaml` and of `bind-operator crds`.
pub fn all_yaml() -> Result<String, CrdGenError> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}

/// Failure to write the CRD files.
#[derive(Debug, thiserror::Error)]
pub enum CrdWriteError {
    /// Rendering failed.
    #[error(transparent)]
    Render(#[from] CrdGenError),
    /// The directory or a file could not be written.
    #[error("failed to write {path}")]
    Io {
        /// File or directory being written.
        path: std::path::PathBuf,
        /// Underlying I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Directory of the committed CRDs, relative to the repository root: one
/// file per kind plus [`ALL_IN_ONE_FILE`]; nothing else (`kubectl apply -f
/// crds/` applies every file in it).
pub const CRD_DIR: &str = "crds";
/// The kustomize copy, one file per kind, beside its hand-written
/// kustomization.yaml: kustomize refuses plain files outside a
/// kustomization's root, so the base cannot list the files of [`CRD_DIR`].
pub const KUSTOMIZE_CRD_DIR: &str = "deploy/kustomize/crds";
/// The Helm chart's copy, relative to the repository root: one file per kind
/// only (Helm installs every file in a chart's crds/, so an all-in-one copy
/// would install each CRD twice).
pub const CHART_CRD_DIR: &str = "deploy/helm/bind-operator/crds";

/// The files one CRD directory holds, as (file name, content): one per kind,
/// plus [`ALL_IN_ONE_FILE`] when `all_in_one`. Other files in the directory
/// (the kustomize copy's kustomization.yaml) are not generated and left alone.
pub fn files(all_in_one: bool) -> Result<Vec<(String, String)>, CrdGenError> {
    let mut files = generated()
        .into_iter()
        .map(|g| Ok((g.file_name, to_yaml(&g.crd)?)))
        .collect::<Result<Vec<_>, CrdGenError>>()?;
    if all_in_one {
        files.push((ALL_IN_ONE_FILE.to_owned(), all_yaml()?));
    }
    Ok(files)
}

/// Every generated file under the repository root, as (relative path,
/// content): [`CRD_DIR`], [`CHART_CRD_DIR`] and [`KUSTOMIZE_CRD_DIR`].
pub fn repo_files() -> Result<Vec<(std::path::PathBuf, String)>, CrdGenError> {
    let mut out = Vec::new();
    for (dir, all_in_one) in [
        (CRD_DIR, true),
        (CHART_CRD_DIR, false),
        (KUSTOMIZE_CRD_DIR, false),
    ] {
        for (name, content) in files(all_in_one)? {
            out.push((std::path::Path::new(dir).join(name), content));
        }
    }
    Ok(out)
}

/// Rewrites every generated CRD file under the repository `root`.
pub fn regenerate(root: &std::path::Path) -> Result<(), CrdWriteError> {
    for (relative, content) in repo_files()? {
        let path = root.join(relative);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| CrdWriteError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        std::fs::write(&path, content).map_err(|source| CrdWriteError::Io { path, source })?;
    }
    Ok(())
}

#[cfg(test)]
mod yaml11_tests {
    use super::*;

    #[test]
    fn yaml11_booleans_are_quoted_outside_block_scalars() {
        let text = "enum:\n- auto\n- yes\n- no\nx: on\ndescription: |-\n  - no\n  yes\nafter: no\n";
        assert_eq!(
            quote_yaml11_booleans(text),
            "enum:\n- auto\n- 'yes'\n- 'no'\nx: 'on'\ndescription: |-\n  - no\n  yes\nafter: 'no'\n"
        );
        let all = all_yaml().unwrap();
        // The YAML writer quotes it itself (double quotes, which YAML 1.1
        // reads the same); either way it is never plain.
        assert!(all.contains("- \"yes\"\n"), "dnssecValidation's enum");
        assert!(!all.contains("- yes\n"));
    }
}
