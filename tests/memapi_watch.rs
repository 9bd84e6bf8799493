//! Selectors, paging and watches against the in-memory API: raw
//! `Api::watch` streams and the kube-runtime watcher, reflector,
//! metadata watcher and `watch_object` on top of them.

use crate::support_memapi as support;

use std::collections::BTreeMap;
use std::time::Duration;

use bind_operator::local::memapi::{Fault, MemApi, MemApiConfig, Verb};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use support::{eventually, setup, within};

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn seed(client: &Client, objs: &[ConfigMap]) -> Api<ConfigMap> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ns1");
    for o in objs {
        cms.create(&PostParams::default(), o).await.unwrap();
    }
    cms
}

async fn names(cms: &Api<ConfigMap>, lp: &ListParams) -> Vec<String> {
    cms.list(lp)
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect()
}

type Events = futures::stream::BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>>;

async fn next(events: &mut Events) -> WatchEvent<ConfigMap> {
    within("a watch event", events.try_next())
        .await
        .unwrap()
        .expect("stream still open")
}

fn describe(e: &WatchEvent<ConfigMap>) -> String {
    match e {
        WatchEvent::Added(o) => format!("ADDED {}", o.name_any()),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.name_any()),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.name_any()),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(s) => format!("ERROR {}", s.code),
    }
}

/// The collection's resourceVersion, to watch from.
async fn collection_version<K>(api: &Api<K>) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

#[tokio::test]
async fn list_filters_by_every_label_operator() {
    let (_api, client) = setup();
    let cms = seed(
        &client,
        &[
            cm("web", &[("app", "web"), ("tier", "fe")]),
            cm("db", &[("app", "db"), ("tier", "be")]),
            cm("bare", &[]),
        ],
    )
    .await;
    for (sel, want) in [
        ("app=web", vec!["web"]),
        ("app==db", vec!["db"]),
        ("app!=web", vec!["bare", "db"]),
        ("tier in (fe,be)", vec!["db", "web"]),
        ("tier notin (fe)", vec!["bare", "db"]),
        ("app", vec!["db", "web"]),
        ("!app", vec!["bare"]),
        ("app,tier=be", vec!["db"]),
    ] {
        assert_eq!(
            names(&cms, &ListParams::default().labels(sel)).await,
            want,
            "{sel}"
        );
    }
    match cms.list(&ListParams::default().labels("app in web")).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 400),
        other => panic!("expected 400, got {other:?}"),
    }
}

#[tokio::test]
async fn list_filters_by_metadata_name_field() {
    let (_api, client) = setup();
    let cms = seed(&client, &[cm("a", &[]), cm("b", &[])]).await;
    assert_eq!(
        names(&cms, &ListParams::default().fields("metadata.name=b")).await,
        ["b"]
    );
    assert_eq!(
        names(&cms, &ListParams::default().fields("metadata.name!=b")).await,
        ["a"]
    );
}

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let (_api, client) = setup();
    let objs: Vec<ConfigMap> = (0..5).map(|i| cm(&format!("c{i}"), &[])).collect();
    let cms = seed(&client, &objs).await;
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let rv = first.metadata.resource_version.clone();
    // A change between pages: every page still reports the first page's version.
    cms.create(&PostParams::default(), &cm("c9", &[]))
        .await
        .unwrap();
    let mut all: Vec<String> = first.items.iter().map(|c| c.name_any()).collect();
    let mut token = first.metadata.continue_.clone();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = cms
            .list(&ListParams::default().limit(2).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(page.metadata.resource_version, rv);
        all.extend(page.items.iter().map(|c| c.name_any()));
        token = page.metadata.continue_;
    }
    assert_eq!(all, ["c0", "c1", "c2", "c3", "c4", "c9"]);
}

/// A namespaced list pages through its own namespace only, with the
/// namespaces sorting before and after it full of objects, and an
/// all-namespaces list through all of them; a page that ends exactly at
/// the last object carries no continue token.
#[tokio::test]
async fn namespaced_and_cluster_wide_lists_page_through_exactly_their_objects() {
    let (_api, client) = setup();
    for ns in ["a", "m", "z"] {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for i in 0..4 {
            cms.create(&PostParams::default(), &cm(&format!("{ns}{i}"), &[]))
                .await
                .unwrap();
        }
    }
    async fn paged(cms: &Api<ConfigMap>, limit: u32) -> (Vec<String>, usize) {
        let (mut all, mut pages, mut token) = (Vec::new(), 0, None::<String>);
        loop {
            let mut lp = ListParams::default().limit(limit);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            let page = cms.list(&lp).await.unwrap();
            pages += 1;
            all.extend(page.items.iter().map(|c| c.name_any()));
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => return (all, pages),
            }
        }
    }
    let m: Api<ConfigMap> = Api::namespaced(client.clone(), "m");
    assert_eq!(
        paged(&m, 2).await,
        (vec!["m0".into(), "m1".into(), "m2".into(), "m3".into()], 2)
    );
    assert_eq!(paged(&m, 3).await.0, ["m0", "m1", "m2", "m3"]);
    let every: Api<ConfigMap> = Api::all(client.clone());
    let (all, pages) = paged(&every, 5).await;
    assert_eq!(all.len(), 12);
    assert_eq!(pages, 3);
    assert_eq!(all.first().map(String::as_str), Some("a0"));
    assert_eq!(all.last().map(String::as_str), Some("z3"));
}

#[tokio::test]
async fn watch_from_a_version_streams_added_modified_deleted() {
    let (_api, client) = setup();
    let cms = seed(&client, &[cm("before", &[])]).await;
    let rv = collection_version(&cms).await;
    let wp = WatchParams::default().disable_bookmarks();
    let mut events: Events = cms.watch(&wp, &rv).await.unwrap().boxed();
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let merge = |v: &str| Patch::Merge(json!({"data": {"k": v}}));
    cms.patch("a", &PatchParams::default(), &merge("1"))
        .await
        .unwrap();
    // A no-op write emits nothing.
    cms.patch("a", &PatchParams::default(), &merge("1"))
        .await
        .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    cms.create(&PostParams::default(), &cm("z", &[]))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut last_rv = rv.parse::<u64>().unwrap();
    for _ in 0..4 {
        let e = next(&mut events).await;
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &e {
            let v: u64 = o.resource_version().unwrap().parse().unwrap();
            assert!(v > last_rv, "versions increase along the stream");
            last_rv = v;
        }
        seen.push(describe(&e));
    }
    assert_eq!(seen, ["ADDED a", "MODIFIED a", "DELETED a", "ADDED z"]);

    // Watching from the same version again replays the same history.
    let mut replay: Events = cms.watch(&wp, &rv).await.unwrap().boxed();
    let mut again = Vec::new();
    for _ in 0..4 {
        again.push(describe(&next(&mut replay).await));
    }
    assert_eq!(again, seen);
}

#[tokio::test]
async fn watch_from_zero_starts_with_current_objects() {
    let (_api, client) = setup();
    let cms = seed(&client, &[cm("a", &[]), cm("b", &[])]).await;
    let wp = WatchParams::default().disable_bookmarks();
    let mut events: Events = cms.watch(&wp, "0").await.unwrap().boxed();
    assert_eq!(describe(&next(&mut events).await), "ADDED a");
    assert_eq!(describe(&next(&mut events).await), "ADDED b");
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(describe(&next(&mut events).await), "DELETED a");
}

#[tokio::test]
async fn bookmarks_arrive_only_when_asked() {
    let api = MemApi::with_config(MemApiConfig {
        bookmark_interval: Duration::from_millis(10),
        ..Default::default()
    });
    let cms = seed(&api.client(), &[cm("a", &[])]).await;
    let rv = api.resource_version().to_string();
    let mut with: Events = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match next(&mut with).await {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected a bookmark, got {}", describe(&other)),
    }
    let mut without: Events = cms
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .unwrap()
        .boxed();
    let quiet = tokio::time::timeout(Duration::from_millis(100), without.try_next()).await;
    assert!(quiet.is_err(), "no event without changes or bookmarks");
    cms.create(&PostParams::default(), &cm("b", &[]))
        .await
        .unwrap();
    assert_eq!(describe(&next(&mut without).await), "ADDED b");
}

#[tokio::test]
async fn watch_with_selector_sees_objects_enter_and_leave() {
    let (_api, client) = setup();
    let cms = seed(&client, &[cm("a", &[("sel", "no")])]).await;
    let rv = collection_version(&cms).await;
    let wp = WatchParams::default().disable_bookmarks().labels("sel=yes");
    let mut events: Events = cms.watch(&wp, &rv).await.unwrap().boxed();
    let label = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"sel": v}}}));
    cms.patch("a", &PatchParams::default(), &label("yes"))
        .await
        .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    cms.patch("a", &PatchParams::default(), &label("no"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", &[("sel", "yes")]))
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(describe(&next(&mut events).await));
    }
    assert_eq!(seen, ["ADDED a", "MODIFIED a", "DELETED a", "ADDED b"]);
}

#[tokio::test]
async fn too_old_version_is_gone() {
    let (api, client) = setup();
    let cms = seed(&client, &[cm("a", &[]), cm("b", &[])]).await;
    api.compact_history();
    let mut events: Events = cms
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match next(&mut events).await {
        WatchEvent::Error(s) => assert_eq!(s.code, 410),
        other => panic!("expected 410, got {}", describe(&other)),
    }
    assert!(within("stream end", events.next()).await.is_none());
}

/// What the bench relies on between scenarios: after `release` the objects
/// are gone for every client at once, open watches end, and a watch
/// resuming from before the release relists (410) instead of missing them.
#[tokio::test]
async fn release_drops_objects_and_ends_watches() {
    let (api, client) = setup();
    let cms = seed(&client, &[cm("a", &[]), cm("b", &[])]).await;
    let before = cms.get("a").await.unwrap().resource_version().unwrap();
    let mut open: Events = cms
        .watch(&WatchParams::default(), &before)
        .await
        .unwrap()
        .boxed();
    assert_eq!(describe(&next(&mut open).await), "ADDED b");
    api.release();
    assert!(within("stream end", open.next()).await.is_none());
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(cms.get_opt("a").await.unwrap().is_none());
    let mut resumed: Events = cms
        .watch(&WatchParams::default(), &before)
        .await
        .unwrap()
        .boxed();
    match next(&mut resumed).await {
        WatchEvent::Error(s) => assert_eq!(s.code, 410),
        other => panic!("expected 410, got {}", describe(&other)),
    }
    // The server goes on serving: a new object gets a newer version.
    let c = cms
        .create(&PostParams::default(), &cm("c", &[]))
        .await
        .unwrap();
    let rv = |o: &ConfigMap| o.resource_version().unwrap().parse::<u64>().unwrap();
    assert!(rv(&c) > before.parse::<u64>().unwrap());
}

#[tokio::test]
async fn watch_timeout_ends_the_stream() {
    let (_api, client) = setup();
    let cms: Api<ConfigMap> = Api::namespaced(client, "ns1");
    let mut events: Events = cms
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    assert!(within("timeout", events.next()).await.is_none());
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_a_bookmark() {
    let (_api, client) = setup();
    let cms = seed(&client, &[cm("a", &[]), cm("b", &[])]).await;
    let mut stream = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut seen = Vec::new();
    loop {
        match within("watcher event", stream.try_next())
            .await
            .unwrap()
            .unwrap()
        {
            watcher::Event::Init => seen.push("init".to_string()),
            watcher::Event::InitApply(o) => seen.push(format!("initapply {}", o.name_any())),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["init", "initapply a", "initapply b"]);
    cms.create(&PostParams::default(), &cm("c", &[]))
        .await
        .unwrap();
    match within("watcher event", stream.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        watcher::Event::Apply(o) => assert_eq!(o.name_any(), "c"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn reflector_recovers_from_closed_watches_and_lost_history() {
    let (api, client) = setup();
    let cms = seed(&client, &[cm("a", &[])]).await;
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream =
        reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    within("initial sync", reader.wait_until_ready())
        .await
        .unwrap();
    assert_eq!(reader.state().len(), 1);

    // The watch ends (API restart): the watcher re-watches from its version.
    api.close_watches();
    cms.create(&PostParams::default(), &cm("b", &[]))
        .await
        .unwrap();
    eventually("b in cache", || (reader.state().len() == 2).then_some(())).await;

    // The re-watch fails until the history is lost: then it gets 410 and
    // the watcher relists.
    api.fail_next(Fault::new(Verb::Watch, "configmaps").times(1_000_000));
    api.close_watches();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    api.compact_history();
    api.clear_faults();
    eventually("a gone from cache", || {
        let names: Vec<String> = reader.state().iter().map(|c| c.name_any()).collect();
        (names == ["b"]).then_some(())
    })
    .await;
    assert!(
        api.count(Verb::List, "configmaps") >= 2,
        "watcher relisted after 410"
    );
    task.abort();
}

#[tokio::test]
async fn metadata_watcher_and_watch_object() {
    let (_api, client) = setup();
    let cms = seed(&client, &[cm("a", &[("k", "v")])]).await;
    let metas: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), "ns1");
    let mut meta = watcher(metas, watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = within("metadata", meta.try_next()).await.unwrap().unwrap();
    assert_eq!(first.name_any(), "a");
    assert_eq!(
        first.labels(),
        &BTreeMap::from([("k".to_string(), "v".to_string())])
    );

    let mut one = kube::runtime::watcher::watch_object(cms.clone(), "b").boxed();
    assert!(
        within("absent", one.try_next())
            .await
            .unwrap()
            .unwrap()
            .is_none()
    );
    cms.create(&PostParams::default(), &cm("b", &[]))
        .await
        .unwrap();
    let got = within("present", one.try_next()).await.unwrap().unwrap();
    assert_eq!(got.map(|c| c.name_any()).as_deref(), Some("b"));
    cms.delete("b", &DeleteParams::default()).await.unwrap();
    assert!(
        within("deleted", one.try_next())
            .await
            .unwrap()
            .unwrap()
            .is_none()
    );
}

/// One change, many watches: every watch of the collection gets it (each
/// in its own form: whole object, metadata only), the same from the live
/// stream as from a replay of the history.
#[tokio::test]
async fn every_watch_gets_each_change_in_its_own_form() {
    let (_api, client) = setup();
    let cms = seed(&client, &[cm("a", &[("k", "v")])]).await;
    let metas: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.clone(), "ns1");
    let rv = collection_version(&cms).await;
    let wp = WatchParams::default().disable_bookmarks();
    let mut first: Events = cms.watch(&wp, &rv).await.unwrap().boxed();
    let mut second: Events = cms.watch(&wp, &rv).await.unwrap().boxed();
    let mut meta = metas.watch_metadata(&wp, &rv).await.unwrap().boxed();
    let merge = Patch::Merge(json!({"data": {"x": "1"}, "metadata": {"labels": {"k": "w"}}}));
    cms.patch("a", &PatchParams::default(), &merge)
        .await
        .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();

    let data = |e: &WatchEvent<ConfigMap>| match e {
        WatchEvent::Modified(o) | WatchEvent::Deleted(o) => (
            describe(e),
            o.data.clone().unwrap_or_default(),
            o.labels().clone(),
            o.resource_version(),
        ),
        other => panic!("unexpected event {}", describe(other)),
    };
    let mut live = Vec::new();
    for _ in 0..2 {
        let (a, b) = (next(&mut first).await, next(&mut second).await);
        assert_eq!(data(&a), data(&b), "both watches see the same change");
        live.push(data(&a));
    }
    assert_eq!(live[0].0, "MODIFIED a");
    assert_eq!(live[0].1, BTreeMap::from([("x".into(), "1".into())]));
    assert_eq!(live[1].0, "DELETED a");
    for want in ["MODIFIED", "DELETED"] {
        let e = within("a metadata event", meta.try_next())
            .await
            .unwrap()
            .expect("stream still open");
        let (ty, o) = match e {
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            _ => panic!("unexpected metadata event"),
        };
        assert_eq!(ty, want);
        assert_eq!(o.name_any(), "a");
        assert_eq!(
            o.labels(),
            &BTreeMap::from([("k".to_string(), "w".to_string())])
        );
    }

    // A replay from the history serialises again and gives the same.
    let mut replay: Events = cms.watch(&wp, &rv).await.unwrap().boxed();
    for want in &live {
        assert_eq!(&data(&next(&mut replay).await), want);
    }
}
