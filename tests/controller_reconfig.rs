//! The seed's reconfig cases, against the in-memory API with a recording
//! fake executor: the BindCluster reconciler waits for each pod's mount,
//! reconfigs each pod exactly once per config, records it in status, and
//! backs off on failures.

use crate::support_controller as support;

use bind_operator::api::{CONDITION_CONFIG_APPLIED, find_condition};
use bind_operator::bind::commands::config_hash;
use bind_operator::controller::{REQUEUE_LONG, REQUEUE_SHORT};
use kube::runtime::controller::Action;
use support::{Harness, material};

fn condition(h: &Harness, cluster: &str) -> (String, String, String) {
    let c = h.get_cluster(cluster);
    let status = c.status.expect("status written");
    let cond = find_condition(&status.conditions, CONDITION_CONFIG_APPLIED)
        .expect("ConfigApplied set")
        .clone();
    (cond.status, cond.reason, cond.message)
}

async fn setup(replicas: i32) -> Harness {
    let h = Harness::new().await;
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    h.cluster("c", replicas).await;
    h
}

#[tokio::test]
async fn waits_for_mount_then_reconfigs_once() {
    let h = setup(2).await;
    h.pod("c", 0, true).await;
    h.pod("c", 1, true).await;
    h.exec.set_mounted("c-0", "old-primary");
    h.exec.set_mounted("c-1", "old-secondary");

    // Stale mounts: the pods are annotated so the kubelet remounts now,
    // and the cluster looks again on the nudge's backoff (under 5 s).
    let action = h.reconcile_cluster("c").await;
    assert!(
        action != Action::await_change() && action != Action::requeue(REQUEUE_SHORT),
        "stale mounts requeue sooner than {REQUEUE_SHORT:?}: {action:?}"
    );
    for pod in ["c-0", "c-1"] {
        let p: k8s_openapi::api::core::v1::Pod = h.api.get(Some(support::NS), pod).unwrap();
        assert!(
            p.metadata
                .annotations
                .unwrap_or_default()
                .contains_key("bind.unkin.net/config-hash"),
            "{pod} not asked to remount"
        );
    }
    assert_eq!(h.exec.reconfigs("c-0") + h.exec.reconfigs("c-1"), 0);
    let (status, reason, _) = condition(&h, "c");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Propagating"));

    // Only the primary's mount has propagated.
    h.propagate("c", "c-0");
    let action = h.reconcile_cluster("c").await;
    assert!(
        action != Action::await_change() && action != Action::requeue(REQUEUE_LONG),
        "c-1 still behind: looked at again soon ({action:?})"
    );
    assert_eq!((h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")), (1, 0));

    h.propagate("c", "c-1");
    for _ in 0..3 {
        assert_eq!(h.reconcile_cluster("c").await, Action::await_change());
    }
    assert_eq!((h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")), (1, 1));
    let (status, reason, _) = condition(&h, "c");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Applied"));
    let applied = h.get_cluster("c").status.unwrap().applied_config;
    assert_eq!(applied["c-0"], config_hash(&h.wanted_mount("c", true), ""));
    assert_eq!(applied["c-1"], config_hash(&h.wanted_mount("c", false), ""));
    assert_ne!(applied["c-0"], applied["c-1"]);
    let reconfigured = h
        .events()
        .into_iter()
        .filter(|(reason, _)| reason == "Reconfigured")
        .count();
    assert_eq!(reconfigured, 2, "one Event per applied reconfig");

    // A pod that no longer exists drops out of the applied map.
    h.delete_pod("c-1").await;
    h.reconcile_cluster("c").await;
    let applied = h.get_cluster("c").status.unwrap().applied_config;
    assert!(applied.contains_key("c-0"));
    assert!(
        !applied.contains_key("c-1"),
        "applied map kept a deleted pod"
    );
}

#[tokio::test]
async fn reconfig_failure_surfaces_checkconf_detail() {
    let h = setup(1).await;
    h.pod("c", 0, true).await;
    h.reconcile_cluster("c").await;
    h.propagate("c", "c-0");
    {
        let mut s = h.exec.state();
        s.reconfig_err = Some("rndc: 'reconfig' failed: failure".into());
        s.checkconf_stdout = "named.conf:6: expected IP address near 'not-an-ip'\n".into();
    }
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_LONG)
    );
    let (status, reason, message) = condition(&h, "c");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ReconfigFailed")
    );
    assert!(
        message.contains("named.conf:6: expected IP address near 'not-an-ip'"),
        "{message}"
    );
    assert!(message.contains("c-0"), "{message}");
    let status = h.get_cluster("c").status.unwrap();
    assert!(
        !status.applied_config.contains_key("c-0"),
        "a failed reconfig must not be recorded as applied"
    );
    assert!(
        h.events()
            .iter()
            .any(|(r, n)| r == "ReconfigFailed" && n.contains("named.conf:6")),
        "{:?}",
        h.events()
    );
}

#[tokio::test]
async fn exec_error_backs_off() {
    let h = setup(1).await;
    h.pod("c", 0, true).await;
    h.exec.state().exec_err.insert(
        "c-0".into(),
        r#"pods "c-0" is forbidden: cannot create resource "pods/exec""#.into(),
    );
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_LONG)
    );
    let (status, reason, message) = condition(&h, "c");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "ExecFailed"));
    assert!(message.contains("forbidden"), "{message}");
    assert_eq!(
        h.exec.reconfigs("c-0"),
        0,
        "no reconfig after a failed mount check"
    );
}

#[tokio::test]
async fn not_ready_stale_pod_blocks_applied() {
    let h = setup(2).await;
    h.pod("c", 0, true).await;
    h.pod("c", 1, false).await;
    h.reconcile_cluster("c").await;
    h.propagate("c", "c-0");
    h.exec
        .state()
        .exec_err
        .insert("c-1".into(), "must not exec into a not-ready pod".into());
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_SHORT)
    );
    let (status, reason, message) = condition(&h, "c");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Propagating"));
    assert!(message.contains("c-1"), "{message}");
    assert_eq!((h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")), (1, 0));
    assert!(
        h.exec.state().calls.iter().all(|c| c.pod != "c-1"),
        "exec'd into a not-ready pod"
    );
}

#[tokio::test]
async fn new_pod_reconfigs_once_then_recorded() {
    let h = setup(2).await;
    assert_eq!(
        h.converge("c", 1).await,
        Action::requeue(REQUEUE_SHORT),
        "one of two replicas: not Ready, so it checks back soon"
    );
    assert_eq!(h.exec.reconfigs("c-0"), 1);
    h.pod("c", 1, true).await;
    h.propagate("c", "c-1");
    for _ in 0..3 {
        assert_eq!(h.reconcile_cluster("c").await, Action::await_change());
    }
    assert_eq!((h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")), (1, 1));
    let applied = h.get_cluster("c").status.unwrap().applied_config;
    assert_eq!(applied["c-1"], config_hash(&h.wanted_mount("c", false), ""));
}

#[tokio::test]
async fn applied_config_persists_across_reconciles() {
    let h = setup(1).await;
    assert_eq!(h.converge("c", 1).await, Action::await_change());
    // Persisted in the API (a fresh read), not only in memory.
    let stored = h.get_cluster("c").status.unwrap().applied_config;
    assert_eq!(stored["c-0"], config_hash(&h.wanted_mount("c", true), ""));
    for _ in 0..3 {
        h.reconcile_cluster("c").await;
    }
    assert_eq!(
        h.exec.reconfigs("c-0"),
        1,
        "persisted appliedConfig prevents a second reconfig"
    );
}

#[tokio::test]
async fn failure_backs_off_while_others_wait() {
    let h = setup(2).await;
    h.pod("c", 0, true).await;
    h.pod("c", 1, false).await;
    h.reconcile_cluster("c").await;
    h.propagate("c", "c-0");
    h.exec.state().reconfig_err = Some("rndc: 'reconfig' failed: failure".into());
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_LONG),
        "a failed pod must back off long even while another waits"
    );
    let (_, reason, _) = condition(&h, "c");
    assert_eq!(reason, "ReconfigFailed");
}

#[tokio::test]
async fn failure_backs_off_while_statefulset_not_ready() {
    // Two replicas wanted, one pod exists: the cluster is not Ready, and a
    // failure must still back off long rather than requeue short.
    let h = setup(2).await;
    h.pod("c", 0, true).await;
    h.exec
        .state()
        .exec_err
        .insert("c-0".into(), "forbidden".into());
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_LONG)
    );
}

#[tokio::test]
async fn a_failed_config_is_not_rerun_until_its_backoff_but_a_new_one_is() {
    let h = setup(1).await;
    h.pod("c", 0, true).await;
    h.reconcile_cluster("c").await;
    h.propagate("c", "c-0");
    h.exec.state().reconfig_err = Some("rndc: 'reconfig' failed: failure".into());
    h.exec.state().checkconf_stdout = "named.conf:9: unknown option 'bogus'\n".into();
    h.reconcile_cluster("c").await;
    assert_eq!(h.exec.reconfigs("c-0"), 1);
    let (_, reason, first) = condition(&h, "c");
    assert_eq!(reason, "ReconfigFailed");

    // The failure's own status write wakes the controller at once: the
    // same config is reported failed again without running it again.
    assert_eq!(
        h.reconcile_cluster("c").await,
        Action::requeue(REQUEUE_LONG)
    );
    assert_eq!(h.exec.reconfigs("c-0"), 1, "the failing reconfig re-ran");
    let (status, reason, again) = condition(&h, "c");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ReconfigFailed")
    );
    assert_eq!(again, first);
    assert!(
        again.contains("named.conf:9: unknown option 'bogus'"),
        "{again}"
    );

    // A changed config is tried as soon as it is mounted.
    h.exec.state().reconfig_err = None;
    h.patch_cluster_spec("c", serde_json::json!({"forwarders": ["192.0.2.53"]}))
        .await;
    h.reconcile_cluster("c").await;
    h.propagate("c", "c-0");
    assert_eq!(h.reconcile_cluster("c").await, Action::await_change());
    assert_eq!(h.exec.reconfigs("c-0"), 2);
    let (status, reason, _) = condition(&h, "c");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Applied"));
}

/// A reconcile that reads the cluster from a cache not yet holding the
/// status that recorded a reconfig (seen in a local run: a second pass
/// 100 ms after the first reconfigured the same pod with the same config
/// again) runs no second reconfig; a recreated pod, with a new uid, is
/// reconfigured again.
#[tokio::test]
async fn a_stale_cluster_read_reruns_no_reconfig_but_a_new_pod_gets_one() {
    let h = setup(2).await;
    assert_eq!(h.converge("c", 2).await, Action::await_change());
    assert_eq!((h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")), (1, 1));

    h.patch_cluster_spec("c", serde_json::json!({"forwarders": ["192.0.2.53"]}))
        .await;
    h.reconcile_cluster("c").await;
    h.propagate("c", "c-0");
    h.propagate("c", "c-1");
    // The new spec with the status from before the reconfig below.
    let stale = h.get_cluster("c");
    assert_eq!(h.reconcile_cluster("c").await, Action::await_change());
    assert_eq!((h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")), (2, 2));

    assert_eq!(reconcile_read(&h, &stale).await, Action::await_change());
    assert_eq!(
        (h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")),
        (2, 2),
        "the stale read re-ran a reconfig"
    );
    let (status, reason, _) = condition(&h, "c");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Applied"));

    // What is remembered holds for the pod's container: a new Pod object
    // of the same name, read with the same stale status, is reconfigured.
    h.delete_pod("c-1").await;
    h.pod("c", 1, true).await;
    reconcile_read(&h, &stale).await;
    assert_eq!((h.exec.reconfigs("c-0"), h.exec.reconfigs("c-1")), (2, 3));
}

/// Reconciles the cluster as `read` (a cached copy), not as stored now.
async fn reconcile_read(h: &Harness, read: &bind_operator::api::BindCluster) -> Action {
    h.settle().await;
    let action = bind_operator::controller::bindcluster::reconcile(
        std::sync::Arc::new(read.clone()),
        h.ctx.clone(),
    )
    .await
    .unwrap_or_else(|e| panic!("reconcile failed: {e}"));
    h.settle().await;
    action
}
