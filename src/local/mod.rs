//! Local mode: the in-memory Kubernetes API (`memapi`), the local runtime that
//! plays kubelet for BIND pods on one machine (`runtime`), the manifest
//! directory the API is loaded from and kept in sync with (`manifests`,
//! `manifest_dir`, `sync`), and what a session reports (`report`, `render`,
//! `session`, with `serving` checking what the pods answer), and the
//! benchmark of the whole path (`bench`).

pub mod bench;
mod builtin;
pub mod command;
pub mod manifest_dir;
pub mod manifests;
pub mod memapi;
pub mod render;
pub mod report;
pub mod runtime;
pub mod serving;
pub mod session;
pub mod sync;
