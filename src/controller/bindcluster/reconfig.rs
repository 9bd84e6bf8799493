//! Per-pod reconfig, exactly once per config (DESIGN "Behaviour 2"): for
//! each pod whose recorded hash differs from the wanted one (sha256 of its
//! role's named.conf + keys.conf), once the pod is Ready and its mounted
//! files hash to the wanted value, run `rndc reconfig` and record the hash.
//! The mount check and the reconfig are one exec per pod
//! ([`reconfig_when_mounted`]); only a failed reconfig costs a second one
//! (named-checkconf, for the file and line rndc does not name).
//! Plus the primary's NOTIFY list (secondaries' pod endpoints): one exec
//! that rewrites it only when it changed, none while the memo says it is
//! current.
//!
//! A freshly started pod is reconfigured too, although named read the
//! mounted files at start: what named loaded then is not observable (the
//! kubelet may swap the files between the container start and named's
//! read, and a reverted ConfigMap makes the same bytes come back), so
//! skipping it could leave a pod on a config nobody checked.
//!
//! Touches pods only through the executor; reads no API. Never logs the
//! mounted files (keys.conf is key material; it reaches the pod on stdin).

use crate::bind::render::ExternalSecondary;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::api::{REASON_APPLIED, REASON_EXEC_FAILED, REASON_PROPAGATING, REASON_RECONFIG_FAILED};
use crate::bind::commands::{
    WhenMounted, checkconf, config_hash, has_runtime_includes, notify_list_files,
    parse_reconfig_when_mounted, parse_write_notify, reconfig, reconfig_when_mounted,
    render_notify_servers, render_notify_targets, render_view_notify_targets, write_notify_targets,
    write_view_notify_targets,
};
use crate::bind::parse::parse_checkconf;
use crate::bind::{Endpoint, KeyName, ViewName};
use crate::controller::context::{REQUEUE_LONG, REQUEUE_SHORT};
use crate::controller::exec::{ExecError, PodExecutor, PodRef, program_name};
use crate::controller::memo::{NotifyMemo, ReconfigMemo};

/// One pod as the reconfig step sees it.
#[derive(Debug, Clone)]
pub struct PodView {
    pub pod: PodRef,
    /// Ready and not being deleted.
    pub ready: bool,
    /// StatefulSet ordinal 0.
    pub primary: bool,
    /// The pod's current container (uid and restart count): what a
    /// remembered reconfig holds for.
    pub identity: String,
}

/// The wanted files (the same text the ConfigMap and keys Secret hold).
pub struct Wanted<'a> {
    pub primary_conf: &'a str,
    pub secondary_conf: &'a str,
    /// Key material: never logged.
    pub keys_conf: &'a str,
    /// The primary's NOTIFY lists, written by its reconfig before named
    /// reads the new config (they name keys it defines).
    pub notify: Option<&'a NotifyLists>,
}

/// What the primary's NOTIFY lists are made of (see
/// [`crate::bind::commands::notify_list_files`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyLists {
    pub targets: Vec<Endpoint>,
    pub transfer_key: KeyName,
    pub view_keys: Vec<(ViewName, KeyName)>,
    pub external: Vec<ExternalSecondary>,
}

impl Wanted<'_> {
    /// The hash a pod of this role must have loaded.
    pub fn hash_for(&self, primary: bool) -> String {
        let conf = if primary {
            self.primary_conf
        } else {
            self.secondary_conf
        };
        config_hash(conf, self.keys_conf)
    }
}

/// What the reconfig step found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Pod name -> hash it has loaded, for pods that exist.
    pub applied: BTreeMap<String, String>,
    /// Pods not ready, or whose mount has not caught up.
    pub waiting: Vec<String>,
    /// Ready pods whose mount has not caught up, with the hash they must
    /// load (the kubelet is asked to remount them now).
    pub stale_mounts: Vec<(String, String)>,
    /// `rndc reconfig` failures, with checkconf detail.
    pub failed: Vec<String>,
    /// Commands that could not run.
    pub exec_errors: Vec<String>,
    /// Pods reconfigured in this pass, with the hash they loaded.
    pub reconfigured: Vec<(String, String)>,
}

impl Outcome {
    /// ConfigApplied as (status, reason, message).
    pub fn condition(&self) -> (bool, &'static str, String) {
        if !self.failed.is_empty() {
            let mut all = self.failed.clone();
            all.extend(self.exec_errors.iter().cloned());
            (false, REASON_RECONFIG_FAILED, all.join("; "))
        } else if !self.exec_errors.is_empty() {
            (false, REASON_EXEC_FAILED, self.exec_errors.join("; "))
        } else if !self.waiting.is_empty() {
            (
                false,
                REASON_PROPAGATING,
                format!("awaiting config on {}", self.waiting.join(", ")),
            )
        } else {
            (
                true,
                REASON_APPLIED,
                "every pod loaded the wanted config".into(),
            )
        }
    }

    /// Long after any failure (even while other pods wait, so a failure
    /// cannot hot-loop), short while pods wait, none when converged.
    pub fn requeue(&self) -> Option<Duration> {
        if !self.failed.is_empty() || !self.exec_errors.is_empty() {
            Some(REQUEUE_LONG)
        } else if !self.waiting.is_empty() {
            Some(REQUEUE_SHORT)
        } else {
            None
        }
    }
}

/// How long a failed `rndc reconfig` of one config on one pod is not tried
/// again: until the failure's long requeue comes round. The status write
/// that reports a failure triggers a reconcile at once; without this it
/// would run the same failing reconfig (and checkconf) a second time.
pub const RECONFIG_RETRY_AFTER: Duration = REQUEUE_LONG.saturating_sub(Duration::from_secs(10));

/// Runs the reconfig step over `pods` (sorted by the caller), starting from
/// the recorded `previous` hashes, or what `memo` says this process loaded
/// into the pod's current container since (the cluster read may predate
/// the status write that recorded it). Pods not in `pods` drop out. A
/// config that failed on a pod recently is reported from `memo`, not run
/// again.
pub async fn reconfig_pods(
    executor: &dyn PodExecutor,
    memo: &ReconfigMemo,
    pods: &[PodView],
    wanted: &Wanted<'_>,
    previous: &BTreeMap<String, String>,
) -> Outcome {
    let mut out = Outcome::default();
    for p in pods {
        let name = &p.pod.name;
        let want = wanted.hash_for(p.primary);
        if let Some(have) = memo
            .done(&p.pod, &p.identity)
            .or_else(|| previous.get(name).cloned())
        {
            out.applied.insert(name.clone(), have);
        }
        if out.applied.get(name) == Some(&want) {
            continue;
        }
        if !p.ready {
            out.waiting.push(name.clone());
            continue;
        }
        if let Some(failure) = memo.recent_failure(&p.pod, &want, RECONFIG_RETRY_AFTER) {
            out.failed.push(failure);
            continue;
        }
        let layout = executor.layout(&p.pod);
        let conf = if p.primary {
            wanted.primary_conf
        } else {
            wanted.secondary_conf
        };
        // A view added at run time names a NOTIFY list or zone list file
        // the primary does not have yet; reconfig would fail on the
        // missing include.
        let ensure = p.primary && has_runtime_includes(wanted.primary_conf);
        // The NOTIFY lists name keys: one naming a key the new keys.conf
        // no longer has (the transfer key changed) would fail checkconf.
        let lists = match wanted.notify.filter(|_| p.primary) {
            Some(n) => notify_list_files(
                &layout,
                &n.targets,
                &n.transfer_key,
                &n.view_keys,
                &n.external,
            ),
            None => Vec::new(),
        };
        let cmd = reconfig_when_mounted(&layout, conf, wanted.keys_conf, ensure, &lists);
        let result = executor.exec(&p.pod, &cmd).await;
        let stdout = match &result {
            Ok(o) => o.stdout.as_str(),
            Err(e) => e.stdout(),
        };
        match (parse_reconfig_when_mounted(stdout), result) {
            // kubelet swaps the projected files in eventually (up to ~90 s).
            (Some(WhenMounted::NotMounted), Ok(_)) => {
                out.waiting.push(name.clone());
                out.stale_mounts.push((name.clone(), want.clone()));
                continue;
            }
            (Some(WhenMounted::Reconfigured), Ok(_)) => {}
            (Some(WhenMounted::ReconfigFailed), Err(ExecError::Exited { code, stderr, .. })) => {
                // Reported as rndc's own failure, as a separate exec was.
                let e = ExecError::Exited {
                    pod: p.pod.to_string(),
                    program: program_name(&reconfig(&layout)),
                    code,
                    stdout: String::new(),
                    stderr,
                };
                // rndc only says "failed"; checkconf names file and line.
                let detail = match executor.exec(&p.pod, &checkconf(&layout, false)).await {
                    Ok(_) => "named-checkconf found no error".to_string(),
                    Err(ce) => {
                        let issues: Vec<String> = parse_checkconf(ce.stdout())
                            .iter()
                            .map(ToString::to_string)
                            .collect();
                        if issues.is_empty() {
                            format!("named-checkconf: {ce}")
                        } else {
                            format!("named-checkconf: {}", issues.join("; "))
                        }
                    }
                };
                let failure = format!("{name}: {e}; {detail}");
                memo.record(&p.pod, &p.identity, &want, Some(&failure));
                out.failed.push(failure);
                continue;
            }
            (_, Err(e)) => {
                out.exec_errors.push(format!("{name}: {e}"));
                continue;
            }
            (_, Ok(_)) => {
                out.exec_errors.push(format!(
                    "{name}: the reconfig step printed no outcome (expected one of {}, {}, {})",
                    WhenMounted::NotMounted.marker(),
                    WhenMounted::Reconfigured.marker(),
                    WhenMounted::ReconfigFailed.marker()
                ));
                continue;
            }
        }
        memo.record(&p.pod, &p.identity, &want, None);
        out.applied.insert(name.clone(), want.clone());
        out.reconfigured.push((name.clone(), want));
    }
    out
}

/// Makes the primary NOTIFY exactly `targets`: signed with the transfer
/// key, or with views, in each view signed with its key (`view_keys`; all
/// files in one exec, one reconfig). Runs nothing when the memo says the
/// list is current; otherwise one exec that compares, rewrites only what
/// differs and reconfigs only then. Returns whether it rewrote the list.
#[allow(clippy::too_many_arguments)]
pub async fn sync_notify_targets(
    executor: &dyn PodExecutor,
    memo: &NotifyMemo,
    primary: &PodRef,
    primary_uid: &str,
    targets: &[Endpoint],
    transfer_key: &KeyName,
    view_keys: &[(ViewName, KeyName)],
    external: &[ExternalSecondary],
) -> Result<bool, String> {
    let layout = executor.layout(primary);
    let (wanted, write) = if view_keys.is_empty() {
        (
            render_notify_targets(targets, transfer_key, external)
                + &render_notify_servers(targets, transfer_key, &[]),
            write_notify_targets(&layout, targets, transfer_key, external),
        )
    } else {
        (
            render_view_notify_targets(targets, view_keys, external)
                + &render_notify_servers(targets, transfer_key, view_keys),
            write_view_notify_targets(&layout, targets, view_keys, external),
        )
    };
    if memo.get(primary, primary_uid).as_deref() == Some(wanted.as_str()) {
        return Ok(false);
    }
    let out = executor
        .exec(primary, &write)
        .await
        .map_err(|e| format!("{}: {e}", primary.name))?;
    let changed = parse_write_notify(&out.stdout).ok_or_else(|| {
        format!(
            "{}: the NOTIFY list update printed no outcome",
            primary.name
        )
    })?;
    memo.set(primary, primary_uid, wanted);
    Ok(changed)
}
