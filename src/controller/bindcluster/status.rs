//! The BindCluster status, computed from what the reconcile observed. Pure.
//! Deterministic: hashes, counts and conditions whose lastTransitionTime
//! moves only when their status flips, so an unchanged cluster computes a
//! status equal to the stored one and nothing is written.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;

use crate::api::{
    BindCluster, BindClusterStatus, CONDITION_CONFIG_APPLIED, CONDITION_READY,
    REASON_CONFIG_NOT_APPLIED, REASON_PODS_FAILING, REASON_PODS_NOT_READY, REASON_PROPAGATING,
    REASON_READY, is_condition_true, new_condition, set_condition,
};
use crate::controller::apply::now;

use super::reconfig::Outcome;

/// Longest pod report in the Ready message (the rest is in the pod).
const MAX_FAILING_REPORT: usize = 1024;
/// Waiting reasons that are a normal start, not a failure.
const STARTING_REASONS: [&str; 2] = ["ContainerCreating", "PodInitializing"];
/// named's closing lines after a fatal error: true but say nothing.
const GENERIC_NAMED_LINES: [&str; 4] = [
    "exiting (due to fatal error)",
    "loading configuration: failure",
    "shutting down",
    "exiting",
];

/// The line of a container's last words worth showing: the last
/// `file:line: message` named printed, else the last line that is not one
/// of its generic closing lines; without named's timestamp.
pub fn error_line(log_tail: &str) -> Option<String> {
    let lines: Vec<&str> = log_tail
        .lines()
        .map(strip_named_timestamp)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let located = |l: &&&str| {
        l.split_once(": ").is_some_and(|(head, _)| {
            head.rsplit_once(':')
                .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    lines
        .iter()
        .rev()
        .find(located)
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find(|l| !GENERIC_NAMED_LINES.iter().any(|g| l.ends_with(g)))
        })
        .map(|l| redact_key_file_tokens(l))
}

/// Files whose lines may hold key material: named quotes the token it
/// stumbled on, which there could be part of a secret.
const KEY_FILES: [&str; 2] = [
    crate::bind::layout::mount::KEYS_CONF,
    crate::bind::layout::mount::RNDC_KEY,
];

/// A line about a key file with every quoted token replaced, so no part of
/// a secret reaches the status.
fn redact_key_file_tokens(line: &str) -> String {
    if !KEY_FILES.iter().any(|f| line.contains(f)) {
        return line.to_string();
    }
    line.split('\'')
        .enumerate()
        .map(|(i, part)| if i % 2 == 1 { "<redacted>" } else { part })
        .collect::<Vec<_>>()
        .join("'")
}

/// `03-Dec-2026 04:37:49.255 message` -> `message`.
fn strip_named_timestamp(line: &str) -> &str {
    let mut parts = line.splitn(3, ' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(date), Some(time), Some(rest))
            if date.len() == 11
                && date.as_bytes()[2] == b'-'
                && time.contains(':')
                && time.contains('.') =>
        {
            rest
        }
        _ => line,
    }
}

/// What is wrong with pods that are not Ready because their container
/// keeps exiting or cannot start: "pod c-0: restarted 7 times, exit code 1:
/// <named's error line>", one per pod. None when no pod is failing.
pub fn failing_pods(pods: &[Arc<Pod>]) -> Option<String> {
    let mut reports = Vec::new();
    for pod in pods {
        let Some(cs) = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
        else {
            continue;
        };
        if cs.ready {
            continue;
        }
        let name = pod.name_any();
        let terminated = cs
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .filter(|t| t.exit_code != 0);
        let waiting = cs
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .filter(|w| {
                w.reason
                    .as_deref()
                    .is_some_and(|r| !r.is_empty() && !STARTING_REASONS.contains(&r))
            });
        if let Some(t) = terminated.filter(|_| cs.restart_count > 0) {
            let why = t
                .message
                .as_deref()
                .and_then(error_line)
                .unwrap_or_else(|| "no log kept (see kubectl logs --previous)".into());
            reports.push(format!(
                "pod {name}: restarted {} times, exit code {}: {why}",
                cs.restart_count, t.exit_code
            ));
        } else if let Some(w) = waiting {
            let reason = w.reason.as_deref().unwrap_or_default();
            let message = w.message.as_deref().unwrap_or_default();
            reports.push(
                format!("pod {name}: waiting ({reason}) {message}")
                    .trim_end()
                    .to_string(),
            );
        }
    }
    if reports.is_empty() {
        return None;
    }
    let mut text = reports.join("; ");
    if text.len() > MAX_FAILING_REPORT {
        let mut cut = MAX_FAILING_REPORT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    Some(text)
}

/// Status after a reconcile that got as far as the reconfig step.
/// `failing` is [`failing_pods`]' report, which the Ready condition shows
/// rather than a bare count while pods are missing.
pub fn converged_status(
    cluster: &BindCluster,
    ready_replicas: i32,
    outcome: &Outcome,
    failing: Option<String>,
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
    let (ready, reason, message) = if let Some(failing) = failing {
        (
            false,
            REASON_PODS_FAILING,
            format!("{ready_replicas}/{replicas} pods ready; {failing}"),
        )
    } else if ready_replicas < replicas {
        (
            false,
            REASON_PODS_NOT_READY,
            format!("{ready_replicas}/{replicas} pods ready"),
        )
    } else if !is_condition_true(&status.conditions, CONDITION_CONFIG_APPLIED)
        && outcome.condition().1 != REASON_PROPAGATING
    {
        // A config on its way (every pod Ready, serving the old one) keeps
        // the cluster Ready: the progress is in ConfigApplied.
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

/// While the primary pod is not Ready (restarting, or rebuilding its zones
/// behind its readiness gate) and a secondary is, the Ready message says
/// what that means to users: the secondaries keep answering every zone,
/// changes wait for the primary. The condition itself is unchanged.
pub fn note_primary_rebuilding(status: &mut BindClusterStatus, primary: &str) {
    if let Some(c) = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == CONDITION_READY && c.reason == REASON_PODS_NOT_READY)
    {
        c.message = format!(
            "{}; the primary {primary} is not Ready (restarting, or rebuilding its zones): the secondaries serve every zone, and changes are written once it is back",
            c.message
        );
    }
}

/// Status after a reconcile that stopped early on a problem with the spec
/// or what it refers to: Ready False with the error's category; the last
/// applied config and ConfigApplied stay as they were (the old config is
/// still serving).
/// The status of an external cluster (`spec.external`): Ready and
/// ConfigApplied (its config is the server's own, nothing to apply), reason
/// External, no pods.
pub fn external_status(cluster: &BindCluster, message: String) -> BindClusterStatus {
    let generation = cluster.metadata.generation;
    let mut status = cluster.status.clone().unwrap_or_default();
    status.observed_generation = generation;
    status.ready_replicas = 0;
    status.applied_config.clear();
    set_condition(
        &mut status.conditions,
        new_condition(
            CONDITION_CONFIG_APPLIED,
            true,
            crate::api::REASON_EXTERNAL,
            "the server's configuration is its own; the operator applies none",
            generation,
            now(),
        ),
    );
    set_condition(
        &mut status.conditions,
        new_condition(
            CONDITION_READY,
            true,
            crate::api::REASON_EXTERNAL,
            message,
            generation,
            now(),
        ),
    );
    status
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_line_picks_named_file_line_error_without_timestamp() {
        let tail = "03-Dec-2026 04:50:29.183 loading configuration from '/d/named.conf'\n\
                    03-Dec-2026 04:50:29.183 /d/named.conf:12: unknown option 'bogus'\n\
                    03-Dec-2026 04:50:29.191 loading configuration: failure\n\
                    03-Dec-2026 04:50:29.191 exiting (due to fatal error)\n";
        assert_eq!(
            error_line(tail).as_deref(),
            Some("/d/named.conf:12: unknown option 'bogus'")
        );
        // Without a file:line, the last line that says something.
        let tail = "03-Dec-2026 04:50:29.183 open: config/keys.conf: permission denied\n\
                    03-Dec-2026 04:50:29.191 exiting (due to fatal error)\n";
        assert_eq!(
            error_line(tail).as_deref(),
            Some("open: config/keys.conf: permission denied")
        );
        assert_eq!(
            error_line("entrypoint: BIND_DNS_PORT must be a port number\n").as_deref(),
            Some("entrypoint: BIND_DNS_PORT must be a port number")
        );
        assert_eq!(error_line("\n"), None);
        // A key file's quoted token could be part of a secret.
        assert_eq!(
            error_line("/d/config/keys.conf:3: missing ';' before 'c2VjcmV0'\n").as_deref(),
            Some("/d/config/keys.conf:3: missing '<redacted>' before '<redacted>'")
        );
    }

    #[test]
    fn failing_pods_name_restarts_and_the_error_and_skip_starting_or_ready_pods() {
        let pod = |name: &str, status: serde_json::Value| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name},
                    "status": {"containerStatuses": [status]},
                }))
                .unwrap(),
            )
        };
        let base = |ready: bool| {
            serde_json::json!({"name": "bind", "image": "i", "imageID": "", "ready": ready,
                               "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}})
        };
        let mut crashing = base(false);
        crashing["restartCount"] = 4.into();
        crashing["state"] = serde_json::json!({"waiting": {"reason": "CrashLoopBackOff"}});
        crashing["lastState"] = serde_json::json!({"terminated": {"exitCode": 1,
            "message": "cut line\n03-Dec-2026 04:50:29.183 /d/named.conf:3: bad\nexiting (due to fatal error)"}});
        let mut pulling = base(false);
        pulling["state"] = serde_json::json!({"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}});
        let pods = [
            pod("c-0", base(true)),
            pod("c-1", crashing),
            pod("c-2", base(false)),
            pod("c-3", pulling),
        ];
        assert_eq!(
            failing_pods(&pods).as_deref(),
            Some(
                "pod c-1: restarted 4 times, exit code 1: /d/named.conf:3: bad; \
                 pod c-3: waiting (ImagePullBackOff) no such image"
            )
        );
        assert_eq!(failing_pods(&pods[..1]), None);
        assert_eq!(failing_pods(&pods[2..3]), None);
    }

    #[test]
    fn a_missing_primary_is_named_in_the_pods_not_ready_message_only() {
        let waiting = |reason: &str| {
            let mut s = BindClusterStatus::default();
            set_condition(
                &mut s.conditions,
                new_condition(
                    CONDITION_READY,
                    false,
                    reason,
                    "1/2 pods ready",
                    None,
                    now(),
                ),
            );
            s
        };
        let mut s = waiting(REASON_PODS_NOT_READY);
        note_primary_rebuilding(&mut s, "c-0");
        let c = &s.conditions[0];
        assert!(
            c.message
                .starts_with("1/2 pods ready; the primary c-0 is not Ready")
        );
        assert!(c.message.contains("the secondaries serve every zone"));
        assert_eq!(c.reason, REASON_PODS_NOT_READY);
        // A failing pod's report is not diluted.
        let mut s = waiting(REASON_PODS_FAILING);
        note_primary_rebuilding(&mut s, "c-0");
        assert_eq!(s.conditions[0].message, "1/2 pods ready");
    }
}
