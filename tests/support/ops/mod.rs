//! Shared helpers of the `ops_*` tests: short lease timings, polling, a
//! plain HTTP/1.1 client for the health endpoints, and a strict parser of
//! the Prometheus text exposition format.

#![allow(dead_code)]

pub mod promtext;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bind_operator::operator::LeaseTiming;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The shortest timing a Lease can express (leaseDurationSeconds is whole
/// seconds), renewed often so a missed renewal does not end the test.
pub fn fast_timing() -> LeaseTiming {
    LeaseTiming {
        duration: Duration::from_secs(1),
        renew_deadline: Duration::from_millis(600),
        retry_period: Duration::from_millis(100),
    }
}

pub const NAMESPACE: &str = "bind-operator-system";
pub const LEASE: &str = "bind-operator-leader";

/// Upper bound for anything a test waits on, so a broken build fails fast
/// instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// Polls `cond` every 10ms until it holds; panics after `PATIENCE`.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Awaits `fut` for at most `PATIENCE`.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// One HTTP/1.1 request on a fresh connection, as a kubelet probe or a
/// Prometheus scrape makes it.
pub struct HttpResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

pub async fn request(
    addr: SocketAddr,
    method: Method,
    path: &str,
) -> std::io::Result<HttpResponse> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, addr.to_string())
        .body(Empty::<Bytes>::new())
        .expect("a valid request");
    let resp = sender
        .send_request(req)
        .await
        .map_err(std::io::Error::other)?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).expect("utf-8 body"),
    })
}

pub async fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    within(&format!("GET {path}"), request(addr, Method::GET, path))
        .await
        .unwrap_or_else(|e| panic!("GET {path} failed: {e}"))
}
