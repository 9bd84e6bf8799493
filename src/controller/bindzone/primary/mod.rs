//! Converges a primary zone on the cluster's primary pod: the zone exists
//! (on first sight or after the primary lost it: its file written with
//! every RRset of the plan and its stanza listed, see `zone`), its clause
//! is current, it is a member of its catalog ([`super::catalog`]), and its
//! owned RRsets match the plan — all pending changes in one nsupdate run
//! (none after a creation that carried them).
//!
//! [`converge`] is the table of contents over the one value the read step
//! built ([`ZoneRead`]); each step is a child module:
//! - `plan`: the zone's RRsets (through the zone's plan memo: only what
//!   changed is validated and decided again), the annotation it wants,
//!   its catalog; a zone never applied waits a little while its
//!   DNSRecords still lack their finalizer or records of zones not applied
//!   yet still arrive (a first sync: see `plan::FIRST_SYNC_WAIT`);
//! - `decide`: what the primary needs (`Need`), from what this process
//!   remembers — nothing, a periodic check, records only, a full pass, or a
//!   move from where the zone was applied before;
//! - `read`: what the primary serves now (serials, and the secondaries'
//!   before a zone is re-created);
//! - `zone`: the zone itself (old placement removed, created with its
//!   records and, batched, its catalog join in the same round; clause);
//! - `membership`: its catalog membership (unless joined at creation);
//! - `records`: its RRsets and SOA, in one nsupdate run;
//! - `notify`: a NOTIFY repeated for a secondary that missed one;
//! - `verify`: the snapshot remembered (or forgotten) and the
//!   secondaries' catch-up after a write.
//!
//! A failed step is reported as a [`StepError`] naming the step, the zone
//! and the primary pod.
//!
//! How the primary's contents are known without trusting memory: the SOA
//! serial is read first (a fresh SOA query when the plan changed; the cluster's
//! shared survey on periodic checks; nothing when a snapshot a few seconds
//! old is on hand), the remembered snapshot is used only when its serial
//! still matches and the primary pod was not restarted since; after an
//! operator restart, the zone's status when it still shows that serial for
//! the same plan (`status.appliedPlan`); else the zone is transferred
//! (AXFR over DNS).
//!
//! Touches BIND pods (exec) only; statuses are written by the caller.

mod decide;
mod membership;
mod notify;
mod plan;
mod read;
mod records;
mod verify;
mod zone;

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;

use crate::api::BindZone;
use crate::bind::{TsigKey, ViewName, ZoneName};
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::diff::Served;
use crate::controller::zonesync::plan::{Desired, RrKey};
use crate::controller::zonesync::server::{ServerError, Target};
use crate::controller::zonesync::state::{ClusterMemory, ObjKey, Snapshot, Survey};
use crate::controller::zonesync::survey::PodInfo;
use crate::render::validate::PrimaryZoneConfig;

use super::applied::Applied;
use super::read::{Inputs, ZoneRead};

pub use verify::servers;

/// The zone type string in the applied annotation.
pub const TYPE_PRIMARY: &str = "primary";

/// A successful convergence.
#[derive(Debug, Clone)]
pub struct Converged {
    /// What the primary holds now (shared with the zone's snapshot).
    pub served: Arc<Served>,
    /// Whether anything was written (zone, catalog or records).
    pub wrote: bool,
    /// When the next periodic check is due.
    pub next_check: Duration,
    /// Whether the primary was asked this time (false: a recent snapshot
    /// answered, no exec ran).
    pub verified: bool,
    /// Owned RRsets another client had changed since this process last
    /// saw them served as planned, written back by this pass.
    pub restored: Vec<RrKey>,
    /// The plan's fingerprint when `served` holds every RRset of it (see
    /// [`crate::api::BindZoneStatus::applied_plan`]).
    pub plan: Option<u64>,
}

/// A plan fingerprint as `status.appliedPlan` shows it.
pub fn plan_text(fingerprint: u64) -> String {
    format!("{fingerprint:016x}")
}

/// Why a convergence did not happen.
#[derive(Debug)]
pub enum Failure {
    /// A step on the primary failed (retried with backoff).
    Server(StepError),
    /// The plan cannot be written as it is (waits for a change).
    Invalid {
        reason: &'static str,
        message: String,
    },
    /// Nothing done yet: a new zone waits this long for DNSRecords of its
    /// plan still without their finalizer, to be created with them.
    Deferred(Duration),
}

/// The outcome of one convergence.
pub struct Outcome {
    pub desired: Arc<Desired>,
    pub result: Result<Converged, Failure>,
    /// The annotation to record when `result` is Ok.
    pub applied: Applied,
}

/// Plans and converges one primary zone: the table of contents. Each step
/// is a child module; a failed write step forgets the snapshot (what the
/// primary holds is unknown then) and names itself in its [`StepError`].
pub async fn converge(ctx: &ZoneContext, read: &ZoneRead) -> Outcome {
    let planned = plan::plan(ctx, read);
    if let Some(invalid) = plan::unwritable(&planned.desired) {
        return planned.outcome(Err(invalid));
    }
    if let Some(wait) = plan::awaiting_records(ctx, read, &planned.desired) {
        return planned.outcome(Err(wait));
    }
    let result = {
        let job = Job::new(ctx, read, &planned);
        let need = decide::need(&job);
        if let Need::Nothing { snap, age } = need {
            Ok(verify::unchanged(&job, snap, age).await)
        } else {
            let written = async {
                if let Need::Move = need {
                    zone::leave_old_placement(&job).await?;
                }
                let seen = read::primary(&job, need).await?;
                // Side by side: a missing catalog is created in the same
                // round of the primary as the zone.
                let (written, epoch) =
                    tokio::join!(zone::ensure(&job, &seen), membership::catalog(&job, &seen));
                let (mut written, epoch) = (written?, epoch?);
                membership::ensure(&job, need, epoch, &mut written).await?;
                records::write(&job, &mut written).await?;
                notify::lagging(&job, need, &seen, &written).await?;
                Ok(written)
            };
            match written.await {
                Ok(written) => Ok(verify::remember(&job, written)),
                Err(e) => {
                    verify::forget(&job);
                    Err(Failure::Server(e))
                }
            }
        }
    };
    planned.outcome(result)
}

/// The key the operator signs its updates and reads of the zone with. In
/// a view it is the view's key (the zone's update policy grants it): from
/// loopback, only a signature reaches the view.
pub fn operator_key<'a>(
    zone: &BindZone,
    inputs: &'a Inputs,
    view: Option<&ViewName>,
) -> &'a TsigKey {
    match view {
        Some(_) => inputs.keys.transfer_for(view),
        None => zone
            .spec
            .update_key_ref
            .as_deref()
            .and_then(|r| inputs.keys.by_object(r))
            .expect("zone validation requires a loaded update key"),
    }
}

/// The step of a primary zone's convergence that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Removing the zone from where it was applied before.
    Place,
    /// Reading what the primary serves.
    Read,
    /// Creating the zone or updating its clause.
    Zone,
    /// Creating the catalog, joining or leaving it.
    Catalog,
    /// Writing the RRsets and the SOA.
    Records,
    /// Repeating a NOTIFY a secondary missed.
    Notify,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Place => "remove the old placement",
            Step::Read => "read what the primary serves",
            Step::Zone => "write the zone",
            Step::Catalog => "write the catalog membership",
            Step::Records => "write the records",
            Step::Notify => "repeat the NOTIFY",
        })
    }
}

/// A failed step on the primary, with the zone and pod it ran for.
#[derive(Debug, thiserror::Error)]
#[error("failed to {step} (zone {zone}, pod {pod}): {source}")]
pub struct StepError {
    pub step: Step,
    pub zone: String,
    pub pod: String,
    #[source]
    pub source: ServerError,
}

/// What the plan asks of the primary.
struct Planned {
    /// Shared with the zone's plan memo.
    desired: Arc<Desired>,
    /// The applied annotation once this plan is written.
    want: Applied,
    /// The catalog the zone is a member of, if any.
    catalog: Option<ZoneName>,
    /// The plan and the SOA fields it is written under.
    fingerprint: u64,
}

impl Planned {
    fn outcome(self, result: Result<Converged, Failure>) -> Outcome {
        Outcome {
            desired: self.desired,
            result,
            applied: self.want,
        }
    }
}

/// What the primary needs, decided from what this process remembers.
#[derive(Debug, Clone, Copy)]
enum Need<'a> {
    /// Verified `age` ago and nothing changed since: no exec on the
    /// primary, only the secondaries' catch-up.
    Nothing { snap: &'a Snapshot, age: Duration },
    /// Nothing new to write (or nothing remembered, after an operator
    /// restart): the cluster's shared survey tells whether the zone is
    /// there and at which serial.
    Check,
    /// Only the plan changed and the snapshot is fresh: write on it.
    Records(&'a Snapshot),
    /// The zone's clause or catalog changed, or the snapshot is stale: a
    /// fresh read, then the whole pass.
    Converge,
    /// The zone was applied elsewhere (another view, or as a secondary
    /// zone): removed there first, then the whole pass.
    Move,
}

/// Everything one convergence works with.
struct Job<'a> {
    ctx: &'a ZoneContext,
    zone: &'a BindZone,
    inputs: &'a Inputs,
    cfg: &'a PrimaryZoneConfig,
    zkey: ObjKey,
    memory: Arc<ClusterMemory>,
    primary: &'a PodInfo,
    target: Target<'a>,
    plan: &'a Planned,
    /// What the annotation says was applied last.
    applied: &'a Applied,
    /// The remembered snapshot, if taken on this primary (one taken before
    /// the primary restarted says nothing about it).
    snap: Option<Snapshot>,
    /// The last serial this process saw, even from before a restart (it
    /// still bounds a re-created zone's serial from below).
    last_serial: Option<u32>,
    /// The zone's kept DNSSEC key files, put back before it is created.
    kept_keys: Option<&'a [crate::bind::dnssec::KeyFile]>,
}

impl<'a> Job<'a> {
    fn new(ctx: &'a ZoneContext, read: &'a ZoneRead, plan: &'a Planned) -> Self {
        let zone = read.zone.as_ref();
        let zkey: ObjKey = (zone.namespace().unwrap_or_default(), zone.name_any());
        let memory = ctx.state.cluster(&read.inputs.cluster_key);
        let snap = ctx.state.snapshot(&zkey);
        let last_serial = snap.as_ref().map(|s| s.served.serial);
        Job {
            ctx,
            zone,
            inputs: &read.inputs,
            cfg: &read.cfg,
            memory,
            primary: &read.primary,
            target: ctx.target(&read.primary.pod),
            plan,
            applied: &read.applied,
            snap: snap.filter(|s| s.primary == read.primary.identity),
            last_serial,
            zkey,
            kept_keys: read.kept_keys.as_deref(),
        }
    }

    fn zname(&self) -> &'a ZoneName {
        &self.cfg.clause.zone
    }

    fn view(&self) -> Option<&'a ViewName> {
        self.cfg.clause.view.as_ref()
    }

    /// Signs the operator's updates and AXFR reads of the zone.
    fn update_key(&self) -> &'a TsigKey {
        operator_key(self.zone, self.inputs, self.view())
    }

    /// Wraps a server failure of `step` with the zone and pod.
    fn at(&self, step: Step) -> impl FnOnce(ServerError) -> StepError + '_ {
        move |source| StepError {
            step,
            zone: self.zname().to_string(),
            pod: self.target.pod.name.clone(),
            source,
        }
    }
}

/// What the read step saw on the servers.
struct Seen {
    /// The zone's serial on the primary (`None`: not there).
    serial: Option<u32>,
    /// Whether the catalog is served (`None`: no catalog).
    catalog: Option<bool>,
    /// The survey that answered, on a periodic check.
    survey: Option<std::sync::Arc<Survey>>,
    /// The secondaries' serials, read before a zone or catalog is
    /// re-created.
    peers: Vec<(ZoneName, u32)>,
}

/// What the primary holds as the write pass goes.
struct Written {
    served: Arc<Served>,
    /// The zone was created by this pass.
    created: bool,
    /// Its catalog join went with its creation (see
    /// [`crate::controller::zonesync::server::Target::create_primary_joining`]).
    joined: bool,
    /// Anything was written.
    wrote: bool,
    /// Owned RRsets restored after another client changed them.
    restored: Vec<RrKey>,
}
