//! From custom resources to the BIND layer: [`validate`] turns CRD objects
//! (plus key material) into the `bind` module's strict render input, and
//! [`offline`] is the `render` subcommand that does so for a directory of
//! manifests. Neither talks to a cluster; `validate` does no I/O at all.
//! Neither may print key material.

pub mod offline;
pub mod validate;
