//! The plan with `spec.recordsFrom` applied (see [`crate::controller::zonesync::access`]):
//! granted records served, refused ones claim nothing, a withdrawn grant
//! retires only the record's own RRset, and namespaces meet the conflict
//! rules.

use std::collections::BTreeMap;

use crate::api::{BindZone, DNSRecord, REASON_NOT_ALLOWED};
use crate::bind::{DomainName, ZoneName};
use crate::controller::zonesync::access::{Access, NamespaceLabels};

fn zone(grants: serde_json::Value) -> BindZone {
    let mut z: BindZone = serde_json::from_value(serde_json::json!({
        "apiVersion": "bind.unkin.net/v1alpha1", "kind": "BindZone",
        "metadata": {"name": "example-com", "namespace": "platform"},
        "spec": {"clusterRef": "dns", "zoneName": "example.com", "recordsFrom": grants}
    }))
    .unwrap();
    z.metadata.namespace = Some("platform".into());
    z
}

fn name(n: &str) -> DomainName {
    DomainName::parse_absolute(n).unwrap()
}

fn labels(pairs: &[(&str, &[(&str, &str)])]) -> NamespaceLabels {
    Ok(pairs
        .iter()
        .map(|(ns, l)| {
            (
                ns.to_string(),
                l.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            )
        })
        .collect())
}

/// The zone's plan with these grants, through the memo as production.
fn plan_with(access: &Access, records: &[DNSRecord]) -> crate::controller::zonesync::plan::Desired {
    use crate::bind::Ttl;
    use crate::controller::zonesync::plan::{PlanMemo, ZoneInputs};
    let zn = ZoneName::parse("example.com").unwrap();
    let ns1 = name("ns1.example.com.");
    let records: Vec<std::sync::Arc<DNSRecord>> =
        records.iter().cloned().map(std::sync::Arc::new).collect();
    let d = PlanMemo::default().plan(
        &ZoneInputs {
            zone: &zn,
            object_name: "example-com",
            created: None,
            default_ttl: Ttl::new(300).unwrap(),
            nameservers: std::slice::from_ref(&ns1),
            soa_mname: &ns1,
            inline: &[],
            applied_inline: &Default::default(),
            access,
        },
        0,
        &records,
    );
    std::sync::Arc::unwrap_or_clone(d)
}

fn record(ns: &str, obj: &str, owner: &str, t: &str, value: &str) -> DNSRecord {
    let mut r: DNSRecord = serde_json::from_value(serde_json::json!({
        "apiVersion": "bind.unkin.net/v1alpha1", "kind": "DNSRecord",
        "metadata": {"name": obj, "namespace": ns, "uid": format!("{ns}-{obj}"),
                     "resourceVersion": "1", "finalizers": [crate::controller::zonesync::RECORD_FINALIZER]},
        "spec": {"zoneRef": "example-com", "zoneNamespace": "platform",
                 "name": owner, "type": t, "values": [value]}
    }))
    .unwrap();
    r.metadata.namespace = Some(ns.into());
    r
}

fn served(mut r: DNSRecord, fqdn: &str) -> DNSRecord {
    let t = r.spec.type_;
    r.status = Some(crate::api::DNSRecordStatus {
        phase: Some(crate::api::Phase::Ready),
        fqdn: Some(fqdn.into()),
        record_type: Some(t),
        ..Default::default()
    });
    r
}

fn team_a_grant() -> BindZone {
    zone(serde_json::json!([{"from": "Selector",
        "selector": {"matchLabels": {"team": "a"}},
        "names": ["*.team-a"], "types": ["A", "AAAA", "CNAME"]}]))
}

fn team_labels() -> Option<NamespaceLabels> {
    Some(labels(&[
        ("team-a", &[("team", "a")]),
        ("team-b", &[("team", "b")]),
    ]))
}

fn verdict(
    d: &crate::controller::zonesync::plan::Desired,
    id: &str,
) -> crate::controller::zonesync::plan::Verdict {
    d.verdicts
        .get(id)
        .cloned()
        .unwrap_or_else(|| panic!("no verdict for {id}: {:?}", d.verdicts))
}

fn reason(d: &crate::controller::zonesync::plan::Desired, id: &str) -> &'static str {
    match verdict(d, id) {
        crate::controller::zonesync::plan::Verdict::Rejected { reason, .. } => reason,
        other => panic!("{id}: expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_plan_serves_granted_records_and_refuses_the_rest_by_namespace() {
    use crate::controller::zonesync::plan::Verdict;
    let zn = ZoneName::parse("example.com").unwrap();
    let access = Access::new(&team_a_grant(), &zn, team_labels());
    let d = plan_with(
        &access,
        &[
            record("team-a", "api", "api.team-a", "A", "192.0.2.1"),
            record("team-b", "www", "www", "A", "192.0.2.2"),
            record("team-a", "steal", "www.team-b", "A", "192.0.2.3"),
            record("team-a", "txt", "t.team-a", "TXT", "x"),
        ],
    );
    assert!(matches!(verdict(&d, "team-a/api"), Verdict::Accepted(_)));
    for id in ["team-b/www", "team-a/steal", "team-a/txt"] {
        assert_eq!(reason(&d, id), REASON_NOT_ALLOWED, "{id}");
    }
    assert_eq!(d.rrsets.len(), 1, "only the granted record set is wanted");
    assert!(
        d.retired.is_empty(),
        "nothing was served for the refused ones"
    );
}

#[test]
fn a_removed_grant_takes_the_served_record_set_down_and_never_anothers() {
    use crate::bind::RecordType as T;
    let zn = ZoneName::parse("example.com").unwrap();
    // team-a's record was served; platform serves www.
    let recs = [
        served(
            record("team-a", "api", "api.team-a", "A", "192.0.2.1"),
            "api.team-a.example.com.",
        ),
        served(
            record("platform", "www", "www", "A", "192.0.2.9"),
            "www.example.com.",
        ),
    ];
    let granted = plan_with(&Access::new(&team_a_grant(), &zn, team_labels()), &recs);
    assert_eq!(granted.rrsets.len(), 2);
    // The namespace's labels no longer match: refused, its RRset retired.
    let unlabelled = Some(labels(&[("team-a", &[])]));
    let d = plan_with(&Access::new(&team_a_grant(), &zn, unlabelled), &recs);
    assert_eq!(reason(&d, "team-a/api"), REASON_NOT_ALLOWED);
    assert!(d.retired.contains(&(name("api.team-a.example.com."), T::A)));
    assert!(d.rrsets.contains_key(&(name("www.example.com."), T::A)));
    // A team-b record whose status claims platform's www (forged or
    // stale), refused and then deleted, never retires what platform owns.
    let mut forged = served(
        record("team-b", "www", "www", "A", "192.0.2.2"),
        "www.example.com.",
    );
    let d = plan_with(
        &Access::new(&team_a_grant(), &zn, team_labels()),
        &[recs[1].clone(), forged.clone()],
    );
    assert!(d.retired.is_empty(), "{:?}", d.retired);
    forged.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(9).unwrap(),
        ));
    forged.status = None;
    let d = plan_with(&Access::new(&team_a_grant(), &zn, team_labels()), &[forged]);
    assert!(
        d.retired.is_empty(),
        "a deleted refused record retires nothing: {:?}",
        d.retired
    );
}

#[test]
fn teams_claiming_one_name_follow_the_conflict_rules() {
    use crate::api::REASON_CONFLICT;
    use crate::controller::zonesync::plan::Verdict;
    let zn = ZoneName::parse("example.com").unwrap();
    let both = zone(serde_json::json!([{"from": "All", "names": ["shared"]}]));
    let access = Access::new(&both, &zn, None);
    // New together: all refused.
    let d = plan_with(
        &access,
        &[
            record("team-a", "s", "shared", "A", "192.0.2.1"),
            record("team-b", "s", "shared", "A", "192.0.2.2"),
        ],
    );
    assert_eq!(reason(&d, "team-a/s"), REASON_CONFLICT);
    assert_eq!(reason(&d, "team-b/s"), REASON_CONFLICT);
    // The incumbent keeps it; the newcomer's message names it.
    let d = plan_with(
        &access,
        &[
            served(
                record("team-a", "s", "shared", "A", "192.0.2.1"),
                "shared.example.com.",
            ),
            record("team-b", "s", "shared", "A", "192.0.2.2"),
        ],
    );
    assert!(matches!(verdict(&d, "team-a/s"), Verdict::Accepted(_)));
    match verdict(&d, "team-b/s") {
        Verdict::Rejected { reason, message } => {
            assert_eq!(reason, REASON_CONFLICT);
            assert!(message.contains("DNSRecord team-a/s"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
