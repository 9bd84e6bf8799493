//! Group commit of record writes, not a fixed quiet:
//!
//! - The per-pod batcher on a gated fake pod (tokio's paused clock): an
//!   idle pod sends a lone update without the clock moving at all (no
//!   timer on the path); updates asked while one is in flight wait for it
//!   and then go together in the next round (all of them in flight at
//!   once, before any returns).
//! - The controllers on real `named`: a lone DNSRecord into a converged
//!   zone is answered by dig on the primary and the secondary after one
//!   UPDATE message carrying just it; a burst of 300 DNSRecords still
//!   reaches the zone in a few large UPDATE messages, every record served
//!   on both.

use crate::controller_zone_named::{LocalExec, follow, start_named};
use crate::support_zones as support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bind_operator::api::{DNSRecord, Phase, RecordType};
use bind_operator::bind::commands::Command;
use bind_operator::bind::layout::PodLayout;
use bind_operator::bind::wire::{UpdateMessage, WireError};
use bind_operator::bind::{TsigKey, ZoneName};
use bind_operator::controller::exec::{ExecError, ExecOutput, PodExecutor, PodRef};
use bind_operator::controller::zonesync::Settings;
use bind_operator::controller::zonesync::server::batch::Batcher;
use bind_operator::controller::zonesync::server::exec_port::ExecServers;
use bind_operator::controller::zonesync::server::port::ZoneServers;
use futures::future::BoxFuture;
use futures::{FutureExt as _, StreamExt as _};
use kube::Api;
use kube::api::ListParams;
use support::{Bind, Env, PRIMARY, SECONDARY, record, test_settings, zone};

/// A pod whose UPDATE exchanges wait at a gate: each notes its zone and
/// the (paused) clock when it starts, then waits for a permit.
struct Gated {
    started: Mutex<Vec<(String, tokio::time::Instant)>>,
    gate: tokio::sync::Semaphore,
}

impl PodExecutor for Gated {
    fn layout(&self, _pod: &PodRef) -> PodLayout {
        PodLayout::in_cluster()
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        async move {
            Err(ExecError::exited(
                pod,
                cmd,
                1,
                String::new(),
                "no exec here",
            ))
        }
        .boxed()
    }

    fn dns_update<'a>(
        &'a self,
        _pod: &'a PodRef,
        messages: &'a [UpdateMessage],
        _key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<usize, WireError>> {
        async move {
            let zone = messages[0].zone.to_string();
            self.started
                .lock()
                .unwrap()
                .push((zone, tokio::time::Instant::now()));
            self.gate.acquire().await.expect("open").forget();
            Ok(messages.len())
        }
        .boxed()
    }
}

fn one_change(zone: &str) -> (ZoneName, Vec<UpdateMessage>) {
    let z = ZoneName::parse(zone).unwrap();
    let batch = bind_operator::bind::nsupdate::UpdateBatch {
        zone: z.clone(),
        changes: vec![bind_operator::bind::nsupdate::RrsetChange::Replace {
            name: bind_operator::bind::DomainName::resolve("www", &z).unwrap(),
            rtype: bind_operator::bind::RecordType::A,
            ttl: bind_operator::bind::Ttl::new(60).unwrap(),
            values: vec![bind_operator::bind::Rdata::A("192.0.2.1".parse().unwrap())],
        }],
        apex_ns: None,
    };
    let messages = bind_operator::bind::wire::update::messages(&batch).unwrap();
    (z, messages)
}

/// Yields until `n` exchanges started (the paused clock never moves while
/// tasks can run, so this waits for work, not for time).
async fn started(pod: &Gated, n: usize) -> Vec<(String, tokio::time::Instant)> {
    for _ in 0..10_000 {
        let now = pod.started.lock().unwrap().clone();
        if now.len() >= n {
            return now;
        }
        tokio::task::yield_now().await;
    }
    panic!(
        "only {:?} started, want {n}",
        pod.started.lock().unwrap().clone()
    );
}

#[tokio::test(start_paused = true)]
async fn an_idle_pod_writes_at_once_and_what_arrives_meanwhile_joins_the_next_write() {
    let gated = Arc::new(Gated {
        started: Mutex::new(Vec::new()),
        gate: tokio::sync::Semaphore::new(0),
    });
    let exec: Arc<dyn ZoneServers> = Arc::new(ExecServers::new(gated.clone()));
    let batcher = Arc::new(Batcher::new());
    let pod = PodRef::new(support::NS, PRIMARY);
    let key = support::random_key(support::UPDATE_KEY);
    let t0 = tokio::time::Instant::now();
    let send = |zone: &str| {
        let (z, m) = one_change(zone);
        let (b, e, p, k) = (batcher.clone(), exec.clone(), pod.clone(), key.clone());
        tokio::spawn(async move { b.update(&e, &p, &z, m, &k, false).await })
    };

    // A lone change on an idle pod: sent with no time passing.
    let lone = send("a.test");
    let first = started(&gated, 1).await;
    assert_eq!(first[0].0, "a.test");
    assert_eq!(first[0].1, t0, "a lone change waited for a timer");

    // Three changes while it is in flight: none starts before it returns.
    let later = [send("b.test"), send("c.test"), send("a.test")];
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        gated.started.lock().unwrap().len(),
        1,
        "joined the write in flight"
    );
    gated.gate.add_permits(1);
    lone.await.unwrap().unwrap();
    // ... then all three in one round: in flight together before any
    // returns (three rounds would start them one at a time).
    let all = started(&gated, 4).await;
    let mut next: Vec<&str> = all[1..].iter().map(|(z, _)| z.as_str()).collect();
    next.sort();
    assert_eq!(next, ["a.test", "b.test", "c.test"]);
    assert!(all.iter().all(|(_, at)| *at == t0), "no timer: {all:?}");
    gated.gate.add_permits(3);
    for h in later {
        h.await.unwrap().unwrap();
    }
}

/// Counts the UPDATE messages and RRset changes sent per zone around an
/// executor.
struct Counted {
    inner: Arc<dyn PodExecutor>,
    /// zone -> (messages, changes)
    sent: Mutex<HashMap<String, (usize, usize)>>,
}

impl Counted {
    fn of(&self, zone: &str) -> (usize, usize) {
        self.sent
            .lock()
            .unwrap()
            .get(zone)
            .copied()
            .unwrap_or_default()
    }

    fn reset(&self) {
        self.sent.lock().unwrap().clear();
    }
}

impl PodExecutor for Counted {
    fn layout(&self, pod: &PodRef) -> PodLayout {
        self.inner.layout(pod)
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        self.inner.exec(pod, cmd)
    }

    fn dns_update<'a>(
        &'a self,
        pod: &'a PodRef,
        messages: &'a [UpdateMessage],
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<usize, WireError>> {
        {
            let mut sent = self.sent.lock().unwrap();
            for m in messages {
                let e = sent.entry(m.zone.to_string()).or_default();
                e.0 += 1;
                e.1 += m.changes;
            }
        }
        self.inner.dns_update(pod, messages, key)
    }
}

/// DNSRecords of the burst.
const BURST: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_record_is_one_update_and_a_burst_a_few_large_ones() {
    let update = support::random_key(support::UPDATE_KEY);
    let xfer = support::random_key(support::XFER_KEY);
    let named = start_named(&update, &xfer, vec![]);
    let (p, s) = (named.primary.dns.port, named.secondary.dns.port);
    let counted = Arc::new(Counted {
        inner: Arc::new(LocalExec {
            layouts: HashMap::from([
                (PRIMARY.to_string(), named.primary.layout.clone()),
                (SECONDARY.to_string(), named.secondary.layout.clone()),
            ]),
        }),
        sent: Mutex::new(HashMap::new()),
    });
    let settings = Settings { ..test_settings() };
    let env = Env::start_with_keys(Bind::Exec(counted.clone()), settings, update, xfer).await;
    env.create(zone("gc", "gc.test")).await;
    env.zone_phase("gc", Phase::Ready).await;
    env.create(record(
        "first",
        "gc",
        "first",
        RecordType::A,
        &["192.0.2.1"],
    ))
    .await;
    follow(s, "first.gc.test", "A", &["192.0.2.1"]);
    env.record_phase("first", Phase::Ready).await;

    // A lone record into the converged zone: answered on both servers,
    // written as one UPDATE message carrying just it.
    counted.reset();
    env.create(record("lone", "gc", "lone", RecordType::A, &["192.0.2.2"]))
        .await;
    follow(p, "lone.gc.test", "A", &["192.0.2.2"]);
    follow(s, "lone.gc.test", "A", &["192.0.2.2"]);
    env.record_phase("lone", Phase::Ready).await;
    assert_eq!(counted.of("gc.test"), (1, 1), "one message, one change");

    // A burst: every record served, in a few large messages.
    counted.reset();
    futures::stream::iter(0..BURST)
        .map(|i| {
            let env = &env;
            async move {
                let ip = format!("10.1.{}.{}", i / 256, i % 256);
                env.create(record(
                    &format!("b{i}"),
                    "gc",
                    &format!("b{i}"),
                    RecordType::A,
                    &[&ip],
                ))
                .await;
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
    let api: Api<DNSRecord> = Api::namespaced(env.client.clone(), support::NS);
    // Every DNSRecord Ready: the burst is written (and read back).
    // (A deadline that only guards against a hang: a loaded machine is
    // slow, which the message count below still judges.)
    tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let ready = api
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready))
                .count();
            if ready == BURST + 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every DNSRecord Ready within 120 s");
    for i in [0, 1, BURST / 2, BURST - 1] {
        let ip = format!("10.1.{}.{}", i / 256, i % 256);
        follow(p, &format!("b{i}.gc.test"), "A", &[&ip]);
        follow(s, &format!("b{i}.gc.test"), "A", &[&ip]);
    }
    let (messages, changes) = counted.of("gc.test");
    println!("burst of {BURST}: {messages} UPDATE messages, {changes} changes");
    assert_eq!(changes, BURST, "each record written once");
    // Group commit: a write takes what arrived while the last one ran.
    // One message per record would be 300; observed: a handful.
    assert!(
        messages <= BURST / 20,
        "{messages} UPDATE messages for {BURST} records"
    );
    env.stop().await;
}
