//! The operator's Prometheus metrics: one registry behind a cheap, cloneable
//! [`Metrics`] handle that the reconcilers and the executor increment and
//! the health server renders at `/metrics`.
//!
//! # Contract
//! - Families (all prefixed `bind_operator_`):
//!   `reconciliations_total{controller}`,
//!   `reconcile_errors_total{controller,category}`,
//!   `reconcile_duration_seconds{controller}` (histogram),
//!   `exec_calls_total{verb}`, `exec_errors_total{verb}`, `leader` (0/1),
//!   `rrset_repairs_total{namespace,zone}` (owned RRsets another client
//!   changed, written back; a zone name, never a record name).
//! - Label values are bounded by construction: `controller` is the
//!   [`Controller`] enum, `category` and `verb` are `&'static str` (an error
//!   category or a command verb, never a name, a message or a Debug string).
//! - Beside them, in the same exposition: the per-pod `bind_*` families
//!   read from named ([`super::bindstats`], labels `namespace`, `cluster`,
//!   `pod`) and the per-zone `bind_operator_zone_*` gauges
//!   ([`super::zonehealth`], which add `zone`).
//! - Rendered in the Prometheus text format 0.0.4.
//!
//! Touches no cluster and does no I/O. The counters above never take
//! object names, zone names or secrets as label values; the BIND and zone
//! families take the operator's own objects' names and zone names (bounded
//! by what the user declared), never record names or secrets.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::bindstats::BindStatsStore;
use super::zonehealth::ZoneHealth;

/// Prefix of every family name.
pub const METRICS_PREFIX: &str = "bind_operator";

/// `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Reconcile duration buckets: 5ms doubling to ~10s (a reconcile that execs
/// into pods takes tens to hundreds of milliseconds).
const DURATION_BUCKET_START: f64 = 0.005;
const DURATION_BUCKET_FACTOR: f64 = 2.0;
const DURATION_BUCKET_COUNT: u16 = 12;

/// The controller a reconcile metric belongs to (one per CRD kind). The
/// label value is the kind name.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelValue)]
pub enum Controller {
    BindCluster,
    BindZone,
    DNSRecord,
    BindTSIGKey,
}

impl Controller {
    pub const ALL: [Controller; 4] = [
        Controller::BindCluster,
        Controller::BindZone,
        Controller::DNSRecord,
        Controller::BindTSIGKey,
    ];
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: Controller,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    controller: Controller,
    category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneLabels {
    namespace: String,
    zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: &'static str,
}

type HistogramFamily = Family<ControllerLabels, Histogram, fn() -> Histogram>;

struct Inner {
    registry: Registry,
    reconciliations: Family<ControllerLabels, Counter>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    reconcile_duration: HistogramFamily,
    exec_calls: Family<VerbLabels, Counter>,
    exec_errors: Family<VerbLabels, Counter>,
    rrset_repairs: Family<ZoneLabels, Counter>,
    leader: Gauge,
    /// The unprefixed `bind_*` families.
    bind_registry: Registry,
    bind: BindStatsStore,
    zones: ZoneHealth,
}

/// Handle to the operator's metrics; clones share one registry.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(
        DURATION_BUCKET_START,
        DURATION_BUCKET_FACTOR,
        DURATION_BUCKET_COUNT,
    ))
}

impl Metrics {
    /// A fresh registry with every family registered. The per-controller
    /// series start at zero so dashboards see them before the first event.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix(METRICS_PREFIX);
        let reconciliations = Family::<ControllerLabels, Counter>::default();
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        let reconcile_duration: HistogramFamily = Family::new_with_constructor(duration_histogram);
        let exec_calls = Family::<VerbLabels, Counter>::default();
        let exec_errors = Family::<VerbLabels, Counter>::default();
        let leader = Gauge::default();
        let rrset_repairs = Family::<ZoneLabels, Counter>::default();
        registry.register(
            "reconciliations",
            "Reconciles run, by controller",
            reconciliations.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by controller and error category",
            reconcile_errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile, by controller",
            reconcile_duration.clone(),
        );
        registry.register(
            "exec_calls",
            "Commands run in BIND pods, by verb",
            exec_calls.clone(),
        );
        registry.register(
            "exec_errors",
            "Commands run in BIND pods that failed, by verb",
            exec_errors.clone(),
        );
        registry.register(
            "rrset_repairs",
            "Owned record sets another client changed that the operator wrote back, by namespace and zone",
            rrset_repairs.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease (or runs without leader election)",
            leader.clone(),
        );
        let zones = ZoneHealth::default();
        registry.register_collector(Box::new(zones.clone()));
        let bind = BindStatsStore::default();
        let mut bind_registry = Registry::default();
        bind_registry.register_collector(Box::new(bind.clone()));
        for controller in Controller::ALL {
            let labels = ControllerLabels { controller };
            let _ = reconciliations.get_or_create(&labels);
            let _ = reconcile_duration.get_or_create(&labels);
        }
        Self {
            inner: Arc::new(Inner {
                registry,
                reconciliations,
                reconcile_errors,
                reconcile_duration,
                exec_calls,
                exec_errors,
                rrset_repairs,
                leader,
                bind_registry,
                bind,
                zones,
            }),
        }
    }

    /// Counts one finished reconcile; `error` is the failed step's static
    /// category, `None` on success.
    pub fn reconcile(
        &self,
        controller: Controller,
        duration: Duration,
        error: Option<&'static str>,
    ) {
        let labels = ControllerLabels { controller };
        self.inner.reconciliations.get_or_create(&labels).inc();
        self.inner
            .reconcile_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
        if let Some(category) = error {
            self.inner
                .reconcile_errors
                .get_or_create(&ErrorLabels {
                    controller,
                    category,
                })
                .inc();
        }
    }

    /// Counts one command run in a BIND pod (`verb`: `reconfig`, `addzone`,
    /// `nsupdate`, ...), and whether it failed.
    pub fn exec(&self, verb: &'static str, ok: bool) {
        let labels = VerbLabels { verb };
        self.inner.exec_calls.get_or_create(&labels).inc();
        if !ok {
            self.inner.exec_errors.get_or_create(&labels).inc();
        }
    }

    /// Counts `n` owned RRsets of `zone` (in the BindZone's `namespace`)
    /// written back after another client changed them.
    pub fn rrset_repairs(&self, namespace: &str, zone: &str, n: usize) {
        self.inner
            .rrset_repairs
            .get_or_create(&ZoneLabels {
                namespace: namespace.to_string(),
                zone: zone.to_string(),
            })
            .inc_by(n as u64);
    }

    pub fn set_leader(&self, leader: bool) {
        self.inner.leader.set(i64::from(leader));
    }

    /// Where the BIND pods' statistics go (`bind_*` families).
    pub fn bind_stats(&self) -> &BindStatsStore {
        &self.inner.bind
    }

    /// Where the zone surveys go (`bind_operator_zone_*` families).
    pub fn zone_health(&self) -> &ZoneHealth {
        &self.inner.zones
    }

    /// Every family in the Prometheus text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for registry in [&self.inner.registry, &self.inner.bind_registry] {
            prometheus_client::encoding::prometheus_text::encode(&mut out, registry)
                .expect("writing to a String cannot fail");
        }
        out
    }
}
