//! Lease-based leader election against the in-memory API: acquisition,
//! standby while the leader renews, takeover after expiry, conflicts (real
//! and injected) never yielding two leaders, release on shutdown, and loss
//! of leadership.

use crate::support_ops as support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bind_operator::local::memapi::{Fault, MemApi, Verb};
use bind_operator::operator::{LeaderElector, LeaderError, LeaseTiming, Role};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use support::{LEASE, NAMESPACE, PATIENCE, fast_timing, within};
use tokio::time::Instant;

fn candidate(mem: &MemApi, identity: &str) -> LeaderElector {
    LeaderElector::new(mem.client(), NAMESPACE, LEASE, identity, fast_timing()).unwrap()
}

fn lease(mem: &MemApi) -> Lease {
    mem.get::<Lease>(Some(NAMESPACE), LEASE)
        .expect("the lease exists")
}

fn holder(mem: &MemApi) -> Option<String> {
    lease(mem).spec.and_then(|s| s.holder_identity)
}

/// Waits until `b` stands by for `holder` (it read the lease a holds).
async fn standing_by(b: &LeaderElector, holder: &str) {
    let want = Role::Standby {
        holder: Some(holder.into()),
    };
    crate::support_clock::until("the standby", || async {
        (*b.role().borrow() == want).then_some(())
    })
    .await;
}

fn transitions(mem: &MemApi) -> i32 {
    lease(mem).spec.and_then(|s| s.lease_transitions).unwrap()
}

#[tokio::test]
async fn one_candidate_acquires_and_records_itself() {
    let mem = MemApi::new();
    let a = candidate(&mem, "op-a");
    assert_eq!(*a.role().borrow(), Role::Unknown);
    let leadership = within("acquire", a.acquire()).await;
    assert!(leadership.is_leader());
    assert_eq!(*a.role().borrow(), Role::Leader);

    let spec = lease(&mem).spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("op-a"));
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(0));
    let acquired = spec.acquire_time.expect("acquireTime set").0;
    let renewed = spec.renew_time.expect("renewTime set").0;
    assert_eq!(acquired, renewed);

    // Renewals move renewTime and keep acquireTime.
    let spec = crate::support_clock::until("a renewal", || async {
        let spec = lease(&mem).spec?;
        (spec.renew_time.as_ref()?.0 > renewed).then_some(spec)
    })
    .await;
    assert_eq!(spec.acquire_time.unwrap().0, acquired);
    assert!(spec.renew_time.unwrap().0 > renewed, "the leader renews");
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(leadership.is_leader());
}

#[tokio::test]
async fn a_second_candidate_waits_while_the_first_renews() {
    let mem = MemApi::new();
    let a = candidate(&mem, "op-a");
    let b = candidate(&mem, "op-b");
    let leadership = within("acquire a", a.acquire()).await;
    let b_task = tokio::spawn({
        let b = b.clone();
        async move { b.acquire().await }
    });

    // Well past two lease durations: a valid, renewed lease is never taken.
    let before = mem.resource_version();
    crate::support_clock::idle_for(Duration::from_millis(2500)).await;
    assert!(!b_task.is_finished(), "b took a lease a kept renewing");
    assert!(leadership.is_leader());
    assert_eq!(holder(&mem).as_deref(), Some("op-a"));
    assert_eq!(transitions(&mem), 0);
    assert!(
        mem.resource_version() >= before + 10,
        "a renewed about every retry period"
    );
    assert_eq!(
        *b.role().borrow(),
        Role::Standby {
            holder: Some("op-a".into())
        }
    );
    b_task.abort();
}

#[tokio::test]
async fn the_second_takes_over_after_the_first_stops_renewing() {
    let mem = MemApi::new();
    let a = candidate(&mem, "op-a");
    let b = candidate(&mem, "op-b");
    let leadership = within("acquire a", a.acquire()).await;
    let first_acquire = lease(&mem).spec.unwrap().acquire_time.unwrap().0;
    let b_task = tokio::spawn({
        let b = b.clone();
        async move { b.acquire().await }
    });
    standing_by(&b, "op-a").await;
    assert!(!b_task.is_finished());

    // Dropping without release is a crash: the record stays, unrenewed.
    let stopped = Instant::now();
    drop(leadership);
    let b_leadership = within("b takes over", b_task).await.unwrap();
    let waited = stopped.elapsed();

    // b waited for a's last renewal plus the 1s duration: a renewed at most
    // one retry period (100ms) before it stopped.
    assert!(
        waited >= Duration::from_millis(850),
        "b took over after {waited:?}, before the lease expired"
    );
    assert!(waited < Duration::from_millis(2000), "took {waited:?}");
    assert!(b_leadership.is_leader());
    let spec = lease(&mem).spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("op-b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert!(spec.acquire_time.unwrap().0 > first_acquire);
    assert_eq!(*b.role().borrow(), Role::Leader);
}

/// A leader whose wall clock runs an hour behind writes a `renewTime` an
/// hour old. Expiry is timed from when the standby saw the record, on its
/// own clock (as client-go does), so the standby still waits a full lease
/// duration before taking it, rather than at once.
#[tokio::test]
async fn a_renew_time_from_a_skewed_clock_does_not_shorten_the_lease() {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    let mem = MemApi::new();
    let an_hour_ago = Timestamp::now() - SignedDuration::from_hours(1);
    let skewed = Lease {
        metadata: ObjectMeta {
            name: Some(LEASE.into()),
            namespace: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("op-skewed".into()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(MicroTime(an_hour_ago)),
            renew_time: Some(MicroTime(an_hour_ago)),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(mem.client(), NAMESPACE)
        .create(&PostParams::default(), &skewed)
        .await
        .unwrap();
    let b = candidate(&mem, "op-b");
    let started = Instant::now();
    let leadership = within("b takes the unrenewed lease", b.acquire()).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "b took a lease it had seen for only {waited:?} (judged by the holder's renewTime)"
    );
    assert!(leadership.is_leader());
    assert_eq!(holder(&mem).as_deref(), Some("op-b"));
    assert_eq!(transitions(&mem), 1);
}

/// Counts candidates that believe they lead, over time.
fn leaders(roles: &[tokio::sync::watch::Receiver<Role>]) -> usize {
    roles.iter().filter(|r| *r.borrow() == Role::Leader).count()
}

/// Runs `candidates` acquiring concurrently; returns how many acquired and
/// the most that ever claimed leadership at once, sampled every 5ms for
/// `window`.
async fn race(candidates: &[LeaderElector], window: Duration) -> (usize, usize) {
    let won = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in candidates {
        let c = c.clone();
        let won = won.clone();
        tasks.push(tokio::spawn(async move {
            let l = c.acquire().await;
            won.fetch_add(1, Ordering::SeqCst);
            // Hold leadership (keep renewing) until aborted.
            std::future::pending::<()>().await;
            drop(l);
        }));
    }
    let roles: Vec<_> = candidates.iter().map(|c| c.role()).collect();
    let mut most = 0;
    let end = Instant::now() + window;
    while Instant::now() < end {
        most = most.max(leaders(&roles));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for t in tasks {
        t.abort();
    }
    (won.load(Ordering::SeqCst), most)
}

#[tokio::test]
async fn racing_candidates_for_a_missing_lease_elect_exactly_one() {
    let mem = MemApi::new();
    let candidates: Vec<_> = (0..5)
        .map(|i| candidate(&mem, &format!("op-{i}")))
        .collect();
    let (won, most) = race(&candidates, Duration::from_millis(1500)).await;
    assert_eq!(won, 1, "exactly one candidate acquired");
    assert_eq!(most, 1, "never more than one leader at a time");
    assert_eq!(transitions(&mem), 0);
    assert!(
        mem.count(Verb::Create, "leases") >= 2,
        "several candidates raced to create the lease"
    );
}

#[tokio::test]
async fn an_injected_conflict_does_not_produce_two_leaders() {
    let mem = MemApi::new();
    // A released lease: every candidate may take it at once, and all read
    // the same resourceVersion.
    let old = candidate(&mem, "op-old");
    within("acquire", old.acquire())
        .await
        .release()
        .await
        .unwrap();
    assert_eq!(holder(&mem), None);
    assert_eq!(transitions(&mem), 0);

    // The first takeover write answers 409 as if someone else had moved.
    mem.fail_next(
        Fault::new(Verb::Update, "leases")
            .named(LEASE)
            .status(409, "Conflict"),
    );
    let candidates: Vec<_> = (0..4)
        .map(|i| candidate(&mem, &format!("op-{i}")))
        .collect();
    let (won, most) = race(&candidates, Duration::from_millis(1500)).await;
    assert_eq!(mem.pending_faults(), 0, "the injected conflict was hit");
    assert_eq!(won, 1, "exactly one candidate acquired");
    assert_eq!(most, 1, "never more than one leader at a time");
    // One successful takeover write, not two.
    assert_eq!(transitions(&mem), 1);
}

#[tokio::test]
async fn a_conflicting_renewal_keeps_the_leader_and_the_standby_waiting() {
    let mem = MemApi::new();
    let a = candidate(&mem, "op-a");
    let b = candidate(&mem, "op-b");
    let leadership = within("acquire a", a.acquire()).await;
    let b_task = tokio::spawn({
        let b = b.clone();
        async move { b.acquire().await }
    });
    standing_by(&b, "op-a").await;

    // Two renewals in a row conflict: fewer than the renew deadline allows.
    mem.fail_next(
        Fault::new(Verb::Update, "leases")
            .named(LEASE)
            .times(2)
            .status(409, "Conflict"),
    );
    crate::support_clock::idle_for(Duration::from_millis(1500)).await;
    assert_eq!(mem.pending_faults(), 0, "the injected conflicts were hit");
    assert!(leadership.is_leader(), "a conflict is not a loss");
    assert!(!b_task.is_finished(), "b took a lease a still renews");
    assert_eq!(holder(&mem).as_deref(), Some("op-a"));
    assert_eq!(transitions(&mem), 0);
    b_task.abort();
}

#[tokio::test]
async fn release_on_shutdown_lets_the_other_acquire_immediately() {
    let mem = MemApi::new();
    let a = candidate(&mem, "op-a");
    let b = candidate(&mem, "op-b");
    let leadership = within("acquire a", a.acquire()).await;
    let b_task = tokio::spawn({
        let b = b.clone();
        async move { b.acquire().await }
    });
    standing_by(&b, "op-a").await;
    assert!(!b_task.is_finished());

    let released = Instant::now();
    leadership.release().await.unwrap();
    assert_ne!(*a.role().borrow(), Role::Leader);
    let b_leadership = within("b acquires", b_task).await.unwrap();
    let waited = released.elapsed();
    // One retry period (plus jitter), far below the 1s lease duration.
    assert!(
        waited < Duration::from_millis(500),
        "b waited {waited:?} after the release"
    );
    assert!(b_leadership.is_leader());
    assert_eq!(holder(&mem).as_deref(), Some("op-b"));
    assert_eq!(transitions(&mem), 1);
}

#[tokio::test]
async fn release_clears_the_holder_and_keeps_the_history() {
    let mem = MemApi::new();
    let a = candidate(&mem, "op-a");
    let leadership = within("acquire", a.acquire()).await;
    let acquired = lease(&mem).spec.unwrap().acquire_time;
    leadership.release().await.unwrap();
    let spec = lease(&mem).spec.unwrap();
    assert_eq!(spec.holder_identity, None);
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(spec.acquire_time, acquired);

    // Releasing a lease someone else holds leaves it alone.
    let b = candidate(&mem, "op-b");
    let _b_leadership = within("acquire b", b.acquire()).await;
    a.release().await.unwrap();
    assert_eq!(holder(&mem).as_deref(), Some("op-b"));
}

#[tokio::test]
async fn failing_to_renew_before_the_deadline_loses_leadership() {
    let mem = MemApi::new();
    let a = candidate(&mem, "op-a");
    let leadership = within("acquire", a.acquire()).await;
    let acquired = mem.resource_version();
    crate::support_clock::until("a renewal", || async {
        (mem.resource_version() > acquired).then_some(())
    })
    .await;

    mem.fail_next(Fault::new(Verb::Update, "leases").times(1000));
    let failing = Instant::now();
    within("leadership lost", leadership.lost()).await;
    let after = failing.elapsed();
    // The last good renewal was at most one retry period before the
    // faults; the deadline is 600ms after it.
    assert!(after <= Duration::from_millis(900), "lost after {after:?}");
    assert!(after >= Duration::from_millis(350), "lost after {after:?}");
    assert!(!leadership.is_leader());
    assert_eq!(*a.role().borrow(), Role::Standby { holder: None });
    mem.clear_faults();

    // Lost is final: the renew loop does not come back.
    crate::support_clock::idle_for(Duration::from_millis(300)).await;
    assert!(!leadership.is_leader());
}

#[tokio::test]
async fn a_lease_taken_by_someone_else_is_lost_at_the_next_renewal() {
    let mem = MemApi::new();
    let a = candidate(&mem, "op-a");
    let leadership = within("acquire", a.acquire()).await;

    let api: Api<Lease> = Api::namespaced(mem.client(), NAMESPACE);
    let mut stolen = api.get(LEASE).await.unwrap();
    stolen.spec.as_mut().unwrap().holder_identity = Some("intruder".into());
    api.replace(LEASE, &PostParams::default(), &stolen)
        .await
        .unwrap();
    let stolen_at = Instant::now();

    within("leadership lost", leadership.lost()).await;
    assert!(stolen_at.elapsed() < Duration::from_millis(400));
    assert_eq!(
        holder(&mem).as_deref(),
        Some("intruder"),
        "a did not write back"
    );
    assert_eq!(*a.role().borrow(), Role::Standby { holder: None });
}

#[tokio::test]
async fn api_errors_while_standing_by_are_retried() {
    let mem = MemApi::new();
    mem.fail_next(Fault::new(Verb::Get, "leases").times(3));
    let a = candidate(&mem, "op-a");
    let started = Instant::now();
    let _leadership = within("acquire despite errors", a.acquire()).await;
    assert_eq!(mem.pending_faults(), 0);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "retried after a pause"
    );
    assert!(started.elapsed() < PATIENCE);
}

#[tokio::test]
async fn invalid_settings_are_rejected() {
    let mem = MemApi::new();
    let ok = fast_timing();
    let cases = [
        LeaseTiming {
            duration: Duration::from_millis(500),
            ..ok
        },
        LeaseTiming {
            duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_millis(600),
            ..ok
        },
        LeaseTiming {
            renew_deadline: Duration::from_secs(1),
            ..ok
        },
        LeaseTiming {
            retry_period: Duration::from_millis(600),
            ..ok
        },
        LeaseTiming {
            retry_period: Duration::ZERO,
            ..ok
        },
    ];
    for timing in cases {
        let e = LeaderElector::new(mem.client(), NAMESPACE, LEASE, "op", timing).unwrap_err();
        assert!(
            matches!(e, LeaderError::InvalidTiming { .. }),
            "{timing:?}: {e}"
        );
    }
    assert!(matches!(
        LeaderElector::new(mem.client(), NAMESPACE, LEASE, "", ok).unwrap_err(),
        LeaderError::EmptyIdentity
    ));
    LeaseTiming::default().validate().unwrap();
}
