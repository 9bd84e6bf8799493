//! The serials a zone's external secondaries serve (the cluster's
//! spec.externalSecondaries, or the zone's own list): one SOA query per
//! secondary from the operator, signed with the secondary's key, for the
//! zone's status. A secondary that lags or does not answer is reported,
//! never waited for: Ready is about what the cluster serves.
//!
//! Touches nothing but the external servers (read-only DNS queries). Never
//! puts key material or a Debug dump of an error into the status.

use std::net::SocketAddr;
use std::time::Duration;

use crate::api::ExternalSecondaryStatus;
use crate::bind::ZoneName;
use crate::bind::render::ExternalSecondary;
use crate::bind::wire::client::Client;

use super::read::Inputs;

/// How long one external secondary may take to answer: a provider that is
/// down must not hold the zone's pass for the wire client's full timeout.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// How soon a zone with a lagging external secondary looks again (nothing
/// else wakes it when the secondary catches up).
pub const LAGGING_RECHECK: Duration = Duration::from_secs(2);

/// `address:port` as the status shows it.
pub fn server_text(e: &ExternalSecondary) -> String {
    SocketAddr::new(e.endpoint.ip, e.endpoint.port).to_string()
}

/// Asks every external secondary of the zone for its serial, all at once.
pub async fn observe(
    zone: &ZoneName,
    list: &[ExternalSecondary],
    inputs: &Inputs,
    primary_serial: u32,
) -> Vec<ExternalSecondaryStatus> {
    let asks = list.iter().map(|e| async move {
        let server = server_text(e);
        let key = inputs
            .keys
            .loaded
            .iter()
            .map(|(_, k)| k)
            .find(|k| k.name == e.key);
        let client = Client::new(SocketAddr::new(e.endpoint.ip, e.endpoint.port));
        let answer = tokio::time::timeout(QUERY_TIMEOUT, client.serial(zone, key)).await;
        let (serial, message) = match answer {
            Ok(Ok(Some(s))) => (Some(s), None),
            Ok(Ok(None)) => (None, Some("does not serve the zone".to_string())),
            Ok(Err(e)) => (None, Some(e.to_string())),
            Err(_) => (
                None,
                Some(format!("no answer within {} s", QUERY_TIMEOUT.as_secs())),
            ),
        };
        ExternalSecondaryStatus {
            server,
            caught_up: serial == Some(primary_serial),
            serial,
            message,
        }
    });
    futures::future::join_all(asks).await
}

/// Whether a secondary answers with a serial other than the primary's:
/// up, but behind.
pub fn answering_behind(observed: &[ExternalSecondaryStatus]) -> bool {
    observed.iter().any(|e| e.serial.is_some() && !e.caught_up)
}
