//! A BIND the operator did not deploy (issue 24, item 1): two named
//! processes started here with their own named.conf, zone file, TSIG keys
//! and rndc `controls` — a primary and a secondary of it — managed through
//! local mode (in-process, so the test can read the BindZone's status)
//! with a BindCluster `external`. Records are created, changed and
//! deleted; one deleted behind the operator's back comes back; another
//! client's records are left alone; the status shows the serial on the
//! primary and on the secondary; with `rndc` set a new BindZone creates
//! its zone on the server and deleting the BindZone removes it again.

use crate::support_bind::{PortLease, reserve_port, wait_until};
use crate::support_e2e as support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bind_operator::api::{BindCluster, BindZone};
use bind_operator::local::command::Backend;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;
use support::{Fixture, blocking, dig, nsupdate};
use tokio_util::sync::CancellationToken;

const UPDATE: [u8; 32] = [0x41; 32];
const XFER: [u8; 32] = [0x42; 32];
const RNDC: [u8; 32] = [0x43; 32];
/// What a user waits for here at most (a 5 s serial check plus a write).
const WAIT: Duration = Duration::from_secs(20);

fn b64(k: &[u8]) -> String {
    STANDARD.encode(k)
}

/// A named started from a config this test wrote; killed on drop.
struct Named {
    dir: PathBuf,
    dns: PortLease,
    control: PortLease,
    child: Option<Child>,
}

impl Named {
    fn start(dir: &Path, zones: &str, extra_options: &str, dns: PortLease) -> Named {
        std::fs::create_dir_all(dir).unwrap();
        let control = reserve_port();
        let d = dir.display();
        let conf = format!(
            r#"options {{
  directory "{d}";
  listen-on port {dns} {{ 127.0.0.1; }};
  listen-on-v6 {{ none; }};
  pid-file "{d}/named.pid";
  session-keyfile "{d}/session.key";
  dnssec-validation no;
  recursion no;
  allow-new-zones yes;
  notify-delay 0;
  {extra_options}
}};
key "update-key" {{ algorithm hmac-sha256; secret "{u}"; }};
key "xfer-key" {{ algorithm hmac-sha256; secret "{x}"; }};
key "rndc-key" {{ algorithm hmac-sha256; secret "{r}"; }};
# rndc sends no key name: the BindTSIGKey ext-rndc holds this secret.
controls {{ inet 127.0.0.1 port {ctl} allow {{ 127.0.0.1; }} keys {{ "rndc-key"; }}; }};
{zones}
"#,
            dns = dns.port,
            ctl = control.port,
            u = b64(&UPDATE),
            x = b64(&XFER),
            r = b64(&RNDC),
        );
        std::fs::write(dir.join("named.conf"), conf).unwrap();
        let log = std::fs::File::create(dir.join("named.log")).unwrap();
        let child = Command::new(bind_operator::bind::layout::locate_tool("named"))
            .args(["-g", "-c"])
            .arg(dir.join("named.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("named starts");
        let n = Named {
            dir: dir.to_path_buf(),
            dns,
            control,
            child: Some(child),
        };
        assert!(
            wait_until(WAIT, || crate::support_bind::dig(
                n.dns.port,
                &["version.bind", "CH", "TXT", "+short"]
            )
            .contains('"')),
            "named did not answer:\n{}",
            n.log()
        );
        n
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("named.log")).unwrap_or_default()
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

const ZONE_FILE: &str = "$TTL 300
@ IN SOA ns1.ext.example. hostmaster.ext.example. 100 3600 600 86400 300
@ IN NS ns1.ext.example.
ns1 IN A 192.0.2.1
legacy IN A 192.0.2.9
";

/// The external primary (serving ext.example, NOTIFYing the secondary)
/// and its secondary.
fn servers(root: &Path) -> (Named, Named) {
    let pdir = root.join("primary");
    std::fs::create_dir_all(&pdir).unwrap();
    std::fs::write(pdir.join("ext.example.db"), ZONE_FILE).unwrap();
    // The secondary's port is needed in the primary's also-notify: take
    // it first, hand it to the secondary's config afterwards.
    let sec_port = reserve_port();
    let primary = Named::start(
        &pdir,
        r#"zone "ext.example" { type primary; file "ext.example.db"; update-policy { grant update-key zonesub ANY; }; allow-transfer { key xfer-key; }; };"#,
        &format!("also-notify {{ 127.0.0.1 port {}; }};", sec_port.port),
        reserve_port(),
    );
    let sdir = root.join("secondary");
    let secondary_zone = format!(
        r#"zone "ext.example" {{ type secondary; file "ext.example.sec"; primaries {{ 127.0.0.1 port {} key xfer-key; }}; }};"#,
        primary.dns.port
    );
    let secondary = Named::start(&sdir, &secondary_zone, "", sec_port);
    (primary, secondary)
}

fn key_manifest(name: &str, material: &[u8]) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}-material\ntype: Opaque\ndata:\n  secret: {}\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: {name}\nspec:\n  keyName: {name}\n  algorithm: hmac-sha256\n  secretRef:\n    name: {name}-material\n",
        STANDARD.encode(b64(material))
    )
}

fn cluster_manifest(primary: &Named, secondary: &Named) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: ext\nspec:\n  external:\n    primary: {{address: 127.0.0.1, port: {}}}\n    secondaries:\n      - {{address: 127.0.0.1, port: {}}}\n    transferKeyRef: xfer-key\n    rndc: {{address: 127.0.0.1, port: {}, keyRef: ext-rndc}}\n",
        primary.dns.port, secondary.dns.port, primary.control.port
    )
}

fn zone_manifest(object: &str, zone: &str, nameservers: &str) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: {object}\nspec:\n  clusterRef: ext\n  zoneName: {zone}\n  updateKeyRef: update-key\n{nameservers}  records:\n    - {{name: inline, type: TXT, values: ['\"from spec.records\"']}}\n"
    )
}

fn record_manifest(name: &str, owner: &str, value: &str) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: {name}\nspec:\n  zoneRef: ext-example\n  name: {owner}\n  type: A\n  values: ['{value}']\n"
    )
}

async fn zone_status(
    api: &Api<BindZone>,
    name: &str,
) -> Option<bind_operator::api::BindZoneStatus> {
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|z| z.status)
}

/// Polls the BindZone until `pred` holds on its status.
async fn wait_zone(
    api: &Api<BindZone>,
    name: &str,
    what: &str,
    pred: impl Fn(&bind_operator::api::BindZoneStatus) -> bool,
) -> bind_operator::api::BindZoneStatus {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let s = zone_status(api, name).await;
        if let Some(s) = s.as_ref().filter(|s| pred(s)) {
            return s.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_bind_gets_its_records_written_repaired_and_its_zones_made_by_rndc() {
    let f = Fixture::empty();
    let (primary, secondary) = servers(f.tmp.path());
    let (p, s) = (primary.dns.port, secondary.dns.port);
    assert!(
        wait_until(WAIT, || dig(s, "legacy.ext.example.", "A") == ["192.0.2.9"]),
        "the secondary did not load the zone:\n{}",
        secondary.log()
    );

    f.write(
        "keys.yaml",
        &[
            key_manifest("update-key", &UPDATE),
            key_manifest("xfer-key", &XFER),
            key_manifest("ext-rndc", &RNDC),
        ]
        .join("---\n"),
    );
    f.write("cluster.yaml", &cluster_manifest(&primary, &secondary));
    f.write(
        "zone.yaml",
        &zone_manifest("ext-example", "ext.example", ""),
    );
    f.write("www.yaml", &record_manifest("www", "www", "192.0.2.10"));

    let mode = support::local_in_process(&f, Backend::InMemory).await;
    let api: Api<BindZone> = Api::namespaced(mode.memapi().unwrap().client(), "default");
    let stop = CancellationToken::new();
    let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));

    // Created: the DNSRecord and the inline record, on the primary and,
    // through the primary's own NOTIFY, on its secondary.
    wait_zone(&api, "ext-example", "Ready", |st| {
        st.phase == Some(bind_operator::api::Phase::Ready)
    })
    .await;
    for port in [p, s] {
        blocking(move || {
            let ok = wait_until(WAIT, || {
                dig(port, "www.ext.example.", "A") == ["192.0.2.10"]
            });
            assert!(ok, "www not served on {port}");
        })
        .await;
    }
    assert_eq!(
        dig(p, "inline.ext.example.", "TXT"),
        ["\"from spec.records\""]
    );
    // The zone's own SOA and NS are its owner's: untouched.
    let soa = dig(p, "ext.example.", "SOA");
    assert!(
        soa[0].starts_with("ns1.ext.example. hostmaster.ext.example."),
        "{soa:?}"
    );
    assert_eq!(dig(p, "ext.example.", "NS"), ["ns1.ext.example."]);
    // Status: Ready, the serial on the primary and on the secondary.
    let st = wait_zone(
        &api,
        "ext-example",
        "Ready with both servers in sync",
        |st| {
            let serial = st.serial.unwrap_or(0);
            st.phase == Some(bind_operator::api::Phase::Ready)
                && st.servers.get(&format!("127.0.0.1:{p}")) == Some(&serial)
                && st.servers.get(&format!("127.0.0.1:{s}")) == Some(&serial)
        },
    )
    .await;
    assert!(st.serial.unwrap() > 100, "{st:?}");
    // Local mode counts it converged: no pods awaited for it.
    let state = f.state.clone();
    blocking(move || {
        assert!(
            wait_until(WAIT, || support::read_status(&state)
                .is_some_and(|s| s.ready)),
            "local mode never called the external cluster ready: {:?}",
            support::read_status(&state)
        );
    })
    .await;
    // The operator deployed nothing for the external cluster.
    let client = api.clone().into_client();
    let cluster: Api<BindCluster> = Api::namespaced(client.clone(), "default");
    let c = cluster.get("ext").await.unwrap();
    let ready = c
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
    assert_eq!(
        ready.map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("True", "External")),
        "{c:?}"
    );
    let params = kube::api::ListParams::default();
    assert!(
        Api::<StatefulSet>::namespaced(client.clone(), "default")
            .list(&params)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), "default")
            .list(&params)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        Api::<Service>::namespaced(client.clone(), "default")
            .list(&params)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let secrets = Api::<Secret>::namespaced(client, "default")
        .list(&params)
        .await
        .unwrap();
    assert_eq!(
        secrets.items.len(),
        3,
        "only the key Secrets of the manifests"
    );

    // Another client's record: left alone by every later write.
    let key = format!("hmac-sha256:update-key:{}", b64(&UPDATE));
    blocking({
        let key = key.clone();
        move || nsupdate(p, &key, &["update add other.ext.example. 300 A 192.0.2.77"]).unwrap()
    })
    .await;

    // Changed: the record set replaced as a whole.
    f.write("www.yaml", &record_manifest("www", "www", "192.0.2.11"));
    blocking(move || {
        assert!(wait_until(WAIT, || dig(p, "www.ext.example.", "A") == ["192.0.2.11"]));
    })
    .await;

    // Deleted behind the operator's back: restored from the next survey.
    blocking({
        let key = key.clone();
        move || nsupdate(p, &key, &["update delete www.ext.example. A"]).unwrap()
    })
    .await;
    blocking(move || {
        assert!(
            wait_until(WAIT, || dig(p, "www.ext.example.", "A") == ["192.0.2.11"]),
            "the deleted record was not restored"
        );
    })
    .await;

    // Deleted: the DNSRecord goes, and so does its record set.
    f.remove("www.yaml");
    blocking(move || {
        assert!(wait_until(WAIT, || dig(p, "www.ext.example.", "A").is_empty()));
    })
    .await;
    assert_eq!(dig(p, "other.ext.example.", "A"), ["192.0.2.77"]);
    assert_eq!(dig(p, "legacy.ext.example.", "A"), ["192.0.2.9"]);

    // rndc: a BindZone for a zone the server lacks creates it. BIND (9.18
    // and 9.20) cannot add a primary zone without its file, so the file is
    // laid where the operator's addzone names it (`<zone>.db` in the
    // server's directory), as the server's administrator does (see
    // docs/external.md).
    assert!(dig(p, "made.example.", "SOA").is_empty());
    std::fs::copy(
        "/etc/bind/db.empty",
        primary.dir.join("made.example.db"),
    )
    .or_else(|_| {
        std::fs::write(
            primary.dir.join("made.example.db"),
            "$TTL 300\n@ IN SOA localhost. root.localhost. 1 3600 600 86400 300\n@ IN NS localhost.\n",
        )
        .map(|_| 0)
    })
    .unwrap();
    f.write(
        "made.yaml",
        &zone_manifest(
            "made",
            "made.example",
            "  nameservers: [ns1.example.net.]\n",
        ),
    );
    wait_zone(&api, "made", "the new zone Ready", |st| {
        st.phase == Some(bind_operator::api::Phase::Ready)
    })
    .await;
    blocking(move || {
        assert!(
            wait_until(WAIT, || dig(p, "inline.made.example.", "TXT")
                == ["\"from spec.records\""]),
            "the zone was not created with its records"
        );
    })
    .await;
    // A zone the operator made gets the BindZone's SOA and NS.
    let made = wait_zone(&api, "made", "the new zone Ready", |st| {
        st.phase == Some(bind_operator::api::Phase::Ready)
    })
    .await;
    assert!(made.serial.is_some());
    let soa = dig(p, "made.example.", "SOA");
    assert!(
        !soa.is_empty() && !soa[0].starts_with("localhost."),
        "{soa:?}"
    );
    assert!(
        primary
            .log()
            .contains("received control channel command 'addzone")
    );

    // ... and deleting the BindZone removes the zone, with its files.
    f.remove("made.yaml");
    blocking(move || {
        assert!(
            wait_until(WAIT, || dig(p, "made.example.", "SOA").is_empty()),
            "the zone was not deleted"
        );
    })
    .await;
    let dir = primary.dir.clone();
    assert!(wait_until(WAIT, || !dir.join("made.example.db").exists()));
    // The zone that was there before stays.
    assert_eq!(dig(p, "legacy.ext.example.", "A"), ["192.0.2.9"]);

    // Deleting the BindZone of a zone that was there before takes back
    // only what it wrote: the zone, its SOA and NS and other data stay.
    f.remove("zone.yaml");
    blocking(move || {
        assert!(
            wait_until(WAIT, || dig(p, "inline.ext.example.", "TXT").is_empty()),
            "the BindZone's inline record was left behind"
        );
    })
    .await;
    assert_eq!(dig(p, "ext.example.", "NS"), ["ns1.ext.example."]);
    assert_eq!(dig(p, "legacy.ext.example.", "A"), ["192.0.2.9"]);
    assert_eq!(dig(p, "other.ext.example.", "A"), ["192.0.2.77"]);

    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(20), serving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_missing_on_an_external_bind_without_rndc_is_zone_not_found() {
    let f = Fixture::empty();
    let (primary, secondary) = servers(f.tmp.path());
    f.write(
        "keys.yaml",
        &[
            key_manifest("update-key", &UPDATE),
            key_manifest("xfer-key", &XFER),
        ]
        .join("---\n"),
    );
    let cluster = cluster_manifest(&primary, &secondary);
    let cluster = cluster
        .lines()
        .filter(|l| !l.contains("rndc:"))
        .collect::<Vec<_>>()
        .join("\n");
    f.write("cluster.yaml", &cluster);
    f.write("zone.yaml", &zone_manifest("absent", "absent.example", ""));
    let mode = support::local_in_process(&f, Backend::InMemory).await;
    let api: Api<BindZone> = Api::namespaced(mode.memapi().unwrap().client(), "default");
    let stop = CancellationToken::new();
    let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));
    let st = wait_zone(&api, "absent", "ZoneNotFound", |st| {
        st.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.reason == "ZoneNotFound")
    })
    .await;
    let msg = &st
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message;
    // The server's answer, and what to do about it.
    assert!(msg.contains("REFUSED"), "{msg}");
    assert!(msg.contains("spec.external.rndc"), "{msg}");
    assert!(!primary.log().contains("control channel command"));
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(20), serving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rndc_client_speaks_to_named_and_is_refused_with_a_wrong_key() {
    use bind_operator::bind::rndc::{Client, RndcError};
    use bind_operator::bind::{KeyName, TsigAlgorithm, TsigKey, TsigSecret};
    let tmp = tempfile::tempdir().unwrap();
    let named = Named::start(tmp.path(), "", "", reserve_port());
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", named.control.port).parse().unwrap();
    let key = |material: &[u8]| TsigKey {
        name: KeyName::parse("any-name").unwrap(),
        algorithm: TsigAlgorithm::HmacSha256,
        secret: TsigSecret::from_bytes(material).unwrap(),
    };
    let status = Client::new(addr, key(&RNDC))
        .command("status")
        .await
        .unwrap();
    assert!(status.contains("server is up and running"), "{status}");
    // named's own refusal, in its words.
    let err = Client::new(addr, key(&RNDC))
        .command("delzone \"nowhere.example\"")
        .await
        .unwrap_err();
    assert_eq!(err.server_reason(), Some("not found"), "{err}");
    // Another secret: no answer named would sign, and nothing run.
    let err = Client::new(addr, key(&UPDATE))
        .command("status")
        .await
        .unwrap_err();
    assert!(matches!(err, RndcError::BadAuth { .. }), "{err}");
    assert!(!err.to_string().contains(&b64(&UPDATE)));
}
