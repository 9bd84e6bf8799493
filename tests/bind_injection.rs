//! Injection attempts (quotes, braces, semicolons, newlines, `include`) in
//! every user-controlled string are rejected by validation with an error
//! naming the field, and never reach rendered text. The typed tests bypass
//! admission on purpose: the BIND layer must hold even if CEL and schema
//! patterns had a gap. The directory test goes through the offline render
//! end to end and scans everything it wrote.

use std::collections::BTreeMap;

use bind_operator::api::{
    BindCluster, BindClusterSpec, BindTSIGKey, BindTSIGKeySpec, BindZone, BindZoneSpec,
    CatalogSpec, DNSRecord, DNSRecordSpec, ForwardZone, RecordType, SoaSpec, View, ZonePrimary,
    ZoneRecord, ZoneType,
};
use bind_operator::bind::render::render_cluster;
use bind_operator::bind::{Endpoint, Ttl, ZoneName};
use bind_operator::offline::{RenderOptions, render_dir};
use bind_operator::render::validate::{
    ConfigError, LoadedKey, cluster_config, record_change, tsig_key, zone_config,
};
use kube::api::ObjectMeta;

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
            dnssec_policy: None,
        },
        status: None,
    }
}

fn zone_err(zone: &BindZone) -> Option<ConfigError> {
    let objects = [key_obj("xfer"), key_obj("upd")];
    let loaded: Vec<LoadedKey<'_>> = objects
        .iter()
        .map(|o| LoadedKey {
            object: o,
            key: tsig_key(o, MATERIAL).unwrap(),
        })
        .collect();
    zone_config(zone, &loaded, &loaded[0].key.name).err()
}

#[test]
fn hostile_zone_fields_are_rejected() {
    type Mutator = fn(&mut BindZoneSpec, String);
    let record = |name: String, values: Vec<String>| ZoneRecord {
        name,
        type_: RecordType::TXT,
        ttl: None,
        values,
    };
    let cases: Vec<(&str, Mutator)> = vec![
        ("spec.zoneName", |s, p| s.zone_name = p),
        ("spec.view", |s, p| s.view = Some(p)),
        ("spec.nameservers[0]", |s, p| s.nameservers = vec![p]),
        ("spec.soa.mname", |s, p| s.soa.mname = Some(p)),
        ("spec.soa.rname", |s, p| s.soa.rname = Some(p)),
        ("spec.allowTransfer", |s, p| s.allow_transfer = vec![p]),
        ("spec.dnssecPolicy", |s, p| s.dnssec_policy = Some(p)),
        ("spec.records[0]", |s, p| {
            s.records = vec![ZoneRecord {
                name: p,
                type_: RecordType::A,
                ttl: None,
                values: vec!["192.0.2.1".into()],
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
    // Values with a newline would start a new nsupdate command.
    let mut z = base_zone();
    z.spec.records = vec![record(
        "txt".into(),
        vec![format!("ok\nupdate add {MARK}.example.com. 1 A 1.2.3.4")],
    )];
    assert_rejected("record value with newline", "spec.records[0]", zone_err(&z));
    assert!(zone_err(&base_zone()).is_none());
}

#[test]
fn hostile_dnsrecords_are_rejected_and_quotes_in_txt_stay_data() {
    let zone = ZoneName::parse("example.com").unwrap();
    let ttl = Ttl::new(300).unwrap();
    let rec = |name: &str, t: RecordType, v: &str| DNSRecord {
        metadata: meta("r"),
        spec: DNSRecordSpec {
            zone_ref: "z".into(),
            name: name.into(),
            type_: t,
            ttl: None,
            values: vec![v.into()],
        },
        status: None,
    };
    for p in payloads() {
        assert!(
            record_change(&rec(&p, RecordType::A, "192.0.2.1"), &zone, ttl).is_err(),
            "name {p:?}"
        );
        for t in [
            RecordType::A,
            RecordType::CNAME,
            RecordType::MX,
            RecordType::SRV,
            RecordType::CAA,
            RecordType::HTTPS,
        ] {
            assert!(
                record_change(&rec("x", t, &p), &zone, ttl).is_err(),
                "{t:?} value {p:?}"
            );
        }
    }
    // A TXT value may contain quotes and semicolons: it is quoted and escaped.
    let c = record_change(&rec("x", RecordType::TXT, "a\"; include \"b"), &zone, ttl).unwrap();
    let bind_operator::bind::nsupdate::RrsetChange::Replace { values, .. } = c else {
        panic!()
    };
    assert_eq!(values[0].to_string(), r#""a\"; include \"b""#);
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
