//! The seam end to end: the real controllers (`controller::run`) with the
//! local executor and network, and the local runtime playing StatefulSet
//! controller and kubelet, all on one in-memory API. A BindCluster becomes
//! pods whose named answers on their own ports; the per-pod reconfig runs
//! through the local executor against those named and is recorded once.

use crate::support_local as support;

use std::sync::Arc;

use bind_operator::api::{
    BindCluster, BindClusterSpec, BindTSIGKey, BindTSIGKeySpec, CatalogSpec, find_condition,
};
use bind_operator::controller;
use kube::Api;
use kube::api::PostParams;
use support::{Harness, NS, version_bind, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_cluster_runs_on_local_pods_and_reconfigs_once_per_config() {
    let h = Harness::start(|_| {}).await;
    h.api.register_custom::<BindCluster>();
    h.api.register_custom::<BindTSIGKey>();
    h.api.register_custom::<bind_operator::api::BindZone>();
    h.api.register_custom::<bind_operator::api::DNSRecord>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(controller::run(
        h.client.clone(),
        Arc::new(h.runtime.executor()),
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
        // The primary also reconfigs once for its NOTIFY targets.
        let want = if p.ordinal == 0 { 2 } else { 1 };
        assert_eq!(reconfigs, want, "{}: {log}", p.name);
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
