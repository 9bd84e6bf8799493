//! From custom resources to the BIND layer: [`validate`] turns CRD objects
//! (plus key material) into the `bind` module's strict render input, and
//! [`warnings`] flags weak but valid input. Neither talks to a cluster nor
//! does I/O; neither may print key material. (The offline `render`
//! subcommand that writes a directory of manifests out as BIND files is
//! [`crate::offline`], above the controllers whose objects it shows.)

pub mod validate;
pub mod warnings;
