//! What the process measures and reports about itself, shared by the
//! controllers (which count and flag) and the operator process (which serves
//! it at `/metrics` and `/readyz`): the Prometheus registry ([`metrics`]) and
//! the readiness flag ([`readiness`]), what named reports per pod
//! ([`bindstats`]) and per-zone serial health ([`zonehealth`]).
//!
//! A leaf: uses nothing else of this crate, touches no cluster, does no I/O.

pub mod bindstats;
pub mod metrics;
pub mod readiness;
pub mod zonehealth;

pub use metrics::{Controller, Metrics};
pub use readiness::Readiness;
