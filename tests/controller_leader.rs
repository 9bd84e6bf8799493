//! Leader election over a Lease on the in-memory API: one holder at a
//! time, a released lease is taken at once, an abandoned one after it
//! expires, and a holder that lost its lease notices.

#[path = "support/controller/mod.rs"]
mod support;

use std::time::Duration;

use bind_operator::controller::leader::{Elector, LEASE_NAME, Timing};
use k8s_openapi::api::coordination::v1::Lease;

fn timing() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(1),
        renew_every: Duration::from_millis(100),
        retry_every: Duration::from_millis(20),
    }
}

fn holder(api: &bind_operator::local::memapi::MemApi) -> Option<String> {
    let l: Lease = api.get(Some("ops"), LEASE_NAME)?;
    l.spec?.holder_identity
}

#[tokio::test]
async fn one_leader_at_a_time() {
    let api = support::memapi();
    let a = Elector::new(api.client(), "ops", "a", timing());
    let b = Elector::new(api.client(), "ops", "b", timing());

    support::within("a to lead", a.acquire()).await;
    assert_eq!(holder(&api).as_deref(), Some("a"));
    // While a renews, b waits.
    let keep_a = tokio::spawn({
        let a = a.clone();
        async move { a.keep().await }
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), b.acquire())
            .await
            .is_err(),
        "b took a lease a keeps renewing"
    );
    keep_a.abort();

    // A clean stop hands over at once.
    a.release().await;
    tokio::time::timeout(Duration::from_millis(200), b.acquire())
        .await
        .expect("b takes a released lease without waiting for expiry");
    assert_eq!(holder(&api).as_deref(), Some("b"));
    let l: Lease = api.get(Some("ops"), LEASE_NAME).unwrap();
    assert_eq!(l.spec.unwrap().lease_transitions, Some(1));

    // a, still believing it leads, notices on its next renewal.
    let lost = support::within("a to notice", a.keep()).await;
    assert!(lost.to_string().contains(LEASE_NAME));

    // b stops renewing (crashed): a takes over once the lease expired.
    let started = tokio::time::Instant::now();
    support::within("a to take the expired lease", a.acquire()).await;
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(holder(&api).as_deref(), Some("a"));
}
