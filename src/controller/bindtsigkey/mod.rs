//! BindTSIGKey reconciler: makes sure the key's material exists and is
//! usable, and says so in status. With `spec.secretRef` it only checks the
//! user's Secret; without, it generates a random key of the algorithm's size
//! into a Secret it owns (key `secret`) once, and never rotates it (delete
//! the Secret to get a new key).
//!
//! Pipeline: resolve material (client) -> status (client). Touches the
//! cluster. Key material never reaches status, Events, logs or errors.

pub mod material;
pub mod names;

use crate::controller::error::KubeMessage;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use kube::api::{Api, ObjectMeta, PartialObjectMeta, PostParams};
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};

use super::Shutdown;
use super::apply::{apply_status, now, owner_ref};
use super::context::Context;
use super::error::{Categorized, Category, error_policy, measured};
use super::names::{LABEL_MANAGED_BY, MANAGER};
use crate::api::{
    BindTSIGKey, BindTSIGKeyStatus, CONDITION_READY, REASON_KEY_AVAILABLE, REASON_SECRET_CONFLICT,
    is_condition_true, new_condition, set_condition,
};
use crate::render::warnings::{key_warnings, set_warning_condition};
use crate::telemetry::Controller as MetricsController;
use material::MaterialError;

/// Event reason when the operator generated a key.
pub const REASON_KEY_GENERATED: &str = "KeyGenerated";

/// What can go wrong reconciling a BindTSIGKey.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Material(#[from] MaterialError),
    /// A reserved or duplicate keyName (see [`names`]); the message names
    /// the other keys.
    #[error("{message}")]
    Name {
        reason: &'static str,
        message: String,
    },
    #[error("failed to generate tsig key {key}: secret {secret} exists and is not owned by it")]
    SecretConflict { key: String, secret: String },
    #[error(
        "failed to create secret {secret} for tsig key {key}: {}",
        KubeMessage(source)
    )]
    CreateSecret {
        key: String,
        secret: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to write status of tsig key {key}: {}", KubeMessage(source))]
    Status {
        key: String,
        #[source]
        source: kube::Error,
    },
}

impl Categorized for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Material(e) => e.category(),
            Error::SecretConflict { .. } => REASON_SECRET_CONFLICT,
            Error::Name { reason, .. } => reason,
            Error::CreateSecret { .. } | Error::Status { .. } => Category::KubeApiFailed.as_str(),
        }
    }

    fn is_transient(&self) -> bool {
        match self {
            Error::Material(e) => e.is_transient(),
            Error::SecretConflict { .. } | Error::Name { .. } => false,
            Error::CreateSecret { .. } | Error::Status { .. } => true,
        }
    }
}

/// The BindTSIGKey controller, fed by subscribers of the shared stores:
/// its own objects, plus the metadata of every Secret (a user's Secret
/// appearing or changing, or the generated one being deleted, re-reconciles
/// the keys that use it).
pub fn controller(ctx: Arc<Context>, shutdown: Shutdown) -> impl Future<Output = ()> {
    let feeds = &ctx.stores.feeds;
    let keys = ctx.stores.keys.clone();
    let mapper_keys = keys.clone();
    let peers = keys.clone();
    Controller::for_shared_stream(feeds.keys.subscribe(), keys)
        .watches_shared_stream(feeds.secrets.subscribe(), move |secret| {
            keys_using_secret(&mapper_keys, &secret)
        })
        // A key refused for a duplicate keyName is looked at again when one
        // of the others changes or goes.
        .watches_shared_stream(feeds.keys.subscribe(), move |key| {
            keys_named_like(&peers, &key)
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy::<BindTSIGKey, Error>, ctx)
        .for_each(|_| futures::future::ready(()))
}

/// Keys in the Secret's namespace whose material lives in it.
pub fn keys_using_secret(
    keys: &Store<BindTSIGKey>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<BindTSIGKey>> {
    let ns = secret.namespace();
    let name = secret.name_any();
    keys.state()
        .iter()
        .filter(|k| k.namespace() == ns && material::secret_location(k).0 == name)
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}

/// The other keys in the key's namespace with the same BIND key name, and
/// those not Ready (a rename frees the name for a key it no longer shares).
pub fn keys_named_like(
    keys: &Store<BindTSIGKey>,
    key: &BindTSIGKey,
) -> Vec<ObjectRef<BindTSIGKey>> {
    let name = names::bind_name(key);
    let failed = |k: &BindTSIGKey| {
        !k.status
            .as_ref()
            .is_some_and(|s| is_condition_true(&s.conditions, CONDITION_READY))
    };
    keys.state()
        .iter()
        .filter(|k| k.namespace() == key.namespace() && k.name_any() != key.name_any())
        .filter(|k| names::bind_name(k) == name || failed(k))
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}

/// Reconciles one BindTSIGKey, inside the measuring guard.
pub async fn reconcile(key: Arc<BindTSIGKey>, ctx: Arc<Context>) -> Result<Action, Error> {
    let run = async {
        let outcome = ensure_material(&key, &ctx).await;
        settle(&key, &ctx, outcome).await
    };
    measured(&ctx, MetricsController::BindTSIGKey, key.as_ref(), run).await
}

/// Reports the outcome of [`ensure_material`] in status. A failure is
/// returned (the guard counts it and reports it by an Event): a transient
/// one at once, a permanent one once status says so.
async fn settle(
    key: &BindTSIGKey,
    ctx: &Context,
    outcome: Result<Option<usize>, Error>,
) -> Result<Action, Error> {
    let (failure, secret_len) = match outcome {
        Err(e) if e.is_transient() => return Err(e),
        Err(e) => (Some(e), None),
        Ok(len) => (None, len),
    };
    let secret_name = material::secret_location(key).0;
    let mut status = desired_status(
        key,
        failure.as_ref().map(|e| (e.category(), e.to_string())),
        &secret_name,
    );
    set_warning_condition(
        &mut status.conditions,
        &key_warnings(key.spec.algorithm, secret_len),
        key.metadata.generation,
        now(),
    );
    if key.status.as_ref() != Some(&status) {
        let api: Api<BindTSIGKey> =
            Api::namespaced(ctx.client.clone(), &key.namespace().unwrap_or_default());
        let value = serde_json::to_value(&status).expect("status serialises");
        apply_status(&api, &key.name_any(), value)
            .await
            .map_err(|source| Error::Status {
                key: key.name_any(),
                source,
            })?;
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(Action::await_change()),
    }
}

/// The status for an outcome; keeps `lastTransitionTime` unless Ready flips.
pub fn desired_status(
    key: &BindTSIGKey,
    failure: Option<(&'static str, String)>,
    secret_name: &str,
) -> BindTSIGKeyStatus {
    let mut status = key.status.clone().unwrap_or_default();
    status.observed_generation = key.metadata.generation;
    let cond = match failure {
        None => {
            status.secret_name = Some(secret_name.to_string());
            new_condition(
                CONDITION_READY,
                true,
                REASON_KEY_AVAILABLE,
                format!("key material is in secret {secret_name}"),
                key.metadata.generation,
                now(),
            )
        }
        Some((reason, message)) => {
            status.secret_name = None;
            new_condition(
                CONDITION_READY,
                false,
                reason,
                message,
                key.metadata.generation,
                now(),
            )
        }
    };
    set_condition(&mut status.conditions, cond);
    status
}

/// Checks the material, generating it first when the operator owns it.
/// Returns the key's length in bytes when it was read (a generated key is
/// the algorithm's full size).
async fn ensure_material(key: &BindTSIGKey, ctx: &Context) -> Result<Option<usize>, Error> {
    if let Some((reason, message)) = names::name_problem(key, &ctx.stores.keys.state()) {
        return Err(Error::Name { reason, message });
    }
    if key.spec.secret_ref.is_some() {
        let k = material::fetch(ctx, key).await?;
        return Ok(Some(k.secret.byte_len()));
    }
    let ns = key.namespace().unwrap_or_default();
    let (secret_name, _) = material::secret_location(key);
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let existing = api
        .get_opt(&secret_name)
        .await
        .map_err(|source| MaterialError::Kube {
            key: key.name_any(),
            secret: secret_name.clone(),
            source,
        })?;
    if let Some(secret) = existing {
        let uid = key.uid();
        let owned = secret
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == uid.as_ref());
        if !owned {
            return Err(Error::SecretConflict {
                key: key.name_any(),
                secret: secret_name,
            });
        }
        // Never rotated: an existing Secret is used as it is.
        let k = material::from_secret(key, &secret)?;
        return Ok(Some(k.secret.byte_len()));
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.clone()),
            namespace: Some(ns),
            labels: Some([(LABEL_MANAGED_BY.to_string(), MANAGER.to_string())].into()),
            owner_references: Some(vec![owner_ref(key)]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(material::generate_secret_data(key.spec.algorithm)),
        ..Default::default()
    };
    api.create(&PostParams::default(), &secret)
        .await
        .map_err(|source| Error::CreateSecret {
            key: key.name_any(),
            secret: secret_name.clone(),
            source,
        })?;
    tracing::info!(
        namespace = key.namespace().unwrap_or_default(),
        key = key.name_any(),
        secret = %secret_name,
        algorithm = %key.spec.algorithm,
        "generated tsig key"
    );
    ctx.publish_event(
        key,
        EventType::Normal,
        REASON_KEY_GENERATED,
        "GenerateKey",
        format!(
            "generated a {} key into secret {secret_name}",
            key.spec.algorithm
        ),
    )
    .await;
    Ok(None)
}
