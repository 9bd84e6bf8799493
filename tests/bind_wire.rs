//! The operator's own DNS client (`bind::wire`) against a real named 9.18
//! on 127.0.0.1: UPDATE, SOA serials, AXFR and NOTIFY signed with every
//! TSIG algorithm the CRD admits; RRset replaces atomic; CNAME <-> A in one
//! message; the apex NS converged per rdata; batches split below 64 KiB;
//! wrong keys answered with typed errors. What the client reads is checked
//! against what `dig` shows, compared in wire form.

use crate::support_bind as harness;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use bind_operator::bind::commands;
use bind_operator::bind::nsupdate::{ApexNs, RrsetChange, UpdateBatch};
use bind_operator::bind::parse;
use bind_operator::bind::render::render_cluster;
use bind_operator::bind::wire::codec::{TYPE_SOA, name_text};
use bind_operator::bind::wire::rdata::{encode, type_code};
use bind_operator::bind::wire::{Client, Rcode, Record, WireError, update};
use bind_operator::bind::zone::{Soa, ZoneSkeleton};
use bind_operator::bind::{DomainName, Rdata, RecordType, TsigAlgorithm, TsigKey, Ttl, ZoneName};
use harness::{Pod, dig_short, run_ok};

/// One named with one zone per TSIG algorithm, each updated and
/// transferred with its own key of that algorithm.
struct Server {
    pod: Pod,
    keys: BTreeMap<TsigAlgorithm, TsigKey>,
    _tmp: tempfile::TempDir,
}

fn zone_of(alg: TsigAlgorithm) -> ZoneName {
    ZoneName::parse(&format!("{}.wire.test", alg.as_str())).unwrap()
}

impl Server {
    fn start() -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config");
        let mut pod = Pod::new(tmp.path(), &config, 0);
        let keys: BTreeMap<TsigAlgorithm, TsigKey> = TsigAlgorithm::ALL
            .into_iter()
            .map(|a| (a, harness::random_key(&format!("k-{}", a.as_str()), a)))
            .collect();
        let xfer = harness::random_key("xfer", TsigAlgorithm::HmacSha256);
        let update = keys[&TsigAlgorithm::HmacSha256].clone();
        let mut cfg = harness::small_config(pod.endpoint(), &xfer, &update);
        cfg.keys = std::iter::once(xfer.clone())
            .chain(keys.values().cloned())
            .collect();
        harness::write_mount(&config, &render_cluster(&cfg).unwrap());
        pod.start();
        let s = Server {
            pod,
            keys,
            _tmp: tmp,
        };
        for alg in TsigAlgorithm::ALL {
            s.add_zone(&zone_of(alg), &s.keys[&alg]);
        }
        s
    }

    fn add_zone(&self, zone: &ZoneName, key: &TsigKey) {
        let pz = harness::plain_zone(zone.as_str(), key, key);
        let ns1 = DomainName::resolve("ns1", zone).unwrap();
        let skel = ZoneSkeleton {
            zone: zone.clone(),
            default_ttl: Ttl::new(300).unwrap(),
            soa: Soa::defaults_for(zone),
            serial: harness::now_serial(),
            nameservers: vec![ns1.clone()],
            records: vec![(
                ns1,
                RecordType::A,
                Ttl::new(300).unwrap(),
                Rdata::A("192.0.2.53".parse().unwrap()),
            )],
        };
        let l = &self.pod.layout;
        run_ok(&commands::write_zone_file(l, &pz.file(), &skel.render()));
        run_ok(&commands::addzone(l, zone, None, &pz.clause()));
    }

    fn client(&self) -> Client {
        Client::new(SocketAddr::from(([127, 0, 0, 1], self.pod.dns.port)))
    }

    fn port(&self) -> u16 {
        self.pod.dns.port
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn replace(zone: &ZoneName, name: &str, t: &str, values: &[&str]) -> RrsetChange {
    let v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
    RrsetChange::parse_replace(zone, name, t, Some(60), Ttl::new(300).unwrap(), &v).unwrap()
}

fn delete(zone: &ZoneName, name: &str, t: RecordType) -> RrsetChange {
    RrsetChange::Delete {
        name: DomainName::resolve(name, zone).unwrap(),
        rtype: t,
    }
}

fn batch(zone: &ZoneName, changes: Vec<RrsetChange>) -> UpdateBatch {
    UpdateBatch {
        zone: zone.clone(),
        changes,
        apex_ns: None,
    }
}

async fn send(c: &Client, b: &UpdateBatch, key: &TsigKey) -> Result<usize, WireError> {
    c.update(&update::messages(b).unwrap(), key).await
}

/// (owner, type) -> rdata in wire form, SOA left out.
type WireSets = BTreeMap<(String, u16), BTreeSet<Vec<u8>>>;

fn wire_sets(records: &[Record]) -> WireSets {
    let mut out = WireSets::new();
    for r in records.iter().filter(|r| r.rtype != TYPE_SOA) {
        out.entry((name_text(&r.name), r.rtype))
            .or_default()
            .insert(r.rdata.clone());
    }
    out
}

/// What `dig AXFR` shows, every rdata re-encoded to wire form.
fn dig_sets(s: &Server, zone: &ZoneName, key: &TsigKey) -> WireSets {
    let out = run_ok(&commands::dig_axfr(&s.pod.layout, zone, key));
    let mut sets = WireSets::new();
    for set in parse::parse_axfr(&out.stdout, zone).unwrap() {
        let Some(t) = set.record_type() else {
            assert_eq!(set.rtype, "SOA", "a type the test does not expect");
            continue;
        };
        for v in &set.values {
            let rd = Rdata::parse(t, v, zone).unwrap();
            sets.entry((set.name.as_str().to_string(), type_code(t)))
                .or_default()
                .insert(encode(&rd));
        }
    }
    sets
}

#[test]
fn every_tsig_algorithm_updates_reads_and_transfers() {
    let s = Server::start();
    let c = s.client();
    rt().block_on(async {
        for alg in TsigAlgorithm::ALL {
            let zone = zone_of(alg);
            let key = &s.keys[&alg];
            let before = c.serial(&zone, None).await.unwrap().unwrap();
            assert_eq!(
                before,
                harness::dig_serial(s.port(), None, zone.as_str()),
                "{alg}"
            );
            let b = batch(
                &zone,
                vec![
                    replace(&zone, "www", "A", &["192.0.2.1", "192.0.2.2"]),
                    replace(&zone, "t", "TXT", &["\"hello world\" \"two\""]),
                    replace(&zone, "@", "MX", &["10 mail"]),
                    replace(&zone, "_sip._tcp", "SRV", &["1 2 5060 sip"]),
                    replace(&zone, "@", "CAA", &["0 issue \"ca.example\""]),
                    replace(&zone, "svc", "HTTPS", &["1 . alpn=h2,h3 port=8443"]),
                    replace(&zone, "v6", "AAAA", &["2001:db8::1"]),
                    replace(
                        &zone,
                        "n",
                        "NAPTR",
                        &["10 20 \"u\" \"E2U+sip\" \"!^.*$!sip:x@y!\" ."],
                    ),
                    replace(
                        &zone,
                        "loc",
                        "LOC",
                        &["52 22 23.000 N 4 53 32.000 E -2.00m 0.00m 10000m 10m"],
                    ),
                ],
            );
            assert_eq!(send(&c, &b, key).await.unwrap(), 1, "{alg}");
            assert_eq!(
                dig_short(s.port(), &format!("www.{zone}."), "A"),
                ["192.0.2.1", "192.0.2.2"],
                "{alg}"
            );
            let after = c.serial(&zone, Some(key)).await.unwrap().unwrap();
            assert!(after > before, "{alg}: {before} -> {after}");
            assert_eq!(after, harness::dig_serial(s.port(), None, zone.as_str()));
            // The transfer, every message verified, holds what dig shows,
            // byte for byte.
            let records = c.axfr(&zone, key).await.unwrap();
            assert_eq!(wire_sets(&records), dig_sets(&s, &zone, key), "{alg}");
            assert!(wire_sets(&records).contains_key(&(format!("svc.{zone}"), 65)));
        }
    });
}

#[test]
fn replaces_are_atomic_and_cname_a_transitions_land_in_one_message() {
    let s = Server::start();
    let c = s.client();
    let alg = TsigAlgorithm::HmacSha256;
    let (zone, key) = (zone_of(alg), s.keys[&alg].clone());
    let name = format!("www.{zone}.");
    rt().block_on(async {
        send(
            &c,
            &batch(
                &zone,
                vec![replace(&zone, "www", "A", &["192.0.2.1", "192.0.2.2"])],
            ),
            &key,
        )
        .await
        .unwrap();
        send(
            &c,
            &batch(&zone, vec![replace(&zone, "www", "A", &["192.0.2.3"])]),
            &key,
        )
        .await
        .unwrap();
        assert_eq!(dig_short(s.port(), &name, "A"), ["192.0.2.3"]);
        // A -> CNAME: the replace comes first in the batch, the delete of
        // the A after; one message, deletes first.
        let to_cname = batch(
            &zone,
            vec![
                replace(&zone, "www", "CNAME", &["target"]),
                delete(&zone, "www", RecordType::A),
            ],
        );
        assert_eq!(update::messages(&to_cname).unwrap().len(), 1);
        send(&c, &to_cname, &key).await.unwrap();
        assert_eq!(
            dig_short(s.port(), &name, "CNAME"),
            [format!("target.{zone}.")]
        );
        // No A left beside it: an A query is answered by the CNAME alone.
        assert_eq!(dig_short(s.port(), &name, "A"), [format!("target.{zone}.")]);
        // CNAME -> A, again in one message.
        let to_a = batch(
            &zone,
            vec![
                replace(&zone, "www", "A", &["192.0.2.4"]),
                delete(&zone, "www", RecordType::Cname),
            ],
        );
        send(&c, &to_a, &key).await.unwrap();
        assert_eq!(dig_short(s.port(), &name, "A"), ["192.0.2.4"]);
        assert!(dig_short(s.port(), &name, "CNAME").is_empty());
    });
}

#[test]
fn apex_ns_converges_per_rdata_with_glue_in_the_same_message() {
    let s = Server::start();
    let c = s.client();
    let alg = TsigAlgorithm::HmacSha384;
    let (zone, key) = (zone_of(alg), s.keys[&alg].clone());
    let n = |x: &str| DomainName::resolve(x, &zone).unwrap();
    let b = UpdateBatch {
        zone: zone.clone(),
        // ns2's glue comes in the same message as the NS that needs it.
        changes: vec![replace(&zone, "ns2", "A", &["192.0.2.54"])],
        apex_ns: Some(ApexNs {
            ttl: Ttl::new(300).unwrap(),
            wanted: vec![n("ns2")],
            current: vec![n("ns1")],
            current_ttl: Some(Ttl::new(300).unwrap()),
        }),
    };
    rt().block_on(async { send(&c, &b, &key).await.unwrap() });
    assert_eq!(
        dig_short(s.port(), &format!("{zone}."), "NS"),
        [format!("ns2.{zone}.")]
    );
}

#[test]
fn large_batches_split_below_64k_and_land_whole() {
    let s = Server::start();
    let c = s.client();
    let alg = TsigAlgorithm::HmacSha512;
    let (zone, key) = (zone_of(alg), s.keys[&alg].clone());
    let mut changes: Vec<RrsetChange> = (0..3000)
        .map(|i| {
            let ip = format!("10.0.{}.{}", i / 256, i % 256);
            replace(&zone, &format!("host-{i}"), "A", &[&ip])
        })
        .collect();
    // One RRset at BIND's 100-rdata cap, of long strings.
    let long: Vec<String> = (0..100)
        .map(|i| format!("\"{i:03}{}\"", "x".repeat(250)))
        .collect();
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    changes.push(replace(&zone, "big", "TXT", &long));
    let b = batch(&zone, changes);
    let messages = update::messages(&b).unwrap();
    assert!(messages.len() >= 2, "{} message(s)", messages.len());
    rt().block_on(async {
        assert_eq!(c.update(&messages, &key).await.unwrap(), messages.len());
        let records = c.axfr(&zone, &key).await.unwrap();
        let hosts = records
            .iter()
            .filter(|r| r.rtype == 1 && name_text(&r.name).starts_with("host-"))
            .count();
        assert_eq!(hosts, 3000);
        let big = records
            .iter()
            .filter(|r| r.rtype == 16 && name_text(&r.name) == format!("big.{zone}"))
            .count();
        assert_eq!(big, 100);
    });
    assert_eq!(
        dig_short(s.port(), &format!("host-2999.{zone}."), "A"),
        ["10.0.11.183"]
    );
}

#[test]
fn failures_are_typed_and_never_carry_the_secret() {
    let s = Server::start();
    let c = s.client();
    let alg = TsigAlgorithm::HmacSha1;
    let (zone, key) = (zone_of(alg), s.keys[&alg].clone());
    let b = batch(&zone, vec![replace(&zone, "a", "A", &["192.0.2.1"])]);
    rt().block_on(async {
        let code = |r: Result<usize, WireError>, k: &TsigKey| {
            let e = r.unwrap_err();
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains(k.secret.expose_base64()), "{shown}");
            e.rcode()
        };
        let unknown = harness::random_key("nobody", TsigAlgorithm::HmacSha256);
        assert_eq!(
            code(send(&c, &b, &unknown).await, &unknown),
            Some(Rcode::BadKey)
        );
        let wrong_secret = TsigKey {
            secret: harness::random_key("x", alg).secret,
            ..key.clone()
        };
        assert_eq!(
            code(send(&c, &b, &wrong_secret).await, &wrong_secret),
            Some(Rcode::BadSig)
        );
        // Another zone's key is loaded but not granted on this one.
        let other = s.keys[&TsigAlgorithm::HmacMd5].clone();
        assert_eq!(
            code(send(&c, &b, &other).await, &other),
            Some(Rcode::Refused)
        );
        let elsewhere = ZoneName::parse("nothere.test").unwrap();
        let nb = batch(
            &elsewhere,
            vec![replace(&elsewhere, "a", "A", &["192.0.2.1"])],
        );
        assert_eq!(code(send(&c, &nb, &key).await, &key), Some(Rcode::NotAuth));
        // A transfer with a key the zone does not allow.
        let e = c.axfr(&zone, &other).await.unwrap_err();
        assert!(
            matches!(e.rcode(), Some(Rcode::Refused | Rcode::NotAuth)),
            "{e}"
        );
        let e = c.axfr(&zone, &wrong_secret).await.unwrap_err();
        assert_eq!(e.rcode(), Some(Rcode::BadSig), "{e}");
        // Serials: a zone not served is absent, not an error.
        assert_eq!(c.serial(&elsewhere, None).await.unwrap(), None);
        let all: Vec<ZoneName> = TsigAlgorithm::ALL
            .into_iter()
            .map(zone_of)
            .chain([elsewhere.clone()])
            .collect();
        let serials = c.serials(&all, None).await.unwrap();
        assert_eq!(serials.len(), 6);
        // Signed, every answer's signature checked: the same serials.
        assert_eq!(c.serials(&all, Some(&key)).await.unwrap(), serials);
        assert!(!serials.contains_key(&elsewhere));
        assert_eq!(
            serials[&zone],
            harness::dig_serial(s.port(), None, zone.as_str())
        );
        // Nothing listening: a connect error, typed as unreachable.
        let lease = harness::reserve_port();
        let gone = Client::new(SocketAddr::from(([127, 0, 0, 1], lease.port)));
        assert!(gone.serial(&zone, None).await.unwrap_err().is_unreachable());
        // NOTIFY for a zone this server is primary of: acknowledged or
        // refused, but answered and typed.
        match c.notify(&zone, &key).await {
            Ok(()) => {}
            Err(e) => assert!(e.rcode().is_some(), "{e}"),
        }
    });
    assert!(dig_short(s.port(), &format!("a.{zone}."), "A").is_empty());
}

#[test]
fn ixfr_differences_applied_to_the_zone_before_equal_a_transfer_after() {
    use bind_operator::bind::wire::client::Ixfr;
    use bind_operator::controller::zonesync::diff::Served;

    let s = Server::start();
    let c = s.client();
    let alg = TsigAlgorithm::HmacSha384;
    let (zone, key) = (zone_of(alg), s.keys[&alg].clone());
    rt().block_on(async {
        let axfr = |c: Client, zone: ZoneName, key: TsigKey| async move {
            Served::from_records(&zone, &c.axfr(&zone, &key).await.unwrap()).unwrap()
        };
        // The zone as it was loaded from its file: no journal reaches back
        // that far once it changes, so later IXFRs start from a version
        // the server did journal.
        let loaded = axfr(c.clone(), zone.clone(), key.clone()).await;
        assert_eq!(
            c.ixfr(&zone, loaded.serial, &key).await.unwrap(),
            Ixfr::UpToDate,
            "nothing changed since"
        );
        // Enough data that a few changes are a small part of the zone
        // (named answers with the whole zone when the differences would be
        // larger than it: max-ixfr-ratio).
        let mut first: Vec<RrsetChange> = (0..60)
            .map(|i| replace(&zone, &format!("h{i}"), "A", &[&format!("198.51.100.{i}")]))
            .collect();
        first.push(replace(&zone, "www", "A", &["192.0.2.1", "192.0.2.2"]));
        first.push(replace(&zone, "txt", "TXT", &["\"a b\"", "\"c\""]));
        send(&c, &batch(&zone, first), &key).await.unwrap();
        let before = axfr(c.clone(), zone.clone(), key.clone()).await;
        // Two more versions: a replace, a delete and an add, then a TTL
        // change.
        send(
            &c,
            &batch(
                &zone,
                vec![
                    replace(&zone, "www", "A", &["192.0.2.3"]),
                    delete(&zone, "txt", RecordType::Txt),
                    replace(&zone, "mail", "MX", &["10 mx.example.net."]),
                ],
            ),
            &key,
        )
        .await
        .unwrap();
        let ttl = RrsetChange::parse_replace(
            &zone,
            "mail",
            "MX",
            Some(900),
            Ttl::new(900).unwrap(),
            &["10 mx.example.net.".to_string()],
        )
        .unwrap();
        send(&c, &batch(&zone, vec![ttl]), &key).await.unwrap();
        let after = axfr(c.clone(), zone.clone(), key.clone()).await;
        match c.ixfr(&zone, before.serial, &key).await.unwrap() {
            Ixfr::Deltas { serial, deltas } => {
                assert_eq!(serial, after.serial);
                assert_eq!(deltas.len(), 2, "one difference per UPDATE");
                let mut followed = before.clone();
                followed.apply_ixfr(&deltas, serial);
                assert_eq!(
                    followed, after,
                    "the differences lead to the zone as served"
                );
            }
            other => panic!("wanted differences, got {other:?}"),
        }
        // From a version the journal never held: the whole zone.
        match c.ixfr(&zone, 1, &key).await.unwrap() {
            Ixfr::Full(records) => {
                assert_eq!(Served::from_records(&zone, &records).unwrap(), after);
            }
            Ixfr::Deltas { serial, .. } => {
                // named may also answer with the differences it has (they
                // cannot start at serial 1, so nothing can be applied to a
                // zone the client holds); they must still end at the zone
                // as served.
                assert_eq!(serial, after.serial);
            }
            Ixfr::UpToDate => panic!("serial 1 is not the zone's"),
        }
        // A wrong key is refused, typed, as for AXFR.
        let other = s.keys[&TsigAlgorithm::HmacSha256].clone();
        assert!(c.ixfr(&zone, before.serial, &other).await.is_err());
    });
}
