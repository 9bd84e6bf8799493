//! Names, labels and annotations the operator gives the objects it makes,
//! in one place: the reconcilers, the watches' mappers, the executor and the
//! local runtime (which plays the StatefulSet controller and kubelet) must
//! agree on them. Pure.

use std::collections::BTreeMap;

/// The field manager of every server-side apply (children and status).
pub const FIELD_MANAGER: &str = "bind-operator";
/// The reporting controller name on Events.
pub const EVENT_REPORTER: &str = "bind-operator";

/// `app.kubernetes.io/managed-by` on everything the operator makes.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// `app.kubernetes.io/name` on every BIND pod and child.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/instance`: the BindCluster's name.
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// The BindCluster a pod or child belongs to (the mapper's key).
pub const LABEL_CLUSTER: &str = "bind.unkin.net/cluster";
/// Set on pods by the StatefulSet controller (and the local runtime); the
/// primary Service selects pod 0 with it.
pub const LABEL_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";

/// Value of `app.kubernetes.io/name`.
pub const APP_NAME: &str = "bind";
/// Value of `app.kubernetes.io/managed-by`.
pub const MANAGER: &str = "bind-operator";

/// On the pod template: sha256 of entrypoint.sh. Only a change to it (or
/// to image, resources, scheduling) rolls the pods; rendered config never
/// goes on the template.
pub const ANNOTATION_ENTRYPOINT_HASH: &str = "bind.unkin.net/entrypoint-hash";
/// On every applied child: sha256 of what we last applied, so an unchanged
/// child is not applied again (a no-op apply is still a write request).
pub const ANNOTATION_APPLIED_HASH: &str = "bind.unkin.net/applied-hash";
/// On a pod whose mounted config is behind: the wanted config's hash and a
/// nudge count. Changing it makes the kubelet remount the pod's volumes
/// now instead of at its next periodic sync.
pub const ANNOTATION_CONFIG_HASH: &str = "bind.unkin.net/config-hash";
/// The pods' readiness gate: a pod condition of this type, which the
/// operator sets True once the pod serves every zone of its cluster at the
/// primary's serial. Until then the pod is not Ready, so no Service sends
/// it clients it would answer REFUSED.
pub const CONDITION_ZONES_SERVED: &str = "bind.unkin.net/zones-served";

/// The BIND container in each pod (pods/exec targets it).
pub const BIND_CONTAINER: &str = "bind";
/// The projected volume holding the ConfigMap and Secrets.
pub const CONFIG_VOLUME: &str = "config";
/// The volume named runs in.
pub const DATA_VOLUME: &str = "data";
/// The emptyDir at /tmp (the root filesystem is read-only).
pub const TMP_VOLUME: &str = "tmp";

/// Label selector string for every operator-managed object.
pub fn managed_selector() -> String {
    format!("{LABEL_MANAGED_BY}={MANAGER}")
}

/// Labels on a cluster's children and on its pods (also the StatefulSet's
/// selector, so they must never change for an existing cluster).
pub fn cluster_labels(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.to_string(), APP_NAME.to_string()),
        (LABEL_INSTANCE.to_string(), cluster.to_string()),
        (LABEL_CLUSTER.to_string(), cluster.to_string()),
        (LABEL_MANAGED_BY.to_string(), MANAGER.to_string()),
    ])
}

/// The StatefulSet's pod selector (a subset of [`cluster_labels`]).
pub fn pod_selector(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.to_string(), APP_NAME.to_string()),
        (LABEL_CLUSTER.to_string(), cluster.to_string()),
    ])
}

/// The StatefulSet (and the DNS Service) of a cluster.
pub fn statefulset_name(cluster: &str) -> String {
    cluster.to_string()
}

/// The DNS Service in front of all pods.
pub fn dns_service_name(cluster: &str) -> String {
    cluster.to_string()
}

/// The headless Service that names the StatefulSet's pods.
pub fn headless_service_name(cluster: &str) -> String {
    format!("{cluster}-headless")
}

/// The Service selecting only pod 0.
pub fn primary_service_name(cluster: &str) -> String {
    format!("{cluster}-primary")
}

/// The ConfigMap with named.conf.primary/secondary and entrypoint.sh.
pub fn configmap_name(cluster: &str) -> String {
    format!("{cluster}-config")
}

/// The cluster's PodDisruptionBudget.
pub fn pdb_name(cluster: &str) -> String {
    format!("{cluster}-pdb")
}

/// The Secret with keys.conf.
pub fn keys_secret_name(cluster: &str) -> String {
    format!("{cluster}-keys")
}

/// The Secret with the rndc control key.
pub fn rndc_secret_name(cluster: &str) -> String {
    format!("{cluster}-rndc")
}

/// The Secret with the transfer key a cluster generates when
/// `spec.catalog.transferKeyRef` is unset (generated once, kept).
pub fn transfer_secret_name(cluster: &str) -> String {
    format!("{cluster}-transfer")
}

/// The BIND name of a generated transfer key. Fixed: each cluster's
/// servers load only their own keys, and a user key of the same name is a
/// clear duplicate-key error, not a silent clash.
pub const GENERATED_TRANSFER_KEY_NAME: &str = "bind-operator-transfer";

/// Pod `ordinal` of a cluster's StatefulSet.
pub fn pod_name(cluster: &str, ordinal: u32) -> String {
    format!("{cluster}-{ordinal}")
}

/// The primary pod (ordinal 0).
pub fn primary_pod_name(cluster: &str) -> String {
    pod_name(cluster, 0)
}

/// The StatefulSet ordinal of a pod of `cluster`, from its name.
pub fn pod_ordinal(cluster: &str, pod: &str) -> Option<u32> {
    pod.strip_prefix(cluster)?.strip_prefix('-')?.parse().ok()
}

/// The Secret a BindTSIGKey without secretRef generates its key into.
pub fn generated_tsig_secret_name(key: &str) -> String {
    format!("{key}-tsig")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_and_selectors() {
        assert_eq!(pod_ordinal("c", "c-0"), Some(0));
        assert_eq!(pod_ordinal("c", "c-12"), Some(12));
        assert_eq!(pod_ordinal("c", "cc-1"), None);
        assert_eq!(pod_ordinal("c-1", "c-1-3"), Some(3));
        let labels = cluster_labels("c");
        assert!(
            pod_selector("c")
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
        );
    }
}
