//! The tower `Service` a `kube::Client` is built on: reads the request,
//! routes it, counts it, applies injected faults, runs the verb against the
//! state under its lock, and answers with JSON (or a streaming body of JSON
//! lines for a watch). Never performs network I/O.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::{Value, json};

use super::Shared;
use super::faults::{RequestKey, Verb};
use super::ops::PatchKind;
use super::path::{Query, Route, Target, route};
use super::status::ApiError;
use super::watch::WatchStart;

/// Response body: a buffered JSON document or a watch stream.
pub type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// A watch without `timeoutSeconds` ends after this long, like the real
/// server's default window; clients then re-watch from their last version.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// The in-process "HTTP server". Cheap to clone; all clones share state.
#[derive(Clone)]
pub struct MemService {
    pub(crate) shared: Arc<Shared>,
}

impl tower::Service<Request<kube::client::Body>> for MemService {
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let body = match body.collect().await {
                Ok(c) => c.to_bytes(),
                Err(e) => {
                    let err = ApiError::bad_request(format!("failed to read request body: {e}"));
                    return Ok(error_response(&err));
                }
            };
            Ok(handle(&shared, &parts, &body).unwrap_or_else(|e| error_response(&e)))
        })
    }
}

fn header_str(parts: &http::request::Parts, name: header::HeaderName) -> &str {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn handle(
    shared: &Arc<Shared>,
    parts: &http::request::Parts,
    body: &[u8],
) -> Result<Response<ResponseBody>, ApiError> {
    let accept = header_str(parts, header::ACCEPT);
    let mut state = shared.lock();
    let target = match route(parts.uri.path(), &state.registry)? {
        Route::Version => {
            return Ok(json_response(
                200,
                &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-memapi", "platform": "memory"}),
            ));
        }
        Route::CoreGroup if accept.contains("apidiscovery.k8s.io") => {
            return Ok(json_response(200, &state.registry.aggregated(true)));
        }
        Route::Groups if accept.contains("apidiscovery.k8s.io") => {
            return Ok(json_response(200, &state.registry.aggregated(false)));
        }
        Route::CoreGroup => return Ok(json_response(200, &state.registry.core_versions())),
        Route::Groups => return Ok(json_response(200, &state.registry.group_list())),
        Route::GroupVersion(g, v) => {
            let list = state
                .registry
                .resource_list(&g, &v)
                .ok_or_else(ApiError::path_not_found)?;
            return Ok(json_response(200, &list));
        }
        Route::Resource(t) => t,
    };
    let q = Query::parse(parts.uri.query())?;
    let verb = verb_of(&parts.method, &target, &q)?;
    // Identity only: bodies may hold secret material and are never logged.
    tracing::trace!(
        %verb,
        resource = %target.info.plural,
        namespace = target.namespace.as_deref().unwrap_or_default(),
        name = target.name.as_deref().unwrap_or_default(),
        status = target.status,
        "memapi request"
    );
    state.hooks.on_request(&RequestKey {
        verb,
        resource: &target.info.plural,
        name: target.name.as_deref(),
        status: target.status,
    })?;
    let meta_only = accept.contains("as=PartialObjectMetadata");
    let out = |v: Arc<Value>| {
        if meta_only {
            Arc::new(super::watch::partial_metadata(&v))
        } else {
            v
        }
    };
    let parse_body = || -> Result<Value, ApiError> {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("failed to decode request body: {e}")))
    };
    let (code, reply): (u16, Arc<Value>) = match verb {
        Verb::Get => (200, out(state.get_object(&target)?)),
        Verb::List => (200, Arc::new(state.list_objects(&target, &q, meta_only)?)),
        Verb::Watch => {
            let start = state.start_watch(&target, &q, meta_only)?;
            drop(state);
            let timeout = q
                .timeout_seconds
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_WATCH_TIMEOUT);
            return Ok(watch_response(shared.clone(), start, timeout));
        }
        Verb::Create => (201, out(state.create(&target, parse_body()?, q.dry_run)?)),
        Verb::Update => (200, out(state.replace(&target, parse_body()?, q.dry_run)?)),
        Verb::Patch => {
            let kind = PatchKind::from_content_type(header_str(parts, header::CONTENT_TYPE))?;
            let (code, obj) = state.patch(&target, kind, body, &q)?;
            (code, out(obj))
        }
        Verb::Delete => {
            let opts = if body.is_empty() {
                json!({})
            } else {
                parse_body()?
            };
            let dry_run = q.dry_run
                || opts
                    .get("dryRun")
                    .is_some_and(|d| d.as_array().is_some_and(|a| !a.is_empty()));
            (200, Arc::new(state.delete(&target, &opts, dry_run)?))
        }
        Verb::DeleteCollection => {
            return Err(ApiError::method_not_allowed(
                "deletecollection is not supported",
            ));
        }
    };
    // Serialised after the lock is released: the stored objects are shared
    // (`Arc`), so other requests need not wait for this one's JSON.
    drop(state);
    Ok(json_response(code, &reply))
}

fn verb_of(method: &Method, t: &Target, q: &Query) -> Result<Verb, ApiError> {
    let named = t.name.is_some();
    Ok(match (method, named) {
        (&Method::GET, true) => Verb::Get,
        (&Method::GET, false) if q.watch => Verb::Watch,
        (&Method::GET, false) => Verb::List,
        (&Method::POST, false) => Verb::Create,
        (&Method::PUT, true) => Verb::Update,
        (&Method::PATCH, true) => Verb::Patch,
        (&Method::DELETE, true) => Verb::Delete,
        (&Method::DELETE, false) => Verb::DeleteCollection,
        (m, _) => {
            return Err(ApiError::method_not_allowed(format!(
                "method {m} is not allowed here"
            )));
        }
    })
}

fn json_response(code: u16, v: &Value) -> Response<ResponseBody> {
    let bytes = serde_json::to_vec(v).expect("json values always serialise");
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(bytes)).boxed_unsync())
        .expect("static response parts are valid")
}

fn error_response(e: &ApiError) -> Response<ResponseBody> {
    json_response(e.code, &e.to_status())
}

/// Streams the watcher's queued lines until the client goes away, the
/// watcher is closed, or the timeout passes; queues BOOKMARKs when asked.
fn watch_response(
    shared: Arc<Shared>,
    start: WatchStart,
    timeout: Duration,
) -> Response<ResponseBody> {
    let WatchStart {
        id,
        mut rx,
        bookmarks,
    } = start;
    let period = shared.bookmark_interval;
    let stream = async_stream::stream! {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            tokio::select! {
                line = rx.recv() => match line {
                    Some(b) => yield Ok::<_, Infallible>(Frame::data(b)),
                    None => break,
                },
                _ = ticks.tick(), if bookmarks => {
                    if !shared.lock().bookmark(id) {
                        // Watcher gone (closed); drain what is queued, then end.
                        while let Ok(b) = rx.try_recv() {
                            yield Ok(Frame::data(b));
                        }
                        break;
                    }
                }
                _ = &mut deadline => break,
            }
        }
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(StreamBody::new(stream).boxed_unsync())
        .expect("static response parts are valid")
}
