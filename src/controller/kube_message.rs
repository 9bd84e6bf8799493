//! One readable sentence for a kube error ([`KubeMessage`]), for every
//! message that reaches a status, an Event or a log. A leaf of
//! `controller`: the executor and the error pattern (`error`) both use it.
//!
//! Touches nothing. kube's errors carry no key material; neither does this.

/// One readable sentence for a kube error, for every message that reaches
/// a status, an Event or a log: the API server's own message and its
/// reason (`pod edge-0 does not have a host assigned (BadRequest)`), never
/// kube's `ApiError: ... (Status { status: Some(Failure), ... })` dump.
pub struct KubeMessage<'a>(pub &'a kube::Error);

impl std::fmt::Display for KubeMessage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            kube::Error::Api(status) => {
                let message = status.message.trim().trim_end_matches('.');
                match (message.is_empty(), status.reason.is_empty()) {
                    (false, false) => write!(f, "{message} ({})", status.reason),
                    (false, true) => f.write_str(message),
                    (true, false) => write!(f, "{} (HTTP {})", status.reason, status.code),
                    (true, true) => write!(f, "the API server answered HTTP {}", status.code),
                }
            }
            other => {
                // kube's other messages are one line already; their sources
                // add the detail ("ServiceError: client error (Connect)").
                write!(f, "{other}")?;
                let mut source = std::error::Error::source(other);
                while let Some(s) = source {
                    let text = s.to_string();
                    if !other.to_string().contains(&text) {
                        write!(f, ": {text}")?;
                    }
                    source = s.source();
                }
                Ok(())
            }
        }
    }
}

/// [`KubeMessage`] as a String.
pub fn kube_message(e: &kube::Error) -> String {
    KubeMessage(e).to_string()
}
