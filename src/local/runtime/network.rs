//! The local side of the networking seam (DESIGN.md "Local mode"): every
//! pod is on 127.0.0.1 with its own DNS port, so a pod's DNS endpoint is
//! `127.0.0.1:<its port>` and the primary a cluster's secondaries transfer
//! from (and that NOTIFYs them) is `127.0.0.1:<pod 0's port>`, where a
//! cluster would use the primary Service's ClusterIP:53 and pod IPs.
//!
//! Ports are allocated on first ask and never move, so the primary's
//! endpoint can be rendered into config before the primary pod exists and
//! stays valid across its restarts. Implements the controllers'
//! [`Network`]. No cluster access.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};

use super::statefulset::pod_name;
use super::{PortsExhausted, Shared};
use crate::bind::Endpoint;
use crate::controller::exec::PodRef;
use crate::controller::network::{Network, NetworkError};

/// Where local pods are reached. Cheap to clone.
#[derive(Clone)]
pub struct LocalNetwork {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalNetwork").finish_non_exhaustive()
    }
}

fn loopback(port: u16) -> Endpoint {
    Endpoint {
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port,
    }
}

impl LocalNetwork {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        LocalNetwork { shared }
    }

    /// Where `pod` answers DNS.
    pub fn pod_endpoint(&self, namespace: &str, pod: &str) -> Result<Endpoint, PortsExhausted> {
        Ok(loopback(self.shared.ports.ports(namespace, pod)?.dns))
    }

    /// Where the secondaries of StatefulSet `statefulset` reach its primary
    /// (ordinal 0).
    pub fn statefulset_primary(
        &self,
        namespace: &str,
        statefulset: &str,
    ) -> Result<Endpoint, PortsExhausted> {
        self.pod_endpoint(namespace, &pod_name(statefulset, 0))
    }
}

impl Network for LocalNetwork {
    /// `127.0.0.1:<primary pod's DNS port>`; the Service is not consulted.
    fn primary_endpoint(
        &self,
        primary_pod: &PodRef,
        _primary_service: &Service,
    ) -> Result<Endpoint, NetworkError> {
        self.pod_endpoint(&primary_pod.namespace, &primary_pod.name)
            .map_err(|e| NetworkError::PrimaryUnknown(e.to_string()))
    }

    /// `127.0.0.1:<the pod's DNS port>`.
    fn pod_dns_endpoint(&self, pod: &Pod) -> Option<Endpoint> {
        let ns = pod.metadata.namespace.as_deref()?;
        let name = pod.metadata.name.as_deref()?;
        self.pod_endpoint(ns, name).ok()
    }

    /// `127.0.0.1:<the pod's statistics port>`.
    fn pod_stats_endpoint(&self, pod: &Pod) -> Option<Endpoint> {
        let ns = pod.metadata.namespace.as_deref()?;
        let name = pod.metadata.name.as_deref()?;
        Some(loopback(self.shared.ports.ports(ns, name).ok()?.stats))
    }
}
