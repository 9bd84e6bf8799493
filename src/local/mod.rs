//! Local mode: the in-memory Kubernetes API and the local runtime that plays
//! kubelet for BIND pods on one machine.

pub mod memapi;
pub mod runtime;
