//! The plan step: the zone's owned RRsets (its apex NS, `spec.records`,
//! every valid DNSRecord naming it), the applied annotation they want, the
//! catalog the zone belongs to, and whether the plan can be written at all
//! (in-zone nameservers need glue). No client, no exec: it reads and
//! updates the zone's plan memo only.

use std::hash::{Hash, Hasher};

use kube::ResourceExt as _;

use crate::api::{BindCluster, BindZone, REASON_MISSING_GLUE};
use crate::bind::ZoneName;
use crate::bind::zone::catalog_zone_for;
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::access::Access;
use crate::controller::zonesync::plan::{Desired, Verdict, ZoneInputs};
use crate::controller::zonesync::state::lock;

use super::super::applied::{Applied, clause_hash};
use super::super::read::ZoneRead;
use super::{Failure, Planned, TYPE_PRIMARY};

/// Plans the zone against the last applied annotation, through the zone's
/// plan memo: only DNSRecords whose object changed since the last plan are
/// validated and decided again.
pub(super) fn plan(ctx: &ZoneContext, read: &ZoneRead) -> Planned {
    let (zone, cfg) = (read.zone.as_ref(), &read.cfg);
    let zname = &cfg.clause.zone;
    let view = cfg.clause.view.as_ref();
    let catalog = match ZoneName::parse(&read.inputs.cluster.catalog_zone_name()) {
        Ok(base) if cfg.catalog => catalog_zone_for(&base, view).ok(),
        _ => None,
    };
    let object_name = zone.name_any();
    let zkey = (zone.namespace().unwrap_or_default(), object_name.clone());
    let memo = ctx.state.plan_memo(&zkey);
    let access = Access::new(zone, zname, read.labels.clone());
    let desired = lock(&memo).plan(
        &ZoneInputs {
            zone: zname,
            object_name: &object_name,
            created: zone.metadata.creation_timestamp.as_ref(),
            default_ttl: cfg.default_ttl,
            nameservers: &cfg.nameservers,
            soa_mname: &cfg.soa.mname,
            inline: &cfg.records,
            applied_inline: &read.applied.inline_keys(),
            access: &access,
        },
        made_under(zone, &read.inputs.cluster),
        &read.records,
    );
    let mut want = Applied {
        type_: Some(TYPE_PRIMARY.into()),
        view: view.map(|v| v.as_str().to_string()),
        clause: Some(clause_hash(&cfg.clause.clause())),
        catalog: catalog.as_ref().map(ZoneName::fqdn),
        inline: Default::default(),
    };
    want.set_inline(&desired.inline_owned);
    let fingerprint = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (desired.fingerprint(), format!("{:?}", cfg.soa)).hash(&mut h);
        h.finish()
    };
    Planned {
        desired,
        want,
        catalog,
        fingerprint,
    }
}

/// What else the plan is made under: the zone object and its cluster, by
/// uid and generation (any spec change of either makes the whole plan
/// again; see [`PlanMemo`](crate::controller::zonesync::plan::PlanMemo)).
fn made_under(zone: &BindZone, cluster: &BindCluster) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        &zone.metadata.uid,
        zone.metadata.generation,
        &cluster.metadata.uid,
        cluster.metadata.generation,
    )
        .hash(&mut h);
    h.finish()
}

/// Why the plan cannot be written, if it cannot: a nameserver inside the
/// zone without an address (BIND will not load the zone without its glue).
pub(super) fn unwritable(desired: &Desired) -> Option<Failure> {
    if desired.missing_glue.is_empty() {
        return None;
    }
    let names: Vec<String> = desired.missing_glue.iter().map(|n| n.fqdn()).collect();
    Some(Failure::Invalid {
        reason: REASON_MISSING_GLUE,
        message: format!(
            "nameserver {} is inside the zone but has no A or AAAA record; add one (spec.records or a DNSRecord)",
            names.join(", ")
        ),
    })
}

/// How long a zone never applied waits for DNSRecords of its plan that do
/// not carry our finalizer yet (a GitOps first apply creates the zone and
/// its records at once; the DNSRecord reconciler adds the finalizers a few
/// seconds later). Created at once, the zone's file would miss them and
/// an UPDATE round per wave of zones would follow; waiting, they come with
/// its creation. Bounded by the zone's age, so a record that never gets a
/// finalizer delays its zone by this much at most.
pub(super) const FIRST_SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// How long a zone never applied waits even with no DNSRecord seen yet: a
/// first apply creates the zone and its records together (often every zone
/// first), and its first reconcile may come before its records reach the
/// cache. Counted from when this process first planned the zone.
const FIRST_SYNC_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// How soon a waiting zone looks again (a finalizer added also wakes it).
const FIRST_SYNC_RECHECK: std::time::Duration = std::time::Duration::from_millis(500);

/// How far past the end of a settle or a quiet a waiting zone looks again,
/// so the look finds it over.
const FIRST_SYNC_PAST: std::time::Duration = std::time::Duration::from_millis(10);

/// How long the DNSRecord controller must have taken in no record of a
/// zone not applied yet before a new zone is created: while a first sync
/// still arrives (a GitOps apply of many zones and their records), every
/// new zone waits for the rest of it, so the whole of it is created in one
/// round of the primary with its records in the zone files, not in waves
/// of zones created bare and filled by UPDATE. They all wait for the same
/// moment (the last arrival plus this), so they reach the primary together.
const FIRST_SYNC_QUIET: std::time::Duration = std::time::Duration::from_millis(400);

/// A zone never applied, younger than [`FIRST_SYNC_WAIT`], with DNSRecords
/// still waiting for their finalizer, or while records of zones not
/// applied yet still arrive ([`FIRST_SYNC_QUIET`]), or first planned less
/// than [`FIRST_SYNC_SETTLE`] ago: look again soon instead of creating it
/// without them.
pub(super) fn awaiting_records(
    ctx: &ZoneContext,
    read: &ZoneRead,
    desired: &Desired,
) -> Option<Failure> {
    if read.applied.type_.is_some() {
        return None;
    }
    let waiting = desired
        .verdicts
        .values()
        .any(|v| matches!(v, Verdict::Unmanaged));
    let age = read
        .zone
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| {
            std::time::Duration::try_from(t.0.duration_until(jiff::Timestamp::now())).ok()
        })?;
    let zkey = (
        read.zone.namespace().unwrap_or_default(),
        read.zone.name_any(),
    );
    let settle_left = FIRST_SYNC_SETTLE
        .checked_sub(ctx.state.seen_for(&zkey))
        .filter(|left| !left.is_zero());
    let settling = settle_left.is_some();
    if (waiting || settling) && age < FIRST_SYNC_WAIT {
        tracing::debug!(namespace = %zkey.0, zone = %zkey.1, waiting, settling, "first sync: zone waits for its records");
        // A zone that settles looks again right when its settle ends (a
        // little past it, so the look finds it over), not a whole recheck
        // later: a zone whose look came just before its settle's end used
        // to wait up to 1.5 s, and a first sync reached the primary as a
        // handful of zones and then the rest half a second later.
        let recheck = match settle_left {
            Some(left) => (left + FIRST_SYNC_PAST).min(FIRST_SYNC_RECHECK),
            None => FIRST_SYNC_RECHECK,
        };
        return Some(Failure::Deferred(recheck));
    }
    let arriving = ctx
        .state
        .since_first_sync_record()
        .and_then(|since| FIRST_SYNC_QUIET.checked_sub(since))
        .filter(|left| !left.is_zero());
    match arriving {
        // Never past the zone's own bound; a little past the quiet's end,
        // so the wake finds it over.
        Some(left) if age < FIRST_SYNC_WAIT => {
            let wait = left.min(FIRST_SYNC_WAIT - age) + FIRST_SYNC_PAST;
            tracing::debug!(namespace = %zkey.0, zone = %zkey.1, wait_ms = wait.as_millis() as u64, "first sync: records still arriving");
            Some(Failure::Deferred(wait))
        }
        _ => None,
    }
}
