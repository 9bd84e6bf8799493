//! What the controllers remember about BIND pods between reconciles, in
//! memory only (after an operator restart each is learned again): the
//! primary's NOTIFY list ([`NotifyMemo`]) and each pod's reconfigs
//! ([`ReconfigMemo`]: the last that succeeded, the last that failed). One
//! of each per process, held by the [`super::Context`] and used by
//! `bindcluster`'s reconfig step.
//!
//! A leaf of `controller` (it uses only `exec`'s pod reference), so the
//! context can hold these without depending on `bindcluster`. Touches
//! nothing; never holds key material (a failure message is checkconf's
//! detail, the NOTIFY list is addresses and key names).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::exec::PodRef;

/// Reconfigs by pod. Failed: the config hash that failed, the reported
/// failure (checkconf detail, never key material) and when. Done: the hash
/// the pod's current container last loaded by this process's reconfig, so a
/// reconcile that reads the cluster from a cache not yet holding the
/// status that recorded it does not run the same reconfig again. Memory
/// only: after an operator restart a failing config is tried once more,
/// and what is done is read from status again.
#[derive(Default)]
pub struct ReconfigMemo {
    failed: Mutex<HashMap<PodRef, (String, String, Instant)>>,
    done: Mutex<HashMap<PodRef, (String, String)>>,
}

impl ReconfigMemo {
    /// The failure to report again instead of retrying, if `hash` failed
    /// on `pod` less than `retry_after` ago.
    pub fn recent_failure(
        &self,
        pod: &PodRef,
        hash: &str,
        retry_after: Duration,
    ) -> Option<String> {
        let failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        failed
            .get(pod)
            .filter(|(h, _, at)| h == hash && at.elapsed() < retry_after)
            .map(|(_, message, _)| message.clone())
    }

    /// The hash this process last reconfigured `pod` with, if the pod's
    /// container is still the one (`identity`: pod uid and restart count).
    pub fn done(&self, pod: &PodRef, identity: &str) -> Option<String> {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        done.get(pod)
            .filter(|(id, _)| id == identity)
            .map(|(_, hash)| hash.clone())
    }

    /// Records the outcome of reconfiguring `pod` (its container
    /// `identity`) with `hash`: a failure message, or `None` for success
    /// (which forgets any failure). named keeps the config it ran when a
    /// reconfig fails, so a failure leaves what is done as it was.
    pub fn record(&self, pod: &PodRef, identity: &str, hash: &str, outcome: Option<&str>) {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Some(message) => {
                failed.insert(
                    pod.clone(),
                    (hash.to_string(), message.to_string(), Instant::now()),
                );
            }
            None => {
                failed.remove(pod);
                let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
                done.insert(pod.clone(), (identity.to_string(), hash.to_string()));
            }
        }
    }
}

/// What the operator last knew the primary's NOTIFY list to be, per
/// primary pod (by uid and container restart: a new pod, or a restarted
/// container on an emptied volume, may start with an empty list). Memory only:
/// after an operator restart the list is checked once per cluster (one
/// exec that rewrites it only when it differs).
#[derive(Default)]
pub struct NotifyMemo {
    known: Mutex<HashMap<PodRef, (String, String)>>,
}

impl NotifyMemo {
    /// The list last known for `pod`, if the pod is still the one (`uid`).
    pub fn get(&self, pod: &PodRef, uid: &str) -> Option<String> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known
            .get(pod)
            .filter(|(u, _)| u == uid)
            .map(|(_, text)| text.clone())
    }

    pub fn set(&self, pod: &PodRef, uid: &str, text: String) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.insert(pod.clone(), (uid.to_string(), text));
    }
}

/// The remount nudges per pod (`namespace/name`): which config, how many,
/// when last (see `bindcluster::remount`).
#[derive(Default)]
pub struct RemountMemo(pub(crate) std::sync::Mutex<std::collections::HashMap<String, Nudge>>);

/// One pod's nudges for one config.
pub(crate) struct Nudge {
    pub(crate) hash: String,
    pub(crate) attempts: u32,
    pub(crate) at: std::time::Instant,
}
