//! Converges a secondary zone (transferred from external primaries): the
//! zone is added with `rndc addzone` on every Ready pod of the cluster —
//! never a catalog member, since the catalog hands out the cluster's own
//! primary zones — and modified there when its clause changes. Each pod is
//! asked through `rndc zonestatus`, which names the view.
//!
//! Touches BIND pods (exec) only.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use kube::ResourceExt as _;

use crate::api::BindZone;
use crate::bind::ZoneName;
use crate::bind::zone::SecondaryZone;
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::diff::Served;
use crate::controller::zonesync::server::ServerError;
use crate::controller::zonesync::state::Snapshot;
use crate::controller::zonesync::survey::pods_fingerprint;

use super::applied::{Applied, clause_hash};
use super::catalog;
use super::primary::TYPE_PRIMARY;
use super::read::Inputs;

/// The zone type string in the applied annotation.
pub const TYPE_SECONDARY: &str = "secondary";

/// A converged secondary zone.
#[derive(Debug, Clone)]
pub struct Converged {
    /// Highest serial any pod serves (none before the first transfer).
    pub serial: Option<u32>,
    pub servers: BTreeMap<String, u32>,
    pub message: String,
    pub next_check: Duration,
}

/// The outcome of one convergence.
pub struct Outcome {
    pub result: Result<Converged, ServerError>,
    pub applied: Applied,
}

/// Adds / modifies the zone on every Ready pod.
pub async fn converge(
    ctx: &ZoneContext,
    zone: &BindZone,
    inputs: &Inputs,
    sz: &SecondaryZone,
    applied: &Applied,
) -> Outcome {
    let clause = sz.clause();
    let want = Applied {
        type_: Some(TYPE_SECONDARY.into()),
        view: sz.view.as_ref().map(|v| v.as_str().to_string()),
        clause: Some(clause_hash(&clause)),
        catalog: None,
        inline: Default::default(),
    };
    let key = (zone.namespace().unwrap_or_default(), zone.name_any());
    let fingerprint = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&clause, pods_fingerprint(&inputs.pods)).hash(&mut h);
        h.finish()
    };
    let interval = ctx.settings.verify_interval;
    let snap = ctx.state.snapshot(&key);
    if let Some(s) = &snap {
        let age = s.verified_at.elapsed();
        if applied == &want && s.applied == Some(fingerprint) && age < interval {
            let servers: BTreeMap<String, u32> = zone
                .status
                .as_ref()
                .map(|st| st.servers.clone())
                .unwrap_or_default();
            return Outcome {
                result: Ok(Converged {
                    serial: servers.values().max().copied(),
                    message: message(&servers, inputs),
                    servers,
                    next_check: interval - age,
                }),
                applied: want,
            };
        }
    }

    let result = async {
        if applied.type_.as_deref() == Some(TYPE_PRIMARY) {
            undo_primary(ctx, inputs, &sz.zone, applied).await?;
        }
        let mut servers = BTreeMap::new();
        for p in inputs.pods.iter().filter(|p| p.ready) {
            let t = ctx.target(&p.pod);
            let status = match t.zone_status(&sz.zone, sz.view.as_ref()).await? {
                None => {
                    t.add_secondary(sz).await?;
                    // Usually not transferred yet; the recheck picks it up.
                    t.zone_status(&sz.zone, sz.view.as_ref()).await?
                }
                Some(st) => {
                    if applied.clause != want.clause {
                        t.modify_secondary(sz).await?;
                    }
                    Some(st)
                }
            };
            if let Some(serial) = status.and_then(|st| st.serial.filter(|_| st.loaded)) {
                servers.insert(p.pod.name.clone(), serial);
            }
        }
        Ok(servers)
    }
    .await;
    let ready = inputs.pods.iter().filter(|p| p.ready).count();
    let result = result.map(|servers| {
        let complete = servers.len() >= ready;
        // Until every pod has transferred it, look again soon (and do not
        // let the fast path skip that look).
        ctx.state.set_snapshot(
            &key,
            complete.then(|| Snapshot {
                served: Served::default().into(),
                applied: Some(fingerprint),
                verified_at: Instant::now(),
                written_at: None,
                primary: 0,
            }),
        );
        Converged {
            serial: servers.values().max().copied(),
            message: message(&servers, inputs),
            servers,
            next_check: if complete {
                interval
            } else {
                ctx.settings.recheck_after_write.min(interval)
            },
        }
    });
    if result.is_err() {
        ctx.state.set_snapshot(&key, None);
    }
    Outcome {
        result,
        applied: want,
    }
}

fn message(servers: &BTreeMap<String, u32>, inputs: &Inputs) -> String {
    let ready = inputs.pods.iter().filter(|p| p.ready).count();
    format!("transferred by {} of {ready} ready pods", servers.len())
}

/// The zone was a primary zone here before: leave the catalog, delete it
/// from the primary.
async fn undo_primary(
    ctx: &ZoneContext,
    inputs: &Inputs,
    zone: &ZoneName,
    applied: &Applied,
) -> Result<(), ServerError> {
    let Some(primary) = inputs.primary() else {
        return Ok(());
    };
    let t = ctx.target(&primary.pod);
    let view = applied
        .view
        .as_deref()
        .and_then(|v| crate::bind::ViewName::parse(v).ok());
    if let Some(cat) = applied
        .catalog
        .as_deref()
        .and_then(|c| ZoneName::parse(c).ok())
    {
        let key = inputs.keys.transfer_for(view.as_ref());
        catalog::leave(&t, &cat, zone, key).await?;
    }
    t.delete(
        zone,
        view.as_ref(),
        &crate::bind::zone::zone_file(zone, view.as_ref()),
    )
    .await
}
