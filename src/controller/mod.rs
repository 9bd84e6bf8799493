//! The controllers: one module per reconciler plus what they share.
//!
//! - [`context::Context`]: client, executor, network, event recorder,
//!   caches ([`stores::Stores`]), field manager and requeue delays
//!   ([`REQUEUE_SHORT`], [`REQUEUE_LONG`]).
//! - [`exec::PodExecutor`]: "run this command in pod P". `layout(pod)` says
//!   where BIND lives in that pod; reconcilers build every command from it
//!   with `bind::commands` (composing them where one exec must do two
//!   things, as zonesync's update-then-SOA `sh -c`), and the executor runs
//!   the argv it is given unchanged. In a cluster:
//!   [`exec::KubeExecutor`] (pods/exec); local mode brings its own. The
//!   context wraps either in [`exec::ObservedExecutor::metered`] (exec metrics).
//! - [`network::Network`]: where secondaries reach the primary and where a
//!   pod answers DNS ([`network::ClusterNetwork`] in a cluster).
//! - [`error`]: the error-category pattern (category = Event reason and
//!   log/metric label, [`error::Category`] for the operator's own), the
//!   shared `error_policy`, and [`error::measured`], the guard every
//!   reconcile runs in (span, metrics, the Event of a failure).
//! - [`stores`]: one shared cache per kind, filled by one watch each, with
//!   feeds that any controller subscribes to (pods, children, keys,
//!   Secrets, BindZones, DNSRecords alike); one readiness future.
//! - [`bindzone`], [`dnsrecord`], [`zonesync`]: zones and records on the
//!   servers (the zone is the unit of write; zone writes batched per pod);
//!   [`zones`] starts the two controllers. zonesync is the machinery both
//!   use and uses neither (tests/arch_layers.rs checks it).
//! - [`apply`]: server-side apply with one field manager, skipped when the
//!   cached child already carries the same content hash.
//! - [`names`]: names, labels and annotations of everything we create (the
//!   local runtime creates pods with the StatefulSet template's labels plus
//!   `statefulset.kubernetes.io/pod-name`, as the StatefulSet controller does).
//! - [`run`] / [`run_scoped`]: start every controller; `bind-operator run` (a
//!   real API server, via `operator::manager` on `operator::serve`, which
//!   own leader election, `/healthz`, `/readyz` and `/metrics`) and
//!   `bind-operator local` (the in-memory one) both call them. Metrics and
//!   readiness are [`crate::telemetry`]'s: this module never uses
//!   `crate::operator` (tests/arch_layers.rs checks the direction).
//!
//! Adding a controller: write `yourkind::controller(ctx, shutdown) -> impl
//! Future<Output = ()>` like [`bindcluster::controller`], triggered by
//! subscribers of the shared stores (`ctx.stores.feeds.<kind>.subscribe()`;
//! add a store and feed in [`stores`] for a new kind), run its reconcile
//! inside [`error::measured`], and push it in [`run_scoped`] where the
//! others are.
//!
//! Touches the cluster. Never logs, returns or records key material.

pub mod apply;
pub mod bindcluster;
pub mod bindscrape;
pub mod bindtsigkey;
pub mod bindzone;
pub mod context;
pub mod dnsrecord;
pub mod error;
pub mod events;
pub mod exec;
pub mod index;
pub mod kube_message;
pub mod memo;
pub mod names;
pub mod network;
pub mod pods;
pub mod scope;
pub mod secret_cache;
pub mod stores;
pub mod zones;
pub mod zones_served;
pub mod zonesync;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use kube::Client;

use crate::telemetry::{Metrics, Readiness};

pub use context::{Context, REQUEUE_LONG, REQUEUE_SHORT};
pub use error::Categorized;
pub use exec::{ExecError, ExecOutput, KubeExecutor, ObservedExecutor, PodExecutor, PodRef};
pub use names::FIELD_MANAGER;
pub use network::{ClusterNetwork, Network, NetworkError};
pub use scope::Scope;
pub use stores::{Stores, Streams};

/// A shutdown signal every controller can hold a copy of.
pub type Shutdown = futures::future::Shared<BoxFuture<'static, ()>>;

/// Runs every controller until `shutdown` resolves (then lets in-flight
/// reconciles finish). `executor` and `network` pick the environment: a
/// cluster ([`KubeExecutor`], [`ClusterNetwork`]) or local mode. Counts
/// into a metrics registry of its own; see [`run_scoped`].
pub async fn run(
    client: Client,
    executor: Arc<dyn PodExecutor>,
    network: Arc<dyn Network>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    run_scoped(
        client,
        executor,
        network,
        Metrics::new(),
        Readiness::new(),
        Scope::cluster(),
        shutdown,
    )
    .await;
}

/// [`run`] over the namespaces of `scope`, counting reconciles and exec
/// calls into `metrics` and setting `readiness` once every cache has seen
/// its initial list.
pub async fn run_scoped(
    client: Client,
    executor: Arc<dyn PodExecutor>,
    network: Arc<dyn Network>,
    metrics: Metrics,
    readiness: Readiness,
    scope: Scope,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let shutdown: Shutdown = shutdown.boxed().shared();
    let (stores, streams) = stores::watch_scoped(&client, &scope);
    let ctx = Arc::new(
        Context::with_metrics(client, executor, network, stores, metrics).with_scope(scope),
    );
    let synced = {
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                () = ctx.stores.wait_until_ready() => {
                    readiness.set_ready(true);
                    tracing::info!("caches synced; ready");
                }
                () = shutdown => {}
            }
        }
    };
    let controllers: Vec<BoxFuture<'static, ()>> = vec![
        synced.boxed(),
        bindtsigkey::controller(ctx.clone(), shutdown.clone()).boxed(),
        bindcluster::controller(ctx.clone(), shutdown.clone()).boxed(),
        // The BindZone and DNSRecord controllers.
        zones::run(ctx.clone(), zonesync::Settings::default(), shutdown.clone()).boxed(),
        // named's statistics, per pod, into the metrics.
        bindscrape::run(ctx.clone(), bindscrape::SCRAPE_INTERVAL, shutdown.clone()).boxed(),
    ];
    // One task: on every wake the watches go first, so a reconcile that
    // starts in this poll reads every change that has arrived (e.g. the
    // status its predecessor just wrote, whose recorded config hashes keep
    // a second reconfig from happening). The watches stop with the
    // controllers (nothing else reads them).
    tokio::select! {
        biased;
        () = streams.drive() => {}
        _ = futures::future::join_all(controllers) => {}
    }
    tracing::info!("controllers stopped");
}
