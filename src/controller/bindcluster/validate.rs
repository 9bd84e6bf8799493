//! Turns a BindCluster's spec and what it refers to (keys, rndc material,
//! the primary's address) into the BIND layer's validated
//! [`ClusterConfig`]. Pure: no client; nothing after this step handles raw
//! CRD strings.

use kube::ResourceExt as _;

use crate::api::{BindCluster, DnssecValidation as ApiDnssec};
use crate::bind::render::{ClusterConfig, DnssecValidation, ForwardZone, View};
use crate::bind::types::parse_acl;
use crate::bind::types::parse_ip;
use crate::bind::{
    Endpoint, KeyName, TsigAlgorithm, TsigKey, TsigSecret, ValidationError, ViewName, ZoneName,
};

/// Port forwarders are asked on (the CRD takes bare IPs).
const FORWARDER_PORT: u16 = 53;

/// The validated inputs other than the spec.
pub struct Inputs<'a> {
    /// Every key the cluster loads (BindTSIGKeys and, when no
    /// transferKeyRef is set, the generated transfer key).
    pub keys: &'a [TsigKey],
    pub transfer_key: &'a KeyName,
    pub primary_endpoint: Endpoint,
    pub rndc_algorithm: TsigAlgorithm,
    pub rndc_secret: &'a TsigSecret,
}

/// The cluster's catalog zone: `spec.catalog.zoneName`, else
/// `<name>.<namespace>.catalog.invalid` (never a real zone).
pub fn catalog_zone(cluster: &BindCluster) -> Result<ZoneName, ValidationError> {
    match cluster.spec.catalog.as_ref().and_then(|c| c.zone_name.as_deref()) {
        Some(z) => ZoneName::parse(z).map_err(|e| e.at("spec.catalog.zoneName")),
        None => ZoneName::parse(&format!(
            "{}.{}.catalog.invalid",
            cluster.name_any(),
            cluster.namespace().unwrap_or_default()
        )),
    }
}

/// The name of the transfer key the operator generates when the cluster
/// names none: unique per cluster, in a namespace no user key would use.
pub fn default_transfer_key_name(cluster: &BindCluster) -> Result<KeyName, ValidationError> {
    KeyName::parse(&format!(
        "{}.{}.transfer.invalid",
        cluster.name_any(),
        cluster.namespace().unwrap_or_default()
    ))
}

fn endpoints(field: &str, ips: &[String]) -> Result<Vec<Endpoint>, ValidationError> {
    ips.iter()
        .enumerate()
        .map(|(i, s)| {
            let ip = parse_ip(s).map_err(|e| e.at(&format!("{field}[{i}]")))?;
            Endpoint::new(ip, FORWARDER_PORT)
        })
        .collect()
}

fn zones(field: &str, names: &[String]) -> Result<Vec<ZoneName>, ValidationError> {
    names
        .iter()
        .enumerate()
        .map(|(i, s)| ZoneName::parse(s).map_err(|e| e.at(&format!("{field}[{i}]"))))
        .collect()
}

/// Validates the spec into the renderer's input.
pub fn cluster_config(cluster: &BindCluster, inputs: Inputs<'_>) -> Result<ClusterConfig, ValidationError> {
    let spec = &cluster.spec;
    let dnssec_validation = match spec.dnssec_validation {
        Some(ApiDnssec::Yes) => DnssecValidation::Yes,
        Some(ApiDnssec::Auto) => DnssecValidation::Auto,
        Some(ApiDnssec::No) => DnssecValidation::No,
        // Authoritative-only servers must not chase the root trust anchor.
        None if spec.recursion => DnssecValidation::Auto,
        None => DnssecValidation::No,
    };
    let forward_zones = spec
        .forward_zones
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let at = format!("spec.forwardZones[{i}]");
            Ok(ForwardZone {
                zone: ZoneName::parse(&f.zone).map_err(|e| e.at(&format!("{at}.zone")))?,
                forwarders: endpoints(&format!("{at}.forwarders"), &f.forwarders)?,
                forward_only: f.forward_only,
            })
        })
        .collect::<Result<Vec<_>, ValidationError>>()?;
    let views = spec
        .views
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let at = format!("spec.views[{i}]");
            Ok(View {
                name: ViewName::parse(&v.name).map_err(|e| e.at(&format!("{at}.name")))?,
                match_clients: parse_acl(&format!("{at}.matchClients"), &v.match_clients)?,
                match_destinations: parse_acl(
                    &format!("{at}.matchDestinations"),
                    &v.match_destinations,
                )?,
                recursion: v.recursion,
            })
        })
        .collect::<Result<Vec<_>, ValidationError>>()?;
    Ok(ClusterConfig {
        recursion: spec.recursion,
        allow_query: parse_acl("spec.allowQuery", &spec.allow_query)?,
        allow_recursion: parse_acl("spec.allowRecursion", &spec.allow_recursion)?,
        forwarders: endpoints("spec.forwarders", &spec.forwarders)?,
        forward_only: spec.forward_only,
        dnssec_validation,
        validate_except: zones("spec.validateExcept", &spec.validate_except)?,
        forward_zones,
        views,
        catalog_zone: catalog_zone(cluster)?,
        transfer_key: inputs.transfer_key.clone(),
        primary_endpoint: inputs.primary_endpoint,
        keys: inputs.keys.to_vec(),
        rndc_algorithm: inputs.rndc_algorithm,
        rndc_secret: inputs.rndc_secret.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BindClusterSpec, ForwardZone as ApiForwardZone};

    fn cluster(spec: BindClusterSpec) -> BindCluster {
        let mut c = BindCluster::new("dns", spec);
        c.metadata.namespace = Some("infra".into());
        c
    }

    #[test]
    fn defaults_and_bad_values() {
        let c = cluster(BindClusterSpec::default());
        assert_eq!(catalog_zone(&c).unwrap().as_str(), "dns.infra.catalog.invalid");
        assert_eq!(
            default_transfer_key_name(&c).unwrap().as_str(),
            "dns.infra.transfer.invalid"
        );
        let secret = TsigSecret::from_base64("c2VjcmV0").unwrap();
        let xfer = default_transfer_key_name(&c).unwrap();
        let inputs = || Inputs {
            keys: &[],
            transfer_key: &xfer,
            primary_endpoint: Endpoint::new("10.0.0.1".parse().unwrap(), 53).unwrap(),
            rndc_algorithm: TsigAlgorithm::HmacSha256,
            rndc_secret: &secret,
        };
        let cfg = cluster_config(&c, inputs()).unwrap();
        assert_eq!(cfg.dnssec_validation, DnssecValidation::No);
        let bad = cluster(BindClusterSpec {
            forward_zones: vec![ApiForwardZone {
                zone: "corp.example".into(),
                forwarders: vec!["not-an-ip".into()],
                forward_only: false,
            }],
            ..Default::default()
        });
        let e = cluster_config(&bad, inputs()).unwrap_err();
        assert!(e.to_string().contains("spec.forwardZones[0].forwarders[0]"), "{e}");
    }
}
