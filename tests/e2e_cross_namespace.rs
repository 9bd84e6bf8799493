//! `bind-operator local -f DIR --once` on a platform/team layout, as a
//! GitOps CI job runs it: Namespaces with their labels, the platform's
//! cluster and zone in `platform`, the teams' DNSRecords in their own
//! namespaces. The granted record is served, the refused one fails the run
//! (exit 1) naming the zone and why (issue 26).

use std::time::Duration;

use crate::support_e2e as support;

use support::STARTUP;

const PLATFORM: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: platform}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {dns.example.com/team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: bind.unkin.net/v1alpha1
kind: BindTSIGKey
metadata: {name: xfer, namespace: platform}
spec: {}
---
apiVersion: bind.unkin.net/v1alpha1
kind: BindCluster
metadata: {name: dns, namespace: platform}
spec:
  replicas: 2
  catalog: {transferKeyRef: xfer}
---
apiVersion: bind.unkin.net/v1alpha1
kind: BindZone
metadata: {name: example-com, namespace: platform}
spec:
  clusterRef: dns
  zoneName: example.com
  updateKeyRef: xfer
  nameservers: [ns1.example.com.]
  records:
    - {name: ns1, type: A, values: [192.0.2.53]}
  recordsFrom:
    - from: Selector
      selector: {matchLabels: {dns.example.com/team: a}}
      names: ['*.team-a']
      types: [A, AAAA, CNAME]
";

const TEAMS: &str = "\
apiVersion: bind.unkin.net/v1alpha1
kind: DNSRecord
metadata: {name: api, namespace: team-a}
spec: {zoneRef: example-com, zoneNamespace: platform, name: api.team-a, type: A, values: [192.0.2.10]}
---
apiVersion: bind.unkin.net/v1alpha1
kind: DNSRecord
metadata: {name: www, namespace: team-b}
spec: {zoneRef: example-com, zoneNamespace: platform, name: www, type: A, values: [192.0.2.99]}
";

#[test]
fn once_on_a_platform_and_teams_tree_serves_the_granted_and_fails_on_the_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("manifests");
    std::fs::create_dir_all(dir.join("teams")).unwrap();
    std::fs::write(dir.join("platform.yaml"), PLATFORM).unwrap();
    std::fs::write(dir.join("teams/records.yaml"), TEAMS).unwrap();
    let ports = crate::support_bind::port_block(support::PORTS);
    let local = support::Local::start(
        &dir,
        &tmp.path().join("state"),
        &ports,
        &["--once", "--timeout", "60"],
    );
    let (status, stdout) = local.wait_exit(STARTUP + Duration::from_secs(40));
    assert_eq!(status.code(), Some(1), "{stdout}");
    let verdict = stdout
        .split_once("objects are not Ready:")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no verdict in:\n{stdout}"));
    assert!(
        verdict.contains("DNSRecord team-b/www: Error (NotAllowed): BindZone platform/example-com"),
        "{verdict}"
    );
    assert!(!verdict.contains("team-a/api"), "{verdict}");
    assert!(
        stdout.contains("DNSRecord team-a/api: Pending -> Ready"),
        "{stdout}"
    );
}
