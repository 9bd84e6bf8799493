//! The integration suite, one test binary. Every file in `tests/` is a
//! module here rather than its own binary: each test binary links the whole
//! kube stack (~70 MB), and forty of them filled a CI disk. `tests/*.rs`
//! files are not auto-discovered (`autotests = false`);
//! `every_test_file_is_in_the_suite` fails when one is left out.

/// The bench's side-tagging allocator, so `bench_smoke` can check that the
/// operator's memory is counted apart from the in-memory API's (a 16-byte
/// header per allocation; harmless for the other tests).
#[global_allocator]
static ALLOC: bind_operator::local::bench::alloc::TaggingAllocator =
    bind_operator::local::bench::alloc::TaggingAllocator;

#[path = "support/arch/mod.rs"]
mod support_arch;
#[path = "support/bind/mod.rs"]
mod support_bind;
#[path = "support/clock/mod.rs"]
mod support_clock;
#[path = "support/controller/mod.rs"]
mod support_controller;
#[path = "support/e2e/mod.rs"]
mod support_e2e;
#[path = "support/import/mod.rs"]
mod support_import;
#[path = "support/local/mod.rs"]
mod support_local;
#[path = "support/localcli/mod.rs"]
mod support_localcli;
#[path = "support/memapi/mod.rs"]
mod support_memapi;
#[path = "support/ops/mod.rs"]
mod support_ops;
#[path = "support/realapi/mod.rs"]
mod support_realapi;
#[path = "support/zones/mod.rs"]
mod support_zones;

mod api_crds;
mod api_deploy;
mod api_examples;
mod api_types;
mod api_validation;
mod arch_layers;
mod bench_smoke;
mod bind_golden;
mod bind_injection;
mod bind_named;
mod bind_roundtrip;
mod bind_wire;
mod controller_cluster;
mod controller_group_commit;
mod controller_index;
mod controller_invalid_objects;
mod controller_metrics;
mod controller_reasons;
mod controller_reconfig;
mod controller_record_batching;
mod controller_record_delete;
mod controller_record_rules;
mod controller_record_writes;
mod controller_restart;
mod controller_run;
mod controller_scope;
mod controller_secrets;
mod controller_stores;
mod controller_transfer;
mod controller_tsig;
mod controller_zone_batch;
mod controller_zone_dnssec;
mod controller_zone_drift;
mod controller_zone_kinds;
mod controller_zone_lifecycle;
mod controller_zone_named;
mod controller_zone_repair;
mod deploy_monitoring;
mod e2e_acme;
mod e2e_catalog_block;
mod e2e_catalog_consumer;
mod e2e_config;
mod e2e_cross_namespace;
mod e2e_dnssec_keys;
mod e2e_examples;
mod e2e_external;
mod e2e_external_secondaries;
mod e2e_foreign;
mod e2e_hostile;
mod e2e_kubeconfig;
mod e2e_localcli;
mod e2e_metrics;
mod e2e_once_invalid;
mod e2e_records;
mod e2e_restart;
mod e2e_tsig;
mod e2e_type_changes;
mod e2e_views;
mod e2e_zone_owner;
mod import_output;
mod import_roundtrip;
mod local_runtime_cluster;
mod local_runtime_cross_namespace;
mod local_runtime_exec;
mod local_runtime_pods;
mod local_runtime_primary_restart;
mod local_runtime_restart;
mod local_runtime_serving;
mod local_runtime_user;
mod localcli_manifests;
mod localcli_report;
mod localcli_session;
mod localcli_sync;
mod memapi_api;
mod memapi_controller;
mod memapi_lifecycle;
mod memapi_watch;
mod ops_health;
mod ops_leader;
mod ops_serve;
mod pod_secrets;
mod realapi_admission;
mod realapi_crds;
mod realapi_local;
mod realapi_restricted;
mod realapi_run;
mod render_objects;
mod render_offline;

/// A test file that is not declared above would silently never run.
#[test]
fn every_test_file_is_in_the_suite() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let suite = std::fs::read_to_string(dir.join("suite.rs")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if stem != "suite" && !suite.contains(&format!("\nmod {stem};")) {
                missing.push(stem);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "tests/*.rs not declared in tests/suite.rs: {missing:?}"
    );
}
