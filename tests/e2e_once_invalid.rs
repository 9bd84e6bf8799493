//! `--once` with an invalid second BindCluster (issue 23, item 7): the
//! cluster is refused with InvalidSpec and gets no pods, so the session
//! converges (nothing more will happen) and exits 1 at once, instead of
//! waiting for its pods until the timeout and exiting 2.

use std::time::{Duration, Instant};

use crate::support_e2e as support;

use support::{Fixture, STARTUP};

#[test]
fn once_with_an_invalid_second_cluster_exits_one_promptly() {
    let f = Fixture::examples();
    f.write(
        "second.yaml",
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata:\n  name: second\nspec:\n  replicas: 1\n  catalog:\n    transferKeyRef: no-such-key\n",
    );
    let started = Instant::now();
    let local = f.start(&["--once", "--timeout", "90"]);
    let (status, stdout) = local.wait_exit(STARTUP + Duration::from_secs(60));
    let took = started.elapsed();
    assert_eq!(status.code(), Some(1), "{stdout}");
    assert!(
        took < Duration::from_secs(80),
        "waited out the timeout: {took:?}\n{stdout}"
    );
    let verdict = stdout
        .split_once("objects are not Ready:")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no verdict in:\n{stdout}"));
    assert!(
        verdict.contains("BindCluster default/second: Error (InvalidSpec)"),
        "{verdict}"
    );
    assert!(!verdict.contains("example-com"), "{verdict}");
}
