//! bind-operator library: the CRD types (`api`), pure BIND knowledge (`bind`),
//! CRD-to-BIND validation and offline rendering (`render`), the reconcilers
//! (`controller`), the in-process Kubernetes API and local runtime (`local`),
//! and the deployed process's leader election, health endpoints and metrics
//! (`operator`). The binary in `main.rs` only wires these together.

pub mod api;
pub mod bind;
pub mod controller;
pub mod local;
pub mod offline;
pub mod operator;
pub mod render;
pub mod telemetry;
