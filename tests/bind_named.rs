//! The BIND layer against real named: two pods started through the rendered
//! entrypoint on 127.0.0.1, a catalog that hands a zone to the secondary
//! over TSIG, nsupdate batches, apex NS convergence, a broken reconfig, and
//! typed nsupdate errors. Every assertion is what `dig` or a BIND tool shows.

use crate::support_bind as harness;

use std::time::{Duration, Instant};

use bind_operator::bind::commands::{self, local_server};
use bind_operator::bind::nsupdate::{
    ApexNs, RrsetChange, UpdateBatch, build_script, catalog_add_member, catalog_remove_member,
};
use bind_operator::bind::parse::{self, NsupdateError};
use bind_operator::bind::render::{ClusterConfig, RenderedFiles, render_cluster};
use bind_operator::bind::zone::{
    PrimaryZone, Soa, ZoneSkeleton, catalog_primary_zone, catalog_skeleton,
};
use bind_operator::bind::{DomainName, Rdata, RecordType, TsigAlgorithm, TsigKey, Ttl, ZoneName};
use harness::{Pod, dig_short, run, run_ok, wait_until};

/// How fast a secondary must follow the primary (NOTIFY, notify-delay 0).
const FOLLOW: Duration = Duration::from_secs(5);

struct Cluster {
    primary: Pod,
    secondary: Option<Pod>,
    cfg: ClusterConfig,
    files: RenderedFiles,
    xfer: TsigKey,
    update: TsigKey,
    _tmp: tempfile::TempDir,
}

impl Cluster {
    fn start(with_secondary: bool) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config");
        let mut primary = Pod::new(tmp.path(), &config, 0);
        let mut secondary = with_secondary.then(|| Pod::new(tmp.path(), &config, 1));
        let xfer = harness::random_key("xfer", TsigAlgorithm::HmacSha256);
        let update = harness::random_key("update.key", TsigAlgorithm::HmacSha512);
        let cfg = harness::small_config(primary.endpoint(), &xfer, &update);
        let files = render_cluster(&cfg).unwrap();
        harness::write_mount(&config, &files);
        primary.start();
        if let Some(s) = secondary.as_mut() {
            s.start();
        }
        // Zones, the catalog included, are added at run time.
        let l = &primary.layout;
        let notify: Vec<_> = secondary.iter().map(Pod::endpoint).collect();
        run_ok(&commands::write_notify_targets(l, &notify, &xfer.name, &[]));
        let cat = catalog_primary_zone(&cfg.catalog_zone, None, &xfer.name);
        let skel = catalog_skeleton(&cfg.catalog_zone, harness::now_serial());
        run_ok(&commands::write_zone_file(l, &cat.file(), &skel.render()));
        run_ok(&commands::addzone(l, &cat.zone, None, &cat.clause()));
        Cluster {
            primary,
            secondary,
            cfg,
            files,
            xfer,
            update,
            _tmp: tmp,
        }
    }

    fn secondary(&self) -> &Pod {
        self.secondary.as_ref().unwrap()
    }

    /// Creates a primary zone (file first, then addzone) with ns1 + glue,
    /// and makes it a catalog member.
    fn add_zone(&self, name: &str) -> ZoneName {
        let zone = ZoneName::parse(name).unwrap();
        let pz = harness::plain_zone(name, &self.update, &self.xfer);
        let ns1 = DomainName::resolve("ns1", &zone).unwrap();
        let skel = ZoneSkeleton {
            zone: zone.clone(),
            default_ttl: Ttl::new(300).unwrap(),
            soa: Soa::defaults_for(&zone),
            serial: harness::now_serial(),
            nameservers: vec![ns1.clone()],
            records: vec![(
                ns1,
                RecordType::A,
                Ttl::new(300).unwrap(),
                Rdata::A("192.0.2.53".parse().unwrap()),
            )],
        };
        let l = &self.primary.layout;
        run_ok(&commands::write_zone_file(l, &pz.file(), &skel.render()));
        run_ok(&commands::addzone(l, &zone, None, &pz.clause()));
        self.update_catalog(vec![catalog_add_member(&self.cfg.catalog_zone, &zone)]);
        zone
    }

    fn update_catalog(&self, changes: Vec<RrsetChange>) {
        let batch = UpdateBatch {
            zone: self.cfg.catalog_zone.clone(),
            changes,
            apex_ns: None,
        };
        let script = build_script(&batch, local_server(&self.primary.layout), &self.xfer)
            .unwrap()
            .unwrap();
        run_ok(&commands::nsupdate(&self.primary.layout, &script));
    }

    fn send(&self, batch: &UpdateBatch) -> harness::Output {
        let script = build_script(batch, local_server(&self.primary.layout), &self.update)
            .unwrap()
            .unwrap();
        run(&commands::nsupdate(&self.primary.layout, &script))
    }

    fn axfr(&self, zone: &ZoneName) -> Vec<parse::ServedRrset> {
        let out = run_ok(&commands::dig_axfr(&self.primary.layout, zone, &self.xfer));
        parse::parse_axfr(&out.stdout, zone).unwrap()
    }
}

fn replace(zone: &ZoneName, name: &str, t: &str, values: &[&str]) -> RrsetChange {
    let v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
    RrsetChange::parse_replace(zone, name, t, Some(60), Ttl::new(300).unwrap(), &v).unwrap()
}

fn expected(zone: &ZoneName, t: &str, values: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = values
        .iter()
        .map(|s| {
            Rdata::parse(t.parse().unwrap(), s, zone)
                .unwrap()
                .to_string()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn catalog_hands_zone_to_secondary_and_record_batches_land() {
    let c = Cluster::start(true);
    let (p, s) = (&c.primary, c.secondary());
    for pod in [p, s] {
        assert!(
            run(&commands::probe(&pod.layout)).ok(),
            "probe must pass on a serving pod"
        );
        let out = run(&commands::checkconf(&pod.layout, false));
        assert!(out.ok(), "checkconf failed: {}", out.stdout);
        assert!(parse::parse_checkconf(&out.stdout).is_empty());
    }

    // The secondary learns the zone from the catalog, over TSIG, quickly.
    let t0 = Instant::now();
    let zone = c.add_zone("example.test");
    let learned = wait_until(FOLLOW, || {
        let out = run(&commands::dig_soa(&s.layout, std::slice::from_ref(&zone)));
        parse::parse_dig_soa(&out.stdout).contains_key(&zone)
    });
    assert!(
        learned,
        "secondary did not learn the zone within {FOLLOW:?}:\n{}",
        s.log_text()
    );
    eprintln!("secondary learned the zone in {:?}", t0.elapsed());

    // One batch with every common type lands in one message.
    let long_txt = "x".repeat(300);
    let quoted = r#"say "hi"; {include "x"}"#;
    let records: Vec<(&str, &str, Vec<&str>)> = vec![
        ("www", "A", vec!["192.0.2.10", "192.0.2.11"]),
        ("www", "AAAA", vec!["2001:db8::10"]),
        ("alias", "CNAME", vec!["www"]),
        ("@", "MX", vec!["10 mail.example.test."]),
        ("long", "TXT", vec![long_txt.as_str()]),
        ("quoted", "TXT", vec![quoted]),
        ("_sip._tcp", "SRV", vec!["0 5 5060 sip"]),
        ("@", "CAA", vec!["0 issue letsencrypt.org"]),
    ];
    let batch = UpdateBatch {
        zone: zone.clone(),
        changes: records
            .iter()
            .map(|(n, t, v)| replace(&zone, n, t, v))
            .collect(),
        apex_ns: None,
    };
    let script = build_script(&batch, local_server(&p.layout), &c.update)
        .unwrap()
        .unwrap();
    assert_eq!(script.messages, 1);
    let out = run(&commands::nsupdate(&p.layout, &script));
    assert!(out.ok(), "batch failed: {}\n{}", out.stderr, p.log_text());

    for (n, t, v) in &records {
        let fqdn = DomainName::resolve(n, &zone).unwrap().fqdn();
        let want = expected(&zone, t, v);
        let ok = wait_until(FOLLOW, || dig_short(s.dns.port, &fqdn, t) == want);
        assert!(
            ok,
            "{fqdn} {t} on the secondary: got {:?}, want {want:?}",
            dig_short(s.dns.port, &fqdn, t)
        );
    }
    let long = dig_short(s.dns.port, "long.example.test.", "TXT");
    assert_eq!(
        long,
        [format!("\"{}\" \"{}\"", "x".repeat(255), "x".repeat(45))]
    );

    // A replace leaves no old rdata.
    let replace_www = UpdateBatch {
        zone: zone.clone(),
        changes: vec![replace(&zone, "www", "A", &["192.0.2.12"])],
        apex_ns: None,
    };
    assert!(c.send(&replace_www).ok());
    assert!(wait_until(FOLLOW, || dig_short(
        s.dns.port,
        "www.example.test.",
        "A"
    ) == ["192.0.2.12"]));
    assert_eq!(
        dig_short(p.dns.port, "www.example.test.", "A"),
        ["192.0.2.12"]
    );

    // Apex NS converges exactly: add ns2 (with its glue in the same run), then drop ns1.
    let ns = |names: &[&str]| -> Vec<DomainName> {
        names
            .iter()
            .map(|n| DomainName::resolve(n, &zone).unwrap())
            .collect()
    };
    let served_ns = |c: &Cluster| -> Vec<DomainName> {
        c.axfr(&zone)
            .into_iter()
            .find(|r| r.name == *zone.as_domain() && r.rtype == "NS")
            .map(|r| {
                r.values
                    .iter()
                    .map(|v| DomainName::parse_absolute(v).unwrap())
                    .collect()
            })
            .unwrap_or_default()
    };
    for wanted in [vec!["ns1", "ns2"], vec!["ns2"]] {
        let batch = UpdateBatch {
            zone: zone.clone(),
            changes: vec![replace(&zone, "ns2", "A", &["192.0.2.54"])],
            apex_ns: Some(ApexNs {
                ttl: Ttl::new(300).unwrap(),
                wanted: ns(&wanted),
                current: served_ns(&c),
                current_ttl: Some(Ttl::new(300).unwrap()),
            }),
        };
        let out = c.send(&batch);
        assert!(out.ok(), "apex NS update failed: {}", out.stderr);
        let want: Vec<String> = ns(&wanted).iter().map(DomainName::fqdn).collect();
        assert!(
            wait_until(FOLLOW, || dig_short(s.dns.port, "example.test.", "NS")
                == want),
            "apex NS on the secondary: {:?}, want {want:?}",
            dig_short(s.dns.port, "example.test.", "NS")
        );
    }

    // AXFR parses back into the RRsets we wrote, canonically.
    let sets = c.axfr(&zone);
    let quoted_set = sets
        .iter()
        .find(|r| r.name.as_str() == "quoted.example.test")
        .unwrap();
    assert_eq!(
        quoted_set.values.iter().cloned().collect::<Vec<_>>(),
        expected(&zone, "TXT", &[quoted])
    );
    assert_eq!(quoted_set.record_type(), Some(RecordType::Txt));

    // One dig run reads many serials; a zone nobody serves is absent.
    let missing = ZoneName::parse("missing.test").unwrap();
    let out = run(&commands::dig_soa(
        &p.layout,
        &[zone.clone(), c.cfg.catalog_zone.clone(), missing.clone()],
    ));
    let serials = parse::parse_dig_soa(&out.stdout);
    assert!(serials.contains_key(&zone) && serials.contains_key(&c.cfg.catalog_zone));
    assert!(!serials.contains_key(&missing));
    let st = parse::parse_zonestatus(&run_ok(&commands::zonestatus(&p.layout, &zone, None)).stdout);
    assert_eq!(st.serial, serials.get(&zone).copied());
    assert!(st.dynamic && st.loaded);

    // Leaving the catalog removes the zone from the secondary.
    c.update_catalog(vec![catalog_remove_member(&c.cfg.catalog_zone, &zone)]);
    let gone = wait_until(FOLLOW, || {
        let out = run(&commands::dig_soa(&s.layout, std::slice::from_ref(&zone)));
        !parse::parse_dig_soa(&out.stdout).contains_key(&zone)
    });
    assert!(
        gone,
        "secondary still serves a zone removed from the catalog"
    );
}

#[test]
fn broken_config_fails_reconfig_keeps_serving_and_checkconf_names_the_line() {
    let mut c = Cluster::start(false);
    let zone = c.add_zone("keep.test");
    let p = &c.primary;
    let before = dig_short(p.dns.port, "keep.test.", "SOA");
    assert_eq!(before.len(), 1);

    let good = &c.files.named_conf_primary;
    let broken = good.replacen("recursion no;", "recursion maybe;", 1);
    let line = broken
        .lines()
        .position(|l| l.contains("recursion maybe"))
        .unwrap() as u32
        + 1;
    std::fs::write(p.layout.config_dir.join("named.conf.primary"), &broken).unwrap();

    let out = run(&commands::reconfig(&p.layout));
    assert!(!out.ok(), "reconfig of a broken config must fail");
    assert!(out.stderr.contains("failed"), "{}", out.stderr);
    assert_eq!(
        dig_short(p.dns.port, "keep.test.", "SOA"),
        before,
        "the old config must keep serving"
    );

    let check = run(&commands::checkconf(&p.layout, false));
    assert!(!check.ok());
    let issues = parse::parse_checkconf(&check.stdout);
    assert_eq!(issues.len(), 1, "{}", check.stdout);
    assert_eq!(issues[0].file, "named.conf");
    assert_eq!(issues[0].line, Some(line));
    assert!(issues[0].message.contains("maybe"), "{}", issues[0]);

    // Restoring the file makes reconfig succeed again, zones intact.
    std::fs::write(p.layout.config_dir.join("named.conf.primary"), good).unwrap();
    run_ok(&commands::reconfig(&p.layout));
    let st = parse::parse_zonestatus(&run_ok(&commands::zonestatus(&p.layout, &zone, None)).stdout);
    assert!(st.loaded);

    // A stopped named fails the probe.
    c.primary.stop();
    assert!(
        !run(&commands::probe(&c.primary.layout)).ok(),
        "probe must fail when named is down"
    );
}

#[test]
fn nsupdate_failures_are_typed() {
    let c = Cluster::start(false);
    let p = &c.primary;
    let zone = c.add_zone("err.test");
    let batch = UpdateBatch {
        zone: zone.clone(),
        changes: vec![replace(&zone, "a", "A", &["192.0.2.1"])],
        apex_ns: None,
    };
    let try_with = |key: &TsigKey, batch: &UpdateBatch| {
        let script = build_script(batch, local_server(&p.layout), key)
            .unwrap()
            .unwrap();
        let out = run(&commands::nsupdate(&p.layout, &script));
        assert!(!out.ok());
        assert!(!out.stderr.contains(key.secret.expose_base64()));
        parse::parse_nsupdate_failure(&out.stderr)
    };
    let unknown = harness::random_key("nobody", TsigAlgorithm::HmacSha256);
    assert_eq!(try_with(&unknown, &batch), NsupdateError::BadKey);
    let wrong_secret = TsigKey {
        secret: harness::random_key("x", TsigAlgorithm::HmacSha512).secret,
        ..c.update.clone()
    };
    assert_eq!(try_with(&wrong_secret, &batch), NsupdateError::BadSig);
    // The transfer key is loaded but not granted updates on this zone.
    assert_eq!(try_with(&c.xfer, &batch), NsupdateError::Refused);
    let elsewhere = ZoneName::parse("nothere.test").unwrap();
    let other = UpdateBatch {
        zone: elsewhere.clone(),
        changes: vec![replace(&elsewhere, "a", "A", &["192.0.2.1"])],
        apex_ns: None,
    };
    assert_eq!(try_with(&c.update, &other), NsupdateError::NotAuth);
    assert!(c.send(&batch).ok(), "the update key is granted");
}

#[test]
fn deleted_zone_takes_its_journal_and_comes_back_clean() {
    let c = Cluster::start(false);
    let p = &c.primary;
    let zone = c.add_zone("again.test");
    let batch = UpdateBatch {
        zone: zone.clone(),
        changes: vec![replace(&zone, "gone", "A", &["192.0.2.99"])],
        apex_ns: None,
    };
    assert!(c.send(&batch).ok());
    assert_eq!(
        dig_short(p.dns.port, "gone.again.test.", "A"),
        ["192.0.2.99"]
    );
    let file = bind_operator::bind::zone::zone_file(&zone, None);
    let journal = p.layout.data_dir.join(format!("{file}.jnl"));
    assert!(journal.exists(), "an update writes a journal");

    run_ok(&commands::delzone(&p.layout, &zone, None, &file));
    assert!(!journal.exists() && !p.layout.data_dir.join(&file).exists());
    let again = run(&commands::delzone(&p.layout, &zone, None, &file));
    assert_eq!(
        parse::parse_rndc_error(&again.stderr),
        parse::RndcError::NotFound
    );

    c.add_zone("again.test");
    assert!(
        dig_short(p.dns.port, "gone.again.test.", "A").is_empty(),
        "deleted records came back"
    );
    assert_eq!(
        dig_short(p.dns.port, "ns1.again.test.", "A"),
        ["192.0.2.53"]
    );
}

#[test]
fn a_batch_beyond_one_message_is_split_and_lands_whole() {
    let c = Cluster::start(false);
    let p = &c.primary;
    let zone = c.add_zone("big.test");
    // ~3,000 RRsets: more than one 64 KiB message can carry.
    let changes: Vec<RrsetChange> = (0..3000)
        .map(|i| {
            replace(
                &zone,
                &format!("host-{i}"),
                "A",
                &[&format!("10.0.{}.{}", i / 256, i % 256)],
            )
        })
        .collect();
    let batch = UpdateBatch {
        zone: zone.clone(),
        changes,
        apex_ns: None,
    };
    let script = build_script(&batch, local_server(&p.layout), &c.update)
        .unwrap()
        .unwrap();
    assert!(
        script.messages >= 2,
        "expected a split, got {} message(s)",
        script.messages
    );
    let out = run(&commands::nsupdate(&p.layout, &script));
    assert!(out.ok(), "split batch failed: {}", out.stderr);
    let sets = c.axfr(&zone);
    let hosts = sets
        .iter()
        .filter(|r| r.rtype == "A" && r.name.as_str().starts_with("host-"))
        .count();
    assert_eq!(hosts, 3000);
    assert_eq!(
        dig_short(p.dns.port, "host-2999.big.test.", "A"),
        ["10.0.11.183"]
    );
}

/// A primary zone stanza write for [`commands::apply_zones`].
fn put(zone: &str, clause: &str, text: &str) -> commands::ZoneWrite {
    commands::ZoneWrite {
        zone: ZoneName::parse(zone).unwrap(),
        view: None,
        kind: commands::WriteKind::Put {
            clause: clause.to_string(),
            text: text.to_string(),
            bare: None,
            reconfig: false,
        },
    }
}

impl Cluster {
    fn primary_zone(&self, name: &str) -> PrimaryZone {
        harness::plain_zone(name, &self.update, &self.xfer)
    }

    fn skeleton(&self, name: &str) -> String {
        let zone = ZoneName::parse(name).unwrap();
        let ns1 = DomainName::resolve("ns1", &zone).unwrap();
        ZoneSkeleton {
            zone: zone.clone(),
            default_ttl: Ttl::new(300).unwrap(),
            soa: Soa::defaults_for(&zone),
            serial: harness::now_serial(),
            nameservers: vec![ns1.clone()],
            records: vec![(
                ns1,
                RecordType::A,
                Ttl::new(300).unwrap(),
                Rdata::A("192.0.2.53".parse().unwrap()),
            )],
        }
        .render()
    }

    fn apply(&self, writes: &[commands::ZoneWrite]) -> commands::ApplyOutcome {
        let out = run(&commands::apply_zones(&self.primary.layout, writes));
        commands::parse_apply_zones(&out.stdout)
    }

    /// The zones named's new-zone database holds.
    fn nzd(&self) -> String {
        let db = self.primary.layout.data_dir.join("zones/_default.nzd");
        let out =
            std::process::Command::new(bind_operator::bind::layout::locate_tool("named-nzd2nzf"))
                .arg(&db)
                .output()
                .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

#[test]
fn zones_added_by_rndc_move_to_the_list_with_their_journal() {
    let c = Cluster::start(false);
    let port = c.primary.dns.port;
    // The old way: file, addzone, then a record by nsupdate (journal only).
    let old = c.add_zone("old.test");
    let www = replace(&old, "www", "A", &["192.0.2.7"]);
    let batch = UpdateBatch {
        zone: old.clone(),
        changes: vec![www],
        apex_ns: None,
    };
    assert!(c.send(&batch).ok());
    assert_eq!(dig_short(port, "www.old.test.", "A"), ["192.0.2.7"]);
    assert!(c.nzd().contains("old.test"), "{}", c.nzd());

    // While the mounted named.conf is an older one without the zone list
    // (kubelet swaps it late), nothing moves and the zone keeps serving.
    let conf = c.primary.layout.config_dir.join("named.conf.primary");
    let without = c
        .files
        .named_conf_primary
        .replace("include \"primary-zones.conf\";", "");
    std::fs::write(&conf, without).unwrap();
    let r = c.apply(&[put("old.test", &c.primary_zone("old.test").clause(), "")]);
    assert!(
        matches!(&r.results[&0], commands::ZoneApplied::Failed(m) if m.contains("does not include")),
        "{r:?}"
    );
    assert!(c.nzd().contains("old.test"));
    assert_eq!(dig_short(port, "www.old.test.", "A"), ["192.0.2.7"]);
    std::fs::write(&conf, &c.files.named_conf_primary).unwrap();

    // The new path: the old zone and the catalog (both in the NZD) and a
    // fresh zone, in one run.
    let cat = catalog_primary_zone(&c.cfg.catalog_zone, None, &c.xfer.name);
    let writes = [
        put(
            "old.test",
            &c.primary_zone("old.test").clause(),
            "garbage\n",
        ),
        put(cat.zone.as_str(), &cat.clause(), "garbage\n"),
        put(
            "fresh.test",
            &c.primary_zone("fresh.test").clause(),
            &c.skeleton("fresh.test"),
        ),
    ];
    let r = c.apply(&writes);
    assert_eq!(r.refused, None);
    assert_eq!(r.results[&0], commands::ZoneApplied::Migrated, "{r:?}");
    assert_eq!(r.results[&1], commands::ZoneApplied::Migrated, "{r:?}");
    assert_eq!(r.results[&2], commands::ZoneApplied::New, "{r:?}");
    // The record written by nsupdate is still served, from the list (named
    // loads the zones reconfig added after `rndc reconfig` returns).
    let served = |name: &str, t: &str, n: usize| {
        wait_until(Duration::from_secs(10), || {
            dig_short(port, name, t).len() == n
        })
    };
    assert!(served("www.old.test.", "A", 1));
    assert_eq!(dig_short(port, "www.old.test.", "A"), ["192.0.2.7"]);
    assert!(served("fresh.test.", "SOA", 1), "fresh.test is served");
    assert!(served(&cat.zone.fqdn(), "SOA", 1), "the catalog is served");
    let nzd = c.nzd();
    assert!(
        !nzd.contains("old.test") && !nzd.contains(cat.zone.as_str()),
        "{nzd}"
    );
    let list =
        std::fs::read_to_string(c.primary.layout.data_dir.join("primary-zones.conf")).unwrap();
    assert!(list.contains("zone \"old.test\""), "{list}");
    let st = parse::parse_zonestatus(
        &run_ok(&commands::zonestatus(&c.primary.layout, &old, None)).stdout,
    );
    assert!(st.loaded);
    // Asked again: listed, nothing written, no rndc.
    let r = c.apply(&writes[..1]);
    assert_eq!(r.results[&0], commands::ZoneApplied::Listed);
    // After a restart named loads it from the list, journal replayed.
    let mut c = c;
    c.primary.stop();
    c.primary.start();
    assert!(wait_until(Duration::from_secs(10), || dig_short(
        port,
        "www.old.test.",
        "A"
    ) == ["192.0.2.7"]));
}

#[test]
fn a_stanza_checkconf_refuses_fails_alone_and_a_failed_reconfig_changes_nothing() {
    let c = Cluster::start(false);
    let port = c.primary.dns.port;
    let good = |z: &str| put(z, &c.primary_zone(z).clause(), &c.skeleton(z));
    // A clause option named-checkconf rejects (a test-only clause).
    let bad = put(
        "bad.test",
        "{ type primary; file \"zones/bad.test.db\"; bogus-option yes; };",
        &c.skeleton("bad.test"),
    );
    let writes = [good("a.test"), bad, good("b.test")];
    let out = run(&commands::apply_zones(&c.primary.layout, &writes));
    assert!(!out.ok());
    let r = commands::parse_apply_zones(&out.stdout);
    let refusal = r.refused.expect("checkconf refuses the round");
    let named = refusal.stanzas();
    assert_eq!(named.len(), 1, "{refusal:?}");
    assert_eq!(named[0].0, writes[1].stanza_file());
    assert!(
        named[0].1.message.contains("bogus-option"),
        "{:?}",
        named[0]
    );
    // Nothing of the round is applied; the list is as before.
    assert!(dig_short(port, "a.test.", "SOA").is_empty());
    let list = c.primary.layout.data_dir.join("primary-zones.conf");
    assert_eq!(std::fs::read_to_string(&list).unwrap(), "");
    // Without it, the rest lands.
    let r = c.apply(&[writes[0].clone(), writes[2].clone()]);
    assert_eq!(r.results[&0], commands::ZoneApplied::New, "{r:?}");
    assert_eq!(r.results[&1], commands::ZoneApplied::New, "{r:?}");
    assert_eq!(dig_short(port, "a.test.", "SOA").len(), 1);
    assert_eq!(dig_short(port, "b.test.", "SOA").len(), 1);

    // A zone named still holds in its new-zone database whose files were
    // removed behind its back looks new; listed too, it makes reconfig
    // fail, and the round is undone.
    let twice = c.primary_zone("twice.test");
    let l = &c.primary.layout;
    run_ok(&commands::write_zone_file(
        l,
        &twice.file(),
        &c.skeleton("twice.test"),
    ));
    run_ok(&commands::addzone(l, &twice.zone, None, &twice.clause()));
    std::fs::remove_file(l.data_dir.join(twice.file())).unwrap();
    let listed_before = std::fs::read_to_string(&list).unwrap();
    let r = c.apply(&[
        put("twice.test", &twice.clause(), &c.skeleton("twice.test")),
        good("c.test"),
    ]);
    println!("reconfig failure: {r:?}");
    for i in 0..2 {
        assert!(
            matches!(&r.results[&i], commands::ZoneApplied::Failed(m) if m.contains("reconfig")),
            "{r:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(&list).unwrap(), listed_before);
    assert_eq!(dig_short(port, "a.test.", "SOA").len(), 1, "still served");
    assert!(dig_short(port, "c.test.", "SOA").is_empty());

    // Removal: unlisted, reconfigured, then its files go.
    let r = c.apply(&[commands::ZoneWrite {
        zone: ZoneName::parse("a.test").unwrap(),
        view: None,
        kind: commands::WriteKind::Remove,
    }]);
    assert_eq!(r.results[&0], commands::ZoneApplied::Removed, "{r:?}");
    assert!(dig_short(port, "a.test.", "SOA").is_empty());
    assert!(!c.primary.layout.data_dir.join("zones/a.test.db").exists());
    assert_eq!(dig_short(port, "b.test.", "SOA").len(), 1);
}
