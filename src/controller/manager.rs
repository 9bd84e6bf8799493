//! `bind-operator run`: the controller manager for a real API server.
//! Sets up logging, the client (in-cluster service account, or KUBECONFIG /
//! ~/.kube/config), optional health endpoints, and runs [`super::run`]
//! with the pods/exec executor and the cluster network until SIGINT or
//! SIGTERM.
//!
//! With leader election on, only the holder of a Lease runs controllers;
//! a leader that loses its Lease stops and the process exits with an error
//! (its pod restarts as a candidate).
//!
//! Touches the cluster.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use kube::Client;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

use super::leader::{Elector, LeaderError, Timing};
use super::{ClusterNetwork, KubeExecutor};

/// Flags of `bind-operator run`.
#[derive(Debug, Clone)]
pub struct Options {
    /// tracing EnvFilter directives; `RUST_LOG` wins when set.
    pub log_filter: String,
    pub log_json: bool,
    /// Where to answer `GET /healthz` and `/readyz`, if anywhere.
    pub health_addr: Option<SocketAddr>,
    /// Run controllers only while holding the leader Lease.
    pub leader_election: bool,
}

/// Why the manager could not run.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("failed to parse the log filter {filter:?}: {message}")]
    LogFilter { filter: String, message: String },
    #[error("failed to start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("failed to build a Kubernetes client (in-cluster config or KUBECONFIG)")]
    Client(#[source] kube::Error),
    #[error(transparent)]
    Leader(#[from] LeaderError),
    #[error("failed to listen on {addr} for health checks")]
    Health {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
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

/// The manager on the current runtime.
pub async fn run_manager(opts: Options) -> Result<(), ManagerError> {
    let client = Client::try_default().await.map_err(ManagerError::Client)?;
    if let Some(addr) = opts.health_addr {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ManagerError::Health { addr, source })?;
        tokio::spawn(serve_health(listener));
    }
    let stop = shutdown_signal().boxed().shared();
    let controllers = |shutdown: BoxFuture<'static, ()>| {
        super::run(
            client.clone(),
            Arc::new(KubeExecutor::new(client.clone())),
            Arc::new(ClusterNetwork),
            shutdown,
        )
    };
    if !opts.leader_election {
        tracing::info!("starting controllers");
        controllers(stop.boxed()).await;
        return Ok(());
    }
    let elector = Elector::new(
        client.clone(),
        &own_namespace(),
        &own_identity(),
        Timing::default(),
    );
    tokio::select! {
        () = elector.acquire() => {},
        () = stop.clone() => return Ok(()),
    }
    tracing::info!("starting controllers");
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel();
    let keeper = {
        let elector = elector.clone();
        tokio::spawn(async move {
            let _ = lost_tx.send(elector.keep().await);
        })
    };
    let lost = Arc::new(std::sync::Mutex::new(None));
    let lost_slot = lost.clone();
    let until = async move {
        tokio::select! {
            () = stop => {},
            r = lost_rx => {
                if let Ok(e) = r {
                    tracing::error!(error = %e, "lost leadership; stopping");
                    *lost_slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
            }
        }
    };
    controllers(until.boxed()).await;
    keeper.abort();
    let lost = lost.lock().unwrap_or_else(|p| p.into_inner()).take();
    match lost {
        Some(e) => Err(e.into()),
        None => {
            elector.release().await;
            Ok(())
        }
    }
}

/// The candidate's identity: the pod name (downward API), else the host
/// name.
fn own_identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "bind-operator".into())
}

/// Where the Lease lives: the operator's own namespace.
fn own_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "default".into())
}

/// Resolves on SIGINT or SIGTERM (what Kubernetes sends on pod stop).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown requested");
}

/// Answers `GET /healthz` and `GET /readyz` with 200 (the process is up
/// and its runtime schedules tasks), anything else with 404. Deliberately
/// tiny: a probe target, not a web server.
pub async fn serve_health(listener: TcpListener) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n = sock.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let path = head.split_whitespace().nth(1).unwrap_or_default();
            let response: &[u8] = if head.starts_with("GET ")
                && matches!(path, "/healthz" | "/readyz")
            {
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n"
            } else {
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            };
            let _ = sock.write_all(response).await;
            let _ = sock.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn health_endpoint_answers() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve_health(listener));
        for (path, want) in [("/healthz", "200 OK"), ("/readyz", "200 OK"), ("/x", "404")] {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            assert!(out.contains(want), "{path}: {out}");
        }
    }
}
