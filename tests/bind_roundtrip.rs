//! Canonical rdata against real named: one RRset of every record type the
//! CRD admits, with the awkward spellings users write (escapes, quoted and
//! multi-string TXT, CAA, SRV, NAPTR, SSHFP/TLSA/DS hex, HTTPS/SVCB
//! parameter lists, LOC, mixed-case names, AAAA forms, odd TTLs), goes
//! through the production path: `render::validate::dns_record` (what the
//! zone plan validates a DNSRecord with) -> `zonesync::diff` against the
//! served zone ->
//! `nsupdate::build_script` -> nsupdate on 127.0.0.1 -> the operator's
//! own signed AXFR (`wire::Client::axfr`, rdata in canonical wire form) ->
//! `Served::from_records` -> `diff` again, which must be empty: nothing to
//! send, the serial stays. Before canonical rdata an
//! HTTPS `alpn=h2,h3` never compared equal to the served `alpn="h2,h3"` and
//! every AXFR rewrote it.

use crate::support_bind as harness;

use std::collections::{BTreeMap, BTreeSet};

use bind_operator::api::dnsrecord::{DNSRecord, DNSRecordSpec};
use bind_operator::bind::commands::{self, local_server};
use bind_operator::bind::nsupdate::build_script;
use bind_operator::bind::render::render_cluster;
use bind_operator::bind::wire::Client;
use bind_operator::bind::zone::{Soa, ZoneSkeleton};
use bind_operator::bind::{DomainName, Rdata, RecordType, TsigAlgorithm, Ttl, ZoneName};
use bind_operator::controller::zonesync::diff::{Served, diff};
use bind_operator::controller::zonesync::plan::{ApexWanted, Desired, Owner, WantedRrset};
use bind_operator::render::validate;
use harness::{Pod, run, run_ok};
use kube::api::ObjectMeta;
use std::net::SocketAddr;

const H20: &str = "abcdef0123456789abcdef0123456789abcdef01";
const H32: &str = "abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789";

/// (owner, type, ttl, values as a user writes them in a DNSRecord).
fn records() -> Vec<(&'static str, &'static str, Option<i64>, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        ("WWW", "A", Some(0), s(&["192.0.2.10", "192.0.2.11"])),
        (
            "www",
            "AAAA",
            Some(1),
            s(&[
                "2001:DB8:0:0:0:0:0:1",
                "::192.0.2.1",
                "::ffff:192.0.2.1",
                "1:0:0:2:0:0:3:4",
                "2001:db8:0:1::",
            ]),
        ),
        ("alias", "CNAME", None, s(&["WWW.Example.ORG."])),
        ("dn", "DNAME", Some(86400), s(&["Other.Example."])),
        (
            "sub",
            "NS",
            None,
            s(&["ns.Other.example.", "ns2.other.example."]),
        ),
        (
            "sub",
            "DS",
            None,
            vec![
                format!("12345 13 2 {H32}"),
                format!("12345 8 1 {}", H20.to_uppercase()),
                format!("54321 13 2 {} {}", &H32[..20], &H32[20..]),
            ],
        ),
        ("ptr", "PTR", None, s(&["Host.Example."])),
        ("@", "MX", None, s(&["10  Mail.Other.ORG.", "20 mail"])),
        (
            "txt",
            "TXT",
            Some(2_147_483_647),
            vec![
                r#""a b" "c\"d" e"#.into(),
                "x".repeat(300),
                r#"say "hi"; {include "x"}"#.into(),
                r#""caf\195\169 \\ \; \@ \( ~""#.into(),
                "café".into(),
                r#""tab\009here" "\127\128\255""#.into(),
                "\"\"".into(),
            ],
        ),
        ("_sip._tcp", "SRV", None, s(&["0 5 5060 Sip", "10 0 0 ."])),
        (
            "@",
            "CAA",
            None,
            s(&[
                "0 issue letsencrypt.org",
                "128 ISSUE \"ca;x\"",
                "0 iodef \"mailto:a@b.c\"",
                r"0 issuewild caf\195\169",
                r#"0 tbs "a \"q\" b""#,
            ]),
        ),
        (
            "ssh",
            "SSHFP",
            None,
            vec![format!("1 1 {H20}"), format!("4 2 {H32}")],
        ),
        (
            "_443._tcp.www",
            "TLSA",
            None,
            vec![
                format!("3 1 1 {H32}"),
                format!("3 0 0 {}", H32.repeat(4)),
                "3 1 0 a b".into(),
            ],
        ),
        (
            "naptr",
            "NAPTR",
            None,
            s(&[
                "100 10 S SIP+D2U \"\" _sip._udp",
                r#"100 10 "u" "E2U+sip" "!^.*$!sip:info@example.com!" ."#,
                r#"100 20 "" "" "!a\\b\"c!x!" ."#,
            ]),
        ),
        (
            "_dns",
            "SVCB",
            None,
            s(&[
                "1 dns.Example. alpn=dot,doq port=853 key65000=\"a b\"",
                "2 svc.example. no-default-alpn alpn=h2 key65001 dohpath=/q{?dns}",
                r#"3 . alpn="a\\,b,c d" mandatory=alpn"#,
                "4 . alpn=h2 dohpath=/dns-query{?dns}",
                r#"5 . key65000="a\"b\\c\009\255" mandatory=key65000,alpn alpn=h3 key7="/dns-query{?dns}""#,
            ]),
        ),
        (
            "www",
            "HTTPS",
            None,
            s(&[
                "1 . alpn=h2,h3 port=443",
                "2 . ALPN=\"h2,h3\" ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:DB8::1,::192.0.2.1 ech=AEX+DQBBfwAgACB/fn8= mandatory=port,alpn port=8443",
                "3 www2 ech=\"\"",
            ]),
        ),
        (
            "loc",
            "LOC",
            None,
            s(&[
                "52 22 23.000 N 4 53 32.000 E -2.00m",
                "52 22 23.5 S 4 53 32.123 W 100.5m 1234m 0.5m 0.01m",
                "90 N 180 W 42849672.95m",
            ]),
        ),
    ]
}

/// The AXFR's RR lines as dig printed them: (owner, type) -> rdata texts.
/// Owner, TTL, class and type are whitespace-separated (dig pads with tabs,
/// but a long TTL is followed by a space); the rdata is the rest as printed.
fn dig_texts(stdout: &str) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for line in stdout.lines().filter(|l| !l.starts_with(';')) {
        let mut rest = line;
        let mut f = [""; 4];
        for x in &mut f {
            rest = rest.trim_start();
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            (*x, rest) = rest.split_at(end);
        }
        if f[2] != "IN" {
            continue;
        }
        out.entry((f[0].to_ascii_lowercase(), f[3].to_string()))
            .or_default()
            .insert(rest.trim().to_string());
    }
    out
}

#[test]
fn every_admitted_type_round_trips_through_named_without_a_rewrite() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let mut pod = Pod::new(tmp.path(), &config, 0);
    let xfer = harness::random_key("xfer", TsigAlgorithm::HmacSha256);
    let update = harness::random_key("update.key", TsigAlgorithm::HmacSha512);
    let cfg = harness::small_config(pod.endpoint(), &xfer, &update);
    harness::write_mount(&config, &render_cluster(&cfg).unwrap());
    pod.start();
    let l = &pod.layout;

    // A primary zone as the operator creates it: skeleton file, addzone.
    let zone = ZoneName::parse("rt.test").unwrap();
    let pz = harness::plain_zone("rt.test", &update, &xfer);
    let ns1 = DomainName::resolve("ns1", &zone).unwrap();
    let default_ttl = Ttl::new(300).unwrap();
    let skel = ZoneSkeleton {
        zone: zone.clone(),
        default_ttl,
        soa: Soa::defaults_for(&zone),
        serial: harness::now_serial(),
        nameservers: vec![ns1.clone()],
        records: vec![(
            ns1.clone(),
            RecordType::A,
            default_ttl,
            Rdata::A("192.0.2.53".parse().unwrap()),
        )],
    };
    run_ok(&commands::write_zone_file(l, &pz.file(), &skel.render()));
    run_ok(&commands::addzone(l, &zone, None, &pz.clause()));

    // The desired set: each RRset a DNSRecord, validated by the function the
    // zone plan validates DNSRecords with.
    let mut desired = Desired {
        rrsets: BTreeMap::new(),
        apex_ns: ApexWanted {
            ttl: default_ttl,
            names: vec![ns1.clone()],
        },
        retired: BTreeSet::new(),
        verdicts: BTreeMap::new(),
        inline_errors: vec![],
        inline_owned: BTreeSet::new(),
        missing_glue: vec![],
    };
    let admitted: BTreeSet<&str> = bind_operator::api::dnsrecord::RecordType::ALL
        .iter()
        .map(|t| t.as_str())
        .collect();
    let mut covered = BTreeSet::new();
    for (owner, t, ttl, values) in records() {
        let object = format!("r-{}-{t}", owner.to_ascii_lowercase()).replace(['.', '@'], "x");
        let record = DNSRecord {
            metadata: ObjectMeta {
                name: Some(object.clone()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: DNSRecordSpec {
                zone_ref: "rt".into(),
                zone_namespace: None,
                name: owner.into(),
                type_: *bind_operator::api::dnsrecord::RecordType::ALL
                    .iter()
                    .find(|r| r.as_str() == t)
                    .unwrap_or_else(|| panic!("{t} is not an admitted type")),
                ttl: ttl.map(|t| u32::try_from(t).expect("a TTL the CRD admits")),
                values,
            },
            status: None,
        };
        let set = validate::dns_record(&record, &zone, default_ttl, true)
            .set
            .unwrap_or_else(|e| panic!("{owner} {t}: {}", e.message));
        covered.insert(set.rtype.as_str());
        desired.rrsets.insert(
            set.key(),
            WantedRrset {
                ttl: set.ttl,
                values: set.values,
                owner: Owner::Record(object),
            },
        );
    }
    assert_eq!(covered, admitted, "one RRset of every admitted type");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let axfr = |what: &str| -> (String, Served) {
        // dig's text for the presentation check below; what the operator
        // compares comes from its own transfer, in wire form.
        let out = run_ok(&commands::dig_axfr(l, &zone, &xfer));
        let client = Client::new(SocketAddr::from(([127, 0, 0, 1], pod.dns.port)));
        let records = rt
            .block_on(client.axfr(&zone, &xfer))
            .unwrap_or_else(|e| panic!("{what}: AXFR failed: {e}"));
        (out.stdout, Served::from_records(&zone, &records).unwrap())
    };

    // First apply: everything is missing, one script sends it all.
    let (_, before) = axfr("before");
    let batch = diff(&zone, &desired, &before);
    assert_eq!(batch.changes.len(), desired.rrsets.len());
    let script = build_script(&batch, local_server(l), &update)
        .unwrap()
        .expect("a first apply sends the records");
    let out = run(&commands::nsupdate(l, &script));
    assert!(
        out.ok(),
        "nsupdate failed: {}\n{}",
        out.stderr,
        pod.log_text()
    );

    // What named serves, read the way the operator reads it.
    let (stdout, served) = axfr("after the apply");
    assert!(served.serial > before.serial, "the apply bumped the serial");
    let again = diff(&zone, &desired, &served);
    let rewritten: Vec<String> = again
        .changes
        .iter()
        .map(|c| {
            let key = (c.name().clone(), c.rtype());
            format!(
                "{} {}: wanted {:?}, served {:?}",
                key.0,
                key.1,
                desired.rrsets[&key]
                    .values
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
                served.get(&key)
            )
        })
        .collect();
    assert!(
        rewritten.is_empty(),
        "served RRsets differ from the desired ones:\n{}",
        rewritten.join("\n")
    );
    assert!(
        build_script(&again, local_server(l), &update)
            .unwrap()
            .is_none(),
        "applying the same set again must send nothing"
    );

    // Stronger than equal after parsing: the operator's text is byte for
    // byte what dig printed, so even a value the parser could not read
    // would compare equal.
    let printed = dig_texts(&stdout);
    for ((name, rtype), w) in &desired.rrsets {
        let ours: BTreeSet<String> = w.values.iter().map(ToString::to_string).collect();
        let theirs = printed
            .get(&(name.fqdn(), rtype.as_str().to_string()))
            .cloned()
            .unwrap_or_default();
        assert_eq!(ours, theirs, "{name} {rtype}: our text vs dig's");
        let served_ttl = served.get(&(name.clone(), *rtype)).map(|s| s.ttl);
        assert_eq!(served_ttl, Some(w.ttl.get()), "{name} {rtype} TTL");
    }
    eprintln!(
        "round trip: {} RRsets of {} types, {} rdata, served at serial {} with an empty diff",
        desired.rrsets.len(),
        covered.len(),
        desired
            .rrsets
            .values()
            .map(|w| w.values.len())
            .sum::<usize>(),
        served.serial
    );

    // A second apply of the same set sends nothing, so the serial stays;
    // read it again after a transfer to be sure nothing moved it.
    let (_, later) = axfr("after a second plan");
    assert_eq!(later.serial, served.serial, "no update, no serial bump");
    assert!(diff(&zone, &desired, &later).changes.is_empty());
}
