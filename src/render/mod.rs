//! From custom resources to the BIND layer: [`validate`] turns CRD objects
//! (plus key material) into the `bind` module's strict render input, and
//! [`offline`] is the `render` subcommand that does so for a directory of
//! manifests; [`warnings`] flags weak but valid input. None talks to a cluster; `validate` and `warnings` do no I/O at all.
//! None may print key material.

pub mod offline;
pub mod validate;
pub mod warnings;
