//! The local executor and network seam with real named: the BIND layer's
//! command builders, run through the controllers' `PodExecutor` trait
//! against local pods, add the catalog zone on the primary, and the
//! secondary — which reaches the primary where `Network` says — transfers
//! it after a signed NOTIFY. Failures carry exit code and stderr.

use crate::support_local as support;

use bind_operator::bind::ZoneName;
use bind_operator::bind::commands::{
    self, addzone, config_hash, read_mounted_config, write_notify_targets, write_zone_file,
    zonestatus,
};
use bind_operator::bind::zone::{catalog_primary_zone, catalog_skeleton};
use bind_operator::controller::{ExecError, Network, PodExecutor, PodRef};
use k8s_openapi::api::core::v1::Service;
use support::{CATALOG, Harness, NS, dig, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_commands_reach_local_named_and_secondaries_follow_the_primary() {
    let h = Harness::start(|_| {}).await;
    let objects = h.create_cluster(2).await;
    let secondary_pod = h.ready_pod("dns-1").await;
    h.ready_pod("dns-0").await;
    let exec = h.runtime.executor();
    let net = h.runtime.network();
    let (p0, p1) = (PodRef::new(NS, "dns-0"), PodRef::new(NS, "dns-1"));

    // The seam: layouts and endpoints agree with the runtime's ports.
    let l0 = exec.layout(&p0);
    let l1 = exec.layout(&p1);
    assert_eq!(l0, h.runtime.layout(NS, "dns-0").unwrap());
    assert_eq!(l0.dns_port, h.dns_port("dns-0"));
    let primary = net.primary_endpoint(&p0, &Service::default()).unwrap();
    assert_eq!(primary.to_string(), format!("127.0.0.1:{}", l0.dns_port));
    let secondary = net.pod_dns_endpoint(&secondary_pod).unwrap();
    assert_eq!(secondary.port, l1.dns_port);

    // The mounted config is what the objects say, byte for byte.
    let mounted = exec.exec(&p1, &read_mounted_config(&l1)).await.unwrap();
    let data = objects.config.data.as_ref().unwrap();
    let keys =
        String::from_utf8(objects.keys.data.as_ref().unwrap()["keys.conf"].0.clone()).unwrap();
    assert_eq!(
        config_hash(&mounted.stdout, ""),
        config_hash(&data["named.conf.secondary"], &keys)
    );

    // What the zone reconciler would do on the primary.
    let xfer = &objects.transfer_key.name;
    let catalog = ZoneName::parse(CATALOG).unwrap();
    exec.exec(&p0, &write_notify_targets(&l0, &[secondary], xfer, &[]))
        .await
        .unwrap();
    let zone = catalog_primary_zone(&catalog, None, xfer);
    let text = catalog_skeleton(&catalog, 1).render();
    exec.exec(&p0, &write_zone_file(&l0, &zone.file(), &text))
        .await
        .unwrap();
    exec.exec(&p0, &addzone(&l0, &catalog, None, &zone.clause()))
        .await
        .unwrap();
    let soa = dig(l0.dns_port, &[CATALOG, "SOA"]).await;
    assert!(
        soa.starts_with("invalid. invalid. 1 "),
        "primary SOA: {soa:?}"
    );
    exec.exec(&p0, &commands::reconfig(&l0)).await.unwrap();

    // The secondary learns it from the primary at the local endpoint.
    wait_for("catalog on the secondary", || async {
        (!dig(l1.dns_port, &[CATALOG, "SOA"]).await.is_empty()).then_some(())
    })
    .await;

    // A failing command: exit code and stderr, no stdin.
    let missing = ZoneName::parse("missing.example").unwrap();
    match exec.exec(&p0, &zonestatus(&l0, &missing, None)).await {
        Err(ExecError::Exited { code, stderr, .. }) => {
            assert_ne!(code, 0);
            assert!(stderr.contains("not found"), "stderr: {stderr}");
        }
        other => panic!("expected a failed command, got {other:?}"),
    }
    let gone = PodRef::new(NS, "dns-7");
    assert!(matches!(
        exec.exec(&gone, &commands::reconfig(&exec.layout(&gone)))
            .await,
        Err(ExecError::Transport { .. })
    ));
    h.finish().await;
}
