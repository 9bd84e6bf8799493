//! What the operator knows about SOA serials: the primary's for a zone and
//! its catalog (a fresh dig, or the cluster's survey on periodic checks),
//! the serials the secondaries hold (so a re-created zone starts above
//! them: secondaries ignore a zone whose serial went back), and which
//! secondaries lag behind the primary (they missed a NOTIFY).
//!
//! Touches BIND pods (dig, rndc) through the executor only.

use std::time::SystemTime;

use crate::bind::{ViewName, ZoneName};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::server::{ServerError, Target};
use crate::controller::zonesync::state::{ClusterMemory, Survey};
use crate::controller::zonesync::survey::survey;

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
/// survey on a periodic check, else one fresh dig (zonestatus in a view).
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
    match view {
        None => {
            let mut ask = vec![zone.clone()];
            ask.extend(catalog.cloned());
            let serials = target.serials(&ask, Some(&inputs.keys.transfer)).await?;
            Ok(Probed {
                zone: serials.get(zone).copied(),
                catalog: catalog.map(|c| serials.contains_key(c)),
                survey: None,
            })
        }
        Some(_) => {
            let z = target.serial_of(zone, view, None).await?;
            let c = match catalog {
                Some(c) => Some(target.serial_of(c, view, None).await?.is_some()),
                None => None,
            };
            Ok(Probed {
                zone: z,
                catalog: c,
                survey: None,
            })
        }
    }
}

/// The highest serial any Ready secondary serves for each of `zones`
/// (asked right before a zone is re-created; a secondary that cannot be
/// asked is skipped). One dig per secondary.
pub async fn peer_serials(
    ctx: &ZoneContext,
    inputs: &Inputs,
    zones: &[ZoneName],
    view: Option<&ViewName>,
) -> Vec<(ZoneName, u32)> {
    let mut out = Vec::new();
    for p in inputs.pods.iter().filter(|p| p.ready && p.ordinal != 0) {
        let t = ctx.target(&p.pod);
        if view.is_some() {
            for z in zones {
                if let Ok(Some(s)) = t.serial_of(z, view, None).await {
                    out.push((z.clone(), s));
                }
            }
        } else if let Ok(serials) = t.serials(zones, Some(&inputs.keys.transfer)).await {
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
/// (from `rndc zonestatus`, [`view_secondaries`]).
pub fn behind(secondaries: impl IntoIterator<Item = Option<u32>>, serial: u32) -> bool {
    secondaries
        .into_iter()
        .any(|s| s.is_none_or(|s| s < serial))
}

/// The serial of `zone` in `view` on every Ready pod but `primary` (`None`:
/// it does not serve the zone, or has it not loaded). The survey cannot
/// answer for a view (its unsigned dig lands in whichever view matches
/// loopback), so each secondary is asked with `rndc zonestatus ... in
/// view` (no key needed): one exec per Ready secondary. A secondary that
/// cannot be asked is left out.
pub async fn view_secondaries(
    ctx: &ZoneContext,
    inputs: &Inputs,
    primary: &str,
    zone: &ZoneName,
    view: &ViewName,
) -> Vec<Option<u32>> {
    let mut out = Vec::new();
    for p in inputs
        .pods
        .iter()
        .filter(|p| p.ready && p.pod.name != primary)
    {
        let t = ctx.target(&p.pod);
        match t.serial_of(zone, Some(view), None).await {
            Ok(s) => out.push(s),
            Err(e) => {
                tracing::debug!(pod = %p.pod, zone = %zone, error = %e, "failed to read a secondary's serial");
            }
        }
    }
    out
}
