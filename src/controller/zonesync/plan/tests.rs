use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::api::{DNSRecordSpec, DNSRecordStatus, RecordType as ApiType, ZoneRecord};
use crate::api::{REASON_CNAME_CONFLICT, REASON_DELEGATION_CONFLICT, REASON_OCCLUDED};
use crate::bind::nsupdate::build_script;
use crate::bind::{Endpoint, KeyName, TsigAlgorithm, TsigKey, TsigSecret};
use crate::controller::zonesync::diff::{Served, ServedSet, diff};
use crate::render::validate::inline_record;

fn zone() -> ZoneName {
    ZoneName::parse("example.com").unwrap()
}

pub(super) fn n(s: &str) -> DomainName {
    DomainName::parse_absolute(s).unwrap()
}

pub(super) fn t(secs: i64) -> Time {
    Time(jiff::Timestamp::from_second(secs).unwrap())
}

pub(super) fn rec(
    name: &str,
    created: i64,
    owner: &str,
    rtype: ApiType,
    values: &[&str],
) -> DNSRecord {
    let mut r = DNSRecord::new(
        name,
        DNSRecordSpec {
            zone_ref: "z".into(),
            zone_namespace: None,
            name: owner.into(),
            type_: rtype,
            ttl: None,
            values: values.iter().map(|v| v.to_string()).collect(),
        },
    );
    r.metadata.namespace = Some("ns".into());
    r.metadata.creation_timestamp = Some(t(created));
    r.metadata.finalizers = Some(vec![RECORD_FINALIZER.into()]);
    r
}

fn with_status(mut r: DNSRecord, fqdn: &str, rtype: ApiType) -> DNSRecord {
    r.status = Some(DNSRecordStatus {
        fqdn: Some(fqdn.into()),
        record_type: Some(rtype),
        ..Default::default()
    });
    r
}

fn deleting(mut r: DNSRecord) -> DNSRecord {
    r.metadata.deletion_timestamp = Some(t(9_999));
    r
}

struct Fixture {
    zone: ZoneName,
    mname: DomainName,
    nameservers: Vec<DomainName>,
    inline: Vec<ZoneRecord>,
    applied_inline: BTreeSet<RrKey>,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            zone: zone(),
            mname: n("ns1.example.com"),
            nameservers: vec![n("ns1.example.com")],
            inline: Vec::new(),
            applied_inline: BTreeSet::new(),
        }
    }

    /// Plans through the validation production runs: `spec.records`
    /// entries and DNSRecords validated against the zone.
    fn plan(&self, records: Vec<DNSRecord>) -> Desired {
        let records: Vec<Arc<DNSRecord>> = records.into_iter().map(Arc::new).collect();
        let default_ttl = Ttl::new(300).unwrap();
        let inline: Vec<InlineRecord> = self
            .inline
            .iter()
            .map(|r| inline_record(&self.zone, r, default_ttl))
            .collect();
        plan(
            &ZoneInputs {
                zone: &self.zone,
                object_name: "z",
                created: Some(&t(1)),
                default_ttl,
                nameservers: &self.nameservers,
                soa_mname: &self.mname,
                inline: &inline,
                applied_inline: &self.applied_inline,
                access: open_access(),
            },
            &valid_records(&records, &self.zone, default_ttl),
        )
    }
}

fn key(name: &str, rtype: RecordType) -> RrKey {
    (n(name), rtype)
}

fn rejected(d: &Desired, name: &str) -> (&'static str, String) {
    match d.verdicts.get(name) {
        Some(Verdict::Rejected { reason, message }) => (*reason, message.clone()),
        other => panic!("{name}: expected rejection, got {other:?}"),
    }
}

fn serving(r: DNSRecord, fqdn: &str, rtype: ApiType) -> DNSRecord {
    let mut r = with_status(r, fqdn, rtype);
    r.status.as_mut().unwrap().phase = Some(crate::api::Phase::Ready);
    r
}

#[test]
fn new_claimants_of_one_rrset_are_all_refused_whatever_their_age_or_name() {
    let f = Fixture::new();
    let d = f.plan(vec![
        rec("a", 20, "www", ApiType::A, &["192.0.2.1"]),
        rec("b", 10, "www", ApiType::A, &["192.0.2.2"]),
    ]);
    let (ra, ma) = rejected(&d, "a");
    let (rb, mb) = rejected(&d, "b");
    assert_eq!((ra, rb), (REASON_CONFLICT, REASON_CONFLICT));
    assert!(ma.contains("DNSRecord b"), "{ma}");
    assert!(mb.contains("DNSRecord a"), "{mb}");
    assert!(d.rrsets.is_empty(), "nothing of them is served");
}

#[test]
fn the_serving_claimant_keeps_the_rrset_against_older_and_lower_named_ones() {
    let f = Fixture::new();
    let d = f.plan(vec![
        rec("a", 5, "www", ApiType::A, &["6.6.6.6"]),
        serving(
            rec("www", 10, "www", ApiType::A, &["192.0.2.2"]),
            "www.example.com.",
            ApiType::A,
        ),
    ]);
    assert_eq!(
        d.verdicts["www"],
        Verdict::Accepted(key("www.example.com", RecordType::A))
    );
    let (reason, message) = rejected(&d, "a");
    assert_eq!(reason, REASON_CONFLICT);
    assert!(message.contains("DNSRecord www"), "{message}");
    let w = &d.rrsets[&key("www.example.com", RecordType::A)];
    assert_eq!(w.owner, Owner::Record("www".into()));
    // Still serving while its zone is blocked (status Pending): keeps it.
    let mut waiting = serving(
        rec("www", 10, "www", ApiType::A, &["192.0.2.2"]),
        "www.example.com.",
        ApiType::A,
    );
    waiting.status.as_mut().unwrap().phase = Some(crate::api::Phase::Pending);
    let d = f.plan(vec![rec("a", 5, "www", ApiType::A, &["6.6.6.6"]), waiting]);
    assert!(matches!(d.verdicts["www"], Verdict::Accepted(_)));
    // Refused before: its stale fqdn does not make it an incumbent.
    let mut lost = serving(
        rec("a", 5, "www", ApiType::A, &["6.6.6.6"]),
        "www.example.com.",
        ApiType::A,
    );
    let st = lost.status.as_mut().unwrap();
    st.phase = Some(crate::api::Phase::Error);
    st.reason = Some(REASON_CONFLICT.into());
    let d = f.plan(vec![
        lost,
        serving(
            rec("www", 10, "www", ApiType::A, &["192.0.2.2"]),
            "www.example.com.",
            ApiType::A,
        ),
    ]);
    assert!(matches!(d.verdicts["www"], Verdict::Accepted(_)));
    assert_eq!(rejected(&d, "a").0, REASON_CONFLICT);
}

#[test]
fn a_zones_own_records_win_over_a_dnsrecord() {
    let mut f = Fixture::new();
    // ns1's glue inline, as examples/ has it.
    f.inline.push(ZoneRecord {
        name: "ns1".into(),
        type_: ApiType::A,
        ttl: None,
        values: vec!["192.0.2.53".into()],
    });
    let ns1 = key("ns1.example.com", RecordType::A);
    // New together (a fresh start): the inline entry is served, the
    // DNSRecord refused naming it, and the zone keeps its glue.
    let d = f.plan(vec![rec("r", 50, "ns1", ApiType::A, &["192.0.2.1"])]);
    let (reason, message) = rejected(&d, "r");
    assert_eq!(reason, REASON_CONFLICT);
    assert!(message.contains("spec.records[0]"), "{message}");
    assert!(d.inline_errors.is_empty(), "{:?}", d.inline_errors);
    assert_eq!(d.rrsets[&ns1].owner, Owner::Inline(0));
    assert!(d.missing_glue.is_empty());
    // The DNSRecord served the RRset first (the inline entry added
    // later): the zone's entry still wins.
    let d = f.plan(vec![serving(
        rec("r", 50, "ns1", ApiType::A, &["192.0.2.1"]),
        "ns1.example.com.",
        ApiType::A,
    )]);
    assert!(rejected(&d, "r").1.contains("spec.records[0]"));
    assert_eq!(d.rrsets[&ns1].owner, Owner::Inline(0));
    // A CNAME or a delegation by a DNSRecord at ns1 loses too, new or
    // served.
    let d = f.plan(vec![
        rec("c", 50, "ns1", ApiType::CNAME, &["x.example.org."]),
        serving(
            rec("d", 50, "ns1", ApiType::NS, &["ns.x.example.org."]),
            "ns1.example.com.",
            ApiType::NS,
        ),
    ]);
    let (reason, message) = rejected(&d, "c");
    assert_eq!(reason, REASON_CNAME_CONFLICT);
    assert!(message.contains("spec.records[0]"), "{message}");
    assert_eq!(rejected(&d, "d").0, REASON_DELEGATION_CONFLICT);
    assert!(d.inline_errors.is_empty(), "{:?}", d.inline_errors);
    assert_eq!(d.rrsets.keys().collect::<Vec<_>>(), [&ns1]);
    // An inline delegation hides a DNSRecord below it.
    f.inline.push(ZoneRecord {
        name: "sub".into(),
        type_: ApiType::NS,
        ttl: None,
        values: vec!["ns.x.example.org.".into()],
    });
    let d = f.plan(vec![serving(
        rec("below", 50, "www.sub", ApiType::A, &["192.0.2.7"]),
        "www.sub.example.com.",
        ApiType::A,
    )]);
    assert_eq!(rejected(&d, "below").0, REASON_OCCLUDED);
    assert!(d.inline_errors.is_empty(), "{:?}", d.inline_errors);
}

#[test]
fn cname_next_to_another_type_new_together_refuses_both_sides() {
    let f = Fixture::new();
    let d = f.plan(vec![
        rec("addr", 10, "app", ApiType::A, &["192.0.2.1"]),
        rec(
            "alias",
            20,
            "app",
            ApiType::CNAME,
            &["elsewhere.example.org."],
        ),
    ]);
    assert_eq!(rejected(&d, "alias").0, REASON_CNAME_CONFLICT);
    let (reason, message) = rejected(&d, "addr");
    assert_eq!(reason, REASON_CNAME_CONFLICT);
    assert!(message.contains("DNSRecord alias"), "{message}");
    assert!(d.rrsets.is_empty());
    // A serving CNAME keeps its name against new data, and the other way.
    let d = f.plan(vec![
        serving(
            rec("txt", 30, "other", ApiType::CNAME, &["x.example.org."]),
            "other.example.com.",
            ApiType::CNAME,
        ),
        rec("txt2", 1, "other", ApiType::TXT, &["\"hi\""]),
        serving(
            rec("addr", 40, "app", ApiType::A, &["192.0.2.1"]),
            "app.example.com.",
            ApiType::A,
        ),
        rec(
            "alias",
            1,
            "app",
            ApiType::CNAME,
            &["elsewhere.example.org."],
        ),
    ]);
    assert!(matches!(d.verdicts["txt"], Verdict::Accepted(_)));
    assert_eq!(rejected(&d, "txt2").0, REASON_CNAME_CONFLICT);
    assert!(matches!(d.verdicts["addr"], Verdict::Accepted(_)));
    assert_eq!(rejected(&d, "alias").0, REASON_CNAME_CONFLICT);
    assert_eq!(d.rrsets.len(), 2);
}

#[test]
fn records_under_a_delegation_are_occluded_and_a_delegation_over_served_records_is_refused() {
    let f = Fixture::new();
    // A served delegation: a new record below it is Occluded; its glue and
    // its DS are fine.
    let d = f.plan(vec![
        serving(
            rec("sub", 10, "sub", ApiType::NS, &["ns1.sub.example.com."]),
            "sub.example.com.",
            ApiType::NS,
        ),
        rec("glue", 20, "ns1.sub", ApiType::A, &["192.0.2.53"]),
        rec("hidden", 20, "www.sub", ApiType::A, &["192.0.2.80"]),
        rec("at-cut", 20, "sub", ApiType::TXT, &["\"x\""]),
    ]);
    assert!(matches!(d.verdicts["sub"], Verdict::Accepted(_)));
    assert!(matches!(d.verdicts["glue"], Verdict::Accepted(_)));
    let (reason, message) = rejected(&d, "hidden");
    assert_eq!(reason, REASON_OCCLUDED);
    assert!(message.contains("sub.example.com. NS"), "{message}");
    assert_eq!(rejected(&d, "at-cut").0, REASON_OCCLUDED);
    // A new NS at www over a served www A: the NS is refused.
    let d = f.plan(vec![
        serving(
            rec("www", 10, "www", ApiType::A, &["192.0.2.1"]),
            "www.example.com.",
            ApiType::A,
        ),
        rec("evil", 1, "www", ApiType::NS, &["ns.evil.example.org."]),
    ]);
    assert!(matches!(d.verdicts["www"], Verdict::Accepted(_)));
    let (reason, message) = rejected(&d, "evil");
    assert_eq!(reason, REASON_DELEGATION_CONFLICT);
    assert!(message.contains("DNSRecord www"), "{message}");
    // New together: both refused.
    let d = f.plan(vec![
        rec("www", 10, "www", ApiType::A, &["192.0.2.1"]),
        rec("evil", 10, "www", ApiType::NS, &["ns.evil.example.org."]),
    ]);
    assert_eq!(rejected(&d, "www").0, REASON_OCCLUDED);
    assert_eq!(rejected(&d, "evil").0, REASON_DELEGATION_CONFLICT);
    assert!(d.rrsets.is_empty());
}

#[test]
fn more_than_100_values_is_rejected_alone() {
    let f = Fixture::new();
    let many: Vec<String> = (0..101)
        .map(|i| format!("10.0.{}.{}", i / 200, i % 200))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let d = f.plan(vec![
        rec("big", 10, "big", ApiType::A, &many),
        rec("ok", 20, "ok", ApiType::A, &["192.0.2.1"]),
    ]);
    assert_eq!(rejected(&d, "big").0, REASON_TOO_MANY_VALUES);
    assert!(matches!(d.verdicts["ok"], Verdict::Accepted(_)));
}

#[test]
fn zone_qualified_apex_ns_is_unsupported() {
    let f = Fixture::new();
    let d = f.plan(vec![
        rec(
            "apex",
            10,
            "example.com.",
            ApiType::NS,
            &["ns9.example.org."],
        ),
        rec("at", 11, "@", ApiType::NS, &["ns9.example.org."]),
        rec("deleg", 12, "sub", ApiType::NS, &["ns.sub.example.com."]),
    ]);
    assert_eq!(rejected(&d, "apex").0, REASON_APEX_NS_UNSUPPORTED);
    assert_eq!(rejected(&d, "at").0, REASON_APEX_NS_UNSUPPORTED);
    assert!(matches!(d.verdicts["deleg"], Verdict::Accepted(_)));
    // The apex NS comes from spec.nameservers only.
    assert_eq!(d.apex_ns.names, vec![n("ns1.example.com")]);
}

#[test]
fn records_without_our_finalizer_are_not_written() {
    let f = Fixture::new();
    let mut r = rec("new", 10, "www", ApiType::A, &["192.0.2.1"]);
    r.metadata.finalizers = None;
    let d = f.plan(vec![r]);
    assert_eq!(d.verdicts["new"], Verdict::Unmanaged);
    assert!(d.rrsets.is_empty() && d.retired.is_empty());
}

#[test]
fn deleted_and_renamed_records_retire_their_old_rrsets() {
    let f = Fixture::new();
    let gone = deleting(with_status(
        rec("gone", 10, "old", ApiType::A, &["192.0.2.1"]),
        "old.example.com.",
        ApiType::A,
    ));
    let renamed = with_status(
        rec("moved", 11, "new", ApiType::A, &["192.0.2.2"]),
        "was.example.com.",
        ApiType::A,
    );
    // A bad edit keeps the last good RRset serving.
    let broken = with_status(
        rec("broken", 12, "keep", ApiType::MX, &["not an mx"]),
        "keep.example.com.",
        ApiType::MX,
    );
    let d = f.plan(vec![gone, renamed, broken]);
    assert_eq!(d.verdicts["gone"], Verdict::Deleting);
    assert_eq!(rejected(&d, "broken").0, REASON_INVALID_RECORD);
    assert_eq!(
        d.retired,
        BTreeSet::from([
            key("old.example.com", RecordType::A),
            key("was.example.com", RecordType::A),
        ])
    );
}

#[test]
fn a_retired_rrset_claimed_by_someone_else_stays() {
    let f = Fixture::new();
    let gone = deleting(with_status(
        rec("gone", 10, "www", ApiType::A, &["192.0.2.1"]),
        "www.example.com.",
        ApiType::A,
    ));
    let heir = rec("heir", 20, "www", ApiType::A, &["192.0.2.7"]);
    let d = f.plan(vec![gone, heir]);
    assert!(d.retired.is_empty());
    assert!(matches!(d.verdicts["heir"], Verdict::Accepted(_)));
}

#[test]
fn removed_inline_entries_are_retired_only_when_all_are_valid() {
    let mut f = Fixture::new();
    f.applied_inline = BTreeSet::from([
        key("a.example.com", RecordType::A),
        key("b.example.com", RecordType::Txt),
    ]);
    f.inline.push(ZoneRecord {
        name: "a".into(),
        type_: ApiType::A,
        ttl: Some(60),
        values: vec!["192.0.2.1".into()],
    });
    let d = f.plan(vec![]);
    assert_eq!(
        d.retired,
        BTreeSet::from([key("b.example.com", RecordType::Txt)])
    );
    assert_eq!(
        d.inline_owned,
        BTreeSet::from([key("a.example.com", RecordType::A)])
    );
    assert!(d.inline_errors.is_empty());

    f.inline.push(ZoneRecord {
        name: "c".into(),
        type_: ApiType::MX,
        ttl: None,
        values: vec!["bogus".into()],
    });
    let d = f.plan(vec![]);
    assert!(d.retired.is_empty(), "{:?}", d.retired);
    assert_eq!(d.inline_owned.len(), 2);
    assert_eq!(d.inline_errors.len(), 1);
    assert!(d.inline_errors[0].1.starts_with("spec.records[1]"));
}

#[test]
fn inline_apex_ns_feeds_the_nameservers_when_none_are_set() {
    let mut f = Fixture::new();
    f.nameservers.clear();
    f.inline.push(ZoneRecord {
        name: "@".into(),
        type_: ApiType::NS,
        ttl: Some(7200),
        values: vec!["ns2".into(), "ns1.example.org.".into()],
    });
    let d = f.plan(vec![]);
    assert_eq!(
        d.apex_ns.names,
        vec![n("ns1.example.org"), n("ns2.example.com")]
    );
    assert_eq!(d.apex_ns.ttl.get(), 7200);
    assert!(d.rrsets.is_empty() && d.inline_errors.is_empty());

    f.inline.clear();
    assert_eq!(f.plan(vec![]).apex_ns.names, vec![n("ns1.example.com")]);
}

fn served(sets: &[(&str, &str, u32, &[&str])]) -> Served {
    let mut s = Served {
        serial: 7,
        ..Default::default()
    };
    for (name, rtype, ttl, values) in sets {
        s.rrsets.insert(
            (n(name), rtype.to_string()),
            ServedSet {
                ttl: *ttl,
                // As a transfer yields them: the operator's wire form.
                values: values
                    .iter()
                    .map(|v| match rtype.parse::<RecordType>() {
                        Ok(t) => crate::bind::wire::rdata::encode(
                            &crate::bind::Rdata::parse(
                                t,
                                v,
                                &ZoneName::parse("example.com").unwrap(),
                            )
                            .unwrap(),
                        ),
                        Err(_) => v.as_bytes().to_vec(),
                    })
                    .collect(),
            },
        );
    }
    s
}

fn script(batch: &crate::bind::nsupdate::UpdateBatch) -> Option<String> {
    let key = TsigKey {
        name: KeyName::parse("upd").unwrap(),
        algorithm: TsigAlgorithm::HmacSha256,
        secret: TsigSecret::from_bytes(&[0u8; 32]).unwrap(),
    };
    let server = Endpoint::new(std::net::IpAddr::from([127, 0, 0, 1]), 53).unwrap();
    build_script(batch, server, &key)
        .unwrap()
        .map(|s| s.expose_stdin().to_string())
}

#[test]
fn diff_touches_only_owned_rrsets_and_orders_apex_ns() {
    let mut f = Fixture::new();
    f.nameservers = vec![n("ns1.example.com"), n("ns3.example.com")];
    let gone = deleting(with_status(
        rec("gone", 10, "old", ApiType::A, &["192.0.2.1"]),
        "old.example.com.",
        ApiType::A,
    ));
    let d = f.plan(vec![
        rec("www", 11, "www", ApiType::A, &["192.0.2.10", "192.0.2.11"]),
        rec("same", 12, "same", ApiType::TXT, &["\"x\""]),
        gone,
    ]);
    let s = served(&[
        (
            "example.com",
            "NS",
            300,
            &["ns1.example.com.", "ns2.example.com."],
        ),
        ("www.example.com", "A", 300, &["192.0.2.10"]),
        ("same.example.com", "TXT", 300, &["\"x\""]),
        ("old.example.com", "A", 300, &["192.0.2.1"]),
        // Written by someone else (external-dns): never in a batch.
        ("ext.example.com", "A", 60, &["198.51.100.1"]),
        (
            "external-dns.example.com",
            "TXT",
            60,
            &["\"heritage=external-dns\""],
        ),
    ]);
    let text = script(&diff(&zone(), &d, &s)).unwrap();
    assert!(!text.contains("ext.example.com"), "{text}");
    assert!(!text.contains("external-dns"), "{text}");
    assert!(!text.contains("same.example.com"), "{text}");
    assert!(
        text.contains("update delete www.example.com. A\n"),
        "{text}"
    );
    assert!(
        text.contains("update delete old.example.com. A\n"),
        "{text}"
    );
    let add = text
        .find("update add example.com. 300 NS ns3.example.com.")
        .unwrap();
    let del = text
        .find("update delete example.com. NS ns2.example.com.")
        .unwrap();
    assert!(
        add < del,
        "apex NS must be added before the old one is deleted:\n{text}"
    );
    assert!(!text.contains("update delete example.com. NS\n"), "{text}");

    // Once applied, nothing is left to send.
    let mut after = s.clone();
    after.apply(&diff(&zone(), &d, &s));
    assert!(script(&diff(&zone(), &d, &after)).is_none());
    assert!(
        after
            .rrsets
            .contains_key(&(n("ext.example.com"), "A".to_string()))
    );
}

#[test]
fn within_one_second_the_serving_claimant_keeps_its_rrset() {
    let f = Fixture::new();
    let mut serving = with_status(
        rec("zz-serving", 10, "www", ApiType::A, &["192.0.2.1"]),
        "www.example.com.",
        ApiType::A,
    );
    serving.status.as_mut().unwrap().phase = Some(crate::api::Phase::Ready);
    let d = f.plan(vec![
        serving,
        rec("aa-new", 10, "www", ApiType::CNAME, &["x.example.org."]),
        rec("ab-new", 10, "www", ApiType::A, &["192.0.2.2"]),
    ]);
    assert!(matches!(d.verdicts["zz-serving"], Verdict::Accepted(_)));
    assert_eq!(rejected(&d, "aa-new").0, REASON_CNAME_CONFLICT);
    assert_eq!(rejected(&d, "ab-new").0, REASON_CONFLICT);
}

/// The zone's DNSRecords validated against it (`zone` and `default_ttl`
/// from its validated config): what [`super::plan`] takes. Production validates
/// through [`super::PlanMemo`] (the same `dns_record` per object); the plan
/// tests compare the memo against this whole plan.
pub(super) fn valid_records(
    records: &[std::sync::Arc<DNSRecord>],
    zone: &ZoneName,
    default_ttl: Ttl,
) -> Vec<crate::render::validate::ValidRecord> {
    records
        .iter()
        .map(|r| {
            let mut v = crate::render::validate::dns_record(
                r,
                zone,
                default_ttl,
                super::has_record_finalizer(r),
            );
            open_access().apply(r, &mut v);
            v
        })
        .collect()
}

/// Today's rights: the test records' namespace `ns` publishes anything.
pub(super) fn open_access() -> &'static super::super::access::Access {
    static OPEN: std::sync::LazyLock<super::super::access::Access> =
        std::sync::LazyLock::new(|| super::super::access::Access::own_namespace_only("ns"));
    &OPEN
}
