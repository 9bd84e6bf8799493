//! The network seam: where secondaries reach the primary and where a pod's
//! named answers DNS (the primary's NOTIFY targets). This is the one thing
//! local mode cannot copy from a cluster (every local pod shares 127.0.0.1
//! with its own ports), so it sits behind a trait chosen by the environment;
//! rendering, hashing, reconfig and exec are the same code either way.
//!
//! Pure: implementations look at objects they are handed (and, for local
//! mode, the runtime's port table); nothing here calls the API server.

use k8s_openapi::api::core::v1::{Pod, Service};

use super::exec::PodRef;
use crate::bind::Endpoint;
use crate::bind::layout::defaults::{DNS_PORT, SERVICE_DNS_PORT, STATS_PORT};

/// Why an address is not known yet (a Service without a ClusterIP, a pod
/// without an IP). Transient: retried shortly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    #[error("failed to find the primary address: {0}")]
    PrimaryUnknown(String),
}

/// Addresses that differ between a cluster and local mode.
pub trait Network: Send + Sync {
    /// Where the secondaries of a cluster reach its primary (named.conf's
    /// `primaries` and catalog `default-primaries`). `primary_pod` is
    /// ordinal 0; `primary_service` is the applied primary-only Service as
    /// the API server returned it.
    fn primary_endpoint(
        &self,
        primary_pod: &PodRef,
        primary_service: &Service,
    ) -> Result<Endpoint, NetworkError>;

    /// Where a pod's named answers DNS from inside the cluster network (a
    /// NOTIFY target, a place to query). `None` while it has no address.
    fn pod_dns_endpoint(&self, pod: &Pod) -> Option<Endpoint>;

    /// Where the operator reads a pod's named statistics channel (HTTP,
    /// JSON). `None` while it has no address, or where the environment has
    /// no channel (the default, for test networks).
    fn pod_stats_endpoint(&self, _pod: &Pod) -> Option<Endpoint> {
        None
    }
}

/// The in-cluster network: the primary Service's ClusterIP on port 53 (a
/// stable address, so a primary restart onto a new pod IP changes no
/// config; the Service maps 53 to the container port), and podIP with the
/// container's own DNS port (no Service in between).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterNetwork;

impl Network for ClusterNetwork {
    fn primary_endpoint(
        &self,
        _primary_pod: &PodRef,
        primary_service: &Service,
    ) -> Result<Endpoint, NetworkError> {
        let ip = primary_service
            .spec
            .as_ref()
            .and_then(|s| s.cluster_ip.as_deref())
            .filter(|ip| !ip.is_empty() && *ip != "None")
            .ok_or_else(|| {
                NetworkError::PrimaryUnknown("the primary Service has no ClusterIP yet".into())
            })?;
        let ip = ip.parse().map_err(|_| {
            NetworkError::PrimaryUnknown(format!(
                "the primary Service's ClusterIP {ip} is not an IP address"
            ))
        })?;
        Ok(Endpoint {
            ip,
            port: SERVICE_DNS_PORT,
        })
    }

    fn pod_dns_endpoint(&self, pod: &Pod) -> Option<Endpoint> {
        let ip = pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()?;
        Some(Endpoint { ip, port: DNS_PORT })
    }

    /// podIP with the container's statistics port.
    fn pod_stats_endpoint(&self, pod: &Pod) -> Option<Endpoint> {
        let ip = pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()?;
        Some(Endpoint {
            ip,
            port: STATS_PORT,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodStatus, ServiceSpec};

    #[test]
    fn cluster_network_uses_cluster_ip_and_pod_ip() {
        let pod = PodRef::new("ns", "c-0");
        let mut svc = Service::default();
        assert!(ClusterNetwork.primary_endpoint(&pod, &svc).is_err());
        svc.spec = Some(ServiceSpec {
            cluster_ip: Some("10.96.0.12".into()),
            ..Default::default()
        });
        assert_eq!(
            ClusterNetwork
                .primary_endpoint(&pod, &svc)
                .unwrap()
                .to_string(),
            "10.96.0.12:53"
        );
        let p = Pod {
            status: Some(PodStatus {
                pod_ip: Some("10.244.1.7".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            ClusterNetwork.pod_dns_endpoint(&p).unwrap().to_string(),
            "10.244.1.7:5353"
        );
        assert_eq!(
            ClusterNetwork.pod_stats_endpoint(&p).unwrap().to_string(),
            "10.244.1.7:8053"
        );
        assert!(ClusterNetwork.pod_dns_endpoint(&Pod::default()).is_none());
    }
}
