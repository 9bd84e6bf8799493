//! The container entrypoint script and the rndc key file. Pure text, no I/O.
//!
//! The script is the same for every cluster (it holds no user input), so its
//! hash — which goes on the pod template — changes only when the operator's
//! idea of the pod layout changes. Everything per pod (ports, listen
//! address, ordinal) comes from the environment with in-cluster defaults;
//! the local runtime and the tests run this same script with overrides.

use super::conf::{ConfWriter, Tok};
use super::types::{TsigAlgorithm, TsigSecret};

/// The name of the rndc control key inside named and rndc.
pub const RNDC_KEY_NAME: &str = "rndc-key";

/// `rndc.key`: the control-channel key clause.
pub fn render_rndc_key(algorithm: TsigAlgorithm, secret: &TsigSecret) -> String {
    let mut w = ConfWriter::new();
    w.block(&[Tok::Kw("key"), Tok::Str(RNDC_KEY_NAME)], |w| {
        w.stmt(&[Tok::Kw("algorithm"), Tok::Kw(algorithm.as_str())]);
        w.stmt(&[Tok::Kw("secret"), Tok::Str(secret.expose_base64())]);
    });
    w.finish()
}

/// The entrypoint: pick the role by ordinal, prepare the data directory,
/// symlink (never copy) the role's named.conf to the run path, write the
/// per-pod include files, then exec named in the foreground.
pub fn render_entrypoint() -> String {
    ENTRYPOINT.to_string()
}

const ENTRYPOINT: &str = include_str!("scripts/entrypoint.sh");
