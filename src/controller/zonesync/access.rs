//! Who may publish what in a zone: `BindZone.spec.recordsFrom` compiled
//! against the zone, and checked for each DNSRecord naming the zone before
//! its plan sees it.
//!
//! Why here, before conflicts: a record no grant allows is refused alone
//! (`NotAllowed`, in its own status, so the team that made it sees why)
//! and claims nothing, so it can neither win a name nor push another
//! namespace's record out. A refused record that was served before gives
//! its RRset up ([`not_allowed`] records retire what their status names),
//! which is how a narrowed grant, or a namespace whose labels stopped
//! matching, takes records off the servers. Its spec's RRset is never
//! retired: a team cannot delete a name it was never granted by creating
//! and deleting a DNSRecord for it.
//!
//! The zone's own namespace keeps every right (as before this existed)
//! unless a grant says `from: Same`; then it is held to the grants too.
//!
//! Pure: the namespace labels are handed in by the caller (read from the
//! operator's Namespace cache only when a grant uses a selector).

use std::collections::BTreeMap;

use kube::ResourceExt as _;

use crate::api::{
    BindZone, DNSRecord, FromNamespaces, LabelOperator, NamespaceSelector as LabelSelector,
    REASON_NOT_ALLOWED, RecordType as ApiRecordType,
};
use crate::bind::{DomainName, RecordType, ZoneName};
use crate::render::validate::{RecordError, ValidRecord};

/// Labels of one namespace.
pub type Labels = BTreeMap<String, String>;

/// Namespace labels as the caller knows them: `Err` says why they are
/// unknown (the operator may not read Namespaces).
pub type NamespaceLabels = Result<BTreeMap<String, Labels>, String>;

/// A zone's `recordsFrom`, compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    zone_ns: String,
    /// `namespace/name` of the BindZone, for messages.
    zone_object: String,
    /// A grant says `from: Same`: the zone's namespace is held to the grants.
    restricts_own: bool,
    grants: Vec<Grant>,
    /// Labels of the namespaces records come from (only when a grant uses
    /// a selector; part of the plan's basis, so a label change replans).
    labels: Option<NamespaceLabels>,
}

#[derive(Debug, Clone, PartialEq)]
struct Grant {
    from: From,
    /// Empty: every name.
    names: Vec<NamePattern>,
    /// Empty: every type.
    types: Vec<ApiRecordType>,
    /// The grant's names as written, for messages.
    written: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum From {
    Same,
    All,
    Selector(LabelSelector),
}

#[derive(Debug, Clone, PartialEq)]
enum NamePattern {
    Exact(DomainName),
    /// Strictly below the name.
    Below(DomainName),
}

/// The key a zone's plan knows a DNSRecord by: its name in the zone's own
/// namespace, `namespace/name` from any other (a `/` is in no object name,
/// so the two never meet).
pub fn record_id(zone_ns: &str, r: &DNSRecord) -> String {
    let ns = r.namespace().unwrap_or_default();
    if ns == zone_ns {
        r.name_any()
    } else {
        format!("{ns}/{}", r.name_any())
    }
}

/// Whether any grant of the zone selects namespaces by label (only then
/// does the operator read Namespaces).
pub fn uses_selector(zone: &BindZone) -> bool {
    zone.spec
        .records_from
        .iter()
        .any(|g| g.from == FromNamespaces::Selector)
}

/// Whether the plan refused the record for want of a grant: it claims
/// nothing, and gives up the RRset its status names.
pub fn not_allowed(v: &ValidRecord) -> bool {
    v.set
        .as_ref()
        .is_err_and(|e| e.reason == REASON_NOT_ALLOWED)
}

fn pattern(text: &str, zone: &ZoneName) -> Option<NamePattern> {
    if text == "*" {
        return Some(NamePattern::Below(zone.as_domain().clone()));
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        return DomainName::resolve(suffix, zone)
            .ok()
            .map(NamePattern::Below);
    }
    DomainName::resolve(text, zone).ok().map(NamePattern::Exact)
}

impl NamePattern {
    fn covers(&self, name: &DomainName) -> bool {
        match self {
            NamePattern::Exact(n) => n == name,
            NamePattern::Below(n) => name != n && name.is_within(n),
        }
    }
}

impl Access {
    /// Compiles `zone`'s grants (`zone_name`: its validated name). A name
    /// pattern that does not resolve inside the zone covers nothing.
    /// `labels`: the labels of the record namespaces, needed only when
    /// [`uses_selector`].
    pub fn new(zone: &BindZone, zone_name: &ZoneName, labels: Option<NamespaceLabels>) -> Self {
        let grants: Vec<Grant> = zone
            .spec
            .records_from
            .iter()
            .map(|g| Grant {
                from: match g.from {
                    FromNamespaces::Same => From::Same,
                    FromNamespaces::All => From::All,
                    FromNamespaces::Selector => {
                        From::Selector(g.selector.clone().unwrap_or_default())
                    }
                },
                names: g
                    .names
                    .iter()
                    .filter_map(|n| pattern(n, zone_name))
                    .collect(),
                types: g.types.clone(),
                written: g.names.clone(),
            })
            .collect();
        Access {
            zone_ns: zone.namespace().unwrap_or_default(),
            zone_object: format!(
                "{}/{}",
                zone.namespace().unwrap_or_default(),
                zone.name_any()
            ),
            restricts_own: grants.iter().any(|g| g.from == From::Same),
            grants,
            labels: if uses_selector(zone) { labels } else { None },
        }
    }

    /// Today's rights only: the zone's own namespace, everything.
    pub fn own_namespace_only(zone_ns: &str) -> Self {
        Access {
            zone_ns: zone_ns.to_string(),
            zone_object: zone_ns.to_string(),
            restricts_own: false,
            grants: Vec::new(),
            labels: None,
        }
    }

    fn selects(&self, sel: &LabelSelector, ns: &str) -> bool {
        match &self.labels {
            Some(Ok(all)) => all.get(ns).is_some_and(|l| matches(sel, l)),
            _ => false,
        }
    }

    fn for_namespace<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = &'a Grant> + 'a {
        self.grants.iter().filter(move |g| match &g.from {
            From::Same => ns == self.zone_ns,
            From::All => true,
            From::Selector(sel) => self.selects(sel, ns),
        })
    }

    /// Whether DNSRecords of `ns` may publish `name` with `rtype`; the
    /// refusal says why, naming the zone.
    pub fn check(&self, ns: &str, name: Option<(&DomainName, RecordType)>) -> Result<(), String> {
        if ns == self.zone_ns && !self.restricts_own {
            return Ok(());
        }
        let grants: Vec<&Grant> = self.for_namespace(ns).collect();
        let unknown = match &self.labels {
            Some(Err(why)) => format!(" (namespace labels are unknown: {why})"),
            _ => String::new(),
        };
        if grants.is_empty() {
            return Err(format!(
                "BindZone {} does not accept DNSRecords from namespace {ns}: no grant in its spec.recordsFrom covers that namespace{unknown}",
                self.zone_object
            ));
        }
        let Some((name, rtype)) = name else {
            return Ok(());
        };
        let covered = grants.iter().any(|g| {
            (g.names.is_empty() && g.written.is_empty() || g.names.iter().any(|p| p.covers(name)))
                && (g.types.is_empty() || g.types.iter().any(|t| t.as_str() == rtype.as_str()))
        });
        if covered {
            return Ok(());
        }
        let offered: Vec<String> = grants
            .iter()
            .map(|g| {
                let names = if g.written.is_empty() {
                    "any name".to_string()
                } else {
                    g.written.join(", ")
                };
                let types = if g.types.is_empty() {
                    "any type".to_string()
                } else {
                    g.types
                        .iter()
                        .map(|t| t.as_str())
                        .collect::<Vec<_>>()
                        .join("/")
                };
                format!("{names} ({types})")
            })
            .collect();
        Err(format!(
            "BindZone {} does not let namespace {ns} publish {} {}: its spec.recordsFrom grants that namespace only {}{unknown}",
            self.zone_object,
            name.fqdn(),
            rtype,
            offered.join("; ")
        ))
    }

    /// Applies the grants to a validated DNSRecord: its plan key becomes
    /// [`record_id`], and a record its namespace may not publish is
    /// refused as `NotAllowed`.
    pub fn apply(&self, r: &DNSRecord, v: &mut ValidRecord) {
        let ns = r.namespace().unwrap_or_default();
        v.object_name = record_id(&self.zone_ns, r);
        let wanted = v.set.as_ref().ok().map(|s| (&s.name, s.rtype));
        if let Err(message) = self.check(&ns, wanted) {
            v.set = Err(RecordError {
                reason: REASON_NOT_ALLOWED,
                message,
            });
        }
    }
}

/// Whether `labels` satisfy `sel` (as a Kubernetes label selector).
pub fn matches(sel: &LabelSelector, labels: &Labels) -> bool {
    let by_labels = sel
        .match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = sel.match_expressions.iter().all(|e| {
        let have = labels.get(&e.key);
        match e.operator {
            LabelOperator::In => have.is_some_and(|v| e.values.contains(v)),
            LabelOperator::NotIn => have.is_none_or(|v| !e.values.contains(v)),
            LabelOperator::Exists => have.is_some(),
            LabelOperator::DoesNotExist => have.is_none(),
        }
    });
    by_labels && by_expressions
}

#[cfg(test)]
mod tests {
    use super::*;

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
                        .collect(),
                )
            })
            .collect())
    }

    #[test]
    fn grants_cover_namespaces_names_and_types() {
        let z = zone(serde_json::json!([
            {"from": "Selector", "selector": {"matchLabels": {"dns": "team-a"}},
             "names": ["*.team-a", "api"], "types": ["A", "AAAA", "CNAME"]},
            {"from": "All", "names": ["_acme-challenge"], "types": ["TXT"]}
        ]));
        let zn = ZoneName::parse("example.com").unwrap();
        let a = Access::new(
            &z,
            &zn,
            Some(labels(&[("team-a", &[("dns", "team-a")]), ("team-b", &[])])),
        );
        let ok = |ns, n: &str, t| a.check(ns, Some((&name(n), t)));
        assert!(ok("team-a", "www.team-a.example.com.", RecordType::A).is_ok());
        assert!(ok("team-a", "x.y.team-a.example.com.", RecordType::Cname).is_ok());
        assert!(ok("team-a", "api.example.com.", RecordType::Aaaa).is_ok());
        // `*.team-a` is below team-a, not team-a itself.
        let e = ok("team-a", "team-a.example.com.", RecordType::A).unwrap_err();
        assert!(
            e.contains("platform/example-com") && e.contains("*.team-a, api"),
            "{e}"
        );
        assert!(ok("team-a", "www.team-a.example.com.", RecordType::Txt).is_err());
        assert!(ok("team-a", "www.team-b.example.com.", RecordType::A).is_err());
        let e = ok("team-b", "www.example.com.", RecordType::A).unwrap_err();
        assert!(e.contains("team-b"), "{e}");
        // The zone's own namespace keeps every right.
        assert!(ok("platform", "www.example.com.", RecordType::Mx).is_ok());
        // Labels unknown: the selector grant covers nobody, and says so.
        let blind = Access::new(&z, &zn, Some(Err("forbidden".into())));
        let e = blind
            .check(
                "team-a",
                Some((&name("www.team-a.example.com."), RecordType::A)),
            )
            .unwrap_err();
        assert!(e.contains("labels are unknown: forbidden"), "{e}");
    }

    #[test]
    fn a_same_grant_holds_the_own_namespace_to_the_grants() {
        let z = zone(serde_json::json!([{"from": "Same", "names": ["@", "www"]}]));
        let zn = ZoneName::parse("example.com").unwrap();
        let a = Access::new(&z, &zn, None);
        assert!(
            a.check("platform", Some((&name("www.example.com."), RecordType::A)))
                .is_ok()
        );
        assert!(
            a.check(
                "platform",
                Some((&name("mail.example.com."), RecordType::A))
            )
            .is_err()
        );
        assert!(
            a.check("team-a", Some((&name("www.example.com."), RecordType::A)))
                .is_err()
        );
        let open = Access::own_namespace_only("platform");
        assert!(open.check("platform", None).is_ok());
        assert!(open.check("team-a", None).is_err());
    }

    #[test]
    fn selector_expressions() {
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["web", "api"]},
                {"key": "frozen", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        let l = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(matches(&sel, &l(&[("tier", "web")])));
        assert!(!matches(&sel, &l(&[("tier", "db")])));
        assert!(!matches(&sel, &l(&[("tier", "web"), ("frozen", "1")])));
        assert!(matches(&LabelSelector::default(), &l(&[])));
    }

    /// The zone's plan with these grants, through the memo as production.
    fn plan_with(
        access: &Access,
        records: &[DNSRecord],
    ) -> crate::controller::zonesync::plan::Desired {
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
}
