//! What the BindZone and DNSRecord controllers share: the zone-write
//! machinery and the context both run in. A zone reconcile plans and
//! converges one zone; what the zones of a cluster ask of one pod at about
//! the same time is written together ([`server::batch`]: one exec per kind per pod
//! and round), so a first sync of many zones costs a handful of execs.
//!
//! - [`plan`]: the desired owned RRsets of a zone, conflicts decided (pure);
//!   its [`plan::PlanMemo`] keeps a zone's plan between reconciles so one
//!   costs what changed.
//! - [`access`]: who may publish what in a zone (`spec.recordsFrom`),
//!   applied to each DNSRecord before the plan (pure).
//! - [`namespaces`]: Namespace labels for `recordsFrom` selectors, watched
//!   only once a zone uses one.
//! - [`diff`]: served contents vs desired, as one update batch (pure).
//! - [`server`]: zone operations on a BIND pod.
//! - [`server::batch`]: group commit of those operations per pod: what the zones of
//!   a cluster ask of a pod at about the same time runs as one exec per kind.
//! - [`served`]: waiting for a pod to serve a zone at a serial, one watch
//!   per pod for every zone waiting there.
//! - [`state`]: in-memory snapshots, surveys, catalog epochs, backoff.
//! - [`survey`]: one SOA read over DNS per pod for every zone of a
//!   cluster, cached.
//! - [`keys`]: the TSIG keys a zone signs with (material read on demand).
//! - [`writes`]: statuses, the DNSRecord finalizer, the applied annotation.
//!
//! Touches the cluster (watches, Secret reads) and BIND pods (exec). Key
//! material lives only in redacting types and is never logged.

pub mod access;
pub mod diff;
pub mod keys;
pub mod namespaces;
pub mod plan;
pub mod served;
pub mod server;
pub mod state;
pub mod survey;
pub mod writes;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::reflector::Store;

use crate::api::{BindZone, DNSRecord};

use super::context::Context;

/// Finalizer on BindZones (zone removed from catalog and primary) and
/// DNSRecords (RRset removed from the zone). Kept in the operator's group so
/// it reads as ours in `kubectl get -o yaml`.
pub const ZONE_FINALIZER: &str = "bind.unkin.net/finalizer";
/// See [`ZONE_FINALIZER`]; the same name on DNSRecords.
pub const RECORD_FINALIZER: &str = "bind.unkin.net/finalizer";
/// On a BindZone: JSON of what the operator last applied for it on the
/// servers (placement, clause hash, catalog membership, inline RRsets), so
/// a removed `spec.records` entry or a changed view is undone even after an
/// operator restart. Bookkeeping only; a change to it triggers nothing.
pub const ANNOTATION_APPLIED: &str = "bind.unkin.net/applied-zone";

/// Whether the zone was ever applied (it carries [`ANNOTATION_APPLIED`]).
pub fn ever_applied(zone: &crate::api::BindZone) -> bool {
    zone.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_APPLIED))
}

/// Notes a DNSRecord taken in (seen new, or given its finalizer) whose zone
/// is not there or was never applied: a first sync still arriving, which
/// new zones wait for (see `bindzone::primary`).
pub fn note_if_first_sync(ctx: &ZoneContext, zone: Option<&crate::api::BindZone>) {
    if zone.is_none_or(|z| !ever_applied(z)) {
        ctx.state.note_first_sync_record();
    }
}

/// How often a converged zone is checked against the servers (SOA serial,
/// survey shared by the cluster's zones). Modest: a primary restarted on an
/// empty volume is usually noticed at once through its pod changing; this
/// catches the rest (a silent wipe, a write behind our back).
pub const VERIFY_INTERVAL: Duration = Duration::from_secs(60);
/// A cluster survey younger than this answers every zone's periodic check.
pub const SURVEY_MAX_AGE: Duration = Duration::from_secs(30);
/// How long a new DNSRecord (or a zone) may go without a Pending status
/// while what it waits for is likely on its way: its zone, its finalizer,
/// the zone's first write.
pub const RECORD_MAX_WAIT: Duration = Duration::from_secs(2);
/// First retry after a failed flush; doubled per failure.
pub const RETRY_BASE: Duration = Duration::from_secs(5);
/// Longest retry delay after repeated failures.
pub const RETRY_MAX: Duration = Duration::from_secs(120);
/// A snapshot read or written this recently is trusted without a fresh SOA
/// read before the next write: during a burst of DNSRecord changes each
/// flush is then one exec (update and serial read together). Anything it
/// could miss (a write behind our back in that window) is caught by the
/// next periodic check.
pub const SNAPSHOT_TRUST: Duration = Duration::from_secs(10);
/// After a write, check again this soon so `status.servers` shows the
/// secondaries catching up.
pub const RECHECK_AFTER_WRITE: Duration = Duration::from_secs(5);
/// How long a DNSRecord's Ready waits for every secondary to serve the
/// primary's serial that holds it before it says Pending (`NotServed`)
/// while the wait goes on (see `bindzone::confirm`). Long enough for a
/// secondary taking in a first sync of 1,000 zones (2-3 s here) and for
/// the recheck after a write that NOTIFYs a secondary that missed one (5
/// s), so neither costs each record a Pending status write.
pub const SERVED_WAIT: Duration = Duration::from_secs(10);

/// Timing knobs; tests shorten them.
#[derive(Debug, Clone)]
pub struct Settings {
    pub verify_interval: Duration,
    pub survey_max_age: Duration,
    pub record_max_wait: Duration,
    pub retry_base: Duration,
    pub retry_max: Duration,
    pub recheck_after_write: Duration,
    pub snapshot_trust: Duration,
    pub served_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            verify_interval: VERIFY_INTERVAL,
            survey_max_age: SURVEY_MAX_AGE,
            record_max_wait: RECORD_MAX_WAIT,
            retry_base: RETRY_BASE,
            retry_max: RETRY_MAX,
            recheck_after_write: RECHECK_AFTER_WRITE,
            snapshot_trust: SNAPSHOT_TRUST,
            served_wait: SERVED_WAIT,
        }
    }
}

/// The context of both zone controllers: the shared [`Context`], the
/// BindZone and DNSRecord caches, and the in-memory server state.
pub struct ZoneContext {
    pub base: Arc<Context>,
    pub zones: Store<BindZone>,
    pub records: Store<DNSRecord>,
    pub state: state::ServerState,
    pub settings: Settings,
    /// The one port to the BIND servers ([`server::port`]).
    pub servers: Arc<dyn server::port::ZoneServers>,
    /// Group commit of zone operations per pod ([`server::batch`]).
    pub batcher: Arc<server::batch::Batcher>,
    /// Namespace labels for `spec.recordsFrom` selectors (started on use).
    pub namespaces: namespaces::NamespaceWatch,
    /// Wakes a zone's reconcile (e.g. once its secondaries serve it).
    pub wake:
        futures::channel::mpsc::UnboundedSender<kube::runtime::reflector::ObjectRef<BindZone>>,
}

impl ZoneContext {
    /// A pod to run zone operations on.
    pub fn target<'a>(&'a self, pod: &'a crate::controller::exec::PodRef) -> server::Target<'a> {
        server::Target::new(&self.servers, &self.batcher, pod)
    }
}
