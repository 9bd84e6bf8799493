//! `bind-operator local --kubeconfig` against a real API server with the
//! real StatefulSet controller: kube-controller-manager creates the pods,
//! local mode runs them (named on 127.0.0.1 inside the lane's network
//! namespace). A user's view: every record of the manifests is answered by
//! every pod; a restart of local mode in the middle of a batch of
//! DNSRecords finishes the batch; the primary pod deleted with kubectl comes
//! back (a new pod from the StatefulSet controller) with every record; when
//! local mode exits, the pods it ran are gone from the API (nothing there
//! claims to serve). Opt-in: see tests/support/realapi.

use crate::support_e2e::{self as e2e, Fixture, Local};
use crate::support_realapi as support;

use std::time::Duration;

use bind_operator::local::report::Snapshot;
use support::{Lane, wait_for};

/// First convergence on a real API server: the StatefulSet controller, two
/// named processes, a loaded machine.
const STARTUP: Duration = Duration::from_secs(120);
/// DNSRecords written in one batch.
const BATCH: usize = 100;

/// `s` with only the pods of namespace `ns`: the API server is shared and
/// every pod it holds is one local mode might run.
fn only(s: &Snapshot, ns: &str) -> Snapshot {
    let mut s = s.clone();
    s.pods.retain(|p| p.namespace == ns);
    s.objects.retain(|o| o.namespace == ns);
    s
}

/// Everything of namespace `ns` Ready: converged, both pods, every object.
fn ready_in(s: &Snapshot, ns: &str) -> bool {
    let s = only(s, ns);
    s.converged && s.pods.len() >= 2 && e2e::all_ready(&s)
}

fn start(lane: &Lane, f: &Fixture) -> Local {
    let kubeconfig = lane.kubeconfig.to_str().unwrap().to_owned();
    f.start(&["--kubeconfig", &kubeconfig])
}

/// The uid of pod `name` in `ns`, if it exists.
fn pod_uid(lane: &Lane, ns: &str, name: &str) -> Option<String> {
    lane.get(ns, "pod", name)
        .map(|p| p["metadata"]["uid"].as_str().unwrap().to_owned())
}

#[test]
fn realapi_local_serves_the_real_statefulset_controllers_pods() {
    let Some(lane) = support::lane("realapi_local_serves_the_real_statefulset_controllers_pods")
    else {
        return;
    };
    lane.installed();
    let _one_operator = support::operator_lock();
    let ns = lane.namespace("lane-local", &[]);
    let ns = ns.name.clone();
    let f = Fixture::empty();
    f.write("examples.yaml", &support::examples_in(&ns));

    // Records served by the pods the StatefulSet controller created.
    let local = start(&lane, &f);
    let s = local.wait_status_for("everything Ready", STARTUP, |s| ready_in(s, &ns));
    e2e::assert_serves_all(&local, &only(&s, &ns), "example", &f.dir);
    let owner = lane.get(&ns, "pod", "example-0").expect("pod example-0");
    assert_eq!(
        owner["metadata"]["ownerReferences"][0]["kind"], "StatefulSet",
        "the pod comes from the StatefulSet controller"
    );
    support::say(&format!(
        "realapi: local --kubeconfig serves the examples on {} pods",
        s.pods.len()
    ));

    // A batch of DNSRecords, and local mode restarted in the middle of it.
    let batch: String = (0..BATCH)
        .map(|i| support::txt_record(&ns, &format!("batch-{i}"), &format!("b{i}")))
        .collect::<Vec<_>>()
        .join("---\n");
    f.write("batch.yaml", &batch);
    let batch_in_api = || {
        lane.list(&ns, "dnsrecords")
            .into_iter()
            .filter(|r| {
                r["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("batch-"))
            })
            .collect::<Vec<_>>()
    };
    // SIGTERM as soon as the first of the batch reaches the API server:
    // local mode is still applying the rest and has reconciled little.
    let at_stop = wait_for(
        "part of the batch in the API server",
        Duration::from_secs(30),
        || Some(batch_in_api()).filter(|b| !b.is_empty()),
        || local.diagnostics(),
    );
    let status = local.stop();
    assert!(status.success(), "local exited {status}");
    let ready_at_stop = at_stop
        .iter()
        .filter(|r| r["status"]["phase"] == "Ready")
        .count();
    support::say(&format!(
        "realapi: local stopped mid-batch: {} of {BATCH} DNSRecords in the API, {ready_at_stop} Ready",
        at_stop.len()
    ));
    let local = start(&lane, &f);
    let s = local.wait_status_for("everything Ready after the restart", STARTUP, |s| {
        ready_in(s, &ns)
            && s.objects
                .iter()
                .filter(|o| o.namespace == ns && o.name.starts_with("batch-"))
                .count()
                == BATCH
    });
    e2e::assert_serves_all(&local, &only(&s, &ns), "example", &f.dir);
    support::say(&format!(
        "realapi: the restarted local mode finished the batch of {BATCH}"
    ));

    // The primary pod deleted: the StatefulSet controller makes a new one,
    // local mode runs it, every record is back.
    let old = pod_uid(&lane, &ns, "example-0").unwrap();
    lane.ok(&["delete", "pod", "example-0", "-n", &ns, "--wait=false"]);
    wait_for(
        "a new example-0 from the StatefulSet controller",
        support::WAIT,
        || pod_uid(&lane, &ns, "example-0").filter(|u| *u != old),
        || local.diagnostics(),
    );
    let s = local.wait_status_for("everything Ready on the new primary", STARTUP, |s| {
        ready_in(s, &ns)
    });
    e2e::assert_serves_all(&local, &only(&s, &ns), "example", &f.dir);
    support::say("realapi: primary pod deleted; every record back");

    // Local mode exits: the pods it ran are gone from the API, and nothing
    // left there says Running or Ready (the StatefulSet controller makes new,
    // Pending pods: nobody runs them now).
    let ran: Vec<(String, String)> = only(&s, &ns)
        .pods
        .iter()
        .map(|p| (p.name.clone(), pod_uid(&lane, &ns, &p.name).unwrap()))
        .collect();
    let status = local.stop();
    assert!(status.success(), "local exited {status}");
    for (name, uid) in &ran {
        assert_ne!(
            pod_uid(&lane, &ns, name).as_deref(),
            Some(uid.as_str()),
            "pod {name} that local mode ran is still in the API after it exited"
        );
    }
    for pod in lane.list(&ns, "pods") {
        let name = pod["metadata"]["name"].as_str().unwrap();
        let ready = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(!ready, "pod {name} still Ready after local exited: {pod}");
        assert_ne!(pod["status"]["phase"], "Running", "pod {name}: {pod}");
    }
    support::say(&format!(
        "realapi: local exited; its {} pods are gone from the API",
        ran.len()
    ));
}
