//! Running the operator as a Kubernetes workload: Lease-based leader
//! election (`leader`, `leadership`), the `/healthz`, `/readyz` and
//! `/metrics` endpoints (`health`; the metrics registry and the readiness
//! flag themselves are in [`crate::telemetry`]), the environment the
//! Deployment sets (`config`), the process lifecycle that ties them to the
//! controllers (`serve`), and `bind-operator run`'s wiring of all of it to
//! [`crate::controller::run_scoped`] (`manager`).
//!
//! The top of the process: uses the controllers, never the other way
//! round. Touches the cluster through the leader elector (one Lease) and the
//! client it builds for the controllers. Holds no reconcile logic and no
//! BIND knowledge: `serve` is handed the controllers as a future.
//!
//! Typical wiring:
//!
//! ```no_run
//! # async fn wiring(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use bind_operator::operator::{Metrics, OperatorConfig, serve};
//! let config = OperatorConfig::from_env()?;
//! let metrics = Metrics::new();
//! serve(client, config, metrics, |ctx| async move {
//!     // start the controllers with ctx.shutdown, ctx.metrics;
//!     // call ctx.readiness.set_ready(true) once their caches synced
//!     ctx.shutdown.cancelled().await;
//!     Ok::<(), std::io::Error>(())
//! })
//! .await?;
//! # Ok(()) }
//! ```

pub mod config;
pub mod health;
pub mod leader;
pub mod manager;
pub mod serve;

pub use config::{ConfigError, LeaderElectionConfig, OperatorConfig};
pub use health::HealthServer;
pub use leader::Leadership;
pub use leader::{Attempt, LeaderElector, LeaderError, LeaseTiming, Role};
// The serve API takes and hands out these; they live in the leaf `telemetry`.
pub use crate::telemetry::{Controller, Metrics, Readiness};
pub use serve::{Operator, RunContext, ServeError, serve, shutdown_signal};
