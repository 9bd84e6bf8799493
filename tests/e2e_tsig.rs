//! A BindTSIGKey whose material comes from a Secret in the manifest
//! directory: changing the Secret's file reaches every pod's keys.conf,
//! named loads it, and updates keep working: the operator's own (a new
//! DNSRecord file) and a client's signed with the new key, while the old
//! key is refused.

use crate::support_e2e as support;

use std::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use support::{Fixture, Local, WAIT, keys_conf, nsupdate, pods_of, record, wait_answer};

/// Base64 key material (what BIND's `secret` holds) from a seed byte.
fn material(seed: u8) -> String {
    STANDARD.encode([seed; 32])
}

/// The Secret manifest holding `material` under the default key `secret`.
fn secret(material: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: update-key-material\ntype: Opaque\ndata:\n  secret: {}\n",
        STANDARD.encode(material)
    )
}

fn wait_keys_conf(local: &Local, pods: &[String], has: &str, lacks: &str) {
    let deadline = Instant::now() + WAIT;
    for pod in pods {
        loop {
            let text = keys_conf(local, pod);
            if text.contains(has) && !text.contains(lacks) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{pod}: keys.conf never held the new key\n{}",
                local.diagnostics()
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

#[test]
fn tsig_key_change_reaches_keys_conf_and_updates_keep_working() {
    let (old, new) = (material(0x11), material(0x22));
    let f = Fixture::examples();
    let keys = f.read("bindtsigkeys.yaml").replace(
        "  keyName: update-key\n",
        "  keyName: update-key\n  secretRef:\n    name: update-key-material\n",
    );
    assert!(keys.contains("secretRef"));
    f.write("bindtsigkeys.yaml", &keys);
    f.write("update-key-secret.yaml", &secret(&old));

    let local = f.start(&[]);
    let snapshot = local.wait_all_ready();
    let pods: Vec<String> = pods_of(&snapshot, "example")
        .iter()
        .map(|p| p.name.clone())
        .collect();
    let ports: Vec<u16> = pods_of(&snapshot, "example")
        .iter()
        .map(|p| p.dns.port())
        .collect();
    let primary = support::primary(&snapshot, "example").dns.port();
    wait_keys_conf(&local, &pods, &old, &new);

    // A client signing with the key can update the zone.
    let with = |m: &str| format!("hmac-sha256:update-key:{m}");
    let direct = "direct.example.com.";
    nsupdate(
        primary,
        &with(&old),
        &[&format!("update add {direct} 300 A 192.0.2.90")],
    )
    .unwrap();
    for port in &ports {
        wait_answer(*port, direct, "A", &["192.0.2.90".into()], &local);
    }

    f.write("update-key-secret.yaml", &secret(&new));
    wait_keys_conf(&local, &pods, &new, &old);

    // named loaded the new key: it signs, the old one is refused.
    let deadline = Instant::now() + WAIT;
    let replace = [
        format!("update delete {direct} A"),
        format!("update add {direct} 300 A 192.0.2.91"),
    ];
    let replace: Vec<&str> = replace.iter().map(String::as_str).collect();
    while let Err(e) = nsupdate(primary, &with(&new), &replace) {
        assert!(
            Instant::now() < deadline,
            "update signed with the new key: {e}\n{}",
            local.diagnostics()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let refused = nsupdate(
        primary,
        &with(&old),
        &["update add old.example.com. 300 A 192.0.2.92"],
    );
    assert!(refused.is_err(), "the old key must be refused");
    for port in &ports {
        wait_answer(*port, direct, "A", &["192.0.2.91".into()], &local);
    }

    // The operator's own updates use the new key too.
    f.write("api.yaml", &record("api", "api", "A", &["192.0.2.20"]));
    for port in &ports {
        wait_answer(
            *port,
            "api.example.com.",
            "A",
            &["192.0.2.20".into()],
            &local,
        );
    }
    for port in &ports {
        wait_answer(*port, "old.example.com.", "A", &[], &local);
    }
    let after = local.wait_status("everything Ready with the new key", support::all_ready);
    assert!(after.objects.iter().all(|o| o.ready));
    assert!(local.stop().success());
}
