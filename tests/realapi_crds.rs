//! The real API server accepts every CRD the project ships, the way users
//! install them: `kubectl apply -f crds/` and `kubectl apply -k
//! deploy/kustomize/base`. Each CRD becomes Established and the server
//! prints no warning (kubectl shows the server's warnings on stderr, e.g.
//! `unrecognized format "uint32"`). The API server also estimates the cost
//! of every CEL rule and refuses the whole CRD when it is too high, which no
//! client-side check reproduces exactly; this is the test that fails then.
//! Opt-in: see tests/support/realapi.

use crate::support_realapi as support;

/// Lines of kubectl's stderr that are warnings from the server.
fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.to_lowercase().contains("warning"))
        .collect()
}

#[test]
fn realapi_every_crd_is_established_without_warnings() {
    let Some(lane) = support::lane("realapi_every_crd_is_established_without_warnings") else {
        return;
    };
    // kubectl apply -f crds/ (the README's plain install): the server-side
    // dry-run first, so a refused CRD is reported before anything changes.
    let crds = support::repo().join("crds");
    let dir = crds.to_str().unwrap();
    let crds_applied = support::crd_lock();
    for args in [
        &["apply", "--dry-run=server", "-f", dir][..],
        &["apply", "-f", dir][..],
    ] {
        let out = lane.kubectl(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "kubectl {} failed:\n{}{stderr}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(
            warnings(&stderr),
            Vec::<&str>::new(),
            "kubectl {} printed warnings",
            args.join(" ")
        );
    }
    drop(crds_applied);

    // kubectl apply -k deploy/kustomize/base (the operator's install).
    let installed = lane.install();
    assert!(
        installed.ok,
        "kubectl apply -k deploy/kustomize/base failed:\n{}{}",
        installed.stdout, installed.stderr
    );
    assert_eq!(
        warnings(&installed.stderr),
        Vec::<&str>::new(),
        "kubectl apply -k deploy/kustomize/base printed warnings"
    );

    let names = support::crd_names();
    assert_eq!(names.len(), 4, "crds/ holds the four kinds: {names:?}");
    for name in &names {
        let crd = lane
            .get("default", "crd", name)
            .unwrap_or_else(|| panic!("CRD {name} missing after install"));
        let conditions = crd["status"]["conditions"].as_array().unwrap();
        let status = |t: &str| {
            conditions
                .iter()
                .find(|c| c["type"] == t)
                .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
        };
        assert_eq!(
            status("Established").as_deref(),
            Some("True"),
            "{name}: {crd}"
        );
        assert_eq!(
            status("NamesAccepted").as_deref(),
            Some("True"),
            "{name}: {crd}"
        );
        support::say(&format!("realapi: CRD {name} Established"));
    }
    // The kinds are served: a list works for each.
    for kind in ["bindclusters", "bindzones", "dnsrecords", "bindtsigkeys"] {
        lane.ok(&["get", kind, "-A"]);
    }
}
