//! BindCluster reconciler. The driver reads like its pipeline:
//! read related (keys, rndc Secret, transfer key Secret when the spec names
//! no transfer key, pods: caches + Secret reads) ->
//! Services, PodDisruptionBudget (build, apply) -> primary address (network seam) -> validate
//! into `bind::` types -> render -> ConfigMap, keys Secret, StatefulSet
//! (build, apply) -> per-pod reconfig and NOTIFY list (executor) -> status
//! and Events.
//!
//! Touches the cluster. Children are server-side applied with one field
//! manager and only when they changed; a converged cluster costs no write
//! and no exec. Key material never reaches logs, Events, status or errors.

pub mod build;
pub mod pod_security;
pub mod read;
pub mod reconfig;
pub mod remount;
pub mod statefulset;
pub mod status;
mod steps;

use crate::controller::error::KubeMessage;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt as _};

use super::Shutdown;
use super::apply::apply_status;
use super::bindtsigkey::material::{self, MaterialError};
use super::context::Context;
use super::error::{Categorized, Category, error_policy, measured, rejected};
use super::names::LABEL_CLUSTER;
use super::network::NetworkError;
use super::pods;
use crate::api::{
    BindCluster, BindClusterStatus, BindTSIGKey, REASON_APPLY_REJECTED, REASON_INVALID_RNDC_SECRET,
    REASON_INVALID_SPEC, REASON_INVALID_TRANSFER_SECRET,
};
use crate::bind::render::{RenderError, render_cluster, view_key_names};
use crate::render::validate::{ConfigError, cluster_config};
use crate::telemetry::Controller as MetricsController;

pub use read::{ClusterKeys, cluster_keys, ensure_rndc_secret, ensure_transfer_secret};
pub use steps::primary_pod;

/// Event reason for each pod that loaded a new config.
pub const REASON_RECONFIGURED: &str = "Reconfigured";
/// Event reason when the primary's NOTIFY list was rewritten.
pub const REASON_NOTIFY_UPDATED: &str = "NotifyTargetsUpdated";

/// What can stop a BindCluster reconcile early.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to {action} {object}: {}", KubeMessage(source))]
    Kube {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("invalid cluster spec: {message}")]
    InvalidSpec { message: String },
    #[error("failed to load the cluster's keys: {0}")]
    Key(#[from] MaterialError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "failed to read rndc secret {secret}: it lacks valid key material (delete it to generate a new one)"
    )]
    RndcSecretInvalid { secret: String },
    #[error(
        "failed to read transfer key secret {secret}: it lacks valid key material (delete it to generate a new one)"
    )]
    TransferSecretInvalid { secret: String },
    #[error(transparent)]
    PrimaryAddress(#[from] NetworkError),
}

impl Categorized for Error {
    fn category(&self) -> &'static str {
        match self {
            // Transient categories are Event reasons only; the permanent
            // ones become the Ready condition's reason.
            Error::Kube { source, .. } if rejected(source) => REASON_APPLY_REJECTED,
            Error::Kube { .. } => Category::KubeApiFailed.as_str(),
            Error::InvalidSpec { .. } | Error::Config(_) => REASON_INVALID_SPEC,
            Error::Key(e) => e.category(),
            Error::RndcSecretInvalid { .. } => REASON_INVALID_RNDC_SECRET,
            Error::TransferSecretInvalid { .. } => REASON_INVALID_TRANSFER_SECRET,
            Error::PrimaryAddress(_) => Category::PrimaryAddressUnknown.as_str(),
        }
    }

    fn is_transient(&self) -> bool {
        match self {
            Error::Kube { source, .. } => !rejected(source),
            Error::PrimaryAddress(_) => true,
            Error::Key(e) => e.is_transient(),
            Error::InvalidSpec { .. }
            | Error::Config(_)
            | Error::RndcSecretInvalid { .. }
            | Error::TransferSecretInvalid { .. } => false,
        }
    }

    fn is_expected(&self) -> bool {
        matches!(self, Error::Key(e) if e.is_expected())
    }
}

impl From<RenderError> for Error {
    fn from(e: RenderError) -> Self {
        Error::InvalidSpec {
            message: e.to_string(),
        }
    }
}

/// The BindCluster controller, fed by subscribers of the shared stores:
/// its own objects, its children (owner references), the BindTSIGKeys it
/// loads, its pods, and Secrets (its own, and those holding its keys'
/// material).
pub fn controller(ctx: Arc<Context>, shutdown: Shutdown) -> impl Future<Output = ()> {
    let feeds = &ctx.stores.feeds;
    let clusters = ctx.stores.clusters.clone();
    let keys = ctx.stores.keys.clone();
    let clusters_for_keys = clusters.clone();
    let clusters_for_secrets = clusters.clone();
    Controller::for_shared_stream(feeds.clusters.subscribe(), clusters)
        .owns_shared_stream(feeds.statefulsets.subscribe())
        .owns_shared_stream(feeds.configmaps.subscribe())
        .owns_shared_stream(feeds.services.subscribe())
        .owns_shared_stream(feeds.pdbs.subscribe())
        .watches_shared_stream(feeds.keys.subscribe(), move |key| {
            clusters_loading(&clusters_for_keys, &key)
        })
        .watches_shared_stream(feeds.pods.subscribe(), |pod| cluster_of_pod(&pod))
        .watches_shared_stream(feeds.secrets.subscribe(), move |secret| {
            clusters_using_secret(&clusters_for_secrets, &keys, &secret)
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy::<BindCluster, Error>, ctx)
        .for_each(|_| futures::future::ready(()))
}

/// Clusters that load `key` (its clusterRef, or every cluster in the
/// namespace for a shared key).
pub fn clusters_loading(
    clusters: &Store<BindCluster>,
    key: &BindTSIGKey,
) -> Vec<ObjectRef<BindCluster>> {
    let ns = key.namespace();
    match &key.spec.cluster_ref {
        Some(c) => vec![ObjectRef::new(c).within(ns.as_deref().unwrap_or_default())],
        None => clusters
            .state()
            .iter()
            .filter(|c| c.namespace() == ns)
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect(),
    }
}

/// The cluster a pod belongs to, by its label.
pub fn cluster_of_pod(pod: &Pod) -> Option<ObjectRef<BindCluster>> {
    let cluster = pod.labels().get(LABEL_CLUSTER)?;
    Some(ObjectRef::new(cluster).within(&pod.namespace()?))
}

/// Clusters that own `secret`, or load a key whose material it holds.
pub fn clusters_using_secret(
    clusters: &Store<BindCluster>,
    keys: &Store<BindTSIGKey>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<BindCluster>> {
    let ns = secret.namespace().unwrap_or_default();
    let mut out: Vec<ObjectRef<BindCluster>> = secret
        .owner_references()
        .iter()
        .filter(|o| {
            o.kind == BindCluster::kind(&()) && o.api_version == BindCluster::api_version(&())
        })
        .map(|o| ObjectRef::new(&o.name).within(&ns))
        .collect();
    let name = secret.name_any();
    for key in keys.state() {
        if key.namespace().as_deref() == Some(ns.as_str())
            && material::secret_location(&key).0 == name
        {
            out.extend(clusters_loading(clusters, &key));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup();
    out
}

/// Reconciles one BindCluster, inside the measuring guard.
pub async fn reconcile(cluster: Arc<BindCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let run = async {
        if cluster.meta().deletion_timestamp.is_some() {
            // Children go with it (owner references); BIND state lives in
            // pods.
            return Ok(Action::await_change());
        }
        ctx.stores.wait_until_ready().await;
        match converge(&cluster, &ctx).await {
            Err(e) if !e.is_transient() => {
                // A problem with the spec or what it names: say so in
                // status, change nothing that is serving, wait for a change
                // (the guard reports it, `error_policy` waits long).
                let ready = read::ready_pod_count(&ctx.stores.pods, &cluster);
                let status = status::failed_status(&cluster, ready, e.category(), e.to_string());
                write_status(&ctx, &cluster, status).await?;
                Err(e)
            }
            other => other,
        }
    };
    measured(&ctx, MetricsController::BindCluster, cluster.as_ref(), run).await
}

async fn converge(cluster: &BindCluster, ctx: &Context) -> Result<Action, Error> {
    // A BIND the operator did not deploy: no children, no exec; its zones
    // are written over the network by the zone controllers.
    if let Some(ext) = cluster.external() {
        let message = format!(
            "external BIND at {}:{}; the operator deploys nothing for it and writes its zones over DNS",
            ext.primary.address, ext.primary.port
        );
        write_status(ctx, cluster, status::external_status(cluster, message)).await?;
        return Ok(Action::await_change());
    }
    // Read what the cluster refers to.
    ensure_rndc_secret(ctx, cluster).await?;
    ensure_transfer_secret(ctx, cluster).await?;
    let keys = cluster_keys(ctx, cluster).await?;
    // Services first: the primary Service's address goes into named.conf.
    let primary_service = steps::apply_services(ctx, cluster).await?;
    steps::apply_disruption_budget(ctx, cluster).await?;
    let primary_endpoint = ctx
        .network
        .primary_endpoint(&steps::primary_pod(cluster), &primary_service)?;
    // Validate and render (pure).
    let cfg = cluster_config(
        cluster,
        &keys.as_loaded(),
        keys.generated_transfer.as_ref(),
        primary_endpoint,
    )?;
    let files = render_cluster(&cfg)?;
    // The children that carry the rendered files and the pod template.
    steps::apply_rendered(ctx, cluster, &files).await?;
    // Per-pod reconfig, then the primary's NOTIFY list.
    let pods = pods::cluster_pods(&ctx.stores.pods, cluster);
    let lists = steps::NotifyLists {
        targets: steps::notify_targets(ctx, cluster, &pods),
        transfer_key: cfg.transfer_key.clone(),
        view_keys: view_key_names(&cfg)?,
        external: cfg.external_secondaries.clone(),
    };
    let mut outcome = steps::reconfigure(ctx, cluster, &pods, &files, &lists).await;
    steps::notify(ctx, cluster, &pods, &files, &lists, &mut outcome).await;
    // A pod whose mount is behind: ask the kubelet to remount it now.
    let recheck = remount::nudge(ctx, cluster, &pods, &outcome).await;
    // Status, Events and when to look again.
    steps::finish(ctx, cluster, &outcome, recheck).await
}

/// Writes status only when it differs from what is stored; says whether
/// it wrote.
pub(super) async fn write_status(
    ctx: &Context,
    cluster: &BindCluster,
    status: BindClusterStatus,
) -> Result<bool, Error> {
    if cluster.status.as_ref() == Some(&status) {
        return Ok(false);
    }
    let api: Api<BindCluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let value = serde_json::to_value(&status).expect("status serialises");
    apply_status(&api, &cluster.name_any(), value)
        .await
        .map_err(|source| Error::Kube {
            action: "write status of",
            object: format!("bindcluster {}", cluster.name_any()),
            source,
        })?;
    Ok(true)
}
