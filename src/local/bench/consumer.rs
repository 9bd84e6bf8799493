//! The `catalog-consumer` scenario: cluster A (one primary) serves N
//! zones; cluster B (a primary and a secondary) is then created consuming
//! A's catalog. Measured: time from B's creation until both of B's pods
//! serve every zone of A, and time from a new zone on A until B serves it
//! (target: 5 s). Runs local mode in this process (in-memory API, real
//! named), manifests in a directory like a user's; B's pods are asked
//! with pipelined SOA queries over TCP.
//!
//! Touches only its own state directory, ports and named processes.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::{BenchError, BenchOptions};
use crate::bind::ZoneName;
use crate::bind::wire::client::Client;
use crate::local::command::{Backend, LocalConfig, LocalMode};
use crate::local::report::{PodEndpoint, Snapshot};

/// A new zone on the source must be served by the consumer within this.
pub const TARGET_NEW_ZONE: Duration = Duration::from_secs(5);
/// Zones on A when not told otherwise.
pub const DEFAULT_CONSUMER_ZONES: usize = 1_000;
const POLL: Duration = Duration::from_millis(100);
/// A's transfer key, shared with B (a copy, as a user would make).
const SHARED_KEY: &str = "c2hhcmVkLXRyYW5zZmVyLWtleS0wMTIzNDU2Nzg5YWI=";

/// What the scenario measured.
#[derive(Debug, Clone, Serialize)]
pub struct ConsumerResult {
    pub zones: usize,
    /// Seconds from B's manifest (A serving every zone) until both of B's
    /// pods serve all of A's zones.
    pub all_secs: Option<f64>,
    /// Seconds from a new zone's manifest on A until both pods of B serve it.
    pub new_zone_secs: Option<f64>,
    pub new_zone_met: Option<bool>,
}

fn zone_name(i: usize) -> String {
    format!("z{i:05}.consumer.test")
}

fn zone_manifest(i: usize) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: z{i:05}\nspec:\n  clusterRef: a\n  zoneName: {}\n  updateKeyRef: upd-a\n  nameservers: [ns1.example.net.]\n---\n",
        zone_name(i)
    )
}

fn source_manifest() -> String {
    use base64::Engine as _;
    let material = base64::engine::general_purpose::STANDARD.encode(SHARED_KEY);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: shared-xfer\ntype: Opaque\ndata:\n  secret: {material}\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: xfer\nspec:\n  clusterRef: a\n  secretRef:\n    name: shared-xfer\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: upd-a\nspec:\n  clusterRef: a\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: a\nspec:\n  replicas: 1\n  catalog:\n    transferKeyRef: xfer\n"
    )
}

fn consumer_manifest(primary: SocketAddr) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: xfer-from-a\nspec:\n  clusterRef: b\n  keyName: xfer\n  secretRef:\n    name: shared-xfer\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: b\nspec:\n  replicas: 2\n  catalogConsumers:\n    - catalogZone: a.default.catalog.invalid\n      primaries:\n        - {{address: '{}', port: {}}}\n      transferKeyRef: xfer-from-a\n",
        primary.ip(),
        primary.port()
    )
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), BenchError> {
    let io = |source| BenchError::StateDir {
        path: dir.join(name),
        source,
    };
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, dir.join(name)).map_err(io)
}

fn read_status(path: &Path) -> Option<Snapshot> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Waits for a snapshot `pred` accepts.
async fn wait_snapshot(
    path: &Path,
    what: &str,
    deadline: Instant,
    pred: impl Fn(&Snapshot) -> bool,
) -> Result<Snapshot, BenchError> {
    loop {
        if let Some(s) = read_status(path).filter(|s| pred(s)) {
            return Ok(s);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: what.to_string(),
                secs: 0,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

fn pods<'a>(s: &'a Snapshot, cluster: &str) -> Vec<&'a PodEndpoint> {
    s.pods.iter().filter(|p| p.cluster == cluster).collect()
}

/// Waits until every pod in `ports` serves every zone of `zones`; the time
/// it took, or None at the deadline.
async fn wait_served(
    ports: &[SocketAddr],
    zones: &[ZoneName],
    deadline: Instant,
) -> Option<Instant> {
    let mut left: Vec<SocketAddr> = ports.to_vec();
    loop {
        let mut still = Vec::new();
        for addr in &left {
            match Client::new(*addr).serials(zones, None).await {
                Ok(served) if served.len() == zones.len() => {}
                _ => still.push(*addr),
            }
        }
        left = still;
        if left.is_empty() {
            return Some(Instant::now());
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Runs the scenario under `root`.
pub async fn run(opts: &BenchOptions, root: &Path) -> Result<ConsumerResult, BenchError> {
    let say = |m: &str| {
        if opts.verbose {
            eprintln!("bench: catalog-consumer: {m}");
        }
    };
    let n = opts.consumer_zones;
    let dir = root.join("catalog-consumer-manifests");
    let state = root.join("catalog-consumer-state");
    std::fs::create_dir_all(&dir).map_err(|source| BenchError::StateDir {
        path: dir.clone(),
        source,
    })?;
    write(&dir, "a.yaml", &source_manifest())?;
    let zones_text: String = (0..n).map(zone_manifest).collect();
    write(&dir, "zones.yaml", &zones_text)?;
    let mode = LocalMode::start(
        LocalConfig {
            dir: dir.clone(),
            state_dir: state.clone(),
            base_port: opts.base_port,
        },
        Backend::InMemory,
        |_| {},
    )
    .await
    .map_err(|e| BenchError::Exec {
        what: "local mode".into(),
        reason: e.to_string(),
    })?
    .with_output(std::io::sink());
    let status = mode.status_path().to_path_buf();
    let stop = CancellationToken::new();
    let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));
    let result = measure(opts, &dir, &status, n, &say).await;
    stop.cancel();
    let _ = serving.await;
    result
}

async fn measure(
    opts: &BenchOptions,
    dir: &Path,
    status: &Path,
    n: usize,
    say: &impl Fn(&str),
) -> Result<ConsumerResult, BenchError> {
    let deadline = Instant::now() + opts.timeout;
    say(&format!("{n} zones on cluster A: waiting for A"));
    let ready = |s: &Snapshot| {
        s.converged
            && !s.pods.is_empty()
            && s.pods.iter().all(|p| p.ready)
            && s.objects.iter().all(|o| o.ready)
    };
    let first = wait_snapshot(status, "see cluster A serve its zones", deadline, ready).await?;
    let primary = pods(&first, "a")
        .first()
        .map(|p| p.dns)
        .ok_or_else(|| BenchError::Options("cluster A has no pod".into()))?;
    let zones: Vec<ZoneName> = (0..n)
        .filter_map(|i| ZoneName::parse(&zone_name(i)).ok())
        .collect();
    say("creating cluster B, consumer of A's catalog");
    let created = Instant::now();
    write(dir, "b.yaml", &consumer_manifest(primary))?;
    let b = wait_snapshot(status, "see cluster B's pods", deadline, |s| {
        pods(s, "b").len() == 2 && pods(s, "b").iter().all(|p| p.ready)
    })
    .await?;
    let b_ports: Vec<SocketAddr> = pods(&b, "b").iter().map(|p| p.dns).collect();
    let all = wait_served(&b_ports, &zones, deadline).await;
    let all_secs = all.map(|t| secs(t - created));
    say(&format!("B serves all {n} zones after {}", show(all_secs)));
    // A zone added on A.
    let added = Instant::now();
    write(dir, "new.yaml", &zone_manifest(n))?;
    let new_zone =
        ZoneName::parse(&zone_name(n)).map_err(|e| BenchError::Options(e.to_string()))?;
    let new = wait_served(&b_ports, &[new_zone], (added + opts.timeout).min(deadline)).await;
    let new_zone_secs = new.map(|t| secs(t - added));
    Ok(ConsumerResult {
        zones: n,
        all_secs,
        new_zone_secs,
        new_zone_met: Some(new_zone_secs.is_some_and(|s| s <= TARGET_NEW_ZONE.as_secs_f64())),
    })
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

fn show(v: Option<f64>) -> String {
    v.map_or("not reached within the timeout".into(), |s| {
        format!("{s:.2} s")
    })
}
