//! Zones owned by the platform, records by the teams, end to end with real
//! named: the controllers and the local runtime on one in-memory API, a
//! BindZone in `platform` whose `spec.recordsFrom` grants namespaces
//! selected by label `*.team-a` (A/AAAA/CNAME), and DNSRecords from the
//! team namespaces naming it. What a user sees: granted records answer on
//! the primary and the secondary; refused ones say `NotAllowed` in their
//! own status and answer nowhere; a withdrawn grant (or a namespace label
//! removed) takes the records off both servers, and granting again serves
//! them; two teams claiming one name follow the conflict rules.

use crate::support_local as support;

use bind_operator::api::{BindCluster, BindTSIGKey, BindZone, DNSRecord, Phase};
use bind_operator::local::memapi::{Fault, Verb};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Harness, dig, wait_for};

const PLATFORM: &str = "platform";
const PODS: [&str; 2] = ["c-0", "c-1"];

struct Env {
    h: Harness,
    stop: tokio::sync::oneshot::Sender<()>,
    manager: tokio::task::JoinHandle<()>,
}

/// The team-a grant: namespaces labelled `team: a` may publish A, AAAA and
/// CNAME below `team-a`.
fn team_a_grant() -> serde_json::Value {
    json!({"from": "Selector", "selector": {"matchLabels": {"team": "a"}},
           "names": ["*.team-a"], "types": ["A", "AAAA", "CNAME"]})
}

/// Every namespace may publish `shared` and `pair` (the conflict cases).
fn shared_grant() -> serde_json::Value {
    json!({"from": "All", "names": ["shared", "pair"]})
}

impl Env {
    /// Namespaces platform, team-a (`team: a`) and team-b (`team: b`); in
    /// platform a 2-pod cluster and zone example.com granting `grants`,
    /// with platform's own www A 192.0.2.80.
    async fn start(grants: serde_json::Value) -> Env {
        Env::start_refusing_namespace_lists(grants, 0).await
    }

    /// [`Env::start`] with the first `refusals` lists of Namespaces
    /// answered 403, as RBAC without the Namespace ClusterRole does.
    async fn start_refusing_namespace_lists(grants: serde_json::Value, refusals: usize) -> Env {
        let (h, stop, manager) = support::start_controllers(|_| {}).await;
        if refusals > 0 {
            h.api.fail_next(
                Fault::new(Verb::List, "namespaces")
                    .times(refusals)
                    .status(403, "Forbidden")
                    .message("namespaces is forbidden"),
            );
        }
        let env = Env { h, stop, manager };
        let namespaces: Api<Namespace> = Api::all(env.h.client.clone());
        for (ns, labels) in [
            (PLATFORM, json!({})),
            ("team-a", json!({"team": "a"})),
            ("team-b", json!({"team": "b"})),
        ] {
            let n: Namespace = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": labels}
            }))
            .unwrap();
            namespaces.create(&PostParams::default(), &n).await.unwrap();
        }
        env.create::<BindTSIGKey>(
            PLATFORM,
            json!({
                "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindTSIGKey",
                "metadata": {"name": "xfer"}, "spec": {}
            }),
        )
        .await;
        env.create::<BindCluster>(
            PLATFORM,
            json!({
                "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindCluster",
                "metadata": {"name": "c"},
                "spec": {"replicas": 2, "catalog": {"transferKeyRef": "xfer"}}
            }),
        )
        .await;
        env.create::<BindZone>(
            PLATFORM,
            json!({
                "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindZone",
                "metadata": {"name": "example-com"},
                "spec": {"clusterRef": "c", "zoneName": "example.com",
                         "nameservers": ["ns1.example.com."], "updateKeyRef": "xfer",
                         "records": [{"name": "ns1", "type": "A", "values": ["192.0.2.53"]}],
                         "recordsFrom": grants}
            }),
        )
        .await;
        env.record(PLATFORM, "www", "www", "192.0.2.80").await;
        env
    }

    async fn create<K>(&self, ns: &str, value: serde_json::Value)
    where
        K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + serde::de::DeserializeOwned
            + serde::Serialize
            + Clone
            + std::fmt::Debug,
    {
        let obj: K = serde_json::from_value(value).unwrap();
        Api::<K>::namespaced(self.h.client.clone(), ns)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }

    /// DNSRecord `object` in `ns`: `owner` A `ip` in platform's example-com.
    async fn record(&self, ns: &str, object: &str, owner: &str, ip: &str) {
        self.create::<DNSRecord>(
            ns,
            json!({
                "apiVersion": "bind.unkin.net/v1alpha1", "kind": "DNSRecord",
                "metadata": {"name": object},
                "spec": {"zoneRef": "example-com", "zoneNamespace": PLATFORM,
                         "name": owner, "type": "A", "values": [ip]}
            }),
        )
        .await;
    }

    /// What `pod` answers for `name` A.
    async fn answer(&self, pod: &str, name: &str) -> Option<String> {
        let port = self.h.runtime.pod(PLATFORM, pod)?.dns.port();
        Some(dig(port, &[name, "A"]).await)
    }

    /// Waits until both pods answer `name` A with exactly `want` ("" for
    /// nothing), checked against a served SOA so "nothing" is an answer.
    async fn both_answer(&self, name: &str, want: &str) {
        for pod in PODS {
            wait_for(&format!("{name} A = {want:?} on {pod}"), || async {
                let port = self.h.runtime.pod(PLATFORM, pod)?.dns.port();
                // The zone is there (an empty answer means no such RRset).
                if dig(port, &["example.com", "SOA"]).await.is_empty() {
                    return None;
                }
                (self.answer(pod, name).await? == want).then_some(())
            })
            .await;
        }
    }

    /// Waits until DNSRecord `ns/object` has status phase and reason (a
    /// Ready status carries none: `Served`); returns its message.
    async fn status(&self, ns: &str, object: &str, phase: Phase, reason: &str) -> String {
        let api: Api<DNSRecord> = Api::namespaced(self.h.client.clone(), ns);
        wait_for(&format!("{ns}/{object} {phase:?} {reason}"), || async {
            let s = api.get(object).await.ok()?.status?;
            let got = s.reason.as_deref().unwrap_or("Served");
            (s.phase == Some(phase) && got == reason).then(|| s.message.unwrap_or_default())
        })
        .await
    }

    async fn set_grants(&self, grants: serde_json::Value) {
        Api::<BindZone>::namespaced(self.h.client.clone(), PLATFORM)
            .patch(
                "example-com",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"recordsFrom": grants}})),
            )
            .await
            .unwrap();
    }

    async fn label_team_a(&self, labels: serde_json::Value) {
        Api::<Namespace>::all(self.h.client.clone())
            .patch(
                "team-a",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await
            .unwrap();
    }

    async fn finish(self) {
        support::stop_controllers(self.h, self.stop, self.manager).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teams_publish_what_the_zone_grants_and_lose_it_when_the_grant_goes() {
    let env = Env::start(json!([team_a_grant(), shared_grant()])).await;
    env.record("team-a", "api", "api.team-a", "192.0.2.1").await;
    env.record("team-a", "steal", "www.team-b", "192.0.2.66")
        .await;
    env.record("team-b", "www", "www", "192.0.2.99").await;

    // Granted: served by the primary and the secondary.
    env.both_answer("api.team-a.example.com", "192.0.2.1").await;
    env.status("team-a", "api", Phase::Ready, "Served").await;
    // team-b may not take platform's www; team-a may not publish under team-b.
    let m = env
        .status("team-b", "www", Phase::Error, "NotAllowed")
        .await;
    assert!(
        m.contains("platform/example-com") && m.contains("team-b"),
        "{m}"
    );
    let m = env
        .status("team-a", "steal", Phase::Error, "NotAllowed")
        .await;
    assert!(m.contains("*.team-a"), "{m}");
    env.both_answer("www.example.com", "192.0.2.80").await;
    env.both_answer("www.team-b.example.com", "").await;

    // The grant withdrawn: gone from both servers, and the record says why.
    env.set_grants(json!([shared_grant()])).await;
    env.both_answer("api.team-a.example.com", "").await;
    let m = env
        .status("team-a", "api", Phase::Error, "NotAllowed")
        .await;
    assert!(m.contains("team-a"), "{m}");
    // Granted again: served again.
    env.set_grants(json!([team_a_grant(), shared_grant()]))
        .await;
    env.both_answer("api.team-a.example.com", "192.0.2.1").await;
    env.status("team-a", "api", Phase::Ready, "Served").await;

    // The namespace's label no longer matches the selector: the same.
    env.label_team_a(json!({"team": null})).await;
    env.both_answer("api.team-a.example.com", "").await;
    env.status("team-a", "api", Phase::Error, "NotAllowed")
        .await;
    env.label_team_a(json!({"team": "a"})).await;
    env.both_answer("api.team-a.example.com", "192.0.2.1").await;
    env.status("team-a", "api", Phase::Ready, "Served").await;
    // Platform's www was never touched.
    env.both_answer("www.example.com", "192.0.2.80").await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_teams_claiming_one_name_follow_the_conflict_rules() {
    let env = Env::start(json!([shared_grant()])).await;
    // The incumbent keeps the name.
    env.record("team-a", "shared", "shared", "192.0.2.1").await;
    env.both_answer("shared.example.com", "192.0.2.1").await;
    env.status("team-a", "shared", Phase::Ready, "Served").await;
    env.record("team-b", "shared", "shared", "192.0.2.2").await;
    let m = env
        .status("team-b", "shared", Phase::Error, "Conflict")
        .await;
    assert!(m.contains("team-a/shared"), "{m}");
    env.both_answer("shared.example.com", "192.0.2.1").await;

    // New together: all refused, nothing served. Made new together by
    // the grant (a zone writes an idle change at once, so two creates in a
    // row may land in two writes: the first would then be the incumbent).
    env.set_grants(json!([{"from": "All", "names": ["shared"]}]))
        .await;
    env.record("team-a", "pair", "pair", "192.0.2.3").await;
    env.record("team-b", "pair", "pair", "192.0.2.4").await;
    env.status("team-a", "pair", Phase::Error, "NotAllowed")
        .await;
    env.status("team-b", "pair", Phase::Error, "NotAllowed")
        .await;
    env.set_grants(json!([shared_grant()])).await;
    env.status("team-a", "pair", Phase::Error, "Conflict").await;
    env.status("team-b", "pair", Phase::Error, "Conflict").await;
    env.both_answer("pair.example.com", "").await;
    // Still the incumbent's.
    env.status("team-a", "shared", Phase::Ready, "Served").await;
    // No zone selects by label: the operator never listed Namespaces (a
    // namespaced install without the right to do so keeps working).
    assert_eq!(env.h.api.count(Verb::List, "namespaces"), 0);
    assert_eq!(env.h.api.count(Verb::Watch, "namespaces"), 0);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_right_to_list_namespaces_selector_grants_cover_nobody_and_say_so() {
    // Namespaces listed as soon as a zone selects by label, and refused
    // three times (a ClusterRole granted meanwhile): the team's record says why,
    // the platform's own records are served all along, then the list
    // succeeds and the team's record is served.
    let env = Env::start_refusing_namespace_lists(json!([team_a_grant()]), 3).await;
    env.record("team-a", "api", "api.team-a", "192.0.2.1").await;
    let m = env
        .status("team-a", "api", Phase::Error, "NotAllowed")
        .await;
    assert!(m.contains("may not list Namespaces"), "{m}");
    env.both_answer("www.example.com", "192.0.2.80").await;
    env.both_answer("api.team-a.example.com", "192.0.2.1").await;
    env.status("team-a", "api", Phase::Ready, "Served").await;
    env.finish().await;
}
