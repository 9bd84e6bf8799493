//! Per-pod DNS, control and statistics ports on 127.0.0.1.
//!
//! Every local pod shares 127.0.0.1 (named only listens on configured
//! addresses, and adding loopback aliases needs root), so each pod gets its
//! own ports. A pod keeps its ports for the runtime's whole life,
//! across container restarts and pod re-creation, just as a cluster pod
//! keeps port 53: the primary's port is rendered into the secondaries'
//! config, so it must never move. Ports are handed out upwards from a base
//! port, skipping ports something else on the machine already holds.
//!
//! Touches no cluster; binds sockets only for the moment it takes to check
//! that a port is free.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::sync::Mutex;

/// The ports of one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodPorts {
    /// named's DNS port (UDP and TCP).
    pub dns: u16,
    /// named's rndc control channel (TCP).
    pub control: u16,
    /// named's statistics channel (HTTP), read by the operator's scraper.
    pub stats: u16,
}

/// Failed to find free ports.
#[derive(Debug, thiserror::Error)]
#[error("failed to allocate ports: no free ports left between {base} and 65535")]
pub struct PortsExhausted {
    pub base: u16,
}

/// Hands out stable per-pod ports keyed by `(namespace, pod name)`.
#[derive(Debug)]
pub struct PortAllocator {
    base: u16,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    next: u32,
    assigned: BTreeMap<(String, String), PodPorts>,
}

impl PortAllocator {
    pub fn new(base: u16) -> Self {
        PortAllocator {
            base,
            inner: Mutex::new(Inner {
                next: u32::from(base),
                assigned: BTreeMap::new(),
            }),
        }
    }

    /// The pod's ports, allocating them on first use.
    pub fn ports(&self, namespace: &str, pod: &str) -> Result<PodPorts, PortsExhausted> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let key = (namespace.to_string(), pod.to_string());
        if let Some(p) = inner.assigned.get(&key) {
            return Ok(*p);
        }
        while inner.next < u32::from(u16::MAX) {
            let dns = inner.next as u16;
            let control = dns + 1;
            let Some(stats) = control.checked_add(1) else {
                break;
            };
            inner.next += 3;
            if dns_port_free(dns) && tcp_port_free(control) && tcp_port_free(stats) {
                let p = PodPorts {
                    dns,
                    control,
                    stats,
                };
                inner.assigned.insert(key, p);
                return Ok(p);
            }
        }
        Err(PortsExhausted { base: self.base })
    }

    /// The pod's ports if allocated.
    pub fn get(&self, namespace: &str, pod: &str) -> Option<PodPorts> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner
            .assigned
            .get(&(namespace.to_string(), pod.to_string()))
            .copied()
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

fn tcp_port_free(port: u16) -> bool {
    TcpListener::bind(loopback(port)).is_ok()
}

fn dns_port_free(port: u16) -> bool {
    UdpSocket::bind(loopback(port)).is_ok() && tcp_port_free(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_stable_distinct_and_skip_busy_ports() {
        // Hold a port so the allocator must skip it.
        let held = UdpSocket::bind(loopback(0)).unwrap();
        let busy = held.local_addr().unwrap().port();
        let a = PortAllocator::new(busy);
        let p1 = a.ports("ns", "web-0").unwrap();
        assert_ne!(p1.dns, busy);
        assert_eq!(p1.control, p1.dns + 1);
        assert_eq!(p1.stats, p1.dns + 2);
        let p2 = a.ports("ns", "web-1").unwrap();
        assert!(p2.dns > p1.stats);
        assert_eq!(a.ports("ns", "web-0").unwrap(), p1);
        assert_eq!(a.get("other", "web-0"), None);
    }
}
