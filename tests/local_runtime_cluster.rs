//! The seam end to end: the real controllers (`controller::run`) with the
//! local executor and network, and the local runtime playing StatefulSet
//! controller and kubelet, all on one in-memory API. A BindCluster becomes
//! pods whose named answers on their own ports; the per-pod reconfig runs
//! through the local executor against those named and is recorded once.
//! A new cluster's setup costs one exec per pod for the reconfig step and
//! one for the primary's NOTIFY list, counted through an observing
//! executor; a config whose mount has not caught up is checked but not
//! reconfigured (named's log shows no reconfig) until it has.

use crate::support_local as support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bind_operator::api::{
    BindCluster, BindClusterSpec, BindTSIGKey, BindTSIGKeySpec, CatalogSpec, find_condition,
};
use bind_operator::bind::KeyName;
use bind_operator::bind::commands::{WhenMounted, parse_reconfig_when_mounted};
use bind_operator::controller;
use bind_operator::controller::bindcluster::reconfig::sync_notify_targets;
use bind_operator::controller::memo::NotifyMemo;
use bind_operator::controller::{Network, ObservedExecutor, PodExecutor, PodRef};
use kube::Api;
use kube::api::PostParams;
use support::{Harness, NS, version_bind, wait_for};

/// The real controllers on `executor`, and the BindCluster `c` (two pods,
/// a catalog with transfer key `xfer`) with both pods Ready: the way to
/// stop the controllers, and their task.
async fn cluster_of_two(
    h: &Harness,
    executor: Arc<dyn PodExecutor>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    h.api.register_custom::<BindCluster>();
    h.api.register_custom::<BindTSIGKey>();
    h.api.register_custom::<bind_operator::api::BindZone>();
    h.api.register_custom::<bind_operator::api::DNSRecord>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(controller::run(
        h.client.clone(),
        executor,
        Arc::new(h.runtime.network()),
        async move {
            let _ = stopped.await;
        },
    ));

    let mut key = BindTSIGKey::new("xfer", BindTSIGKeySpec::default());
    key.metadata.namespace = Some(NS.into());
    Api::<BindTSIGKey>::namespaced(h.client.clone(), NS)
        .create(&PostParams::default(), &key)
        .await
        .unwrap();
    let mut cluster = BindCluster::new(
        "c",
        BindClusterSpec {
            replicas: 2,
            catalog: Some(CatalogSpec {
                zone_name: None,
                transfer_key_ref: Some("xfer".into()),
            }),
            ..Default::default()
        },
    );
    cluster.metadata.namespace = Some(NS.into());
    Api::<BindCluster>::namespaced(h.client.clone(), NS)
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();

    h.ready_pod("c-0").await;
    h.ready_pod("c-1").await;
    (stop, manager)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_cluster_runs_on_local_pods_and_reconfigs_once_per_config() {
    let h = Harness::start(|_| {}).await;
    let (stop, manager) = cluster_of_two(&h, Arc::new(h.runtime.executor())).await;
    let applied = wait_for("ConfigApplied True on both pods", || async {
        let c: BindCluster = h.api.get(Some(NS), "c")?;
        let status = c.status?;
        let cond = find_condition(&status.conditions, "ConfigApplied")?;
        (cond.status == "True" && status.applied_config.len() == 2).then_some(status.applied_config)
    })
    .await;
    assert!(applied.contains_key("c-0") && applied.contains_key("c-1"));
    for p in h.runtime.pods() {
        assert_eq!(p.cluster, "c");
        assert!(version_bind(p.dns.port()).await.contains("9."));
        assert_eq!(p.restarts, 0);
        let log = std::fs::read_to_string(&p.log).unwrap();
        let reconfigs = log
            .lines()
            .filter(|l| l.contains("received control channel command 'reconfig'"))
            .count();
        // The primary's reconfig writes its NOTIFY list too; a second one
        // only when the secondary had no endpoint yet at that moment.
        let want = if p.ordinal == 0 { 1..=2 } else { 1..=1 };
        assert!(
            want.contains(&reconfigs),
            "{}: {reconfigs} reconfigs: {log}",
            p.name
        );
    }
    // The primary NOTIFYs the secondary at its local port.
    let notify =
        std::fs::read_to_string(h.runtime.dirs(NS, "c-0").data.join("notify-targets.conf"))
            .unwrap();
    let secondary_port = h.dns_port("c-1");
    assert!(
        notify.contains(&format!("127.0.0.1 port {secondary_port}")),
        "{notify}"
    );
    // The secondaries point at the primary's local port.
    let primary_port = h.dns_port("c-0");
    let secondary_conf =
        std::fs::read_to_string(h.runtime.dirs(NS, "c-1").data.join("named.conf")).unwrap();
    assert!(
        secondary_conf.contains(&format!("127.0.0.1 port {primary_port}")),
        "{secondary_conf}"
    );

    let _ = stop.send(());
    manager.await.unwrap();
    h.finish().await;
}

/// How many `rndc reconfig` a local pod's named received.
fn named_reconfigs(h: &Harness, pod: &str) -> usize {
    let p = h
        .runtime
        .pods()
        .into_iter()
        .find(|p| p.name == pod)
        .unwrap_or_else(|| panic!("no local pod {pod}"));
    std::fs::read_to_string(&p.log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("received control channel command 'reconfig'"))
        .count()
}

/// Every exec: pod, verb, and for the reconfig step what it reported.
type Execs = Arc<Mutex<Vec<(String, &'static str, Option<WhenMounted>)>>>;

fn count(execs: &Execs, from: usize) -> BTreeMap<(String, &'static str), usize> {
    let mut by = BTreeMap::new();
    for (pod, verb, _) in execs.lock().unwrap()[from..].iter() {
        *by.entry((pod.clone(), *verb)).or_default() += 1;
    }
    by
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_clusters_setup_is_one_exec_per_pod_and_a_stale_mount_is_not_reconfigured() {
    // A changed ConfigMap reaches the running pods this long after the
    // change, so the reconfig step meets a mount that has not caught up.
    let h = Harness::start(|c| c.propagation_delay = Duration::from_secs(4)).await;
    let execs: Execs = Arc::default();
    let log = execs.clone();
    let observed = ObservedExecutor::new(
        Arc::new(h.runtime.executor()),
        move |pod, cmd, result, _| {
            let stdout = match result {
                Ok(o) => o.stdout.as_str(),
                Err(e) => e.stdout(),
            };
            let outcome = (cmd.verb() == "reconfig")
                .then(|| parse_reconfig_when_mounted(stdout))
                .flatten();
            log.lock()
                .unwrap()
                .push((pod.name.clone(), cmd.verb(), outcome));
        },
    );
    let observed: Arc<dyn PodExecutor> = Arc::new(observed);
    let (stop, manager) = cluster_of_two(&h, observed).await;
    let secondary = format!("127.0.0.1 port {}", h.dns_port("c-1"));
    let notify_file = h.runtime.dirs(NS, "c-0").data.join("notify-targets.conf");
    let first = wait_for("config applied on both pods and NOTIFY set", || async {
        let c: BindCluster = h.api.get(Some(NS), "c")?;
        let status = c.status?;
        let cond = find_condition(&status.conditions, "ConfigApplied")?;
        let notify = std::fs::read_to_string(&notify_file).ok()?;
        (cond.status == "True" && status.applied_config.len() == 2 && notify.contains(&secondary))
            .then_some(status.applied_config)
    })
    .await;

    // The whole setup: one exec per pod for the reconfig step, one for
    // the primary's NOTIFY list (it was 8: a read of the mount, a
    // reconfig and, on the primary, an include check, a read and a write
    // of the list).
    let setup = count(&execs, 0);
    let want = BTreeMap::from([
        (("c-0".to_string(), "reconfig"), 1),
        (("c-0".to_string(), "write_notify_targets"), 1),
        (("c-1".to_string(), "reconfig"), 1),
    ]);
    assert_eq!(setup, want, "{:?}", execs.lock().unwrap());
    // named loaded the config once per pod; the primary's NOTIFY list was
    // written by that reconfig, or (the secondary had no endpoint yet)
    // by the NOTIFY step with one reconfig more.
    let setup_reloads = named_reconfigs(&h, "c-0");
    assert!((1..=2).contains(&setup_reloads), "{setup_reloads}");
    assert_eq!(named_reconfigs(&h, "c-1"), 1);

    // An operator that does not remember the list (after a restart): one
    // exec finds it current, writes nothing and does not reconfig.
    let secondary_pod = h.ready_pod("c-1").await;
    let target = h
        .runtime
        .network()
        .pod_dns_endpoint(&secondary_pod)
        .unwrap();
    let changed = sync_notify_targets(
        &h.runtime.executor(),
        &NotifyMemo::default(),
        &PodRef::new(NS, "c-0"),
        "a restarted operator",
        &[target],
        &KeyName::parse("xfer").unwrap(),
        &[],
        &[],
    )
    .await;
    assert_eq!(changed, Ok(false));
    assert_eq!(
        named_reconfigs(&h, "c-0"),
        setup_reloads,
        "an unchanged list reconfigured"
    );

    // A change whose mount has not caught up: checked, not reconfigured.
    let seen = execs.lock().unwrap().len();
    let change = serde_json::json!({"spec": {"forwarders": ["192.0.2.53"]}});
    Api::<BindCluster>::namespaced(h.client.clone(), NS)
        .patch(
            "c",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&change),
        )
        .await
        .unwrap();
    wait_for("the stale mount reported as propagating", || async {
        let c: BindCluster = h.api.get(Some(NS), "c")?;
        let status = c.status?;
        let cond = find_condition(&status.conditions, "ConfigApplied")?;
        (cond.status == "False" && cond.reason == "Propagating").then_some(())
    })
    .await;
    // The config-hash annotation makes the mount catch up within moments,
    // so by now an exec may already have found a pod's mount current (and
    // one may be reconfiguring it right now): here only that the stale
    // mount was checked and nothing failed. A reconfig of a stale mount
    // would show below as a reload more than the one per pod the change
    // needs.
    let stale: Vec<_> = execs.lock().unwrap()[seen..]
        .iter()
        .filter(|(_, verb, _)| *verb == "reconfig")
        .map(|(pod, _, outcome)| (pod.clone(), *outcome))
        .collect();
    assert!(
        stale
            .iter()
            .any(|(_, o)| *o == Some(WhenMounted::NotMounted)),
        "the stale mount was not checked: {stale:?}"
    );
    assert!(
        stale
            .iter()
            .all(|(_, o)| *o != Some(WhenMounted::ReconfigFailed)),
        "{stale:?}"
    );

    // Once the mount caught up: exactly one reconfig per pod.
    wait_for("the change applied on both pods", || async {
        let c: BindCluster = h.api.get(Some(NS), "c")?;
        let status = c.status?;
        let cond = find_condition(&status.conditions, "ConfigApplied")?;
        (cond.status == "True"
            && status.applied_config.len() == 2
            && status
                .applied_config
                .iter()
                .all(|(p, hash)| first[p] != *hash))
        .then_some(())
    })
    .await;
    assert_eq!(
        named_reconfigs(&h, "c-0"),
        setup_reloads + 1,
        "not exactly one reload for the change (a stale mount reconfigured?)"
    );
    assert_eq!(
        named_reconfigs(&h, "c-1"),
        2,
        "not exactly one reload for the change (a stale mount reconfigured?)"
    );
    let after = count(&execs, seen);
    assert!(
        !after.contains_key(&("c-0".to_string(), "write_notify_targets")),
        "the remembered NOTIFY list was written again: {after:?}"
    );

    let _ = stop.send(());
    manager.await.unwrap();
    h.finish().await;
}
