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
}
