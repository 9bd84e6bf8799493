//! Type changes to and from CNAME (issue 23, item 1) against the real
//! binary's `local` mode and real named, checked with dig on the primary
//! and the secondary: a DNSRecord changed CNAME -> A, A -> CNAME, TXT ->
//! CNAME, and a CNAME and an A swapping names (in one edit and across two)
//! end with the name answering exactly the new data on both pods once the
//! status says Ready, never with an empty name.
//!
//! BIND silently drops (NOERROR) a CNAME added beside other data and other
//! data added beside a CNAME, so these pass only when every UPDATE deletes
//! the old RRset before it adds the new one.

use std::time::{Duration, Instant};

use crate::support_e2e as support;

use bind_operator::local::report::Snapshot;
use support::{Fixture, Local, WAIT, dig, pods_of, record, wait_answer};

/// What `www.example.com.` (an examples/ record) answers for A.
const WWW: [&str; 2] = ["192.0.2.10", "192.0.2.11"];
const WWW_CNAME: &str = "www.example.com.";

fn row<'a>(s: &'a Snapshot, name: &str) -> Option<&'a bind_operator::local::report::ObjectStatus> {
    s.objects.iter().find(|o| o.name == name)
}

fn ready(s: &Snapshot, name: &str) -> bool {
    row(s, name).is_some_and(|o| o.ready)
}

/// `(primary, secondary)` DNS ports of the example cluster.
fn ports(s: &Snapshot) -> (u16, u16) {
    let p = support::primary(s, "example").dns.port();
    let all: Vec<u16> = pods_of(s, "example").iter().map(|p| p.dns.port()).collect();
    assert_eq!(all.len(), 2, "{all:?}");
    let secondary = *all.iter().find(|x| **x != p).expect("a secondary");
    (p, secondary)
}

/// One expected answer: (owner, type, answer lines as dig +short prints).
type Want<'a> = (&'a str, &'a str, Vec<String>);

fn w<'a>(name: &'a str, rtype: &'a str, values: &[&str]) -> Want<'a> {
    let mut v: Vec<String> = values.iter().map(|s| s.to_lowercase()).collect();
    v.sort();
    (name, rtype, v)
}

/// After an edit: waits until the primary no longer answers `old` (the
/// edit reached named), then until the status says every object listed in
/// `objects` is Ready and the session converged; then the primary must
/// answer `wants` at once (Ready means served) and the secondary within
/// the usual wait.
fn settle(local: &Local, old: &Want<'_>, objects: &[&str], wants: &[Want<'_>]) {
    let s = local.status().expect("a status");
    let (primary, secondary) = ports(&s);
    let deadline = Instant::now() + WAIT;
    while dig(primary, old.0, old.1) == old.2 {
        assert!(
            Instant::now() < deadline,
            "{} {} still answers {:?}\n{}",
            old.0,
            old.1,
            old.2,
            local.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    local.wait_status("the edit Ready", |s| {
        s.converged && objects.iter().all(|o| ready(s, o))
    });
    for (name, rtype, values) in wants {
        assert_eq!(
            &dig(primary, name, rtype),
            values,
            "primary: {name} {rtype} while the status says Ready\n{}",
            local.diagnostics()
        );
    }
    for (name, rtype, values) in wants {
        wait_answer(secondary, name, rtype, values, local);
    }
}

#[test]
fn one_record_changing_type_to_and_from_cname_never_empties_its_name() {
    let f = Fixture::examples();
    let alias = "alias.example.com.";
    f.write(
        "alias.yaml",
        &record("alias", "alias", "CNAME", &[WWW_CNAME]),
    );
    let local = f.start(&[]);
    let s = local.wait_all_ready();
    let (primary, secondary) = ports(&s);
    for p in [primary, secondary] {
        wait_answer(p, alias, "CNAME", &[WWW_CNAME.into()], &local);
    }

    // CNAME -> A.
    f.write(
        "alias.yaml",
        &record("alias", "alias", "A", &["192.0.2.40"]),
    );
    settle(
        &local,
        &w(alias, "CNAME", &[WWW_CNAME]),
        &["alias"],
        &[w(alias, "A", &["192.0.2.40"]), w(alias, "CNAME", &[])],
    );

    // A -> CNAME: the A query now follows the alias to www.
    f.write(
        "alias.yaml",
        &record("alias", "alias", "CNAME", &[WWW_CNAME]),
    );
    let chain = [WWW_CNAME, WWW[0], WWW[1]];
    settle(
        &local,
        &w(alias, "A", &["192.0.2.40"]),
        &["alias"],
        &[w(alias, "CNAME", &[WWW_CNAME]), w(alias, "A", &chain)],
    );

    // CNAME -> TXT, then TXT -> CNAME.
    f.write(
        "alias.yaml",
        &record("alias", "alias", "TXT", &["\"hello\""]),
    );
    settle(
        &local,
        &w(alias, "CNAME", &[WWW_CNAME]),
        &["alias"],
        &[w(alias, "TXT", &["\"hello\""]), w(alias, "CNAME", &[])],
    );
    f.write(
        "alias.yaml",
        &record("alias", "alias", "CNAME", &[WWW_CNAME]),
    );
    settle(
        &local,
        &w(alias, "TXT", &["\"hello\""]),
        &["alias"],
        &[
            w(alias, "CNAME", &[WWW_CNAME]),
            // www has no TXT: the chain ends at the alias.
            w(alias, "TXT", &[WWW_CNAME]),
        ],
    );
    assert!(local.stop().success());
}

/// Two DNSRecords in one file, written (and so applied) together.
fn pair(left: (&str, &str, &str), right: (&str, &str, &str)) -> String {
    format!(
        "{}---\n{}",
        record("left", left.0, left.1, &[left.2]),
        record("right", right.0, right.1, &[right.2])
    )
}

#[test]
fn a_cname_and_an_a_swap_names_in_one_edit_and_across_two() {
    let f = Fixture::examples();
    let (l, r) = ("left.example.com.", "right.example.com.");
    let addr = "192.0.2.41";
    f.write(
        "pair.yaml",
        &pair(("left", "CNAME", WWW_CNAME), ("right", "A", addr)),
    );
    let local = f.start(&[]);
    local.wait_all_ready();

    // One edit: the CNAME moves to `right`, the A to `left`.
    f.write(
        "pair.yaml",
        &pair(("right", "CNAME", WWW_CNAME), ("left", "A", addr)),
    );
    settle(
        &local,
        &w(l, "CNAME", &[WWW_CNAME]),
        &["left", "right"],
        &[
            w(l, "A", &[addr]),
            w(l, "CNAME", &[]),
            w(r, "CNAME", &[WWW_CNAME]),
        ],
    );

    // Two edits: first the CNAME moves back to `left`, where the A still
    // is: refused, and the old CNAME keeps serving.
    f.write(
        "pair.yaml",
        &pair(("left", "CNAME", WWW_CNAME), ("left", "A", addr)),
    );
    let s = local.wait_status("the CNAME refused beside the served A", |s| {
        s.converged && row(s, "left").is_some_and(|o| !o.ready && o.reason == "CNAMEConflict")
    });
    let (primary, secondary) = ports(&s);
    for p in [primary, secondary] {
        wait_answer(p, r, "CNAME", &[WWW_CNAME.into()], &local);
        wait_answer(p, l, "A", &[addr.into()], &local);
    }
    // Then the A moves to `right`: both land, nothing is left behind.
    f.write(
        "pair.yaml",
        &pair(("left", "CNAME", WWW_CNAME), ("right", "A", addr)),
    );
    settle(
        &local,
        &w(l, "A", &[addr]),
        &["left", "right"],
        &[
            w(l, "CNAME", &[WWW_CNAME]),
            w(r, "A", &[addr]),
            w(r, "CNAME", &[]),
        ],
    );
    assert!(local.stop().success());
}
