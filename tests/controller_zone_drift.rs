//! Drift repaired loudly (issue 23, item 3) on real `named`: another
//! client (nsupdate, with the zone's update key) changes RRsets the
//! operator owns, one from a DNSRecord and one from the zone's
//! `spec.records`. The periodic check writes both back, and says so: one
//! `RRsetRestored` Warning Event on the owning object each (the DNSRecord;
//! the BindZone for the inline record), and the repairs counter of the
//! zone counts two. The operator's own writes before never count.

use crate::controller_zone_named::{follow, setup};
use crate::support_zones as support;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use bind_operator::api::{BindZone, Phase, RecordType};
use bind_operator::controller::zonesync::Settings;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use serde_json::json;
use support::{NS, record, test_settings, zone};

/// `nsupdate -y` against the primary, as another client would write.
fn nsupdate(port: u16, key: &bind_operator::bind::TsigKey, lines: &[&str]) {
    let mut script = format!("server 127.0.0.1 {port}\n");
    for l in lines {
        script.push_str(l);
        script.push('\n');
    }
    script.push_str("send\n");
    let y = format!(
        "hmac-sha256:{}:{}",
        key.name.as_str(),
        key.secret.expose_base64()
    );
    let mut child = Command::new("nsupdate")
        .args(["-t", "3", "-y", &y])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nsupdate");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "nsupdate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `RRsetRestored` Events as (kind, name, note).
async fn restored_events(client: &kube::Client) -> Vec<(String, String, String)> {
    Api::<Event>::namespaced(client.clone(), NS)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RRsetRestored"))
        .map(|e| {
            let r = e.regarding.unwrap_or_default();
            (
                r.kind.unwrap_or_default(),
                r.name.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

fn repairs(env: &support::Env) -> Option<String> {
    env.metrics
        .encode()
        .lines()
        .find(|l| l.starts_with("bind_operator_rrset_repairs_total{"))
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_rrset_changed_by_another_client_is_restored_with_an_event_and_counted() {
    // Periodic checks every second: they notice the serial another client moved.
    let settings = Settings {
        verify_interval: Duration::from_secs(1),
        survey_max_age: Duration::from_millis(500),
        ..test_settings()
    };
    let (env, named) = setup(settings).await;
    let p = named.primary.dns.port;
    let mut z = zone("drift", "drift.test");
    z.spec.records = serde_json::from_value(json!([
        {"name": "www", "type": "A", "values": ["192.0.2.80"]},
    ]))
    .unwrap();
    env.create(z).await;
    env.create(record(
        "api",
        "drift",
        "api",
        RecordType::A,
        &["192.0.2.81"],
    ))
    .await;
    env.record_phase("api", Phase::Ready).await;
    env.zone_phase("drift", Phase::Ready).await;
    follow(p, "www.drift.test", "A", &["192.0.2.80"]);
    follow(p, "api.drift.test", "A", &["192.0.2.81"]);
    // A change of the object itself is no drift.
    env.patch_spec::<bind_operator::api::DNSRecord>("api", json!({"values": ["192.0.2.82"]}))
        .await;
    follow(p, "api.drift.test", "A", &["192.0.2.82"]);
    assert!(restored_events(&env.client).await.is_empty());
    assert_eq!(repairs(&env), None, "counted the operator's own writes");

    // Another client replaces one owned RRset and deletes the other; a
    // record of its own stays.
    nsupdate(
        p,
        &env.update,
        &[
            "update delete api.drift.test. A",
            "update add api.drift.test. 300 A 203.0.113.9",
            "update delete www.drift.test. A",
            "update add theirs.drift.test. 300 A 203.0.113.10",
        ],
    );
    follow(p, "api.drift.test", "A", &["192.0.2.82"]);
    follow(p, "www.drift.test", "A", &["192.0.2.80"]);
    follow(p, "theirs.drift.test", "A", &["203.0.113.10"]);

    let deadline = tokio::time::Instant::now() + support::CONVERGE;
    let events = loop {
        let e = restored_events(&env.client).await;
        if e.len() >= 2 || tokio::time::Instant::now() > deadline {
            break e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut events = events;
    events.sort();
    assert_eq!(
        events,
        vec![
            (
                "BindZone".to_string(),
                "drift".to_string(),
                "RRset www.drift.test. A restored: changed by another client".to_string()
            ),
            (
                "DNSRecord".to_string(),
                "api".to_string(),
                "RRset api.drift.test. A restored: changed by another client".to_string()
            ),
        ]
    );
    assert_eq!(
        repairs(&env).as_deref(),
        Some("bind_operator_rrset_repairs_total{namespace=\"dns\",zone=\"drift.test\"} 2")
    );
    // Still Ready: what resolvers get is what the objects say.
    let z = env.get::<BindZone>("drift").await.unwrap();
    assert_eq!(z.status.unwrap().phase, Some(Phase::Ready));
    env.stop().await;
}
