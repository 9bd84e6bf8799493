//! What named itself reports, per BIND pod: its statistics channel's JSON
//! (`/json/v1/server`, `/json/v1/zones`, `/json/v1/mem`) read into
//! [`BindStats`], kept per pod in a [`BindStatsStore`], and rendered as the
//! `bind_*` Prometheus families beside the operator's own.
//!
//! # Contract
//! - Families (label set `namespace, cluster, pod` on every one, plus the
//!   named extra label):
//!   `bind_up` (1: the last read of the pod's statistics channel worked),
//!   `bind_queries_total{type}` (incoming queries by RR type),
//!   `bind_responses_total{rcode}` (responses sent, by rcode),
//!   `bind_requests_total` / `bind_responses_sent_total` (all requests in,
//!   all responses out), `bind_zone_transfers_total{direction,result}`
//!   (`in` from zonestats XfrSuccess/XfrFail, `out` from nsstats
//!   XfrReqDone/XfrRej as `success`/`failure`), `bind_soa_queries_total`
//!   (SOA refresh queries sent), `bind_zones{state}` (`loaded`,
//!   `not_loaded`: a zone named lists but has never loaded or let expire,
//!   the visible trace of failing SOA refreshes: named 9.18 keeps no
//!   counter of failed refresh queries), `bind_memory_in_use_bytes`,
//!   `bind_memory_total_use_bytes`, `bind_uptime_seconds`.
//! - From the Kubernetes objects (the operator's cache, same round):
//!   `bind_operator_pod_restarts_total{namespace,cluster,pod}` (container
//!   restarts of a BIND pod) and
//!   `bind_operator_cluster_condition{namespace,cluster,condition}` (1
//!   while the BindCluster's `Ready` / `ConfigApplied` condition is True).
//! - Label values are bounded by construction: `type` and `rcode` are
//!   mapped onto fixed lists ([`QUERY_TYPES`], [`RCODES`]) with the rest
//!   summed as `other`, so a client sending odd query types cannot grow
//!   the series count; `namespace`, `cluster` and `pod` are the operator's
//!   own objects.
//! - Counters are named's own (they restart with named).
//!
//! Pure: parses text it is handed and renders what it holds. The reading
//! (HTTP) lives in `crate::controller::bindscrape`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde_json::Value;

/// Query types kept as their own label value; any other is `other`.
pub const QUERY_TYPES: &[&str] = &[
    "A",
    "AAAA",
    "ANY",
    "AXFR",
    "CAA",
    "CDNSKEY",
    "CDS",
    "CNAME",
    "DNAME",
    "DNSKEY",
    "DS",
    "HINFO",
    "HTTPS",
    "IXFR",
    "MX",
    "NAPTR",
    "NS",
    "NSEC",
    "NSEC3",
    "NSEC3PARAM",
    "PTR",
    "RRSIG",
    "SOA",
    "SPF",
    "SRV",
    "SSHFP",
    "SVCB",
    "TLSA",
    "TXT",
];

/// Rcodes kept as their own label value; any other is `other`.
pub const RCODES: &[&str] = &[
    "NOERROR",
    "FORMERR",
    "SERVFAIL",
    "NXDOMAIN",
    "NOTIMP",
    "REFUSED",
    "YXDOMAIN",
    "YXRRSET",
    "NXRRSET",
    "NOTAUTH",
    "NOTZONE",
    "BADVERS",
    "BADCOOKIE",
];

/// The label value for the catch-all bucket.
pub const OTHER: &str = "other";

/// Why a statistics document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("failed to parse named's statistics JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("failed to read named's statistics: {0} is missing or not a time")]
    Time(&'static str),
}

/// One pod's statistics at one read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BindStats {
    /// Incoming queries by bounded type label.
    pub queries: BTreeMap<&'static str, u64>,
    /// Responses by bounded rcode label.
    pub rcodes: BTreeMap<&'static str, u64>,
    pub requests: u64,
    pub responses: u64,
    pub xfr_in_success: u64,
    pub xfr_in_failure: u64,
    pub xfr_out_success: u64,
    pub xfr_out_failure: u64,
    pub soa_queries: u64,
    pub zones_loaded: u64,
    pub zones_not_loaded: u64,
    pub memory_in_use: u64,
    pub memory_total_use: u64,
    pub uptime_seconds: f64,
}

fn bucket(map: &mut BTreeMap<&'static str, u64>, known: &[&'static str], key: &str, v: u64) {
    let label = known.iter().find(|k| **k == key).copied().unwrap_or(OTHER);
    *map.entry(label).or_default() += v;
}

fn counters(doc: &Value, section: &str) -> impl Iterator<Item = (String, u64)> {
    doc.get(section)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
}

fn counter(doc: &Value, section: &str, name: &str) -> u64 {
    doc.get(section)
        .and_then(|s| s.get(name))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn time_of(doc: &Value, field: &'static str) -> Result<jiff::Timestamp, StatsError> {
    doc.get(field)
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok())
        .ok_or(StatsError::Time(field))
}

impl BindStats {
    /// Reads the three documents of named's JSON statistics (v1):
    /// `/json/v1/server`, `/json/v1/zones` and `/json/v1/mem`.
    pub fn parse(server: &str, zones: &str, mem: &str) -> Result<BindStats, StatsError> {
        let server: Value = serde_json::from_str(server)?;
        let zones: Value = serde_json::from_str(zones)?;
        let mem: Value = serde_json::from_str(mem)?;
        let mut s = BindStats::default();
        for (k, v) in counters(&server, "qtypes") {
            bucket(&mut s.queries, QUERY_TYPES, &k, v);
        }
        for (k, v) in counters(&server, "rcodes") {
            bucket(&mut s.rcodes, RCODES, &k, v);
        }
        s.requests =
            counter(&server, "nsstats", "Requestv4") + counter(&server, "nsstats", "Requestv6");
        s.responses = counter(&server, "nsstats", "Response");
        s.xfr_in_success = counter(&server, "zonestats", "XfrSuccess");
        s.xfr_in_failure = counter(&server, "zonestats", "XfrFail");
        s.xfr_out_success = counter(&server, "nsstats", "XfrReqDone");
        s.xfr_out_failure = counter(&server, "nsstats", "XfrRej");
        s.soa_queries =
            counter(&server, "zonestats", "SOAOutv4") + counter(&server, "zonestats", "SOAOutv6");
        let boot = time_of(&server, "boot-time")?;
        let now = time_of(&server, "current-time")?;
        s.uptime_seconds = (now - boot)
            .total(jiff::Unit::Second)
            .unwrap_or(0.0)
            .max(0.0);
        // Zones of every view but named's built-in `_bind` (CH class).
        for (view, body) in zones
            .get("views")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if view == "_bind" {
                continue;
            }
            for z in body
                .get("zones")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                // named leaves `serial` out for a zone it holds no data of.
                if z.get("serial").and_then(Value::as_u64).is_some() {
                    s.zones_loaded += 1;
                } else {
                    s.zones_not_loaded += 1;
                }
            }
        }
        s.memory_in_use = counter(&mem, "memory", "InUse");
        s.memory_total_use = counter(&mem, "memory", "TotalUse");
        Ok(s)
    }
}

/// The pod a sample belongs to (the label values every family carries).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    pub namespace: String,
    pub cluster: String,
    pub pod: String,
}

/// The last read of one pod: `stats` is the last good one (kept while the
/// channel does not answer, so counters do not vanish), `up` whether the
/// latest read worked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSample {
    pub up: bool,
    pub stats: Option<BindStats>,
    /// Container restarts, from the Pod's status.
    pub restarts: u64,
}

/// The BindCluster conditions exported as `bind_operator_cluster_condition`.
pub const CLUSTER_CONDITIONS: [&str; 2] = ["Ready", "ConfigApplied"];

/// `(namespace, cluster)` -> whether each of [`CLUSTER_CONDITIONS`] is True.
type ClusterConditions = BTreeMap<(String, String), [bool; 2]>;

/// Every pod's last sample. Cheap to clone; clones share it.
#[derive(Debug, Clone, Default)]
pub struct BindStatsStore {
    pods: Arc<Mutex<BTreeMap<PodKey, PodSample>>>,
    clusters: Arc<Mutex<ClusterConditions>>,
}

impl BindStatsStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PodKey, PodSample>> {
        self.pods.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces every cluster's conditions (clusters not named drop out).
    pub fn set_clusters(&self, clusters: ClusterConditions) {
        *self.clusters.lock().unwrap_or_else(|p| p.into_inner()) = clusters;
    }

    /// Records a pod's container restarts (from its status).
    pub fn set_restarts(&self, pod: PodKey, restarts: u64) {
        self.lock().entry(pod).or_default().restarts = restarts;
    }

    /// Records one read of `pod`: `Some` on success, `None` when the
    /// channel did not answer (the previous numbers are kept, `bind_up` 0).
    pub fn record(&self, pod: PodKey, stats: Option<BindStats>) {
        let mut pods = self.lock();
        let sample = pods.entry(pod).or_default();
        sample.up = stats.is_some();
        if stats.is_some() {
            sample.stats = stats;
        }
    }

    /// Keeps only the pods in `live` (pods that were deleted drop out).
    pub fn retain(&self, live: &std::collections::BTreeSet<PodKey>) {
        self.lock().retain(|k, _| live.contains(k));
    }

    /// A copy of every pod's sample.
    pub fn snapshot(&self) -> BTreeMap<PodKey, PodSample> {
        self.lock().clone()
    }
}

/// The pod's labels and `extra`.
fn with<'a>(k: &'a PodKey, extra: &[(&'static str, &'a str)]) -> Vec<(&'static str, &'a str)> {
    let mut l = vec![
        ("namespace", k.namespace.as_str()),
        ("cluster", k.cluster.as_str()),
        ("pod", k.pod.as_str()),
    ];
    l.extend_from_slice(extra);
    l
}

/// One family: its descriptor, then one series per `(labels, value)`
/// (shared with the zone health collector).
pub(crate) fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: Vec<(Vec<(&str, &str)>, M)>,
) -> Result<(), std::fmt::Error> {
    let Some((_, first)) = series.first() else {
        return Ok(());
    };
    let mut fam = encoder.encode_descriptor(name, help, None, first.metric_type())?;
    for (labels, metric) in &series {
        metric.encode(fam.encode_family(labels)?)?;
    }
    Ok(())
}

impl Collector for BindStatsStore {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let pods = self.snapshot();
        let up: Vec<_> = pods
            .iter()
            .map(|(k, s)| (with(k, &[]), ConstGauge::new(i64::from(s.up))))
            .collect();
        family(
            &mut encoder,
            "bind_up",
            "1 if the operator's last read of the pod's named statistics channel worked",
            up,
        )?;
        let stats: Vec<(&PodKey, &BindStats)> = pods
            .iter()
            .filter_map(|(k, s)| Some((k, s.stats.as_ref()?)))
            .collect();
        let mut queries = Vec::new();
        let mut rcodes = Vec::new();
        let mut xfr = Vec::new();
        for (k, s) in &stats {
            for (t, v) in &s.queries {
                queries.push((with(k, &[("type", t)]), ConstCounter::new(*v)));
            }
            for (r, v) in &s.rcodes {
                rcodes.push((with(k, &[("rcode", r)]), ConstCounter::new(*v)));
            }
            for (dir, res, v) in [
                ("in", "success", s.xfr_in_success),
                ("in", "failure", s.xfr_in_failure),
                ("out", "success", s.xfr_out_success),
                ("out", "failure", s.xfr_out_failure),
            ] {
                xfr.push((
                    with(k, &[("direction", dir), ("result", res)]),
                    ConstCounter::new(v),
                ));
            }
        }
        family(
            &mut encoder,
            "bind_queries",
            "Incoming queries by RR type (rare types summed as other)",
            queries,
        )?;
        family(
            &mut encoder,
            "bind_responses",
            "Responses sent by rcode (rare rcodes summed as other)",
            rcodes,
        )?;
        family(
            &mut encoder,
            "bind_zone_transfers",
            "Zone transfers: in (this pod transferring) and out (serving one), by result",
            xfr,
        )?;
        let per_pod = |f: fn(&BindStats) -> u64| -> Vec<_> {
            stats
                .iter()
                .map(|(k, s)| (with(k, &[]), ConstCounter::new(f(s))))
                .collect()
        };
        family(
            &mut encoder,
            "bind_requests",
            "Requests received (IPv4 and IPv6)",
            per_pod(|s| s.requests),
        )?;
        family(
            &mut encoder,
            "bind_responses_sent",
            "Responses sent, all rcodes",
            per_pod(|s| s.responses),
        )?;
        family(
            &mut encoder,
            "bind_soa_queries",
            "SOA queries sent to check a zone's primary (refreshes)",
            per_pod(|s| s.soa_queries),
        )?;
        let mut zones = Vec::new();
        for (k, s) in &stats {
            zones.push((
                with(k, &[("state", "loaded")]),
                ConstGauge::new(s.zones_loaded as i64),
            ));
            zones.push((
                with(k, &[("state", "not_loaded")]),
                ConstGauge::new(s.zones_not_loaded as i64),
            ));
        }
        family(
            &mut encoder,
            "bind_zones",
            "Zones named lists, loaded or not (a secondary whose refreshes fail stays not_loaded)",
            zones,
        )?;
        let gauge = |f: fn(&BindStats) -> f64| -> Vec<_> {
            stats
                .iter()
                .map(|(k, s)| (with(k, &[]), ConstGauge::new(f(s))))
                .collect()
        };
        family(
            &mut encoder,
            "bind_memory_in_use_bytes",
            "Memory named has in use",
            gauge(|s| s.memory_in_use as f64),
        )?;
        family(
            &mut encoder,
            "bind_memory_total_use_bytes",
            "Memory named has allocated in total",
            gauge(|s| s.memory_total_use as f64),
        )?;
        family(
            &mut encoder,
            "bind_uptime_seconds",
            "Seconds since named started",
            gauge(|s| s.uptime_seconds),
        )?;
        family(
            &mut encoder,
            "bind_operator_pod_restarts",
            "Container restarts of a BIND pod (from its Kubernetes status)",
            pods.iter()
                .map(|(k, s)| (with(k, &[]), ConstCounter::new(s.restarts)))
                .collect(),
        )?;
        let clusters = self
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut conditions = Vec::new();
        for ((ns, cluster), values) in &clusters {
            for (condition, value) in CLUSTER_CONDITIONS.iter().zip(values) {
                conditions.push((
                    vec![
                        ("namespace", ns.as_str()),
                        ("cluster", cluster.as_str()),
                        ("condition", *condition),
                    ],
                    ConstGauge::new(i64::from(*value)),
                ));
            }
        }
        family(
            &mut encoder,
            "bind_operator_cluster_condition",
            "1 while the BindCluster's condition is True",
            conditions,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: &str = r#"{"boot-time":"2026-12-04T18:57:03.991Z","current-time":"2026-12-04T18:58:04.991Z",
        "rcodes":{"NOERROR":5,"NXDOMAIN":1,"RESERVED12":2,"21":1},
        "qtypes":{"A":4,"TYPE65280":3,"Others":1},
        "nsstats":{"Requestv4":7,"Requestv6":1,"Response":8,"XfrReqDone":2,"XfrRej":1},
        "zonestats":{"SOAOutv4":3,"XfrSuccess":2,"XfrFail":1}}"#;
    const ZONES: &str = r#"{"views":{"_default":{"zones":[{"name":"a.test","serial":1},{"name":"b.test","type":"secondary"}]},
        "_bind":{"zones":[{"name":"version.bind","serial":0}]}}}"#;
    const MEM: &str = r#"{"memory":{"TotalUse":2000,"InUse":1000}}"#;

    #[test]
    fn parses_and_bounds_labels() {
        let s = BindStats::parse(SERVER, ZONES, MEM).unwrap();
        assert_eq!(s.queries.get("A"), Some(&4));
        assert_eq!(s.queries.get(OTHER), Some(&4), "unknown types summed");
        assert_eq!(s.rcodes.get(OTHER), Some(&3));
        assert_eq!((s.requests, s.responses), (8, 8));
        assert_eq!((s.xfr_in_success, s.xfr_in_failure), (2, 1));
        assert_eq!((s.xfr_out_success, s.xfr_out_failure), (2, 1));
        assert_eq!((s.zones_loaded, s.zones_not_loaded), (1, 1));
        assert_eq!((s.memory_in_use, s.memory_total_use), (1000, 2000));
        assert_eq!(s.uptime_seconds, 61.0);
        assert!(BindStats::parse("{}", ZONES, MEM).is_err());
    }

    #[test]
    fn a_failed_read_keeps_the_numbers_and_reports_down() {
        let store = BindStatsStore::default();
        let key = PodKey {
            namespace: "ns".into(),
            cluster: "c".into(),
            pod: "c-1".into(),
        };
        store.record(
            key.clone(),
            Some(BindStats::parse(SERVER, ZONES, MEM).unwrap()),
        );
        store.record(key.clone(), None);
        let s = store.snapshot();
        assert!(!s[&key].up);
        assert!(s[&key].stats.is_some());
        store.retain(&Default::default());
        assert!(store.snapshot().is_empty());
    }
}
