//! The Apply path of the BindZone reconciler, a table of contents: read ->
//! validate -> plan and converge (primary or secondary) -> statuses (the
//! zone's and its DNSRecords') -> finalizers of deleted DNSRecords.
//!
//! Touches the cluster (statuses, annotation, finalizers, Events) and, via
//! [`super::primary`] / [`super::secondary`], BIND pods.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;

use crate::api::{BindZone, DNSRecord, Phase, ZoneDnssecStatus};
use crate::bind::ZoneName;
use crate::bind::zone::SecondaryZone;
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::access::record_id;
use crate::controller::zonesync::diff::{Foreign, Served};
use crate::controller::zonesync::plan::{
    Desired, Owner, RrKey, Verdict, has_record_finalizer, key_text,
};
use crate::controller::zonesync::server::ServerError;
use crate::controller::zonesync::writes::{
    RecordReport, ZoneReport, queue_record_reports, release_record_reports, write_applied,
    write_record_reports, write_zone_report, zone_pending_grace,
};
use crate::render::validate::{PrimaryZoneConfig, ZoneConfig};

use super::applied::Applied;
use super::confirm::{self, Confirm, ZoneServed};
use super::primary::{Converged, Failure};
use super::read::{self, Blocked, Inputs, ZoneRead};
use super::{Error, dnssec, dnssec_keys, external_secondaries, primary, secondary};

use crate::api::{
    REASON_CLUSTER_NOT_FOUND, REASON_FOREIGN_CONFLICT, REASON_PRIMARY_REBUILDING,
    REASON_SECONDARY_ZONE, REASON_SERVED, REASON_ZONE_FAILED, is_terminal_failure,
};
use crate::controller::error::backoff;

/// Requeue of a zone waiting for something that does not wake it (a key
/// Secret being generated); pod and cluster changes wake it sooner.
const WAIT_REQUEUE: Duration = Duration::from_secs(15);

/// Past the end of a Pending grace, so the look then finds it over.
const GRACE_MARGIN: Duration = Duration::from_millis(50);

/// Requeue of a zone named is still signing or unsigning (nothing else
/// wakes it when that finishes).
const DNSSEC_RECHECK: Duration = Duration::from_secs(2);

/// Requeue of a zone waiting for the Namespace watch's first list (the
/// watch also wakes it).
pub(super) const NAMESPACES_RECHECK: Duration = Duration::from_secs(2);

/// Event reason: an owned record set another client changed (or removed)
/// was written back as its object says (an event, never a condition).
const REASON_RRSET_RESTORED: &str = "RRsetRestored";

/// Reconciles a live BindZone.
pub async fn apply(zone: &Arc<BindZone>, ctx: &ZoneContext) -> Result<Action, Error> {
    let records = read::records_of(ctx, zone);
    if let Some(b) = read::duplicate_of(ctx, zone) {
        return blocked(ctx, zone, &records, b).await;
    }
    let inputs = match read::inputs(ctx, zone).await? {
        Ok(i) => i,
        Err(b) => return blocked(ctx, zone, &records, b).await,
    };
    let config = match read::validate(zone, &inputs) {
        Ok(c) => c,
        Err(b) => return blocked(ctx, zone, &records, b).await,
    };
    let applied = applied_of(ctx, zone);
    match config {
        ZoneConfig::Primary(cfg) => {
            let primary = match read::primary(&inputs) {
                Ok(p) => p.clone(),
                Err(b) => return primary_down(ctx, zone, &inputs, &records, b).await,
            };
            let labels = match read::namespace_labels(ctx, zone, &records) {
                None => None,
                Some(Some(l)) => Some(l),
                // The Namespace watch wakes the zone once it has listed.
                Some(None) => return Ok(Action::requeue(NAMESPACES_RECHECK)),
            };
            let kept_keys = dnssec_keys::kept(ctx, zone, &cfg.clause.zone).await?;
            let read = ZoneRead {
                kept_keys,
                labels,
                cfg: dnssec::effective(zone, &cfg),
                zone: zone.clone(),
                inputs,
                primary,
                records,
                applied,
            };
            primary_zone(ctx, &read).await
        }
        ZoneConfig::Secondary(sz) => {
            secondary_zone(ctx, zone, &inputs, &sz, &records, &applied).await
        }
    }
}

/// A primary zone: converge, settle its records, sign, report.
async fn primary_zone(ctx: &ZoneContext, r: &ZoneRead) -> Result<Action, Error> {
    let (zone, records) = (r.zone.as_ref(), r.records.as_slice());
    let zone_ns = zone.namespace().unwrap_or_default();
    let out = primary::converge(ctx, r).await;
    let c = match out.result {
        Ok(c) => c,
        // Nothing written, nothing to report yet.
        Err(Failure::Deferred(wait)) => return Ok(Action::requeue(wait)),
        Err(f) => {
            settle_records(
                ctx,
                &zone_ns,
                &r.cfg.clause.zone,
                records,
                &out.desired,
                None,
                None,
            )
            .await?;
            // The records the plan accepted wait on the zone: when it
            // cannot be written they say why (the rest say their own
            // refusal, written just now).
            let waiting: Vec<Arc<DNSRecord>> = records
                .iter()
                .filter(|r| {
                    matches!(
                        out.desired.verdicts.get(&record_id(&zone_ns, r)),
                        Some(Verdict::Accepted(_))
                    )
                })
                .cloned()
                .collect();
            return not_converged(ctx, zone, &r.cfg, f, &waiting).await;
        }
    };
    let confirm = Confirm {
        zone: r.cfg.clause.zone.clone(),
        secondaries: r
            .inputs
            .pods
            .iter()
            .filter(|p| p.ready && p.pod.name != r.primary.pod.name)
            .map(|p| p.pod.clone())
            .collect(),
        key: r
            .inputs
            .keys
            .transfer_for(r.cfg.clause.view.as_ref())
            .clone(),
        serial: c.served.serial,
    };
    settle_records(
        ctx,
        &zone_ns,
        &r.cfg.clause.zone,
        records,
        &out.desired,
        Some(c.served.as_ref()),
        Some(confirm.clone()),
    )
    .await?;
    let dnssec_state = match signing_state(ctx, r, &c).await {
        Ok(d) => d,
        Err(e) => return failed(ctx, zone, e).await,
    };
    let memory = ctx.state.cluster(&r.inputs.cluster_key);
    let servers = primary::servers(
        &memory,
        &r.cfg.clause.zone,
        &r.primary.pod.name,
        c.served.serial,
        &r.inputs.pods,
    );
    if !c.restored.is_empty() {
        restored(ctx, zone, records, &out.desired, &c.restored).await;
    }
    let (mut report, signing) = served_report(zone, &out.desired, &c, servers, dnssec_state);
    match report.dnssec.as_ref() {
        // Signed: its keys kept where a rebuilt primary gets them back.
        Some(Some(d)) => {
            let target = ctx.target(&r.primary.pod);
            dnssec_keys::keep(ctx, zone, &target, &r.cfg.clause.zone, d).await?;
        }
        // Withdrawn: no key is served any more.
        Some(None) if zone.spec.dnssec_policy.is_none() => dnssec_keys::forget(ctx, zone).await?,
        _ => {}
    }
    let external = &r.cfg.clause.external_secondaries;
    let observed =
        external_secondaries::observe(&r.cfg.clause.zone, external, &r.inputs, c.served.serial)
            .await;
    let lagging = observed.iter().any(|e| !e.caught_up);
    // One that answers with an older serial missed a NOTIFY (it was down
    // when the change was made, and a restarted BIND waits out its refresh
    // timer): repeat it. One that does not answer is not asked again.
    if external_secondaries::answering_behind(&observed) {
        let target = ctx.target(&r.primary.pod);
        if let Err(e) = target
            .notify(&r.cfg.clause.zone, r.cfg.clause.view.as_ref())
            .await
        {
            tracing::warn!(zone = %r.cfg.clause.zone, error = %e, "failed to repeat the NOTIFY for a lagging external secondary");
        }
    }
    report.external_secondaries = Some(observed);
    // Ready at a new generation once every Ready secondary serves it.
    let mut write = true;
    if report.phase == Phase::Ready {
        match confirm::zone_served(ctx, zone, &confirm) {
            ZoneServed::Yes => {}
            ZoneServed::Waiting => write = false,
            ZoneServed::Lagging(message) => {
                report.phase = Phase::Pending;
                report.reason = crate::api::REASON_NOT_SERVED;
                report.message = message;
            }
        }
    }
    if write {
        finish(ctx, zone, &report, &r.applied, &out.applied).await?;
    } else {
        settled(ctx, zone, &r.applied, &out.applied).await?;
    }
    let next_check = if lagging {
        external_secondaries::LAGGING_RECHECK.min(c.next_check)
    } else {
        c.next_check
    };
    Ok(Action::requeue(if signing {
        DNSSEC_RECHECK.min(c.next_check)
    } else if c.wrote {
        ctx.settings.recheck_after_write.min(next_check)
    } else {
        next_check
    }))
}

/// Tells of owned RRsets written back after another client changed them:
/// a Warning Event on the object that owns each (its DNSRecord, or the
/// BindZone for `spec.records`), a log line and the repairs counter, so a
/// user can find the other writer.
async fn restored(
    ctx: &ZoneContext,
    zone: &BindZone,
    records: &[Arc<DNSRecord>],
    desired: &Desired,
    keys: &[RrKey],
) {
    let ns = zone.namespace().unwrap_or_default();
    let zname = &zone.spec.zone_name;
    ctx.base.metrics.rrset_repairs(&ns, zname, keys.len());
    for key in keys {
        let note = format!(
            "RRset {} {} restored: changed by another client",
            key.0.fqdn(),
            key.1
        );
        let owner = desired.rrsets.get(key).map(|w| &w.owner);
        tracing::warn!(namespace = %ns, zone = %zname, rrset = %key_text(key), owner = ?owner.map(ToString::to_string), "owned RRset changed by another client; restored");
        let record = match owner {
            Some(Owner::Record(n)) => records.iter().find(|r| r.name_any() == *n),
            _ => None,
        };
        match record {
            Some(r) => {
                ctx.base
                    .publish_event(
                        r.as_ref(),
                        EventType::Warning,
                        REASON_RRSET_RESTORED,
                        "Repair",
                        note,
                    )
                    .await
            }
            None => {
                ctx.base
                    .publish_event(
                        zone,
                        EventType::Warning,
                        REASON_RRSET_RESTORED,
                        "Repair",
                        note,
                    )
                    .await
            }
        }
    }
}

/// A primary zone that did not converge: a plan that cannot be written, or
/// a policy named refuses (neither heals by itself: wait for a change, and
/// `waiting`, the DNSRecords the plan accepted, say why), or a failed step
/// (reported, then retried with backoff).
async fn not_converged(
    ctx: &ZoneContext,
    zone: &BindZone,
    cfg: &PrimaryZoneConfig,
    failure: Failure,
    waiting: &[Arc<DNSRecord>],
) -> Result<Action, Error> {
    let (reason, message) = match failure {
        Failure::Invalid { reason, message } => (reason, message),
        Failure::Deferred(wait) => return Ok(Action::requeue(wait)),
        Failure::Server(e) => match dnssec::refused(&e.source, cfg) {
            Some(refused) => refused,
            None => {
                // The status says what the server said; the error (log,
                // Event) also names the step.
                write_zone_report(ctx, zone, &server_problem(&e.source)).await?;
                return Err(e.into());
            }
        },
    };
    let b = Blocked {
        reason,
        message,
        permanent: true,
    };
    blocked(ctx, zone, waiting, b).await
}

/// The zone's DNSSEC state: asked of the primary when it was asked anyway,
/// or while the zone is not where its policy wants it yet; else the
/// status's.
async fn signing_state(
    ctx: &ZoneContext,
    r: &ZoneRead,
    c: &Converged,
) -> Result<Option<ZoneDnssecStatus>, ServerError> {
    let (zone, cfg) = (&r.zone, &r.cfg);
    let old = zone.status.as_ref().and_then(|s| s.dnssec.clone());
    let Some(policy) = &cfg.clause.dnssec_policy else {
        return Ok(None);
    };
    let settled = old
        .as_ref()
        .is_some_and(|d| d.policy == policy.as_str() && dnssec::verdict(d).0 == Phase::Ready);
    if !(c.verified || c.wrote || !settled) {
        return Ok(old);
    }
    let target = ctx.target(&r.primary.pod);
    let key = primary::operator_key(zone, &r.inputs, cfg.clause.view.as_ref());
    dnssec::settle(&target, &cfg.clause, policy, key)
        .await
        .map(Some)
}

/// The status of a served primary zone, and whether to look again soon
/// (signing under way, or a withdrawn policy to drop).
fn served_report(
    zone: &BindZone,
    desired: &Desired,
    c: &Converged,
    servers: BTreeMap<String, u32>,
    dnssec_state: Option<ZoneDnssecStatus>,
) -> (ZoneReport, bool) {
    // A removed policy whose keys are gone: drop it from the status, so
    // the next pass drops `insecure` from the clause.
    let withdrawn = zone.spec.dnssec_policy.is_none()
        && dnssec_state
            .as_ref()
            .is_some_and(|d| dnssec::verdict(d).0 == Phase::Ready);
    let signing = dnssec_state
        .as_ref()
        .map(dnssec::verdict)
        .filter(|(p, _, _)| *p != Phase::Ready);
    let soon = signing.is_some() || withdrawn;
    // Bad inline records are reported on the zone; the rest is served.
    let (phase, reason, message) = match (desired.inline_errors.first(), signing) {
        (None, Some(signing)) => signing,
        (None, None) => (Phase::Ready, REASON_SERVED, String::new()),
        (Some((reason, _)), _) => (
            Phase::Error,
            *reason,
            desired
                .inline_errors
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    let report = ZoneReport {
        phase,
        reason,
        message,
        serial: Some(c.served.serial),
        record_count: Some(u32::try_from(desired.rrsets.len()).unwrap_or(u32::MAX)),
        servers: Some(servers),
        dnssec: Some(if withdrawn { None } else { dnssec_state }),
        applied_plan: Some(c.plan.map(super::primary::plan_text)),
        external_secondaries: None,
    };
    (report, soon)
}

/// A converged zone: its status, its applied annotation when it changed,
/// and its failure count reset.
pub(super) async fn finish(
    ctx: &ZoneContext,
    zone: &BindZone,
    report: &ZoneReport,
    applied: &Applied,
    want: &Applied,
) -> Result<(), Error> {
    write_zone_report(ctx, zone, report).await?;
    settled(ctx, zone, applied, want).await
}

/// [`finish`] without the status: its applied annotation when it changed,
/// and its failure count reset.
async fn settled(
    ctx: &ZoneContext,
    zone: &BindZone,
    applied: &Applied,
    want: &Applied,
) -> Result<(), Error> {
    if applied != want {
        record_applied(ctx, zone, want).await?;
    }
    ctx.state.succeeded(&zone_key(zone));
    Ok(())
}

/// A secondary zone: converge on every pod; its DNSRecords cannot be
/// written (the zone is transferred whole from its primaries).
async fn secondary_zone(
    ctx: &ZoneContext,
    zone: &BindZone,
    inputs: &Inputs,
    sz: &SecondaryZone,
    records: &[Arc<DNSRecord>],
    applied: &Applied,
) -> Result<Action, Error> {
    let out = secondary::converge(ctx, zone, inputs, sz, applied).await;
    let reports = records
        .iter()
        .filter(|r| has_record_finalizer(r) && r.metadata.deletion_timestamp.is_none())
        .map(|r| {
            (
                r.clone(),
                RecordReport::Error {
                    reason: REASON_SECONDARY_ZONE,
                    message: format!(
                        "BindZone {} is a secondary zone; its records come from its primaries",
                        zone.name_any()
                    ),
                },
            )
        })
        .collect();
    write_record_reports(ctx, reports).await?;
    let deleting = records
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_some())
        .cloned()
        .collect();
    release_record_reports(ctx, deleting).await?;
    match out.result {
        Ok(s) => {
            let report = ZoneReport {
                phase: Phase::Ready,
                reason: REASON_SERVED,
                message: s.message,
                serial: s.serial,
                record_count: None,
                servers: Some(s.servers),
                dnssec: None,
                applied_plan: None,
                external_secondaries: None,
            };
            finish(ctx, zone, &report, applied, &out.applied).await?;
            Ok(Action::requeue(s.next_check))
        }
        Err(e) => failed(ctx, zone, e).await,
    }
}

/// What was last applied for the zone: what this process wrote (the cache
/// may not show it yet), else the object's annotation.
pub(super) fn applied_of(ctx: &ZoneContext, zone: &BindZone) -> Applied {
    let uid = zone.metadata.uid.as_deref().unwrap_or_default();
    ctx.state
        .applied(&zone_key(zone), uid)
        .and_then(|text| Applied::parse(&text))
        .unwrap_or_else(|| Applied::of(zone))
}

/// Writes the applied annotation and remembers it.
pub(super) async fn record_applied(
    ctx: &ZoneContext,
    zone: &BindZone,
    applied: &Applied,
) -> Result<(), Error> {
    let text = applied.render();
    write_applied(&ctx.base.client, zone, &text).await?;
    let uid = zone.metadata.uid.as_deref().unwrap_or_default();
    ctx.state.set_applied(&zone_key(zone), uid, text);
    Ok(())
}

fn zone_key(zone: &BindZone) -> (String, String) {
    (zone.namespace().unwrap_or_default(), zone.name_any())
}

/// Writes the DNSRecords' statuses from the plan and, when the flush
/// succeeded (`served` is what the primary now holds), releases the
/// finalizers of deleted DNSRecords: their RRsets were in the flush.
pub(super) async fn settle_records(
    ctx: &ZoneContext,
    zone_ns: &str,
    zone: &ZoneName,
    records: &[Arc<DNSRecord>],
    desired: &Desired,
    served: Option<&Served>,
    confirm: Option<Confirm>,
) -> Result<(), Error> {
    let mut reports = Vec::new();
    let mut release = Vec::new();
    let foreign = served.map(|s| Foreign::new(zone, s, desired));
    let hidden = |key| foreign.as_ref().and_then(|f| f.blocker(key));
    for r in records {
        match desired.verdicts.get(&record_id(zone_ns, r)) {
            Some(Verdict::Accepted(key)) => {
                let report = match served {
                    // Ready means a resolver gets it: not while other data
                    // hides it, whatever the primary holds for it.
                    Some(_) if let Some(other) = hidden(key) => RecordReport::Error {
                        reason: REASON_FOREIGN_CONFLICT,
                        message: format!(
                            "{other} is served at or above {} and not written by this operator (another client wrote it); resolvers get it instead of {}. Remove it and the record set is written",
                            key.0.fqdn(),
                            key_text(key)
                        ),
                    },
                    Some(s) if s.holds(key, desired) => RecordReport::Ready(key.clone()),
                    Some(_) => RecordReport::Pending {
                        reason: crate::api::REASON_NOT_SERVED,
                        message: "the primary does not serve the record set yet".into(),
                    },
                    None => RecordReport::Pending {
                        reason: crate::api::REASON_ZONE_NOT_READY,
                        message: format!("waiting for BindZone {}", r.spec.zone_ref),
                    },
                };
                reports.push((r.clone(), report));
            }
            Some(Verdict::Rejected { reason, message }) => reports.push((
                r.clone(),
                RecordReport::Error {
                    reason,
                    message: message.clone(),
                },
            )),
            Some(Verdict::Deleting) if served.is_some() => release.push(r.clone()),
            _ => {}
        }
    }
    // Many are queued, not awaited: the zone's next flush does not wait.
    // Ready ones wait for every secondary to serve them, when the pass
    // knows the secondaries ([`confirm`]); any other report ends a wait.
    let (ready, rest): (Vec<_>, Vec<_>) = reports
        .into_iter()
        .partition(|(_, rep)| confirm.is_some() && matches!(rep, RecordReport::Ready(_)));
    for (r, _) in &rest {
        ctx.state.statuses.cancel_await(r);
    }
    queue_record_reports(ctx, rest).await?;
    if let Some(confirm) = confirm {
        confirm::ready_when_served(ctx, confirm, ready).await?;
    }
    release_record_reports(ctx, release).await?;
    Ok(())
}

/// Reports a failed convergence in the zone's status and returns the
/// error (the guard publishes its Event, `error_policy` backs off).
pub(super) async fn failed(
    ctx: &ZoneContext,
    zone: &BindZone,
    e: ServerError,
) -> Result<Action, Error> {
    write_zone_report(ctx, zone, &server_problem(&e)).await?;
    // The Warning Event is the measuring guard's (`error::measured`).
    Err(Error::Server {
        zone: zone.spec.zone_name.clone(),
        source: e,
    })
}

/// The zone's status after a server failure: Pending while the server
/// cannot be reached or read, else Error.
fn server_problem(e: &ServerError) -> ZoneReport {
    let phase = match e {
        ServerError::Unreachable { .. } | ServerError::Transfer { .. } => Phase::Pending,
        _ => Phase::Error,
    };
    problem(phase, e.category(), e.to_string())
}

/// A zone status that reports a problem and nothing served.
fn problem(phase: Phase, reason: &'static str, message: String) -> ZoneReport {
    ZoneReport {
        phase,
        reason,
        message,
        serial: None,
        record_count: None,
        servers: None,
        dnssec: None,
        applied_plan: None,
        external_secondaries: None,
    }
}

/// The primary pod is not Ready (deleted, restarting, rescheduled). When
/// Ready secondaries serve the zone (its `status.servers` lists them, or
/// their readiness gate says they serve every zone),
/// they still answer every RRset it had, so nothing its users see changed:
/// the zone stays Ready and says the primary is rebuilding
/// ([`REASON_PRIMARY_REBUILDING`]), and its DNSRecords served as specified
/// keep their status. A real cluster showed why: 2,011 records went Ready
/// -> Pending -> Ready on every primary restart (4,022 status writes, the
/// Pending seconds late) while the secondaries answered for all of them.
/// Records not served as specified (new, changed, being deleted) wait, as
/// on any blocked zone. Without such a secondary nothing serves the zone:
/// it is blocked ([`blocked`]).
async fn primary_down(
    ctx: &ZoneContext,
    zone: &BindZone,
    inputs: &Inputs,
    records: &[Arc<DNSRecord>],
    b: Blocked,
) -> Result<Action, Error> {
    let serving = serving_secondaries(ctx, zone, inputs);
    let serial = zone.status.as_ref().and_then(|s| s.serial);
    let (Some(serial), false) = (serial, serving.is_empty()) else {
        return blocked(ctx, zone, records, b).await;
    };
    let report = ZoneReport {
        phase: Phase::Ready,
        reason: REASON_PRIMARY_REBUILDING,
        message: format!(
            "{}; {} still serve{} serial {serial}; the zone is rebuilt on the primary once it is Ready, and changes are written then",
            b.message,
            serving.join(", "),
            if serving.len() == 1 { "s" } else { "" },
        ),
        serial: None,
        record_count: None,
        servers: None,
        dnssec: None,
        applied_plan: None,
        external_secondaries: None,
    };
    write_zone_report(ctx, zone, &report).await?;
    let waiting = records
        .iter()
        .filter(|r| has_record_finalizer(r) && r.metadata.deletion_timestamp.is_none())
        .filter(|r| !served_as_specified(r) && !refused(r))
        .map(|r| {
            (
                r.clone(),
                RecordReport::Pending {
                    reason: crate::api::REASON_ZONE_NOT_READY,
                    message: format!("BindZone {}: {}", zone.name_any(), b.message),
                },
            )
        })
        .collect();
    write_record_reports(ctx, waiting).await?;
    // The primary's return (a pod change) wakes the zone.
    Ok(Action::requeue(WAIT_REQUEUE))
}

/// The Ready secondaries that serve the zone, by name: those its status
/// lists, and (outside views) those whose readiness gate is open: a gate
/// opens once the pod serves every zone of its cluster, and the zone's
/// `status.servers` may not list a secondary yet (it is refreshed by the
/// check a few seconds after a write).
fn serving_secondaries(ctx: &ZoneContext, zone: &BindZone, inputs: &Inputs) -> Vec<String> {
    let Some(status) = zone.status.as_ref() else {
        return Vec::new();
    };
    let gate_open = |p: &crate::controller::zonesync::survey::PodInfo| {
        zone.spec.view.is_none()
            && ctx
                .base
                .stores
                .pods
                .get(&ObjectRef::new(&p.pod.name).within(&p.pod.namespace))
                .is_some_and(|pod| crate::controller::pods::pod_ready(&pod))
    };
    inputs
        .pods
        .iter()
        .filter(|p| p.ordinal != 0 && p.ready)
        .filter(|p| status.servers.contains_key(&p.pod.name) || gate_open(p))
        .map(|p| p.pod.name.clone())
        .collect()
}

/// Whether the record's status says it is served as its spec says now.
fn served_as_specified(r: &DNSRecord) -> bool {
    r.status.as_ref().is_some_and(|s| {
        s.phase == Some(Phase::Ready) && s.observed_generation == r.metadata.generation
    })
}

/// Whether the record's status reports its own refusal (a conflict, a bad
/// value): that stands until its zone can plan again.
fn refused(r: &DNSRecord) -> bool {
    r.status.as_ref().is_some_and(|s| {
        s.phase == Some(Phase::Error) && s.reason.as_deref() != Some(REASON_ZONE_FAILED)
    })
}

/// The zone cannot be written now: say why on it and its DNSRecords.
pub(super) async fn blocked(
    ctx: &ZoneContext,
    zone: &BindZone,
    records: &[Arc<DNSRecord>],
    b: Blocked,
) -> Result<Action, Error> {
    tracing::debug!(zone = %zone.name_any(), reason = b.reason, message = %b.message, "zone blocked");
    // A failure only a change can fix (a duplicate, a missing key) is an
    // Error, and its records say the zone failed rather than "not ready":
    // nothing here is on its way.
    let failed = b.permanent || is_terminal_failure(b.reason);
    let phase = if failed { Phase::Error } else { Phase::Pending };
    let report = problem(phase, b.reason, b.message.clone());
    if write_zone_report(ctx, zone, &report).await? && failed {
        ctx.base
            .publish_event(
                zone,
                EventType::Warning,
                b.reason,
                "Validate",
                b.message.clone(),
            )
            .await;
    }
    let mut reports = Vec::new();
    let mut release = Vec::new();
    for r in records.iter().filter(|r| has_record_finalizer(r)) {
        if r.metadata.deletion_timestamp.is_some() {
            // No cluster: nothing of the record is served anywhere.
            if b.reason == REASON_CLUSTER_NOT_FOUND {
                release.push(r.clone());
            }
            continue;
        }
        if !refused(r) {
            let message = format!("BindZone {}: {}", zone.name_any(), b.message);
            reports.push((
                r.clone(),
                if failed {
                    RecordReport::Error {
                        reason: REASON_ZONE_FAILED,
                        message,
                    }
                } else {
                    RecordReport::Pending {
                        reason: crate::api::REASON_ZONE_NOT_READY,
                        message,
                    }
                },
            ));
        }
    }
    write_record_reports(ctx, reports).await?;
    release_record_reports(ctx, release).await?;
    Ok(if b.permanent {
        Action::await_change()
    } else if failed {
        // What it waits for (a key, a duplicate's removal) wakes it
        // through the pod poller; the retry is a fallback and backs off.
        let failures = ctx.state.failed(&zone_key(zone));
        Action::requeue(
            backoff(failures, ctx.settings.retry_base, ctx.settings.retry_max).max(WAIT_REQUEUE),
        )
    } else {
        // A young zone's first Pending may wait (`zone_pending_grace`):
        // look again when that ends, so a zone still waiting says so.
        let grace = zone_pending_grace(zone, ctx.settings.record_max_wait);
        Action::requeue(grace.map_or(WAIT_REQUEUE, |g| (g + GRACE_MARGIN).min(WAIT_REQUEUE)))
    })
}
