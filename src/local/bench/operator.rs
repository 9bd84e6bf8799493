//! The operator's side of a bench process: the controllers run on a Tokio
//! runtime of their own (its threads tagged [`Side::Operator`] for
//! [`super::alloc`]), and talk to the in-memory API through
//! [`OperatorService`], which runs every request on the API's runtime (so
//! the objects the API stores are the API's memory, not the operator's)
//! and logs every write the operator sends ([`WriteLog`]). The bench's own
//! creates go through a separate client and are never in that log, so
//! "API writes by the operator" needs no subtraction.
//!
//! No cluster access beyond the in-memory API handed in; the log keeps
//! verb, resource and object name only, never bodies (Secrets).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use http::{Method, Request, Response};
use serde::Serialize;

use super::BenchError;
use super::alloc::{Side, set_thread_side};
use crate::local::memapi::{MemService, ResponseBody};

/// Worker threads of the operator's runtime (the machine has two cores).
const OPERATOR_THREADS: usize = 2;

/// One write request the operator sent.
#[derive(Debug, Clone, Serialize)]
pub struct WriteCall {
    #[serde(skip)]
    pub at: Instant,
    /// create, update, patch or delete.
    pub verb: &'static str,
    /// The resource's plural, with `/status` for the status subresource.
    pub resource: String,
    pub name: String,
}

impl WriteCall {
    /// `patch dnsrecords/status`.
    pub fn kind(&self) -> String {
        format!("{} {}", self.verb, self.resource)
    }
}

/// Every write the operator sent, in order. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct WriteLog {
    calls: Arc<Mutex<Vec<WriteCall>>>,
}

impl WriteLog {
    fn push(&self, call: WriteCall) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }

    /// Writes sent so far.
    pub fn count(&self) -> u64 {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    /// The writes sent in `[from, to]`.
    pub fn window(&self, from: Instant, to: Instant) -> Vec<WriteCall> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|c| c.at >= from && c.at <= to)
            .cloned()
            .collect()
    }

    /// The writes sent in `[from, to]` by verb and resource.
    pub fn by_kind(&self, from: Instant, to: Instant) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for c in self.window(from, to) {
            *out.entry(c.kind()).or_default() += 1;
        }
        out
    }
}

/// The verb of a write request, or None for a read (get, list, watch).
fn write_verb(method: &Method) -> Option<&'static str> {
    match *method {
        Method::POST => Some("create"),
        Method::PUT => Some("update"),
        Method::PATCH => Some("patch"),
        Method::DELETE => Some("delete"),
        _ => None,
    }
}

/// `(resource[/subresource], name)` of an API path:
/// `/apis/g/v/namespaces/ns/dnsrecords/x/status` -> (`dnsrecords/status`, `x`).
pub fn resource_of(path: &str) -> (String, String) {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // Past the group and version: /api/v1/... or /apis/group/version/...
    let rest = match segs.first() {
        Some(&"api") => segs.get(2..),
        Some(&"apis") => segs.get(3..),
        _ => None,
    }
    .unwrap_or(&[]);
    let rest = match rest {
        ["namespaces", _, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    match rest {
        [] => (String::new(), String::new()),
        [plural] => ((*plural).to_string(), String::new()),
        [plural, name] => ((*plural).to_string(), (*name).to_string()),
        [plural, name, sub, ..] => (format!("{plural}/{sub}"), (*name).to_string()),
    }
}

/// The controllers' connection to the in-memory API: runs each request on
/// the API's runtime and logs the writes.
#[derive(Clone)]
pub struct OperatorService {
    inner: MemService,
    api: tokio::runtime::Handle,
    writes: WriteLog,
}

impl tower::Service<Request<kube::client::Body>> for OperatorService {
    type Response = Response<ResponseBody>;
    type Error = tokio::task::JoinError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        if let Some(verb) = write_verb(req.method()) {
            let (resource, name) = resource_of(req.uri().path());
            self.writes.push(WriteCall {
                at: Instant::now(),
                verb,
                resource,
                name,
            });
        }
        let mut inner = self.inner.clone();
        let task = self
            .api
            .spawn(async move { tower::Service::call(&mut inner, req).await });
        async move {
            match task.await? {
                Ok(r) => Ok(r),
                Err(never) => match never {},
            }
        }
        .boxed()
    }
}

/// The controllers' runtime and client.
pub struct OperatorSide {
    runtime: Option<tokio::runtime::Runtime>,
    pub client: kube::Client,
    pub writes: WriteLog,
}

impl OperatorSide {
    /// A runtime for the controllers and their client to `api`; must be
    /// called on the API's runtime.
    pub fn start(api: MemService) -> Result<Self, BenchError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(OPERATOR_THREADS)
            .thread_name("bench-operator")
            .on_thread_start(|| set_thread_side(Side::Operator))
            .enable_all()
            .build()
            .map_err(BenchError::Tokio)?;
        let writes = WriteLog::default();
        let service = OperatorService {
            inner: api,
            api: tokio::runtime::Handle::current(),
            writes: writes.clone(),
        };
        // The client spawns its request buffer on the current runtime:
        // make that the operator's.
        let client = {
            let _enter = runtime.enter();
            kube::Client::new(service, "default")
        };
        Ok(OperatorSide {
            runtime: Some(runtime),
            client,
            writes,
        })
    }

    /// Runs `fut` on the operator's runtime.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime
            .as_ref()
            .expect("the runtime runs until dropped")
            .spawn(fut)
    }
}

impl OperatorSide {
    /// Stops the controllers' runtime and waits until its threads have
    /// dropped every task, and with them the controllers' caches. (A
    /// background shutdown freed a 100,000-record scenario's caches while
    /// the next scenario was being measured.)
    pub async fn stop(mut self) {
        if let Some(rt) = self.runtime.take() {
            let _ = tokio::task::spawn_blocking(move || rt.shutdown_timeout(STOP_WAIT)).await;
        }
    }
}

/// Longest [`OperatorSide::stop`] waits for the controllers' tasks.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Drop for OperatorSide {
    fn drop(&mut self) {
        // Dropped from async code: a blocking runtime drop would panic.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_resource_and_object() {
        let p = |s: &str| resource_of(s);
        assert_eq!(
            p("/apis/bind.example.com/v1alpha1/namespaces/bench/dnsrecords/rec-1/status"),
            ("dnsrecords/status".into(), "rec-1".into())
        );
        assert_eq!(
            p("/apis/bind.example.com/v1alpha1/namespaces/bench/dnsrecords/rec-1"),
            ("dnsrecords".into(), "rec-1".into())
        );
        assert_eq!(
            p("/api/v1/namespaces/bench/configmaps"),
            ("configmaps".into(), String::new())
        );
        assert_eq!(
            p("/api/v1/namespaces/bench"),
            ("namespaces".into(), "bench".into())
        );
        assert_eq!(write_verb(&Method::GET), None);
        assert_eq!(write_verb(&Method::PATCH), Some("patch"));
    }
}
