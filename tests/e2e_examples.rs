//! `bind-operator local` on the repository's examples/, as a user runs it:
//! the real binary, real named processes, answers checked with `dig`.
//! Every record the examples define is served by the primary and the
//! secondary; SIGTERM stops every named; `--once` is the CI verdict (0 on
//! examples/, non-zero naming the culprits on a broken fixture).

use crate::support_e2e as support;

use std::time::Duration;

use crate::support_bind::port_block;
use support::{
    Fixture, Local, STARTUP, assert_serves_all, examples_dir, named_starts, named_under, record,
};

#[test]
fn examples_are_served_by_primary_and_secondary_and_sigterm_stops_every_named() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let ports = port_block(support::PORTS);
    let local = Local::start(&examples_dir(), &state, &ports, &[]);
    let snapshot = local.wait_all_ready();
    assert_eq!(snapshot.pods.len(), 2, "{snapshot:?}");
    assert_serves_all(&local, &snapshot, "example", &examples_dir());

    // The table shows where to dig.
    let table = local.stdout();
    for pod in &snapshot.pods {
        assert!(
            table.contains(&pod.dns.to_string()),
            "{} missing from the table:\n{table}",
            pod.dns
        );
    }
    assert!(!named_under(&state).is_empty());
    let status = local.stop();
    assert!(status.success(), "exit after SIGTERM: {status}");
    for pod in &snapshot.pods {
        assert_eq!(
            named_starts(&state, "default", &pod.name),
            1,
            "{}",
            pod.name
        );
    }
}

#[test]
fn once_on_examples_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let ports = port_block(support::PORTS);
    let local = Local::start(
        &examples_dir(),
        &state,
        &ports,
        &["--once", "--timeout", "40"],
    );
    let (status, stdout) = local.wait_exit(STARTUP + Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("all 6 objects are Ready"), "{stdout}");
    let snapshot = support::read_status(&state).expect("status.json");
    assert!(snapshot.converged && snapshot.objects.iter().all(|o| o.ready));
}

#[test]
fn once_on_a_broken_fixture_exits_non_zero_naming_each_problem() {
    let f = Fixture::examples();
    f.write(
        "bad-record.yaml",
        &record("bad-record", "bad", "A", &["not-an-address"]),
    );
    // Document 2 of this file is not YAML; document 1 is fine.
    f.write(
        "broken.yaml",
        &format!(
            "{}---\nkind: [unclosed\n",
            record("fine-record", "fine", "A", &["192.0.2.77"])
        ),
    );
    let local = f.start(&["--once", "--timeout", "40"]);
    let (status, stdout) = local.wait_exit(STARTUP + Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{stdout}");
    let verdict = stdout
        .split_once("objects are not Ready:")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no verdict in:\n{stdout}"));
    assert!(
        verdict.contains("DNSRecord default/bad-record"),
        "{verdict}"
    );
    assert!(verdict.contains("broken.yaml document 2"), "{verdict}");
    assert!(!verdict.contains("fine-record"), "{verdict}");
    assert!(!verdict.contains("www-example-com"), "{verdict}");
}

#[test]
fn a_missing_directory_or_kubeconfig_fails_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_bind-operator"))
            .arg("local")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let missing = tmp.path().join("nope");
    let (code, err) = run(&["-f", missing.to_str().unwrap()]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("failed to read manifest directory"), "{err}");

    let (code, err) = run(&[
        "-f",
        examples_dir().to_str().unwrap(),
        "--kubeconfig",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("failed to read kubeconfig"), "{err}");
    assert!(named_under(tmp.path()).is_empty());
}
