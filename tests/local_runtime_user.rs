//! The pod's user, end to end with real named: the controllers and the
//! local runtime on one in-memory API, the runtime running as root so it
//! can do what kubelet does — start named as the pod's runAsUser (53 by
//! default) with its fsGroup, and run every exec'd command (rndc, nsupdate,
//! dig, named-checkconf, the zone-file scripts) as that user too. A cluster
//! that converges, serves its zone and records, and takes new records
//! proves nothing in the pod needs root. Also: a cluster that ran as root
//! on a persistent volume moves to uid 53 keeping its zone data.
//!
//! As a non-root user the runtime cannot switch users; these tests then say
//! so and skip.

use crate::support_local as support;

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use bind_operator::api::{BindCluster, BindTSIGKey, BindTSIGKeySpec, BindZone, DNSRecord};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Harness, NS, dig, named_under, wait_for};

const BIND_UID: u32 = 53;

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// (real uid, effective uid, real gid, supplementary groups) of a process.
fn ids(pid: u32) -> (u32, u32, u32, Vec<u32>) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect()
    };
    let uid = field("Uid:");
    let gid = field("Gid:");
    (uid[0], uid[1], gid[0], field("Groups:"))
}

struct Env {
    h: Harness,
    stop: tokio::sync::oneshot::Sender<()>,
    manager: tokio::task::JoinHandle<()>,
}

impl Env {
    async fn start() -> Env {
        let (h, stop, manager) = support::start_controllers(|_| {}).await;
        Env { h, stop, manager }
    }

    async fn create<K>(&self, value: serde_json::Value)
    where
        K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + serde::de::DeserializeOwned
            + serde::Serialize
            + Clone
            + std::fmt::Debug,
    {
        let obj: K = serde_json::from_value(value).unwrap();
        Api::<K>::namespaced(self.h.client.clone(), NS)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }

    /// A cluster `c` (2 pods, `extra` merged into its spec), zone
    /// example.com with ns1, and www A 192.0.2.10.
    async fn cluster_with_zone(&self, extra: serde_json::Value) {
        let key = BindTSIGKey::new("xfer", BindTSIGKeySpec::default());
        let mut key = serde_json::to_value(key).unwrap();
        key["metadata"]["namespace"] = json!(NS);
        self.create::<BindTSIGKey>(key).await;
        let mut spec = json!({"replicas": 2, "catalog": {"transferKeyRef": "xfer"}});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        self.create::<BindCluster>(json!({
            "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindCluster",
            "metadata": {"name": "c", "namespace": NS}, "spec": spec,
        }))
        .await;
        self.create::<BindZone>(json!({
            "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindZone",
            "metadata": {"name": "example-com", "namespace": NS},
            "spec": {"clusterRef": "c", "zoneName": "example.com",
                     "nameservers": ["ns1.example.com."], "updateKeyRef": "xfer",
                     "records": [{"name": "ns1", "type": "A", "values": ["192.0.2.53"]}]},
        }))
        .await;
        self.record("www", "192.0.2.10").await;
    }

    async fn record(&self, name: &str, ip: &str) {
        self.create::<DNSRecord>(json!({
            "apiVersion": "bind.unkin.net/v1alpha1", "kind": "DNSRecord",
            "metadata": {"name": format!("{name}-example-com"), "namespace": NS},
            "spec": {"zoneRef": "example-com", "name": name, "type": "A", "values": [ip]},
        }))
        .await;
    }

    /// Waits until both pods answer `name` with `ip`.
    async fn served_everywhere(&self, name: &str, ip: &str) {
        for pod in ["c-0", "c-1"] {
            let what = format!("{name} on {pod}");
            wait_for(&what, || async {
                let port = self.h.runtime.pod(NS, pod)?.dns.port();
                dig(port, &[name, "A", "+short"])
                    .await
                    .contains(ip)
                    .then_some(())
            })
            .await;
        }
    }

    /// The named of `pod`, once one runs as `uid`; its ids.
    async fn named_as(&self, pod: &str, uid: u32) -> (u32, u32, u32, Vec<u32>) {
        let dir = self.h.runtime.dirs(NS, pod).data;
        wait_for(&format!("named of {pod} as uid {uid}"), || async {
            let pids = named_under(&dir);
            let [pid] = pids.as_slice() else { return None };
            let ids = ids(*pid);
            (ids.0 == uid).then_some(ids)
        })
        .await
    }

    async fn finish(self) {
        support::stop_controllers(self.h, self.stop, self.manager).await;
    }
}

fn owner(path: &Path) -> (u32, u32, u32) {
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_converges_with_named_and_every_command_running_as_uid_53() {
    if !running_as_root() {
        println!("SKIP: the local runtime switches to the pod's user only when run as root");
        return;
    }
    let env = Env::start().await;
    env.cluster_with_zone(json!({})).await;
    env.served_everywhere("www.example.com", "192.0.2.10").await;
    // A record added later lands too (nsupdate as uid 53, named writing
    // its journal as uid 53).
    env.record("api", "192.0.2.20").await;
    env.served_everywhere("api.example.com", "192.0.2.20").await;

    for pod in ["c-0", "c-1"] {
        let (ruid, euid, gid, groups) = env.named_as(pod, BIND_UID).await;
        assert_eq!((ruid, euid, gid), (BIND_UID, BIND_UID, BIND_UID), "{pod}");
        assert_eq!(groups, [BIND_UID], "{pod}: the fsGroup only");
        let dirs = env.h.runtime.dirs(NS, pod);
        // The Secrets are 0440, given to the fsGroup: named read them.
        for secret in ["keys.conf", "rndc.key"] {
            let (uid, gid, mode) = owner(&dirs.config.join(secret));
            assert_eq!((uid, gid, mode), (0, BIND_UID, 0o440), "{pod} {secret}");
        }
        let log = std::fs::read_to_string(&dirs.log).unwrap();
        assert!(!log.contains("permission denied"), "{pod}: {log}");
        // rndc (as uid 53) reached named: it reconfigured on request.
        assert!(
            log.contains("received control channel command 'reconfig'"),
            "{pod}: {log}"
        );
    }
    // Files only exec'd commands write are the pod user's: the primary's
    // NOTIFY list (sh) and the zone file it seeded (sh, then named).
    let primary = env.h.runtime.dirs(NS, "c-0").data;
    assert_eq!(owner(&primary.join("notify-targets.conf")).0, BIND_UID);
    assert_eq!(owner(&primary.join("zones")).0, BIND_UID);
    let zone_files: Vec<_> = std::fs::read_dir(primary.join("zones"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(!zone_files.is_empty());
    for f in zone_files {
        assert_eq!(owner(&f).0, BIND_UID, "{}", f.display());
    }
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_cluster_on_a_persistent_volume_moves_to_uid_53_keeping_its_zone_data() {
    if !running_as_root() {
        println!("SKIP: the local runtime switches to the pod's user only when run as root");
        return;
    }
    let env = Env::start().await;
    // How clusters ran before: named as root, files root's.
    env.cluster_with_zone(json!({
        "storage": {"size": "1Gi"},
        "podSecurityContext": {"runAsNonRoot": false, "runAsUser": 0, "runAsGroup": 0, "fsGroup": 0},
        "securityContext": {"runAsNonRoot": false},
    }))
    .await;
    env.served_everywhere("www.example.com", "192.0.2.10").await;
    env.named_as("c-0", 0).await;
    let primary = env.h.runtime.dirs(NS, "c-0").data;
    let zone_file = std::fs::read_dir(primary.join("zones"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "db"))
        .expect("the primary has a zone file");
    let before = std::fs::metadata(&zone_file).unwrap();
    assert_eq!(before.uid(), 0);

    // The upgrade: the overrides go, the pods come back as uid 53.
    Api::<BindCluster>::namespaced(env.h.client.clone(), NS)
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"podSecurityContext": null, "securityContext": null}})),
        )
        .await
        .unwrap();
    for pod in ["c-0", "c-1"] {
        env.named_as(pod, BIND_UID).await;
    }
    env.served_everywhere("www.example.com", "192.0.2.10").await;
    // The same zone file, not a rebuilt one: the volume was handed to the
    // fsGroup (group-writable), as kubelet does for a pod with an fsGroup.
    let after = std::fs::metadata(&zone_file).unwrap();
    assert_eq!(after.ino(), before.ino(), "the zone file was re-created");
    assert_eq!(after.gid(), BIND_UID);
    assert_eq!(after.mode() & 0o060, 0o060);
    // And uid 53 can change it: a new record lands on both pods.
    env.record("api", "192.0.2.20").await;
    env.served_everywhere("api.example.com", "192.0.2.20").await;
    let log = std::fs::read_to_string(env.h.runtime.dirs(NS, "c-0").log).unwrap();
    assert!(!log.contains("permission denied"), "{log}");
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_named_refuses_its_config_is_named_in_the_cluster_status() {
    let env = Env::start().await;
    // A forward zone on the cluster's own catalog zone: the operator renders
    // it (a validation gap), named-checkconf is never asked before a pod
    // starts, and every secondary's named refuses the config at start (the
    // catalog zone is defined twice) — a crash loop, like BIND 9.20 with
    // `dnssec-validation yes` and no trust anchors.
    env.cluster_with_zone(json!({
        "forwardZones": [{"zone": "c.dns-test.catalog.invalid", "forwarders": ["127.0.0.1"]}],
    }))
    .await;
    let (message, restarts) = wait_for("Ready to name the failing pod", || async {
        let c: BindCluster = env.h.api.get(Some(NS), "c")?;
        let status = c.status?;
        let ready = bind_operator::api::find_condition(&status.conditions, "Ready")?;
        if ready.reason != "PodsFailing" {
            return None;
        }
        let rest = ready.message.split_once("pod c-1: restarted ")?.1;
        let restarts: u32 = rest.split(' ').next()?.parse().ok()?;
        (restarts >= 2).then(|| (ready.message.clone(), restarts))
    })
    .await;
    println!("Ready: {message}");
    // named's own error line, file:line and all, without its timestamp.
    assert!(
        message.contains(&format!(
            "pod c-1: restarted {restarts} times, exit code 1: "
        )) && message.contains(
            "named.conf:27: catalog zone 'c.dns-test.catalog.invalid' is not a primary or secondary zone"
        ),
        "{message}"
    );
    // The pod says the same in its last termination state (kubelet's
    // FallbackToLogsOnError), which is where the status read it.
    let pod: k8s_openapi::api::core::v1::Pod = env.h.api.get(Some(NS), "c-1").unwrap();
    let cs = &pod.status.unwrap().container_statuses.unwrap()[0];
    let terminated = cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(terminated.exit_code, 1);
    assert!(
        terminated
            .message
            .as_deref()
            .unwrap()
            .contains("exiting (due to fatal error)")
    );
    // The primary is unaffected and Ready.
    assert!(!message.contains("pod c-0"), "{message}");
    env.finish().await;
}
