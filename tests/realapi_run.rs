//! `bind-operator run` on a real API server as the deploy/ ServiceAccount:
//! `kubectl apply -k deploy/kustomize/base`, a token minted with `kubectl
//! create token`, a kubeconfig that holds only that token. What the user
//! would check with kubectl: objects created before and after start get
//! their children (ConfigMap, Secrets, Services, StatefulSet) and statuses;
//! a child deleted behind the operator's back comes back; SIGTERM ends it
//! within its grace period; a restarted operator reconciles what exists
//! (and what changed while it was down); the API server refused nothing it
//! asked (no 403 in its log). There is no kubelet, so pods never run here:
//! the assertions are on API objects (the StatefulSet controller does create
//! the pods). Opt-in: see tests/support/realapi.

use crate::support_realapi as support;

use std::time::Duration;

use serde_json::Value;
use support::{Lane, Operator, WAIT, wait_for};

/// The operator's shutdown grace (operator::config::DEFAULT_SHUTDOWN_GRACE)
/// plus slack for a loaded machine.
const EXIT_LIMIT: Duration = Duration::from_secs(25);

/// The kinds every BindCluster gets as children.
/// Only the lane's processes listen in its network namespace, and one
/// operator test runs at a time.
const HEALTH_PORT: u16 = 18_081;

const CHILD_KINDS: [&str; 4] = ["ConfigMap", "Secret", "Service", "StatefulSet"];

fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().unwrap().to_owned()
}

/// Waits until BindCluster `name` has a child of every kind and a status
/// for its current generation; returns its children.
fn wait_reconciled(lane: &Lane, ns: &str, name: &str, op: &Operator) -> Vec<String> {
    wait_for(
        &format!("BindCluster {ns}/{name} reconciled (children and status)"),
        WAIT,
        || {
            let c = lane.get(ns, "bindcluster", name)?;
            let children = lane.children(ns, &uid(&c));
            let kinds_ok = CHILD_KINDS
                .iter()
                .all(|k| children.iter().any(|c| c.starts_with(&format!("{k}/"))));
            let status = &c["status"];
            let current = status["observedGeneration"] == c["metadata"]["generation"]
                && status["conditions"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty());
            (kinds_ok && current).then_some(children)
        },
        || {
            format!(
                "cluster: {:?}\nchildren: {:?}\n--- operator log\n{}",
                lane.get(ns, "bindcluster", name)
                    .map(|c| c["status"].clone()),
                lane.get(ns, "bindcluster", name)
                    .map(|c| lane.children(ns, &uid(&c))),
                op.log()
            )
        },
    )
}

/// Waits until BindTSIGKey `name` names its generated Secret and it exists.
fn wait_key_secret(lane: &Lane, ns: &str, name: &str, op: &Operator) -> String {
    wait_for(
        &format!("BindTSIGKey {ns}/{name} has its Secret"),
        WAIT,
        || {
            let k = lane.get(ns, "bindtsigkey", name)?;
            let secret = k["status"]["secretName"].as_str()?.to_owned();
            lane.get(ns, "secret", &secret).map(|_| secret)
        },
        || op.log(),
    )
}

fn stop(op: &mut Operator, what: &str) {
    let (status, took) = op.terminate(EXIT_LIMIT).unwrap_or_else(|| {
        panic!(
            "{what}: no exit within {EXIT_LIMIT:?} of SIGTERM\n{}",
            op.log()
        )
    });
    support::say(&format!(
        "realapi: {what}: exited {status} {took:.1?} after SIGTERM"
    ));
    assert!(status.success(), "{what}: {status}\n{}", op.log());
}

#[test]
fn realapi_run_as_the_deploy_service_account() {
    let Some(lane) = support::lane("realapi_run_as_the_deploy_service_account") else {
        return;
    };
    lane.installed();
    let _one_operator = support::operator_lock();
    let ns = lane.namespace("lane-run", &[]);
    let ns = ns.name.as_str();
    let tmp = tempfile::tempdir().unwrap();

    // Before start: the examples (a cluster, its keys, a zone, records).
    lane.apply(ns, &support::examples_in(ns));
    let kubeconfig =
        lane.service_account_kubeconfig("bind-operator-system", "bind-operator", tmp.path());
    // The token is the deploy/ account's, not an admin's.
    let who = lane.kubectl_with(
        &kubeconfig,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        None,
    );
    assert_eq!(
        String::from_utf8_lossy(&who.stdout),
        "system:serviceaccount:bind-operator-system:bind-operator"
    );
    let log = tmp.path().join("operator.log");
    let mut op = Operator::run(&kubeconfig, &log, HEALTH_PORT);

    let before = wait_reconciled(&lane, ns, "example", &op);
    support::say(&format!(
        "realapi: created before start, reconciled: {before:?}"
    ));
    wait_key_secret(&lane, ns, "transfer-key", &op);
    wait_key_secret(&lane, ns, "update-key", &op);
    // The real StatefulSet controller accepted the template: pods exist
    // (Pending forever: no scheduler, no kubelet).
    wait_for(
        "pod example-0 created by the StatefulSet controller",
        WAIT,
        || lane.get(ns, "pod", "example-0"),
        || lane.ok(&["get", "events", "-n", ns]),
    );

    // After start (the caches are synced).
    op.wait_ready(WAIT);
    lane.apply(
        ns,
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: after\nspec:\n  replicas: 1\n",
    );
    let after = wait_reconciled(&lane, ns, "after", &op);
    support::say(&format!(
        "realapi: created after start, reconciled: {after:?}"
    ));

    // A child deleted behind the operator's back comes back (a new object).
    let cm_name = before
        .iter()
        .find_map(|c| c.strip_prefix("ConfigMap/"))
        .unwrap()
        .to_owned();
    let old_cm = uid(&lane.get(ns, "configmap", &cm_name).unwrap());
    lane.ok(&["delete", "configmap", &cm_name, "-n", ns]);
    wait_for(
        &format!("ConfigMap {cm_name} re-created"),
        WAIT,
        || {
            lane.get(ns, "configmap", &cm_name)
                .filter(|c| uid(c) != old_cm)
        },
        || op.log(),
    );
    support::say(&format!("realapi: deleted ConfigMap {cm_name} re-created"));

    stop(&mut op, "run");

    // While it is down: a new cluster, and a Service deleted.
    lane.apply(
        ns,
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: while-down\nspec:\n  replicas: 1\n",
    );
    let svc = before
        .iter()
        .find_map(|c| c.strip_prefix("Service/"))
        .unwrap()
        .to_owned();
    lane.ok(&["delete", "service", &svc, "-n", ns]);

    // A restart reconciles everything that exists.
    let mut op = Operator::run(&kubeconfig, &log, HEALTH_PORT);
    let down = wait_reconciled(&lane, ns, "while-down", &op);
    support::say(&format!(
        "realapi: created while stopped, reconciled after restart: {down:?}"
    ));
    wait_for(
        &format!("Service {svc} re-created after restart"),
        WAIT,
        || lane.get(ns, "service", &svc),
        || op.log(),
    );
    let again = wait_reconciled(&lane, ns, "example", &op);
    assert_eq!(
        again, before,
        "the restarted operator keeps the same children"
    );
    stop(&mut op, "restarted run");

    let text = op.log();
    // A 403 is RBAC refusing the ServiceAccount, except the namespace
    // lifecycle's "being terminated" (another test's namespace going away
    // while this cluster-wide operator still watched it).
    // "403" must stand alone: a timestamp such as 12:10:24.840376Z holds
    // the same digits (that matched once and failed CI).
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| has_status_403(l) || l.to_lowercase().contains("forbidden"))
        .filter(|l| !l.contains("because it is being terminated"))
        .collect();
    assert!(
        refused.is_empty(),
        "the API server refused the ServiceAccount:\n{}",
        refused.join("\n")
    );
}

/// Whether `line` carries the number 403 on its own (not inside a longer
/// run of digits such as a timestamp's fraction of a second).
fn has_status_403(line: &str) -> bool {
    let bytes = line.as_bytes();
    line.match_indices("403").any(|(at, _)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + 3).copied();
        !before.is_some_and(|b| b.is_ascii_digit()) && !after.is_some_and(|b| b.is_ascii_digit())
    })
}

#[test]
fn status_403_is_found_alone_and_not_inside_a_timestamp() {
    assert!(has_status_403(
        r#"ErrorResponse { reason: "Forbidden", code: 403 }"#
    ));
    assert!(has_status_403("403 Forbidden"));
    assert!(!has_status_403(
        r#"{"timestamp":"2026-12-03T12:10:24.840376Z"}"#
    ));
    assert!(!has_status_403("port 14033"));
}
