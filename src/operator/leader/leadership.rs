//! The leader's side of the election: the renew loop that keeps a held
//! Lease alive and the [`Leadership`] guard that ends it.
//!
//! # Contract
//! - Renews every `retry_period`; each round is bounded by the renew
//!   deadline, so a hung API call cannot stretch leadership.
//! - Signals loss (once, for good) when the deadline passes without a
//!   renewal or another holder shows up; never renews again afterwards.
//! - [`Leadership::release`] stops the loop and clears the holder;
//!   dropping the guard stops the loop and leaves the Lease to expire.
//!
//! Touches the cluster only through [`LeaderElector`]'s rounds. Must never
//! report leadership it has not confirmed within the renew deadline.

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Attempt, LeaderElector, LeaderError, Role};

/// Starts the renew loop for a Lease acquired by a round that began at
/// `acquired_at`.
pub(super) fn lead(elector: &LeaderElector, acquired_at: Instant) -> Leadership {
    elector.set_role(Role::Leader);
    let lost = CancellationToken::new();
    let stop = CancellationToken::new();
    let task = tokio::spawn(renew_loop(
        elector.clone(),
        acquired_at,
        stop.clone(),
        lost.clone(),
    ));
    Leadership {
        elector: elector.clone(),
        lost,
        stop,
        task: Some(task),
    }
}

/// Renews every `retry_period` until stopped; cancels `lost` when the Lease
/// has not been renewed for `renew_deadline` or someone else holds it.
async fn renew_loop(
    elector: LeaderElector,
    acquired_at: Instant,
    stop: CancellationToken,
    lost: CancellationToken,
) {
    let timing = elector.timing();
    let lease = elector.lease_name().to_owned();
    // Measured from before the request that succeeded was sent, so this
    // candidate's idea of its deadline is never later than what others saw.
    let mut renewed_at = acquired_at;
    let reason = loop {
        let deadline = renewed_at + timing.renew_deadline;
        let next = (Instant::now() + timing.retry_period).min(deadline);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
        if Instant::now() >= deadline {
            break "renew deadline passed";
        }
        let started = Instant::now();
        // A hung request must not stretch leadership past the deadline.
        match tokio::time::timeout_at(deadline, elector.try_acquire_or_renew()).await {
            Ok(Ok(Attempt::Leader)) => renewed_at = started,
            Ok(Ok(Attempt::HeldBy(_))) => break "another candidate holds the lease",
            Ok(Ok(Attempt::Conflict)) => {
                tracing::debug!(%lease, "lease changed while renewing; retrying");
            }
            Ok(Err(e)) => {
                tracing::warn!(%lease, category = e.category(), error = %e, "failed to renew lease; retrying");
            }
            Err(_) => {}
        }
        if stop.is_cancelled() {
            return;
        }
    };
    tracing::error!(%lease, identity = %elector.identity(), reason, "lost leadership");
    elector.set_role(Role::Standby { holder: None });
    lost.cancel();
}

/// Proof of holding the Lease, kept alive by a renew task. Leadership ends
/// with [`Leadership::release`] (clean), on drop (like a crash: the Lease
/// expires), or when lost ([`Leadership::lost`]).
pub struct Leadership {
    elector: LeaderElector,
    lost: CancellationToken,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("identity", &self.elector.identity())
            .field("lost", &self.lost.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Leadership {
    /// False once leadership is lost; it never comes back.
    pub fn is_leader(&self) -> bool {
        !self.lost.is_cancelled()
    }

    /// Resolves when leadership is lost.
    pub async fn lost(&self) {
        self.lost.cancelled().await
    }

    /// A token cancelled when leadership is lost, to hand to other tasks.
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Stops renewing and clears the holder so a standby acquires at once.
    pub async fn release(mut self) -> Result<(), LeaderError> {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // The loop only returns or finishes; a panic there is a bug we
            // must not turn into a release of a lease we may not hold.
            if task.await.is_err() {
                return Ok(());
            }
        }
        if self.lost.is_cancelled() {
            return Ok(());
        }
        self.lost.cancel();
        self.elector.release().await
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if !self.lost.is_cancelled() {
            self.lost.cancel();
            self.elector.set_role(Role::Standby { holder: None });
        }
    }
}
