//! The desired StatefulSet of a BindCluster. Pure.
//!
//! The pod template changes only when the entrypoint (its hash is the
//! `bind.unkin.net/entrypoint-hash` annotation), the image, resources,
//! security settings or scheduling change. Rendered config never goes on the
//! template: it reaches running pods through the projected volume and
//! `rndc reconfig`.
//!
//! The pod passes the Pod Security "restricted" profile by default
//! ([`super::pod_security`] checks it): named runs as uid/gid 53 with no
//! capability on unprivileged ports, on a read-only root filesystem, and
//! writes only to its data volume and an emptyDir `/tmp`. The pod's fsGroup
//! makes the data volume (also one an older root-run pod filled) and the
//! Secrets, mounted 0440, readable and writable by that user.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapProjection, Container, ContainerPort, EmptyDirVolumeSource, ExecAction,
    KeyToPath, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodReadinessGate,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ProjectedVolumeSource, SeccompProfile,
    SecretProjection, SecurityContext, Volume, VolumeMount, VolumeProjection,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt as _;
use kube::api::ObjectMeta;
use sha2::{Digest as _, Sha256};

use super::build::{RNDC_DATA_KEY_FILE, child_meta};
use crate::api::BindCluster;
use crate::bind::commands;
use crate::bind::layout::{PodLayout, defaults, mount};
use crate::controller::names::{
    ANNOTATION_ENTRYPOINT_HASH, BIND_CONTAINER, CONDITION_ZONES_SERVED, CONFIG_VOLUME, DATA_VOLUME,
    TMP_VOLUME, cluster_labels, configmap_name, headless_service_name, keys_secret_name,
    pod_selector, rndc_secret_name, statefulset_name,
};

/// Mode of the mounted entrypoint (it is run through `sh`, but a readable
/// script is friendlier to `kubectl exec`).
const ENTRYPOINT_MODE: i32 = 0o755;
/// Mode of the mounted Secrets: owner and group (the pod's fsGroup) only.
const SECRET_MODE: i32 = 0o440;
/// Kubelet puts the tail of the log in `lastState.terminated.message` when
/// named exits with an error, so a crash loop says why.
const TERMINATION_MESSAGE_POLICY: &str = "FallbackToLogsOnError";
/// Only change volume ownership when the volume's root does not already
/// match the fsGroup (a large data volume is not walked on every start).
const FS_GROUP_CHANGE_POLICY: &str = "OnRootMismatch";
const SECCOMP_RUNTIME_DEFAULT: &str = "RuntimeDefault";
/// Seconds between readiness checks once started.
const PROBE_PERIOD_SECONDS: i32 = 10;
/// Seconds between startup checks: a started named is seen within a
/// second (a readiness probe alone can come a whole period late), and
/// readiness and liveness wait for it.
const STARTUP_PERIOD_SECONDS: i32 = 1;
/// Startup checks before the container is restarted: five minutes for
/// named to load its zones (~1 s per 1,000 from disk).
const STARTUP_FAILURE_THRESHOLD: i32 = 300;
/// A DNS query that takes longer than this counts as a failure.
const PROBE_TIMEOUT_SECONDS: i32 = 5;
/// Liveness tolerates a minute of silence (a reconfig of 10,000 zones takes
/// under a second; a named that stopped answering for a minute is wedged).
const LIVENESS_FAILURE_THRESHOLD: i32 = 6;
/// named loads catalog members from disk at start (~1 s per 1,000 zones).
const LIVENESS_INITIAL_DELAY_SECONDS: i32 = 30;

fn startup_probe(layout: &PodLayout) -> Probe {
    Probe {
        period_seconds: Some(STARTUP_PERIOD_SECONDS),
        failure_threshold: Some(STARTUP_FAILURE_THRESHOLD),
        ..probe(layout, STARTUP_FAILURE_THRESHOLD, 0)
    }
}

/// sha256 hex of the entrypoint script, the pod template's only link to
/// rendered files.
pub fn entrypoint_hash(entrypoint: &str) -> String {
    hex::encode(Sha256::digest(entrypoint.as_bytes()))
}

fn probe(layout: &PodLayout, failure_threshold: i32, initial_delay: i32) -> Probe {
    Probe {
        exec: Some(ExecAction {
            // What the probe asks is BIND knowledge: `commands::probe`.
            command: Some(commands::probe(layout).argv),
        }),
        period_seconds: Some(PROBE_PERIOD_SECONDS),
        timeout_seconds: Some(PROBE_TIMEOUT_SECONDS),
        failure_threshold: Some(failure_threshold),
        initial_delay_seconds: (initial_delay > 0).then_some(initial_delay),
        ..Default::default()
    }
}

fn projected_config(cluster: &str) -> Volume {
    let item = |key: &str, mode: Option<i32>| KeyToPath {
        key: key.to_string(),
        path: key.to_string(),
        mode,
        ..Default::default()
    };
    Volume {
        name: CONFIG_VOLUME.into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: configmap_name(cluster),
                        items: Some(vec![
                            item(mount::NAMED_CONF_PRIMARY, None),
                            item(mount::NAMED_CONF_SECONDARY, None),
                            item(mount::ENTRYPOINT, Some(ENTRYPOINT_MODE)),
                        ]),
                        optional: Some(false),
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    secret: Some(SecretProjection {
                        name: keys_secret_name(cluster),
                        items: Some(vec![item(mount::KEYS_CONF, Some(SECRET_MODE))]),
                        optional: Some(false),
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    secret: Some(SecretProjection {
                        name: rndc_secret_name(cluster),
                        items: Some(vec![item(RNDC_DATA_KEY_FILE, Some(SECRET_MODE))]),
                        optional: Some(false),
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod security context before the BindCluster's overrides.
pub fn default_pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(defaults::BIND_UID),
        run_as_group: Some(defaults::BIND_UID),
        fs_group: Some(defaults::BIND_UID),
        fs_group_change_policy: Some(FS_GROUP_CHANGE_POLICY.into()),
        seccomp_profile: Some(SeccompProfile {
            type_: SECCOMP_RUNTIME_DEFAULT.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The container security context before the BindCluster's overrides.
pub fn default_security_context() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        seccomp_profile: Some(SeccompProfile {
            type_: SECCOMP_RUNTIME_DEFAULT.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `base` with every field `over` sets laid on top (objects merge field by
/// field, anything else is replaced).
fn overlay<T>(base: T, over: Option<&T>) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    fn merge(base: &mut serde_json::Value, over: serde_json::Value) {
        match (base, over) {
            (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
                for (k, v) in o {
                    merge(b.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (b, o) => *b = o,
        }
    }
    let Some(over) = over else { return base };
    let mut value = serde_json::to_value(&base).expect("k8s types serialise");
    merge(
        &mut value,
        serde_json::to_value(over).expect("k8s types serialise"),
    );
    serde_json::from_value(value).expect("a merge of two valid objects is valid")
}

/// The pod's security context: the defaults with the cluster's overrides.
pub fn pod_security_context(cluster: &BindCluster) -> PodSecurityContext {
    overlay(
        default_pod_security_context(),
        cluster.spec.pod_security_context.as_ref(),
    )
}

/// The named container's security context: the defaults with the
/// cluster's overrides.
pub fn security_context(cluster: &BindCluster) -> SecurityContext {
    overlay(
        default_security_context(),
        cluster.spec.security_context.as_ref(),
    )
}

/// The StatefulSet for a cluster whose entrypoint is `entrypoint`.
pub fn statefulset(cluster: &BindCluster, entrypoint: &str) -> StatefulSet {
    let name = cluster.name_any();
    let spec = &cluster.spec;
    let layout = PodLayout::in_cluster();
    let mut annotations: BTreeMap<String, String> = spec.pod_annotations.clone();
    annotations.insert(
        ANNOTATION_ENTRYPOINT_HASH.to_string(),
        entrypoint_hash(entrypoint),
    );
    let container = Container {
        name: BIND_CONTAINER.into(),
        image: Some(spec.image.clone()),
        image_pull_policy: spec.image_pull_policy.map(|p| p.as_str().to_string()),
        command: Some(vec![
            "/bin/sh".into(),
            layout
                .config_dir
                .join(mount::ENTRYPOINT)
                .to_string_lossy()
                .into_owned(),
        ]),
        ports: Some(
            [("dns-udp", "UDP"), ("dns-tcp", "TCP")]
                .into_iter()
                .map(|(n, p)| ContainerPort {
                    name: Some(n.into()),
                    protocol: Some(p.into()),
                    container_port: i32::from(layout.dns_port),
                    ..Default::default()
                })
                .collect(),
        ),
        resources: spec.resources.clone(),
        security_context: Some(security_context(cluster)),
        termination_message_policy: Some(TERMINATION_MESSAGE_POLICY.into()),
        volume_mounts: Some(vec![
            VolumeMount {
                name: CONFIG_VOLUME.into(),
                mount_path: layout.config_dir.to_string_lossy().into_owned(),
                read_only: Some(true),
                ..Default::default()
            },
            VolumeMount {
                name: DATA_VOLUME.into(),
                mount_path: layout.data_dir.to_string_lossy().into_owned(),
                ..Default::default()
            },
            VolumeMount {
                name: TMP_VOLUME.into(),
                mount_path: defaults::TMP_DIR.into(),
                ..Default::default()
            },
        ]),
        startup_probe: Some(startup_probe(&layout)),
        readiness_probe: Some(probe(&layout, 3, 0)),
        liveness_probe: Some(probe(
            &layout,
            LIVENESS_FAILURE_THRESHOLD,
            LIVENESS_INITIAL_DELAY_SECONDS,
        )),
        ..Default::default()
    };
    let mut volumes = vec![
        projected_config(&name),
        Volume {
            name: TMP_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    ];
    let claims = match &spec.storage {
        None => {
            volumes.push(Volume {
                name: DATA_VOLUME.into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            });
            None
        }
        Some(storage) => Some(vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(DATA_VOLUME.into()),
                labels: Some(cluster_labels(&name)),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: storage.storage_class_name.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        storage.size.clone(),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }]),
    };
    StatefulSet {
        metadata: child_meta(cluster, statefulset_name(&name)),
        spec: StatefulSetSpec {
            replicas: Some(spec.replicas),
            service_name: Some(headless_service_name(&name)),
            // Secondaries need not wait for the primary to be Ready.
            pod_management_policy: Some("Parallel".into()),
            selector: LabelSelector {
                match_labels: Some(pod_selector(&name)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(cluster_labels(&name)),
                    annotations: Some(annotations),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    // Ready only once the operator saw it serve every zone.
                    readiness_gates: Some(vec![PodReadinessGate {
                        condition_type: CONDITION_ZONES_SERVED.into(),
                    }]),
                    security_context: Some(pod_security_context(cluster)),
                    // named never talks to the API server.
                    automount_service_account_token: Some(false),
                    volumes: Some(volumes),
                    image_pull_secrets: (!spec.image_pull_secrets.is_empty())
                        .then(|| spec.image_pull_secrets.clone()),
                    node_selector: (!spec.node_selector.is_empty())
                        .then(|| spec.node_selector.clone()),
                    tolerations: (!spec.tolerations.is_empty()).then(|| spec.tolerations.clone()),
                    affinity: spec.affinity.clone(),
                    ..Default::default()
                }),
            },
            volume_claim_templates: claims,
            ..Default::default()
        },
        status: None,
    }
}
