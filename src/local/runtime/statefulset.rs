//! What a StatefulSet implies, as pure functions: the Pods it wants (name
//! `<sts>-<ordinal>`, the template's labels and annotations, the
//! StatefulSet as controlling owner), the actions that converge the
//! existing Pods onto them (create missing, delete surplus or stale ones),
//! and the status the StatefulSet controller would report.
//!
//! No client and no I/O here; `controller.rs` applies the plan. Pods are
//! managed in parallel (like `podManagementPolicy: Parallel`): a template
//! change deletes every stale pod at once rather than rolling one by one,
//! which is what a single machine with no scheduling wants.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Pod, PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sha2::{Digest, Sha256};

/// The label naming each pod of a StatefulSet, as Kubernetes sets it.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label carrying the template revision a pod was created from.
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// The label carrying the ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// Hex digits of the template hash kept in the revision name.
const REVISION_HASH_LEN: usize = 10;

/// `<sts>-<ordinal>`.
pub fn pod_name(sts: &str, ordinal: u32) -> String {
    format!("{sts}-{ordinal}")
}

/// The ordinal of `pod` if it is named like a pod of `sts`.
pub fn ordinal_of(sts: &str, pod: &str) -> Option<u32> {
    let rest = pod.strip_prefix(sts)?.strip_prefix('-')?;
    if rest.is_empty()
        || !rest.bytes().all(|b| b.is_ascii_digit())
        || rest.starts_with('0') && rest.len() > 1
    {
        return None;
    }
    rest.parse().ok()
}

/// The ordinal at the end of any pod name (`web-3` -> 3).
pub fn trailing_ordinal(pod: &str) -> Option<u32> {
    let (_, n) = pod.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// `<sts>-<hash of the pod template>`: equal templates, equal revisions.
pub fn revision(sts: &StatefulSet) -> String {
    let template =
        serde_json::to_vec(&sts.spec.template).expect("a pod template always serialises");
    let hash = hex::encode(Sha256::digest(&template));
    format!("{}-{}", name(sts), &hash[..REVISION_HASH_LEN])
}

fn name(sts: &StatefulSet) -> &str {
    sts.metadata.name.as_deref().unwrap_or_default()
}

/// Wanted replicas (Kubernetes' default is 1).
pub fn replicas(sts: &StatefulSet) -> u32 {
    sts.spec.replicas.unwrap_or(1).max(0) as u32
}

/// Whether `sts` is the controlling owner of `pod`.
pub fn owns(sts: &StatefulSet, pod: &Pod) -> bool {
    let Some(uid) = sts.metadata.uid.as_deref() else {
        return false;
    };
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.controller == Some(true))
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The Pod `sts` wants at `ordinal`.
pub fn desired_pod(sts: &StatefulSet, ordinal: u32, revision: &str) -> Pod {
    let spec = sts.spec.clone();
    let template = spec.template;
    let tmeta = template.metadata.unwrap_or_default();
    let pod = pod_name(name(sts), ordinal);
    let mut labels: BTreeMap<String, String> = tmeta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), pod.clone());
    labels.insert(REVISION_LABEL.into(), revision.into());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    let mut pod_spec: PodSpec = template.spec.unwrap_or_default();
    pod_spec.hostname = Some(pod.clone());
    // Each claim template becomes a per-pod claim volume, as the real
    // controller does; the runtime keeps such volumes across re-creation.
    for claim in spec.volume_claim_templates.iter().flatten() {
        let Some(cname) = claim.metadata.name.as_deref() else {
            continue;
        };
        let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| v.name != cname);
        volumes.push(Volume {
            name: cname.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: format!("{cname}-{pod}"),
                read_only: None,
            }),
            ..Volume::default()
        });
    }
    if !spec.service_name.as_deref().unwrap_or_default().is_empty() {
        pod_spec.subdomain = spec.service_name.clone();
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(pod),
            namespace: sts.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: tmeta.annotations,
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "StatefulSet".into(),
                name: name(sts).into(),
                uid: sts.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    }
}

/// Why a pod is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Its ordinal is at or above `replicas`.
    ScaleDown,
    /// It was created from an older template.
    Stale,
}

/// One step towards what the StatefulSet wants.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Create(Box<Pod>),
    Delete { pod: String, reason: DeleteReason },
}

/// The actions that converge `pods` (every pod in the StatefulSet's
/// namespace) onto what `sts` wants. Terminating pods are waited for; a
/// same-named pod owned by someone else is left alone.
pub fn plan(sts: &StatefulSet, pods: &[&Pod]) -> Vec<Action> {
    if sts.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }
    let rev = revision(sts);
    let want = replicas(sts);
    let by_name: BTreeMap<&str, &Pod> = pods
        .iter()
        .filter_map(|p| Some((p.metadata.name.as_deref()?, *p)))
        .collect();
    let mut actions = Vec::new();
    for ordinal in 0..want {
        let pod = pod_name(name(sts), ordinal);
        match by_name.get(pod.as_str()) {
            None => actions.push(Action::Create(Box::new(desired_pod(sts, ordinal, &rev)))),
            Some(p) if owns(sts, p) && !terminating(p) => {
                if label(p, REVISION_LABEL) != Some(rev.as_str()) {
                    actions.push(Action::Delete {
                        pod,
                        reason: DeleteReason::Stale,
                    });
                }
            }
            Some(_) => {}
        }
    }
    // Surplus pods, highest ordinal first as the real controller does.
    let mut surplus: Vec<(u32, &str)> = pods
        .iter()
        .filter(|p| owns(sts, p) && !terminating(p))
        .filter_map(|p| {
            let n = p.metadata.name.as_deref()?;
            match ordinal_of(name(sts), n) {
                Some(o) if o < want => None,
                o => Some((o.unwrap_or(u32::MAX), n)),
            }
        })
        .collect();
    surplus.sort_by(|a, b| b.cmp(a));
    actions.extend(surplus.into_iter().map(|(_, n)| Action::Delete {
        pod: n.to_string(),
        reason: DeleteReason::ScaleDown,
    }));
    actions
}

/// Whether the Pod's Ready condition is True.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The status the StatefulSet controller reports for `sts` given its pods.
pub fn status(sts: &StatefulSet, pods: &[&Pod]) -> StatefulSetStatus {
    let rev = revision(sts);
    let owned: Vec<&&Pod> = pods
        .iter()
        .filter(|p| owns(sts, p) && !terminating(p))
        .collect();
    let count = |f: &dyn Fn(&Pod) -> bool| owned.iter().filter(|p| f(p)).count() as i32;
    let ready = count(&pod_ready);
    let updated = count(&|p| label(p, REVISION_LABEL) == Some(rev.as_str()));
    let previous = sts.status.as_ref().and_then(|s| s.current_revision.clone());
    let current_revision = if updated == owned.len() as i32 {
        Some(rev.clone())
    } else {
        previous.or_else(|| Some(rev.clone()))
    };
    StatefulSetStatus {
        observed_generation: sts.metadata.generation,
        replicas: owned.len() as i32,
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        current_replicas: Some(updated),
        updated_replicas: Some(updated),
        current_revision,
        update_revision: Some(rev),
        collision_count: sts.status.as_ref().and_then(|s| s.collision_count),
        conditions: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetSpec;
    use k8s_openapi::api::core::v1::PodTemplateSpec;

    fn sts(replicas: i32, image: &str) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("dns".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                generation: Some(3),
                ..Default::default()
            },
            spec: StatefulSetSpec {
                replicas: Some(replicas),
                service_name: Some("dns-hl".into()),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(BTreeMap::from([("app".into(), "dns".into())])),
                        annotations: Some(BTreeMap::from([("a".into(), "b".into())])),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![k8s_openapi::api::core::v1::Container {
                            name: "bind".into(),
                            image: Some(image.into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            },
            status: None,
        }
    }

    fn created(actions: &[Action]) -> Vec<Pod> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Create(p) => Some((**p).clone()),
                Action::Delete { .. } => None,
            })
            .collect()
    }

    #[test]
    fn ordinals_parse_only_for_the_set() {
        assert_eq!(ordinal_of("dns", "dns-12"), Some(12));
        assert_eq!(ordinal_of("dns", "dns-x"), None);
        assert_eq!(ordinal_of("dns", "dns-01"), None);
        assert_eq!(ordinal_of("dns", "dnsx-1"), None);
        assert_eq!(trailing_ordinal("my-dns-3"), Some(3));
    }

    #[test]
    fn creates_missing_pods_with_template_metadata_and_owner() {
        let s = sts(2, "bind:1");
        let pods = created(&plan(&s, &[]));
        assert_eq!(pods.len(), 2);
        let p = &pods[1];
        assert_eq!(p.metadata.name.as_deref(), Some("dns-1"));
        let labels = p.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "dns");
        assert_eq!(labels[POD_NAME_LABEL], "dns-1");
        assert_eq!(labels[REVISION_LABEL], revision(&s));
        assert_eq!(p.metadata.annotations.as_ref().unwrap()["a"], "b");
        let o = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((o.kind.as_str(), o.uid.as_str()), ("StatefulSet", "u1"));
        assert!(owns(&s, p));
        assert_eq!(
            p.spec.as_ref().unwrap().subdomain.as_deref(),
            Some("dns-hl")
        );
    }

    #[test]
    fn claim_templates_become_per_pod_claims_that_outlive_the_pod() {
        let mut s = sts(1, "bind:1");
        let spec = &mut s.spec;
        spec.volume_claim_templates =
            Some(vec![k8s_openapi::api::core::v1::PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("data".into()),
                    ..Default::default()
                },
                ..Default::default()
            }]);
        let pod_spec = spec.template.spec.as_mut().unwrap();
        pod_spec.containers[0].volume_mounts =
            Some(vec![k8s_openapi::api::core::v1::VolumeMount {
                name: "data".into(),
                mount_path: "/var/lib/bind".into(),
                ..Default::default()
            }]);
        pod_spec.volumes = Some(vec![Volume {
            name: "data".into(),
            empty_dir: Some(Default::default()),
            ..Default::default()
        }]);
        let pod = desired_pod(&s, 0, "r");
        let vols = pod.spec.as_ref().unwrap().volumes.as_ref().unwrap();
        assert_eq!(vols.len(), 1);
        assert_eq!(
            vols[0].persistent_volume_claim.as_ref().unwrap().claim_name,
            "data-dns-0"
        );
        assert!(super::super::volume::data_volume_is_persistent(&pod));
        assert!(!super::super::volume::data_volume_is_persistent(
            &desired_pod(&sts(1, "bind:1"), 0, "r")
        ));
    }

    #[test]
    fn converged_set_plans_nothing_and_changes_are_planned() {
        let s = sts(2, "bind:1");
        let pods = created(&plan(&s, &[]));
        let refs: Vec<&Pod> = pods.iter().collect();
        assert!(plan(&s, &refs).is_empty());
        let st = status(&s, &refs);
        assert_eq!((st.replicas, st.ready_replicas), (2, Some(0)));
        assert_eq!(st.observed_generation, Some(3));

        let changed = sts(2, "bind:2");
        assert_ne!(revision(&changed), revision(&s));
        let stale = plan(&changed, &refs);
        assert_eq!(stale.len(), 2);
        assert!(stale.iter().all(|a| matches!(
            a,
            Action::Delete {
                reason: DeleteReason::Stale,
                ..
            }
        )));

        let down = plan(&sts(0, "bind:1"), &refs);
        assert_eq!(
            down,
            vec![
                Action::Delete {
                    pod: "dns-1".into(),
                    reason: DeleteReason::ScaleDown
                },
                Action::Delete {
                    pod: "dns-0".into(),
                    reason: DeleteReason::ScaleDown
                }
            ]
        );
    }
}
