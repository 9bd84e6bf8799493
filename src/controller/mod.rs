//! The controllers: one module per reconciler plus what they share.
//!
//! - [`context::Context`]: client, executor, network, event recorder, caches,
//!   field manager and requeue delays.
//! - [`exec::PodExecutor`]: "run this command in pod P" (pods/exec in a
//!   cluster: [`exec::KubeExecutor`]; local processes in local mode).
//! - [`network::Network`]: where secondaries reach the primary and where a
//!   pod answers DNS ([`network::ClusterNetwork`] in a cluster).
//! - [`error::Categorized`]: the error-category pattern (category = Event
//!   reason), with the shared `error_policy`.
//! - [`stores`]: the reflector caches and the watch streams behind them.
//! - [`bindzone`], [`dnsrecord`], [`zonesync`]: zones and records on the
//!   servers (the zone is the unit of write).
//! - [`run`]: starts every controller; `bind-operator run` (a real API
//!   server) and `bind-operator local` (the in-memory one) both call it.
//!
//! Touches the cluster. Never logs, returns or records key material.

pub mod bindzone;
pub mod context;
pub mod dnsrecord;
pub mod error;
pub mod exec;
pub mod names;
pub mod network;
pub mod stores;
pub mod zonesync;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use kube::Client;

pub use context::{Context, REQUEUE_LONG, REQUEUE_SHORT};
pub use error::Categorized;
pub use exec::{ExecError, ExecOutput, KubeExecutor, PodExecutor, PodRef};
pub use names::FIELD_MANAGER;
pub use network::{ClusterNetwork, Network, NetworkError};
pub use stores::{Stores, Streams};

/// A shutdown signal every controller can hold a copy of.
pub type Shutdown = futures::future::Shared<BoxFuture<'static, ()>>;

/// Runs every controller until `shutdown` resolves (then lets in-flight
/// reconciles finish). `executor` and `network` pick the environment: a
/// cluster ([`KubeExecutor`], [`ClusterNetwork`]) or local mode.
pub async fn run(
    client: Client,
    executor: Arc<dyn PodExecutor>,
    network: Arc<dyn Network>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let shutdown: Shutdown = shutdown.boxed().shared();
    let (stores, streams) = stores::watch_all(&client);
    let ctx = Arc::new(Context::new(client, executor, network, stores));
    let controllers: Vec<BoxFuture<'static, ()>> = vec![
        // The BindTSIGKey and BindCluster controllers land here next.
        {
            let s = shutdown.clone();
            async move {
                tokio::select! {
                    () = streams.drive() => {},
                    () = s => {},
                }
            }
            .boxed()
        },
        // The BindZone and DNSRecord controllers, with their own caches.
        zonesync::run(ctx.clone(), zonesync::Settings::default(), shutdown.clone()).boxed(),
    ];
    futures::future::join_all(controllers).await;
    tracing::info!("controllers stopped");
}
