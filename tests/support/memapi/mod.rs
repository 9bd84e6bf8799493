//! Shared helpers for the memapi tests: a small custom resource (`Widget`)
//! standing in for our CRDs, and a started in-memory API with it registered.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use bind_operator::local::memapi::MemApi;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A namespaced custom resource with a status subresource.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "test.memapi.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
pub struct WidgetSpec {
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

pub fn widget(name: &str, size: i64) -> Widget {
    Widget::new(name, WidgetSpec { size, color: None })
}

/// A server with `Widget` registered, and a client for it.
pub fn setup() -> (MemApi, kube::Client) {
    let api = MemApi::new();
    api.register_custom::<Widget>();
    let client = api.client();
    (api, client)
}

/// Failure guard: a test step that should finish quickly.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `check` until it returns `Some`, up to the failure guard.
pub async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    within(what, async {
        loop {
            if let Some(v) = check() {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}
