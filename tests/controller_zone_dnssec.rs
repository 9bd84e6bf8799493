//! DNSSEC on real `named` (issue 13 item 6, issue 14 item 5): the zone
//! controller against the in-memory API, each pod's commands run on this
//! machine (the harness of `controller_zone_named`). What a user sees:
//! `dig` on the primary and the secondary, the BindZone's status, and the
//! files left in the primary's data directory. Runs on whichever BIND is
//! installed (9.18 here, 9.20 in the trixie lane): the same assertions hold
//! on both.

use crate::controller_zone_named::{follow, setup};
use crate::support_bind as harness;
use crate::support_zones as support;

use std::path::Path;
use std::process::{Command as Process, Stdio};

use bind_operator::api::{BindZone, Phase};
use harness::wait_until;
use kube::ResourceExt as _;
use serde_json::json;
use support::{test_settings, zone};

/// The settings of the tests that wait for a zone to be signed and Ready.
/// named bumps a signed zone's serial as it signs, and under load a
/// secondary can miss one of those NOTIFYs (seen: the secondary one serial
/// behind for good, so the zone is not Ready: `NotServed`). In production
/// the recheck after a write (5 s) sees it lagging and NOTIFYs it; here it
/// runs every second after the write.
fn signing_settings() -> bind_operator::controller::zonesync::Settings {
    bind_operator::controller::zonesync::Settings {
        recheck_after_write: std::time::Duration::from_secs(1),
        survey_max_age: std::time::Duration::from_secs(30),
        ..test_settings()
    }
}

/// A zone with an in-zone nameserver and one record.
fn web(name: &str, zone_name: &str, policy: Option<&str>) -> BindZone {
    let mut z = zone(name, zone_name);
    z.spec.nameservers = vec!["ns1".into()];
    z.spec.records = serde_json::from_value(json!([
        {"name": "ns1", "type": "A", "values": ["192.0.2.53"]},
        {"name": "www", "type": "A", "values": ["192.0.2.80"]},
    ]))
    .unwrap();
    z.spec.dnssec_policy = policy.map(str::to_string);
    z
}

/// DNSKEY lines the server at `port` answers for `zone`.
fn dnskeys(port: u16, zone: &str) -> String {
    harness::dig(port, &["+noall", "+answer", "+norecurse", zone, "DNSKEY"])
}

/// `dnssec-dsfromkey -2` of what the server serves: the DS a user would
/// compute for the parent by hand.
fn ds_by_bind_tools(port: u16, zone: &str) -> Vec<String> {
    let mut child = Process::new("dnssec-dsfromkey")
        .args(["-2", "-f", "-", zone])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("dnssec-dsfromkey");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dnskeys(port, zone).as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn rrsig_count(port: u16, name: &str) -> usize {
    harness::dig(port, &["+norecurse", "+dnssec", name, "A"])
        .lines()
        .filter(|l| l.contains("\tRRSIG\t") || l.contains(" RRSIG "))
        .count()
}

/// Files in the primary's data directory (recursively) named for `zone`:
/// key files `K<zone>.+*` and `<zone>.db*`.
fn zone_files(dir: &Path, zone: &str) -> Vec<String> {
    let mut out = Vec::new();
    let key_prefix = format!("K{zone}.+");
    let db_prefix = format!("{zone}.db");
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&key_prefix) || name.starts_with(&db_prefix) {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

/// Waits until the zone's status reports it signed, and returns it.
async fn signed(env: &support::Env, name: &str) -> BindZone {
    env.wait::<BindZone, _>("zone signed", name, |z| {
        let z = z?;
        let s = z.status.as_ref()?;
        let d = s.dnssec.as_ref()?;
        (s.phase == Some(Phase::Ready) && d.signed && !d.ds.is_empty()).then(|| z.clone())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_added_to_a_zone_signs_it_and_removing_it_unsigns_through_insecure() {
    let (env, named) = setup(signing_settings()).await;
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);
    env.create(web("sig", "sig.test", None)).await;
    let z = env.zone_phase("sig", Phase::Ready).await;
    assert!(z.status.unwrap().dnssec.is_none());
    follow(s, "www.sig.test", "A", &["192.0.2.80"]);
    assert_eq!(dnskeys(p, "sig.test"), "");

    // Added to the existing zone: BIND 9.20 needs more than modzone.
    env.patch_spec::<BindZone>("sig", json!({"dnssecPolicy": "default"}))
        .await;
    let z = signed(&env, "sig").await;
    let d = z.status.unwrap().dnssec.unwrap();
    assert_eq!(d.policy, "default");
    println!("signed: key tags {:?}, ds {:?}", d.key_tags, d.ds);
    assert_eq!(
        d.ds,
        ds_by_bind_tools(p, "sig.test"),
        "DS as dnssec-dsfromkey computes it"
    );
    assert!(d.ds[0].starts_with("sig.test. IN DS "), "{:?}", d.ds);
    assert!(
        d.ds[0].contains(" 13 2 "),
        "ECDSAP256SHA256, SHA-256: {:?}",
        d.ds
    );
    for tag in &d.key_tags {
        assert!(d.ds.iter().any(|ds| ds.contains(&format!(" DS {tag} "))));
    }
    // Served signed on the primary and, through the transfer, the secondary;
    // the record is still there.
    assert!(
        rrsig_count(p, "www.sig.test") > 0,
        "no RRSIG on the primary"
    );
    assert!(
        wait_until(support::CONVERGE, || rrsig_count(s, "www.sig.test") > 0),
        "no RRSIG on the secondary"
    );
    follow(p, "www.sig.test", "A", &["192.0.2.80"]);
    // A record added to the signed zone is served signed.
    env.patch_spec::<BindZone>(
        "sig",
        json!({"records": [
            {"name": "ns1", "type": "A", "values": ["192.0.2.53"]},
            {"name": "www", "type": "A", "values": ["192.0.2.80"]},
            {"name": "api", "type": "A", "values": ["192.0.2.81"]},
        ]}),
    )
    .await;
    follow(s, "api.sig.test", "A", &["192.0.2.81"]);
    assert!(
        wait_until(support::CONVERGE, || rrsig_count(s, "api.sig.test") > 0),
        "the new record is not signed on the secondary"
    );

    // Removed: through `insecure` until no DNSKEY is served, then none.
    env.patch_spec::<BindZone>("sig", json!({"dnssecPolicy": null}))
        .await;
    env.wait::<BindZone, _>("dnssec status cleared", "sig", |z| {
        let s = z?.status.as_ref()?;
        (s.dnssec.is_none() && s.phase == Some(Phase::Ready)).then_some(())
    })
    .await;
    assert_eq!(dnskeys(p, "sig.test"), "", "DNSKEY still served");
    // The unsigned zone's kept keys go with the policy.
    env.gone::<k8s_openapi::api::core::v1::Secret>("sig-dnssec-keys")
        .await;
    assert!(
        wait_until(support::CONVERGE, || rrsig_count(s, "www.sig.test") == 0
            && dnskeys(s, "sig.test").is_empty()),
        "the secondary still serves signatures"
    );
    follow(s, "api.sig.test", "A", &["192.0.2.81"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_signed_zone_removes_its_files_and_a_new_one_gets_new_keys() {
    let (env, named) = setup(signing_settings()).await;
    let p = named.primary.dns.port;
    let data = named.primary.layout.data_dir.clone();
    env.create(web("gone", "gone.test", Some("default"))).await;
    let old = signed(&env, "gone").await.status.unwrap().dnssec.unwrap();
    let before = zone_files(&data, "gone.test");
    println!("files of the signed zone: {before:?}");
    assert!(
        before.iter().any(|f| f.ends_with(".private")),
        "no key files? {before:?}"
    );

    env.delete::<BindZone>("gone").await;
    env.gone::<BindZone>("gone").await;
    assert!(
        wait_until(support::CONVERGE, || zone_files(&data, "gone.test")
            .is_empty()),
        "left behind: {:?}",
        zone_files(&data, "gone.test")
    );
    assert!(!harness::dig(p, &["+norecurse", "gone.test", "SOA"]).contains("status: NOERROR"));

    env.create(web("gone", "gone.test", Some("default"))).await;
    let new = signed(&env, "gone").await.status.unwrap().dnssec.unwrap();
    println!("old key tags {:?}, new {:?}", old.key_tags, new.key_tags);
    assert!(
        new.key_tags.iter().all(|t| !old.key_tags.contains(t)),
        "the re-created zone reuses old keys: {:?} vs {:?}",
        old.key_tags,
        new.key_tags
    );
    assert_eq!(new.ds, ds_by_bind_tools(p, "gone.test"));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_named_refuses_reports_named_reason_keeps_serving_and_is_not_retried() {
    let (env, named) = setup(test_settings()).await;
    let p = named.primary.dns.port;
    // A new zone with an undefined policy.
    env.create(web("bad", "bad.test", Some("no-such-policy")))
        .await;
    let z = env.zone_phase("bad", Phase::Error).await;
    let cond = &z.status.as_ref().unwrap().conditions[0];
    println!("new zone: {}: {}", cond.reason, cond.message);
    assert_eq!(cond.reason, "DnssecPolicyRefused");
    assert!(
        cond.message.contains("\"no-such-policy\""),
        "{}",
        cond.message
    );
    assert!(cond.message.contains("not found"), "{}", cond.message);
    assert!(!cond.message.contains("zone not found"), "{}", cond.message);

    // An existing, served zone given an undefined policy keeps serving.
    env.create(web("ok", "ok.test", None)).await;
    env.zone_phase("ok", Phase::Ready).await;
    env.patch_spec::<BindZone>("ok", json!({"dnssecPolicy": "nope"}))
        .await;
    let z = env.zone_phase("ok", Phase::Error).await;
    let cond = &z.status.as_ref().unwrap().conditions[0];
    println!("existing zone: {}: {}", cond.reason, cond.message);
    assert_eq!(cond.reason, "DnssecPolicyRefused");
    follow(p, "www.ok.test", "A", &["192.0.2.80"]);

    // Not retried: the status and log stay as they are for a while (a
    // retry would run rndc again; named logs every control command).
    let log_lines = |t: &str| {
        named
            .primary
            .log_text()
            .lines()
            .filter(|l| l.contains("received control channel command") && l.contains(t))
            .count()
    };
    let before = (log_lines("bad.test"), log_lines("ok.test"));
    // "A while": as long as a zone created now takes to be signed (its
    // status follows named through DNSSEC rechecks 2 s apart; a retry
    // would come after 100-400 ms here).
    env.create(web("witness", "witness.test", Some("default")))
        .await;
    signed(&env, "witness").await;
    let after = (log_lines("bad.test"), log_lines("ok.test"));
    println!("rndc commands for the zones before/after a zone got signed: {before:?} {after:?}");
    assert_eq!(before, after, "a refused policy was retried");

    // Fixing the spec heals it.
    env.patch_spec::<BindZone>("bad", json!({"dnssecPolicy": "default"}))
        .await;
    signed(&env, "bad").await;
    env.stop().await;
}

/// The root zone's KSK-2017 as IANA publishes it (DS, digest type 2).
const ROOT_DS: &str = "E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D";
/// The root zone's KSK-2024 (key tag 38696), likewise.
const ROOT_DS_2024: &str = "683D2D0ACB8C9B712A1948B27F741219298D0A450D612C483AF444A4C0FB2B16";

#[tokio::test]
async fn validation_yes_without_trust_anchors_is_refused_and_nothing_serving_changes() {
    use crate::support_controller::{Harness, NS, material};
    use bind_operator::api::{CONDITION_READY, find_condition};
    use k8s_openapi::api::core::v1::ConfigMap;

    let h = Harness::new().await;
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    h.cluster("c", 1).await;
    h.converge("c", 1).await;
    let before = h.api.get::<ConfigMap>(Some(NS), "c-config").unwrap();
    h.patch_cluster_spec("c", json!({"recursion": true, "dnssecValidation": "yes"}))
        .await;
    let execs = h.exec.calls();
    h.reconcile_cluster("c").await;
    let status = h.get_cluster("c").status.unwrap();
    let ready = find_condition(&status.conditions, CONDITION_READY).unwrap();
    println!("{}: {}", ready.reason, ready.message);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert!(
        ready.message.contains("spec.dnssecValidation"),
        "{}",
        ready.message
    );
    assert!(
        ready.message.contains("spec.trustAnchors"),
        "{}",
        ready.message
    );
    let after = h.api.get::<ConfigMap>(Some(NS), "c-config").unwrap();
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "the config changed"
    );
    assert_eq!(h.exec.calls(), execs, "a pod was touched");

    // A bad anchor names its field; nothing renders either.
    h.patch_cluster_spec(
        "c",
        json!({"trustAnchors": [{"name": ".", "type": "initial-ds", "keyTag": 20326,
            "algorithm": 8, "digestType": 2, "digest": "E06D"}]}),
    )
    .await;
    h.reconcile_cluster("c").await;
    let status = h.get_cluster("c").status.unwrap();
    let ready = find_condition(&status.conditions, CONDITION_READY).unwrap();
    assert_eq!(ready.reason, "InvalidSpec");
    assert!(
        ready.message.contains("spec.trustAnchors[0]"),
        "{}",
        ready.message
    );
    let after = h.api.get::<ConfigMap>(Some(NS), "c-config").unwrap();
    assert_eq!(after.resource_version(), before.resource_version());

    // A static root anchor beside auto's built-in one: named refuses it.
    h.patch_cluster_spec(
        "c",
        json!({"dnssecValidation": "auto", "trustAnchors": [{"name": ".", "type": "static-ds",
            "keyTag": 20326, "algorithm": 8, "digestType": 2, "digest": ROOT_DS}]}),
    )
    .await;
    h.reconcile_cluster("c").await;
    let status = h.get_cluster("c").status.unwrap();
    let ready = find_condition(&status.conditions, CONDITION_READY).unwrap();
    assert_eq!(ready.reason, "InvalidSpec");
    assert!(
        ready
            .message
            .contains("cannot be used with dnssecValidation auto"),
        "{}",
        ready.message
    );
    let after = h.api.get::<ConfigMap>(Some(NS), "c-config").unwrap();
    assert_eq!(after.resource_version(), before.resource_version());

    // With the root's DS it renders `trust-anchors`.
    h.patch_cluster_spec("c", json!({"dnssecValidation": "yes"}))
        .await;
    h.patch_cluster_spec(
        "c",
        json!({"trustAnchors": [{"name": ".", "type": "initial-ds", "keyTag": 20326,
            "algorithm": 8, "digestType": 2, "digest": ROOT_DS}]}),
    )
    .await;
    h.converge("c", 1).await;
    let cm = h.api.get::<ConfigMap>(Some(NS), "c-config").unwrap();
    let conf = &cm.data.unwrap()["named.conf.primary"];
    assert!(conf.contains("dnssec-validation yes;"), "{conf}");
    assert!(
        conf.contains(&format!("\".\" initial-ds 20326 8 2 \"{ROOT_DS}\";")),
        "{conf}"
    );
}

/// `dnssec-validation yes` with trust anchors as the cluster renders it:
/// named-checkconf passes and named starts and answers (BIND 9.20 refuses
/// `yes` without anchors; this config is what the operator now renders).
#[test]
fn validation_yes_with_trust_anchors_starts_named() {
    use bind_operator::bind::dnssec::{AnchorFields, AnchorKind, TrustAnchor};
    use bind_operator::bind::render::{DnssecValidation, render_cluster};
    use bind_operator::bind::{TsigAlgorithm, commands, parse};

    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let mut pod = harness::Pod::new(tmp.path(), &config, 0);
    let xfer = harness::random_key("xfer", TsigAlgorithm::HmacSha256);
    let update = harness::random_key("update", TsigAlgorithm::HmacSha256);
    let mut cfg = harness::small_config(pod.endpoint(), &xfer, &update);
    cfg.dnssec_validation = DnssecValidation::Yes;
    cfg.trust_anchors = vec![
        TrustAnchor::parse(
            ".",
            AnchorKind::InitialDs,
            &AnchorFields {
                key_tag: Some(20326),
                algorithm: Some(8),
                digest_type: Some(2),
                digest: Some(ROOT_DS),
                ..Default::default()
            },
        )
        .unwrap(),
        // 9.20's checkconf wants the root's 2024 KSK beside the 2017 one.
        TrustAnchor::parse(
            ".",
            AnchorKind::InitialDs,
            &AnchorFields {
                key_tag: Some(38696),
                algorithm: Some(8),
                digest_type: Some(2),
                digest: Some(ROOT_DS_2024),
                ..Default::default()
            },
        )
        .unwrap(),
        TrustAnchor::parse(
            "corp.example",
            AnchorKind::StaticKey,
            &AnchorFields {
                flags: Some(257),
                algorithm: Some(13),
                public_key: Some("GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edbkrSqQpF64cYbcB7wNcP+e+MAnLr+Wi9xMWyQLc8NAA=="),
                ..Default::default()
            },
        )
        .unwrap(),
    ];
    harness::write_mount(&config, &render_cluster(&cfg).unwrap());
    pod.prepare();
    let check = harness::run(&commands::checkconf(&pod.layout, false));
    assert!(
        check.ok() && check.stdout.is_empty(),
        "checkconf: {}",
        check.stdout
    );
    assert!(parse::parse_checkconf(&check.stdout).is_empty());
    // Started with the static anchor only: an initial-* anchor makes named
    // send RFC 5011 refresh queries to the root servers, and tests stay on
    // loopback.
    cfg.trust_anchors.drain(..2);
    harness::write_mount(&config, &render_cluster(&cfg).unwrap());
    pod.start();
    assert!(
        wait_until(support::CONVERGE, || harness::run(&commands::probe(
            &pod.layout
        ))
        .ok()),
        "named did not answer: {}",
        pod.log_text()
    );
    pod.stop();
}

/// Kills the primary's named, empties its data directory and starts it
/// again (a pod rebuilt on a fresh emptyDir); kubelet reports a restart.
async fn rebuild_primary(
    env: &support::Env,
    named: &mut crate::controller_zone_named::Named,
    restarts: i32,
) {
    named.primary.stop();
    let data = named.primary.layout.data_dir.clone();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    named.primary.start();
    assert_eq!(
        dnskeys(named.primary.dns.port, "keep.test"),
        "",
        "the volume was not empty"
    );
    env.set_pod(support::PRIMARY, true, restarts).await;
}

/// The key tags the server at `port` serves for `zone`.
fn served_tags(port: u16, zone: &str) -> Vec<u16> {
    let z = bind_operator::bind::ZoneName::parse(zone).unwrap();
    let mut tags: Vec<u16> = bind_operator::bind::dnssec::parse_dnskeys(&dnskeys(port, zone), &z)
        .iter()
        .map(|k| k.key_tag())
        .collect();
    tags.sort_unstable();
    tags
}

/// The keys Secret once it holds the key files of `tags`.
async fn kept_secret(env: &support::Env, tags: &[u16]) -> k8s_openapi::api::core::v1::Secret {
    let want = tags
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",");
    env.wait::<k8s_openapi::api::core::v1::Secret, _>(
        "keys kept in the Secret",
        "keep-dnssec-keys",
        |s| {
            let s = s?;
            (s.annotations().get("bind.unkin.net/dnssec-key-tags") == Some(&want))
                .then(|| s.clone())
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_rebuilt_on_an_empty_volume_signs_with_the_kept_keys_across_an_operator_restart()
{
    let settings = signing_settings();
    let (mut env, mut named) = setup(settings.clone()).await;
    let p = named.primary.dns.port;
    env.create(web("keep", "keep.test", Some("default"))).await;
    let z = signed(&env, "keep").await;
    let before = z.status.unwrap().dnssec.unwrap();
    assert_eq!(served_tags(p, "keep.test"), before.key_tags);

    // Kept in a Secret the zone owns: the key files, named for the key.
    let secret = kept_secret(&env, &before.key_tags).await;
    let uid = z.metadata.uid.clone().unwrap();
    assert!(
        secret
            .owner_references()
            .iter()
            .any(|o| o.uid == uid && o.kind == "BindZone")
    );
    let names: Vec<&String> = secret.data.as_ref().unwrap().keys().collect();
    println!("kept: {names:?}");
    for ext in ["key", "private", "state"] {
        assert!(
            names.iter().any(|n| n.ends_with(&format!(".{ext}"))),
            "no .{ext} in {names:?}"
        );
    }

    // The primary rebuilt on an empty volume: same keys, same DS.
    rebuild_primary(&env, &mut named, 1).await;
    let ok = wait_until(support::CONVERGE, || {
        served_tags(p, "keep.test") == before.key_tags
    });
    assert!(
        ok,
        "served after the rebuild: {:?}, want {:?}",
        served_tags(p, "keep.test"),
        before.key_tags
    );
    follow(p, "www.keep.test", "A", &["192.0.2.80"]);
    assert!(
        rrsig_count(p, "www.keep.test") > 0,
        "not signed after the rebuild"
    );
    let after = signed(&env, "keep").await.status.unwrap().dnssec.unwrap();
    assert_eq!(after.key_tags, before.key_tags);
    assert_eq!(
        after.ds, before.ds,
        "the DS at the parent would no longer match"
    );
    assert_eq!(after.ds, ds_by_bind_tools(p, "keep.test"));

    // A fresh operator (nothing in memory) and another rebuild: the keys
    // come from the Secret alone.
    let exec = std::sync::Arc::new(crate::controller_zone_named::LocalExec {
        layouts: std::collections::HashMap::from([
            (support::PRIMARY.to_string(), named.primary.layout.clone()),
            (
                support::SECONDARY.to_string(),
                named.secondary.layout.clone(),
            ),
        ]),
    });
    env.restart_operator(support::Bind::Exec(exec), settings)
        .await;
    rebuild_primary(&env, &mut named, 2).await;
    let ok = wait_until(support::CONVERGE, || {
        served_tags(p, "keep.test") == before.key_tags
    });
    assert!(
        ok,
        "served after the restart and rebuild: {:?}, want {:?}",
        served_tags(p, "keep.test"),
        before.key_tags
    );
    follow(p, "www.keep.test", "A", &["192.0.2.80"]);
    let last = signed(&env, "keep").await.status.unwrap().dnssec.unwrap();
    assert_eq!((last.key_tags, last.ds), (before.key_tags, before.ds));
    env.stop().await;
}
