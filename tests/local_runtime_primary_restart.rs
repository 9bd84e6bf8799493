//! What a user sees when the primary restarts, end to end with real named
//! (the controllers and the local runtime on one in-memory API): the
//! primary Pod deleted (re-created by the StatefulSet on an empty emptyDir)
//! costs no DNSRecord write — the secondary answers every record the whole
//! time, so every DNSRecord stays Ready — the zone says the primary is
//! rebuilding and then Served, and the new primary serves every zone. And
//! a converged cluster is idle toward the API server: between periodic
//! checks it sends nothing but its open watches.

use crate::local_runtime_serving::Env;
use crate::support_local as support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bind_operator::api::{BindZone, DNSRecord, Phase, find_condition};
use bind_operator::local::memapi::Verb;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use kube::runtime::watcher::watch_object;
use serde_json::json;
use support::{NS, wait_for};

/// Zones and DNSRecords per zone of the restart test.
const ZONES: usize = 3;
const RECORDS: usize = 4;

fn zone_name(z: usize) -> String {
    format!("z{z}.example")
}

fn address(z: usize, r: usize) -> String {
    format!("192.0.2.{}", 10 * z + r + 1)
}

/// Cluster `c` with `replicas` pods, [`ZONES`] zones of [`RECORDS`]
/// DNSRecords each; returns once every record is Ready and every zone
/// served by every pod.
async fn converged(env: &Env, replicas: i32) {
    env.cluster_with_zone(replicas).await;
    for z in 0..ZONES {
        env.create::<BindZone>(json!({
            "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindZone",
            "metadata": {"name": format!("z{z}"), "namespace": NS},
            "spec": {"clusterRef": "c", "zoneName": zone_name(z),
                     "nameservers": ["ns1.example.com."], "updateKeyRef": "xfer"},
        }))
        .await;
        for r in 0..RECORDS {
            env.create::<DNSRecord>(json!({
                "apiVersion": "bind.unkin.net/v1alpha1", "kind": "DNSRecord",
                "metadata": {"name": format!("r{r}-z{z}"), "namespace": NS},
                "spec": {"zoneRef": format!("z{z}"), "name": format!("h{r}"), "type": "A",
                         "values": [address(z, r)]},
            }))
            .await;
        }
    }
    let pods: Vec<String> = (0..replicas).map(|i| format!("c-{i}")).collect();
    wait_for("every record Ready and every zone on every pod", || async {
        let records: Vec<DNSRecord> = env.h.api.list();
        let ready = records.len() == ZONES * RECORDS
            && records
                .iter()
                .all(|r| r.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready));
        let zones: Vec<BindZone> = env.h.api.list();
        let served = zones.len() == ZONES + 1
            && zones.iter().all(|z| {
                z.status.as_ref().is_some_and(|s| {
                    s.phase == Some(Phase::Ready)
                        && s.servers.keys().cloned().collect::<Vec<_>>() == pods
                        && s.in_sync.as_deref() == Some(&format!("{replicas}/{replicas}"))
                })
            });
        (ready && served).then_some(())
    })
    .await;
}

/// Every expected record `port` does not answer, as "name address".
async fn missing_on(port: u16) -> Vec<String> {
    let mut missing = Vec::new();
    for z in 0..ZONES {
        for r in 0..RECORDS {
            let name = format!("h{r}.{}", zone_name(z));
            if support::dig(port, &[&name, "A"]).await != address(z, r) {
                missing.push(format!("{name} {}", address(z, r)));
            }
        }
    }
    missing
}

/// Waits until the operator has sent no request but watches for `quiet`
/// (the counters are reset at every change).
async fn quiet(env: &Env, quiet: Duration) {
    let deadline = Instant::now() + support::WAIT;
    let mut since = Instant::now();
    env.h.api.reset_counts();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if non_watch_requests(env) > 0 {
            env.h.api.reset_counts();
            since = Instant::now();
        }
        if since.elapsed() >= quiet {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the converged cluster never went quiet toward the API"
        );
    }
}

fn non_watch_requests(env: &Env) -> u64 {
    [
        Verb::Get,
        Verb::List,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ]
    .into_iter()
    .map(|v| env.h.api.count_verb(v))
    .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_restart_keeps_every_record_ready_and_answered() {
    let env = Env::start(|_| {}).await;
    converged(&env, 2).await;
    let old_uid = env.h.pods().get("c-0").await.unwrap().metadata.uid;
    let secondary = env.h.runtime.pod(NS, "c-1").unwrap().dns.port();
    assert_eq!(missing_on(secondary).await, Vec::<String>::new());

    // From the delete on: what the secondary answers, the zones' Ready
    // reasons and any DNSRecord that is not Ready, as a user would watch.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = Arc::new(Mutex::new((
        Vec::<String>::new(),
        BTreeSet::<String>::new(),
        BTreeSet::<String>::new(),
    )));
    let watcher = {
        let (done, seen, api) = (done.clone(), seen.clone(), env.h.api.clone());
        tokio::spawn(async move {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let missing = missing_on(secondary).await;
                let records: Vec<DNSRecord> = api.list();
                {
                    let mut s = seen.lock().unwrap();
                    s.0.extend(missing);
                    for r in records {
                        if r.status.as_ref().and_then(|s| s.phase) != Some(Phase::Ready) {
                            s.2.insert(r.metadata.name.unwrap_or_default());
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    // Every status z0 goes through, from a watch (each write is an event:
    // a brief one is not missed between polls).
    let zone_watch = {
        let (seen, zones) = (seen.clone(), env.zones());
        let stream = watch_object(zones, "z0");
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(Some(z))) = stream.next().await {
                if let Some(c) = z
                    .status
                    .as_ref()
                    .and_then(|s| find_condition(&s.conditions, "Ready"))
                {
                    seen.lock()
                        .unwrap()
                        .1
                        .insert(format!("{} {}", c.status, c.reason));
                }
            }
        })
    };
    env.h.api.reset_counts();
    env.h
        .pods()
        .delete("c-0", &DeleteParams::default())
        .await
        .unwrap();
    let deleted = Instant::now();
    // The new primary (another Pod object) serves every record again.
    wait_for("a new c-0 serving every record", || async {
        let p: Pod = env.h.pods().get("c-0").await.ok()?;
        (p.metadata.uid != old_uid).then_some(())?;
        let port = env.h.runtime.pod(NS, "c-0")?.dns.port();
        missing_on(port).await.is_empty().then_some(())
    })
    .await;
    let rebuilt = deleted.elapsed();
    wait_for("zone z0 Served again on both pods", || async {
        let z = env.zones().get("z0").await.ok()?;
        let s = z.status?;
        let c = find_condition(&s.conditions, "Ready")?;
        (c.reason == "Served" && s.in_sync.as_deref() == Some("2/2")).then_some(())
    })
    .await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.await.unwrap();
    zone_watch.abort();

    let (missing, reasons, not_ready) = seen.lock().unwrap().clone();
    assert!(
        missing.is_empty(),
        "the secondary stopped answering during the restart: {missing:?}"
    );
    assert!(
        not_ready.is_empty(),
        "DNSRecords left Ready during the restart: {not_ready:?}"
    );
    assert_eq!(
        env.h.api.count(Verb::Patch, "dnsrecords") + env.h.api.count(Verb::Update, "dnsrecords"),
        0,
        "a primary restart wrote DNSRecords"
    );
    assert!(
        reasons.contains("True PrimaryRebuilding"),
        "the zone never said the primary was rebuilding: {reasons:?}"
    );
    assert!(
        reasons.iter().all(|r| r.starts_with("True")),
        "the zone left Ready although the secondary served it: {reasons:?}"
    );
    eprintln!("new primary served every record {rebuilt:?} after the delete");
    env.finish().await;
}

/// A converged cluster, held for a while shorter than the periodic check:
/// the API server hears nothing from the operator but its watches (no Get
/// of a Secret, no List, no status write). The local runtime sends nothing
/// either while nothing changes, so every request counted is the
/// operator's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_cluster_sends_no_request_between_periodic_checks() {
    let env = Env::start(|_| {}).await;
    converged(&env, 2).await;
    // Past the catch-up check after the last write (5 s), then quiet.
    quiet(&env, Duration::from_secs(2)).await;
    // The hold itself: a window, not a wait for something.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let requests = non_watch_requests(&env);
    assert_eq!(
        requests,
        0,
        "requests while converged: get {} list {} patch {} update {} create {}",
        env.h.api.count_verb(Verb::Get),
        env.h.api.count_verb(Verb::List),
        env.h.api.count_verb(Verb::Patch),
        env.h.api.count_verb(Verb::Update),
        env.h.api.count_verb(Verb::Create),
    );
    env.finish().await;
}
