//! Injection attempts (quotes, braces, semicolons, newlines, `include`) in
//! every user-controlled string are rejected by validation with an error
//! naming the field, and never reach rendered text. The typed tests bypass
//! admission on purpose: the BIND layer must hold even if CEL and schema
//! patterns had a gap. The directory test goes through the offline render
//! end to end and scans everything it wrote.
//!
//! Record sets (`spec.records`, DNSRecords) go the way production sends
//! them: validated by [`zone_config`] and the zone reconciler's plan memo
//! (`PlanMemo::plan`, which validates each DNSRecord), planned, diffed and built into the nsupdate script the
//! operator runs; a hostile one is refused alone with its status reason and
//! never reaches the script. Quoted TXT data is sent to a real named and
//! read back with dig.

use std::collections::BTreeMap;

use bind_operator::api::{
    BindCluster, BindClusterSpec, BindTSIGKey, BindTSIGKeySpec, BindZone, BindZoneSpec,
    CatalogSpec, DNSRecord, DNSRecordSpec, ForwardZone, GrantMatch, RecordType, SoaSpec,
    UpdateGrant, View, ZonePrimary, ZoneRecord, ZoneType,
};
use std::sync::Arc;

use bind_operator::bind::commands::{self, local_server};
use bind_operator::bind::nsupdate::build_script;
use bind_operator::bind::render::render_cluster;
use bind_operator::bind::zone::ZoneSkeleton;
use bind_operator::bind::{Endpoint, Rdata, TsigAlgorithm, TsigKey};
use bind_operator::controller::zonesync::RECORD_FINALIZER;
use bind_operator::controller::zonesync::diff::{Served, diff};
use bind_operator::controller::zonesync::plan::{Desired, PlanMemo, Verdict, ZoneInputs};
use bind_operator::offline::{RenderOptions, render_dir};
use bind_operator::render::validate::{
    ConfigError, LoadedKey, PrimaryZoneConfig, ZoneConfig, cluster_config, tsig_key, zone_config,
};
use kube::api::ObjectMeta;

use crate::support_bind as harness;

/// A marker every payload carries, so rendered output can be scanned for it.
const MARK: &str = "pwned";

fn payloads() -> Vec<String> {
    vec![
        format!("{MARK}\"; include \"/etc/passwd"),
        format!("{MARK}; }}; options {{ recursion yes; }}; //"),
        format!("{MARK}\ninclude \"/etc/shadow\";"),
        format!("{MARK}{{"),
        format!("{MARK}}}"),
        format!("{MARK};"),
        format!("include \"{MARK}\""),
        format!("10.0.0.0/8; }}; include \"{MARK}"),
        format!("key \"{MARK}\"; any"),
        format!("{MARK}\\\"x"),
    ]
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        ..Default::default()
    }
}

fn key_obj(name: &str) -> BindTSIGKey {
    BindTSIGKey {
        metadata: meta(name),
        spec: BindTSIGKeySpec {
            cluster_ref: Some("c".into()),
            ..Default::default()
        },
        status: None,
    }
}

const MATERIAL: &str = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTAxMjM0NTY3";

fn base_cluster() -> BindCluster {
    BindCluster {
        metadata: meta("c"),
        spec: BindClusterSpec {
            catalog: Some(CatalogSpec {
                zone_name: None,
                transfer_key_ref: Some("xfer".into()),
            }),
            ..Default::default()
        },
        status: None,
    }
}

fn primary() -> Endpoint {
    Endpoint::new("10.96.0.10".parse().unwrap(), 53).unwrap()
}

/// Validates (and, if that passed, renders) a cluster; returns the error.
fn cluster_err(cluster: &BindCluster) -> Option<ConfigError> {
    let objects = [key_obj("xfer"), key_obj("upd")];
    let loaded: Vec<LoadedKey<'_>> = objects
        .iter()
        .map(|o| LoadedKey {
            object: o,
            key: tsig_key(o, MATERIAL).unwrap(),
        })
        .collect();
    match cluster_config(cluster, &loaded, None, primary()) {
        Ok(cfg) => {
            let files = render_cluster(&cfg).unwrap();
            for (name, text) in files.files() {
                assert!(!text.contains(MARK), "payload reached {name}:\n{text}");
            }
            None
        }
        Err(e) => Some(e),
    }
}

#[track_caller]
fn assert_rejected(what: &str, field: &str, err: Option<ConfigError>) {
    let err = err.unwrap_or_else(|| panic!("{what}: hostile value was accepted"));
    let msg = err.to_string();
    assert!(
        msg.contains(field),
        "{what}: error does not name {field}: {msg}"
    );
    assert!(
        !msg.contains('\n'),
        "{what}: error message carries a raw newline: {msg:?}"
    );
}

#[test]
fn hostile_cluster_fields_are_rejected() {
    type Mutator = fn(&mut BindClusterSpec, String);
    let cases: Vec<(&str, Mutator)> = vec![
        ("spec.allowQuery", |s, p| s.allow_query = vec![p]),
        ("spec.allowRecursion", |s, p| s.allow_recursion = vec![p]),
        ("spec.forwarders", |s, p| s.forwarders = vec![p]),
        ("spec.validateExcept", |s, p| s.validate_except = vec![p]),
        ("spec.forwardZones[0].zone", |s, p| {
            s.forward_zones = vec![ForwardZone {
                zone: p,
                forwarders: vec!["10.0.0.1".into()],
                forward_only: false,
            }]
        }),
        ("spec.forwardZones[0].forwarders", |s, p| {
            s.forward_zones = vec![ForwardZone {
                zone: "corp.example".into(),
                forwarders: vec![p],
                forward_only: false,
            }]
        }),
        ("spec.views[0].name", |s, p| {
            s.views = vec![view(p, vec![], vec![])]
        }),
        ("spec.views[0].matchClients", |s, p| {
            s.views = vec![view("v".into(), vec![p], vec![])]
        }),
        ("spec.views[0].matchDestinations", |s, p| {
            s.views = vec![view("v".into(), vec![], vec![p])]
        }),
        ("spec.catalog.zoneName", |s, p| {
            s.catalog.as_mut().unwrap().zone_name = Some(p)
        }),
    ];
    for (field, mutate) in cases {
        for p in payloads() {
            let mut c = base_cluster();
            mutate(&mut c.spec, p.clone());
            assert_rejected(&format!("{field} = {p:?}"), field, cluster_err(&c));
        }
    }
    // The untouched base renders, so the cases above fail for their payload.
    assert!(cluster_err(&base_cluster()).is_none());
}

fn view(name: String, clients: Vec<String>, dests: Vec<String>) -> View {
    View {
        name,
        match_clients: clients,
        match_destinations: dests,
        recursion: None,
    }
}

#[test]
fn hostile_key_names_and_material_are_rejected_without_echoing_material() {
    for p in payloads() {
        let mut k = key_obj("k");
        k.spec.key_name = Some(p.clone());
        assert_rejected(
            &format!("keyName {p:?}"),
            "spec.keyName",
            tsig_key(&k, MATERIAL).err(),
        );
        let err = tsig_key(&key_obj("k"), &p).unwrap_err().to_string();
        assert!(err.contains("secret") && !err.contains(MARK), "{err}");
    }
}

fn base_zone() -> BindZone {
    BindZone {
        metadata: meta("z"),
        spec: BindZoneSpec {
            cluster_ref: "c".into(),
            zone_name: "example.com".into(),
            view: None,
            type_: ZoneType::Primary,
            primaries: vec![],
            catalog: true,
            nameservers: vec!["ns1.example.com.".into()],
            soa: SoaSpec {
                mname: None,
                rname: None,
                refresh: 3600,
                retry: 600,
                expire: 86400,
                minimum: 300,
            },
            default_ttl: 3600,
            records: vec![],
            update_key_ref: Some("upd".into()),
            allow_transfer: vec![],
            update_policy: vec![],
            records_from: vec![],
            dnssec_policy: None,
            external_secondaries: None,
        },
        status: None,
    }
}

/// Validates a zone the way the zone reconciler does.
fn validate_zone(zone: &BindZone) -> Result<ZoneConfig, ConfigError> {
    let objects = [key_obj("xfer"), key_obj("upd")];
    let loaded: Vec<LoadedKey<'_>> = objects
        .iter()
        .map(|o| LoadedKey {
            object: o,
            key: tsig_key(o, MATERIAL).unwrap(),
        })
        .collect();
    zone_config(zone, &loaded, &loaded[0].key.name, &[])
}

fn zone_err(zone: &BindZone) -> Option<ConfigError> {
    validate_zone(zone).err()
}

fn primary_config(zone: &BindZone) -> PrimaryZoneConfig {
    match validate_zone(zone) {
        Ok(ZoneConfig::Primary(cfg)) => *cfg,
        other => panic!("expected a valid primary zone, got {other:?}"),
    }
}

/// The zone's plan as the reconciler computes it: its validated config,
/// and its DNSRecords validated against it.
fn plan_zone(cfg: &PrimaryZoneConfig, records: &[DNSRecord]) -> Desired {
    let records: Vec<Arc<DNSRecord>> = records.iter().cloned().map(Arc::new).collect();
    let zone = &cfg.clause.zone;
    // The zone reconciler's own entry: its plan memo validates every
    // DNSRecord (each one new here) and plans the zone.
    let desired = PlanMemo::default().plan(
        &ZoneInputs {
            zone,
            object_name: "z",
            created: None,
            default_ttl: cfg.default_ttl,
            nameservers: &cfg.nameservers,
            soa_mname: &cfg.soa.mname,
            inline: &cfg.records,
            applied_inline: &Default::default(),
            access: &bind_operator::controller::zonesync::access::Access::own_namespace_only("ns"),
        },
        0,
        &records,
    );
    Arc::unwrap_or_clone(desired)
}

/// The nsupdate script the operator would send for `desired` to a primary
/// that serves nothing of it yet (`None`: nothing to send).
fn script_text(
    cfg: &PrimaryZoneConfig,
    desired: &Desired,
    server: Endpoint,
    key: &TsigKey,
) -> Option<String> {
    let batch = diff(&cfg.clause.zone, desired, &Served::default());
    build_script(&batch, server, key)
        .unwrap()
        .map(|s| s.expose_stdin().to_string())
}

fn any_script(cfg: &PrimaryZoneConfig, desired: &Desired) -> String {
    let key = tsig_key(&key_obj("upd"), MATERIAL).unwrap();
    script_text(cfg, desired, primary(), &key).unwrap_or_default()
}

#[test]
fn hostile_zone_fields_are_rejected() {
    type Mutator = fn(&mut BindZoneSpec, String);
    let cases: Vec<(&str, Mutator)> = vec![
        ("spec.zoneName", |s, p| s.zone_name = p),
        ("spec.view", |s, p| s.view = Some(p)),
        ("spec.nameservers[0]", |s, p| s.nameservers = vec![p]),
        ("spec.soa.mname", |s, p| s.soa.mname = Some(p)),
        ("spec.soa.rname", |s, p| s.soa.rname = Some(p)),
        ("spec.allowTransfer", |s, p| s.allow_transfer = vec![p]),
        ("spec.dnssecPolicy", |s, p| s.dnssec_policy = Some(p)),
        ("spec.updatePolicy[0].name", |s, p| {
            s.update_policy = vec![UpdateGrant {
                key_ref: "upd".into(),
                match_: GrantMatch::Name,
                name: Some(p),
                types: vec![RecordType::TXT],
            }]
        }),
        ("spec.primaries[0].address", |s, p| {
            s.type_ = ZoneType::Secondary;
            s.primaries = vec![ZonePrimary {
                address: p,
                port: 53,
                key_ref: None,
            }]
        }),
    ];
    for (field, mutate) in cases {
        for p in payloads() {
            let mut z = base_zone();
            mutate(&mut z.spec, p.clone());
            assert_rejected(&format!("{field} = {p:?}"), field, zone_err(&z));
        }
    }
    assert!(zone_err(&base_zone()).is_none());
}

fn inline(name: &str, rtype: RecordType, values: &[&str]) -> ZoneRecord {
    ZoneRecord {
        name: name.into(),
        type_: rtype,
        ttl: None,
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

/// A hostile `spec.records` entry is refused alone: the zone validates, the
/// entry is an InvalidRecord error naming it on the zone, the good entry
/// beside it is served, and nothing of the payload reaches the script.
#[test]
fn hostile_inline_records_are_refused_alone_and_never_sent() {
    let mut cases: Vec<ZoneRecord> = Vec::new();
    for p in payloads() {
        cases.push(inline(&p, RecordType::A, &["192.0.2.1"]));
        for t in [RecordType::A, RecordType::MX, RecordType::CAA] {
            cases.push(inline("x", t, &[&p]));
        }
    }
    // A newline would start a new nsupdate command.
    let newline = format!("ok\nupdate add {MARK}.example.com. 1 A 1.2.3.4");
    cases.push(inline("txt", RecordType::TXT, &[&newline]));
    for bad in cases {
        let what = format!("{bad:?}");
        let mut z = base_zone();
        z.spec.records = vec![bad, inline("good", RecordType::TXT, &["\"fine\""])];
        let cfg = primary_config(&z);
        let d = plan_zone(&cfg, &[]);
        assert_eq!(d.inline_errors.len(), 1, "{what}: {:?}", d.inline_errors);
        let (reason, message) = &d.inline_errors[0];
        assert_eq!(*reason, "InvalidRecord", "{what}");
        assert!(
            message.starts_with("spec.records[0]: "),
            "{what}: {message}"
        );
        assert!(!message.contains('\n'), "{what}: {message:?}");
        assert_eq!(d.rrsets.len(), 1, "{what}: only the good entry is served");
        let text = any_script(&cfg, &d);
        assert!(text.contains("good.example.com."), "{what}: {text}");
        assert!(
            !text.contains(MARK),
            "{what}: payload reached the script:\n{text}"
        );
    }
}

fn dns_record(name: &str, rtype: RecordType, values: &[&str]) -> DNSRecord {
    let mut m = meta("r");
    m.finalizers = Some(vec![RECORD_FINALIZER.into()]);
    DNSRecord {
        metadata: m,
        spec: DNSRecordSpec {
            zone_ref: "z".into(),
            zone_namespace: None,
            name: name.into(),
            type_: rtype,
            ttl: None,
            values: values.iter().map(|v| v.to_string()).collect(),
        },
        status: None,
    }
}

/// A hostile DNSRecord is refused with InvalidRecord and a message naming
/// its field, and nothing of it reaches the script.
#[test]
fn hostile_dnsrecords_are_refused_and_never_sent() {
    let cfg = primary_config(&base_zone());
    let mut cases = Vec::new();
    for p in payloads() {
        cases.push(("spec.name", dns_record(&p, RecordType::A, &["192.0.2.1"])));
        for t in [
            RecordType::A,
            RecordType::CNAME,
            RecordType::MX,
            RecordType::SRV,
            RecordType::CAA,
            RecordType::HTTPS,
        ] {
            cases.push(("spec.values[0]", dns_record("x", t, &[&p])));
        }
    }
    for (field, r) in cases {
        let what = format!("{:?}", r.spec);
        let d = plan_zone(&cfg, std::slice::from_ref(&r));
        match &d.verdicts["r"] {
            Verdict::Rejected { reason, message } => {
                assert_eq!(*reason, "InvalidRecord", "{what}");
                assert!(message.contains(field), "{what}: {message}");
                assert!(!message.contains('\n'), "{what}: {message:?}");
            }
            other => panic!("{what}: expected a rejection, got {other:?}"),
        }
        assert!(d.rrsets.is_empty(), "{what}");
        let text = any_script(&cfg, &d);
        assert!(
            !text.contains(MARK),
            "{what}: payload reached the script:\n{text}"
        );
    }
}

/// TXT values may hold quotes, semicolons and `include`: they stay data.
/// Sent the way the operator sends them to a real named, dig reads each
/// back as one string and no injected name exists.
#[test]
fn quotes_in_txt_stay_data_on_a_real_named() {
    let values = [
        "a\"; include \"b",
        "}; options { recursion yes; }; //",
        "update add pwned.example.com. 1 A 1.2.3.4",
        "\"quoted\" \"twice\"",
    ];
    let cfg = primary_config(&base_zone());
    let rec = dns_record("txt", RecordType::TXT, &values);
    let d = plan_zone(&cfg, std::slice::from_ref(&rec));
    assert!(
        matches!(d.verdicts["r"], Verdict::Accepted(_)),
        "{:?}",
        d.verdicts
    );

    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let mut pod = harness::Pod::new(tmp.path(), &config, 0);
    let xfer = harness::random_key("xfer", TsigAlgorithm::HmacSha256);
    let update = harness::random_key(cfg.clause.update_key.as_str(), TsigAlgorithm::HmacSha256);
    let files = render_cluster(&harness::small_config(pod.endpoint(), &xfer, &update)).unwrap();
    harness::write_mount(&config, &files);
    pod.start();
    // The zone as the operator creates it: its skeleton (SOA, apex NS and
    // the nameserver's glue), then addzone with its validated clause.
    let zone = &cfg.clause.zone;
    let glue_type = bind_operator::bind::RecordType::A;
    let skel = ZoneSkeleton {
        zone: zone.clone(),
        default_ttl: cfg.default_ttl,
        soa: cfg.soa.clone(),
        serial: harness::now_serial(),
        nameservers: cfg.nameservers.clone(),
        records: vec![(
            cfg.nameservers[0].clone(),
            glue_type,
            cfg.default_ttl,
            Rdata::parse(glue_type, "192.0.2.53", zone).unwrap(),
        )],
    };
    let l = &pod.layout;
    harness::run_ok(&commands::write_zone_file(
        l,
        &cfg.clause.file(),
        &skel.render(),
    ));
    harness::run_ok(&commands::addzone(l, zone, None, &cfg.clause.clause()));

    let script = build_script(
        &diff(zone, &d, &Served::default()),
        local_server(l),
        &update,
    )
    .unwrap()
    .unwrap();
    harness::run_ok(&commands::nsupdate(l, &script));

    let port = pod.dns.port;
    let mut got = harness::dig_short(port, "txt.example.com", "TXT");
    got.sort();
    let mut want: Vec<String> = d
        .rrsets
        .values()
        .next()
        .unwrap()
        .values
        .iter()
        .map(|v| v.to_string())
        .collect();
    want.sort();
    assert_eq!(got, want, "dig shows each value as TXT data");
    assert_eq!(got.len(), values.len());
    assert!(harness::dig_short(port, "pwned.example.com", "A").is_empty());
    assert!(
        harness::dig_short(port, "example.com", "SOA").len() == 1,
        "named still serves the zone"
    );
}

#[test]
fn hostile_manifests_render_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut docs = vec![
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\nstringData: {secret: c2VjcmV0}\n".to_string(),
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata: {name: xfer, namespace: ns}\nspec: {secretRef: {name: s}}\n"
            .to_string(),
    ];
    let fields: BTreeMap<&str, &str> = BTreeMap::from([
        ("allowQuery", "allowQuery: [PAYLOAD]"),
        ("forwarders", "forwarders: [PAYLOAD]"),
        ("validateExcept", "validateExcept: [PAYLOAD]"),
        ("views", "views: [{name: PAYLOAD}]"),
        (
            "catalog",
            "catalog: {zoneName: PAYLOAD, transferKeyRef: xfer}",
        ),
    ]);
    for (i, (_, field)) in fields.iter().enumerate() {
        for (j, p) in payloads().iter().enumerate() {
            let quoted = serde_json::to_string(p).unwrap();
            let spec = field.replace("PAYLOAD", &quoted);
            let catalog = if spec.starts_with("catalog") {
                ""
            } else {
                "\n  catalog: {transferKeyRef: xfer}"
            };
            docs.push(format!(
                "apiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata: {{name: c{i}-{j}, namespace: ns}}\nspec:\n  {spec}{catalog}\n"
            ));
        }
    }
    std::fs::write(dir.path().join("all.yaml"), docs.join("---\n")).unwrap();
    let report = render_dir(
        dir.path(),
        out.path(),
        &RenderOptions {
            primary: primary(),
            secrets_from_dir: true,
        },
    )
    .unwrap();
    assert!(!report.success());
    // Each hostile cluster is refused, at admission or at validation.
    let refused =
        report.manifest_errors.len() + report.clusters.iter().filter(|c| c.result.is_err()).count();
    assert_eq!(refused, fields.len() * payloads().len(), "{report:#?}");
    for entry in walk(out.path()) {
        let text = std::fs::read_to_string(&entry).unwrap();
        assert!(!text.contains(MARK), "payload reached {}", entry.display());
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn grant(key: &str, m: GrantMatch, name: Option<&str>, types: &[RecordType]) -> UpdateGrant {
    UpdateGrant {
        key_ref: key.into(),
        match_: m,
        name: name.map(Into::into),
        types: types.to_vec(),
    }
}

#[test]
fn update_grants_render_after_the_operators_own_and_bad_ones_fail_the_zone() {
    let mut z = base_zone();
    z.spec.update_policy = vec![
        grant(
            "xfer",
            GrantMatch::Name,
            Some("_acme-challenge.www"),
            &[RecordType::TXT],
        ),
        grant(
            "xfer",
            GrantMatch::Wildcard,
            Some("*.dyn.example.com."),
            &[],
        ),
        grant(
            "xfer",
            GrantMatch::Subdomain,
            Some("@"),
            &[RecordType::A, RecordType::AAAA],
        ),
        grant("upd", GrantMatch::Zonesub, None, &[]),
    ];
    let clause = primary_config(&z).clause.clause();
    assert!(
        clause.contains(
            "update-policy { grant \"upd\" zonesub ANY; grant \"xfer\" name \"_acme-challenge.www.example.com.\" TXT; grant \"xfer\" wildcard \"*.dyn.example.com.\" ANY; grant \"xfer\" subdomain \"example.com.\" A AAAA; grant \"upd\" zonesub ANY; };"
        ),
        "{clause}"
    );

    let bad = |g: UpdateGrant, needle: &str| {
        let mut z = base_zone();
        z.spec.update_policy = vec![grant("upd", GrantMatch::Zonesub, None, &[]), g];
        let e = zone_err(&z).unwrap_or_else(|| panic!("{needle}: accepted"));
        let msg = e.to_string();
        assert!(msg.contains(needle), "{needle}: {msg}");
        e
    };
    // Outside the zone: absolute elsewhere, or the parent.
    bad(
        grant("upd", GrantMatch::Name, Some("www.example.org."), &[]),
        "invalid spec.updatePolicy[1].name: owner name \"www.example.org.\": is outside zone example.com",
    );
    bad(
        grant("upd", GrantMatch::Subdomain, Some("com."), &[]),
        "is outside zone",
    );
    bad(
        grant("upd", GrantMatch::Name, None, &[]),
        "invalid spec.updatePolicy[1].name: grant name \"\": is required",
    );
    bad(
        grant("upd", GrantMatch::Zonesub, Some("www"), &[]),
        "not allowed for match zonesub",
    );
    bad(
        grant("upd", GrantMatch::Wildcard, Some("dyn"), &[]),
        "must start with a '*' label",
    );
    // A key the cluster does not load: KeyNotFound (the reconciler's reason
    // for ZoneKeyNotLoaded), naming the key.
    let e = bad(
        grant("acme", GrantMatch::Zonesub, None, &[]),
        "updatePolicy key acme is not a BindTSIGKey the cluster loads",
    );
    assert!(matches!(e, ConfigError::ZoneKeyNotLoaded { .. }), "{e:?}");
}
