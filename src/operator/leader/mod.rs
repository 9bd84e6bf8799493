//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several
//! operator replicas exactly one runs the controllers.
//!
//! # Contract
//! - Touches the cluster: gets, creates and replaces one Lease (RBAC: the
//!   leader-election Role in the operator's namespace). Nothing else.
//! - A candidate takes the Lease when it does not exist, when its
//!   `holderIdentity` is empty (released), when it already names this
//!   candidate, or when it has expired. Expiry is judged the way client-go
//!   judges it: from the moment this process last *saw the record change*
//!   (its own monotonic clock) plus the record's `leaseDurationSeconds`, so
//!   skewed wall clocks between nodes cannot shorten someone else's lease.
//!   `acquireTime`/`renewTime` are written for humans and other tools.
//! - Every write carries the resourceVersion it was based on (replace) or is
//!   a create, so of two candidates racing for the same record the API
//!   server lets one win and answers the other 409; a 409 is "someone else
//!   moved first", never an error to act upon.
//! - `leaseTransitions` grows by one each time the holder changes;
//!   `acquireTime` is kept across renewals by the same holder.
//! - The leader renews every `retry_period`. If it has not renewed for
//!   `renew_deadline`, or it sees another holder, it signals lost leadership
//!   at once and never regains it: the caller must stop acting and exit (a
//!   restart re-enters the election). Because `renew_deadline` is shorter
//!   than the lease duration, the old leader has stopped before anyone else
//!   may consider the lease expired.
//! - A clean shutdown releases the Lease (clears `holderIdentity`, keeps the
//!   transition count) so a standby takes over without waiting for expiry.
//!   Dropping a [`Leadership`] without releasing behaves like a crash: the
//!   Lease is left to expire. (The renew loop and the guard live in
//!   [`leadership`].)
//!
//! Must never write a Lease without a resourceVersion precondition, nor
//! report leadership it has not confirmed within `renew_deadline`.
//!
//! # Why this is not a crate
//! kube 5's runtime has no leader election. The maintained crate that fits
//! it, kube-lease-manager (0.13 depends on kube 5 and k8s-openapi 0.29),
//! does two things this contract rules out: it judges a Lease expired when
//! `renewTime + leaseDurationSeconds` has passed on *this* node's wall
//! clock, so a standby whose clock runs ahead takes a lease its leader is
//! still renewing and both run the controllers; and it writes with
//! strategic-merge and server-side-apply patches carrying no
//! resourceVersion, so a renewal racing a takeover is not refused. client-go
//! (what kube-controller-manager trusts) times expiry by the observer's
//! monotonic clock and writes with optimistic concurrency, and so does this
//! module; it also gives what the operator needs beyond a lock: a renew
//! deadline shorter than the lease, loss signalled once and for good, and
//! release on a clean shutdown. tests/ops_leader.rs holds it to that.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use rand::Rng;

pub mod leadership;

pub use leadership::Leadership;
use tokio::sync::watch;
use tokio::time::Instant;

/// `leaseDurationSeconds` written when releasing: the record is free anyway
/// (empty holder), this only tells older clients not to wait long.
const RELEASED_LEASE_SECONDS: i32 = 1;

/// How many times `release` re-reads the Lease after a conflict.
const RELEASE_ATTEMPTS: usize = 3;

/// Acquire retries are spread by up to this fraction of `retry_period`, so
/// standbys started together do not hit the API in lockstep.
const RETRY_JITTER: f64 = 0.2;

/// How long a lease lasts and how eagerly it is renewed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long a holder's claim lasts after others last saw it renewed.
    /// Whole seconds: the Lease stores `leaseDurationSeconds`.
    pub duration: Duration,
    /// A leader that has not renewed for this long gives up leadership.
    /// Shorter than `duration`, so it stops before others may take over.
    pub renew_deadline: Duration,
    /// Pause between acquire attempts and between renewals.
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    /// client-go's defaults: 15s lease, 10s renew deadline, 2s retry.
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseTiming {
    /// Checks `retry_period < renew_deadline < duration` and that the
    /// duration fits `leaseDurationSeconds`.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let invalid = |reason| Err(LeaderError::InvalidTiming { reason });
        if self.duration < Duration::from_secs(1) || self.duration.subsec_nanos() != 0 {
            return invalid("the lease duration must be a whole number of seconds, at least 1");
        }
        if self.duration.as_secs() > i32::MAX as u64 {
            return invalid("the lease duration does not fit leaseDurationSeconds");
        }
        if self.renew_deadline >= self.duration {
            return invalid("the renew deadline must be shorter than the lease duration");
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return invalid(
                "the retry period must be positive and shorter than the renew deadline",
            );
        }
        Ok(())
    }

    fn duration_seconds(&self) -> i32 {
        // validate() keeps this in range.
        self.duration.as_secs() as i32
    }
}

/// What this candidate knows about the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not yet read the Lease (or every read so far failed).
    Unknown,
    /// Someone else holds the Lease (named when known), or leadership was
    /// lost. A standby is healthy and ready; it just does not reconcile.
    Standby { holder: Option<String> },
    /// This candidate holds the Lease.
    Leader,
}

/// Why an election step failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("invalid leader election timing: {reason}")]
    InvalidTiming { reason: &'static str },
    #[error("invalid leader election identity: must not be empty")]
    EmptyIdentity,
    #[error("failed to read lease {namespace}/{name}")]
    Get {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to create lease {namespace}/{name}")]
    Create {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to update lease {namespace}/{name}")]
    Update {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to release lease {namespace}/{name}: it kept changing under us")]
    ReleaseContended { namespace: String, name: String },
}

impl LeaderError {
    /// Static category for logs and metrics.
    pub fn category(&self) -> &'static str {
        match self {
            LeaderError::InvalidTiming { .. } | LeaderError::EmptyIdentity => "config",
            LeaderError::Get { .. } => "lease_get",
            LeaderError::Create { .. } => "lease_create",
            LeaderError::Update { .. } => "lease_update",
            LeaderError::ReleaseContended { .. } => "lease_release",
        }
    }
}

/// Outcome of one acquire-or-renew round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// This candidate holds the Lease as of this round.
    Leader,
    /// Another candidate holds an unexpired Lease.
    HeldBy(String),
    /// Another write got there first (409); the next round re-reads.
    Conflict,
}

/// The last record this candidate saw and when (monotonic clock).
struct Observed {
    resource_version: Option<String>,
    at: Instant,
}

struct Inner {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    timing: LeaseTiming,
    observed: Mutex<Option<Observed>>,
    role: watch::Sender<Role>,
}

/// One candidate in the election for one Lease. Cheap to clone.
#[derive(Clone)]
pub struct LeaderElector {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("namespace", &self.inner.namespace)
            .field("lease", &self.inner.name)
            .field("identity", &self.inner.identity)
            .field("timing", &self.inner.timing)
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// A candidate named `identity` (unique per replica: the pod name) for
    /// the Lease `namespace/lease_name`. Does no I/O.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        lease_name: &str,
        identity: &str,
        timing: LeaseTiming,
    ) -> Result<Self, LeaderError> {
        timing.validate()?;
        if identity.is_empty() {
            return Err(LeaderError::EmptyIdentity);
        }
        let (role, _) = watch::channel(Role::Unknown);
        Ok(Self {
            inner: Arc::new(Inner {
                api: Api::namespaced(client, namespace),
                namespace: namespace.to_owned(),
                name: lease_name.to_owned(),
                identity: identity.to_owned(),
                timing,
                observed: Mutex::new(None),
                role,
            }),
        })
    }

    pub fn lease_name(&self) -> &str {
        &self.inner.name
    }

    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    pub fn timing(&self) -> LeaseTiming {
        self.inner.timing
    }

    /// Follows this candidate's [`Role`].
    pub fn role(&self) -> watch::Receiver<Role> {
        self.inner.role.subscribe()
    }

    /// Waits until this candidate holds the Lease, then keeps renewing it in
    /// a background task until the returned [`Leadership`] is released,
    /// dropped, or lost. API failures are logged and retried; cancel by
    /// dropping the future.
    pub async fn acquire(&self) -> Leadership {
        let timing = self.inner.timing;
        loop {
            let started = Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leader) => return leadership::lead(self, started),
                Ok(Attempt::HeldBy(holder)) => {
                    tracing::debug!(lease = %self.inner.name, %holder, "lease held by another candidate");
                }
                Ok(Attempt::Conflict) => {
                    tracing::debug!(lease = %self.inner.name, "lease changed while acquiring; retrying");
                }
                Err(e) => {
                    tracing::warn!(lease = %self.inner.name, category = e.category(), error = %e, "failed to acquire lease; retrying");
                }
            }
            let jitter = rand::rng().random_range(0.0..RETRY_JITTER);
            tokio::time::sleep(timing.retry_period.mul_f64(1.0 + jitter)).await;
        }
    }

    /// One election round: read the Lease and, if it is free, expired or
    /// ours, write it with this candidate as holder.
    pub async fn try_acquire_or_renew(&self) -> Result<Attempt, LeaderError> {
        let inner = &self.inner;
        let current = match inner.api.get_opt(&inner.name).await {
            Ok(lease) => lease,
            Err(source) => return Err(self.error_get(source)),
        };
        let Some(mut lease) = current else {
            return self.create().await;
        };
        let now = Instant::now();
        let spec = lease.spec.take().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let seen_at = self.observe(lease.metadata.resource_version.clone(), now);

        let ours = holder.as_deref() == Some(inner.identity.as_str());
        if let Some(other) = holder.as_ref().filter(|_| !ours) {
            let lasts = spec
                .lease_duration_seconds
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(s as u64))
                .unwrap_or(inner.timing.duration);
            if now < seen_at + lasts {
                self.set_role(Role::Standby {
                    holder: Some(other.clone()),
                });
                return Ok(Attempt::HeldBy(other.clone()));
            }
            tracing::info!(lease = %inner.name, previous = %other, "lease expired; taking over");
        }

        let stamp = MicroTime(Timestamp::now());
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(inner.identity.clone()),
            lease_duration_seconds: Some(inner.timing.duration_seconds()),
            acquire_time: if ours {
                spec.acquire_time.clone().or_else(|| Some(stamp.clone()))
            } else {
                Some(stamp.clone())
            },
            renew_time: Some(stamp),
            lease_transitions: Some(if ours {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..spec
        });
        // The resourceVersion read above stays in the metadata: the write
        // fails with 409 if anyone changed the Lease since.
        match inner
            .api
            .replace(&inner.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(written.metadata.resource_version, Instant::now());
                if !ours {
                    tracing::info!(lease = %inner.name, identity = %inner.identity, "acquired lease");
                }
                Ok(Attempt::Leader)
            }
            Err(e) if is_conflict(&e) => Ok(Attempt::Conflict),
            Err(source) => Err(LeaderError::Update {
                namespace: inner.namespace.clone(),
                name: inner.name.clone(),
                source,
            }),
        }
    }

    /// Gives the Lease up if this candidate still holds it: clears
    /// `holderIdentity` so a standby acquires at its next round. A Lease held
    /// by someone else, or absent, is left alone.
    pub async fn release(&self) -> Result<(), LeaderError> {
        let inner = &self.inner;
        for _ in 0..RELEASE_ATTEMPTS {
            let Some(mut lease) = inner
                .api
                .get_opt(&inner.name)
                .await
                .map_err(|e| self.error_get(e))?
            else {
                return Ok(());
            };
            let spec = lease.spec.take().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(inner.identity.as_str()) {
                return Ok(());
            }
            lease.spec = Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(RELEASED_LEASE_SECONDS),
                renew_time: Some(MicroTime(Timestamp::now())),
                ..spec
            });
            match inner
                .api
                .replace(&inner.name, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => {
                    self.set_role(Role::Standby { holder: None });
                    tracing::info!(lease = %inner.name, identity = %inner.identity, "released lease");
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => continue,
                Err(source) => {
                    return Err(LeaderError::Update {
                        namespace: inner.namespace.clone(),
                        name: inner.name.clone(),
                        source,
                    });
                }
            }
        }
        Err(LeaderError::ReleaseContended {
            namespace: inner.namespace.clone(),
            name: inner.name.clone(),
        })
    }

    async fn create(&self) -> Result<Attempt, LeaderError> {
        let inner = &self.inner;
        let stamp = MicroTime(Timestamp::now());
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(inner.name.clone()),
                namespace: Some(inner.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(inner.identity.clone()),
                lease_duration_seconds: Some(inner.timing.duration_seconds()),
                acquire_time: Some(stamp.clone()),
                renew_time: Some(stamp),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        match inner.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.observe(created.metadata.resource_version, Instant::now());
                tracing::info!(lease = %inner.name, identity = %inner.identity, "created and acquired lease");
                Ok(Attempt::Leader)
            }
            // Another candidate created it first.
            Err(e) if is_conflict(&e) => Ok(Attempt::Conflict),
            Err(source) => Err(LeaderError::Create {
                namespace: inner.namespace.clone(),
                name: inner.name.clone(),
                source,
            }),
        }
    }

    /// Records the resourceVersion just read; returns when this candidate
    /// first saw that version (now, if it is new).
    fn observe(&self, resource_version: Option<String>, now: Instant) -> Instant {
        let mut observed = lock(&self.inner.observed);
        match observed.as_ref() {
            Some(o) if o.resource_version == resource_version => o.at,
            _ => {
                *observed = Some(Observed {
                    resource_version,
                    at: now,
                });
                now
            }
        }
    }

    fn set_role(&self, role: Role) {
        self.inner.role.send_if_modified(|current| {
            let changed = *current != role;
            *current = role;
            changed
        });
    }

    fn error_get(&self, source: kube::Error) -> LeaderError {
        LeaderError::Get {
            namespace: self.inner.namespace.clone(),
            name: self.inner.name.clone(),
            source,
        }
    }
}
fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded value is replaced whole, so a panic elsewhere cannot leave
    // it half-written.
    m.lock().unwrap_or_else(|p| p.into_inner())
}
