//! Admission-time validation: the CEL rules and schema bounds in the
//! generated CRDs, evaluated the way kube-apiserver would (schema defaults,
//! structural schema, then CEL) through `api::admission`. Each case is what a
//! user would see from `kubectl apply`: accepted, or rejected with a message
//! that points at the field and says what to do.

use bind_operator::api::admission::{AdmissionError, admit};
use bind_operator::api::{RecordType, TsigAlgorithm};
use serde_json::{Value, json};

fn record(spec: Value) -> Value {
    json!({
        "apiVersion": "bind.unkin.net/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {"name": "r", "namespace": "dns"},
        "spec": spec,
    })
}

fn zone(spec: Value) -> Value {
    json!({
        "apiVersion": "bind.unkin.net/v1alpha1",
        "kind": "BindZone",
        "metadata": {"name": "z", "namespace": "dns"},
        "spec": spec,
    })
}

fn cluster(spec: Value) -> Value {
    json!({
        "apiVersion": "bind.unkin.net/v1alpha1",
        "kind": "BindCluster",
        "metadata": {"name": "c", "namespace": "dns"},
        "spec": spec,
    })
}

fn key(spec: Value) -> Value {
    json!({
        "apiVersion": "bind.unkin.net/v1alpha1",
        "kind": "BindTSIGKey",
        "metadata": {"name": "k", "namespace": "dns"},
        "spec": spec,
    })
}

#[track_caller]
fn accepted(obj: Value) -> Value {
    match admit(&obj, None) {
        Ok(v) => v,
        Err(e) => panic!("expected {obj} to be admitted, got: {e}"),
    }
}

/// Asserts rejection and that one violation's "path: message" contains `needle`.
#[track_caller]
fn rejected(obj: Value, needle: &str) -> AdmissionError {
    rejected_update(obj, None, needle)
}

#[track_caller]
fn rejected_update(obj: Value, old: Option<&Value>, needle: &str) -> AdmissionError {
    match admit(&obj, old) {
        Ok(_) => panic!("expected {obj} to be rejected ({needle})"),
        Err(e) => {
            assert!(
                e.violations()
                    .iter()
                    .any(|v| v.to_string().contains(needle)),
                "rejection of {obj} does not mention {needle:?}: {e}"
            );
            e
        }
    }
}

#[test]
fn apex_ns_is_rejected_with_a_pointer_to_nameservers() {
    for name in [json!("@"), json!(null)] {
        let mut spec = json!({"zoneRef": "z", "type": "NS", "values": ["ns1.example.com."]});
        if !name.is_null() {
            spec["name"] = name;
        }
        let err = rejected(record(spec), "BindZone.spec.nameservers");
        // The message is what kubectl shows; it must say why and what to use.
        assert!(err.to_string().contains("apex NS"), "{err}");
    }
    // A delegation below the apex is an ordinary NS RRset.
    accepted(record(
        json!({"zoneRef": "z", "name": "sub", "type": "NS", "values": ["ns1.sub.example.com."]}),
    ));
    // CEL cannot know the zone: a zone-qualified apex passes admission and is
    // left to the reconciler (ApexNSUnsupported), as on a real API server.
    accepted(record(
        json!({"zoneRef": "z", "name": "example.com.", "type": "NS", "values": ["ns1.example.com."]}),
    ));
}

#[test]
fn a_and_aaaa_values_must_be_addresses_of_their_family() {
    accepted(record(
        json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["192.0.2.1", "192.0.2.2"]}),
    ));
    accepted(record(
        json!({"zoneRef": "z", "name": "www", "type": "AAAA", "values": ["2001:db8::1"]}),
    ));
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["1.2.3.999"]})),
        "IPv4",
    );
    rejected(
        record(
            json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["192.0.2.1", "2001:db8::1"]}),
        ),
        "IPv4",
    );
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "AAAA", "values": ["192.0.2.1"]})),
        "IPv6",
    );
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["www.example.com."]})),
        "IPv4",
    );
}

#[test]
fn cname_has_exactly_one_value_and_every_record_at_least_one() {
    accepted(record(
        json!({"zoneRef": "z", "name": "www", "type": "CNAME", "values": ["web.example.com."]}),
    ));
    rejected(
        record(
            json!({"zoneRef": "z", "name": "www", "type": "CNAME", "values": ["a.example.com.", "b.example.com."]}),
        ),
        "exactly one value",
    );
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": []})),
        "spec.values: must have at least 1",
    );
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "TXT"})),
        "spec.values: required value",
    );
    let many: Vec<String> = (0..101).map(|i| format!("\"v{i}\"")).collect();
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": many})),
        "at most 100 items",
    );
}

#[test]
fn ttl_is_bounded_by_rfc_2181() {
    accepted(record(
        json!({"zoneRef": "z", "name": "www", "type": "TXT", "ttl": 0, "values": ["x"]}),
    ));
    accepted(record(
        json!({"zoneRef": "z", "name": "www", "type": "TXT", "ttl": 2147483647u32, "values": ["x"]}),
    ));
    rejected(
        record(
            json!({"zoneRef": "z", "name": "www", "type": "TXT", "ttl": 2147483648u64, "values": ["x"]}),
        ),
        "spec.ttl",
    );
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "ttl": -1, "values": ["x"]})),
        "spec.ttl",
    );
    rejected(
        zone(json!({"clusterRef": "c", "zoneName": "example.com", "defaultTTL": -5})),
        "spec.defaultTTL",
    );
}

#[test]
fn record_type_comes_from_the_known_set() {
    for t in RecordType::ALL {
        let values = match t {
            RecordType::A => json!(["192.0.2.1"]),
            RecordType::AAAA => json!(["2001:db8::1"]),
            _ => json!(["x.example.com."]),
        };
        accepted(record(
            json!({"zoneRef": "z", "name": "x", "type": t.as_str(), "values": values}),
        ));
    }
    for bad in ["SOA", "a", "ANY", "TYPE65"] {
        rejected(
            record(json!({"zoneRef": "z", "name": "x", "type": bad, "values": ["1"]})),
            "spec.type: unsupported value",
        );
    }
}

#[test]
fn names_that_could_escape_into_bind_config_are_rejected() {
    let evil = [
        "www\"; include \"/etc/passwd",
        "www }; zone",
        "a b",
        "semi;colon",
        "new\nline",
        "{brace",
        "quote'",
    ];
    for name in evil {
        rejected(
            record(json!({"zoneRef": "z", "name": name, "type": "TXT", "values": ["x"]})),
            "spec.name: invalid value",
        );
        rejected(
            zone(json!({"clusterRef": "c", "zoneName": name})),
            "spec.zoneName: invalid value",
        );
        rejected(
            zone(json!({"clusterRef": "c", "zoneName": "example.com", "nameservers": [name]})),
            "spec.nameservers[0]",
        );
        rejected(
            zone(json!({"clusterRef": "c", "zoneName": "example.com", "view": name})),
            "spec.view",
        );
        rejected(key(json!({"keyName": name})), "spec.keyName");
        rejected(cluster(json!({"allowQuery": [name]})), "spec.allowQuery[0]");
        rejected(
            cluster(json!({"views": [{"name": name}]})),
            "spec.views[0].name",
        );
        rejected(
            cluster(json!({"catalog": {"zoneName": name}})),
            "spec.catalog.zoneName",
        );
        rejected(
            cluster(json!({"forwardZones": [{"zone": name, "forwarders": ["192.0.2.1"]}]})),
            "spec.forwardZones[0].zone",
        );
    }
    for ok in [
        "@",
        "www",
        "_sip._tcp",
        "*.app",
        "host.example.com.",
        "a-b.c_d",
    ] {
        accepted(record(
            json!({"zoneRef": "z", "name": ok, "type": "TXT", "values": ["x"]}),
        ));
    }
    for ok in [
        "example.com",
        "example.com.",
        "10.in-addr.arpa",
        "_msdcs.corp.example",
    ] {
        accepted(zone(json!({"clusterRef": "c", "zoneName": ok})));
    }
}

#[test]
fn record_values_cannot_smuggle_nsupdate_commands() {
    rejected(
        record(
            json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": ["\"ok\"\nupdate delete example.com. ANY"]}),
        ),
        "spec.values[0]: invalid value",
    );
    accepted(record(
        json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": ["\"v=spf1 include:_spf.example.com -all\""]}),
    ));
    let long = "x".repeat(4097);
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": [long]})),
        "at most 4096 characters",
    );
}

#[test]
fn tsig_algorithm_comes_from_the_allowed_set() {
    for a in TsigAlgorithm::ALL {
        accepted(key(json!({"algorithm": a.as_str()})));
    }
    let admitted = accepted(key(json!({})));
    assert_eq!(
        admitted["spec"]["algorithm"], "hmac-sha256",
        "the default is applied"
    );
    for bad in ["hmac-sha999", "HMAC-SHA256", "gss-tsig"] {
        rejected(
            key(json!({"algorithm": bad})),
            "spec.algorithm: unsupported value",
        );
    }
}

#[test]
fn cluster_needs_at_least_one_replica_and_ip_forwarders() {
    let admitted = accepted(cluster(json!({})));
    assert_eq!(admitted["spec"]["replicas"], 2);
    accepted(cluster(json!({"replicas": 1})));
    rejected(
        cluster(json!({"replicas": 0})),
        "spec.replicas: invalid value 0: must be at least 1",
    );
    rejected(cluster(json!({"replicas": -3})), "spec.replicas");
    accepted(cluster(
        json!({"forwarders": ["192.0.2.53", "2001:db8::53"]}),
    ));
    rejected(
        cluster(json!({"forwarders": ["1.2.3"]})),
        "forwarders must be IP addresses",
    );
    rejected(
        cluster(json!({"forwardZones": [{"zone": "corp.example", "forwarders": ["999.1.1.1"]}]})),
        "forwarders must be IP addresses",
    );
    accepted(cluster(
        json!({"allowQuery": ["any", "!192.0.2.0/24", "localnets", "key xfer-key"]}),
    ));
}

#[test]
fn zone_ref_and_zone_name_are_immutable_once_set() {
    let old = accepted(record(
        json!({"zoneRef": "z1", "name": "www", "type": "TXT", "values": ["x"]}),
    ));
    // Other fields may change.
    let new_values =
        record(json!({"zoneRef": "z1", "name": "www", "type": "TXT", "values": ["y"]}));
    admit(&new_values, Some(&old)).expect("changing values is allowed");
    rejected_update(
        record(json!({"zoneRef": "z2", "name": "www", "type": "TXT", "values": ["x"]})),
        Some(&old),
        "zoneRef is immutable",
    );

    let old_zone = accepted(zone(json!({"clusterRef": "c", "zoneName": "example.com"})));
    admit(
        &zone(json!({"clusterRef": "c", "zoneName": "example.com", "defaultTTL": 60})),
        Some(&old_zone),
    )
    .expect("changing defaultTTL is allowed");
    rejected_update(
        zone(json!({"clusterRef": "c", "zoneName": "example.org"})),
        Some(&old_zone),
        "zoneName is immutable",
    );
}

/// #23 item 4: renaming the catalog took every zone off the secondaries while
/// the objects said Ready; the API server refuses it instead.
#[test]
fn a_clusters_catalog_keeps_its_name() {
    let derived = accepted(cluster(json!({"catalog": {"transferKeyRef": "xfer"}})));
    admit(
        &cluster(json!({"replicas": 3, "catalog": {"transferKeyRef": "xfer"}})),
        Some(&derived),
    )
    .expect("scaling is allowed");
    rejected_update(
        cluster(json!({"catalog": {"transferKeyRef": "xfer", "zoneName": "catalog.example"}})),
        Some(&derived),
        "spec.catalog.zoneName cannot be set, changed or removed",
    );
    let named = accepted(cluster(json!({"catalog": {"zoneName": "catalog.example"}})));
    admit(
        &cluster(json!({"catalog": {"zoneName": "catalog.example"}, "replicas": 3})),
        Some(&named),
    )
    .expect("the same name with other changes is allowed");
    rejected_update(
        cluster(json!({"catalog": {"zoneName": "bars.example"}})),
        Some(&named),
        "spec.catalog.zoneName cannot be set, changed or removed",
    );
    rejected_update(
        cluster(json!({"catalog": {}})),
        Some(&named),
        "spec.catalog.zoneName cannot be set, changed or removed",
    );
    // The whole block removed or added: the name would change all the
    // same (to or from the derived one), so it is refused too.
    rejected_update(
        cluster(json!({"replicas": 3})),
        Some(&named),
        "by adding or removing the whole spec.catalog block",
    );
    let bare = accepted(cluster(json!({})));
    rejected_update(
        cluster(json!({"catalog": {"zoneName": "catalog.example", "transferKeyRef": "xfer"}})),
        Some(&bare),
        "spec.catalog.zoneName cannot be set, changed or removed",
    );
    // A block that keeps the derived name may come and go.
    admit(
        &cluster(json!({"catalog": {"transferKeyRef": "xfer"}})),
        Some(&bare),
    )
    .expect("adding a block without zoneName keeps the name");
    admit(&cluster(json!({"replicas": 3})), Some(&derived))
        .expect("removing a block without zoneName keeps the name");
}

#[test]
fn secondary_zones_need_primaries_and_primary_zones_have_none() {
    accepted(zone(
        json!({"clusterRef": "c", "zoneName": "partner.example", "type": "secondary",
        "primaries": [{"address": "198.51.100.1"}]}),
    ));
    rejected(
        zone(json!({"clusterRef": "c", "zoneName": "partner.example", "type": "secondary"})),
        "spec.primaries is required",
    );
    rejected(
        zone(
            json!({"clusterRef": "c", "zoneName": "example.com", "primaries": [{"address": "198.51.100.1"}]}),
        ),
        "spec.primaries is required",
    );
    rejected(
        zone(
            json!({"clusterRef": "c", "zoneName": "partner.example", "type": "secondary",
            "primaries": [{"address": "198.51.100.999"}]}),
        ),
        "must be an IP address",
    );
    rejected(
        zone(
            json!({"clusterRef": "c", "zoneName": "partner.example", "type": "secondary",
            "primaries": [{"address": "primary.partner.example"}]}),
        ),
        "spec.primaries[0].address: invalid value",
    );
}

#[test]
fn inline_zone_records_follow_the_record_rules_but_may_hold_the_apex_ns() {
    accepted(zone(
        json!({"clusterRef": "c", "zoneName": "example.com", "records": [
            {"name": "@", "type": "NS", "values": ["ns1.example.com."]},
            {"name": "www", "type": "A", "values": ["192.0.2.1"]}
        ]}),
    ));
    rejected(
        zone(
            json!({"clusterRef": "c", "zoneName": "example.com", "records": [{"name": "www", "type": "A", "values": ["::1"]}]}),
        ),
        "IPv4",
    );
    rejected(
        zone(
            json!({"clusterRef": "c", "zoneName": "example.com", "records": [{"name": "x", "type": "CNAME", "values": ["a.", "b."]}]}),
        ),
        "exactly one value",
    );
}

#[test]
fn unknown_fields_wrong_kinds_and_bad_names_are_reported() {
    rejected(
        record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "valeus": ["x"]})),
        "spec.valeus: unknown field",
    );
    let mut bad_name = record(json!({"zoneRef": "z", "type": "TXT", "values": ["x"]}));
    bad_name["metadata"]["name"] = json!("Bad_Name");
    rejected(bad_name, "metadata.name");
    let mut other = record(json!({}));
    other["kind"] = json!("ConfigMap");
    assert!(matches!(
        admit(&other, None),
        Err(AdmissionError::UnknownKind(_))
    ));
    other["apiVersion"] = json!("v1");
    assert!(matches!(
        admit(&other, None),
        Err(AdmissionError::WrongApiVersion(_))
    ));
}

#[test]
fn every_violation_is_reported_at_once() {
    let err = rejected(
        record(json!({"zoneRef": "Z!", "name": "a b", "type": "TXT", "values": []})),
        "spec.zoneRef",
    );
    assert!(err.violations().len() >= 3, "{err}");
    assert!(
        err.to_string()
            .starts_with("failed to admit DNSRecord \"r\": "),
        "{err}"
    );
}

#[test]
fn update_grants_need_a_name_unless_zonesub_and_only_on_primary_zones() {
    let spec = |grants: Value| {
        zone(
            json!({"clusterRef": "c", "zoneName": "example.com", "updateKeyRef": "u",
            "updatePolicy": grants}),
        )
    };
    accepted(spec(json!([
        {"keyRef": "acme", "match": "name", "name": "_acme-challenge.www", "types": ["TXT"]},
        {"keyRef": "acme", "match": "wildcard", "name": "*.dyn"},
        {"keyRef": "edns", "match": "subdomain", "name": "k8s.example.com."},
        {"keyRef": "edns", "match": "zonesub"},
    ])));
    rejected(
        spec(json!([{"keyRef": "acme", "match": "name", "types": ["TXT"]}])),
        "updatePolicy[].name is required",
    );
    rejected(
        spec(json!([{"keyRef": "acme", "match": "zonesub", "name": "www"}])),
        "not allowed for match zonesub",
    );
    rejected(
        spec(json!([{"keyRef": "acme", "match": "self", "name": "www"}])),
        "spec.updatePolicy[0].match",
    );
    rejected(
        spec(json!([{"keyRef": "acme", "match": "name", "name": "www", "types": ["ANY"]}])),
        "spec.updatePolicy[0].types[0]",
    );
    // Nothing that could escape the quoted name in named.conf.
    rejected(
        spec(json!([{"keyRef": "acme", "match": "name", "name": "www\"; grant x zonesub ANY"}])),
        "spec.updatePolicy[0].name",
    );
    let many: Vec<Value> = (0..33)
        .map(|_| json!({"keyRef": "acme", "match": "zonesub"}))
        .collect();
    rejected(spec(Value::Array(many)), "spec.updatePolicy");
    rejected(
        zone(
            json!({"clusterRef": "c", "zoneName": "partner.example", "type": "secondary",
            "primaries": [{"address": "198.51.100.1"}],
            "updatePolicy": [{"keyRef": "acme", "match": "zonesub"}]}),
        ),
        "spec.updatePolicy is only for primary zones",
    );
}

#[test]
fn an_external_cluster_deploys_nothing_so_pod_fields_are_refused_beside_it() {
    let external = json!({
        "primary": {"address": "192.0.2.53"},
        "secondaries": [{"address": "192.0.2.54", "port": 5353}],
        "transferKeyRef": "xfer-key",
        "rndc": {"address": "192.0.2.53", "keyRef": "rndc-key"},
    });
    let admitted = accepted(cluster(json!({"external": external})));
    assert_eq!(admitted["spec"]["external"]["primary"]["port"], 53);
    assert_eq!(admitted["spec"]["external"]["rndc"]["port"], 953);
    const MSG: &str = "spec.external is a BIND the operator did not deploy";
    for (field, value) in [
        ("replicas", json!(3)),
        ("image", json!("example.org/bind:1")),
        ("resources", json!({"limits": {"memory": "256Mi"}})),
        ("nodeSelector", json!({"zone": "a"})),
        ("service", json!({"type": "LoadBalancer"})),
        ("storage", json!({"size": "1Gi"})),
        ("catalog", json!({"transferKeyRef": "xfer-key"})),
        ("views", json!([{"name": "internal"}])),
        ("recursion", json!(true)),
        ("forwarders", json!(["192.0.2.1"])),
        ("allowQuery", json!(["any"])),
    ] {
        let mut spec = json!({"external": external});
        spec[field] = value;
        rejected(cluster(spec), MSG);
    }
    // Addresses only: what is written to must not move with DNS.
    rejected(
        cluster(
            json!({"external": {"primary": {"address": "ns1.example.com"}, "transferKeyRef": "xfer-key"}}),
        ),
        "spec.external.primary.address",
    );
    rejected(
        cluster(json!({"external": {"primary": {"address": "192.0.2.53"}}})),
        "transferKeyRef",
    );
}

/// #26: a DNSRecord names a zone in another namespace; that choice is as
/// permanent as zoneRef (the RRset already written lives in that zone).
#[test]
fn zone_namespace_is_a_namespace_name_and_immutable() {
    let plain = accepted(record(
        json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["192.0.2.1"]}),
    ));
    let cross = accepted(record(json!({"zoneRef": "z", "zoneNamespace": "platform",
        "name": "api.team-a", "type": "A", "values": ["192.0.2.1"]})));
    rejected(
        record(json!({"zoneRef": "z", "zoneNamespace": "Platform_NS",
            "name": "www", "type": "A", "values": ["192.0.2.1"]})),
        "zoneNamespace",
    );
    let with_ns = |ns: Value| {
        let mut spec = json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["192.0.2.1"]});
        if !ns.is_null() {
            spec["zoneNamespace"] = ns;
        }
        record(spec)
    };
    for (old, new) in [
        (&plain, with_ns(json!("platform"))),
        (&cross, with_ns(json!("other"))),
        (&cross, with_ns(Value::Null)),
    ] {
        rejected_update(new, Some(old), "zoneNamespace is immutable");
    }
    let mut same = cross.clone();
    same["spec"]["values"] = json!(["192.0.2.2"]);
    admit(&same, Some(&cross)).expect("changing values keeps the zone");
}

/// #26: `spec.recordsFrom` grants: a selector with, and only with, `from:
/// Selector`; names are `@`, exact relative names, `*` or `*.suffix`.
#[test]
fn records_from_grants_are_checked_at_admission() {
    let z = |grants: Value| {
        zone(json!({"clusterRef": "c", "zoneName": "example.com", "recordsFrom": grants}))
    };
    accepted(z(json!([
        {"from": "Selector", "selector": {"matchLabels": {"team": "a"}},
         "names": ["*.team-a", "api", "@", "*"], "types": ["A", "AAAA", "CNAME"]},
        {"from": "Same"},
        {"from": "All", "names": ["_acme-challenge"], "types": ["TXT"]}
    ])));
    rejected(z(json!([{"from": "Selector"}])), "selector is required");
    rejected(
        z(json!([{"from": "All", "selector": {"matchLabels": {"a": "b"}}}])),
        "selector is required",
    );
    rejected(z(json!([{"from": "Elsewhere"}])), "from");
    for bad in ["www.*", "a b", "example.com.", "\"; include"] {
        rejected(z(json!([{"from": "All", "names": [bad]}])), "names");
    }
    rejected(z(json!([{"from": "All", "types": ["SOA"]}])), "types");
}
