//! `bind-operator run`: the controller manager for a real API server.
//! Sets up logging, turns the flags and the environment into an
//! [`OperatorConfig`], builds the client (in-cluster service account, or
//! KUBECONFIG / ~/.kube/config) and hands the controllers, with the
//! pods/exec executor and the cluster network, to [`operator::serve`](fn@crate::operator::serve),
//! which owns leader election, `/healthz`, `/readyz`, `/metrics` and the
//! shutdown on SIGTERM/SIGINT.
//!
//! Touches the cluster. Parses no environment variable that
//! [`OperatorConfig::from_lookup`] also parses: a flag only stands in for
//! its variable.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tracing_subscriber::EnvFilter;

use crate::controller::{ClusterNetwork, KubeExecutor};
use crate::operator::config::{ENV_HEALTH_ADDR, ENV_LEADER_ELECTION, ENV_WATCH_NAMESPACES};
use crate::operator::{self, ConfigError, Metrics, OperatorConfig, ServeError};

/// How long the API server may take to answer its version at startup.
pub const API_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Flags of `bind-operator run`. Each overrides its environment variable
/// (see [`crate::operator::config`]); unset, the variable decides.
#[derive(Debug, Clone)]
pub struct Options {
    /// tracing EnvFilter directives; `RUST_LOG` wins when set.
    pub log_filter: String,
    pub log_json: bool,
    /// `--health-addr`, for `BIND_OPERATOR_HEALTH_ADDR`.
    pub health_addr: Option<SocketAddr>,
    /// `--leader-election`, for `BIND_OPERATOR_LEADER_ELECTION=true`.
    pub leader_election: bool,
    /// `--watch-namespaces`, for `BIND_OPERATOR_WATCH_NAMESPACES`.
    pub watch_namespaces: Option<String>,
}

impl Options {
    /// The operator's settings: `env` (the process environment in
    /// [`run_manager`]) with the flags that were given standing in for
    /// their variables.
    pub fn config(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<OperatorConfig, ConfigError> {
        OperatorConfig::from_lookup(|var| match var {
            ENV_HEALTH_ADDR if self.health_addr.is_some() => {
                self.health_addr.map(|a| a.to_string())
            }
            ENV_LEADER_ELECTION if self.leader_election => Some("true".into()),
            ENV_WATCH_NAMESPACES if self.watch_namespaces.is_some() => {
                self.watch_namespaces.clone()
            }
            _ => env(var),
        })
    }
}

/// Why the manager could not run.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("failed to parse the log filter {filter:?}: {message}")]
    LogFilter { filter: String, message: String },
    #[error("failed to start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("failed to configure the operator")]
    Config(#[from] ConfigError),
    /// No `#[source]`: kube's message already repeats its causes.
    #[error(
        "failed to find a Kubernetes API server: not running in a cluster and no usable kubeconfig (set KUBECONFIG or create ~/.kube/config): {detail}"
    )]
    NoCluster { detail: String },
    #[error("failed to build a Kubernetes client for {url}")]
    Client {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to reach the Kubernetes API server at {url} within {}s", API_CHECK_TIMEOUT.as_secs())]
    Unreachable { url: String },
    #[error("failed to reach the Kubernetes API server at {url}")]
    ApiServer {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Installs the global tracing subscriber.
pub fn init_logging(filter: &str, json: bool) -> Result<(), ManagerError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => env,
        _ => filter.to_string(),
    };
    let env_filter = EnvFilter::try_new(&filter).map_err(|e| ManagerError::LogFilter {
        filter: filter.clone(),
        message: e.to_string(),
    })?;
    let builder = tracing_subscriber::fmt().with_env_filter(env_filter);
    // A second init (tests) keeps the first subscriber.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    Ok(())
}

/// Runs the manager on a fresh multi-threaded runtime until a signal.
pub fn run_blocking(opts: Options) -> Result<(), ManagerError> {
    init_logging(&opts.log_filter, opts.log_json)?;
    let rt = tokio::runtime::Runtime::new().map_err(ManagerError::Runtime)?;
    rt.block_on(run_manager(opts))
}

/// The manager on the current runtime. Fails before binding anything when
/// the configuration is malformed or no API server can be found.
pub async fn run_manager(opts: Options) -> Result<(), ManagerError> {
    let config = opts.config(|var| std::env::var(var).ok())?;
    let client = connect().await?;
    tracing::info!(health = %config.health_addr, leader_election = config.leader_election.is_some(), namespaces = %config.scope, "starting");
    let scope = config.scope.clone();
    operator::serve(
        client.clone(),
        config,
        Metrics::new(),
        move |run| async move {
            crate::controller::run_scoped(
                client.clone(),
                Arc::new(KubeExecutor::new(client)),
                Arc::new(ClusterNetwork),
                run.metrics,
                run.readiness,
                scope,
                run.shutdown.cancelled_owned(),
            )
            .await;
            Ok::<(), std::convert::Infallible>(())
        },
    )
    .await?;
    Ok(())
}

/// What the operator calls itself in every request: the API server's audit
/// log and its `apiserver_request_total` metric tell it apart by this.
pub fn user_agent() -> String {
    format!("bind-operator/{}", env!("CARGO_PKG_VERSION"))
}

/// A client for `config` that sends [`user_agent`] with every request
/// (kube sends none of its own).
pub fn client_for(mut config: kube::Config) -> Result<Client, kube::Error> {
    let value = http::HeaderValue::from_str(&user_agent()).expect("a version is a header value");
    config.headers.push((http::header::USER_AGENT, value));
    Client::try_from(config)
}

/// The client of the in-cluster service account or the kubeconfig, once
/// the API server answered: a missing or unreachable cluster is reported
/// at once instead of as watches retrying forever.
async fn connect() -> Result<Client, ManagerError> {
    let kube_config = kube::Config::infer()
        .await
        .map_err(|e| ManagerError::NoCluster {
            detail: e.to_string(),
        })?;
    let url = kube_config.cluster_url.to_string();
    let client = client_for(kube_config).map_err(|source| ManagerError::Client {
        url: url.clone(),
        source,
    })?;
    match tokio::time::timeout(API_CHECK_TIMEOUT, client.apiserver_version()).await {
        Err(_) => Err(ManagerError::Unreachable { url }),
        Ok(Err(source)) => Err(ManagerError::ApiServer { url, source }),
        Ok(Ok(_)) => Ok(client),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn options(health: Option<&str>, leader: bool) -> Options {
        Options {
            log_filter: "info".into(),
            log_json: false,
            health_addr: health.map(|a| a.parse().unwrap()),
            leader_election: leader,
            watch_namespaces: None,
        }
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn flags_stand_in_for_their_variables() {
        let deployed = env(&[
            (ENV_LEADER_ELECTION, "false"),
            (ENV_HEALTH_ADDR, "0.0.0.0:8080"),
            ("POD_NAME", "op-0"),
            ("POD_NAMESPACE", "ops"),
        ]);
        let c = options(None, false).config(&deployed).unwrap();
        assert_eq!(c.health_addr, "0.0.0.0:8080".parse().unwrap());
        assert!(c.leader_election.is_none());

        let c = options(Some("127.0.0.1:9090"), true)
            .config(&deployed)
            .unwrap();
        assert_eq!(c.health_addr, "127.0.0.1:9090".parse().unwrap());
        assert_eq!(c.leader_election.unwrap().identity, "op-0");
    }

    #[test]
    fn watched_namespaces_from_the_flag_or_the_variable() {
        let deployed = env(&[(ENV_WATCH_NAMESPACES, "dns, edge")]);
        let c = options(None, false).config(&deployed).unwrap();
        assert_eq!(c.scope.namespaces(), ["dns", "edge"]);
        let mut flagged = options(None, false);
        flagged.watch_namespaces = Some("team-a".into());
        let c = flagged.config(&deployed).unwrap();
        assert_eq!(c.scope.namespaces(), ["team-a"]);
        assert!(
            options(None, false)
                .config(env(&[]))
                .unwrap()
                .scope
                .is_cluster_wide()
        );
        let e = options(None, false)
            .config(env(&[(ENV_WATCH_NAMESPACES, "dns,Edge")]))
            .unwrap_err();
        assert!(matches!(e, ConfigError::Scope(_)), "{e}");
    }

    #[test]
    fn leader_election_by_flag_still_needs_the_pod_identity() {
        let e = options(None, true).config(env(&[])).unwrap_err();
        assert!(matches!(e, ConfigError::Missing { .. }), "{e}");
        // A malformed variable is an error, not a fallback.
        let e = options(None, false)
            .config(env(&[(ENV_LEADER_ELECTION, "ture")]))
            .unwrap_err();
        assert!(matches!(e, ConfigError::InvalidBool { .. }), "{e}");
    }
}
