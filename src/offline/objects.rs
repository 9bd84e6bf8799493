//! The Kubernetes objects a BindCluster gets, for an offline render (like
//! `helm template`): built by the controller's own builders
//! ([`crate::controller::bindcluster::build`] and
//! [`crate::controller::bindcluster::statefulset`]) and written as one
//! multi-document YAML beside the BIND files, so a user can review what
//! will run before applying anything.
//!
//! Pure: no I/O, no cluster. Secret data never reaches the output: every
//! value is replaced by [`REDACTED`] (in `stringData`, so it reads as text).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use serde::Serialize;

use super::placeholder::Placeholder;
use crate::api::{BindCluster, DEFAULT_SECRET_KEY};
use crate::bind::render::RenderedFiles;
use crate::controller::bindcluster::{build, statefulset};

/// File name of the objects, in the cluster's output directory.
pub const OBJECTS_FILE: &str = "kubernetes.yaml";
/// What every Secret value reads in the output.
pub const REDACTED: &str = "<redacted: bind-operator render never writes Secret data>";
/// The owner's uid in ownerReferences: the API server assigns the real one
/// when the BindCluster is created.
pub const PLACEHOLDER_UID: &str = "00000000-0000-0000-0000-000000000000";

/// One object of the output, as YAML.
struct Doc {
    kind: String,
    name: String,
    yaml: String,
}

fn doc<K: kube::Resource<DynamicType = ()> + Serialize>(object: &K) -> Doc {
    Doc {
        kind: K::kind(&()).into_owned(),
        name: object.name_any(),
        yaml: crate::yaml::to_string(object).expect("Kubernetes objects serialise to YAML"),
    }
}

/// The Secret with each value replaced by [`REDACTED`] (keys kept).
pub fn redact(secret: &Secret) -> Secret {
    let keys = secret
        .data
        .iter()
        .flat_map(|d| d.keys())
        .chain(secret.string_data.iter().flat_map(|d| d.keys()));
    let redacted: BTreeMap<String, String> =
        keys.map(|k| (k.clone(), REDACTED.to_string())).collect();
    Secret {
        metadata: secret.metadata.clone(),
        type_: secret.type_.clone(),
        immutable: secret.immutable,
        data: None,
        string_data: (!redacted.is_empty()).then_some(redacted),
    }
}

/// The cluster as the builders need it: an owner with a uid.
fn as_owner(cluster: &BindCluster) -> BindCluster {
    let mut owner = cluster.clone();
    if owner.metadata.uid.is_none() {
        owner.metadata.uid = Some(PLACEHOLDER_UID.to_string());
    }
    owner
}

/// Every child the controller applies for `cluster` with these rendered
/// files, in apply order (Services, ConfigMap, Secrets, PodDisruptionBudget,
/// StatefulSet), as
/// one multi-document YAML with a header comment. Secrets are redacted.
/// A child the controller gains belongs here too: the render_objects test
/// compares this list with what the controller creates and fails until it
/// does.
pub fn cluster_objects(cluster: &BindCluster, files: &RenderedFiles) -> String {
    let owner = as_owner(cluster);
    let placeholder = Placeholder::Generated;
    let mut docs = vec![
        doc(&build::dns_service(&owner)),
        doc(&build::headless_service(&owner)),
        doc(&build::primary_service(&owner)),
        doc(&build::configmap(&owner, files)),
        doc(&redact(&build::keys_secret(&owner, files))),
        doc(&redact(&build::rndc_secret(&owner, &placeholder.secret()))),
    ];
    if cluster.transfer_key_ref().is_none() {
        let data = BTreeMap::from([(
            DEFAULT_SECRET_KEY.to_string(),
            k8s_openapi::ByteString(placeholder.base64().into_bytes()),
        )]);
        docs.push(doc(&redact(&build::transfer_secret(&owner, data))));
    }
    if cluster.spec.pod_disruption_budget_enabled() {
        docs.push(doc(&build::pod_disruption_budget(&owner)));
    }
    docs.push(doc(&statefulset::statefulset(&owner, &files.entrypoint)));

    let mut out = format!(
        "# The Kubernetes objects the operator creates for BindCluster {}/{},\n\
         # built by its own builders (`bind-operator render`), for review: the\n\
         # operator applies them itself. Secret data is redacted; the owner's uid\n\
         # is a placeholder the API server replaces.\n",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    );
    for d in docs {
        out.push_str(&format!("---\n# {} {}\n{}", d.kind, d.name, d.yaml));
    }
    out
}
