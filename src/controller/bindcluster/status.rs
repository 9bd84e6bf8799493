//! The BindCluster status, computed from what the reconcile observed. Pure.
//! Deterministic: hashes, counts and conditions whose lastTransitionTime
//! moves only when their status flips, so an unchanged cluster computes a
//! status equal to the stored one and nothing is written.

use crate::api::{
    BindCluster, BindClusterStatus, CONDITION_CONFIG_APPLIED, CONDITION_READY,
    REASON_CONFIG_NOT_APPLIED, REASON_PODS_NOT_READY, REASON_READY, is_condition_true,
    new_condition, set_condition,
};
use crate::controller::apply::now;

use super::reconfig::Outcome;

/// Status after a reconcile that got as far as the reconfig step.
pub fn converged_status(
    cluster: &BindCluster,
    ready_replicas: i32,
    outcome: &Outcome,
) -> BindClusterStatus {
    let generation = cluster.metadata.generation;
    let mut status = cluster.status.clone().unwrap_or_default();
    status.observed_generation = generation;
    status.ready_replicas = ready_replicas;
    status.applied_config = outcome.applied.clone();
    let (ok, reason, message) = outcome.condition();
    set_condition(
        &mut status.conditions,
        new_condition(
            CONDITION_CONFIG_APPLIED,
            ok,
            reason,
            message,
            generation,
            now(),
        ),
    );
    let replicas = cluster.spec.replicas;
    let (ready, reason, message) = if ready_replicas < replicas {
        (
            false,
            REASON_PODS_NOT_READY,
            format!("{ready_replicas}/{replicas} pods ready"),
        )
    } else if !is_condition_true(&status.conditions, CONDITION_CONFIG_APPLIED) {
        (
            false,
            REASON_CONFIG_NOT_APPLIED,
            "some pods have not loaded the wanted config".to_string(),
        )
    } else {
        (
            true,
            REASON_READY,
            format!("{ready_replicas}/{replicas} pods ready"),
        )
    };
    set_condition(
        &mut status.conditions,
        new_condition(CONDITION_READY, ready, reason, message, generation, now()),
    );
    status
}

/// Status after a reconcile that stopped early on a problem with the spec
/// or what it refers to: Ready False with the error's category; the last
/// applied config and ConfigApplied stay as they were (the old config is
/// still serving).
pub fn failed_status(
    cluster: &BindCluster,
    ready_replicas: i32,
    reason: &str,
    message: String,
) -> BindClusterStatus {
    let generation = cluster.metadata.generation;
    let mut status = cluster.status.clone().unwrap_or_default();
    status.observed_generation = generation;
    status.ready_replicas = ready_replicas;
    set_condition(
        &mut status.conditions,
        new_condition(CONDITION_READY, false, reason, message, generation, now()),
    );
    status
}
