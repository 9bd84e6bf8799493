//! What the controllers count into the operator's metrics, read back the
//! way Prometheus reads them (the text exposition): reconciles per
//! controller, failed reconciles by error category (including the
//! permanent problems a reconcile handles by writing status), commands per
//! verb and failed commands; and that `run_scoped` turns readiness on once
//! its caches synced and counts into the registry it was given.

use crate::support_controller as support;
use crate::support_ops::promtext;

use std::sync::Arc;

use bind_operator::controller;
use bind_operator::operator::{Metrics, Readiness};
use support::{FakeExec, FixedNetwork, Harness, material};

/// The value of one series (0 when the series does not exist yet).
fn value(metrics: &Metrics, family: &str, labels: &[(&str, &str)]) -> f64 {
    let text = metrics.encode();
    let families = promtext::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    families
        .get(family)
        .and_then(|f| f.value(family, labels))
        .unwrap_or(0.0)
}

fn reconciles(m: &Metrics, controller: &str) -> f64 {
    value(
        m,
        "bind_operator_reconciliations_total",
        &[("controller", controller)],
    )
}

fn errors(m: &Metrics, controller: &str, category: &str) -> f64 {
    value(
        m,
        "bind_operator_reconcile_errors_total",
        &[("controller", controller), ("category", category)],
    )
}

fn execs(m: &Metrics, verb: &str) -> f64 {
    value(m, "bind_operator_exec_calls_total", &[("verb", verb)])
}

fn exec_errors(m: &Metrics, verb: &str) -> f64 {
    value(m, "bind_operator_exec_errors_total", &[("verb", verb)])
}

#[tokio::test]
async fn reconciles_and_commands_are_counted_by_category_and_verb() {
    let h = Harness::new().await;
    let m = h.ctx.metrics.clone();
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    h.reconcile_key("xfer").await;
    assert_eq!(reconciles(&m, "BindTSIGKey"), 1.0);

    h.cluster("c", 2).await;
    h.converge("c", 2).await;
    assert_eq!(reconciles(&m, "BindCluster"), 2.0);
    assert_eq!(errors(&m, "BindCluster", "InvalidSpec"), 0.0);
    // Every command the fake ran is counted under the verb it was built as.
    let ran = |argv_matches: &dyn Fn(&[String]) -> bool| {
        h.exec
            .state()
            .calls
            .iter()
            .filter(|c| argv_matches(&c.argv))
            .count() as f64
    };
    let reconfigs = ran(&|a| a.last().is_some_and(|v| v == "reconfig"));
    assert!(reconfigs >= 2.0, "both pods reconfigured");
    assert_eq!(execs(&m, "reconfig"), reconfigs);
    assert_eq!(
        execs(&m, "read_mounted_config"),
        ran(&|a| a[0] == "cat" && !a[1].ends_with("notify-targets.conf"))
    );
    assert_eq!(execs(&m, "other"), 0.0, "every command has a verb");
    assert_eq!(exec_errors(&m, "reconfig"), 0.0);

    // A failing reconfig counts as a failed command.
    h.set_secret("xfer-secret", &material(2)).await;
    h.reconcile_cluster("c").await;
    h.propagate("c", "c-0");
    h.exec.state().reconfig_err = Some("rndc: 'reconfig' failed: failure".into());
    h.reconcile_cluster("c").await;
    assert!(exec_errors(&m, "reconfig") >= 1.0);
    h.exec.state().reconfig_err = None;

    // A bad spec is handled (status, Ok) and still counted as an error,
    // once per reconcile that met it.
    h.patch_cluster_spec("c", serde_json::json!({"forwarders": ["not-an-ip"]}))
        .await;
    let before = reconciles(&m, "BindCluster");
    h.reconcile_cluster("c").await;
    h.reconcile_cluster("c").await;
    assert_eq!(reconciles(&m, "BindCluster"), before + 2.0);
    assert_eq!(errors(&m, "BindCluster", "InvalidSpec"), 2.0);

    // A key whose Secret does not exist.
    h.key_with_ref("ext", "ext-dns", "tsig").await;
    h.reconcile_key("ext").await;
    assert_eq!(errors(&m, "BindTSIGKey", "SecretNotFound"), 1.0);
    assert_eq!(reconciles(&m, "BindTSIGKey"), 2.0);
}

#[tokio::test]
async fn run_with_turns_ready_after_sync_and_counts_into_the_given_registry() {
    let api = support::memapi();
    let client = api.client();
    let metrics = Metrics::new();
    let readiness = Readiness::new();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(controller::run_scoped(
        client.clone(),
        Arc::new(FakeExec::default()),
        Arc::new(FixedNetwork),
        metrics.clone(),
        readiness.clone(),
        controller::Scope::cluster(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let r = readiness.clone();
    support::eventually("ready after the caches synced", move || {
        r.is_ready().then_some(())
    })
    .await;

    let h = Harness::detached(api, FakeExec::default());
    h.user_key("xfer", "xfer-secret", &material(1)).await;
    h.cluster("c", 1).await;
    let m = metrics.clone();
    support::eventually("the cluster reconciled through the watches", move || {
        (reconciles(&m, "BindCluster") >= 1.0 && reconciles(&m, "BindTSIGKey") >= 1.0).then_some(())
    })
    .await;

    let _ = stop_tx.send(());
    support::within("the controllers stop", manager)
        .await
        .unwrap();
}

/// Real reconciles of all four kinds, run by the controllers themselves
/// (`run_scoped` on the in-memory API, nothing called by hand), are counted
/// and timed by the one guard they all run in, failures by category, and
/// read back from the registry as `/metrics` serves it.
#[tokio::test]
async fn every_controller_counts_its_own_reconciles() {
    use bind_operator::api::{
        BindCluster, BindTSIGKey, BindZone, DNSRecord, REASON_KEY_AVAILABLE,
        REASON_SECRET_NOT_FOUND,
    };
    use bind_operator::controller::Scope;
    use kube::api::{Api, PostParams};
    use serde::de::DeserializeOwned;
    use support::NS;

    async fn create<K>(client: &kube::Client, json: serde_json::Value)
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::Serialize
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let obj: K = serde_json::from_value(json).unwrap();
        Api::<K>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }

    let api = support::memapi();
    let client = api.client();
    let metrics = Metrics::new();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(controller::run_scoped(
        client.clone(),
        Arc::new(FakeExec::default()),
        Arc::new(FixedNetwork),
        metrics.clone(),
        Readiness::new(),
        Scope::cluster(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let meta = |name: &str| serde_json::json!({"name": name, "namespace": NS});
    create::<BindTSIGKey>(
        &client,
        serde_json::json!({"metadata": meta("gen"), "spec": {}}),
    )
    .await;
    // A key whose Secret does not exist: a permanent problem the reconcile
    // reports in status, still counted by its category.
    create::<BindTSIGKey>(
        &client,
        serde_json::json!({"metadata": meta("lost"),
            "spec": {"secretRef": {"name": "nowhere", "key": "secret"}}}),
    )
    .await;
    create::<BindCluster>(
        &client,
        serde_json::json!({"metadata": meta("c"), "spec": {"replicas": 1}}),
    )
    .await;
    create::<BindZone>(
        &client,
        serde_json::json!({"metadata": meta("z"),
            "spec": {"clusterRef": "c", "zoneName": "example.org"}}),
    )
    .await;
    create::<DNSRecord>(
        &client,
        serde_json::json!({"metadata": meta("www"),
            "spec": {"zoneRef": "z", "name": "www", "type": "A", "values": ["192.0.2.1"]}}),
    )
    .await;

    for kind in ["BindCluster", "BindZone", "DNSRecord", "BindTSIGKey"] {
        support::eventually(&format!("a counted {kind} reconcile"), || {
            (reconciles(&metrics, kind) >= 1.0).then_some(())
        })
        .await;
        support::eventually(&format!("a timed {kind} reconcile"), || {
            let hist = "bind_operator_reconcile_duration_seconds";
            let count = promtext::parse(&metrics.encode())
                .unwrap()
                .get(hist)
                .and_then(|f| f.value(&format!("{hist}_count"), &[("controller", kind)]))
                .unwrap_or(0.0);
            (count >= 1.0).then_some(())
        })
        .await;
    }
    support::eventually("the missing secret counted by its category", || {
        (errors(&metrics, "BindTSIGKey", REASON_SECRET_NOT_FOUND) >= 1.0).then_some(())
    })
    .await;
    // What the counted reconciles did, as a user sees it.
    support::eventually("the generated key Ready", || {
        let k: BindTSIGKey = api.get(Some(NS), "gen")?;
        let ready = bind_operator::api::find_condition(&k.status?.conditions, "Ready")?.clone();
        (ready.reason == REASON_KEY_AVAILABLE).then_some(())
    })
    .await;
    support::eventually("the record's finalizer", || {
        let r: DNSRecord = api.get(Some(NS), "www")?;
        (!r.metadata.finalizers?.is_empty()).then_some(())
    })
    .await;
    support::eventually("a Warning Event for the missing secret", || {
        api.list::<k8s_openapi::api::events::v1::Event>()
            .into_iter()
            .any(|e| e.reason.as_deref() == Some(REASON_SECRET_NOT_FOUND))
            .then_some(())
    })
    .await;
    println!(
        "reconciles: BindCluster={} BindZone={} DNSRecord={} BindTSIGKey={}; BindTSIGKey errors SecretNotFound={}",
        reconciles(&metrics, "BindCluster"),
        reconciles(&metrics, "BindZone"),
        reconciles(&metrics, "DNSRecord"),
        reconciles(&metrics, "BindTSIGKey"),
        errors(&metrics, "BindTSIGKey", REASON_SECRET_NOT_FOUND),
    );
    stop_tx.send(()).unwrap();
    support::within("the manager to stop", manager)
        .await
        .unwrap();
}

/// A failure for the guard's test: its category, message and whether a
/// retry may help.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct Failure {
    category: &'static str,
    message: String,
    transient: bool,
}

impl controller::Categorized for Failure {
    fn category(&self) -> &'static str {
        self.category
    }

    fn is_transient(&self) -> bool {
        self.transient
    }
}

/// The guard every reconcile runs in: a transient failure goes back to the
/// controller (backoff), a permanent one becomes a long requeue; both are
/// counted by category; each new problem is one Warning Event, a repeat of
/// the same problem none, and the same problem after a clean reconcile is
/// new again.
#[tokio::test]
async fn the_guard_counts_reports_once_and_picks_the_retry() {
    use bind_operator::controller::REQUEUE_LONG;
    use bind_operator::controller::error::measured;
    use bind_operator::operator::Controller;
    use kube::runtime::controller::Action;

    let h = Harness::new().await;
    let m = h.ctx.metrics.clone();
    let c = h.cluster("c", 1).await;
    let warnings = |reason: &str| h.events().iter().filter(|(r, _)| r == reason).count();
    let fail = |category: &'static str, message: &str, transient: bool| {
        let e = Failure {
            category,
            message: message.into(),
            transient,
        };
        measured(&h.ctx, Controller::BindCluster, &c, async move {
            Err::<Action, _>(e)
        })
    };

    let back = fail("KubeApiFailed", "the API hiccuped", true).await;
    assert!(back.is_err(), "a transient failure goes back for backoff");
    support::eventually("one Event", || {
        (warnings("KubeApiFailed") == 1).then_some(())
    })
    .await;
    assert!(
        fail("KubeApiFailed", "the API hiccuped", true)
            .await
            .is_err()
    );
    let wait = fail("InvalidSpec", "replicas is -1", false)
        .await
        .expect("a permanent failure is handled");
    assert_eq!(wait, Action::requeue(REQUEUE_LONG));
    fail("InvalidSpec", "replicas is -1", false).await.unwrap();
    assert_eq!(errors(&m, "BindCluster", "KubeApiFailed"), 2.0);
    assert_eq!(errors(&m, "BindCluster", "InvalidSpec"), 2.0);
    assert_eq!(reconciles(&m, "BindCluster"), 4.0);
    support::eventually("one Event for the bad spec", || {
        (warnings("InvalidSpec") == 1).then_some(())
    })
    .await;
    // The repeats published nothing more.
    assert_eq!(warnings("KubeApiFailed"), 1);

    let ok = measured(&h.ctx, Controller::BindCluster, &c, async {
        Ok::<_, Failure>(Action::await_change())
    })
    .await
    .unwrap();
    assert_eq!(ok, Action::await_change());
    assert_eq!(reconciles(&m, "BindCluster"), 5.0);
    // Fixed, then broken the same way again: reported again.
    fail("InvalidSpec", "replicas is -1", false).await.unwrap();
    support::eventually("the bad spec reported again", || {
        let notes: Vec<String> = h
            .events()
            .into_iter()
            .filter(|(r, _)| r == "InvalidSpec")
            .map(|(_, n)| n)
            .collect();
        // The recorder folds a repeat into one series; its count is what
        // grows, so look at the raw Event's series count.
        let series = h
            .api
            .list::<k8s_openapi::api::events::v1::Event>()
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidSpec"))
            .and_then(|e| e.series.map(|s| s.count));
        (notes.len() == 1 && series.is_some_and(|n| n >= 2)).then_some(())
    })
    .await;
}
