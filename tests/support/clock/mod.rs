//! Waiting in tests without a fixed wall-clock wait: [`until`] polls a
//! condition, [`idle_for`] lets Tokio time pass on a paused clock (for a
//! test that checks nothing happens within a time: every timer due in that
//! time fires, in order, at once). Owns no fixture; never sleeps for a
//! result.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

/// Upper bound for [`until`]: a broken build fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `check` (every 10 ms) until it returns `Some`, at most
/// [`PATIENCE`]; panics naming `what` otherwise.
pub async fn until<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Lets `d` of Tokio time pass with the clock paused (no wall-clock wait:
/// the runtime jumps from timer to timer while every task is idle), then
/// resumes the clock. For a current-thread test whose subjects run on
/// Tokio timers and in-process I/O (the in-memory API, fake executors).
pub async fn idle_for(d: Duration) {
    tokio::time::pause();
    tokio::time::sleep(d).await;
    tokio::time::resume();
}
