//! The zone is the unit of write: 1,000 DNSRecords created at once across
//! two zones reach the primary in a small, bounded number of exec calls per
//! zone (not one per record), and every record ends Ready and served.

use crate::support_zones as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bind_operator::api::{DNSRecord, Phase, RecordType};
use bind_operator::controller::zonesync::{RECORD_MAX_WAIT, Settings};
use futures::StreamExt as _;
use kube::api::{Api, ListParams};
use support::fakebind::{FakeBind, Kind};
use support::{Env, NS, PRIMARY, record, test_settings, zone};

const RECORDS: usize = 1_000;
/// Exec calls one zone may cost for the whole burst (500 records): a few
/// per flush (update, serial read, read-back), a flush per write the
/// burst spans (group commit: each takes what arrived while the last one
/// ran), plus a SOA read when the snapshot aged. Observed: 21 with the
/// burst stretched to 18 s on a loaded machine (7 flushes); one per record
/// would be 1,500.
const MAX_EXECS_PER_ZONE: usize = 40;
/// The burst fails only if no record turns Ready for this long...
const STALL_LIMIT: Duration = Duration::from_secs(60);
/// ...or if it takes longer than this in all (a guard against hanging).
const TOTAL_LIMIT: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_records_cost_a_few_execs_per_zone() {
    let fake = Arc::new(FakeBind::new());
    // Production timing: group commit (a zone writes at once; what arrives
    // while it writes joins its next write).
    let settings = Settings {
        record_max_wait: RECORD_MAX_WAIT,
        ..test_settings()
    };
    let env = Env::start(fake.clone(), settings).await;
    env.create(zone("alpha", "alpha.test")).await;
    env.create(zone("beta", "beta.test")).await;
    env.zone_phase("alpha", Phase::Ready).await;
    env.zone_phase("beta", Phase::Ready).await;
    // A zone turns Ready before its last setup calls (catalog, a requeued
    // reconcile) are done; count only what the records cause.
    support::within("zone setup goes quiet", async {
        loop {
            let before = fake.calls().len();
            tokio::time::sleep(Duration::from_millis(500)).await;
            if fake.calls().len() == before {
                break;
            }
        }
    })
    .await;
    fake.clear_calls();

    let started = Instant::now();
    futures::stream::iter(0..RECORDS)
        .map(|i| {
            let env = &env;
            async move {
                let z = if i % 2 == 0 { "alpha" } else { "beta" };
                let ip = format!("10.{}.{}.{}", i / 65_536, (i / 256) % 256, i % 256);
                env.create(record(
                    &format!("r{i}"),
                    z,
                    &format!("host{i}"),
                    RecordType::A,
                    &[&ip],
                ))
                .await;
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;

    // Wait for what is asserted, every record Ready, for as long as records
    // keep turning Ready: a loaded machine makes the burst slow (23 s was
    // seen against a fixed 15 s limit), which the exec counts below still
    // judge. Only a stall, or an absurd total, fails here.
    let api: Api<DNSRecord> = Api::namespaced(env.client.clone(), NS);
    let mut best = 0;
    let mut last_progress = Instant::now();
    loop {
        let list = api.list(&ListParams::default()).await.unwrap();
        let ready = list
            .items
            .iter()
            .filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(Phase::Ready))
            .count();
        if ready == RECORDS {
            break;
        }
        if ready > best {
            best = ready;
            last_progress = Instant::now();
        }
        assert!(
            last_progress.elapsed() < STALL_LIMIT,
            "no DNSRecord turned Ready for {STALL_LIMIT:?}: {ready}/{RECORDS} Ready"
        );
        assert!(
            started.elapsed() < TOTAL_LIMIT,
            "only {ready}/{RECORDS} DNSRecords Ready after {TOTAL_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();

    let calls = fake.calls();
    let per_zone = |z: &str| {
        calls
            .iter()
            .filter(|c| c.zone.as_deref().is_some_and(|cz| cz.starts_with(z)))
            .count()
    };
    let (alpha, beta) = (per_zone("alpha.test"), per_zone("beta.test"));
    let updates = fake.count_kind(Kind::Update);
    eprintln!(
        "{RECORDS} records: {} exec calls ({alpha} alpha, {beta} beta, {updates} nsupdate runs) in {elapsed:?}",
        calls.len()
    );
    assert!(
        alpha <= MAX_EXECS_PER_ZONE && beta <= MAX_EXECS_PER_ZONE,
        "exec calls must grow with zones, not records: alpha {alpha}, beta {beta}: {:#?}",
        calls.iter().map(|c| (&c.kind, &c.zone)).collect::<Vec<_>>()
    );
    assert_eq!(
        calls.len(),
        alpha + beta,
        "no call about anything else: {:#?}",
        calls.iter().map(|c| (&c.kind, &c.zone)).collect::<Vec<_>>()
    );
    // The primary is written; the secondary is only asked which serial it
    // serves before the records say Ready (one SOA read per zone's round).
    assert!(
        calls
            .iter()
            .all(|c| c.pod == PRIMARY || c.kind == Kind::Serials),
        "{:#?}",
        calls.iter().map(|c| (&c.kind, &c.pod)).collect::<Vec<_>>()
    );
    // What a user would see: every record on the primary.
    for i in [0, 1, 500, 998, 999] {
        let z = if i % 2 == 0 {
            "alpha.test"
        } else {
            "beta.test"
        };
        let ip = format!("10.{}.{}.{}", i / 65_536, (i / 256) % 256, i % 256);
        assert_eq!(
            fake.values(PRIMARY, z, &format!("host{i}.{z}"), "A"),
            [ip].into(),
            "host{i}"
        );
    }
    let alpha_sets = fake.zone(PRIMARY, "alpha.test").unwrap();
    assert_eq!(
        alpha_sets.iter().filter(|((_, t), _)| t == "A").count(),
        RECORDS / 2
    );
    env.stop().await;
}
