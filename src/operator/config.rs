//! The settings of `bind-operator run` that come from the environment the
//! Deployment sets (deploy/kustomize/base/deployment.yaml and the Helm
//! chart), turned into an [`OperatorConfig`].
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `BIND_OPERATOR_LEADER_ELECTION` | `true`/`false` (also `1`/`0`, `yes`/`no`): elect one active replica through a Lease | `false` |
//! | `BIND_OPERATOR_HEALTH_ADDR` | listen address of `/healthz`, `/readyz` and `/metrics` | `0.0.0.0:8080` |
//! | `POD_NAME` | Lease holder identity (downward API); `HOSTNAME` when unset, which a pod sets to its name | required with leader election |
//! | `POD_NAMESPACE` | namespace of the Lease (downward API) | required with leader election |
//! | `BIND_OPERATOR_LEASE_NAME` | name of the Lease, to run two installations in one namespace | `bind-operator-leader` |
//! | `BIND_OPERATOR_WATCH_NAMESPACES` | comma-separated namespaces to watch (then Roles there suffice); empty: every namespace | every namespace |
//! | `RUST_LOG` | log filter; read by the logging setup (`operator::manager`, under `--log-level`), not here | `info` |
//!
//! Lease timing is not configurable: client-go's defaults (15s lease, 10s
//! renew deadline, 2s retry) suit an operator whose work is idempotent.
//!
//! Touches no cluster and reads the process environment only in
//! [`OperatorConfig::from_env`]; [`OperatorConfig::from_lookup`] is pure.
//! Must never fall back silently on a malformed value: a typo in a manifest
//! is an error at startup, not a different behaviour.

use std::net::SocketAddr;
use std::time::Duration;

use super::leader::LeaseTiming;
use crate::controller::scope::{Scope, ScopeError};

pub const ENV_LEADER_ELECTION: &str = "BIND_OPERATOR_LEADER_ELECTION";
pub const ENV_HEALTH_ADDR: &str = "BIND_OPERATOR_HEALTH_ADDR";
pub const ENV_LEASE_NAME: &str = "BIND_OPERATOR_LEASE_NAME";
pub const ENV_WATCH_NAMESPACES: &str = "BIND_OPERATOR_WATCH_NAMESPACES";
pub const ENV_POD_NAME: &str = "POD_NAME";
pub const ENV_POD_NAMESPACE: &str = "POD_NAMESPACE";
/// Fallback identity: Kubernetes sets a pod's hostname to its name.
pub const ENV_HOSTNAME: &str = "HOSTNAME";

pub const DEFAULT_HEALTH_ADDR: &str = "0.0.0.0:8080";
pub const DEFAULT_LEASE_NAME: &str = "bind-operator-leader";

/// How long the controllers get to finish in-flight reconciles after
/// SIGTERM before the Lease is released; inside the kubelet's default 30s
/// termination grace period.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Which Lease to compete for, as whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    pub namespace: String,
    pub lease_name: String,
    pub identity: String,
    pub timing: LeaseTiming,
}

/// Everything [`super::serve()`] needs besides the client and the controllers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorConfig {
    /// Where `/healthz`, `/readyz` and `/metrics` listen.
    pub health_addr: SocketAddr,
    /// `None`: this replica runs the controllers at once.
    pub leader_election: Option<LeaderElectionConfig>,
    /// How long the controllers may take to stop after a shutdown signal.
    pub shutdown_grace: Duration,
    /// The namespaces the controllers watch.
    pub scope: Scope,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("failed to parse {var}={value:?}: expected true or false")]
    InvalidBool { var: &'static str, value: String },
    #[error("failed to parse {var}={value:?} as a socket address (host:port)")]
    InvalidAddr {
        var: &'static str,
        value: String,
        #[source]
        source: std::net::AddrParseError,
    },
    #[error("failed to read {ENV_WATCH_NAMESPACES}")]
    Scope(#[source] ScopeError),
    #[error("failed to configure leader election: {var} is not set; {why}")]
    Missing {
        var: &'static str,
        why: &'static str,
    },
}

impl OperatorConfig {
    /// Reads the variables in the module table from the process
    /// environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// Like [`Self::from_env`] with `lookup` standing in for the
    /// environment. Empty values count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());

        let enabled = match get(ENV_LEADER_ELECTION) {
            None => false,
            Some(v) => parse_bool(&v).ok_or(ConfigError::InvalidBool {
                var: ENV_LEADER_ELECTION,
                value: v,
            })?,
        };
        let addr_text = get(ENV_HEALTH_ADDR).unwrap_or_else(|| DEFAULT_HEALTH_ADDR.to_owned());
        let health_addr = addr_text
            .trim()
            .parse()
            .map_err(|source| ConfigError::InvalidAddr {
                var: ENV_HEALTH_ADDR,
                value: addr_text.clone(),
                source,
            })?;

        let leader_election = if enabled {
            let identity = get(ENV_POD_NAME).or_else(|| get(ENV_HOSTNAME)).ok_or(
                ConfigError::Missing {
                    var: ENV_POD_NAME,
                    why: "each replica needs a unique holder identity (set it from metadata.name)",
                },
            )?;
            let namespace = get(ENV_POD_NAMESPACE).ok_or(ConfigError::Missing {
                var: ENV_POD_NAMESPACE,
                why: "the Lease lives in the operator's namespace (set it from metadata.namespace)",
            })?;
            Some(LeaderElectionConfig {
                namespace: namespace.trim().to_owned(),
                lease_name: get(ENV_LEASE_NAME)
                    .map(|n| n.trim().to_owned())
                    .unwrap_or_else(|| DEFAULT_LEASE_NAME.to_owned()),
                identity: identity.trim().to_owned(),
                timing: LeaseTiming::default(),
            })
        } else {
            None
        };

        let scope = Scope::parse(&get(ENV_WATCH_NAMESPACES).unwrap_or_default())
            .map_err(ConfigError::Scope)?;

        Ok(Self {
            health_addr,
            leader_election,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            scope,
        })
    }
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<OperatorConfig, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OperatorConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_without_environment() {
        let c = config(&[]).unwrap();
        assert_eq!(c.health_addr, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(c.leader_election, None);
        assert_eq!(c.shutdown_grace, DEFAULT_SHUTDOWN_GRACE);
    }

    #[test]
    fn the_shipped_deployment_environment() {
        let c = config(&[
            (ENV_LEADER_ELECTION, "true"),
            (ENV_HEALTH_ADDR, "0.0.0.0:8080"),
            (ENV_POD_NAME, "bind-operator-5d8f7-abcde"),
            (ENV_POD_NAMESPACE, "bind-operator-system"),
        ])
        .unwrap();
        let le = c.leader_election.unwrap();
        assert_eq!(le.identity, "bind-operator-5d8f7-abcde");
        assert_eq!(le.namespace, "bind-operator-system");
        assert_eq!(le.lease_name, DEFAULT_LEASE_NAME);
        assert_eq!(le.timing, LeaseTiming::default());
        le.timing.validate().unwrap();
    }

    #[test]
    fn helm_false_disables_and_ipv6_addresses_parse() {
        let c = config(&[
            (ENV_LEADER_ELECTION, "False"),
            (ENV_HEALTH_ADDR, "[::]:9090"),
        ])
        .unwrap();
        assert_eq!(c.leader_election, None);
        assert_eq!(c.health_addr.port(), 9090);
    }

    #[test]
    fn hostname_stands_in_for_pod_name_and_lease_name_overrides() {
        let c = config(&[
            (ENV_LEADER_ELECTION, "1"),
            (ENV_HOSTNAME, "op-0"),
            (ENV_POD_NAMESPACE, "ops"),
            (ENV_LEASE_NAME, "second-install"),
        ])
        .unwrap();
        let le = c.leader_election.unwrap();
        assert_eq!(
            (le.identity.as_str(), le.lease_name.as_str()),
            ("op-0", "second-install")
        );
    }

    #[test]
    fn malformed_values_are_errors() {
        let e = config(&[(ENV_LEADER_ELECTION, "ture")]).unwrap_err();
        assert!(matches!(e, ConfigError::InvalidBool { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("failed to parse BIND_OPERATOR_LEADER_ELECTION")
        );
        let e = config(&[(ENV_HEALTH_ADDR, ":8080")]).unwrap_err();
        assert!(matches!(e, ConfigError::InvalidAddr { .. }), "{e}");
        let e = config(&[(ENV_LEADER_ELECTION, "true"), (ENV_POD_NAME, "p")]).unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::Missing {
                    var: ENV_POD_NAMESPACE,
                    ..
                }
            ),
            "{e}"
        );
        let e = config(&[(ENV_LEADER_ELECTION, "true"), (ENV_POD_NAMESPACE, "ns")]).unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::Missing {
                    var: ENV_POD_NAME,
                    ..
                }
            ),
            "{e}"
        );
    }
}
