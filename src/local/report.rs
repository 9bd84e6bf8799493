//! The status of a local session as data: which pods serve DNS where
//! ([`PodEndpoint`], the runtime's own pod entries), how every BindCluster,
//! BindTSIGKey, BindZone and DNSRecord stands ([`ObjectStatus`], read from
//! the objects' status), the bad manifests, and whether everything has
//! settled ([`Snapshot::converged`]); plus the `--once` verdict.
//!
//! # Converged
//! A snapshot is converged when no sync with the manifest directory is
//! pending and every object has *settled*: it is not being deleted, its
//! controller has observed its current generation (`status.observedGeneration`,
//! or the Ready condition's, >= `metadata.generation`), and it is Ready or in
//! a terminal error. Terminal errors are: phase `Error`, or phase `Pending`
//! with a reason [`crate::api::CONDITION_REASONS`] lists as a failure (no
//! guessing from its name) such as a zone that
//! is not found (BindZone, DNSRecord: every manifest is loaded up front, so
//! what is missing stays missing); a `False` Ready or ConfigApplied
//! condition with a failure reason (BindCluster, BindTSIGKey); a bad
//! manifest (reason [`REASON_INVALID_MANIFEST`]) or a refused write
//! ([`REASON_APPLY_FAILED`]). Anything else (no status yet, Pending,
//! Propagating, ...) is still moving. The session adds what rows cannot
//! show: every pod must serve what it should ([`Snapshot::waiting_for`]).
//! `ready` is separate: converged with a broken file is converged, not
//! ready.
//!
//! # Consistent
//! A row never contradicts itself or the pod table: a Ready status of a
//! generation its controller has not handled yet, a zone waiting for a
//! primary the table shows ready, a cluster Ready beside a pod that is not
//! (or the reverse) are shown as Pending / [`REASON_RECONCILING`], and are
//! not settled.
//!
//! Pure apart from reading objects ([`observe_memapi`] from the in-memory
//! store, [`observe`] through a client); writes nothing anywhere. Rendering
//! and the status file are in `render`.

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::manifests::{ManifestError, ManifestKind, Problem};
use super::memapi::MemApi;
pub use super::runtime::{PodEndpoint, PodRole};
use crate::api::{
    CONDITION_CONFIG_APPLIED, CONDITION_READY, CONDITION_WARNING, Phase, REASON_PODS_NOT_READY,
    REASON_PRIMARY_NOT_READY, REASON_PRIMARY_REBUILDING, STATUS_TRUE, is_terminal_failure,
};

/// Reason of a row that stands for a bad manifest.
pub const REASON_INVALID_MANIFEST: &str = "InvalidManifest";
/// Reason of a row for a document the API server refused to apply/delete.
pub const REASON_APPLY_FAILED: &str = "ApplyFailed";
/// Exit code of `--once`: every object is Ready.
pub const EXIT_READY: u8 = 0;
/// Exit code of `--once`: converged, but some object is not Ready.
pub const EXIT_NOT_READY: u8 = 1;
/// Exit code of `--once`: gave up before everything settled.
pub const EXIT_NOT_CONVERGED: u8 = 2;

/// The kinds with a status worth reporting, in report order.
const REPORTED_KINDS: [ManifestKind; 4] = [
    ManifestKind::BindCluster,
    ManifestKind::BindTSIGKey,
    ManifestKind::BindZone,
    ManifestKind::DNSRecord,
];
/// Phase shown for an object whose deletion waits for its finalizer.
const PHASE_DELETING: &str = "Deleting";
/// Reason of a row whose status is older than what can be seen elsewhere
/// (a generation not yet handled, a pod that changed since): its controller
/// has work left, so the row says so rather than repeat the stale status.
pub const REASON_RECONCILING: &str = "Reconciling";

/// One row of the objects table / `status.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ObjectStatus {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub ready: bool,
    pub phase: String,
    pub reason: String,
    pub message: String,
    /// Ready or terminally failed at the current generation (see the
    /// module doc); not part of the JSON shape.
    #[serde(skip)]
    pub settled: bool,
}

/// Everything a session reports at one moment.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Nothing more will happen on its own: the directory is applied, every
    /// object has settled (Ready or failed for good) and every pod serves
    /// what it should. Says nothing about success: see `ready`.
    pub converged: bool,
    /// Every object is Ready and every pod is ready.
    #[serde(default)]
    pub ready: bool,
    pub pods: Vec<PodEndpoint>,
    pub objects: Vec<ObjectStatus>,
    /// What convergence still waits for beyond the rows (e.g. a secondary
    /// that does not yet serve a zone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<String>,
}

/// One condition as far as the report cares.
struct Cond<'a> {
    status: &'a str,
    reason: &'a str,
    message: &'a str,
    observed_generation: Option<i64>,
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<Cond<'a>> {
    let c = object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
    let s = |f: &str| c.get(f).and_then(Value::as_str).unwrap_or_default();
    Some(Cond {
        status: s("status"),
        reason: s("reason"),
        message: s("message"),
        observed_generation: c.get("observedGeneration").and_then(Value::as_i64),
    })
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The row for one stored object of a reported kind.
pub fn classify(kind: ManifestKind, object: &Value) -> ObjectStatus {
    let ready_cond = condition(object, CONDITION_READY);
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let observed = object
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .or(ready_cond.as_ref().and_then(|c| c.observed_generation))
        .is_some_and(|g| g >= generation);
    let deleting = object.pointer("/metadata/deletionTimestamp").is_some();

    let (phase, reason, message, failed) = match kind {
        ManifestKind::BindZone | ManifestKind::DNSRecord => {
            let phase = match text(object, "/status/phase") {
                "" => Phase::Pending.as_str(),
                p => p,
            };
            let (cond_reason, cond_message) = ready_cond
                .as_ref()
                .map(|c| (c.reason, c.message))
                .unwrap_or_default();
            let or = |own: &'static str, fallback: &str| match text(object, own) {
                "" => fallback.to_owned(),
                s => s.to_owned(),
            };
            let reason = or("/status/reason", cond_reason);
            let failed = phase == Phase::Error.as_str()
                || (phase != Phase::Ready.as_str() && is_terminal_failure(&reason));
            (
                phase.to_owned(),
                reason,
                or("/status/message", cond_message),
                failed,
            )
        }
        _ => {
            // Conditions that must all be True, most telling first.
            let wanted: &[&str] = if kind == ManifestKind::BindCluster {
                &[CONDITION_CONFIG_APPLIED, CONDITION_READY]
            } else {
                &[CONDITION_READY]
            };
            let conds: Vec<Option<Cond>> = wanted.iter().map(|t| condition(object, t)).collect();
            let blocking = conds
                .iter()
                .flatten()
                .find(|c| c.status != STATUS_TRUE && is_terminal_failure(c.reason))
                .or_else(|| conds.iter().flatten().find(|c| c.status != STATUS_TRUE));
            let all_true = conds
                .iter()
                .all(|c| c.as_ref().is_some_and(|c| c.status == STATUS_TRUE));
            let failed =
                blocking.is_some_and(|c| c.status != "Unknown" && is_terminal_failure(c.reason));
            let phase = if all_true {
                Phase::Ready
            } else if failed {
                Phase::Error
            } else {
                Phase::Pending
            };
            let shown = blocking.or(ready_cond.as_ref());
            (
                phase.as_str().to_owned(),
                shown.map(|c| c.reason.to_owned()).unwrap_or_default(),
                shown.map(|c| c.message.to_owned()).unwrap_or_default(),
                failed,
            )
        }
    };
    let status_ready = phase == Phase::Ready.as_str();
    // A Ready object with a warning (weak but valid input) shows it.
    let (reason, message) = match condition(object, CONDITION_WARNING) {
        Some(w) if status_ready && w.status == STATUS_TRUE => {
            (w.reason.to_owned(), format!("warning: {}", w.message))
        }
        _ => (reason, message),
    };
    if status_ready && !observed && !deleting {
        // A Ready status of an older generation: the row must not say
        // Ready while READY says no.
        return ObjectStatus {
            kind: kind.as_str().to_owned(),
            namespace: text(object, "/metadata/namespace").to_owned(),
            name: text(object, "/metadata/name").to_owned(),
            ready: false,
            phase: Phase::Pending.as_str().to_owned(),
            reason: REASON_RECONCILING.to_owned(),
            message: format!("generation {generation} is not yet handled by its controller"),
            settled: false,
        };
    }
    ObjectStatus {
        kind: kind.as_str().to_owned(),
        namespace: text(object, "/metadata/namespace").to_owned(),
        name: text(object, "/metadata/name").to_owned(),
        ready: status_ready && observed && !deleting,
        phase: if deleting {
            PHASE_DELETING.to_owned()
        } else {
            phase
        },
        reason,
        message,
        settled: observed && !deleting && (status_ready || failed),
    }
}

/// Rows for every reported object in the in-memory store (no requests).
pub fn observe_memapi(api: &MemApi) -> Vec<ObjectStatus> {
    REPORTED_KINDS
        .into_iter()
        .flat_map(|kind| {
            let resource = kind.api_resource();
            api.raw_list(&resource.api_version, &resource.plural)
                .into_iter()
                .map(move |object| classify(kind, &object))
        })
        .collect()
}

/// Rows for every reported object, listed through `client` (all namespaces).
pub async fn observe(client: &Client) -> Result<Vec<ObjectStatus>, kube::Error> {
    let mut rows = Vec::new();
    for kind in REPORTED_KINDS {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
        for object in api.list(&ListParams::default()).await?.items {
            let value = serde_json::to_value(&object).expect("objects serialise to JSON");
            rows.push(classify(kind, &value));
        }
    }
    Ok(rows)
}

/// The row for bad manifests that name `kind`/`namespace`/`name`.
fn manifest_error_row(errors: &[&ManifestError]) -> ObjectStatus {
    let first = errors[0];
    ObjectStatus {
        kind: first.kind.clone().unwrap_or_default(),
        namespace: first.namespace.clone().unwrap_or_default(),
        name: first.name.clone().unwrap_or_default(),
        ready: false,
        phase: Phase::Error.as_str().to_owned(),
        reason: if first.problem == Problem::Rejected {
            REASON_APPLY_FAILED
        } else {
            REASON_INVALID_MANIFEST
        }
        .to_owned(),
        message: errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
        settled: true,
    }
}

fn kind_rank(kind: &str) -> usize {
    REPORTED_KINDS
        .iter()
        .chain(ManifestKind::ALL.iter())
        .position(|k| k.as_str() == kind)
        .unwrap_or(usize::MAX)
}

/// Builds the snapshot: object rows with the bad manifests merged in (an
/// error about an existing object replaces its row: the directory's version
/// of it is not what runs), pods and rows in a stable order.
pub fn build_snapshot(
    mut objects: Vec<ObjectStatus>,
    pods: &[PodEndpoint],
    errors: &[ManifestError],
    sync_pending: bool,
) -> Snapshot {
    let mut named: Vec<(String, String, String, Vec<&ManifestError>)> = Vec::new();
    let mut unnamed = Vec::new();
    for e in errors {
        let Some(name) = e.name.clone() else {
            unnamed.push(manifest_error_row(&[e]));
            continue;
        };
        let kind = e.kind.clone().unwrap_or_default();
        let ns = e.namespace.clone().unwrap_or_default();
        match named
            .iter_mut()
            .find(|(k, n, m, _)| *k == kind && *n == ns && *m == name)
        {
            Some((_, _, _, list)) => list.push(e),
            None => named.push((kind, ns, name, vec![e])),
        }
    }
    for (kind, ns, name, list) in named {
        let row = manifest_error_row(&list);
        match objects
            .iter_mut()
            .find(|o| o.kind == kind && o.namespace == ns && o.name == name)
        {
            Some(existing) => *existing = row,
            None => objects.push(row),
        }
    }
    objects.extend(unnamed);
    // Stable: unnamed errors keep their directory order.
    objects.sort_by(|a, b| {
        (kind_rank(&a.kind), &a.namespace, &a.name).cmp(&(
            kind_rank(&b.kind),
            &b.namespace,
            &b.name,
        ))
    });

    let mut pods = pods.to_vec();
    pods.sort_by(|a, b| {
        // By ordinal, so `x-10` sorts after `x-2`.
        (&a.namespace, &a.cluster, a.ordinal, &a.name).cmp(&(
            &b.namespace,
            &b.cluster,
            b.ordinal,
            &b.name,
        ))
    });
    for o in &mut objects {
        if let Some(why) = contradicted_by_pods(o, &pods) {
            o.ready = false;
            o.settled = false;
            o.phase = Phase::Pending.as_str().to_owned();
            o.reason = REASON_RECONCILING.to_owned();
            o.message = why;
        }
    }
    Snapshot {
        converged: !sync_pending && objects.iter().all(|o| o.settled),
        ready: objects.iter().all(|o| o.ready) && pods.iter().all(|p| p.ready),
        pods,
        objects,
        waiting_for: Vec::new(),
    }
}

/// Why a row's status is older than the pod table beside it, if it is: a
/// controller reads pods from the API after the runtime saw them change, so
/// for a moment the two disagree. The row then says that its controller has
/// yet to catch up, instead of contradicting the table.
fn contradicted_by_pods(o: &ObjectStatus, pods: &[PodEndpoint]) -> Option<String> {
    if o.kind == ManifestKind::BindZone.as_str()
        && (o.reason == REASON_PRIMARY_NOT_READY || o.reason == REASON_PRIMARY_REBUILDING)
    {
        // "pod <name> of BindCluster <cluster> is not Ready"
        let pod = o.message.strip_prefix("pod ")?.split_whitespace().next()?;
        let p = pods
            .iter()
            .find(|p| p.namespace == o.namespace && p.name == pod && p.ready)?;
        return Some(format!(
            "pod {} is ready now; waiting for the zone to be reconciled",
            p.name
        ));
    }
    if o.kind == ManifestKind::BindCluster.as_str() && o.phase != PHASE_DELETING {
        let mine: Vec<&PodEndpoint> = pods
            .iter()
            .filter(|p| p.namespace == o.namespace && p.cluster == o.name)
            .collect();
        if mine.is_empty() {
            return None;
        }
        if o.ready
            && let Some(p) = mine.iter().find(|p| !p.ready)
        {
            return Some(format!(
                "pod {} is not ready; waiting for the cluster status to follow",
                p.name
            ));
        }
        if o.reason == REASON_PODS_NOT_READY && mine.iter().all(|p| p.ready) {
            return Some(format!(
                "all {} pods are ready now; waiting for the cluster status to follow",
                mine.len()
            ));
        }
    }
    None
}

impl Snapshot {
    /// Not converged until every entry of `waiting` is done (see
    /// [`Snapshot::waiting_for`]).
    pub fn waiting_for(mut self, waiting: Vec<String>) -> Self {
        if !waiting.is_empty() {
            self.converged = false;
        }
        self.waiting_for = waiting;
        self
    }
}

/// The verdict of `--once`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnceOutcome {
    /// [`EXIT_READY`], [`EXIT_NOT_READY`] or [`EXIT_NOT_CONVERGED`].
    pub code: u8,
    pub converged: bool,
    /// Number of objects (rows) judged.
    pub total: usize,
    /// The rows that are not Ready.
    pub failing: Vec<ObjectStatus>,
}

impl Snapshot {
    /// Exit code and failing rows for `--once`: 0 only when converged and
    /// every object is Ready.
    pub fn once_outcome(&self) -> OnceOutcome {
        let failing: Vec<ObjectStatus> =
            self.objects.iter().filter(|o| !o.ready).cloned().collect();
        let code = if !self.converged {
            EXIT_NOT_CONVERGED
        } else if failing.is_empty() {
            EXIT_READY
        } else {
            EXIT_NOT_READY
        };
        OnceOutcome {
            code,
            converged: self.converged,
            total: self.objects.len(),
            failing,
        }
    }
}

impl OnceOutcome {
    pub fn exit_code(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(self.code)
    }

    /// What to print when `--once` ends: a verdict line, then one line per
    /// object that is not Ready.
    pub fn summary(&self) -> String {
        let mut out = match (self.converged, self.failing.len()) {
            (true, 0) => format!("all {} objects are Ready\n", self.total),
            (true, n) => format!("{n} of {} objects are not Ready:\n", self.total),
            (false, n) => format!(
                "did not converge: {n} of {} objects are not Ready:\n",
                self.total
            ),
        };
        for o in &self.failing {
            let who = match (o.kind.is_empty(), o.namespace.is_empty()) {
                (true, _) => "manifest".to_owned(),
                (false, true) => format!("{} {}", o.kind, o.name),
                (false, false) => format!("{} {}/{}", o.kind, o.namespace, o.name),
            };
            let mut line = format!("  {who}: {}", o.phase);
            if !o.reason.is_empty() {
                line.push_str(&format!(" ({})", o.reason));
            }
            if !o.message.is_empty() {
                line.push_str(&format!(": {}", o.message));
            }
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}
