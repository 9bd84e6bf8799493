//! What the operator knows about SOA serials: the primary's for a zone and
//! its catalog (a fresh dig, or the cluster's survey on periodic checks),
//! the serials the secondaries hold (so a re-created zone starts above
//! them: secondaries ignore a zone whose serial went back), and which
//! secondaries lag behind the primary (they missed a NOTIFY).
//!
//! Touches BIND pods (SOA queries over DNS) through the zone servers only.

use std::time::SystemTime;

use crate::bind::{ViewName, ZoneName};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::server::{ServerError, Target};
use crate::controller::zonesync::state::{ClusterMemory, Survey};
use crate::controller::zonesync::survey::{PodInfo, survey};

use super::read::Inputs;

fn now_secs() -> u32 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
        .unwrap_or_default()
}

/// A starting serial for a (re)created zone: the clock, but above every
/// serial the cluster is known to have served (updates move the serial
/// past the clock, and the secondaries still hold the old zone).
pub fn start_serial(known: impl IntoIterator<Item = u32>) -> u32 {
    known
        .into_iter()
        .map(|s| s.wrapping_add(1))
        .fold(now_secs(), u32::max)
}

/// Where a zone lives and which catalog it joins.
pub struct Placement<'a> {
    pub zone: &'a ZoneName,
    pub view: Option<&'a ViewName>,
    pub catalog: Option<&'a ZoneName>,
    /// A survey must be younger than this (the zone's last write).
    pub newer_than: Option<std::time::Instant>,
}

/// The primary's serials of a zone and its catalog.
pub struct Probed {
    pub zone: Option<u32>,
    /// Whether the catalog is served (`None`: no catalog).
    pub catalog: Option<bool>,
    /// The survey that answered, on a periodic check.
    pub survey: Option<std::sync::Arc<Survey>>,
}

/// Serials of the zone and, if any, its catalog on the primary: from the
/// survey on a periodic check outside views, else one fresh signed read
/// (in a view, signed with the view's key).
pub async fn probe(
    ctx: &ZoneContext,
    inputs: &Inputs,
    target: &Target<'_>,
    memory: &ClusterMemory,
    periodic: bool,
    at: &Placement<'_>,
) -> Result<Probed, ServerError> {
    let (zone, view, catalog) = (at.zone, at.view, at.catalog);
    if periodic && view.is_none() {
        let s = survey(
            ctx,
            &inputs.cluster,
            &inputs.pods,
            memory,
            zone,
            at.newer_than,
            Some(&inputs.keys.transfer),
        )
        .await;
        if let Some(served) = s.pods.get(&target.pod.name) {
            let cat = catalog.map(|c| s.asked.contains(c).then(|| served.contains_key(c)));
            if cat.is_none() || cat.is_some_and(|c| c.is_some()) {
                return Ok(Probed {
                    zone: served.get(zone).copied(),
                    catalog: cat.flatten(),
                    survey: Some(s.clone()),
                });
            }
        }
    }
    // One signed query for both; in a view, the view's key lands it there.
    let mut ask = vec![zone.clone()];
    ask.extend(catalog.cloned());
    let serials = target
        .serials(&ask, Some(inputs.keys.transfer_for(view)))
        .await?;
    Ok(Probed {
        zone: serials.get(zone).copied(),
        catalog: catalog.map(|c| serials.contains_key(c)),
        survey: None,
    })
}

/// The highest serial any Ready secondary serves for each of `zones`
/// (asked right before a zone is re-created; a secondary that cannot be
/// asked is skipped). One pipelined read per secondary, signed with the
/// key of `view` (the transfer key outside views), so it lands there.
pub async fn peer_serials(
    ctx: &ZoneContext,
    inputs: &Inputs,
    zones: &[ZoneName],
    view: Option<&ViewName>,
) -> Vec<(ZoneName, u32)> {
    let key = inputs.keys.transfer_for(view);
    let mut out = Vec::new();
    for p in inputs.pods.iter().filter(|p| p.ready && p.ordinal != 0) {
        if let Ok(serials) = ctx.target(&p.pod).serials(zones, Some(key)).await {
            out.extend(serials);
        }
    }
    out
}

/// Serials of `zone` among `known`.
pub fn of(known: &[(ZoneName, u32)], zone: &ZoneName) -> Vec<u32> {
    known
        .iter()
        .filter(|(z, _)| z == zone)
        .map(|(_, s)| *s)
        .collect()
}

/// Whether one of the secondaries' serials of a zone (`None`: it does not
/// serve the zone) is below the primary's `serial`: it missed a NOTIFY.
/// Shared by zones outside views (serials from the survey) and in views
/// ([`view_secondaries`]).
pub fn behind(secondaries: impl IntoIterator<Item = Option<u32>>, serial: u32) -> bool {
    secondaries
        .into_iter()
        .any(|s| s.is_none_or(|s| s < serial))
}

/// The serial of `zone` in `view` on every Ready pod but `primary`, by
/// pod (`None`: it does not serve the zone, or has it not loaded). The
/// survey asks with the transfer key, which lands in whichever view takes
/// it; each secondary is asked here with a SOA query signed with the view's
/// key, which lands in that view ([`crate::bind::viewkey`]): one DNS
/// exchange per Ready secondary, no exec. A secondary that cannot be asked
/// is left out.
pub async fn view_secondaries<'i>(
    ctx: &ZoneContext,
    inputs: &'i Inputs,
    primary: &str,
    zone: &ZoneName,
    view: &ViewName,
) -> Vec<(&'i PodInfo, Option<u32>)> {
    let key = inputs.keys.transfer_for(Some(view));
    let mut out = Vec::new();
    for p in inputs
        .pods
        .iter()
        .filter(|p| p.ready && p.pod.name != primary)
    {
        match ctx.target(&p.pod).serial_of(zone, key).await {
            Ok(s) => out.push((p, s)),
            Err(e) => {
                tracing::debug!(pod = %p.pod, zone = %zone, error = %e, "failed to read a secondary's serial");
            }
        }
    }
    out
}
