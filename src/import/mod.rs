//! `bind-operator import`: moves zones an existing BIND serves into the
//! operator's manifests. Three sources: a master-format zone file
//! ([`zonefile`], read as `named-checkzone` reads it), a running server by
//! AXFR ([`axfr`], natively, TSIG key held in memory only), and a
//! named.conf ([`namedconf`]: its primary zones, read from their files,
//! and the options that map onto a BindCluster; whatever does not map is
//! listed by file and line). Each zone becomes a BindZone (SOA, apex NS,
//! default TTL) and one DNSRecord per RRset ([`zone`]), checked by the
//! operator's own validation and admission, written by [`writer`] as a
//! deterministic directory.
//!
//! Reads the given files and, for `axfr`, one server; writes under the
//! output directory only; never talks to a cluster. Key material never
//! reaches the output, a message or the report.

pub mod axfr;
pub mod lexer;
pub mod namedconf;
pub mod names;
pub mod writer;
pub mod zone;
pub mod zonefile;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::api::{BindCluster, BindClusterSpec};
use crate::bind::ZoneName;

pub use zone::{Skipped, Target, ZoneOutput};

/// What every import takes besides its source.
#[derive(Debug, Clone)]
pub struct Options {
    pub out: PathBuf,
    pub target: Target,
    /// Also write the BindCluster and the update key's BindTSIGKey.
    pub with_cluster: bool,
    /// Any skipped record fails the import (nothing is written).
    pub strict: bool,
}

/// An import that could not run.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("invalid zone name {zone:?}: {message}")]
    ZoneName { zone: String, message: String },
    #[error(transparent)]
    ZoneFile(#[from] zonefile::ZoneFileError),
    #[error(transparent)]
    Zone(#[from] zone::ZoneError),
    #[error(transparent)]
    Write(#[from] writer::WriteError),
    #[error(transparent)]
    Axfr(#[from] axfr::AxfrError),
    #[error(transparent)]
    NamedConf(#[from] namedconf::NamedConfError),
    #[error("the BindCluster is refused: {0}")]
    Cluster(String),
}

/// What an import did, for the user.
#[derive(Debug, Default)]
pub struct Report {
    pub text: String,
    /// Records skipped over all zones.
    pub skipped: usize,
    /// Whether the output was written.
    pub written: bool,
}

/// Parses a zone name given on the command line.
pub fn zone_name(text: &str) -> Result<ZoneName, ImportError> {
    ZoneName::parse(text).map_err(|e| ImportError::ZoneName {
        zone: text.to_owned(),
        message: e.to_string(),
    })
}

/// Reads one zone file into its objects (nothing written).
pub fn read_zone_file(
    file: &Path,
    zone: &ZoneName,
    view: Option<String>,
    target: &Target,
) -> Result<ZoneOutput, ImportError> {
    let mut collector = zone::Collector::new(zone.clone(), view);
    zonefile::read(file, &zone.fqdn(), &mut |item| collector.add(item))?;
    Ok(collector.finish(target)?)
}

/// `import zone FILE --zone NAME`.
pub fn run_zone(file: &Path, zone: &str, opts: &Options) -> Result<Report, ImportError> {
    let zone = zone_name(zone)?;
    let out = read_zone_file(file, &zone, None, &opts.target)?;
    finish(vec![out], BindClusterSpec::default(), &[], opts)
}

/// `import axfr --server HOST[:PORT] --zone NAME`.
pub fn run_axfr(
    server: &str,
    zone: &str,
    key: Option<&axfr::TransferKey>,
    opts: &Options,
) -> Result<Report, ImportError> {
    let zone = zone_name(zone)?;
    let out = axfr::import(server, &zone, key, &opts.target)?;
    finish(vec![out], BindClusterSpec::default(), &[], opts)
}

/// `import named-conf FILE`.
pub fn run_named_conf(file: &Path, opts: &Options) -> Result<Report, ImportError> {
    let conf = namedconf::read(file)?;
    let mut zones = Vec::new();
    let mut unmapped = conf.unmapped.clone();
    for z in &conf.zones {
        let name = match zone_name(&z.name) {
            Ok(n) => n,
            Err(e) => {
                unmapped.push(format!("{}: {e}", z.at));
                continue;
            }
        };
        match read_zone_file(&z.file, &name, z.view.clone(), &opts.target) {
            Ok(out) => zones.push(out),
            Err(e) => unmapped.push(format!("{}: zone {}: not imported: {e}", z.at, z.name)),
        }
    }
    finish(zones, conf.cluster, &unmapped, opts)
}

fn finish(
    zones: Vec<ZoneOutput>,
    spec: BindClusterSpec,
    unmapped: &[String],
    opts: &Options,
) -> Result<Report, ImportError> {
    let mut report = Report::default();
    let t = &mut report.text;
    for z in &zones {
        report.skipped += z.skipped.len();
        let object = z.zone_object.metadata.name.as_deref().unwrap_or_default();
        let _ = writeln!(
            t,
            "zone {}: {} records read: BindZone {object} (SOA, {} nameservers), {} DNSRecords, {} skipped, {} DNSSEC records left out",
            z.zone,
            z.records_read,
            z.zone_object.spec.nameservers.len(),
            z.records.len(),
            z.skipped.len(),
            z.dnssec.len(),
        );
        for n in &z.notes {
            let _ = writeln!(t, "  note: {n}");
        }
        for s in &z.skipped {
            let _ = writeln!(t, "  skipped: {s}");
        }
        for s in &z.dnssec {
            let _ = writeln!(t, "  left out: {s}");
        }
        if !z.dnssec.is_empty() {
            let _ = writeln!(t, "  hint: {}", zone::DNSSEC_HINT);
        }
    }
    for u in unmapped {
        let _ = writeln!(t, "not imported: {u}");
    }
    if opts.strict && report.skipped > 0 {
        let _ = writeln!(
            t,
            "--strict: {} records skipped; nothing written",
            report.skipped
        );
        return Ok(report);
    }
    for z in &zones {
        for f in writer::write_zone(&opts.out, z)? {
            let _ = writeln!(t, "wrote {}", f.display());
        }
    }
    if opts.with_cluster {
        let cluster = BindCluster {
            metadata: kube::api::ObjectMeta {
                name: Some(opts.target.cluster.clone()),
                namespace: opts.target.namespace.clone(),
                ..Default::default()
            },
            spec,
            status: None,
        };
        crate::api::admission::admit_typed(&cluster, None)
            .map_err(|e| ImportError::Cluster(e.to_string()))?;
        let key = zone::update_key_object(&opts.target);
        let f = writer::write_cluster(&opts.out, &cluster, &[key])?;
        let _ = writeln!(t, "wrote {}", f.display());
    }
    report.written = true;
    Ok(report)
}
