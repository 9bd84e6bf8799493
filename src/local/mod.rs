//! Local mode: the in-memory Kubernetes API and the local runtime.

pub mod memapi;
