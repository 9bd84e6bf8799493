//! Another client's data hiding a DNSRecord (issue 23, item 2), on the
//! real binary's `local` mode and real named: a CNAME written with
//! nsupdate at a name, or an NS delegation above it, and then a DNSRecord
//! there. BIND drops the record's add (NOERROR) or resolvers get the
//! referral, so the record is not Ready: `ForeignConflict` naming the
//! other RRset, and dig shows what a resolver gets. Once the other data is
//! gone the record is written.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::support_e2e as support;

use bind_operator::local::report::{ObjectStatus, Snapshot};
use support::{Fixture, Local, dig, nsupdate, pods_of, record, wait_answer};

const MATERIAL: [u8; 32] = [0x33; 32];

fn row<'a>(s: &'a Snapshot, name: &str) -> Option<&'a ObjectStatus> {
    s.objects.iter().find(|o| o.name == name)
}

/// examples/ with the update key's material from a Secret, so the test
/// writes as another client with the same key.
fn start() -> (Fixture, Local, String) {
    let f = Fixture::examples();
    let keys = f.read("bindtsigkeys.yaml").replace(
        "  keyName: update-key\n",
        "  keyName: update-key\n  secretRef:\n    name: update-key-material\n",
    );
    f.write("bindtsigkeys.yaml", &keys);
    let material = STANDARD.encode(MATERIAL);
    f.write(
        "update-key-secret.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: update-key-material\ntype: Opaque\ndata:\n  secret: {}\n",
            STANDARD.encode(&material)
        ),
    );
    let local = f.start(&[]);
    local.wait_all_ready();
    (f, local, format!("hmac-sha256:update-key:{material}"))
}

fn foreign_conflict(local: &Local, name: &str, other: &str) {
    let s = local.wait_status("the record refused for the foreign data", |s| {
        row(s, name).is_some_and(|o| !o.ready && o.reason == "ForeignConflict")
    });
    let msg = &row(&s, name).unwrap().message;
    assert!(msg.contains(other), "{msg}");
}

#[test]
fn another_clients_cname_hides_a_dnsrecord_until_it_is_removed() {
    let (f, local, key) = start();
    let s = local.status().unwrap();
    let primary = support::primary(&s, "example").dns.port();
    let ports: Vec<u16> = pods_of(&s, "example")
        .iter()
        .map(|p| p.dns.port())
        .collect();
    let name = "shadow.example.com.";
    nsupdate(
        primary,
        &key,
        &[&format!(
            "update add {name} 300 CNAME elsewhere.example.org."
        )],
    )
    .unwrap();
    f.write(
        "shadow.yaml",
        &record("shadow", "shadow", "A", &["192.0.2.60"]),
    );
    foreign_conflict(&local, "shadow", "shadow.example.com. CNAME");
    for p in &ports {
        wait_answer(
            *p,
            name,
            "CNAME",
            &["elsewhere.example.org.".into()],
            &local,
        );
    }
    assert!(!dig(primary, name, "A").contains(&"192.0.2.60".to_string()));

    // The other client's CNAME goes: the record is written and Ready.
    nsupdate(primary, &key, &[&format!("update delete {name} CNAME")]).unwrap();
    f.write(
        "shadow.yaml",
        &record("shadow", "shadow", "A", &["192.0.2.61"]),
    );
    local.wait_status("the record Ready", |s| {
        row(s, "shadow").is_some_and(|o| o.ready)
    });
    for p in &ports {
        wait_answer(*p, name, "A", &["192.0.2.61".into()], &local);
    }
    assert!(local.stop().success());
}

#[test]
fn another_clients_delegation_above_a_dnsrecord_is_reported() {
    let (f, local, key) = start();
    let s = local.status().unwrap();
    let primary = support::primary(&s, "example").dns.port();
    nsupdate(
        primary,
        &key,
        &["update add sub.example.com. 300 NS ns.elsewhere.example.org."],
    )
    .unwrap();
    f.write(
        "deep.yaml",
        &record("deep", "www.sub", "A", &["192.0.2.62"]),
    );
    foreign_conflict(&local, "deep", "sub.example.com. NS");
    // A resolver gets the referral, not the address.
    assert!(dig(primary, "www.sub.example.com.", "A").is_empty());
    assert!(local.stop().success());
}
