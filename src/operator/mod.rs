//! Running the operator as a Kubernetes workload: Lease-based leader
//! election (`leader`), the `/healthz`, `/readyz` and `/metrics` endpoints
//! (`health`, `metrics`), the environment the Deployment sets (`config`),
//! and the process lifecycle that ties them to the controllers (`serve`).
//!
//! Touches the cluster only through the leader elector (one Lease). Holds
//! no reconcile logic and no BIND knowledge: the controllers are handed in
//! as a future by the `run` wiring.
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
pub mod leadership;
pub mod metrics;
pub mod serve;

pub use config::{ConfigError, LeaderElectionConfig, OperatorConfig};
pub use health::{HealthServer, Readiness};
pub use leader::{Attempt, LeaderElector, LeaderError, LeaseTiming, Role};
pub use leadership::Leadership;
pub use metrics::{Controller, Metrics};
pub use serve::{Operator, RunContext, ServeError, serve, shutdown_signal};
