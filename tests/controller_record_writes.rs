//! The operator's API writes, as the in-memory API counts them: a created
//! DNSRecord costs its finalizer and one status write (also when its first
//! flush failed and the retry landed within the coalescing window), a
//! changed one one
//! status write, and a converged zone with its records costs nothing
//! through several periodic checks — while `status.servers` still shows
//! the secondary catching up after each write.

use crate::support_zones as support;

use std::sync::Arc;
use std::time::Duration;

use bind_operator::api::{BindZone, DNSRecord, Phase, RecordType};
use bind_operator::controller::zonesync::Settings;
use bind_operator::local::memapi::Verb;
use kube::ResourceExt as _;
use serde_json::json;
use support::fakebind::{FakeBind, Kind};
use support::{Env, PRIMARY, SECONDARY, record, test_settings, zone};

/// Periodic checks every 2 s (60 s in production), the recheck after a
/// write 200 ms later (5 s), a survey trusted for 1 s (30 s), and the
/// production coalescing window (2 s: a flush that lands within it costs
/// a new record no Pending write) so a loaded machine's slow retry still
/// lands inside it.
fn settings() -> Settings {
    Settings {
        verify_interval: Duration::from_secs(2),
        survey_max_age: Duration::from_secs(1),
        recheck_after_write: Duration::from_millis(200),
        record_max_wait: bind_operator::controller::zonesync::RECORD_MAX_WAIT,
        ..test_settings()
    }
}

/// The primary's failed exec calls so far.
fn primary_failures(fake: &FakeBind) -> usize {
    fake.calls()
        .iter()
        .filter(|c| c.pod == PRIMARY && !c.ok)
        .count()
}

/// Patches of DNSRecords (finalizer and status alike) since the counts
/// were reset.
fn record_patches(env: &Env) -> u64 {
    env.mem.count(Verb::Patch, "dnsrecords")
}

/// Surveys seen on the secondary (one dig per periodic check of the cluster).
fn secondary_digs(fake: &FakeBind) -> usize {
    fake.calls()
        .iter()
        .filter(|c| c.kind == Kind::Serials && c.pod == SECONDARY)
        .count()
}

/// Waits until the secondary was surveyed `n` more times: that many
/// periodic checks ran.
async fn periodic_checks(fake: &FakeBind, n: usize) {
    let start = secondary_digs(fake);
    support::within("periodic checks", async {
        while secondary_digs(fake) < start + n {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// Waits until the zone's status shows both pods at its serial (what a
/// user reads as "every server caught up").
async fn servers_caught_up(env: &Env, name: &str) -> BindZone {
    env.wait::<BindZone, _>("status.servers caught up", name, |z| {
        let s = z?.status.as_ref()?;
        let serial = s.serial?;
        (s.servers.get(PRIMARY) == Some(&serial) && s.servers.get(SECONDARY) == Some(&serial))
            .then(|| z.cloned())
            .flatten()
    })
    .await
}

/// Waits until nothing writes to the API for two periodic checks.
async fn quiet(env: &Env, fake: &FakeBind) {
    support::within("the operator goes quiet", async {
        loop {
            let before = env.mem.writes();
            periodic_checks(fake, 2).await;
            if env.mem.writes() == before {
                break;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_costs_its_finalizer_and_one_status_write() {
    let fake = Arc::new(FakeBind::new());
    let env = Env::start(fake.clone(), settings()).await;
    env.create(zone("alpha", "alpha.test")).await;
    env.zone_phase("alpha", Phase::Ready).await;
    servers_caught_up(&env, "alpha").await;
    quiet(&env, &fake).await;

    // Created while the primary fails the record's first flush, back a
    // moment later: the retry lands within the coalescing window, so the
    // record costs its finalizer and its Ready status, no Pending between
    // (three writes before: finalizer, Pending, Ready).
    env.mem.reset_counts();
    fake.set_down(PRIMARY, true);
    env.create(record("api", "alpha", "api", RecordType::A, &["10.0.0.9"]))
        .await;
    env.wait::<DNSRecord, _>("the finalizer", "api", |r| {
        (!r?.finalizers().is_empty()).then_some(())
    })
    .await;
    let failures = primary_failures(&fake);
    support::within("the first flush fails on the primary", async {
        while primary_failures(&fake) == failures {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    fake.set_down(PRIMARY, false);
    env.record_phase("api", Phase::Ready).await;
    servers_caught_up(&env, "alpha").await;
    periodic_checks(&fake, 3).await;
    let created_after_failure = record_patches(&env);
    eprintln!("record created during a failed flush: {created_after_failure} DNSRecord patches");
    assert_eq!(
        created_after_failure, 2,
        "finalizer + one status write, even when the first flush failed"
    );
    assert_eq!(
        fake.values(PRIMARY, "alpha.test", "api.alpha.test", "A"),
        ["10.0.0.9".to_string()].into()
    );
    quiet(&env, &fake).await;

    // Created: the finalizer, then the Ready status; nothing in between.
    env.mem.reset_counts();
    env.create(record("www", "alpha", "www", RecordType::A, &["10.0.0.1"]))
        .await;
    env.record_phase("www", Phase::Ready).await;
    let zone = servers_caught_up(&env, "alpha").await;
    periodic_checks(&fake, 3).await;
    let created = record_patches(&env);
    let zone_writes = env.mem.count(Verb::Patch, "bindzones");
    eprintln!("created record: {created} DNSRecord patches, {zone_writes} BindZone patches");
    assert_eq!(
        created, 2,
        "finalizer + one status write per created record"
    );
    assert_eq!(
        fake.values(PRIMARY, "alpha.test", "www.alpha.test", "A"),
        ["10.0.0.1".to_string()].into()
    );
    assert_eq!(
        zone.status.as_ref().and_then(|s| s.record_count),
        Some(2),
        "{zone:#?}"
    );

    // Changed: one status write (the test's own spec patch counted apart).
    env.mem.reset_counts();
    env.patch_spec::<DNSRecord>("www", json!({"values": ["10.0.0.2"]}))
        .await;
    env.wait::<DNSRecord, _>("the change served", "www", |r| {
        let r = r?;
        let s = r.status.as_ref()?;
        (s.phase == Some(Phase::Ready) && s.observed_generation == r.metadata.generation)
            .then_some(())
    })
    .await;
    servers_caught_up(&env, "alpha").await;
    periodic_checks(&fake, 3).await;
    let changed = record_patches(&env) - 1;
    eprintln!("changed record: {changed} DNSRecord status patches");
    assert_eq!(changed, 1, "one status write per changed record");
    assert_eq!(
        fake.values(PRIMARY, "alpha.test", "www.alpha.test", "A"),
        ["10.0.0.2".to_string()].into()
    );
    env.stop().await;
}

/// Waits until no API write happened for `quiet` (the bench's "settled").
async fn writes_pause(env: &Env, quiet: Duration) {
    support::within("API writes pause", async {
        loop {
            let before = env.mem.writes();
            tokio::time::sleep(quiet).await;
            if env.mem.writes() == before {
                break;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_zone_writes_nothing_through_periodic_checks() {
    let fake = Arc::new(FakeBind::new());
    // A periodic check well after the settling below.
    let env = Env::start(
        fake.clone(),
        Settings {
            verify_interval: Duration::from_secs(4),
            ..settings()
        },
    )
    .await;
    env.create(zone("alpha", "alpha.test")).await;
    env.create(zone("beta", "beta.test")).await;
    for i in 0..5 {
        let z = if i % 2 == 0 { "alpha" } else { "beta" };
        env.create(record(
            &format!("r{i}"),
            z,
            &format!("host{i}"),
            RecordType::A,
            &[&format!("10.0.0.{i}")],
        ))
        .await;
    }
    for i in 0..5 {
        env.record_phase(&format!("r{i}"), Phase::Ready).await;
    }
    // Converged as the bench sees it: every secondary serves every zone
    // at the primary's serial, and the operator has settled.
    support::within("the secondary serves what the primary does", async {
        while ["alpha.test", "beta.test"]
            .iter()
            .any(|z| fake.serial(SECONDARY, z) != fake.serial(PRIMARY, z))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    writes_pause(&env, Duration::from_secs(1)).await;

    // Held through periodic checks: nothing to write, because the recheck
    // right after the last write already showed the secondary caught up.
    env.mem.reset_counts();
    periodic_checks(&fake, 3).await;
    let writes = env.mem.writes();
    eprintln!("converged through 3 periodic checks: {writes} API writes");
    assert_eq!(writes, 0, "a converged cluster writes nothing");
    // What the user reads: every server at the zone's serial.
    for name in ["alpha", "beta"] {
        let z = env.get::<BindZone>(name).await.unwrap();
        let s = z.status.as_ref().unwrap();
        let serial = s.serial.unwrap();
        assert_eq!(
            s.servers,
            [
                (PRIMARY.to_string(), serial),
                (SECONDARY.to_string(), serial)
            ]
            .into(),
            "{name}"
        );
    }
    env.stop().await;
}

/// The zone controllers' status writes when the cache lags behind them:
/// a record (and a zone) that was Ready, then reported Pending (the
/// primary pod went away), then Ready again before the cache showed the
/// Pending write, ends Ready in the API. The stale copy the third write
/// sees still says Ready; skipping the write because of it left records
/// Pending for good (the real-API lane's primary-pod deletion).
#[tokio::test]
async fn a_report_is_written_when_the_cache_predates_our_last_write() {
    use bind_operator::bind::name::DomainName;
    use bind_operator::controller::Context;
    use bind_operator::controller::network::ClusterNetwork;
    use bind_operator::controller::stores::watch_all;
    use bind_operator::controller::zonesync::ZoneContext;
    use bind_operator::controller::zonesync::writes::{
        RecordReport, ZoneReport, write_record_reports, write_zone_report,
    };
    use bind_operator::local::memapi::MemApi;
    use kube::Api;
    use kube::api::PostParams;

    let mem = MemApi::new();
    mem.register_custom::<BindZone>();
    mem.register_custom::<DNSRecord>();
    let client = mem.client();
    let (stores, streams) = watch_all(&client);
    // The caches feed only the cleanup below (it finds the zone's records
    // there); every other write here is handed its (stale) copy.
    // (Only the two kinds are served here: the other caches never fill.)
    let driver = tokio::spawn(streams.drive());
    let ctx = ZoneContext {
        base: Arc::new(Context::new(
            client.clone(),
            Arc::new(support::NoExec),
            Arc::new(ClusterNetwork),
            stores,
        )),
        zones: kube::runtime::reflector::store::<BindZone>().0,
        records: kube::runtime::reflector::store::<DNSRecord>().0,
        state: Default::default(),
        settings: settings(),
        servers: Arc::new(FakeBind::new()),
        batcher: Default::default(),
        namespaces: bind_operator::controller::zonesync::namespaces::NamespaceWatch::new(
            client.clone(),
            kube::runtime::reflector::store::<BindZone>().0,
            futures::channel::mpsc::unbounded().0,
        ),
        wake: futures::channel::mpsc::unbounded().0,
    };
    let records: Api<DNSRecord> = Api::namespaced(client.clone(), support::NS);
    let zones: Api<BindZone> = Api::namespaced(client.clone(), support::NS);
    let pp = PostParams::default();
    let created = records
        .create(
            &pp,
            &record("www", "example-com", "www", RecordType::A, &["192.0.2.1"]),
        )
        .await
        .unwrap();
    let zone_created = zones
        .create(&pp, &zone("example-com", "example.com"))
        .await
        .unwrap();

    let key = (
        DomainName::parse_absolute("www.example.com.").unwrap(),
        bind_operator::bind::RecordType::A,
    );
    let ready = RecordReport::Ready(key);
    let pending = RecordReport::Pending {
        reason: "ZoneNotReady",
        message: "pod p-0 is not Ready".into(),
    };
    let phase = |r: &DNSRecord| r.status.as_ref().and_then(|s| s.phase);
    let zone_report = |phase: Phase, reason: &'static str| ZoneReport {
        phase,
        reason,
        message: String::new(),
        serial: None,
        record_count: None,
        servers: None,
        dnssec: None,
        applied_plan: None,
        external_secondaries: None,
    };
    let zone_phase = |z: &BindZone| z.status.as_ref().and_then(|s| s.phase);

    // Ready, as every cache sees it.
    write_record_reports(&ctx, vec![(Arc::new(created), ready.clone())])
        .await
        .unwrap();
    write_zone_report(&ctx, &zone_created, &zone_report(Phase::Ready, "Served"))
        .await
        .unwrap();
    let seen_ready = Arc::new(records.get("www").await.unwrap());
    let zone_seen_ready = zones.get("example-com").await.unwrap();
    assert_eq!(phase(&seen_ready), Some(Phase::Ready));
    assert_eq!(zone_phase(&zone_seen_ready), Some(Phase::Ready));

    // Pending, then Ready again, both from the copy that says Ready.
    write_record_reports(&ctx, vec![(seen_ready.clone(), pending)])
        .await
        .unwrap();
    write_zone_report(
        &ctx,
        &zone_seen_ready,
        &zone_report(Phase::Pending, "ZoneNotReady"),
    )
    .await
    .unwrap();
    assert_eq!(
        phase(&records.get("www").await.unwrap()),
        Some(Phase::Pending)
    );
    write_record_reports(&ctx, vec![(seen_ready.clone(), ready.clone())])
        .await
        .unwrap();
    write_zone_report(&ctx, &zone_seen_ready, &zone_report(Phase::Ready, "Served"))
        .await
        .unwrap();
    assert_eq!(
        phase(&records.get("www").await.unwrap()),
        Some(Phase::Ready),
        "the record must be Ready again in the API"
    );
    assert_eq!(
        zone_phase(&zones.get("example-com").await.unwrap()),
        Some(Phase::Ready),
        "the zone must be Ready again in the API"
    );

    // The same report again writes nothing, whatever the cache shows.
    let before = mem.writes();
    write_record_reports(&ctx, vec![(seen_ready.clone(), ready.clone())])
        .await
        .unwrap();
    assert_eq!(mem.writes(), before, "a repeated report is not written");

    // The zone is deleted: its cleanup tells the record the zone is gone.
    // A zone of that name then serves it again, and the Ready it had
    // before the cleanup must be written again: the cleanup's write goes
    // through the same memory (a write beside it left the record saying
    // its zone was being deleted, the Ready skipped as "already written").
    records
        .patch(
            "www",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": [
                bind_operator::controller::zonesync::RECORD_FINALIZER
            ]}})),
        )
        .await
        .unwrap();
    support::within("the record with its finalizer in the cache", async {
        while !ctx
            .base
            .stores
            .index
            .records_of_zone(support::NS, "example-com")
            .iter()
            .any(|r| !r.finalizers().is_empty())
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    bind_operator::controller::bindzone::cleanup::cleanup(&Arc::new(zone_seen_ready), &ctx)
        .await
        .unwrap();
    let after_cleanup = records.get("www").await.unwrap();
    assert_eq!(phase(&after_cleanup), Some(Phase::Pending));
    assert_eq!(
        after_cleanup
            .status
            .as_ref()
            .and_then(|s| s.reason.as_deref()),
        Some("ZoneNotFound"),
        "{after_cleanup:#?}"
    );
    write_record_reports(&ctx, vec![(seen_ready, ready)])
        .await
        .unwrap();
    assert_eq!(
        phase(&records.get("www").await.unwrap()),
        Some(Phase::Ready),
        "the record must be Ready again after its zone's cleanup"
    );
    driver.abort();
}

/// kube's finalizer helper guards its add with a JSON-patch `test` of the
/// finalizers it was handed. A zone reconciled again from a cached copy
/// older than our own finalizer add (many zones reconciling at once, the
/// watch event still on its way) fails that test; that is a stale copy,
/// not a failure: no Warning Event, no 5 s backoff, a look again within
/// ~100 ms (and the finalizer still on, once).
#[tokio::test]
async fn a_finalizer_patch_against_a_stale_copy_is_retried_soon_not_failed() {
    use bind_operator::controller::Context;
    use bind_operator::controller::bindzone::{FINALIZER_RACE_RETRY, reconcile};
    use bind_operator::controller::network::ClusterNetwork;
    use bind_operator::controller::stores::watch_all;
    use bind_operator::controller::zonesync::{ZONE_FINALIZER, ZoneContext};
    use bind_operator::local::memapi::MemApi;
    use kube::Api;
    use kube::api::{Patch, PatchParams, PostParams};
    use kube::runtime::controller::Action;

    let mem = MemApi::new();
    mem.register_custom::<BindZone>();
    mem.register_custom::<DNSRecord>();
    let client = mem.client();
    let (stores, _streams) = watch_all(&client);
    let ctx = Arc::new(ZoneContext {
        base: Arc::new(Context::new(
            client.clone(),
            Arc::new(support::NoExec),
            Arc::new(ClusterNetwork),
            stores,
        )),
        zones: kube::runtime::reflector::store::<BindZone>().0,
        records: kube::runtime::reflector::store::<DNSRecord>().0,
        state: Default::default(),
        settings: settings(),
        servers: Arc::new(FakeBind::new()),
        batcher: Default::default(),
        namespaces: bind_operator::controller::zonesync::namespaces::NamespaceWatch::new(
            client.clone(),
            kube::runtime::reflector::store::<BindZone>().0,
            futures::channel::mpsc::unbounded().0,
        ),
        wake: futures::channel::mpsc::unbounded().0,
    });
    let zones: Api<BindZone> = Api::namespaced(client.clone(), support::NS);
    // The copy a cache still holds: no finalizer yet.
    let stale = zones
        .create(&PostParams::default(), &zone("example-com", "example.com"))
        .await
        .unwrap();
    // Our first reconcile's add landed meanwhile.
    zones
        .patch(
            "example-com",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [ZONE_FINALIZER]}})),
        )
        .await
        .unwrap();
    mem.reset_counts();

    let action = reconcile(Arc::new(stale), ctx.clone()).await;
    assert_eq!(
        action.ok(),
        Some(Action::requeue(FINALIZER_RACE_RETRY)),
        "a stale copy is looked at again soon, not failed"
    );
    assert_eq!(
        mem.count(Verb::Create, "events"),
        0,
        "no Warning Event for a stale copy"
    );
    assert_eq!(
        zones.get("example-com").await.unwrap().finalizers(),
        [ZONE_FINALIZER.to_string()],
        "the finalizer is on, once"
    );
}
