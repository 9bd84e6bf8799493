//! Editing the manifest directory of a running `bind-operator local`: a
//! DNSRecord file added, changed and deleted shows on every pod, and the
//! records nobody touched keep answering throughout.

use crate::support_e2e as support;

use support::{Fixture, assert_serves_all, dig, pods_of, record, wait_answer};

#[test]
fn record_files_added_changed_and_deleted_reach_every_pod() {
    let f = Fixture::examples();
    let local = f.start(&[]);
    let snapshot = local.wait_all_ready();
    let ports: Vec<u16> = pods_of(&snapshot, "example")
        .iter()
        .map(|p| p.dns.port())
        .collect();
    assert_eq!(ports.len(), 2);
    let name = "api.example.com.";
    assert!(ports.iter().all(|p| dig(*p, name, "A").is_empty()));

    f.write("api.yaml", &record("api", "api", "A", &["192.0.2.20"]));
    for port in &ports {
        wait_answer(*port, name, "A", &["192.0.2.20".into()], &local);
    }

    f.write(
        "api.yaml",
        &record("api", "api", "A", &["192.0.2.21", "192.0.2.22"]),
    );
    for port in &ports {
        wait_answer(
            *port,
            name,
            "A",
            &["192.0.2.21".into(), "192.0.2.22".into()],
            &local,
        );
    }

    f.remove("api.yaml");
    for port in &ports {
        wait_answer(*port, name, "A", &[], &local);
    }
    // Untouched records never went away.
    assert_serves_all(&local, &snapshot, "example", &f.dir);
    let after = local.wait_status("the deleted record gone from the status", |s| {
        s.converged && s.objects.iter().all(|o| o.name != "api")
    });
    assert!(after.objects.iter().all(|o| o.ready), "{after:?}");
    assert!(local.stop().success());
}
