//! Pure BIND knowledge: validated value types, the named.conf writer and
//! renderer, zone files and clauses, command builders (argv + stdin), the
//! nsupdate batch builder and parsers of BIND tools' output.
//!
//! Nothing here talks to Kubernetes or runs a process: callers hand the
//! built [`commands::Command`]s to an executor (pods/exec in a cluster, a
//! local process runner in local mode). Nothing here may log key material;
//! types that carry it redact themselves in `Debug`.

pub mod commands;
pub mod conf;
pub mod dnssec;
pub mod entrypoint;
pub mod error;
pub mod grant;
pub mod layout;
pub mod name;
pub mod nsupdate;
pub mod parse;
pub mod rdata;
pub mod render;
pub mod rndc;
pub mod types;
pub mod viewkey;
pub mod wire;
pub mod zone;

pub use error::ValidationError;
pub use layout::PodLayout;
pub use name::{DomainName, ZoneName};
pub use rdata::{Rdata, RecordType};
pub use types::{
    AclElement, AclTarget, Endpoint, KeyName, TsigAlgorithm, TsigKey, TsigSecret, Ttl, ViewName,
};
