//! Writes imported objects as a directory a GitOps repository can commit:
//! `OUT/<zone object>/bindzone.yaml` (the BindZone) and
//! `OUT/<zone object>/dnsrecords.yaml` (its DNSRecords, one document each,
//! sorted by owner and type), and with a cluster `OUT/cluster.yaml` (the
//! BindCluster and its BindTSIGKeys). Same objects, same bytes: no
//! timestamps, fixed order. Writes under OUT only; never a secret (the
//! keys it writes have no material: the operator generates it).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::api::{BindCluster, BindTSIGKey};

use super::zone::ZoneOutput;

/// Writing the output failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("failed to write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("failed to serialise {what}: {message}")]
    Yaml { what: String, message: String },
}

const HEADER: &str = "# Written by `bind-operator import`; review before applying.\n";

fn yaml<T: Serialize>(what: &str, value: &T) -> Result<String, WriteError> {
    crate::yaml::to_string(value).map_err(|e| WriteError::Yaml {
        what: what.to_owned(),
        message: e.to_string(),
    })
}

fn write(path: &Path, text: &str) -> Result<(), WriteError> {
    let io = |source| WriteError::Io {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, text).map_err(io)
}

/// Writes one zone; returns the files written.
pub fn write_zone(out: &Path, zone: &ZoneOutput) -> Result<Vec<PathBuf>, WriteError> {
    let object = zone.zone_object.metadata.name.clone().unwrap_or_default();
    let dir = out.join(&object);
    let zone_file = dir.join("bindzone.yaml");
    write(
        &zone_file,
        &format!("{HEADER}{}", yaml("BindZone", &zone.zone_object)?),
    )?;
    let records_file = dir.join("dnsrecords.yaml");
    if zone.records.is_empty() {
        // No empty document: local mode and kubectl read none.
        let _ = std::fs::remove_file(&records_file);
        return Ok(vec![zone_file]);
    }
    // Streamed, one document at a time: a 100,000-record zone is ~20 MB of
    // YAML, never held whole.
    let io = |source| WriteError::Io {
        path: records_file.display().to_string(),
        source,
    };
    let mut w = std::io::BufWriter::new(std::fs::File::create(&records_file).map_err(io)?);
    w.write_all(HEADER.as_bytes()).map_err(io)?;
    for (i, r) in zone.records.iter().enumerate() {
        if i > 0 {
            w.write_all(b"---\n").map_err(io)?;
        }
        w.write_all(yaml("DNSRecord", r)?.as_bytes()).map_err(io)?;
    }
    w.flush().map_err(io)?;
    Ok(vec![zone_file, records_file])
}

/// Writes the cluster and its keys to `OUT/cluster.yaml`.
pub fn write_cluster(
    out: &Path,
    cluster: &BindCluster,
    keys: &[BindTSIGKey],
) -> Result<PathBuf, WriteError> {
    let mut text = String::from(HEADER);
    text.push_str(&yaml("BindCluster", cluster)?);
    for k in keys {
        text.push_str("---\n");
        text.push_str(&yaml("BindTSIGKey", k)?);
    }
    let path = out.join("cluster.yaml");
    write(&path, &text)?;
    Ok(path)
}
