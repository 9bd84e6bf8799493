//! Key material never reaches logs, Events or status: one process-wide
//! tracing subscriber at TRACE captures everything the controllers (and the
//! libraries under them) log while clusters and keys go through their
//! normal and failure paths; then the capture, every Event and every status
//! are searched for each secret (as base64, and as the base64 of that which
//! Secret data carries on the wire).

use crate::support_controller as support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use bind_operator::api::{BindCluster, BindTSIGKey, BindTSIGKeySpec, TsigAlgorithm};
use k8s_openapi::api::core::v1::Secret;
use support::{Harness, NS, base64, material};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn secret_of(h: &Harness, name: &str, key: &str) -> String {
    let s: Secret = h.api.get(Some(NS), name).expect("secret exists");
    String::from_utf8(s.data.unwrap()[key].0.clone()).unwrap()
}

#[tokio::test]
async fn no_secret_material_in_logs_events_or_status() {
    let capture = Capture::default();
    let sink = capture.clone();
    // Scoped to this test's thread (the tokio test runtime runs every task
    // here): other tests in the suite binary may own the global subscriber.
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::info!("capture works");

    let h = Harness::new().await;
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    let mut generated = BindTSIGKey::new(
        "gen",
        BindTSIGKeySpec {
            algorithm: TsigAlgorithm::HmacSha512,
            ..Default::default()
        },
    );
    generated.metadata.namespace = Some(NS.into());
    h.create(&generated).await;
    h.reconcile_key("gen").await;
    h.cluster("c", 2).await;
    h.converge("c", 2).await;

    // A key change, a failing reconfig (with checkconf output naming
    // keys.conf), an exec failure, and a broken user Secret.
    h.set_secret("xfer-secret", &material(2)).await;
    h.reconcile_cluster("c").await;
    h.propagate("c", "c-0");
    h.propagate("c", "c-1");
    {
        let mut s = h.exec.state();
        s.reconfig_err = Some("rndc: 'reconfig' failed: failure".into());
        s.checkconf_stdout = "config/keys.conf:3: bad base64 encoding\n".into();
        s.exec_err.insert("c-1".into(), "connection reset".into());
    }
    h.reconcile_cluster("c").await;
    h.exec.state().reconfig_err = None;
    h.exec.state().exec_err.clear();
    h.reconcile_cluster("c").await;
    h.set_secret("xfer-secret", "!!not-base64!!").await;
    h.reconcile_key("xfer").await;
    h.reconcile_cluster("c").await;

    let mut secrets = vec![
        material(1),
        material(2),
        secret_of(&h, "gen-tsig", "secret"),
    ];
    let rndc = secret_of(&h, "c-rndc", "rndc-secret");
    secrets.push(rndc);
    // The same material as Secret data carries it in JSON.
    let wire: Vec<String> = secrets.iter().map(|s| base64(s.as_bytes())).collect();
    secrets.extend(wire);

    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("capture works"));
    assert!(
        logs.contains("reconfigured"),
        "the reconciler's own logs were captured"
    );
    let events = h.events();
    assert!(events.iter().any(|(r, _)| r == "ReconfigFailed"));
    let statuses: Vec<String> = h
        .api
        .list::<BindCluster>()
        .iter()
        .map(|c| serde_json::to_string(&c.status).unwrap())
        .chain(
            h.api
                .list::<BindTSIGKey>()
                .iter()
                .map(|k| serde_json::to_string(&k.status).unwrap()),
        )
        .collect();
    for s in &secrets {
        assert!(!logs.contains(s.as_str()), "key material in the logs");
        for (reason, note) in &events {
            assert!(!note.contains(s.as_str()), "key material in Event {reason}");
        }
        for st in &statuses {
            assert!(!st.contains(s.as_str()), "key material in status {st}");
        }
    }
}
