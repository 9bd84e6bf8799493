//! From custom resources to the BIND layer: [`validate`] turns CRD objects
//! (plus key material) into the `bind` module's strict render input, and
//! [`offline`] is the `render` subcommand that does so for a directory of
//! manifests, with [`placeholder`] standing in for key material it cannot
//! or must not write and [`objects`] listing the Kubernetes objects each
//! cluster gets; [`warnings`] flags weak but valid input. None talks to a
//! cluster; only `offline` does I/O. None may print key material.

pub mod objects;
pub mod offline;
pub mod placeholder;
pub mod validate;
pub mod warnings;
