//! Key Secrets read once per version: the Secret metadata store (a watch
//! the operator keeps anyway) says each Secret's resourceVersion; a Secret
//! whose version this cache already holds is not read again. So a
//! converged cluster's periodic checks (two key reads per zone before)
//! make no API request; a changed Secret is read once, on its next use.
//!
//! Holds the Secrets it read (key material) in memory only, never in logs:
//! its `Debug` prints names and versions. Touches the cluster only by GETs
//! of Secrets its callers name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt as _};

type Key = (String, String);

/// The Secrets read, by namespace and name, with their resourceVersion.
#[derive(Default)]
pub struct SecretCache(Mutex<HashMap<Key, (String, Arc<Secret>)>>);

impl std::fmt::Debug for SecretCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let map = self.0.lock().expect("secret cache");
        f.debug_list()
            .entries(
                map.iter()
                    .map(|((ns, n), (rv, _))| format!("{ns}/{n}@{rv}")),
            )
            .finish()
    }
}

impl SecretCache {
    /// The Secret `ns/name`: from the cache when the metadata store shows
    /// the version held, else read (a GET; `None` when it does not exist).
    pub async fn get(
        &self,
        client: &Client,
        meta: &Store<PartialObjectMeta<Secret>>,
        ns: &str,
        name: &str,
    ) -> Result<Option<Arc<Secret>>, kube::Error> {
        let key = (ns.to_string(), name.to_string());
        let current = meta
            .get(&ObjectRef::new(name).within(ns))
            .and_then(|m| m.resource_version());
        if let Some(rv) = &current
            && let Some((held, s)) = self.0.lock().expect("secret cache").get(&key)
            && held == rv
        {
            return Ok(Some(s.clone()));
        }
        let read = Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(name)
            .await?
            .map(Arc::new);
        let mut map = self.0.lock().expect("secret cache");
        match &read {
            Some(s) => {
                map.insert(key, (s.resource_version().unwrap_or_default(), s.clone()));
            }
            None => {
                map.remove(&key);
            }
        }
        Ok(read)
    }
}
