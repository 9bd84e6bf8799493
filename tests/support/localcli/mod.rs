//! Shared helpers for the local-mode CLI tests: manifest directories in temp
//! dirs, an in-memory API with our kinds registered, and small manifests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use bind_operator::local::memapi::MemApi;
use bind_operator::local::session::register_kinds;

/// Writes `text` to `dir/rel`, creating parent directories.
pub fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The repository's examples/ directory.
pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// An in-memory API serving our four kinds, and a client for it.
pub fn setup() -> (MemApi, kube::Client) {
    let api = MemApi::new();
    register_kinds(&api);
    let client = api.client();
    (api, client)
}

/// A valid DNSRecord manifest.
pub fn record(name: &str, zone: &str, owner: &str, ip: &str) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: {name}\nspec:\n  zoneRef: {zone}\n  name: {owner}\n  type: A\n  values:\n    - {ip}\n"
    )
}

/// A valid BindZone manifest.
pub fn zone(name: &str, zone_name: &str) -> String {
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata:\n  name: {name}\nspec:\n  clusterRef: example\n  zoneName: {zone_name}\n  nameservers:\n    - ns1.{zone_name}.\n"
    )
}
