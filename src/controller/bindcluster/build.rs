//! The desired children of a BindCluster, built by pure functions from the
//! cluster and the rendered files: the three Services, the ConfigMap, the
//! keys, rndc and (without a transferKeyRef) transfer-key Secrets, and the
//! PodDisruptionBudget. (The StatefulSet is in [`super::statefulset`].)
//!
//! No client. Secret builders take key material and put it only into the
//! Secret's data.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt as _;
use kube::api::ObjectMeta;

use crate::api::{
    BindCluster, DEFAULT_SECRET_KEY, ExternalTrafficPolicy, ServiceType,
    TsigAlgorithm as ApiAlgorithm,
};
use crate::bind::entrypoint::render_rndc_key;
use crate::bind::layout::{defaults, mount};
use crate::bind::render::RenderedFiles;
use crate::bind::{KeyName, TsigAlgorithm, TsigKey, TsigSecret};
use crate::controller::apply::owner_ref;
use crate::controller::bindtsigkey::material;
use crate::controller::names::{
    self, GENERATED_TRANSFER_KEY_NAME, LABEL_POD_NAME, cluster_labels, configmap_name,
    dns_service_name, headless_service_name, keys_secret_name, pdb_name, pod_selector,
    primary_pod_name, primary_service_name, rndc_secret_name, transfer_secret_name,
};
use crate::render::validate::algorithm;

/// Data keys of the rndc Secret: the mounted key clause, and the raw
/// material the operator reads back (generated once, kept).
pub const RNDC_DATA_KEY_FILE: &str = mount::RNDC_KEY;
pub const RNDC_DATA_SECRET: &str = "rndc-secret";
/// The rndc control key's algorithm and size (its HMAC's output size).
pub const RNDC_ALGORITHM: TsigAlgorithm = TsigAlgorithm::HmacSha256;
const RNDC_KEY_BYTES: usize = 32;
/// A generated transfer key's algorithm (its size is the HMAC's output).
pub const TRANSFER_ALGORITHM: ApiAlgorithm = ApiAlgorithm::HmacSha256;

/// Object metadata of a child: name, namespace, labels, owner.
pub fn child_meta(cluster: &BindCluster, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: cluster.namespace(),
        labels: Some(cluster_labels(&cluster.name_any())),
        owner_references: Some(vec![owner_ref(cluster)]),
        ..Default::default()
    }
}

fn dns_ports() -> Vec<ServicePort> {
    [("dns-udp", "UDP"), ("dns-tcp", "TCP")]
        .into_iter()
        .map(|(name, proto)| ServicePort {
            name: Some(name.into()),
            protocol: Some(proto.into()),
            // Clients keep port 53; named listens on an unprivileged port.
            port: i32::from(defaults::SERVICE_DNS_PORT),
            target_port: Some(IntOrString::Int(i32::from(defaults::DNS_PORT))),
            ..Default::default()
        })
        .collect()
}

/// The DNS Service in front of all pods, shaped by `spec.service`.
pub fn dns_service(cluster: &BindCluster) -> Service {
    let name = cluster.name_any();
    let svc = cluster.spec.service.clone().unwrap_or_default();
    let mut meta = child_meta(cluster, dns_service_name(&name));
    if !svc.annotations.is_empty() {
        meta.annotations = Some(svc.annotations.clone());
    }
    if let Some(labels) = meta.labels.as_mut() {
        for (k, v) in &svc.labels {
            // Our own labels win: the mappers and selectors depend on them.
            labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let type_ = match svc.type_ {
        ServiceType::ClusterIP => "ClusterIP",
        ServiceType::NodePort => "NodePort",
        ServiceType::LoadBalancer => "LoadBalancer",
    };
    let external = svc.type_ != ServiceType::ClusterIP;
    Service {
        metadata: meta,
        spec: Some(ServiceSpec {
            type_: Some(type_.into()),
            selector: Some(pod_selector(&name)),
            ports: Some(dns_ports()),
            load_balancer_ip: svc.load_balancer_ip.clone(),
            load_balancer_class: svc.load_balancer_class.clone(),
            load_balancer_source_ranges: (!svc.load_balancer_source_ranges.is_empty())
                .then(|| svc.load_balancer_source_ranges.clone()),
            external_traffic_policy: svc.external_traffic_policy.filter(|_| external).map(|p| {
                match p {
                    ExternalTrafficPolicy::Cluster => "Cluster".to_string(),
                    ExternalTrafficPolicy::Local => "Local".to_string(),
                }
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// The headless Service that gives the StatefulSet's pods their names.
/// Not-ready pods are published so secondaries resolve during start-up.
pub fn headless_service(cluster: &BindCluster) -> Service {
    let name = cluster.name_any();
    Service {
        metadata: child_meta(cluster, headless_service_name(&name)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(pod_selector(&name)),
            ports: Some(dns_ports()),
            ..Default::default()
        }),
        status: None,
    }
}

/// The Service selecting only pod 0. Its ClusterIP is the secondaries'
/// `default-primaries`: stable across primary restarts onto new pod IPs.
pub fn primary_service(cluster: &BindCluster) -> Service {
    let name = cluster.name_any();
    let mut selector = pod_selector(&name);
    selector.insert(LABEL_POD_NAME.to_string(), primary_pod_name(&name));
    Service {
        metadata: child_meta(cluster, primary_service_name(&name)),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector),
            ports: Some(dns_ports()),
            ..Default::default()
        }),
        status: None,
    }
}

/// Pods a voluntary disruption (a node drain, an eviction) may take down at
/// once: with one more, a two-pod cluster would have no server left.
pub const PDB_MAX_UNAVAILABLE: i32 = 1;

/// The PodDisruptionBudget over the cluster's pods (only when
/// `spec.podDisruptionBudget.enabled` is not false).
pub fn pod_disruption_budget(cluster: &BindCluster) -> PodDisruptionBudget {
    let name = cluster.name_any();
    PodDisruptionBudget {
        metadata: child_meta(cluster, pdb_name(&name)),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(PDB_MAX_UNAVAILABLE)),
            selector: Some(LabelSelector {
                match_labels: Some(pod_selector(&name)),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// The ConfigMap: both named.conf flavours and the entrypoint.
pub fn configmap(cluster: &BindCluster, files: &RenderedFiles) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(cluster, configmap_name(&cluster.name_any())),
        data: Some(BTreeMap::from([
            (
                mount::NAMED_CONF_PRIMARY.to_string(),
                files.named_conf_primary.clone(),
            ),
            (
                mount::NAMED_CONF_SECONDARY.to_string(),
                files.named_conf_secondary.clone(),
            ),
            (mount::ENTRYPOINT.to_string(), files.entrypoint.clone()),
        ])),
        ..Default::default()
    }
}

/// The Secret with keys.conf.
pub fn keys_secret(cluster: &BindCluster, files: &RenderedFiles) -> Secret {
    Secret {
        metadata: child_meta(cluster, keys_secret_name(&cluster.name_any())),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            mount::KEYS_CONF.to_string(),
            ByteString(files.keys_conf.clone().into_bytes()),
        )])),
        ..Default::default()
    }
}

/// The rndc Secret: created once with fresh material and then only read.
pub fn rndc_secret(cluster: &BindCluster, rndc: &TsigSecret) -> Secret {
    Secret {
        metadata: child_meta(cluster, rndc_secret_name(&cluster.name_any())),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([
            (
                RNDC_DATA_KEY_FILE.to_string(),
                ByteString(render_rndc_key(RNDC_ALGORITHM, rndc).into_bytes()),
            ),
            (
                RNDC_DATA_SECRET.to_string(),
                ByteString(rndc.expose_base64().as_bytes().to_vec()),
            ),
        ])),
        ..Default::default()
    }
}

/// Material read back from an existing rndc Secret.
pub struct RndcMaterial {
    pub rndc: TsigSecret,
}

impl std::fmt::Debug for RndcMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RndcMaterial(<redacted>)")
    }
}

/// Reads the material out of the rndc Secret; None if it is not usable.
pub fn read_rndc_secret(secret: &Secret) -> Option<RndcMaterial> {
    let data = secret.data.as_ref()?;
    let get = |k: &str| {
        let text = std::str::from_utf8(&data.get(k)?.0).ok()?.to_string();
        TsigSecret::from_base64(&text).ok()
    };
    Some(RndcMaterial {
        rndc: get(RNDC_DATA_SECRET)?,
    })
}

/// Fresh material for a new rndc Secret.
pub fn generate_rndc_material() -> RndcMaterial {
    use rand::RngCore as _;
    let mut bytes = [0u8; RNDC_KEY_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    RndcMaterial {
        rndc: TsigSecret::from_bytes(&bytes).expect("the key is not empty"),
    }
}

/// The generated transfer key's Secret: created once with fresh material
/// (`data` from [`generate_transfer_material`]) and then only read.
pub fn transfer_secret(cluster: &BindCluster, data: BTreeMap<String, ByteString>) -> Secret {
    Secret {
        metadata: child_meta(cluster, transfer_secret_name(&cluster.name_any())),
        type_: Some("Opaque".into()),
        data: Some(data),
        ..Default::default()
    }
}

/// Fresh material for a new transfer Secret (key `secret`, base64).
pub fn generate_transfer_material() -> BTreeMap<String, ByteString> {
    material::generate_secret_data(TRANSFER_ALGORITHM)
}

/// The generated transfer key from its Secret; None if it is not usable.
pub fn read_transfer_secret(secret: &Secret) -> Option<TsigKey> {
    let raw = secret.data.as_ref()?.get(DEFAULT_SECRET_KEY)?;
    let text = std::str::from_utf8(&raw.0).ok()?;
    Some(TsigKey {
        name: KeyName::parse(GENERATED_TRANSFER_KEY_NAME).expect("a valid key name"),
        algorithm: algorithm(TRANSFER_ALGORITHM),
        secret: TsigSecret::from_base64(text.trim()).ok()?,
    })
}

/// Names of every child, for tests and cleanup checks.
pub fn child_names(cluster: &str) -> Vec<String> {
    vec![
        names::statefulset_name(cluster),
        headless_service_name(cluster),
        primary_service_name(cluster),
        configmap_name(cluster),
        keys_secret_name(cluster),
        rndc_secret_name(cluster),
    ]
}
