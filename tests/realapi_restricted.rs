//! Issue #13 item 3, against the real admission: in a namespace labelled
//! `pod-security.kubernetes.io/enforce=restricted`, the BindCluster's pods
//! are created by the real StatefulSet controller. A pod that the profile
//! refuses never exists; the controller reports it as a FailedCreate event
//! on the StatefulSet, which this test prints when it fails. Opt-in: see
//! tests/support/realapi.

use crate::support_realapi as support;

use support::{Operator, WAIT, wait_for};

const REPLICAS: usize = 2;
/// Only the lane's processes listen in its network namespace, and one
/// operator test runs at a time.
const HEALTH_PORT: u16 = 18_082;

#[test]
fn realapi_restricted_namespace_gets_its_bind_pods() {
    let Some(lane) = support::lane("realapi_restricted_namespace_gets_its_bind_pods") else {
        return;
    };
    lane.installed();
    let _one_operator = support::operator_lock();
    let ns = lane.namespace(
        "lane-restricted",
        &[
            ("pod-security.kubernetes.io/enforce", "restricted"),
            ("pod-security.kubernetes.io/enforce-version", "latest"),
        ],
    );
    let ns = ns.name.as_str();
    let tmp = tempfile::tempdir().unwrap();
    let mut op = Operator::run(
        &lane.kubeconfig,
        &tmp.path().join("operator.log"),
        HEALTH_PORT,
    );
    op.wait_ready(WAIT);
    // Created after start: what this test is about is admission, not the
    // operator picking up objects that existed before it (realapi_run).
    lane.apply(
        ns,
        &format!(
            "apiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: strict\nspec:\n  replicas: {REPLICAS}\n"
        ),
    );

    let failed_create = || {
        lane.list(ns, "events")
            .into_iter()
            .filter(|e| e["reason"] == "FailedCreate")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    wait_for(
        "StatefulSet strict applied by the operator",
        WAIT,
        || lane.get(ns, "statefulset", "strict"),
        || op.log(),
    );
    let pods = wait_for(
        &format!("{REPLICAS} pods created by the StatefulSet controller"),
        WAIT,
        || {
            let refused = failed_create();
            assert!(
                refused.is_empty(),
                "the restricted profile refused the BIND pods:\n{}",
                refused.join("\n")
            );
            let pods = lane.list(ns, "pods");
            (pods.len() == REPLICAS).then_some(pods)
        },
        || format!("events:\n{}", lane.ok(&["get", "events", "-n", ns])),
    );
    assert_eq!(failed_create(), Vec::<String>::new());
    for p in &pods {
        support::say(&format!(
            "realapi: restricted namespace: pod {} admitted (runAsNonRoot {}, seccomp {})",
            p["metadata"]["name"].as_str().unwrap(),
            p["spec"]["securityContext"]["runAsNonRoot"],
            p["spec"]["securityContext"]["seccompProfile"]["type"]
        ));
    }
}
