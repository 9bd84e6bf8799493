//! bind-operator library: the CRD types (`api`), pure BIND knowledge (`bind`),
//! CRD-to-BIND validation and offline rendering (`render`), the reconcilers
//! (`controller`), the in-process Kubernetes API and local runtime (`local`),
//! the deployed process's leader election, health endpoints and `run`
//! wiring (`operator`), the offline `render` subcommand (`offline`), and two
//! leaves: metrics and readiness (`telemetry`) and YAML (`yaml`). The binary
//! in `main.rs` only wires these together.
//!
//! Dependencies run one way: `operator` -> `controller` -> `render` ->
//! `bind` / `api`, with `local` and `offline` on top; tests/arch_layers.rs
//! holds the table and checks that no sibling modules use each other.

pub mod api;
pub mod bind;
pub mod controller;
pub mod import;
pub mod local;
pub mod offline;
pub mod operator;
pub mod render;
pub mod telemetry;
pub mod yaml;
