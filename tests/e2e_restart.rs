//! The primary's named dies and comes back on an empty data volume (as a
//! pod rescheduled onto a fresh emptyDir would): no record is lost. Runs
//! the same wiring as `bind-operator local` in-process (`LocalMode`), since
//! killing a pod's named with a fresh volume needs the runtime's handle.

use crate::support_e2e as support;

use std::path::PathBuf;
use std::time::Duration;

use bind_operator::local::command::Backend;
use bind_operator::local::runtime::RestartData;
use support::{Fixture, blocking, read_status};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_restarted_on_an_empty_volume_loses_no_record() {
    let f = Fixture::examples();
    let mode = support::local_in_process(&f, Backend::InMemory).await;
    let runtime = mode.runtime();
    let stop = CancellationToken::new();
    let serving = tokio::spawn(mode.serve(stop.clone().cancelled_owned()));
    let watch = Watcher::new(&f);

    let snapshot = blocking({
        let w = watch.clone();
        move || w.until("every object and pod Ready", support::all_ready)
    })
    .await;
    let primary = support::primary(&snapshot, "example").clone();
    let data = f.state.join("default").join(&primary.name).join("data");
    let marker = data.join("e2e-marker");
    std::fs::write(&marker, "written before the kill").unwrap();

    runtime
        .kill_named("default", &primary.name, RestartData::Empty)
        .unwrap();
    let name = primary.name.clone();
    let after = blocking({
        let w = watch.clone();
        move || {
            w.until("the primary restarted and everything Ready", move |s| {
                s.pods.iter().any(|p| p.name == name && p.restarts == 1) && support::all_ready(s)
            })
        }
    })
    .await;
    assert!(!marker.exists(), "the primary came back on an empty volume");
    // Every record on every pod, the restarted primary included.
    let (dir, state) = (f.dir.clone(), f.state.clone());
    blocking(move || support::assert_serves_all(state.as_path(), &after, "example", &dir)).await;
    assert_eq!(runtime.pod("default", &primary.name).unwrap().restarts, 1);

    drop(runtime);
    stop.cancel();
    let last = tokio::time::timeout(Duration::from_secs(20), serving)
        .await
        .expect("local mode stops")
        .unwrap();
    assert!(!last.pods.is_empty());
    assert!(
        support::named_under(&f.state).is_empty(),
        "every named stopped"
    );
}

/// Polls status.json of the fixture's state directory.
#[derive(Clone)]
struct Watcher {
    state: PathBuf,
}

impl Watcher {
    fn new(f: &Fixture) -> Self {
        Watcher {
            state: f.state.clone(),
        }
    }

    fn until(
        &self,
        what: &str,
        pred: impl Fn(&bind_operator::local::report::Snapshot) -> bool,
    ) -> bind_operator::local::report::Snapshot {
        let deadline = std::time::Instant::now() + support::STARTUP;
        loop {
            if let Some(s) = read_status(&self.state).filter(|s| pred(s)) {
                return s;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}: {:?}\n{}",
                    read_status(&self.state),
                    support::state_diagnostics(&self.state)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
