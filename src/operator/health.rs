//! The operator's HTTP endpoints for the kubelet and Prometheus:
//! `GET /healthz` (liveness), `GET /readyz` (readiness) and `GET /metrics`.
//!
//! # Contract
//! - `/healthz` answers 200 while the process serves HTTP at all: a live
//!   process whose controllers are stuck is the controllers' business, and
//!   restarting a standby that is merely waiting for the Lease would be
//!   wrong.
//! - `/readyz` answers 200 when the [`Readiness`] flag is set, 503 before.
//!   The wiring sets it once the controllers' caches have synced, or once a
//!   standby knows another replica leads (a standby that never turned ready
//!   would stall every rolling update).
//! - `/metrics` answers the [`Metrics`] registry in the Prometheus text
//!   format. `HEAD` is answered like `GET`; other methods get 405, other
//!   paths 404.
//! - Plain HTTP/1.1 on the configured address; connections are dropped when
//!   the server is shut down.
//!
//! Touches no cluster. Must never expose object contents or secrets: the
//! bodies are fixed strings and the metrics text.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::telemetry::Readiness;
use crate::telemetry::metrics::{self, Metrics};

/// Path of the liveness probe.
pub const HEALTHZ_PATH: &str = "/healthz";
/// Path of the readiness probe.
pub const READYZ_PATH: &str = "/readyz";
/// Path Prometheus scrapes.
pub const METRICS_PATH: &str = "/metrics";

/// A client that has not sent its request headers by then is dropped, so
/// idle or slow connections cannot pile up.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("failed to listen for health checks on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read the health server's listen address")]
    LocalAddr(#[source] std::io::Error),
}

/// What the handlers read.
#[derive(Clone, Debug)]
struct State {
    readiness: Readiness,
    metrics: Metrics,
}

/// A bound, not yet serving health server.
#[derive(Debug)]
pub struct HealthServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    state: State,
}

impl HealthServer {
    /// Binds `addr` (port 0 picks a free port; see [`Self::local_addr`]).
    pub async fn bind(
        addr: SocketAddr,
        readiness: Readiness,
        metrics: Metrics,
    ) -> Result<Self, HealthError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HealthError::Bind { addr, source })?;
        let local_addr = listener.local_addr().map_err(HealthError::LocalAddr)?;
        Ok(Self {
            listener,
            local_addr,
            state: State { readiness, metrics },
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `shutdown` is cancelled, then drops every connection.
    pub async fn serve(self, shutdown: CancellationToken) {
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => break,
                // Reap finished connections so the set does not grow.
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                accepted = self.listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Per-connection failures (reset before accept, fd
                    // exhaustion) must not stop the probes for good.
                    tracing::warn!(error = %e, "failed to accept a health check connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let state = self.state.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handle(&state, &req)) }
                });
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(e) = served {
                    tracing::debug!(error = %e, "health check connection ended with an error");
                }
            });
        }
        connections.abort_all();
    }
}

fn handle(state: &State, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if ![HEALTHZ_PATH, READYZ_PATH, METRICS_PATH].contains(&path) {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        resp.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    match path {
        HEALTHZ_PATH => text(StatusCode::OK, "ok\n"),
        READYZ_PATH if state.readiness.is_ready() => text(StatusCode::OK, "ok\n"),
        READYZ_PATH => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
        _ => {
            let mut resp = Response::new(Full::new(Bytes::from(state.metrics.encode())));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            resp
        }
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
