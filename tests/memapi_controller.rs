//! The done-when test of the in-memory API: a real kube-runtime
//! `Controller` with `owns`, kube's `finalizer` helper, server-side apply of
//! an owned ConfigMap and of status, and the events `Recorder`, driven
//! through create, spec update, steady state and delete.

use crate::support_memapi as support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use support::{Widget, eventually, setup, widget};

const FINALIZER: &str = "test.memapi.dev/cleanup";
const MANAGER: &str = "widget-controller";

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("failed to talk to the api: {0}")]
    Kube(#[from] kube::Error),
}

struct Ctx {
    client: Client,
    recorder: Recorder,
    /// (generation, deleting) per reconcile that reached the user code.
    seen: Mutex<Vec<(i64, bool)>>,
}

async fn reconcile(
    w: Arc<Widget>,
    ctx: Arc<Ctx>,
) -> Result<Action, kube::runtime::finalizer::Error<Error>> {
    let ns = w.namespace().expect("namespaced");
    let widgets: Api<Widget> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&widgets, FINALIZER, w, |event| async {
        match event {
            Finalizer::Apply(w) => apply(&w, &ctx).await,
            Finalizer::Cleanup(w) => {
                ctx.seen
                    .lock()
                    .unwrap()
                    .push((w.metadata.generation.unwrap_or(0), true));
                Ok(Action::await_change())
            }
        }
    })
    .await
}

async fn apply(w: &Widget, ctx: &Ctx) -> Result<Action, Error> {
    let generation = w.metadata.generation.unwrap_or(0);
    ctx.seen.lock().unwrap().push((generation, false));
    let ns = w.namespace().expect("namespaced");
    let name = format!("{}-cfg", w.name_any());
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            owner_references: Some(vec![w.controller_owner_ref(&()).expect("has uid")]),
            ..Default::default()
        },
        data: Some([("size".to_string(), w.spec.size.to_string())].into()),
        ..Default::default()
    };
    let pp = PatchParams::apply(MANAGER).force();
    Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
        .patch(&name, &pp, &Patch::Apply(&cm))
        .await?;
    let observed = w.status.as_ref().and_then(|s| s.observed_generation);
    if observed != Some(generation) {
        let ev = Event {
            type_: EventType::Normal,
            reason: "Reconciled".into(),
            note: Some(format!("generation {generation}")),
            action: "Apply".into(),
            secondary: None,
        };
        ctx.recorder.publish(&ev, &w.object_ref(&())).await?;
    }
    let status = json!({
        "apiVersion": "test.memapi.dev/v1", "kind": "Widget",
        "status": {"observedGeneration": generation, "phase": "Ready"},
    });
    Api::<Widget>::namespaced(ctx.client.clone(), &ns)
        .patch_status(&w.name_any(), &pp, &Patch::Apply(&status))
        .await?;
    Ok(Action::await_change())
}

fn error_policy(
    _w: Arc<Widget>,
    _e: &kube::runtime::finalizer::Error<Error>,
    _ctx: Arc<Ctx>,
) -> Action {
    Action::requeue(Duration::from_millis(50))
}

#[tokio::test]
async fn controller_runs_finalizer_apply_status_update_and_cascade() {
    let (api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "ns1");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ns1");
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance: None,
            },
        ),
        seen: Mutex::new(Vec::new()),
    });
    let controller = Controller::new(
        Api::<Widget>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<ConfigMap>::all(client.clone()),
        watcher::Config::default(),
    )
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|_| async {});
    let task = tokio::spawn(controller);

    // Create: finalizer added, owned ConfigMap applied, status applied.
    let created = widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let ready = |generation: i64| {
        let api = api.clone();
        move || {
            let w: Widget = api.get(Some("ns1"), "w")?;
            let s = w.status.clone()?;
            (s.observed_generation == Some(generation) && s.phase.as_deref() == Some("Ready"))
                .then_some(w)
        }
    };
    let w = eventually("first reconcile", ready(1)).await;
    assert_eq!(w.finalizers(), [FINALIZER]);
    let cm: ConfigMap = api
        .get(Some("ns1"), "w-cfg")
        .expect("owned configmap applied");
    assert_eq!(cm.data.clone().unwrap()["size"], "1");
    assert_eq!(cm.owner_references()[0].uid, created.uid().unwrap());

    // Steady state: the status write wakes the controller once more; that
    // reconcile's applies are no-ops (no new resourceVersion, no event), so
    // nothing wakes it again.
    crate::support_clock::idle_for(Duration::from_millis(100)).await;
    api.reset_counts();
    let rv = api.resource_version();
    crate::support_clock::idle_for(Duration::from_millis(150)).await;
    assert_eq!(api.writes(), 0, "no reconcile loop on a converged object");
    assert_eq!(api.resource_version(), rv);

    // `owns`: an edit to the child wakes the owner, which repairs it.
    cms.patch(
        "w-cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"size": "99"}})),
    )
    .await
    .unwrap();
    eventually("child repaired", || {
        let cm: ConfigMap = api.get(Some("ns1"), "w-cfg")?;
        (cm.data?["size"] == "1").then_some(())
    })
    .await;

    // Spec update: a new generation is reconciled and reaches the child.
    widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    eventually("second generation", ready(2)).await;
    assert!(ctx.seen.lock().unwrap().contains(&(2, false)));
    let cm: ConfigMap = api.get(Some("ns1"), "w-cfg").unwrap();
    assert_eq!(cm.data.unwrap()["size"], "2");
    // One Reconciled event per generation; the Recorder folds the repeat
    // into a series on the same Event object.
    let events: Vec<K8sEvent> = api.list();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason.as_deref(), Some("Reconciled"));
    assert_eq!(events[0].series.as_ref().map(|s| s.count), Some(2));

    // Delete: cleanup runs, the finalizer goes, the object and (by GC) the
    // ConfigMap disappear.
    widgets.delete("w", &DeleteParams::default()).await.unwrap();
    eventually("widget gone", || {
        api.get::<Widget>(Some("ns1"), "w").is_none().then_some(())
    })
    .await;
    assert!(
        ctx.seen
            .lock()
            .unwrap()
            .iter()
            .any(|(_, deleting)| *deleting)
    );
    assert!(cms.get_opt("w-cfg").await.unwrap().is_none());
    task.abort();
}

#[tokio::test]
async fn recorder_repeats_become_a_series() {
    let (api, client) = setup();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), "ns1");
    let w = widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: MANAGER.into(),
            instance: None,
        },
    );
    let ev = Event {
        type_: EventType::Warning,
        reason: "Failed".into(),
        note: Some("same".into()),
        action: "Apply".into(),
        secondary: None,
    };
    recorder.publish(&ev, &w.object_ref(&())).await.unwrap();
    recorder.publish(&ev, &w.object_ref(&())).await.unwrap();
    let events: Vec<K8sEvent> = api.list();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].series.as_ref().map(|s| s.count), Some(2));
}
