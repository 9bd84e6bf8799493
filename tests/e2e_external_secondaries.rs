//! External secondaries (the operator as hidden primary): two plain named
//! processes started here, secondaries of the local primary with their own
//! keys, get every zone and every change by NOTIFY and signed transfer; a
//! zone with its own list feeds only that one; a stopped secondary shows
//! as lagging in the zone's status and catches up when started again.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bind_operator::api::BindZone;
use bind_operator::local::command::Backend;
use kube::Api;

use crate::support_bind::{PortLease, reserve_port};
use crate::support_e2e as support;

use support::{Diagnose, Fixture, blocking, dig, wait_answer};

const KEY_A: &str = "c2VjcmV0LWZvci1wcm92aWRlci1hLTAxMjM0NTY3ODk=";
const KEY_B: &str = "c2VjcmV0LWZvci1wcm92aWRlci1iLTAxMjM0NTY3ODk=";

fn manifests(a: u16, b: u16) -> String {
    let secret = |name: &str, material: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\ntype: Opaque\ndata:\n  secret: {}\n---\n",
            STANDARD.encode(material)
        )
    };
    let key = |name: &str| {
        format!(
            "apiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: {name}\nspec:\n  clusterRef: hidden\n  secretRef:\n    name: {name}\n---\n"
        )
    };
    let zone = |obj: &str, name: &str, own: &str| {
        format!(
            "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: {obj}\nspec:\n  clusterRef: hidden\n  zoneName: {name}\n  updateKeyRef: update-key\n  nameservers: [ns1.example.net.]\n  records:\n    - name: www\n      type: A\n      values: ['192.0.2.1']\n{own}---\n"
        )
    };
    format!(
        "{}{}{}{}apiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: update-key\nspec:\n  clusterRef: hidden\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: hidden\nspec:\n  replicas: 2\n  externalSecondaries:\n    - {{address: 127.0.0.1, port: {a}, keyRef: provider-a}}\n    - {{address: 127.0.0.1, port: {b}, keyRef: provider-b}}\n---\n{}{}",
        secret("provider-a", KEY_A),
        secret("provider-b", KEY_B),
        key("provider-a"),
        key("provider-b"),
        zone("example-com", "example.com", ""),
        zone(
            "other-com",
            "other.com",
            &format!(
                "  externalSecondaries:\n    - {{address: 127.0.0.1, port: {a}, keyRef: provider-a}}\n"
            )
        ),
    )
}

/// A plain named, secondary of example.com and other.com from `primary`,
/// transferring with its own key: what a DNS provider runs.
struct Provider {
    dir: PathBuf,
    port: PortLease,
    child: Option<Child>,
}

impl Provider {
    fn new(root: &Path, name: &str, key: &str, primary: u16, port: PortLease) -> Provider {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let zone = |z: &str| {
            format!(
                "zone \"{z}\" {{ type secondary; file \"{z}.db\"; primaries {{ 127.0.0.1 port {primary} key \"{name}\"; }}; }};\n"
            )
        };
        let conf = format!(
            "key \"{name}\" {{ algorithm hmac-sha256; secret \"{key}\"; }};\noptions {{ directory \"{}\"; listen-on port {} {{ 127.0.0.1; }}; listen-on-v6 {{ none; }}; pid-file \"named.pid\"; session-keyfile \"session.key\"; dnssec-validation no; recursion no; notify no; }};\ncontrols {{ }};\n{}{}",
            dir.display(),
            port.port,
            zone("example.com"),
            zone("other.com")
        );
        std::fs::write(dir.join("named.conf"), conf).unwrap();
        Provider {
            dir,
            port,
            child: None,
        }
    }

    fn start(&mut self) {
        let log = std::fs::File::create(self.dir.join("named.log")).unwrap();
        let child = Command::new("named")
            .args(["-g", "-c"])
            .arg(self.dir.join("named.conf"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("named starts");
        self.child = Some(child);
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn port(&self) -> u16 {
        self.port.port
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The local pods' named logs and the providers' own.
struct Logs {
    state: PathBuf,
    providers: Vec<PathBuf>,
}

impl Diagnose for Logs {
    fn diagnostics(&self) -> String {
        let mut out = self.state.diagnostics();
        for dir in &self.providers {
            let log = std::fs::read_to_string(dir.join("named.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            out.push_str(&format!("--- {}/named.log (tail)\n", dir.display()));
            for line in tail.into_iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

fn record(values: &[&str]) -> String {
    let values: String = values.iter().map(|v| format!("    - '{v}'\n")).collect();
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: api\nspec:\n  zoneRef: example-com\n  name: api\n  type: A\n  values:\n{values}"
    )
}

/// Waits until example-com's status says what `pred` wants of its
/// external secondaries (server, serial, caught up).
async fn wait_zone(
    zones: &Api<BindZone>,
    name: &str,
    what: &str,
    pred: impl Fn(&BindZone) -> bool,
) -> BindZone {
    let deadline = Instant::now() + support::WAIT;
    loop {
        let z = zones.get(name).await.unwrap();
        if pred(&z) {
            return z;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: {what}; status: {:?}",
            z.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn caught_up(z: &BindZone) -> Vec<(String, bool)> {
    z.status
        .iter()
        .flat_map(|s| s.external_secondaries.iter())
        .map(|e| (e.server.clone(), e.caught_up))
        .collect()
}

fn in_sync_condition(z: &BindZone) -> Option<String> {
    z.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "ExternalSecondariesInSync")
        .map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_secondaries_get_every_zone_and_change_and_a_stopped_one_shows_lagging() {
    let f = Fixture::empty();
    let tmp = tempfile::tempdir().unwrap();
    // The providers' ports first: the cluster's manifest names them.
    let (lease_a, lease_b) = (reserve_port(), reserve_port());
    f.write("hidden.yaml", &manifests(lease_a.port, lease_b.port));
    let mode = support::local_in_process(&f, Backend::InMemory).await;
    let zones: Api<BindZone> =
        Api::namespaced(mode.memapi().expect("in-memory").client(), "default");
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));
    let state = f.state.clone();
    let snapshot = blocking(move || {
        let deadline = Instant::now() + support::STARTUP;
        loop {
            if let Some(s) = support::read_status(&state).filter(support::all_ready) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "never ready\n{}",
                support::state_diagnostics(&state)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await;
    let primary = support::primary(&snapshot, "hidden").dns.port();
    let internal = support::pods_of(&snapshot, "hidden")[1].dns.port();
    // Now that the primary's port is known, configure and start them.
    let mut a = Provider::new(tmp.path(), "provider-a", KEY_A, primary, lease_a);
    let mut b = Provider::new(tmp.path(), "provider-b", KEY_B, primary, lease_b);
    a.start();
    b.start();
    let (pa, pb) = (a.port(), b.port());
    let (state, providers) = (f.state.clone(), vec![a.dir.clone(), b.dir.clone()]);
    let logs = || Logs {
        state: state.clone(),
        providers: providers.clone(),
    };
    let st = logs();
    blocking(move || {
        let www = ["192.0.2.1".to_string()];
        for port in [pa, pb, internal] {
            wait_answer(port, "www.example.com.", "A", &www, &st);
        }
        // other.com lists only provider-a: b may not transfer it.
        wait_answer(pa, "www.other.com.", "A", &www, &st);
        wait_answer(internal, "www.other.com.", "A", &www, &st);
        assert!(dig(pb, "other.com.", "SOA").is_empty());
    })
    .await;
    let both = wait_zone(&zones, "example-com", "both caught up", |z| {
        caught_up(z).len() == 2 && caught_up(z).iter().all(|(_, ok)| *ok)
    })
    .await;
    assert_eq!(in_sync_condition(&both).as_deref(), Some("True"));
    let other = wait_zone(&zones, "other-com", "only provider-a", |z| {
        caught_up(z) == vec![(format!("127.0.0.1:{pa}"), true)]
    })
    .await;
    assert_eq!(in_sync_condition(&other).as_deref(), Some("True"));

    // A change reaches both.
    f.write("api.yaml", &record(&["192.0.2.20"]));
    let st = logs();
    blocking(move || {
        for port in [pa, pb, internal] {
            wait_answer(port, "api.example.com.", "A", &["192.0.2.20".into()], &st);
        }
    })
    .await;

    // b stops: the next change leaves it behind, and the status says so.
    b.stop();
    f.write("api.yaml", &record(&["192.0.2.21"]));
    let st = logs();
    blocking(move || {
        wait_answer(pa, "api.example.com.", "A", &["192.0.2.21".into()], &st);
    })
    .await;
    let server_b = format!("127.0.0.1:{pb}");
    let lagging = wait_zone(&zones, "example-com", "provider-b lagging", |z| {
        caught_up(z).contains(&(server_b.clone(), false))
            && caught_up(z).contains(&(format!("127.0.0.1:{pa}"), true))
    })
    .await;
    assert_eq!(in_sync_condition(&lagging).as_deref(), Some("False"));
    assert_eq!(
        lagging.status.as_ref().and_then(|s| s.phase),
        Some(bind_operator::api::Phase::Ready),
        "a lagging external secondary does not hold Ready"
    );

    // Started again, it catches up and the status follows.
    b.start();
    let st = logs();
    blocking(move || {
        wait_answer(pb, "api.example.com.", "A", &["192.0.2.21".into()], &st);
    })
    .await;
    let back = wait_zone(&zones, "example-com", "provider-b caught up", |z| {
        caught_up(z).len() == 2 && caught_up(z).iter().all(|(_, ok)| *ok)
    })
    .await;
    assert_eq!(in_sync_condition(&back).as_deref(), Some("True"));
    stop.cancel();
    serving.await.unwrap();
}
