//! The benchmark at a tiny size, so its code cannot rot: 20 DNSRecords
//! over 2 zones through the real controllers and local named, and the
//! 20-record per-record baseline next to it, in one run. Checks the counts and that
//! every number the report gives is there and sane (not the speed).

use std::time::Duration;

use bind_operator::local::bench::{BenchOptions, ScenarioKind, run};

/// Ports away from the local (20000-39999) and e2e (40000-54999) tests' ranges, spread by pid.
fn base_port() -> u16 {
    55_000 + (std::process::id() % 100) as u16 * 40
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_bench_measures_both_paths() {
    let state = tempfile::tempdir().unwrap();
    let opts = BenchOptions {
        records: vec![20],
        zones: 2,
        baseline_records: 20,
        state_dir: Some(state.path().to_path_buf()),
        base_port: base_port(),
        timeout: Duration::from_secs(60),
        samples: 10,
        verbose: false,
        ..Default::default()
    };
    let report = run(&opts).await.expect("the bench runs");

    let kinds: Vec<(ScenarioKind, usize)> = report
        .scenarios
        .iter()
        .map(|s| (s.kind, s.records))
        .collect();
    assert_eq!(
        kinds,
        vec![(ScenarioKind::Batched, 20), (ScenarioKind::Baseline, 20)]
    );
    for s in &report.scenarios {
        let what = format!("{} {}: {s:#?}", s.kind.as_str(), s.records);
        assert!(s.complete(), "{what}");
        assert_eq!(s.zones, 2);
        assert_eq!(s.pods.len(), 2, "{what}");
        assert_eq!(s.pods[0].role, "primary");
        assert_eq!(s.pods[1].role, "secondary");
        for p in &s.pods {
            assert_eq!((p.zones_complete, p.missing), (2, 0), "{what}");
        }
        // Every record written answered: times exist, are ordered and
        // bounded by the timeout.
        let primary = s.primary_secs.unwrap();
        let secondary = s.secondary_secs.unwrap();
        let first_update = s.first_update_secs.expect("an nsupdate ran");
        assert!(first_update <= primary && primary < 60.0, "{what}");
        assert!(first_update <= secondary && secondary < 60.0, "{what}");
        assert!(s.setup_secs > 0.0 && s.applied_secs > 0.0, "{what}");
        assert_eq!(s.sampled, 2 * 10);
        assert_eq!(s.sampled_ok, s.sampled, "{what}");
        assert!(s.process_peak_rss_kib.is_some_and(|k| k > 1024), "{what}");
        assert_eq!(s.named_peak_rss_kib.len(), 2);
        assert!(
            s.named_peak_rss_kib
                .values()
                .all(|k| k.is_some_and(|k| k > 1024)),
            "{what}"
        );
        assert_eq!(s.exec.failed, 0, "{what}");
    }
    let batched = &report.scenarios[0];
    let baseline = &report.scenarios[1];
    // The cluster is the unit of write: the zones' updates share a few
    // nsupdate runs (one per flush round, both zones in it), not one per
    // record; the baseline runs exactly one per record.
    let batched_updates = batched.exec.by_tool["nsupdate"];
    assert!((1..=8).contains(&batched_updates), "{batched:#?}");
    assert_eq!(baseline.exec.by_tool["nsupdate"], 20, "{baseline:#?}");
    assert!(batched.records_ready_secs.is_some() && batched.finalized_secs.is_some());
    assert_eq!(batched.api_writes_by_verb.get("create"), Some(&20));
    assert_eq!(baseline.api_writes, 0, "{baseline:#?}");
    assert!(baseline.records_ready_secs.is_none());

    let c = report.comparison.as_ref().expect("a comparison");
    assert_eq!(c.records, 20);
    assert!(c.speedup.is_some_and(|s| s > 0.0));
    assert_eq!(c.baseline_exec_calls, baseline.exec.calls);
    assert_eq!(report.targets.secondary_met, None, "10,000 was not run");
    let table = report.table();
    assert!(
        table.contains("baseline") && table.contains("x faster"),
        "{table}"
    );
    let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
    assert_eq!(json["scenarios"].as_array().unwrap().len(), 2);
}
