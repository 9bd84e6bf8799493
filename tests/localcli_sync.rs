//! Directory sync against the in-memory API: create, update and delete follow
//! the files; only objects the sync applied are ever deleted; a broken or
//! refused document leaves the serving object alone; namespaces appear as
//! needed; transient failures and finalizers are retried.

use crate::support_localcli as support;

use std::time::Duration;

use bind_operator::local::memapi::{Fault, MemApi, Verb};
use bind_operator::local::sync::{FIELD_MANAGER, ManifestSync, SyncReport};
use serde_json::{Value, json};
use support::{examples_dir, record, setup, write, zone};

const V1: &str = "bind.unkin.net/v1alpha1";

fn names(keys: &[bind_operator::local::manifests::ObjectKey]) -> Vec<String> {
    keys.iter().map(ToString::to_string).collect()
}

fn stored(mem: &MemApi, plural: &str, name: &str) -> Option<Value> {
    mem.raw(V1, plural, Some("default"), name)
}

fn copy_examples(dir: &std::path::Path) {
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
}

#[tokio::test]
async fn files_drive_create_update_and_delete() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    copy_examples(dir.path());
    let mut sync = ManifestSync::new(dir.path());

    let first = sync.sync_once(&client).await;
    assert!(first.errors.is_empty(), "{:#?}", first.errors);
    assert!(!first.pending);
    assert_eq!(
        names(&first.created),
        [
            "BindTSIGKey default/transfer-key",
            "BindTSIGKey default/update-key",
            "BindCluster default/example",
            "BindZone default/example-com",
            "DNSRecord default/spf-example-com",
            "DNSRecord default/www-example-com",
        ]
    );
    let www = stored(&mem, "dnsrecords", "www-example-com").expect("created");
    assert_eq!(www["spec"]["values"], json!(["192.0.2.10", "192.0.2.11"]));
    // Applied server-side: the sync's field manager owns the values, so
    // another manager cannot change them without forcing.
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::default_namespaced_with(
        client.clone(),
        &bind_operator::local::manifests::ManifestKind::DNSRecord.api_resource(),
    );
    let mut theirs = www.clone();
    theirs["spec"]["values"] = json!(["192.0.2.99"]);
    theirs["metadata"] = json!({"name": "www-example-com"});
    let conflict = api
        .patch(
            "www-example-com",
            &kube::api::PatchParams::apply("someone-else"),
            &kube::api::Patch::Apply(&theirs),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(conflict, kube::Error::Api(s) if s.code == 409),
        "{FIELD_MANAGER} owns spec.values"
    );
    assert!(mem.raw("v1", "namespaces", None, "default").is_some());

    // Nothing changed: no write at all.
    mem.reset_counts();
    let again = sync.sync_once(&client).await;
    assert!(!again.changed());
    assert_eq!(again.unchanged, 6);
    assert_eq!(mem.writes(), 0);

    // A changed document updates exactly its object.
    let path = dir.path().join("dnsrecords.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("192.0.2.11", "192.0.2.12")).unwrap();
    let update = sync.sync_once(&client).await;
    assert_eq!(
        names(&update.updated),
        ["DNSRecord default/www-example-com"]
    );
    assert!(update.created.is_empty() && update.deleted.is_empty());
    let www = stored(&mem, "dnsrecords", "www-example-com").unwrap();
    assert_eq!(www["spec"]["values"], json!(["192.0.2.10", "192.0.2.12"]));
    assert_eq!(www["metadata"]["generation"], 2);

    // A removed document deletes its object; the rest of the file stays.
    let text = std::fs::read_to_string(&path).unwrap();
    let first_doc = text.split("\n---\n").next().unwrap();
    std::fs::write(&path, first_doc).unwrap();
    let removed = sync.sync_once(&client).await;
    assert_eq!(
        names(&removed.deleted),
        ["DNSRecord default/spf-example-com"]
    );
    assert!(stored(&mem, "dnsrecords", "spf-example-com").is_none());
    assert!(stored(&mem, "dnsrecords", "www-example-com").is_some());

    // A removed file deletes all of its objects.
    std::fs::remove_file(dir.path().join("bindtsigkeys.yaml")).unwrap();
    let removed = sync.sync_once(&client).await;
    assert_eq!(
        names(&removed.deleted),
        [
            "BindTSIGKey default/transfer-key",
            "BindTSIGKey default/update-key"
        ]
    );
    assert!(mem.raw_list(V1, "bindtsigkeys").is_empty());
}

#[tokio::test]
async fn objects_the_sync_did_not_apply_are_never_deleted() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "z.yaml", &zone("example-com", "example.com"));
    // Made by someone else (kubectl, external-dns's CRD source, a test).
    let api: kube::Api<bind_operator::api::DNSRecord> =
        kube::Api::default_namespaced(client.clone());
    let foreign: bind_operator::api::DNSRecord =
        bind_operator::yaml::from_str(&record("foreign", "example-com", "f", "192.0.2.7")).unwrap();
    api.create(&Default::default(), &foreign).await.unwrap();

    let mut sync = ManifestSync::new(dir.path());
    let report = sync.sync_once(&client).await;
    assert!(report.deleted.is_empty());
    std::fs::remove_file(dir.path().join("z.yaml")).unwrap();
    let report = sync.sync_once(&client).await;
    assert_eq!(names(&report.deleted), ["BindZone default/example-com"]);
    assert!(stored(&mem, "dnsrecords", "foreign").is_some());
}

#[tokio::test]
async fn a_document_that_breaks_keeps_the_serving_object() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "r.yaml", &record("r1", "z", "r1", "192.0.2.1"));
    write(dir.path(), "s.yaml", &record("s1", "z", "s1", "192.0.2.2"));
    let mut sync = ManifestSync::new(dir.path());
    assert_eq!(sync.sync_once(&client).await.created.len(), 2);

    // r.yaml: schema violation (the object is still named); s.yaml: not YAML.
    write(
        dir.path(),
        "r.yaml",
        &record("r1", "z", "r1", "192.0.2.1").replace("type: A", "type: 5"),
    );
    write(dir.path(), "s.yaml", "apiVersion: [\n");
    let report = sync.sync_once(&client).await;
    assert!(
        report.deleted.is_empty() && report.updated.is_empty(),
        "{report:#?}"
    );
    let files: Vec<String> = report
        .errors
        .iter()
        .map(|e| format!("{} {}", e.at.file.display(), e.problem.as_str()))
        .collect();
    assert_eq!(files, ["r.yaml Invalid", "s.yaml ParseFailed"]);
    assert_eq!(
        stored(&mem, "dnsrecords", "r1").unwrap()["spec"]["type"],
        "A"
    );
    assert!(stored(&mem, "dnsrecords", "s1").is_some());
    assert!(
        !report.pending,
        "a bad document is not retried until it changes"
    );

    // Fixed again: the errors go away, nothing needed re-creating.
    write(dir.path(), "r.yaml", &record("r1", "z", "r1", "192.0.2.1"));
    write(dir.path(), "s.yaml", &record("s1", "z", "s1", "192.0.2.2"));
    let report = sync.sync_once(&client).await;
    assert!(report.errors.is_empty() && !report.changed(), "{report:#?}");
}

#[tokio::test]
async fn an_immutable_field_change_is_refused_once_and_reported() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "z.yaml", &zone("example-com", "example.com"));
    let mut sync = ManifestSync::new(dir.path());
    sync.sync_once(&client).await;

    write(dir.path(), "z.yaml", &zone("example-com", "example.org"));
    let report = sync.sync_once(&client).await;
    assert_eq!(report.errors.len(), 1, "{report:#?}");
    let err = &report.errors[0];
    assert!(err.message.starts_with("update refused"), "{}", err.message);
    assert!(err.message.contains("immutable"), "{}", err.message);
    assert_eq!(
        err.key().unwrap().to_string(),
        "BindZone default/example-com"
    );
    assert_eq!(
        stored(&mem, "bindzones", "example-com").unwrap()["spec"]["zoneName"],
        "example.com"
    );
    // Reported again on the next pass, without another request.
    mem.reset_counts();
    let report = sync.sync_once(&client).await;
    assert_eq!(report.errors.len(), 1);
    assert_eq!(mem.writes(), 0);
}

#[tokio::test]
async fn namespaces_are_created_as_needed_and_kept_while_in_use() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    let in_ns = |ns: &str, name: &str| {
        record(name, "z", name, "192.0.2.1").replace(
            &format!("  name: {name}\nspec"),
            &format!("  name: {name}\n  namespace: {ns}\nspec"),
        )
    };
    write(dir.path(), "dns.yaml", &in_ns("dns", "a"));
    write(
        dir.path(),
        "team-ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n  labels:\n    owner: me\n",
    );
    write(dir.path(), "team.yaml", &in_ns("team", "b"));
    let mut sync = ManifestSync::new(dir.path());
    let report = sync.sync_once(&client).await;
    assert!(report.errors.is_empty(), "{report:#?}");
    assert!(
        mem.raw("v1", "namespaces", None, "dns").is_some(),
        "created for its object"
    );
    let team = mem.raw("v1", "namespaces", None, "team").unwrap();
    assert_eq!(team["metadata"]["labels"]["owner"], "me");
    assert!(mem.raw(V1, "dnsrecords", Some("dns"), "a").is_some());

    // The Namespace document goes, its record stays: the namespace stays.
    std::fs::remove_file(dir.path().join("team-ns.yaml")).unwrap();
    let report = sync.sync_once(&client).await;
    assert!(report.deleted.is_empty(), "{report:#?}");
    assert!(mem.raw(V1, "dnsrecords", Some("team"), "b").is_some());
    assert!(mem.raw("v1", "namespaces", None, "team").is_some());
}

#[tokio::test]
async fn transient_failures_are_retried_and_mark_the_sync_pending() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "r.yaml", &record("r1", "z", "r1", "192.0.2.1"));
    let mut sync = ManifestSync::new(dir.path());
    mem.fail_next(Fault::new(Verb::Patch, "dnsrecords"));
    let report = sync.sync_once(&client).await;
    assert!(report.pending && sync.pending());
    assert!(report.created.is_empty());
    assert_eq!(report.errors.len(), 1);
    assert!(
        report.errors[0].message.contains("will retry"),
        "{}",
        report.errors[0]
    );
    let report = sync.sync_once(&client).await;
    assert!(!report.pending && report.errors.is_empty(), "{report:#?}");
    assert_eq!(names(&report.created), ["DNSRecord default/r1"]);

    // A permanent refusal (422) is reported and not retried every pass.
    write(dir.path(), "q.yaml", &record("q1", "z", "q1", "192.0.2.1"));
    mem.fail_next(
        Fault::new(Verb::Patch, "dnsrecords")
            .status(422, "Invalid")
            .message("no"),
    );
    let report = sync.sync_once(&client).await;
    assert!(!report.pending);
    assert!(
        report.errors[0]
            .message
            .contains("failed to apply: no (422 Invalid)"),
        "{}",
        report.errors[0]
    );
    mem.reset_counts();
    sync.sync_once(&client).await;
    assert_eq!(mem.writes(), 0);
    assert!(stored(&mem, "dnsrecords", "q1").is_none());
}

#[tokio::test]
async fn an_object_held_by_a_finalizer_is_recreated_once_it_is_gone() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "r.yaml", &record("r1", "z", "r1", "192.0.2.1"));
    let mut sync = ManifestSync::new(dir.path());
    sync.sync_once(&client).await;
    let api: kube::Api<bind_operator::api::DNSRecord> =
        kube::Api::default_namespaced(client.clone());
    let finalizer = json!({"metadata": {"finalizers": ["bind.unkin.net/test"]}});
    api.patch(
        "r1",
        &Default::default(),
        &kube::api::Patch::Merge(&finalizer),
    )
    .await
    .unwrap();

    std::fs::remove_file(dir.path().join("r.yaml")).unwrap();
    let report = sync.sync_once(&client).await;
    assert_eq!(names(&report.deleted), ["DNSRecord default/r1"]);
    assert!(stored(&mem, "dnsrecords", "r1").unwrap()["metadata"]["deletionTimestamp"].is_string());

    // Back while the old one still finalizes: pending, not tracked as live.
    write(dir.path(), "r.yaml", &record("r1", "z", "r1", "192.0.2.1"));
    let report = sync.sync_once(&client).await;
    assert!(report.pending && report.created.is_empty(), "{report:#?}");
    let old_uid = stored(&mem, "dnsrecords", "r1").unwrap()["metadata"]["uid"].clone();

    // The controller finishes its cleanup; the next pass creates it afresh.
    let release = json!({"metadata": {"finalizers": null}});
    api.patch(
        "r1",
        &Default::default(),
        &kube::api::Patch::Merge(&release),
    )
    .await
    .unwrap();
    let report = sync.sync_once(&client).await;
    assert_eq!(
        names(&report.created),
        ["DNSRecord default/r1"],
        "{report:#?}"
    );
    assert!(!report.pending);
    let now = stored(&mem, "dnsrecords", "r1").unwrap();
    assert_ne!(now["metadata"]["uid"], old_uid);
    assert!(now["metadata"].get("deletionTimestamp").is_none());
}

#[tokio::test]
async fn resync_puts_back_what_was_changed_behind_the_files_back() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "r.yaml", &record("r1", "z", "r1", "192.0.2.1"));
    let mut sync = ManifestSync::new(dir.path()).with_resync_interval(Duration::ZERO);
    sync.sync_once(&client).await;
    let api: kube::Api<bind_operator::api::DNSRecord> =
        kube::Api::default_namespaced(client.clone());
    api.delete("r1", &Default::default()).await.unwrap();
    assert!(stored(&mem, "dnsrecords", "r1").is_none());

    let report = sync.sync_once(&client).await;
    assert_eq!(names(&report.updated), ["DNSRecord default/r1"]);
    assert!(stored(&mem, "dnsrecords", "r1").is_some());
    // A resync of an unchanged object is a no-op write.
    let rv = mem.resource_version();
    let report = sync.sync_once(&client).await;
    assert!(!report.changed());
    assert_eq!(mem.resource_version(), rv);
}

#[tokio::test]
async fn the_loop_syncs_until_shutdown() {
    let (mem, client) = setup();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "r.yaml", &record("r1", "z", "r1", "192.0.2.1"));
    let mut sync = ManifestSync::new(dir.path());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut stop_tx = Some(stop_tx);
    let mut reports: Vec<SyncReport> = Vec::new();
    let shutdown = async move {
        let _ = stop_rx.await;
    };
    let dir_path = dir.path().to_owned();
    tokio::time::timeout(
        Duration::from_secs(5),
        sync.run(&client, shutdown, |r| {
            reports.push(r.clone());
            if reports.len() == 1 {
                // Change the directory between passes.
                write(&dir_path, "r.yaml", &record("r2", "z", "r2", "192.0.2.2"));
            } else if let Some(tx) = stop_tx.take() {
                let _ = tx.send(());
            }
        }),
    )
    .await
    .expect("the loop stops when shutdown resolves");
    assert_eq!(names(&reports[0].created), ["DNSRecord default/r1"]);
    assert_eq!(names(&reports[1].created), ["DNSRecord default/r2"]);
    assert_eq!(names(&reports[1].deleted), ["DNSRecord default/r1"]);
    assert!(stored(&mem, "dnsrecords", "r1").is_none());
}
