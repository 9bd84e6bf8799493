//! Reads every BIND pod's statistics channel and hands the numbers to the
//! operator's metrics ([`crate::telemetry::bindstats`]), so one scrape of
//! the operator's `/metrics` shows what each named does.
//!
//! # Why the operator scrapes, and not an exporter sidecar per pod
//! - Pod template: a sidecar built from the operator's image would put the
//!   operator's version into every BIND pod template, so each operator
//!   upgrade would roll every DNS server of every cluster. DESIGN.md keeps
//!   the template to the entrypoint, image and scheduling on purpose.
//! - Scale: 100 pods x 1,000 zones is 100 sidecars (~10 MiB each, one more
//!   image to pull on every DNS node) against one task here: three small
//!   HTTP GETs per pod per [`SCRAPE_INTERVAL`] (`/json/v1/server` is ~15
//!   KB; `/json/v1/zones` ~150 KB at 1,000 zones), at most
//!   [`SCRAPE_CONCURRENCY`] at once, each bounded by [`SCRAPE_TIMEOUT`]:
//!   ~20 requests/s for 100 pods, a few MB/s of JSON at the very most.
//! - One target: Prometheus scrapes the operator (a PodMonitor), not a
//!   hundred pods, and the per-zone serial gauges the operator computes
//!   anyway ([`crate::telemetry::zonehealth`]) sit beside named's numbers.
//! - Network: named's channel listens on the pod IP (in a pod, loopback is
//!   the pod's own) and named's `allow` cannot name the operator's pod; a
//!   NetworkPolicy (docs/metrics.md) admits the statistics port from the
//!   operator's pods only, the DNS ports from anywhere.
//!
//! The price: the numbers are as fresh as the last scrape here (up to
//! [`SCRAPE_INTERVAL`] old), and only the leader scrapes (a standby shows no
//! `bind_*` series, so Prometheus never sees a pod twice).
//!
//! HTTP/1.1 with hyper's client (already in the tree for kube): no new
//! dependency. Reads only caches and the pods' statistics channels; writes
//! nothing to the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use kube::ResourceExt as _;

use crate::api::common::find_condition;
use crate::bind::Endpoint;
use crate::controller::context::Context;
use crate::controller::pods;
use crate::telemetry::bindstats::{BindStats, CLUSTER_CONDITIONS, PodKey};

/// How often every pod is read.
pub const SCRAPE_INTERVAL: Duration = Duration::from_secs(15);
/// Longest one pod's read may take (all three documents).
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pods read at once.
pub const SCRAPE_CONCURRENCY: usize = 16;
/// Largest document accepted (a pod with very many zones lists them all).
pub const MAX_DOCUMENT: usize = 64 << 20;

/// The documents read from each pod, in [`BindStats::parse`]'s order.
const PATHS: [&str; 3] = ["/json/v1/server", "/json/v1/zones", "/json/v1/mem"];

/// Why one pod's statistics could not be read (debug-logged; the pod then
/// shows `bind_up 0`).
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("failed to connect to the statistics channel at {0}: {1}")]
    Connect(Endpoint, std::io::Error),
    #[error("failed to read {0} from the statistics channel: {1}")]
    Http(&'static str, String),
    #[error("failed to read {0} from the statistics channel: status {1}")]
    Status(&'static str, http::StatusCode),
    #[error("failed to read the statistics channel: timed out")]
    Timeout,
    #[error(transparent)]
    Parse(#[from] crate::telemetry::bindstats::StatsError),
}

async fn get(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<bytes::Bytes>>,
    ep: Endpoint,
    path: &'static str,
) -> Result<String, ScrapeError> {
    let req = http::Request::get(path)
        .header(http::header::HOST, ep.to_string())
        .body(Empty::new())
        .map_err(|e| ScrapeError::Http(path, e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| ScrapeError::Http(path, e.to_string()))?;
    if !resp.status().is_success() {
        return Err(ScrapeError::Status(path, resp.status()));
    }
    let body = http_body_util::Limited::new(resp.into_body(), MAX_DOCUMENT)
        .collect()
        .await
        .map_err(|e| ScrapeError::Http(path, e.to_string()))?
        .to_bytes();
    String::from_utf8(body.to_vec()).map_err(|e| ScrapeError::Http(path, e.to_string()))
}

/// Reads one pod's statistics channel at `ep` (one connection, three
/// requests).
pub async fn read_stats(ep: Endpoint) -> Result<BindStats, ScrapeError> {
    let work = async {
        let stream = tokio::net::TcpStream::connect(std::net::SocketAddr::new(ep.ip, ep.port))
            .await
            .map_err(|e| ScrapeError::Connect(ep, e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| ScrapeError::Http(PATHS[0], e.to_string()))?;
        let driver = tokio::spawn(conn);
        let mut docs = Vec::with_capacity(PATHS.len());
        for path in PATHS {
            docs.push(get(&mut sender, ep, path).await?);
        }
        drop(sender);
        driver.abort();
        Ok::<_, ScrapeError>(BindStats::parse(&docs[0], &docs[1], &docs[2])?)
    };
    tokio::time::timeout(SCRAPE_TIMEOUT, work)
        .await
        .map_err(|_| ScrapeError::Timeout)?
}

/// Container restarts of a pod, summed over its containers.
fn restarts(pod: &k8s_openapi::api::core::v1::Pod) -> u64 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count.max(0) as u64).sum())
        .unwrap_or_default()
}

/// One round: every pod of every BindCluster in the cache, read and
/// recorded; pods and clusters that are gone drop out of the metrics.
pub async fn scrape_once(ctx: &Context) {
    let store = ctx.metrics.bind_stats();
    let mut targets = Vec::new();
    let mut clusters = BTreeSet::new();
    let mut conditions = BTreeMap::new();
    for cluster in ctx.stores.clusters.state() {
        let namespace = cluster.namespace().unwrap_or_default();
        let name = cluster.name_any();
        for pod in pods::cluster_pods(&ctx.stores.pods, &cluster) {
            let key = PodKey {
                namespace: namespace.clone(),
                cluster: name.clone(),
                pod: pod.name_any(),
            };
            store.set_restarts(key.clone(), restarts(&pod));
            targets.push((key, ctx.network.pod_stats_endpoint(&pod)));
        }
        let found = cluster
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        let is_true = |c: &str| find_condition(found, c).is_some_and(|c| c.status == "True");
        conditions.insert(
            (namespace.clone(), name.clone()),
            CLUSTER_CONDITIONS.map(is_true),
        );
        clusters.insert((namespace, name));
    }
    store.set_clusters(conditions);
    let live: BTreeSet<PodKey> = targets.iter().map(|(k, _)| k.clone()).collect();
    futures::stream::iter(targets)
        .for_each_concurrent(SCRAPE_CONCURRENCY, |(key, ep)| async move {
            let stats = match ep {
                Some(ep) => match read_stats(ep).await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::debug!(pod = %key.pod, namespace = %key.namespace, error = %e, "failed to read named's statistics");
                        None
                    }
                },
                None => None,
            };
            store.record(key, stats);
        })
        .await;
    store.retain(&live);
    ctx.metrics.zone_health().retain_clusters(&clusters);
}

/// Scrapes every `interval` until `shutdown`, then drops every BIND and
/// zone series (a replica that stops leading must not export stale ones).
pub async fn run(ctx: Arc<Context>, interval: Duration, shutdown: impl Future<Output = ()>) {
    let mut shutdown = std::pin::pin!(shutdown);
    tokio::select! {
        () = &mut shutdown => return,
        () = ctx.stores.wait_until_ready() => {}
    }
    loop {
        scrape_once(&ctx).await;
        tokio::select! {
            () = &mut shutdown => break,
            () = tokio::time::sleep(interval) => {}
        }
    }
    // Stopped (leadership lost): export nothing stale beside the new leader.
    ctx.metrics.bind_stats().retain(&BTreeSet::new());
    ctx.metrics.bind_stats().set_clusters(BTreeMap::new());
    ctx.metrics.zone_health().retain_clusters(&BTreeSet::new());
}
