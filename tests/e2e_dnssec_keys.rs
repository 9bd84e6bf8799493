//! Issue 23 item 6 on the production path in local mode: the example zone
//! signed (`dnssecPolicy: default`), then the primary's named killed and
//! started again on an empty data volume (the runtime's kill with
//! `RestartData::Empty`, as a pod rebuilt onto a fresh emptyDir). The
//! zone comes back signed with the same key tags and the same
//! `status.dnssec.ds`, and the DNSKEYs served are the kept ones. The
//! private key kept in the Secret shows in no status.

use crate::support_e2e as support;

use std::time::Duration;

use bind_operator::api::{BindZone, ZoneDnssecStatus};
use bind_operator::bind::ZoneName;
use bind_operator::bind::dnssec::parse_dnskeys;
use bind_operator::local::command::Backend;
use bind_operator::local::runtime::RestartData;
use kube::Api;
use support::{Fixture, blocking};
use tokio_util::sync::CancellationToken;

/// The key tags `port` serves for example.com.
fn served_tags(port: u16) -> Vec<u16> {
    let out = std::process::Command::new("dig")
        .args(["+noall", "+answer", "+norec", "+time=1", "+tries=1", "-p"])
        .arg(port.to_string())
        .args(["@127.0.0.1", "example.com.", "DNSKEY"])
        .output()
        .expect("dig runs");
    let zone = ZoneName::parse("example.com").unwrap();
    let mut tags: Vec<u16> = parse_dnskeys(&String::from_utf8_lossy(&out.stdout), &zone)
        .iter()
        .map(|k| k.key_tag())
        .collect();
    tags.sort_unstable();
    tags
}

/// The zone's DNSSEC status once Ready and signed.
async fn signed(zones: &Api<BindZone>) -> ZoneDnssecStatus {
    let deadline = tokio::time::Instant::now() + support::STARTUP;
    loop {
        let z = zones.get_opt("example-com").await.unwrap();
        let status = z.and_then(|z| z.status);
        if let Some(d) = status.as_ref().and_then(|s| {
            (s.phase == Some(bind_operator::api::Phase::Ready))
                .then(|| s.dnssec.clone())
                .flatten()
                .filter(|d| d.signed && !d.ds.is_empty())
        }) {
            return d;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the zone is not signed: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_zone_keeps_its_keys_when_the_primary_comes_back_on_an_empty_volume() {
    let f = Fixture::examples();
    let zone = f.read("bindzone.yaml");
    f.write(
        "bindzone.yaml",
        &zone.replace(
            "  defaultTTL: 3600\n",
            "  defaultTTL: 3600\n  dnssecPolicy: default\n",
        ),
    );
    let mode = support::local_in_process(&f, Backend::InMemory).await;
    let runtime = mode.runtime();
    let client = mode.memapi().expect("in-memory API").client();
    let zones: Api<BindZone> = Api::namespaced(client.clone(), "default");
    let stop = CancellationToken::new();
    let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));

    let before = signed(&zones).await;
    let s = blocking({
        let state = f.state.clone();
        move || {
            let deadline = std::time::Instant::now() + support::STARTUP;
            loop {
                if let Some(s) = support::read_status(&state).filter(support::all_ready) {
                    return s;
                }
                assert!(std::time::Instant::now() < deadline, "not all Ready");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    })
    .await;
    let primary = support::primary(&s, "example").clone();
    let port = primary.dns.port();
    assert_eq!(served_tags(port), before.key_tags);
    // Kept before the rebuild.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
    let deadline = tokio::time::Instant::now() + support::STARTUP;
    while secrets
        .get_opt("example-com-dnssec-keys")
        .await
        .unwrap()
        .is_none()
    {
        assert!(tokio::time::Instant::now() < deadline, "no keys Secret");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The private key is in the Secret and nowhere the user reads status.
    let kept = secrets.get("example-com-dnssec-keys").await.unwrap();
    let private = kept
        .data
        .iter()
        .flatten()
        .find(|(k, _)| k.ends_with(".private"))
        .map(|(_, v)| String::from_utf8(v.0.clone()).unwrap())
        .expect("a .private file kept");
    let secret = private
        .lines()
        .find_map(|l| l.strip_prefix("PrivateKey: "))
        .expect("a PrivateKey line");
    let shown = format!(
        "{}{}",
        serde_json::to_string(&zones.get("example-com").await.unwrap().status).unwrap(),
        std::fs::read_to_string(f.state.join("status.json")).unwrap_or_default()
    );
    assert!(!shown.contains(secret), "the private key shows in a status");

    runtime
        .kill_named("default", &primary.name, RestartData::Empty)
        .unwrap();
    let ok = blocking(move || {
        let deadline = std::time::Instant::now() + support::STARTUP;
        while std::time::Instant::now() < deadline {
            let tags = served_tags(port);
            if !tags.is_empty() {
                return tags;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Vec::new()
    })
    .await;
    assert_eq!(
        ok, before.key_tags,
        "the rebuilt primary signs with other keys"
    );
    assert_eq!(runtime.pod("default", &primary.name).unwrap().restarts, 1);
    let after = signed(&zones).await;
    assert_eq!((after.key_tags, after.ds), (before.key_tags, before.ds));

    drop(runtime);
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(20), serving).await;
}
