//! Pieces shared by the four kinds: the API group constants, references to
//! Secrets, the phase enum, condition type/reason names and the helper that
//! sets a condition without moving `lastTransitionTime` unless the status flips.
//!
//! Pure data and pure functions: nothing here touches the cluster. It must never
//! hold or print secret material (a [`SecretKeyRef`] names a Secret, it does not
//! carry its contents).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of every kind in this crate.
pub const GROUP: &str = "bind.unkin.net";
/// API version of every kind in this crate.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "bind.unkin.net/v1alpha1";

/// Condition type: the object is fully reconciled and serving.
pub const CONDITION_READY: &str = "Ready";
/// Condition type on BindCluster: every pod loaded the wanted config.
pub const CONDITION_CONFIG_APPLIED: &str = "ConfigApplied";

// Condition reasons. Every reason a controller writes into a condition (or
// a BindZone/DNSRecord `status.reason`) is a constant here and is listed in
// [`CONDITION_REASONS`] with what it means.

/// ConfigApplied reason: every pod runs the wanted config.
pub const REASON_APPLIED: &str = "Applied";
/// ConfigApplied reason: some pod is not ready or its mount is not yet current.
pub const REASON_PROPAGATING: &str = "Propagating";
/// ConfigApplied reason: `rndc reconfig` failed (message has checkconf file:line).
pub const REASON_RECONFIG_FAILED: &str = "ReconfigFailed";
/// ConfigApplied reason: running a command in a pod failed.
pub const REASON_EXEC_FAILED: &str = "ExecFailed";
/// BindCluster Ready reason: every replica is ready and runs the wanted config.
pub const REASON_READY: &str = "Ready";
/// BindCluster Ready reason: fewer ready pods than replicas.
pub const REASON_PODS_NOT_READY: &str = "PodsNotReady";
/// BindCluster Ready reason: a pod's named keeps exiting or its container
/// cannot start; the message names the pod, its restarts and named's last
/// error line.
pub const REASON_PODS_FAILING: &str = "PodsFailing";
/// BindCluster Ready reason: pods are up but some have not loaded the
/// wanted config (ConfigApplied says why).
pub const REASON_CONFIG_NOT_APPLIED: &str = "ConfigNotApplied";
/// BindCluster Ready reason: the spec (or a key it loads) cannot become a
/// BIND config; the last good config keeps serving.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// BindCluster Ready reason: the API server refused a child as invalid
/// (422, e.g. an immutable StatefulSet field changed).
pub const REASON_APPLY_REJECTED: &str = "ApplyRejected";
/// BindCluster Ready reason: the rndc Secret lacks usable key material.
pub const REASON_INVALID_RNDC_SECRET: &str = "InvalidRndcSecret";
/// BindCluster Ready reason: the generated transfer key Secret lacks usable
/// key material.
pub const REASON_INVALID_TRANSFER_SECRET: &str = "InvalidTransferSecret";
/// BindTSIGKey Ready reason: the key material is in its Secret.
pub const REASON_KEY_AVAILABLE: &str = "KeyAvailable";
/// Key reason (BindTSIGKey, or a BindCluster loading it): its Secret does
/// not exist.
pub const REASON_SECRET_NOT_FOUND: &str = "SecretNotFound";
/// Key reason (a BindCluster or BindZone using a generated key): the
/// Secret the operator generates for the key does not exist yet (the
/// BindTSIGKey's reconcile is about to create it).
pub const REASON_KEY_PENDING: &str = "KeyPending";
/// Key reason: the Secret lacks the data key the ref names.
pub const REASON_SECRET_KEY_MISSING: &str = "SecretKeyMissing";
/// Key reason: the Secret's value is not base64 key material.
pub const REASON_INVALID_SECRET: &str = "InvalidSecret";
/// Key reason: the key's name is not a valid BIND key name.
pub const REASON_INVALID_KEY_NAME: &str = "InvalidKeyName";
/// BindTSIGKey Ready reason: the Secret to generate into exists and is
/// not the key's own.
pub const REASON_SECRET_CONFLICT: &str = "SecretConflict";
/// DNSRecord reason: a zone-qualified apex NS name slipped past CEL.
pub const REASON_APEX_NS_UNSUPPORTED: &str = "ApexNSUnsupported";
/// DNSRecord reason: no BindZone of that name exists.
pub const REASON_ZONE_NOT_FOUND: &str = "ZoneNotFound";
/// Condition reason while an object is served as specified.
pub const REASON_SERVED: &str = "Served";
/// DNSRecord / zone status reason: the record set is invalid for BIND.
pub const REASON_INVALID_RECORD: &str = "InvalidRecord";
/// Reason: another claimant owns the same (name, type) RRset.
pub const REASON_CONFLICT: &str = "Conflict";
/// Reason: a CNAME would share its name with another type.
pub const REASON_CNAME_CONFLICT: &str = "CNAMEConflict";
/// Reason: more than 100 values at one name and type.
pub const REASON_TOO_MANY_VALUES: &str = "TooManyValues";
/// Reason: the BindCluster the zone names does not exist (yet).
pub const REASON_CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
/// Reason: the cluster's primary pod is missing or not Ready.
pub const REASON_PRIMARY_NOT_READY: &str = "PrimaryNotReady";
/// Zone reason (Ready stays True): the primary pod is not Ready (restarting,
/// rescheduled) while Ready secondaries keep serving the zone; changes are
/// written once the primary is back and the zone rebuilt there. Its
/// DNSRecords keep their Ready status: their RRsets are still answered.
pub const REASON_PRIMARY_REBUILDING: &str = "PrimaryRebuilding";
/// Reason: another BindZone already serves this zone on the cluster.
pub const REASON_DUPLICATE_ZONE: &str = "DuplicateZone";
/// Reason: an in-zone nameserver has no address in the plan.
pub const REASON_MISSING_GLUE: &str = "MissingGlue";
/// DNSRecord reason: its zone is a secondary zone (not writable).
pub const REASON_SECONDARY_ZONE: &str = "SecondaryZone";
/// DNSRecord reason: accepted, but the primary does not serve it yet.
pub const REASON_NOT_SERVED: &str = "NotServed";
/// DNSRecord reason: its BindZone is not Ready yet.
pub const REASON_ZONE_NOT_READY: &str = "ZoneNotReady";
/// Reason: the zone has a dnssec-policy and the primary does not serve it
/// signed yet.
pub const REASON_SIGNING: &str = "Signing";
/// Reason: the zone's dnssec-policy was removed (or is `insecure`) and
/// named is still withdrawing its DNSKEYs.
pub const REASON_UNSIGNING: &str = "Unsigning";
/// Reason: named refused the zone's dnssec-policy (e.g. not defined).
pub const REASON_DNSSEC_POLICY_REFUSED: &str = "DnssecPolicyRefused";
/// DNSRecord reason: its BindZone failed (the zone's status says why); the
/// record waits for the zone to be fixed.
pub const REASON_ZONE_FAILED: &str = "ZoneFailed";
/// Zone reason: a key the zone names (updateKeyRef, a primary's keyRef) is
/// not a BindTSIGKey its cluster loads.
pub const REASON_KEY_NOT_FOUND: &str = "KeyNotFound";
/// Zone reason: a key the zone names exists but failed (its own status
/// says why: bad Secret, duplicate or reserved keyName).
pub const REASON_KEY_FAILED: &str = "KeyFailed";
/// Zone reason: the cluster has not generated its transfer key yet.
pub const REASON_TRANSFER_KEY_NOT_READY: &str = "TransferKeyNotReady";
/// Zone reason: the cluster's generated transfer key Secret is unusable.
pub const REASON_TRANSFER_KEY_INVALID: &str = "TransferKeyInvalid";
/// BindTSIGKey reason: another key loaded by the same cluster has the same
/// keyName (every party of the clash shows it).
pub const REASON_DUPLICATE_KEY_NAME: &str = "DuplicateKeyName";
/// BindTSIGKey reason: the keyName is one the operator uses itself (the
/// rndc key, the generated transfer key).
pub const REASON_RESERVED_KEY_NAME: &str = "ReservedKeyName";
/// BindZone reason: the zoneName is the cluster's catalog zone.
pub const REASON_RESERVED_ZONE_NAME: &str = "ReservedZoneName";
/// Reason: the record set lies at or below a delegation (an NS RRset below
/// the apex), so resolvers get a referral instead of it.
pub const REASON_OCCLUDED: &str = "Occluded";
/// Reason: data another client wrote (a CNAME at the name, a delegation
/// above it) hides the record set from resolvers.
pub const REASON_FOREIGN_CONFLICT: &str = "ForeignConflict";
/// Reason: the zone's `spec.view` names no view of its cluster (the view
/// was renamed or removed), so no server serves the zone there.
pub const REASON_VIEW_NOT_FOUND: &str = "ViewNotFound";
/// Reason: an NS record set below the apex would hide record sets that
/// are already served under it.
pub const REASON_DELEGATION_CONFLICT: &str = "DelegationConflict";
/// DNSRecord reason: the BindZone it names (in another namespace, or one
/// that restricts its own) grants its namespace no right to this name and
/// type (`BindZone.spec.recordsFrom`); nothing of it is served.
pub const REASON_NOT_ALLOWED: &str = "NotAllowed";
/// Condition type for weak but valid input (status True while it applies).
pub const CONDITION_WARNING: &str = "Warning";
/// Warning reason: a TSIG key shorter than its algorithm's output, or
/// hmac-md5 / hmac-sha1.
pub const REASON_WEAK_KEY: &str = "WeakKey";
/// Warning reason: a zone at a top-level domain or public suffix.
pub const REASON_PUBLIC_SUFFIX: &str = "PublicSuffix";
/// Warning reason: a target that looks absolute but has no trailing dot
/// (it is read relative to the zone).
pub const REASON_RELATIVE_TARGET: &str = "RelativeTarget";
/// BindCluster reason: an external BIND (spec.external) answers for the zones
/// it is asked about; the operator deploys nothing for it.
pub const REASON_EXTERNAL: &str = "External";
/// BindZone reason: the external primary's rndc control channel refused or
/// failed a zone command (the message carries its answer).
pub const REASON_RNDC_FAILED: &str = "RndcFailed";

/// What a condition reason says about its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasonKind {
    /// Where it should be.
    Done,
    /// On its way: waiting changes it without anyone acting.
    InProgress,
    /// Stuck until the object, or what it names, changes.
    Failed,
}

/// Every condition reason the controllers set, with its [`ReasonKind`]: the
/// one list readers of status (the local report's convergence verdict)
/// consult instead of guessing from a reason's name. A controller adding a
/// reason adds it here.
pub const CONDITION_REASONS: &[(&str, ReasonKind)] = &[
    (REASON_APPLIED, ReasonKind::Done),
    (REASON_READY, ReasonKind::Done),
    (REASON_KEY_AVAILABLE, ReasonKind::Done),
    (REASON_PROPAGATING, ReasonKind::InProgress),
    (REASON_PODS_NOT_READY, ReasonKind::InProgress),
    // A crash loop can end on its own (a node problem, a killed process);
    // the message says what to look at.
    (REASON_PODS_FAILING, ReasonKind::InProgress),
    (REASON_CONFIG_NOT_APPLIED, ReasonKind::InProgress),
    (REASON_RECONFIG_FAILED, ReasonKind::Failed),
    (REASON_EXEC_FAILED, ReasonKind::Failed),
    (REASON_INVALID_SPEC, ReasonKind::Failed),
    (REASON_APPLY_REJECTED, ReasonKind::Failed),
    (REASON_INVALID_RNDC_SECRET, ReasonKind::Failed),
    (REASON_INVALID_TRANSFER_SECRET, ReasonKind::Failed),
    (REASON_SECRET_NOT_FOUND, ReasonKind::Failed),
    (REASON_KEY_PENDING, ReasonKind::InProgress),
    (REASON_SECRET_KEY_MISSING, ReasonKind::Failed),
    (REASON_INVALID_SECRET, ReasonKind::Failed),
    (REASON_INVALID_KEY_NAME, ReasonKind::Failed),
    (REASON_SECRET_CONFLICT, ReasonKind::Failed),
    (REASON_APEX_NS_UNSUPPORTED, ReasonKind::Failed),
    (REASON_ZONE_NOT_FOUND, ReasonKind::Failed),
    (REASON_SERVED, ReasonKind::Done),
    (REASON_PRIMARY_NOT_READY, ReasonKind::InProgress),
    (REASON_PRIMARY_REBUILDING, ReasonKind::InProgress),
    (REASON_ZONE_NOT_READY, ReasonKind::InProgress),
    (REASON_NOT_SERVED, ReasonKind::InProgress),
    (REASON_CLUSTER_NOT_FOUND, ReasonKind::Failed),
    (REASON_DUPLICATE_ZONE, ReasonKind::Failed),
    (REASON_MISSING_GLUE, ReasonKind::Failed),
    (REASON_INVALID_RECORD, ReasonKind::Failed),
    (REASON_CONFLICT, ReasonKind::Failed),
    (REASON_CNAME_CONFLICT, ReasonKind::Failed),
    (REASON_TOO_MANY_VALUES, ReasonKind::Failed),
    (REASON_SECONDARY_ZONE, ReasonKind::Failed),
    (REASON_SIGNING, ReasonKind::InProgress),
    (REASON_UNSIGNING, ReasonKind::InProgress),
    (REASON_DNSSEC_POLICY_REFUSED, ReasonKind::Failed),
    (REASON_ZONE_FAILED, ReasonKind::Failed),
    (REASON_KEY_NOT_FOUND, ReasonKind::Failed),
    (REASON_KEY_FAILED, ReasonKind::Failed),
    (REASON_TRANSFER_KEY_NOT_READY, ReasonKind::InProgress),
    (REASON_TRANSFER_KEY_INVALID, ReasonKind::Failed),
    (REASON_DUPLICATE_KEY_NAME, ReasonKind::Failed),
    (REASON_RESERVED_KEY_NAME, ReasonKind::Failed),
    (REASON_RESERVED_ZONE_NAME, ReasonKind::Failed),
    (REASON_OCCLUDED, ReasonKind::Failed),
    (REASON_FOREIGN_CONFLICT, ReasonKind::Failed),
    (REASON_VIEW_NOT_FOUND, ReasonKind::Failed),
    (REASON_DELEGATION_CONFLICT, ReasonKind::Failed),
    (REASON_NOT_ALLOWED, ReasonKind::Failed),
    (REASON_WEAK_KEY, ReasonKind::Done),
    (REASON_PUBLIC_SUFFIX, ReasonKind::Done),
    (REASON_RELATIVE_TARGET, ReasonKind::Done),
    (REASON_EXTERNAL, ReasonKind::Done),
    (REASON_RNDC_FAILED, ReasonKind::Failed),
];

/// The kind of a reason in [`CONDITION_REASONS`]; None for a reason no
/// controller sets.
pub fn reason_kind(reason: &str) -> Option<ReasonKind> {
    CONDITION_REASONS
        .iter()
        .find(|(r, _)| *r == reason)
        .map(|(_, k)| *k)
}

/// Whether `reason` means "failed, waiting for a fix" rather than "in
/// progress". Unknown reasons are not failures.
pub fn is_terminal_failure(reason: &str) -> bool {
    reason_kind(reason) == Some(ReasonKind::Failed)
}

/// Condition status strings, as Kubernetes spells them.
pub const STATUS_TRUE: &str = "True";
/// Condition status strings, as Kubernetes spells them.
pub const STATUS_FALSE: &str = "False";
/// Condition status strings, as Kubernetes spells them.
pub const STATUS_UNKNOWN: &str = "Unknown";

/// Default key inside a Secret that holds base64 TSIG key material.
pub const DEFAULT_SECRET_KEY: &str = "secret";

/// Upper bound of a DNS TTL (RFC 2181 section 8: 2^31 - 1).
pub const MAX_TTL: u32 = 2_147_483_647;

/// A reference to one key of a Secret in the object's own namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret, in the same namespace as the referring object.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key inside the Secret's data whose value is the base64 key material.
    #[serde(default = "default_secret_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

fn default_secret_key() -> String {
    DEFAULT_SECRET_KEY.to_owned()
}

/// Lifecycle phase reported by BindZone and DNSRecord.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = drop_type_description, extend("maxLength" = 7))]
pub enum Phase {
    /// Accepted, waiting for what it depends on (cluster, zone, primary pod).
    Pending,
    /// Served by the primary as specified.
    Ready,
    /// Cannot be served as specified; `reason` and `message` say why.
    Error,
}

impl Phase {
    /// The wire spelling (`Pending`, `Ready`, `Error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Ready => "Ready",
            Phase::Error => "Error",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// schemars transform for enum types used as `Option<Enum>` fields: drops the
/// type's own description so the field's doc comment stays the `kubectl
/// explain` text (kube's OptionalEnum rewrite would otherwise let the type's
/// description overwrite the field's).
pub(crate) fn drop_type_description(schema: &mut schemars::Schema) {
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("description");
    }
}

/// Finds the condition of the given type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of the given type exists with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == STATUS_TRUE)
}

/// Builds a condition; `lastTransitionTime` is `now` and is only kept by
/// [`set_condition`] when the status actually flips.
pub fn new_condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: Time,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { STATUS_TRUE } else { STATUS_FALSE }.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation,
        last_transition_time: now,
    }
}

/// Sets `new` in `conditions`, replacing the condition of the same type.
///
/// The previous `lastTransitionTime` is kept unless the status changed, so a
/// reconcile that observes the same state writes byte-identical status (a moving
/// timestamp would make every reconcile a write and wake the controller again).
/// Returns whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            if existing.status == new.status {
                new.last_transition_time = existing.last_transition_time.clone();
            }
            if *existing == new {
                return false;
            }
            *existing = new;
            true
        }
        None => {
            conditions.push(new);
            conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn set_condition_keeps_transition_time_when_status_is_unchanged() {
        let mut conds = Vec::new();
        assert!(set_condition(
            &mut conds,
            new_condition(CONDITION_READY, false, "Pending", "waiting", Some(1), t(10))
        ));
        // Same status, new message: message updates, time stays.
        assert!(set_condition(
            &mut conds,
            new_condition(
                CONDITION_READY,
                false,
                "Pending",
                "still waiting",
                Some(1),
                t(20)
            )
        ));
        assert_eq!(conds[0].last_transition_time, t(10));
        assert_eq!(conds[0].message, "still waiting");
        // Identical observation: no change reported.
        assert!(!set_condition(
            &mut conds,
            new_condition(
                CONDITION_READY,
                false,
                "Pending",
                "still waiting",
                Some(1),
                t(30)
            )
        ));
        // Flip: time moves.
        assert!(set_condition(
            &mut conds,
            new_condition(CONDITION_READY, true, "Ready", "", Some(1), t(40))
        ));
        assert_eq!(conds[0].last_transition_time, t(40));
        assert!(is_condition_true(&conds, CONDITION_READY));
        assert!(!is_condition_true(&conds, CONDITION_CONFIG_APPLIED));
    }

    #[test]
    fn each_reason_is_listed_once() {
        let mut names: Vec<&str> = CONDITION_REASONS.iter().map(|(r, _)| *r).collect();
        names.sort_unstable();
        let all = names.len();
        names.dedup();
        assert_eq!(names.len(), all, "a reason is listed twice");
        assert_eq!(
            reason_kind(REASON_PROPAGATING),
            Some(ReasonKind::InProgress)
        );
        assert!(is_terminal_failure(REASON_RECONFIG_FAILED));
        assert!(!is_terminal_failure(REASON_APPLIED));
        assert!(
            !is_terminal_failure("SomethingFailed"),
            "no guessing by name"
        );
    }

    #[test]
    fn every_reason_defined_here_is_listed() {
        // Controllers take their condition reasons from here (event-only
        // reasons live beside the controller that emits them).
        let source = include_str!("common.rs");
        let defined: Vec<&str> = source
            .lines()
            .filter(|l| l.starts_with("pub const REASON_"))
            .filter_map(|l| l.split('"').nth(1))
            .collect();
        assert!(defined.len() >= 30, "{defined:?}");
        for reason in defined {
            assert!(
                reason_kind(reason).is_some(),
                "{reason} is defined but not in CONDITION_REASONS"
            );
        }
    }

    #[test]
    fn conditions_stay_sorted_by_type() {
        let mut conds = Vec::new();
        set_condition(
            &mut conds,
            new_condition(CONDITION_READY, true, "Ready", "", None, t(1)),
        );
        set_condition(
            &mut conds,
            new_condition(
                CONDITION_CONFIG_APPLIED,
                true,
                REASON_APPLIED,
                "",
                None,
                t(1),
            ),
        );
        let types: Vec<_> = conds.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["ConfigApplied", "Ready"]);
    }
}
