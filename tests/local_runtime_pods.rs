//! The local runtime as kubelet and StatefulSet controller, with real named:
//! pods from a StatefulSet, Ready only when named answers, scale down,
//! ConfigMap changes through the `..data` swap, re-creation on template
//! change and pod deletion, container restarts on kept or empty data, and
//! no named left behind.

use crate::support_local as support;

use std::path::Path;
use std::time::Duration;

use bind_operator::local::runtime::{
    DATA_DIR_LINK, POD_NAME_LABEL, PodRole, REVISION_LABEL, RestartData,
};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::{Harness, NS, dig, pod_ready, restart_count, version_bind, wait_for};

fn uid(p: &k8s_openapi::api::core::v1::Pod) -> String {
    p.metadata.uid.clone().unwrap()
}

fn pid(p: &k8s_openapi::api::core::v1::Pod) -> u32 {
    let id = p
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .container_id
        .clone()
        .unwrap();
    id.strip_prefix("local://").unwrap().parse().unwrap()
}

fn alive(pid: u32) -> bool {
    // A reaped process leaves no /proc entry; a zombie is not running named.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_pods_run_named_go_ready_and_scale_down() {
    let h = Harness::start(|_| {}).await;
    h.create_cluster(2).await;
    let p0 = h.ready_pod("dns-0").await;
    let p1 = h.ready_pod("dns-1").await;

    let labels = p1.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[POD_NAME_LABEL], "dns-1");
    assert_eq!(labels["app"], "dns");
    assert!(labels[REVISION_LABEL].starts_with("dns-"));
    assert_eq!(
        p1.metadata.annotations.as_ref().unwrap()["bind.unkin.net/entrypoint-hash"],
        "v1"
    );
    let owner = &p1.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("StatefulSet", "dns")
    );
    let status = p0.status.as_ref().unwrap();
    assert_eq!(status.pod_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(status.phase.as_deref(), Some("Running"));

    // Each pod's own named answers on its own port.
    let (port0, port1) = (h.dns_port("dns-0"), h.dns_port("dns-1"));
    assert_ne!(port0, port1);
    for port in [port0, port1] {
        let v = version_bind(port).await;
        assert!(v.contains("9."), "version.bind on {port}: {v:?}");
    }
    let pods = h.runtime.pods();
    assert_eq!(pods.len(), 2);
    assert_eq!(
        (
            pods[0].name.as_str(),
            pods[0].role,
            pods[0].cluster.as_str()
        ),
        ("dns-0", PodRole::Primary, "dns")
    );
    assert_eq!(pods[1].role, PodRole::Secondary);
    assert_eq!(pods[1].dns.to_string(), format!("127.0.0.1:{port1}"));
    assert!(pods.iter().all(|p| p.ready && p.running));
    let log = std::fs::read_to_string(&pods[0].log).unwrap();
    assert!(log.contains("running"), "named log: {log}");

    let sts = h.statefulsets();
    wait_for("statefulset readyReplicas 2", || {
        let sts = sts.clone();
        async move {
            let s = sts.get("dns").await.ok()?;
            (s.status?.ready_replicas == Some(2)).then_some(())
        }
    })
    .await;

    // Scale down: pod 1 goes, and so does its named.
    sts.patch(
        "dns",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    let pods_api = h.pods();
    wait_for("dns-1 deleted", || {
        let api = pods_api.clone();
        async move { api.get_opt("dns-1").await.ok()?.is_none().then_some(()) }
    })
    .await;
    wait_for("dns-1's named gone", || async {
        (h.runtime.pod(NS, "dns-1").is_none() && version_bind(port1).await.is_empty()).then_some(())
    })
    .await;
    // dns-0 keeps serving through the scale-down (one dig can be lost to
    // load: ask until it answers).
    wait_for("dns-0 still answers", || async {
        (!version_bind(port0).await.is_empty()).then_some(())
    })
    .await;
    h.finish().await;
}

fn read_link_target(p: &Path) -> String {
    std::fs::read_link(p)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_map_change_is_swapped_in_after_the_propagation_delay() {
    let delay = Duration::from_secs(2);
    let h = Harness::start(|c| c.propagation_delay = delay).await;
    let objects = h.create_cluster(1).await;
    h.ready_pod("dns-0").await;

    let dirs = h.runtime.dirs(NS, "dns-0");
    let run_conf = dirs.data.join("named.conf");
    let old = std::fs::read_to_string(&run_conf).unwrap();
    assert_eq!(
        old,
        objects.config.data.as_ref().unwrap()["named.conf.primary"]
    );
    let first = read_link_target(&dirs.config.join(DATA_DIR_LINK));
    assert_eq!(
        read_link_target(&dirs.config.join("named.conf.primary")),
        "..data/named.conf.primary"
    );

    let new = format!("{old}# changed\n");
    let changed_at = tokio::time::Instant::now();
    h.config_maps()
        .patch(
            "dns-config",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"named.conf.primary": new}})),
        )
        .await
        .unwrap();
    // Not before the delay: the assert on `changed_at` below fails if
    // the new file showed up early.
    wait_for("new named.conf mounted", || async {
        (std::fs::read_to_string(&run_conf).ok()? == new).then_some(())
    })
    .await;
    assert!(changed_at.elapsed() >= delay);
    // A new payload dir behind ..data; the old one is gone; the run path
    // is still the same symlink chain.
    let second = read_link_target(&dirs.config.join(DATA_DIR_LINK));
    assert_ne!(first, second);
    // The writer removes the old payload right after the swap (as
    // kubelet's atomic writer does); the new file can be read in between.
    let old_payload = dirs.config.join(&first);
    wait_for("old payload dir removed", || async {
        (!old_payload.exists()).then_some(())
    })
    .await;
    assert!(std::fs::symlink_metadata(&run_conf).unwrap().is_symlink());
    assert_eq!(
        read_link_target(&dirs.config.join("named.conf.primary")),
        "..data/named.conf.primary"
    );
    // Updating the volume restarts nothing.
    let p = h.ready_pod("dns-0").await;
    assert_eq!(restart_count(&p), 0);
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_change_and_pod_deletion_recreate_the_pod() {
    let h = Harness::start(|_| {}).await;
    h.create_cluster(1).await;
    let first = h.ready_pod("dns-0").await;
    let dirs = h.runtime.dirs(NS, "dns-0");
    let marker = dirs.data.join("marker");
    std::fs::write(&marker, "x").unwrap();

    // A new template: the pod is replaced, on a fresh emptyDir.
    h.statefulsets()
        .patch(
            "dns",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {
                "bind.unkin.net/entrypoint-hash": "v2"
            }}}}})),
        )
        .await
        .unwrap();
    let api = h.pods();
    let first_uid = uid(&first);
    let second = wait_for("a new Ready dns-0", || {
        let api = api.clone();
        let old = first_uid.clone();
        async move {
            let p = api.get_opt("dns-0").await.ok()??;
            (uid(&p) != old && pod_ready(&p)).then_some(p)
        }
    })
    .await;
    assert_ne!(
        second.metadata.labels.as_ref().unwrap()[REVISION_LABEL],
        first.metadata.labels.as_ref().unwrap()[REVISION_LABEL]
    );
    assert_eq!(
        second.metadata.annotations.as_ref().unwrap()["bind.unkin.net/entrypoint-hash"],
        "v2"
    );
    assert!(!alive(pid(&first)), "old named still running");
    assert_ne!(pid(&first), pid(&second));
    assert!(!marker.exists(), "emptyDir survived pod re-creation");
    assert!(!version_bind(h.dns_port("dns-0")).await.is_empty());

    // Deleting the Pod: the StatefulSet brings it back with a new process.
    api.delete("dns-0", &DeleteParams::default()).await.unwrap();
    let second_uid = uid(&second);
    let third = wait_for("dns-0 back after delete", || {
        let api = api.clone();
        let old = second_uid.clone();
        async move {
            let p = api.get_opt("dns-0").await.ok()??;
            (uid(&p) != old && pod_ready(&p)).then_some(p)
        }
    })
    .await;
    assert!(!alive(pid(&second)));
    assert_eq!(restart_count(&third), 0);
    assert!(!version_bind(h.dns_port("dns-0")).await.is_empty());
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_restarts_on_kept_or_empty_data_and_readiness_follows_answers() {
    let h = Harness::start(|_| {}).await;
    h.create_cluster(1).await;
    let p = h.ready_pod("dns-0").await;
    let port = h.dns_port("dns-0");
    let marker = h.runtime.dirs(NS, "dns-0").data.join("marker");
    std::fs::write(&marker, "x").unwrap();
    let api = h.pods();

    // A frozen named stops answering: NotReady, then Ready once it thaws.
    let frozen = pid(&p) as libc::pid_t;
    // SAFETY: signalling a child process this test's runtime started.
    unsafe { libc::kill(frozen, libc::SIGSTOP) };
    wait_for("dns-0 NotReady while frozen", || {
        let api = api.clone();
        async move { (!pod_ready(&api.get("dns-0").await.ok()?)).then_some(()) }
    })
    .await;
    assert!(dig(port, &["version.bind", "CH", "TXT"]).await.is_empty());
    // SAFETY: as above.
    unsafe { libc::kill(frozen, libc::SIGCONT) };
    h.ready_pod("dns-0").await;

    // A crash restarts named in place: same data, restartCount 1.
    h.runtime
        .kill_named(NS, "dns-0", RestartData::Keep)
        .unwrap();
    let after_keep = wait_for("restart 1", || {
        let api = api.clone();
        async move {
            let p = api.get("dns-0").await.ok()?;
            (restart_count(&p) == 1 && pod_ready(&p)).then_some(p)
        }
    })
    .await;
    assert_eq!(uid(&after_keep), uid(&p), "a restart is not a new pod");
    assert!(!alive(pid(&p)));
    assert!(marker.exists());

    // The same on an empty volume.
    h.runtime
        .kill_named(NS, "dns-0", RestartData::Empty)
        .unwrap();
    wait_for("restart 2", || {
        let api = api.clone();
        async move {
            let p = api.get("dns-0").await.ok()?;
            (restart_count(&p) == 2 && pod_ready(&p)).then_some(())
        }
    })
    .await;
    assert!(!marker.exists());
    assert!(!version_bind(port).await.is_empty());
    assert_eq!(h.runtime.pod(NS, "dns-0").unwrap().restarts, 2);
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_runtime_kills_its_named() {
    let h = Harness::start(|_| {}).await;
    h.create_cluster(1).await;
    h.ready_pod("dns-0").await;
    let state = h.state.path().to_path_buf();
    assert_eq!(support::named_under(&state).len(), 1);
    assert_eq!(h.runtime.running_processes(), 1);
    let support::Harness {
        runtime,
        state: _keep,
        ..
    } = h;
    drop(runtime);
    wait_for("no named left", || async {
        support::named_under(&state).is_empty().then_some(())
    })
    .await;
}
