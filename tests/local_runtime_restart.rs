//! An operator restart against pods that already serve, with real named:
//! the controllers converge two zones on a local runtime, stop, and start
//! again on the same in-memory API and pods. The restarted controllers
//! read each zone's serial over DNS and trust a zone still at the serial
//! its status recorded: no zone transfer, no DNS UPDATE, no API write. A
//! zone another client wrote to while the operator was away (its serial
//! moved) is transferred, and only that one.

use crate::support_local as support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bind_operator::api::{BindCluster, BindTSIGKey, BindZone, DNSRecord, Phase};
use bind_operator::bind::nsupdate::{RrsetChange, UpdateBatch};
use bind_operator::bind::wire::Client;
use bind_operator::bind::wire::update::{UpdateMessage, messages};
use bind_operator::bind::{
    DomainName, Rdata, RecordType, TsigAlgorithm, TsigKey, TsigSecret, Ttl, ZoneName,
};
use bind_operator::controller::exec::ObservedExecutor;
use bind_operator::controller::{self, Scope};
use bind_operator::local::memapi::Verb;
use bind_operator::operator::{Metrics, Readiness};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::{Harness, NS, wait_for};

/// Seeds the user key's material (32 bytes).
const MATERIAL: [u8; 32] = [7; 32];

/// Every DNS exchange and exec one controller run made: (pod, verb).
type Calls = Arc<Mutex<Vec<(String, &'static str)>>>;

struct Manager {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    metrics: Metrics,
    calls: Calls,
}

impl Manager {
    fn start(h: &Harness) -> Manager {
        let calls: Calls = Arc::default();
        let seen = calls.clone();
        let exec = ObservedExecutor::new(Arc::new(h.runtime.executor()), move |pod, cmd, _, _| {
            seen.lock().unwrap().push((pod.name.clone(), cmd.verb()));
        });
        let metrics = Metrics::new();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(controller::run_scoped(
            h.client.clone(),
            Arc::new(exec),
            Arc::new(h.runtime.network()),
            metrics.clone(),
            Readiness::new(),
            Scope::cluster(),
            async move {
                let _ = stopped.await;
            },
        ));
        Manager {
            stop,
            task,
            metrics,
            calls,
        }
    }

    fn count(&self, verb: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, v)| *v == verb)
            .count()
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

fn reconciles(m: &Metrics, controller: &str) -> f64 {
    let text = m.encode();
    text.lines()
        .filter(|l| l.starts_with("bind_operator_reconciliations_total{"))
        .filter(|l| l.contains(&format!("controller=\"{controller}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn create<K>(h: &Harness, value: serde_json::Value)
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).unwrap();
    Api::<K>::namespaced(h.client.clone(), NS)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

fn zone_json(name: &str, zone: &str) -> serde_json::Value {
    json!({
        "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindZone",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterRef": "c", "zoneName": zone,
                 "nameservers": [format!("ns1.{zone}.")], "updateKeyRef": "upd",
                 "records": [{"name": "ns1", "type": "A", "values": ["192.0.2.53"]}]},
    })
}

/// The zone's status once Ready with a recorded plan, every pod at its
/// serial.
async fn settled(h: &Harness, name: &str) -> u32 {
    let zones: Api<BindZone> = Api::namespaced(h.client.clone(), NS);
    wait_for(&format!("{name} Ready on c-0 and c-1"), || {
        let zones = zones.clone();
        async move {
            let st = zones.get(name).await.ok()?.status?;
            let serial = st.serial?;
            let all = st.servers.len() == 2 && st.servers.values().all(|s| *s == serial);
            (st.phase == Some(Phase::Ready) && st.applied_plan.is_some() && all).then_some(serial)
        }
    })
    .await
}

/// API writes by the operator: everything but the runtime's own pods.
fn operator_writes(h: &Harness) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for resource in [
        "bindzones",
        "dnsrecords",
        "bindclusters",
        "bindtsigkeys",
        "configmaps",
        "secrets",
        "statefulsets",
        "services",
        "events",
    ] {
        let n: u64 = [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete]
            .into_iter()
            .map(|v| h.api.count(v, resource))
            .sum();
        if n > 0 {
            out.insert(resource.to_string(), n);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_transfers_only_zones_whose_serial_moved_and_writes_nothing() {
    let h = Harness::start(|_| {}).await;
    h.api.register_custom::<BindCluster>();
    h.api.register_custom::<BindTSIGKey>();
    h.api.register_custom::<BindZone>();
    h.api.register_custom::<DNSRecord>();
    let first = Manager::start(&h);

    // A user key with known material: the test writes behind the
    // operator's back with it later.
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("upd-secret".into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "secret".to_string(),
            k8s_openapi::ByteString(base64_of(&MATERIAL).into_bytes()),
        )])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(h.client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    create::<BindTSIGKey>(
        &h,
        json!({
            "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindTSIGKey",
            "metadata": {"name": "upd", "namespace": NS},
            "spec": {"secretRef": {"name": "upd-secret", "key": "secret"}},
        }),
    )
    .await;
    create::<BindCluster>(
        &h,
        json!({
            "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindCluster",
            "metadata": {"name": "c", "namespace": NS},
            "spec": {"replicas": 2},
        }),
    )
    .await;
    create::<BindZone>(&h, zone_json("still", "still.test")).await;
    create::<BindZone>(&h, zone_json("moved", "moved.test")).await;
    for (zone, n) in [("still", 3), ("moved", 2)] {
        for i in 0..n {
            create::<DNSRecord>(
                &h,
                json!({
                    "apiVersion": "bind.unkin.net/v1alpha1", "kind": "DNSRecord",
                    "metadata": {"name": format!("{zone}-h{i}"), "namespace": NS},
                    "spec": {"zoneRef": zone, "name": format!("h{i}"), "type": "A",
                             "values": [format!("192.0.2.{}", 10 + i)]},
                }),
            )
            .await;
        }
    }
    let still = settled(&h, "still").await;
    let moved = settled(&h, "moved").await;
    // Every record answered on the secondary: the first run is done.
    for (zone, n) in [("still.test", 3), ("moved.test", 2)] {
        for i in 0..n {
            wait_for(&format!("h{i}.{zone} on c-1"), || async {
                let port = h.runtime.pod(NS, "c-1")?.dns.port();
                support::dig(port, &[&format!("h{i}.{zone}"), "A"])
                    .await
                    .contains(&format!("192.0.2.{}", 10 + i))
                    .then_some(())
            })
            .await;
        }
    }
    first.stop().await;

    // Another client writes into moved.test while no operator runs.
    let key = TsigKey {
        name: bind_operator::bind::KeyName::parse("upd").unwrap(),
        algorithm: TsigAlgorithm::HmacSha256,
        secret: TsigSecret::from_bytes(&MATERIAL).unwrap(),
    };
    let zone = ZoneName::parse("moved.test").unwrap();
    let batch = UpdateBatch {
        zone: zone.clone(),
        changes: vec![RrsetChange::Replace {
            name: DomainName::resolve("other", &zone).unwrap(),
            rtype: RecordType::Txt,
            ttl: Ttl::new(60).unwrap(),
            values: vec![Rdata::parse(RecordType::Txt, "\"by hand\"", &zone).unwrap()],
        }],
        apex_ns: None,
    };
    let msgs: Vec<UpdateMessage> = messages(&batch).unwrap();
    let port = h.runtime.pod(NS, "c-0").unwrap().dns.port();
    let primary = Client::new(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    primary.update(&msgs, &key).await.unwrap();
    assert!(primary.serial(&zone, Some(&key)).await.unwrap() > Some(moved));

    // The restart: same API, same pods.
    h.api.reset_counts();
    let second = Manager::start(&h);
    wait_for("both zones and their records reconciled again", || async {
        (reconciles(&second.metrics, "BindZone") >= 2.0
            && reconciles(&second.metrics, "DNSRecord") >= 5.0
            && second.count("dns_axfr") >= 1)
            .then_some(())
    })
    .await;
    quiet(&h, &second).await;
    // The moved zone is Ready at its new serial; the other stays put.
    let zones: Api<BindZone> = Api::namespaced(h.client.clone(), NS);
    wait_for(
        "moved.test Ready at the serial the other client made",
        || {
            let zones = zones.clone();
            async move {
                let st = zones.get("moved").await.ok()?.status?;
                (st.phase == Some(Phase::Ready) && st.serial > Some(moved)).then_some(())
            }
        },
    )
    .await;
    let calls = second.calls.lock().unwrap().clone();
    let verbs = |v: &str| calls.iter().filter(|(_, c)| *c == v).count();
    assert_eq!(verbs("dns_update"), 0, "a restart wrote to DNS: {calls:?}");
    assert_eq!(
        verbs("dns_axfr"),
        1,
        "only the zone whose serial moved is transferred: {calls:?}"
    );
    assert_eq!(verbs("dig_axfr") + verbs("dig_soa"), 0, "{calls:?}");
    assert!(
        verbs("dns_soa") >= 1,
        "serials are read over DNS: {calls:?}"
    );
    assert_eq!(
        zones.get("still").await.unwrap().status.unwrap().serial,
        Some(still)
    );
    // The only API write: the moved zone's status (its new serial).
    let writes = operator_writes(&h);
    assert!(
        writes.values().sum::<u64>() <= 1 && writes.keys().all(|r| r == "bindzones"),
        "API writes after the restart: {writes:?}"
    );
    second.stop().await;
    h.finish().await;
}

/// Waits until the operator has made no DNS exchange, exec or API write
/// for a while (every reconcile the restart caused is over).
async fn quiet(h: &Harness, m: &Manager) {
    let mut last = (usize::MAX, u64::MAX);
    let mut still_since = std::time::Instant::now();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let now = (m.calls.lock().unwrap().len(), h.api.resource_version());
        if now != last {
            last = now;
            still_since = std::time::Instant::now();
        } else if still_since.elapsed() >= std::time::Duration::from_millis(1500) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the operator never went quiet"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
