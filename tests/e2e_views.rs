//! A cluster with two views (internal: 10.0.0.0/8, external: any) serving
//! the same zone name in both with different records, through the real
//! `bind-operator local` binary and real named. Each view's key (derived
//! from the transfer key; computed here independently from the documented
//! construction) steers a query into that view on the primary and on the
//! secondary, a record change reaches the secondary's view, and a view
//! added at run time is served on both. A zone's `spec.updatePolicy`
//! grant works inside its view for a key the view's matchClients selects.

use crate::support_e2e as support;

use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};
use support::{Fixture, Local, WAIT, pods_of};

/// The transfer key's raw material, given through a Secret so the test
/// knows it.
const TRANSFER_RAW: [u8; 32] = [0x5a; 32];

const MANIFESTS: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: transfer-material
type: Opaque
data:
  secret: SECRET_B64
---
apiVersion: bind.unkin.net/v1alpha1
kind: BindTSIGKey
metadata:
  name: transfer-key
spec:
  clusterRef: example
  keyName: xfer
  algorithm: hmac-sha256
  secretRef:
    name: transfer-material
---
apiVersion: bind.unkin.net/v1alpha1
kind: BindTSIGKey
metadata:
  name: update-key
spec:
  clusterRef: example
  keyName: update-key
  algorithm: hmac-sha256
---
apiVersion: bind.unkin.net/v1alpha1
kind: BindCluster
metadata:
  name: example
spec:
  replicas: 2
  allowQuery: [any]
  views:
    - name: internal
      matchClients: [10.0.0.0/8]
      matchDestinations: [10.0.0.0/8]
    - name: external
  catalog:
    transferKeyRef: transfer-key
---
apiVersion: bind.unkin.net/v1alpha1
kind: BindZone
metadata:
  name: ext
spec:
  clusterRef: example
  zoneName: example.com
  view: external
  nameservers: [ns1.example.net.]
  updateKeyRef: update-key
---
apiVersion: bind.unkin.net/v1alpha1
kind: BindZone
metadata:
  name: int
spec:
  clusterRef: example
  zoneName: example.com
  view: internal
  nameservers: [ns1.example.net.]
  updateKeyRef: update-key
"#;

fn record(name: &str, zone: &str, value: &str) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: {name}\nspec:\n  zoneRef: {zone}\n  name: www\n  type: A\n  values: ['{value}']\n"
    )
}

/// `name:secret` of a view's key, from the documented construction:
/// sha256(transfer secret || 0 || "bind-operator view key" || 0 || view).
fn view_key(view: &str) -> String {
    let mut h = Sha256::new();
    h.update(TRANSFER_RAW);
    h.update(b"\0bind-operator view key\0");
    h.update(view.as_bytes());
    format!(
        "hmac-sha256:{view}.view.xfer:{}",
        STANDARD.encode(h.finalize())
    )
}

/// `dig +short www.example.com A`, signed with `key` when given.
fn dig(port: u16, key: Option<&str>) -> Vec<String> {
    let mut cmd = Command::new("dig");
    cmd.args(["+short", "+norec", "+time=1", "+tries=1", "-p"])
        .arg(port.to_string())
        .arg("@127.0.0.1");
    if let Some(k) = key {
        cmd.args(["-y", k]);
    }
    let out = cmd
        .args(["www.example.com.", "A"])
        .output()
        .expect("dig runs");
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .map(str::to_string)
        .collect();
    got.sort();
    got
}

/// Waits until `port` answers `want` to a query signed with `key`.
fn wait(local: &Local, port: u16, key: Option<&str>, want: &str) {
    wait_answer(local, port, key, &[want]);
}

/// Waits until `port` answers exactly `want` (none: no such name) to a
/// query signed with `key`.
fn wait_answer(local: &Local, port: u16, key: Option<&str>, want: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = dig(port, key);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "port {port}, key {}: wanted {want:?}, got {got:?}\n{}",
            key.map_or("none", |k| k.split(':').nth(1).unwrap_or_default()),
            local.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn views_answer_their_own_records_on_primary_and_secondary() {
    let f = Fixture::empty();
    f.write(
        "cluster.yaml",
        &MANIFESTS.replace(
            "SECRET_B64",
            &STANDARD.encode(STANDARD.encode(TRANSFER_RAW)),
        ),
    );
    f.write("www-int.yaml", &record("www-int", "int", "10.0.0.1"));
    f.write("www-ext.yaml", &record("www-ext", "ext", "192.0.2.1"));
    let local = f.start(&[]);
    let snapshot = local.wait_all_ready();
    let ports: Vec<u16> = pods_of(&snapshot, "example")
        .iter()
        .map(|p| p.dns.port())
        .collect();
    assert_eq!(ports.len(), 2, "a primary and a secondary");
    let (internal, external) = (view_key("internal"), view_key("external"));
    for &port in &ports {
        wait(&local, port, Some(&internal), "10.0.0.1");
        wait(&local, port, Some(&external), "192.0.2.1");
        // Unsigned from 127.0.0.1: not in 10.0.0.0/8, so the external view.
        wait(&local, port, None, "192.0.2.1");
    }

    // A change in one view reaches the secondary's copy of that view only.
    f.write("www-int.yaml", &record("www-int", "int", "10.0.0.2"));
    for &port in &ports {
        wait(&local, port, Some(&internal), "10.0.0.2");
        assert_eq!(dig(port, Some(&external)), ["192.0.2.1"]);
    }
    f.write("www-ext.yaml", &record("www-ext", "ext", "192.0.2.2"));
    for &port in &ports {
        wait(&local, port, Some(&external), "192.0.2.2");
        assert_eq!(dig(port, Some(&internal)), ["10.0.0.2"]);
    }
    local.wait_status("everything Ready after the changes", support::all_ready);

    // A delete in one view (an update that only deletes, its serial read
    // back signed with that view's key) leaves the other view's copy of
    // the zone alone on both servers; then the record comes back.
    f.remove("www-ext.yaml");
    for &port in &ports {
        wait_answer(&local, port, Some(&external), &[]);
        assert_eq!(dig(port, Some(&internal)), ["10.0.0.2"]);
    }
    local.wait_status("everything Ready after the delete", support::all_ready);
    f.write("www-ext.yaml", &record("www-ext", "ext", "192.0.2.2"));
    for &port in &ports {
        wait(&local, port, Some(&external), "192.0.2.2");
    }

    // A view added at run time: the primary's reconfig needs its NOTIFY
    // list file first, and its zone reaches the secondary's new view.
    let lab_view = "    - name: lab\n      matchClients: [192.168.0.0/16]\n    - name: external\n";
    f.write(
        "cluster.yaml",
        &f.read("cluster.yaml")
            .replace("    - name: external\n", lab_view),
    );
    f.write(
        "lab.yaml",
        &format!(
            "{}---\n{}",
            MANIFESTS
                .split("---\n")
                .last()
                .unwrap()
                .replace("name: int\n", "name: lab\n")
                .replace("view: internal", "view: lab"),
            record("www-lab", "lab", "192.168.0.1")
        ),
    );
    let lab = view_key("lab");
    for &port in &ports {
        wait(&local, port, Some(&lab), "192.168.0.1");
        assert_eq!(dig(port, Some(&internal)), ["10.0.0.2"]);
        assert_eq!(dig(port, Some(&external)), ["192.0.2.2"]);
    }
    local.wait_status("everything Ready with the lab view", support::all_ready);
    // The derived secrets stay out of output, status and named's logs.
    let shown = format!(
        "{}{}",
        local.diagnostics(),
        std::fs::read_to_string(f.state.join("status.json")).unwrap_or_default()
    );
    for key in [&internal, &external] {
        let secret = key.rsplit(':').next().unwrap();
        assert!(!shown.contains(secret), "a view key's secret was shown");
    }
    assert!(local.stop().success());
}

/// `dig +short <name> TXT` signed with `key`.
fn dig_txt(port: u16, key: &str, name: &str) -> Vec<String> {
    let out = Command::new("dig")
        .args(["+short", "+norec", "+time=1", "+tries=1", "-p"])
        .arg(port.to_string())
        .args(["@127.0.0.1", "-y", key, name, "TXT"])
        .output()
        .expect("dig runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .map(str::to_string)
        .collect()
}

/// nsupdate to 127.0.0.1:port signed with the key in `keyfile`.
fn nsupdate_keyfile(port: u16, keyfile: &std::path::Path, line: &str) -> Result<(), String> {
    use std::io::Write as _;
    let mut child = Command::new("nsupdate")
        .args(["-t", "3", "-k"])
        .arg(keyfile)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("nsupdate runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("server 127.0.0.1 {port}\n{line}\nsend\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn a_grant_on_a_zone_in_a_view_lets_its_key_write_only_there() {
    use std::os::unix::fs::PermissionsExt as _;
    let acme_raw = [0x3c_u8; 32];
    let acme = format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: acme-material\ntype: Opaque\ndata:\n  secret: {}\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: acme-dns01\nspec:\n  clusterRef: example\n  algorithm: hmac-sha256\n  secretRef:\n    name: acme-material\n",
        STANDARD.encode(STANDARD.encode(acme_raw))
    );
    let manifests = MANIFESTS
        .replace(
            "SECRET_B64",
            &STANDARD.encode(STANDARD.encode(TRANSFER_RAW)),
        )
        // The ACME key's updates are steered into the internal view (by
        // key; a view also needs its matchDestinations to fit, so none).
        .replace(
            "      matchClients: [10.0.0.0/8]\n      matchDestinations: [10.0.0.0/8]\n",
            "      matchClients: [\"key acme-dns01\", 10.0.0.0/8]\n",
        )
        .replace(
            "  view: internal\n  nameservers: [ns1.example.net.]\n  updateKeyRef: update-key\n",
            "  view: internal\n  nameservers: [ns1.example.net.]\n  updateKeyRef: update-key\n  updatePolicy:\n    - keyRef: acme-dns01\n      match: name\n      name: _acme-challenge\n      types: [TXT]\n",
        );
    assert!(manifests.contains("updatePolicy") && manifests.contains("key acme-dns01"));
    let f = Fixture::empty();
    f.write("cluster.yaml", &format!("{manifests}{acme}"));
    let local = f.start(&[]);
    let snapshot = local.wait_all_ready();
    let primary = support::primary(&snapshot, "example").dns.port();
    let ports: Vec<u16> = pods_of(&snapshot, "example")
        .iter()
        .map(|p| p.dns.port())
        .collect();
    let keyfile = f.tmp.path().join("acme.key");
    std::fs::write(&keyfile, "").unwrap();
    std::fs::set_permissions(&keyfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        &keyfile,
        format!(
            "key \"acme-dns01\" {{ algorithm hmac-sha256; secret \"{}\"; }};\n",
            STANDARD.encode(acme_raw)
        ),
    )
    .unwrap();
    let challenge = "_acme-challenge.example.com.";
    nsupdate_keyfile(
        primary,
        &keyfile,
        &format!("update add {challenge} 60 TXT \"token-in-view\""),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", local.diagnostics()));
    let e = nsupdate_keyfile(
        primary,
        &keyfile,
        "update add www.example.com. 60 TXT \"x\"",
    )
    .unwrap_err();
    assert!(e.contains("REFUSED"), "{e}");
    let (internal, external) = (view_key("internal"), view_key("external"));
    for &port in &ports {
        let deadline = Instant::now() + WAIT;
        while dig_txt(port, &internal, challenge) != ["\"token-in-view\""] {
            assert!(
                Instant::now() < deadline,
                "port {port}: the challenge never reached the internal view\n{}",
                local.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            dig_txt(port, &external, challenge).is_empty(),
            "port {port}"
        );
    }
    assert!(local.stop().success());
}

/// Issue 23 item 7: a view renamed away under its zone. The zone says
/// the view is gone (`ViewNotFound`, naming the view and the cluster's
/// views), not a transfer failure; its record says the zone failed; the
/// other view's zone keeps serving. The view back: served again.
#[test]
fn a_view_renamed_away_under_a_zone_says_the_view_is_gone() {
    let f = Fixture::empty();
    f.write(
        "cluster.yaml",
        &MANIFESTS.replace(
            "SECRET_B64",
            &STANDARD.encode(STANDARD.encode(TRANSFER_RAW)),
        ),
    );
    f.write("www-int.yaml", &record("www-int", "int", "10.0.0.1"));
    f.write("www-ext.yaml", &record("www-ext", "ext", "192.0.2.1"));
    let local = f.start(&[]);
    let snapshot = local.wait_all_ready();
    let primary = support::primary(&snapshot, "example").dns.port();
    let (internal, external) = (view_key("internal"), view_key("external"));
    wait(&local, primary, Some(&internal), "10.0.0.1");

    let original = f.read("cluster.yaml");
    f.write(
        "cluster.yaml",
        &original.replace("    - name: internal\n", "    - name: inside\n"),
    );
    let row = |s: &bind_operator::local::report::Snapshot, name: &str| {
        s.objects.iter().find(|o| o.name == name).cloned()
    };
    let s = local.wait_status("the zone says its view is gone", |s| {
        row(s, "int").is_some_and(|o| o.reason == "ViewNotFound")
    });
    let int = row(&s, "int").unwrap();
    assert!(!int.ready);
    assert!(
        int.message.contains("view internal is gone") && int.message.contains("inside, external"),
        "{}",
        int.message
    );
    assert!(!int.message.contains("Transfer failed"), "{}", int.message);
    let s = local.wait_status("its record says the zone failed", |s| {
        row(s, "www-int").is_some_and(|o| o.reason == "ZoneFailed")
    });
    assert!(
        row(&s, "www-int")
            .unwrap()
            .message
            .contains("view internal is gone")
    );
    // The other view is untouched.
    let ext = row(&s, "ext").unwrap();
    assert!(ext.ready, "{ext:?}");
    assert_eq!(dig(primary, Some(&external)), ["192.0.2.1"]);

    // The view back under its name: the zone is served again.
    f.write("cluster.yaml", &original);
    local.wait_status("served again with its view back", support::all_ready);
    wait(&local, primary, Some(&internal), "10.0.0.1");
    assert!(local.stop().success());
}
