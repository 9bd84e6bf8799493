//! The process lifecycle (`Operator::run_until`) against the in-memory API
//! and real HTTP probes: without leader election, as leader and standby
//! (release hands over at once), on loss of leadership, and when the
//! controllers fail.

use crate::support_ops as support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bind_operator::local::memapi::MemApi;
use bind_operator::operator::{
    LeaderElectionConfig, Metrics, Operator, OperatorConfig, RunContext, ServeError,
};
use http::StatusCode;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use support::{LEASE, NAMESPACE, eventually, fast_timing, get, promtext, within};
use tokio::sync::oneshot;
use tokio::time::Instant;

fn config(leader: Option<&str>) -> OperatorConfig {
    OperatorConfig {
        health_addr: "127.0.0.1:0".parse().unwrap(),
        leader_election: leader.map(|identity| LeaderElectionConfig {
            namespace: NAMESPACE.into(),
            lease_name: LEASE.into(),
            identity: identity.into(),
            timing: fast_timing(),
        }),
        shutdown_grace: Duration::from_secs(2),
        scope: Default::default(),
    }
}

/// What a fake controllers future saw.
#[derive(Clone, Default)]
struct Probe {
    started: Arc<AtomicUsize>,
    stopped_cleanly: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Probe {
    /// Controllers that "sync their caches" after 50ms, count a reconcile,
    /// and run until told to stop.
    fn controllers(
        &self,
    ) -> impl FnOnce(RunContext) -> futures::future::BoxFuture<'static, Result<(), std::io::Error>> + use<>
    {
        let probe = self.clone();
        move |ctx: RunContext| {
            Box::pin(async move {
                let _guard = SetOnDrop(probe.dropped.clone());
                probe.started.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                ctx.readiness.set_ready(true);
                ctx.metrics.reconcile(
                    bind_operator::operator::Controller::BindZone,
                    Duration::from_millis(1),
                    None,
                );
                ctx.shutdown.cancelled().await;
                probe.stopped_cleanly.store(true, Ordering::SeqCst);
                Ok(())
            })
        }
    }

    fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }
}

async fn leader_gauge(addr: std::net::SocketAddr) -> f64 {
    let body = get(addr, "/metrics").await.body;
    promtext::parse(&body).unwrap()["bind_operator_leader"]
        .value("bind_operator_leader", &[])
        .unwrap()
}

#[tokio::test]
async fn without_leader_election_the_controllers_run_at_once_until_shutdown() {
    let mem = MemApi::new();
    let op = Operator::bind(config(None), Metrics::new()).await.unwrap();
    let addr = op.health_addr();
    let probe = Probe::default();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let run = tokio::spawn(op.run_until(
        mem.client(),
        async move {
            let _ = stop_rx.await;
        },
        probe.controllers(),
    ));

    // Live at once; ready only after the controllers synced.
    assert_eq!(get(addr, "/healthz").await.status, StatusCode::OK);
    eventually("controllers started", || probe.started() == 1).await;
    let mut saw_unready = false;
    let deadline = Instant::now() + support::PATIENCE;
    loop {
        match get(addr, "/readyz").await.status {
            StatusCode::OK => break,
            StatusCode::SERVICE_UNAVAILABLE => saw_unready = true,
            other => panic!("unexpected /readyz status {other}"),
        }
        assert!(Instant::now() < deadline, "never became ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(saw_unready, "ready before the caches synced");
    assert_eq!(leader_gauge(addr).await, 1.0);
    assert!(mem.list::<Lease>().is_empty(), "no lease without election");

    stop_tx.send(()).unwrap();
    within("run to return", run).await.unwrap().unwrap();
    assert!(probe.stopped_cleanly.load(Ordering::SeqCst));
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "health server stopped"
    );
}

#[tokio::test]
async fn a_standby_is_ready_but_idle_and_takes_over_on_release() {
    let mem = MemApi::new();
    let a = Operator::bind(config(Some("op-a")), Metrics::new())
        .await
        .unwrap();
    let a_addr = a.health_addr();
    let a_probe = Probe::default();
    let (a_stop, a_stop_rx) = oneshot::channel::<()>();
    let a_run = tokio::spawn(a.run_until(
        mem.client(),
        async move {
            let _ = a_stop_rx.await;
        },
        a_probe.controllers(),
    ));
    eventually("a leads", || a_probe.started() == 1).await;

    let b = Operator::bind(config(Some("op-b")), Metrics::new())
        .await
        .unwrap();
    let b_addr = b.health_addr();
    let b_probe = Probe::default();
    let (b_stop, b_stop_rx) = oneshot::channel::<()>();
    let b_run = tokio::spawn(b.run_until(
        mem.client(),
        async move {
            let _ = b_stop_rx.await;
        },
        b_probe.controllers(),
    ));

    // The standby answers both probes (a rolling update needs it ready)
    // but runs nothing.
    assert_eq!(get(b_addr, "/healthz").await.status, StatusCode::OK);
    let deadline = Instant::now() + support::PATIENCE;
    while get(b_addr, "/readyz").await.status != StatusCode::OK {
        assert!(Instant::now() < deadline, "standby never became ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    crate::support_clock::idle_for(Duration::from_millis(1500)).await;
    assert_eq!(b_probe.started(), 0, "the standby ran controllers");
    assert_eq!(leader_gauge(b_addr).await, 0.0);
    assert_eq!(leader_gauge(a_addr).await, 1.0);

    // SIGTERM on the leader: controllers stop, the lease is released, the
    // standby starts at its next retry rather than after expiry.
    let stopped = Instant::now();
    a_stop.send(()).unwrap();
    within("a to return", a_run).await.unwrap().unwrap();
    assert!(a_probe.stopped_cleanly.load(Ordering::SeqCst));
    eventually("b leads", || b_probe.started() == 1).await;
    assert!(
        stopped.elapsed() < Duration::from_millis(600),
        "b took {:?} to take over",
        stopped.elapsed()
    );
    let lease = mem.get::<Lease>(Some(NAMESPACE), LEASE).unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("op-b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(leader_gauge(b_addr).await, 1.0);

    b_stop.send(()).unwrap();
    within("b to return", b_run).await.unwrap().unwrap();
    let spec = mem
        .get::<Lease>(Some(NAMESPACE), LEASE)
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.holder_identity, None, "b released on shutdown");
}

#[tokio::test]
async fn losing_leadership_drops_the_controllers_and_returns_an_error() {
    let mem = MemApi::new();
    let op = Operator::bind(config(Some("op-a")), Metrics::new())
        .await
        .unwrap();
    let addr = op.health_addr();
    let probe = Probe::default();
    let run = tokio::spawn(op.run_until(
        mem.client(),
        std::future::pending::<()>(),
        probe.controllers(),
    ));
    eventually("a leads", || probe.started() == 1).await;

    // Another replica overwrites the lease (say, after a long GC pause).
    let api: Api<Lease> = Api::namespaced(mem.client(), NAMESPACE);
    let mut lease = api.get(LEASE).await.unwrap();
    lease.spec.as_mut().unwrap().holder_identity = Some("op-z".into());
    api.replace(LEASE, &PostParams::default(), &lease)
        .await
        .unwrap();

    let err = within("run to fail", run).await.unwrap().unwrap_err();
    assert!(matches!(err, ServeError::LostLeadership { .. }), "{err}");
    assert_eq!(err.category(), "lost_leadership");
    assert!(
        err.to_string()
            .starts_with("lost leadership of lease bind-operator-system/bind-operator-leader"),
        "{err}"
    );
    assert!(probe.dropped.load(Ordering::SeqCst), "controllers dropped");
    assert!(
        !probe.stopped_cleanly.load(Ordering::SeqCst),
        "controllers were not left to finish"
    );
    let spec = api.get(LEASE).await.unwrap().spec.unwrap();
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some("op-z"),
        "not released"
    );
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "health server stopped"
    );
}

#[tokio::test]
async fn shutdown_while_standing_by_returns_without_running_anything() {
    let mem = MemApi::new();
    let a = Operator::bind(config(Some("op-a")), Metrics::new())
        .await
        .unwrap();
    let a_probe = Probe::default();
    let a_run = tokio::spawn(a.run_until(
        mem.client(),
        std::future::pending::<()>(),
        a_probe.controllers(),
    ));
    eventually("a leads", || a_probe.started() == 1).await;

    let b = Operator::bind(config(Some("op-b")), Metrics::new())
        .await
        .unwrap();
    let b_probe = Probe::default();
    let (b_stop, b_stop_rx) = oneshot::channel::<()>();
    let b_run = tokio::spawn(b.run_until(
        mem.client(),
        async move {
            let _ = b_stop_rx.await;
        },
        b_probe.controllers(),
    ));
    crate::support_clock::idle_for(Duration::from_millis(300)).await;
    b_stop.send(()).unwrap();
    within("b to return", b_run).await.unwrap().unwrap();
    assert_eq!(b_probe.started(), 0);
    let spec = mem
        .get::<Lease>(Some(NAMESPACE), LEASE)
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("op-a"));
    a_run.abort();
}

#[tokio::test]
async fn failing_controllers_fail_the_process_and_release_the_lease() {
    let mem = MemApi::new();
    let op = Operator::bind(config(Some("op-a")), Metrics::new())
        .await
        .unwrap();
    let err = within(
        "run to fail",
        op.run_until(mem.client(), std::future::pending::<()>(), |_ctx| async {
            Err::<(), _>(std::io::Error::other("watch failed"))
        }),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ServeError::Controllers(_)), "{err}");
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert_eq!(source, "watch failed");
    let spec = mem
        .get::<Lease>(Some(NAMESPACE), LEASE)
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.holder_identity, None, "released for the next replica");
}

#[tokio::test]
async fn a_busy_health_port_fails_at_bind() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(None);
    cfg.health_addr = taken.local_addr().unwrap();
    let err = Operator::bind(cfg, Metrics::new()).await.unwrap_err();
    assert!(matches!(err, ServeError::Health(_)), "{err}");
}
