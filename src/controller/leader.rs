//! Leader election on a coordination.k8s.io Lease, so a second operator
//! replica (a rollout's surge, or a mistake) waits instead of reconciling
//! the same objects and doubling exec calls.
//!
//! The Lease is taken with optimistic concurrency (replace with the
//! resourceVersion read), renewed well inside its duration, and released
//! on a clean stop. A leader that cannot renew before its lease runs out
//! stops leading (the caller then exits, as client-go's leaders do).
//!
//! Touches the cluster (one Lease). Holds no key material.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

/// The Lease's name.
pub const LEASE_NAME: &str = "bind-operator-leader";

/// How long a lease holds without renewal, how often the holder renews,
/// and how often a candidate retries. (client-go's defaults: 15/10/2 s;
/// renewing at a third of the duration leaves two tries before expiry.)
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Whole seconds (the Lease's unit); at least one.
    pub lease_duration: Duration,
    pub renew_every: Duration,
    pub retry_every: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            retry_every: Duration::from_secs(2),
        }
    }
}

/// Why leadership could not be taken or kept.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("failed to renew the leader lease {namespace}/{name} within its duration")]
    Lost { namespace: String, name: String },
}

/// One candidate for the Lease.
#[derive(Clone)]
pub struct Elector {
    api: Api<Lease>,
    namespace: String,
    identity: String,
    timing: Timing,
}

enum Attempt {
    Acquired,
    HeldByOther,
}

impl Elector {
    pub fn new(client: Client, namespace: &str, identity: &str, timing: Timing) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            identity: identity.to_string(),
            timing,
        }
    }

    fn spec(&self, transitions: i32, acquired: Option<MicroTime>) -> LeaseSpec {
        let now = MicroTime(jiff::Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            // The Lease counts whole seconds; never round down to zero.
            lease_duration_seconds: Some(
                i32::try_from(self.timing.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// One try: create the Lease, renew ours, or take an expired one.
    async fn try_acquire(&self) -> Result<Attempt, kube::Error> {
        let Some(mut lease) = self.api.get_opt(LEASE_NAME).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAME.into()),
                    namespace: Some(self.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(0, None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Acquired),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::HeldByOther),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let ours = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let held = spec
            .holder_identity
            .as_deref()
            .is_some_and(|h| !h.is_empty());
        let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
            (Some(t), Some(d)) => {
                t.0 + jiff::SignedDuration::from_secs(i64::from(d)) < jiff::Timestamp::now()
            }
            _ => true,
        };
        if held && !ours && !expired {
            return Ok(Attempt::HeldByOther);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let acquired = if ours { spec.acquire_time } else { None };
        lease.spec = Some(self.spec(transitions, acquired));
        // The resourceVersion we read makes this a compare-and-swap.
        match self
            .api
            .replace(LEASE_NAME, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Attempt::Acquired),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::HeldByOther),
            Err(e) => Err(e),
        }
    }

    /// Waits until this candidate holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire().await {
                Ok(Attempt::Acquired) => {
                    tracing::info!(identity = %self.identity, lease = LEASE_NAME, "became leader");
                    return;
                }
                Ok(Attempt::HeldByOther) => {}
                Err(e) => tracing::warn!(error = %e, "failed to take the leader lease"),
            }
            tokio::time::sleep(self.timing.retry_every).await;
        }
    }

    /// Renews the Lease until it cannot for a whole lease duration (then
    /// returns the error: another candidate may already lead).
    pub async fn keep(&self) -> LeaderError {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.timing.renew_every).await;
            match self.try_acquire().await {
                Ok(Attempt::Acquired) => last_ok = tokio::time::Instant::now(),
                Ok(Attempt::HeldByOther) => {
                    return LeaderError::Lost {
                        namespace: self.namespace.clone(),
                        name: LEASE_NAME.into(),
                    };
                }
                Err(e) => tracing::warn!(error = %e, "failed to renew the leader lease"),
            }
            if last_ok.elapsed() >= self.timing.lease_duration {
                return LeaderError::Lost {
                    namespace: self.namespace.clone(),
                    name: LEASE_NAME.into(),
                };
            }
        }
    }

    /// Gives the Lease up (a clean stop), so the next leader need not wait
    /// for it to expire.
    pub async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(LEASE_NAME).await
            && lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(self.identity.as_str())
        {
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.renew_time = None;
            }
            let _ = self
                .api
                .replace(LEASE_NAME, &PostParams::default(), &lease)
                .await;
        }
    }
}
