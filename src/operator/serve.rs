//! The process lifecycle of `bind-operator run`: health endpoints up first,
//! then (with leader election) wait for the Lease, then run the controllers
//! until a shutdown signal or the loss of leadership.
//!
//! # Contract
//! - The health server listens before anything else, so liveness holds
//!   while a standby waits for the Lease. `/readyz` turns ready when a
//!   standby knows who leads, turns unready when this replica becomes leader
//!   and starts its controllers, and ready again when the controllers say
//!   their caches synced ([`RunContext::readiness`]).
//! - The controllers run only while this replica holds the Lease (or
//!   without leader election). On SIGTERM/Ctrl-C they are asked to stop
//!   ([`RunContext::shutdown`]) and get the configured grace period; then
//!   the Lease is released so a standby takes over at once, and
//!   [`Operator::run`] returns `Ok`.
//! - On loss of leadership the controllers' future is dropped at once
//!   (another replica may already act) and [`ServeError::LostLeadership`] is
//!   returned: the binary exits non-zero and the kubelet restarts it into
//!   the election.
//!
//! Parses no flags or environment (see [`super::config`]); touches the
//! cluster only through the leader elector. Must never run the controllers
//! without holding the Lease when leader election is on.

use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;

use super::config::OperatorConfig;
use super::health::{HealthError, HealthServer};
use super::leader::Leadership;
use super::leader::{LeaderElector, LeaderError, Role};
use crate::telemetry::{Metrics, Readiness};

/// What the controllers' future is given.
#[derive(Clone, Debug)]
pub struct RunContext {
    /// Cancelled when the controllers must stop (shutdown signal).
    pub shutdown: CancellationToken,
    /// Set it once the controllers' caches have synced; `/readyz` follows.
    pub readiness: Readiness,
    /// Where reconcilers and the executor count what they do.
    pub metrics: Metrics,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("failed to set up leader election")]
    LeaderElection(#[source] LeaderError),
    #[error("failed to start the health server")]
    Health(#[source] HealthError),
    #[error("failed to install the shutdown signal handler")]
    Signal(#[source] std::io::Error),
    #[error(
        "lost leadership of lease {namespace}/{name}; exiting so a restart re-enters the election"
    )]
    LostLeadership { namespace: String, name: String },
    #[error("the controllers failed")]
    Controllers(#[source] Box<dyn StdError + Send + Sync>),
}

impl ServeError {
    /// Static category for logs.
    pub fn category(&self) -> &'static str {
        match self {
            ServeError::LeaderElection(_) => "leader_election",
            ServeError::Health(_) => "health_server",
            ServeError::Signal(_) => "signal",
            ServeError::LostLeadership { .. } => "lost_leadership",
            ServeError::Controllers(_) => "controllers",
        }
    }
}

/// Binds the health server from `config`, then runs like [`Operator::run`].
/// This is what `bind-operator run` calls.
pub async fn serve<F, Fut, E>(
    client: kube::Client,
    config: OperatorConfig,
    metrics: Metrics,
    controllers: F,
) -> Result<(), ServeError>
where
    F: FnOnce(RunContext) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    Operator::bind(config, metrics)
        .await?
        .run(client, controllers)
        .await
}

/// Resolves on SIGTERM (the kubelet stopping the pod) or Ctrl-C. The
/// handlers are installed when this is called, not when first polled.
pub fn shutdown_signal() -> Result<impl Future<Output = ()>, ServeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(ServeError::Signal)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(ServeError::Signal)?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("received SIGTERM; shutting down"),
            _ = interrupt.recv() => tracing::info!("received SIGINT; shutting down"),
        }
    })
}

/// An operator process whose health server is bound but not yet serving.
#[derive(Debug)]
pub struct Operator {
    config: OperatorConfig,
    health: HealthServer,
    readiness: Readiness,
    metrics: Metrics,
}

impl Operator {
    /// Binds the health address (port 0 picks a free port).
    pub async fn bind(config: OperatorConfig, metrics: Metrics) -> Result<Self, ServeError> {
        let readiness = Readiness::new();
        let health = HealthServer::bind(config.health_addr, readiness.clone(), metrics.clone())
            .await
            .map_err(ServeError::Health)?;
        Ok(Self {
            config,
            health,
            readiness,
            metrics,
        })
    }

    /// The address `/healthz`, `/readyz` and `/metrics` answer on.
    pub fn health_addr(&self) -> SocketAddr {
        self.health.local_addr()
    }

    /// Runs until SIGTERM/Ctrl-C; see [`Self::run_until`].
    pub async fn run<F, Fut, E>(
        self,
        client: kube::Client,
        controllers: F,
    ) -> Result<(), ServeError>
    where
        F: FnOnce(RunContext) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let signal = shutdown_signal()?;
        self.run_until(client, signal, controllers).await
    }

    /// Serves health, waits for leadership when enabled, then runs
    /// `controllers` until `shutdown` resolves, the controllers end, or
    /// leadership is lost (an error).
    pub async fn run_until<S, F, Fut, E>(
        self,
        client: kube::Client,
        shutdown: S,
        controllers: F,
    ) -> Result<(), ServeError>
    where
        S: Future<Output = ()>,
        F: FnOnce(RunContext) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let Operator {
            config,
            health,
            readiness,
            metrics,
        } = self;
        let health_stop = CancellationToken::new();
        let health_task = tokio::spawn(health.serve(health_stop.clone()));
        // Also stops the server if this future is dropped half-way.
        let _health_guard = health_stop.clone().drop_guard();
        let result = lifecycle(config, client, &readiness, &metrics, shutdown, controllers).await;
        // The probes stop answering only once everything else has stopped,
        // and before this returns, so the port is free for a restart.
        health_stop.cancel();
        let _ = health_task.await;
        result
    }
}

/// Everything of [`Operator::run_until`] between starting and stopping the
/// health server.
async fn lifecycle<S, F, Fut, E>(
    config: OperatorConfig,
    client: kube::Client,
    readiness: &Readiness,
    metrics: &Metrics,
    shutdown: S,
    controllers: F,
) -> Result<(), ServeError>
where
    S: Future<Output = ()>,
    F: FnOnce(RunContext) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Into<Box<dyn StdError + Send + Sync>>,
{
    tokio::pin!(shutdown);
    metrics.set_leader(false);

    let leadership = match &config.leader_election {
        None => None,
        Some(le) => {
            let elector = LeaderElector::new(
                client,
                &le.namespace,
                &le.lease_name,
                &le.identity,
                le.timing,
            )
            .map_err(ServeError::LeaderElection)?;
            tracing::info!(lease = %le.lease_name, namespace = %le.namespace, identity = %le.identity, "waiting for leadership");
            match wait_for_leadership(&elector, readiness, &mut shutdown).await {
                Some(l) => Some(l),
                None => {
                    tracing::info!("shut down while standing by");
                    return Ok(());
                }
            }
        }
    };

    metrics.set_leader(true);
    // Leader now, but the controllers' caches are cold.
    readiness.set_ready(false);
    let stop = CancellationToken::new();
    let lost = leadership
        .as_ref()
        .map(Leadership::lost_token)
        .unwrap_or_default();
    let run = controllers(RunContext {
        shutdown: stop.clone(),
        readiness: readiness.clone(),
        metrics: metrics.clone(),
    });
    tokio::pin!(run);

    let result = tokio::select! {
        finished = &mut run => {
            tracing::warn!("controllers ended without a shutdown signal");
            finished.map_err(|e| ServeError::Controllers(e.into()))
        }
        _ = &mut shutdown => {
            stop.cancel();
            readiness.set_ready(false);
            match tokio::time::timeout(config.shutdown_grace, &mut run).await {
                Ok(finished) => finished.map_err(|e| ServeError::Controllers(e.into())),
                Err(_) => {
                    tracing::warn!(grace = ?config.shutdown_grace, "controllers did not stop within the grace period");
                    Ok(())
                }
            }
        }
        _ = lost.cancelled() => {
            stop.cancel();
            readiness.set_ready(false);
            metrics.set_leader(false);
            let le = config.leader_election.as_ref().expect("only a lease can be lost");
            return Err(ServeError::LostLeadership {
                namespace: le.namespace.clone(),
                name: le.lease_name.clone(),
            });
        }
    };

    readiness.set_ready(false);
    if let Some(leadership) = leadership {
        // Best effort: an unreleased Lease only delays the standby until
        // it expires.
        if let Err(e) = leadership.release().await {
            tracing::warn!(category = e.category(), error = %e, "failed to release the lease");
        }
    }
    metrics.set_leader(false);
    result
}

/// Acquires the Lease, marking a standby ready once it knows another replica
/// leads. `None` when `shutdown` came first.
async fn wait_for_leadership<S>(
    elector: &LeaderElector,
    readiness: &Readiness,
    shutdown: &mut std::pin::Pin<&mut S>,
) -> Option<Leadership>
where
    S: Future<Output = ()>,
{
    let mut role = elector.role();
    let acquire = elector.acquire();
    tokio::pin!(acquire);
    loop {
        tokio::select! {
            leadership = &mut acquire => return Some(leadership),
            _ = shutdown.as_mut() => return None,
            changed = role.changed() => {
                // The elector owns the sender and outlives this loop.
                if changed.is_err() {
                    continue;
                }
                if let Role::Standby { holder } = &*role.borrow_and_update() {
                    tracing::info!(holder = ?holder, "standing by");
                    readiness.set_ready(true);
                }
            }
        }
    }
}
