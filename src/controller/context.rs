//! The shared context every reconciler gets: the API client, the pod
//! executor, the network seam, the Event publisher, the caches (reflector
//! stores), the metrics, and the operator-wide constants (field manager,
//! requeue delays).
//!
//! Events go out through [`Events`] ([`super::events`]), the one place an
//! Event is published.
//!
//! Touches the cluster only to publish Events. Holds key material only in
//! its Secret cache ([`super::secret_cache`]), which never prints it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use kube::{Client, Resource};

pub use super::events::Events;
use super::events::Problems;
use super::exec::{ObservedExecutor, PodExecutor};
use super::memo::{NotifyMemo, ReconfigMemo};
use super::names::FIELD_MANAGER;
use super::network::Network;
use super::scope::Scope;
use super::stores::Stores;
use crate::telemetry::Metrics;

/// Requeue while something is on its way (a pod becoming ready, a mount
/// propagating): seconds.
pub const REQUEUE_SHORT: Duration = Duration::from_secs(5);
/// Requeue after a failure that retrying soon would not fix (exec or
/// reconfig failed, bad spec): long enough that a failure cannot hot-loop.
pub const REQUEUE_LONG: Duration = Duration::from_secs(120);

/// The `action` of an apply failure in error messages.
pub const REQUEST_KIND_APPLY: &str = "apply";

/// What reconcilers share. Built once per process by [`super::run`] (or by
/// tests with [`Context::new`]).
pub struct Context {
    pub client: Client,
    /// Runs commands in BIND pods (pods/exec in a cluster, local processes
    /// in local mode).
    pub executor: Arc<dyn PodExecutor>,
    /// Where the primary and pods are reached (cluster IPs, or 127.0.0.1
    /// ports in local mode).
    pub network: Arc<dyn Network>,
    /// Where every Event is published.
    pub events: Events,
    /// The failures already reported by an Event (see [`Problems`]).
    pub problems: Problems,
    /// Caches of the objects reconcilers read.
    pub stores: Stores,
    /// The field manager of every server-side apply.
    pub field_manager: &'static str,
    /// What each primary's NOTIFY list is known to be (saves an exec per
    /// reconcile).
    pub notify_memo: NotifyMemo,
    /// Which config recently failed `rndc reconfig` on which pod (so the
    /// failure is not re-run until its backoff is over).
    pub reconfig_memo: ReconfigMemo,
    /// Which pods were asked to remount which config, how often
    /// (`bindcluster::remount`).
    pub remount_memo: super::memo::RemountMemo,
    /// Key Secrets read, per version ([`super::secret_cache`]).
    pub secrets: super::secret_cache::SecretCache,
    /// Where reconciles are counted (exec calls are counted by the
    /// executor wrapper, see [`Context::with_metrics`]).
    pub metrics: Metrics,
    /// The namespaces the controllers watch (the stores were built with the
    /// same scope).
    pub scope: Scope,
}

impl Context {
    /// A context counting into a metrics registry of its own.
    pub fn new(
        client: Client,
        executor: Arc<dyn PodExecutor>,
        network: Arc<dyn Network>,
        stores: Stores,
    ) -> Self {
        Self::with_metrics(client, executor, network, stores, Metrics::new())
    }

    /// A context counting into `metrics` (the one `/metrics` serves). The
    /// executor is wrapped so every command is counted by verb.
    pub fn with_metrics(
        client: Client,
        executor: Arc<dyn PodExecutor>,
        network: Arc<dyn Network>,
        stores: Stores,
        metrics: Metrics,
    ) -> Self {
        Context {
            events: Events::new(client.clone()),
            problems: Problems::default(),
            client,
            executor: Arc::new(ObservedExecutor::metered(executor, metrics.clone())),
            network,
            stores,
            field_manager: FIELD_MANAGER,
            notify_memo: NotifyMemo::default(),
            reconfig_memo: ReconfigMemo::default(),
            remount_memo: Default::default(),
            secrets: Default::default(),
            metrics,
            scope: Scope::cluster(),
        }
    }

    /// The same context watching only `scope` (which must be the scope its
    /// stores were built with).
    pub fn with_scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }

    /// Publishes an Event on `obj`. A failure to publish is logged and
    /// otherwise ignored: Events are a courtesy, never a reason to fail.
    /// `note` must not hold key material (no error of ours does).
    pub async fn publish_event<K>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) where
        K: Resource<DynamicType = ()>,
    {
        self.publish_related_event(obj, None, type_, reason, action, note)
            .await;
    }

    /// [`Context::publish_event`] naming a second object the Event is
    /// about (e.g. the pod a cluster reconfigured). Events with the same
    /// reason on the same pair are folded into one series by the recorder.
    pub async fn publish_related_event<K>(
        &self,
        obj: &K,
        related: Option<ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) where
        K: Resource<DynamicType = ()>,
    {
        self.events
            .publish(&obj.object_ref(&()), related, type_, reason, action, note)
            .await;
    }
}
