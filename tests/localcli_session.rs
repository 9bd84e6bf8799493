//! A whole session on the in-memory API with a stand-in controller that marks
//! objects Ready (the real controllers and runtime are other modules): the
//! `--once` verdicts, and the running session following the directory into
//! `status.json` and the printed table.

use crate::support_localcli as support;

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bind_operator::local::manifests::ManifestKind;
use bind_operator::local::memapi::MemApi;
use bind_operator::local::report::{
    EXIT_NOT_CONVERGED, EXIT_NOT_READY, EXIT_READY, PodEndpoint, Snapshot,
};
use bind_operator::local::runtime::PodPorts;
use bind_operator::local::session::LocalSession;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::{examples_dir, record, setup, write};
use tokio::sync::watch;

/// Captures what the session prints.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

const KINDS: [ManifestKind; 4] = [
    ManifestKind::BindCluster,
    ManifestKind::BindTSIGKey,
    ManifestKind::BindZone,
    ManifestKind::DNSRecord,
];

/// Stands in for the controllers: every object gets a Ready status for its
/// current generation, the way each kind reports it.
fn fake_controller(mem: MemApi, client: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut changes = mem.changes();
        loop {
            for kind in KINDS {
                let resource = kind.api_resource();
                for obj in mem.raw_list(&resource.api_version, &resource.plural) {
                    let generation = obj["metadata"]["generation"].as_i64().unwrap();
                    if obj
                        .pointer("/status/observedGeneration")
                        .and_then(Value::as_i64)
                        == Some(generation)
                    {
                        continue;
                    }
                    let ready = |t: &str| {
                        json!({"type": t, "status": "True", "reason": "Ready",
                        "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"})
                    };
                    let status = match kind {
                        ManifestKind::BindCluster => json!({"observedGeneration": generation,
                            "conditions": [ready("ConfigApplied"), ready("Ready")]}),
                        ManifestKind::BindTSIGKey => json!({"observedGeneration": generation,
                            "conditions": [ready("Ready")]}),
                        _ => json!({"observedGeneration": generation, "phase": "Ready"}),
                    };
                    let ns = obj["metadata"]["namespace"].as_str().unwrap();
                    let name = obj["metadata"]["name"].as_str().unwrap();
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), ns, &resource);
                    let _ = api
                        .patch_status(
                            name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": status})),
                        )
                        .await;
                }
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    })
}

fn pods() -> (
    watch::Sender<Vec<PodEndpoint>>,
    watch::Receiver<Vec<PodEndpoint>>,
) {
    let pod = |name: &str, ordinal, port: u16| {
        let ports = PodPorts {
            dns: port,
            control: port + 1000,
            stats: port + 2000,
        };
        let mut p = PodEndpoint::new("default", name, "example", ordinal, ports, PathBuf::new());
        // Ready, as the fake controller's Ready BindCluster says: a cluster
        // Ready beside pods that are not is shown as still reconciling.
        p.ready = true;
        p
    };
    watch::channel(vec![pod("example-0", 0, 15300), pod("example-1", 1, 15301)])
}

fn examples_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn read_status(state: &std::path::Path) -> Option<Snapshot> {
    let text = std::fs::read_to_string(state.join("status.json")).ok()?;
    serde_json::from_str(&text).ok()
}

#[tokio::test]
async fn once_exits_zero_when_every_object_becomes_ready() {
    let (mem, client) = setup();
    let controller = fake_controller(mem.clone(), client.clone());
    let state = tempfile::tempdir().unwrap();
    let out = Buffer::default();
    let (_tx, rx) = pods();
    let session = LocalSession::new(mem, client, examples_dir(), state.path())
        .unwrap()
        .with_output(out.clone());
    let outcome = session
        .run_once(rx, Duration::from_secs(10), std::future::pending())
        .await;
    controller.abort();
    assert_eq!(outcome.code, EXIT_READY, "{}", outcome.summary());
    assert_eq!(outcome.total, 6);

    let status = read_status(state.path()).expect("status.json written");
    assert!(status.converged);
    assert_eq!(status.pods.len(), 2);
    assert_eq!(status.pods[0].dns.to_string(), "127.0.0.1:15300");
    assert!(status.objects.iter().all(|o| o.ready));
    let text = out.text();
    assert!(
        text.contains("6/6 objects ready, 2 pods, converged"),
        "{text}"
    );
    assert!(
        text.contains("example-0  primary    127.0.0.1:15300"),
        "{text}"
    );
}

#[tokio::test]
async fn once_fails_with_the_bad_manifests_listed() {
    let (mem, client) = setup();
    let controller = fake_controller(mem.clone(), client.clone());
    let dir = examples_copy();
    write(
        dir.path(),
        "zz-bad.yaml",
        "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: apex\nspec:\n  zoneRef: example-com\n  name: \"@\"\n  type: NS\n  values: [ns2.example.com.]\n",
    );
    let state = tempfile::tempdir().unwrap();
    let (_tx, rx) = pods();
    let session = LocalSession::new(mem, client, dir.path(), state.path())
        .unwrap()
        .with_output(Buffer::default());
    let outcome = session
        .run_once(rx, Duration::from_secs(10), std::future::pending())
        .await;
    controller.abort();
    assert_eq!(outcome.code, EXIT_NOT_READY, "{}", outcome.summary());
    assert_eq!(outcome.failing.len(), 1);
    let summary = outcome.summary();
    assert!(
        summary.starts_with("1 of 7 objects are not Ready:\n"),
        "{summary}"
    );
    assert!(
        summary.contains(
            "DNSRecord default/apex: Error (InvalidManifest): zz-bad.yaml document 1 (line 1): "
        ),
        "{summary}"
    );
}

#[tokio::test]
async fn once_gives_up_at_the_timeout_when_nothing_settles() {
    let (mem, client) = setup();
    let state = tempfile::tempdir().unwrap();
    let (_tx, rx) = pods();
    let session = LocalSession::new(mem, client, examples_dir(), state.path())
        .unwrap()
        .with_output(Buffer::default());
    let outcome = session
        .run_once(rx, Duration::from_millis(800), std::future::pending())
        .await;
    assert_eq!(outcome.code, EXIT_NOT_CONVERGED);
    assert_eq!(outcome.failing.len(), 6);
    assert!(outcome.failing.iter().all(|o| o.phase == "Pending"));
    // The objects were loaded all the same.
    assert!(read_status(state.path()).is_some_and(|s| s.objects.len() == 6 && !s.converged));
}

#[tokio::test]
async fn a_running_session_follows_the_directory_until_shutdown() {
    let (mem, client) = setup();
    let controller = fake_controller(mem.clone(), client.clone());
    let dir = examples_copy();
    let state = tempfile::tempdir().unwrap();
    let out = Buffer::default();
    let (tx, rx) = pods();
    let session = LocalSession::new(mem.clone(), client, dir.path(), state.path())
        .unwrap()
        .with_output(out.clone());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(session.run(rx, async move {
        let _ = stop_rx.await;
    }));

    let wait_for = |what: &'static str, check: Box<dyn Fn(&Snapshot) -> bool + Send>| {
        let state = state.path().to_owned();
        async move {
            tokio::time::timeout(Duration::from_secs(5), async {
                loop {
                    if read_status(&state).is_some_and(|s| check(&s)) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
        }
    };
    wait_for(
        "convergence",
        Box::new(|s| s.converged && s.objects.len() == 6),
    )
    .await;

    // A new record file shows up as a new ready object.
    write(
        dir.path(),
        "extra.yaml",
        &record("mx-example-com", "example-com", "mx", "192.0.2.25"),
    );
    wait_for(
        "the new record",
        Box::new(|s| {
            s.converged
                && s.objects
                    .iter()
                    .any(|o| o.name == "mx-example-com" && o.ready)
        }),
    )
    .await;
    // A pod change from the runtime reaches the report.
    tx.send_modify(|pods| pods.truncate(1));
    wait_for("one pod", Box::new(|s| s.pods.len() == 1)).await;
    // Removing the file removes the object.
    std::fs::remove_file(dir.path().join("extra.yaml")).unwrap();
    wait_for("the record gone", Box::new(|s| s.objects.len() == 6)).await;

    stop_tx.send(()).unwrap();
    let last = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("stops on shutdown")
        .unwrap();
    controller.abort();
    assert!(last.converged && last.objects.len() == 6 && last.pods.len() == 1);
    assert!(
        mem.raw(
            "bind.unkin.net/v1alpha1",
            "dnsrecords",
            Some("default"),
            "mx-example-com"
        )
        .is_none()
    );
    let text = out.text();
    assert!(
        text.contains("7/7 objects ready, 2 pods, converged"),
        "{text}"
    );
    // Quiet: one table per settling, the rest are change lines.
    assert_eq!(
        text.matches("objects ready, ").count(),
        2,
        "one table at start, one after the new record:\n{text}"
    );
    assert!(
        text.contains("DNSRecord default/mx-example-com: (new) -> Pending"),
        "{text}"
    );
    assert!(
        text.contains("pod default/example-1 (secondary, dns 127.0.0.1:15301): ready -> (gone)"),
        "{text}"
    );
    assert!(
        text.contains("DNSRecord default/mx-example-com: Ready -> (gone)"),
        "{text}"
    );
}
