//! Catalog consumers: two BindClusters in one local mode, B consuming A's
//! catalog. B's pods answer every zone of A; a zone added to A is served by
//! B and a zone deleted from A disappears from B, with nothing applied on
//! B.

use std::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::support_e2e as support;

use support::{Fixture, dig, pods_of, wait_answer};

const XFER: &str = "c2hhcmVkLXRyYW5zZmVyLWtleS0wMTIzNDU2Nzg5YWI=";

fn zone(obj: &str, name: &str, addr: &str) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: {obj}\nspec:\n  clusterRef: a\n  zoneName: {name}\n  updateKeyRef: upd-a\n  nameservers: [ns1.example.net.]\n  records:\n    - name: www\n      type: A\n      values: ['{addr}']\n"
    )
}

fn source() -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: shared-xfer\ntype: Opaque\ndata:\n  secret: {}\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: xfer\nspec:\n  clusterRef: a\n  secretRef:\n    name: shared-xfer\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: upd-a\nspec:\n  clusterRef: a\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: a\nspec:\n  replicas: 1\n  catalog:\n    transferKeyRef: xfer\n",
        STANDARD.encode(XFER)
    )
}

fn consumer(primary: u16) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: xfer-from-a\nspec:\n  clusterRef: b\n  keyName: xfer\n  secretRef:\n    name: shared-xfer\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: b\nspec:\n  replicas: 2\n  catalogConsumers:\n    - catalogZone: a.default.catalog.invalid\n      primaries:\n        - {{address: 127.0.0.1, port: {primary}}}\n      transferKeyRef: xfer-from-a\n"
    )
}

#[test]
fn a_consumer_serves_every_zone_of_the_source_catalog_and_follows_it() {
    let f = Fixture::empty();
    f.write("a.yaml", &source());
    f.write("a1.yaml", &zone("a1", "a1.example", "192.0.2.1"));
    f.write("a2.yaml", &zone("a2", "a2.example", "192.0.2.2"));
    let local = f.start(&[]);
    let first = local.wait_all_ready();
    let primary = support::primary(&first, "a").dns.port();

    // B is created afterwards (its manifest names A's primary port).
    f.write("b.yaml", &consumer(primary));
    let ready = local.wait_status_for("cluster b ready", support::STARTUP, |s| {
        support::all_ready(s) && pods_of(s, "b").len() == 2
    });
    let b_ports: Vec<u16> = pods_of(&ready, "b").iter().map(|p| p.dns.port()).collect();
    for port in &b_ports {
        wait_answer(*port, "www.a1.example.", "A", &["192.0.2.1".into()], &local);
        wait_answer(*port, "www.a2.example.", "A", &["192.0.2.2".into()], &local);
    }

    // A zone added on A: served by B.
    let added = Instant::now();
    f.write("a3.yaml", &zone("a3", "a3.example", "192.0.2.3"));
    for port in &b_ports {
        wait_answer(*port, "www.a3.example.", "A", &["192.0.2.3".into()], &local);
    }
    eprintln!(
        "new zone on A served by both pods of B after {:.2} s",
        added.elapsed().as_secs_f64()
    );

    // A zone deleted from A: gone from B.
    f.remove("a2.yaml");
    for port in &b_ports {
        wait_answer(*port, "www.a2.example.", "A", &[], &local);
        assert!(dig(*port, "a2.example.", "SOA").is_empty());
    }
    // The others stay.
    for port in &b_ports {
        assert_eq!(dig(*port, "www.a1.example.", "A"), vec!["192.0.2.1"]);
    }
    assert!(local.stop().success());
}
