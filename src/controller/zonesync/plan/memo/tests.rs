//! The memo against the whole plan: same result, less validated.

use std::collections::BTreeSet;

use super::*;
use crate::api::{DNSRecordStatus, Phase, RecordType as ApiType, ZoneRecord};
use crate::bind::{Ttl, ZoneName};
use crate::controller::zonesync::RECORD_FINALIZER;
use crate::controller::zonesync::plan::tests::{self as plan_tests, n, t};
use crate::render::validate::inline_record;

/// A zone with `spec.records` and the same inputs on every plan.
struct Zone {
    zone: ZoneName,
    mname: DomainName,
    nameservers: Vec<DomainName>,
    inline: Vec<InlineRecord>,
    applied_inline: BTreeSet<RrKey>,
}

impl Zone {
    fn new(inline: &[ZoneRecord]) -> Zone {
        let zone = ZoneName::parse("example.com").unwrap();
        let inline = inline
            .iter()
            .map(|r| inline_record(&zone, r, Ttl::new(300).unwrap()))
            .collect();
        Zone {
            zone,
            mname: n("ns1.example.com"),
            nameservers: vec![n("ns1.example.com")],
            inline,
            applied_inline: BTreeSet::new(),
        }
    }

    fn inputs(&self) -> ZoneInputs<'_> {
        ZoneInputs {
            zone: &self.zone,
            object_name: "z",
            created: None,
            default_ttl: Ttl::new(300).unwrap(),
            nameservers: &self.nameservers,
            soa_mname: &self.mname,
            inline: &self.inline,
            applied_inline: &self.applied_inline,
            access: plan_tests::open_access(),
        }
    }

    /// The whole plan, as made without a memo.
    fn reference(&self, records: &[Arc<DNSRecord>]) -> Desired {
        let z = self.inputs();
        full_plan(
            &z,
            &plan_tests::valid_records(records, z.zone, z.default_ttl),
        )
    }
}

/// The plan tests' record, with the uid and resourceVersion the memo keys on.
fn rec(i: usize, owner: &str, rtype: ApiType, values: &[&str], rv: u64) -> DNSRecord {
    let mut r = plan_tests::rec(&format!("r{i}"), 100 + (i as i64 % 3), owner, rtype, values);
    r.metadata.uid = Some(format!("uid-{i}"));
    r.metadata.resource_version = Some(rv.to_string());
    r
}

#[test]
fn one_changed_record_out_of_many_is_the_one_validated() {
    let z = Zone::new(&[]);
    let mut records: Vec<Arc<DNSRecord>> = (0..500)
        .map(|i| Arc::new(rec(i, &format!("h{i}"), ApiType::A, &["192.0.2.1"], 1)))
        .collect();
    let mut memo = PlanMemo::default();
    let first = memo.plan(&z.inputs(), 7, &records);
    assert_eq!(*first, z.reference(&records));
    assert_eq!(memo.stats().validated, 500);

    // Nothing changed: nothing validated, the same plan.
    let again = memo.plan(&z.inputs(), 7, &records);
    assert_eq!(memo.stats().validated, 500);
    assert_eq!(*again, *first);
    drop((first, again));

    // One record changes its address (a new resourceVersion).
    records[42] = Arc::new(rec(42, "h42", ApiType::A, &["192.0.2.99"], 2));
    let d = memo.plan(&z.inputs(), 7, &records);
    assert_eq!(
        memo.stats().validated,
        501,
        "only the changed record is validated"
    );
    assert_eq!(memo.stats().incremental, 1);
    assert_eq!(*d, z.reference(&records));
    let w = &d.rrsets[&(n("h42.example.com"), RecordType::A)];
    assert_eq!(
        w.values.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["192.0.2.99"]
    );

    // Another basis (the zone object or its cluster changed): all again.
    memo.plan(&z.inputs(), 8, &records);
    assert_eq!(memo.stats().validated, 1001);
    assert_eq!(memo.stats().full, 2);
}

#[test]
fn a_deleted_then_recreated_record_is_never_taken_for_the_old_one() {
    let z = Zone::new(&[]);
    let mut records = vec![Arc::new(rec(1, "www", ApiType::A, &["192.0.2.1"], 5))];
    records
        .extend((2..10).map(|i| Arc::new(rec(i, &format!("h{i}"), ApiType::A, &["192.0.2.1"], 5))));
    let mut memo = PlanMemo::default();
    memo.plan(&z.inputs(), 0, &records);
    // Same name and resourceVersion, another object (uid): validated.
    let mut again = rec(1, "www", ApiType::A, &["192.0.2.7"], 5);
    again.metadata.uid = Some("uid-new".into());
    records[0] = Arc::new(again);
    let d = memo.plan(&z.inputs(), 0, &records);
    assert_eq!(*d, z.reference(&records));
    let w = &d.rrsets[&(n("www.example.com"), RecordType::A)];
    assert_eq!(
        w.values.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["192.0.2.7"]
    );
    // Removed: its RRset leaves the plan (the record is gone, not deleting).
    records.remove(0);
    let d = memo.plan(&z.inputs(), 0, &records);
    assert_eq!(*d, z.reference(&records));
    assert!(!d.verdicts.contains_key("r1"));
}

/// A small deterministic generator (no seed file, same run every time).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }
}

const OWNERS: &[&str] = &[
    "www", "mail", "api", "sub", "a.sub", "b.sub", "x", "ns1", "c",
];

fn random_record(g: &mut Lcg, i: usize, rv: u64) -> DNSRecord {
    let owner = OWNERS[g.next(OWNERS.len())];
    let (rtype, values): (ApiType, Vec<&str>) = match g.next(7) {
        0 | 1 => (ApiType::A, vec![["192.0.2.1", "192.0.2.2"][g.next(2)]]),
        2 => (ApiType::AAAA, vec!["2001:db8::1"]),
        3 => (ApiType::CNAME, vec!["target.example.net."]),
        4 => (ApiType::TXT, vec!["\"hello\""]),
        5 => (ApiType::NS, vec![["ns.other.net.", "a.sub"][g.next(2)]]),
        _ => (ApiType::A, vec!["not an address"]),
    };
    let mut r = rec(i, owner, rtype, &values, rv);
    if g.next(8) == 0 {
        r.metadata.finalizers = None;
    }
    r
}

/// Random edits (creates, spec edits, served and refused statuses,
/// deletions, removals, finalizers) against one memo: after every edit
/// the memo's plan is the whole plan, whatever the conflicts.
#[test]
fn the_memo_plans_what_the_whole_plan_does_under_random_edits() {
    let inlines: [&[ZoneRecord]; 2] = [
        &[],
        &[ZoneRecord {
            name: "mail".into(),
            type_: ApiType::A,
            ttl: None,
            values: vec!["192.0.2.5".into()],
        }],
    ];
    let mut patched = 0;
    for seed in 0..24u64 {
        let mut z = Zone::new(inlines[(seed % 2) as usize]);
        if seed % 4 == 1 {
            z.applied_inline
                .insert((n("mail.example.com"), RecordType::A));
        }
        let mut g = Lcg(seed);
        let mut rv = 1;
        let mut next_id = 0;
        let mut records: Vec<Arc<DNSRecord>> = Vec::new();
        for _ in 0..30 {
            records.push(Arc::new(random_record(&mut g, next_id, rv)));
            next_id += 1;
        }
        let mut memo = PlanMemo::default();
        for step in 0..300 {
            rv += 1;
            let pick = if records.is_empty() {
                0
            } else {
                g.next(records.len())
            };
            match g.next(8) {
                0 => {
                    records.push(Arc::new(random_record(&mut g, next_id, rv)));
                    next_id += 1;
                }
                1 if !records.is_empty() => {
                    let mut r = random_record(&mut g, 0, rv);
                    r.metadata.name = records[pick].metadata.name.clone();
                    r.metadata.uid = records[pick].metadata.uid.clone();
                    r.metadata.creation_timestamp =
                        records[pick].metadata.creation_timestamp.clone();
                    r.status = records[pick].status.clone();
                    records[pick] = Arc::new(r);
                }
                2 | 3 if !records.is_empty() => {
                    // What a status write after the flush says.
                    let d = z.reference(&records);
                    let mut r = (*records[pick]).clone();
                    let name = r.metadata.name.clone().unwrap();
                    r.status = Some(match d.verdicts.get(&name) {
                        Some(Verdict::Accepted(k)) => DNSRecordStatus {
                            fqdn: Some(k.0.fqdn()),
                            record_type: Some(k.1.as_str().parse().unwrap()),
                            phase: Some(Phase::Ready),
                            ..Default::default()
                        },
                        Some(Verdict::Rejected { reason, .. }) => DNSRecordStatus {
                            phase: Some(Phase::Error),
                            reason: Some(reason.to_string()),
                            ..r.status.clone().unwrap_or_default()
                        },
                        _ => r.status.clone().unwrap_or_default(),
                    });
                    r.metadata.resource_version = Some(rv.to_string());
                    records[pick] = Arc::new(r);
                }
                4 if !records.is_empty() => {
                    let mut r = (*records[pick]).clone();
                    r.metadata.deletion_timestamp = Some(t(9_999));
                    r.metadata.resource_version = Some(rv.to_string());
                    records[pick] = Arc::new(r);
                }
                5 if !records.is_empty() => {
                    records.remove(pick);
                }
                6 if !records.is_empty() => {
                    let mut r = (*records[pick]).clone();
                    r.metadata.finalizers = Some(vec![RECORD_FINALIZER.into()]);
                    r.metadata.resource_version = Some(rv.to_string());
                    records[pick] = Arc::new(r);
                }
                _ => {}
            }
            // The store hands records in any order.
            if step % 7 == 0 && records.len() > 1 {
                let i = g.next(records.len());
                records.swap(0, i);
            }
            let d = memo.plan(&z.inputs(), 0, &records);
            assert_eq!(*d, z.reference(&records), "seed {seed} step {step}");
        }
        patched += memo.stats().incremental;
    }
    assert!(patched > 1000, "the patch path ran ({patched} times)");
}
