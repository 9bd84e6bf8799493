//! Issue 23 item 4, the whole `spec.catalog` block: a block that names
//! the catalog zone cannot be added or removed (a CEL rule, see
//! `api_validation`), but one with only `transferKeyRef` may come and go,
//! which changes the key the primary and the secondaries transfer with
//! (the cluster's own generated key instead of the user's). On the real
//! binary's `local` mode and real named: after each change every pod still
//! answers every record, and a record added afterwards reaches the
//! secondary, so no secondary is left without its zones while Ready.

use crate::support_e2e as support;

use support::{Fixture, Local, assert_serves_all, pods_of, record, wait_answer};

/// Adds DNSRecord `name` (A `value`) and waits until every pod answers it
/// and every object is Ready.
fn reaches_every_pod(f: &Fixture, local: &Local, name: &str, value: &str) {
    f.write(&format!("{name}.yaml"), &record(name, name, "A", &[value]));
    let s = local.wait_status("the new record Ready", |s| {
        support::all_ready(s) && s.objects.iter().any(|o| o.name == name && o.ready)
    });
    for p in pods_of(&s, "example") {
        wait_answer(
            p.dns.port(),
            &format!("{name}.example.com."),
            "A",
            &[value.to_string()],
            local,
        );
    }
    assert_serves_all(local, &s, "example", &f.dir);
}

#[test]
fn a_catalog_block_without_zone_name_comes_and_goes_and_secondaries_keep_serving() {
    let f = Fixture::examples();
    let local = f.start(&[]);
    let s = local.wait_all_ready();
    assert_serves_all(&local, &s, "example", &f.dir);
    let original = f.read("bindcluster.yaml");
    assert!(original.contains("  catalog:\n    transferKeyRef: transfer-key\n"));

    // Removed: the cluster's generated transfer key takes over.
    f.write(
        "bindcluster.yaml",
        &original.replace("  catalog:\n    transferKeyRef: transfer-key\n", ""),
    );
    reaches_every_pod(&f, &local, "after-removal", "192.0.2.201");

    // Added back: the user's key again.
    f.write("bindcluster.yaml", &original);
    reaches_every_pod(&f, &local, "after-adding", "192.0.2.202");
    assert!(local.stop().success());
}
