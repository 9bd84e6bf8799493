//! The admission table: invalid objects and what the user is told, shared by
//! the client-side check (`api::admission`, always run) and the real API
//! server (the lane), so the two stay in step. The cases are those of
//! tests/api_validation.rs. `client` is a substring of one client-side
//! violation; `server` are substrings of kubectl's error from the real
//! server, which words schema violations its own way (CEL messages are ours
//! and come back verbatim).

use serde_json::{Value, json};

pub struct Case {
    pub what: &'static str,
    pub object: Value,
    /// For an update: the object as first created.
    pub old: Option<Value>,
    pub client: &'static str,
    pub server: &'static [&'static str],
}

fn obj(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "bind.unkin.net/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn record(spec: Value) -> Value {
    obj("DNSRecord", "r", spec)
}

fn zone(spec: Value) -> Value {
    obj("BindZone", "z", spec)
}

fn cluster(spec: Value) -> Value {
    obj("BindCluster", "c", spec)
}

fn key(spec: Value) -> Value {
    obj("BindTSIGKey", "k", spec)
}

/// `obj` renamed: an update case must not meet the other cases' objects.
fn named(name: &str, mut obj: Value) -> Value {
    obj["metadata"]["name"] = json!(name);
    obj
}

fn case(
    what: &'static str,
    object: Value,
    client: &'static str,
    server: &'static [&'static str],
) -> Case {
    Case {
        what,
        object,
        old: None,
        client,
        server,
    }
}

/// Every rejection case.
pub fn rejections() -> Vec<Case> {
    let many: Vec<String> = (0..101).map(|i| format!("\"v{i}\"")).collect();
    let long = "x".repeat(4097);
    let mut bad_name = record(json!({"zoneRef": "z", "type": "TXT", "values": ["x"]}));
    bad_name["metadata"]["name"] = json!("Bad_Name");
    let evil = "www\"; include \"/etc/passwd";
    vec![
        case(
            "apex NS record",
            record(
                json!({"zoneRef": "z", "name": "@", "type": "NS", "values": ["ns1.example.com."]}),
            ),
            "BindZone.spec.nameservers",
            &["BindZone.spec.nameservers", "apex NS"],
        ),
        case(
            "apex NS record without a name",
            record(json!({"zoneRef": "z", "type": "NS", "values": ["ns1.example.com."]})),
            "BindZone.spec.nameservers",
            &["BindZone.spec.nameservers"],
        ),
        case(
            "A record with a bad IPv4 address",
            record(json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["1.2.3.999"]})),
            "IPv4",
            &["IPv4"],
        ),
        case(
            "A record with an IPv6 value",
            record(
                json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["192.0.2.1", "2001:db8::1"]}),
            ),
            "IPv4",
            &["IPv4"],
        ),
        case(
            "AAAA record with an IPv4 value",
            record(json!({"zoneRef": "z", "name": "www", "type": "AAAA", "values": ["192.0.2.1"]})),
            "IPv6",
            &["IPv6"],
        ),
        case(
            "A record with a host name",
            record(
                json!({"zoneRef": "z", "name": "www", "type": "A", "values": ["www.example.com."]}),
            ),
            "IPv4",
            &["IPv4"],
        ),
        case(
            "CNAME with two values",
            record(
                json!({"zoneRef": "z", "name": "www", "type": "CNAME", "values": ["a.example.com.", "b.example.com."]}),
            ),
            "exactly one value",
            &["exactly one value"],
        ),
        case(
            "record without values",
            record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": []})),
            "spec.values: must have at least 1",
            &["spec.values", "at least 1"],
        ),
        case(
            "record with no values field",
            record(json!({"zoneRef": "z", "name": "www", "type": "TXT"})),
            "spec.values: required value",
            &["spec.values", "Required value"],
        ),
        case(
            "record with 101 values",
            record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": many})),
            "at most 100 items",
            &["spec.values", "at most 100 items"],
        ),
        case(
            "TTL above 2^31-1",
            record(
                json!({"zoneRef": "z", "name": "www", "type": "TXT", "ttl": 2147483648u64, "values": ["x"]}),
            ),
            "spec.ttl",
            &["spec.ttl"],
        ),
        case(
            "negative TTL",
            record(
                json!({"zoneRef": "z", "name": "www", "type": "TXT", "ttl": -1, "values": ["x"]}),
            ),
            "spec.ttl",
            &["spec.ttl"],
        ),
        case(
            "negative zone default TTL",
            zone(json!({"clusterRef": "c", "zoneName": "example.com", "defaultTTL": -5})),
            "spec.defaultTTL",
            &["spec.defaultTTL"],
        ),
        case(
            "record type SOA",
            record(json!({"zoneRef": "z", "name": "x", "type": "SOA", "values": ["1"]})),
            "spec.type: unsupported value",
            &["spec.type", "Unsupported value"],
        ),
        case(
            "record type in lower case",
            record(json!({"zoneRef": "z", "name": "x", "type": "a", "values": ["1"]})),
            "spec.type: unsupported value",
            &["spec.type", "Unsupported value"],
        ),
        case(
            "record name that would escape into named.conf",
            record(json!({"zoneRef": "z", "name": evil, "type": "TXT", "values": ["x"]})),
            "spec.name: invalid value",
            &["spec.name", "Invalid value"],
        ),
        case(
            "zone name with a space",
            zone(json!({"clusterRef": "c", "zoneName": "a b"})),
            "spec.zoneName: invalid value",
            &["spec.zoneName", "Invalid value"],
        ),
        case(
            "zone nameserver with a brace",
            zone(json!({"clusterRef": "c", "zoneName": "example.com", "nameservers": ["{brace"]})),
            "spec.nameservers[0]",
            &["spec.nameservers[0]"],
        ),
        case(
            "zone view with a semicolon",
            zone(json!({"clusterRef": "c", "zoneName": "example.com", "view": "semi;colon"})),
            "spec.view",
            &["spec.view"],
        ),
        case(
            "TSIG key name with a quote",
            key(json!({"keyName": "quote'"})),
            "spec.keyName",
            &["spec.keyName"],
        ),
        case(
            "allowQuery entry that closes the block",
            cluster(json!({"allowQuery": ["www }; zone"]})),
            "spec.allowQuery[0]",
            &["spec.allowQuery[0]"],
        ),
        case(
            "view name with a newline",
            cluster(json!({"views": [{"name": "new\nline"}]})),
            "spec.views[0].name",
            &["spec.views[0].name"],
        ),
        case(
            "catalog zone name with a quote",
            cluster(json!({"catalog": {"zoneName": evil}})),
            "spec.catalog.zoneName",
            &["spec.catalog.zoneName"],
        ),
        case(
            "forward zone with a space",
            cluster(json!({"forwardZones": [{"zone": "a b", "forwarders": ["192.0.2.1"]}]})),
            "spec.forwardZones[0].zone",
            &["spec.forwardZones[0].zone"],
        ),
        case(
            "TXT value that smuggles an nsupdate command",
            record(
                json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": ["\"ok\"\nupdate delete example.com. ANY"]}),
            ),
            "spec.values[0]: invalid value",
            &["spec.values[0]", "Invalid value"],
        ),
        case(
            "value longer than 4096 characters",
            record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": [long]})),
            "at most 4096 characters",
            &["spec.values[0]", "Too long"],
        ),
        case(
            "unknown TSIG algorithm",
            key(json!({"algorithm": "hmac-sha999"})),
            "spec.algorithm: unsupported value",
            &["spec.algorithm", "Unsupported value"],
        ),
        case(
            "TSIG algorithm in upper case",
            key(json!({"algorithm": "HMAC-SHA256"})),
            "spec.algorithm: unsupported value",
            &["spec.algorithm", "Unsupported value"],
        ),
        case(
            "cluster with no replicas",
            cluster(json!({"replicas": 0})),
            "spec.replicas: invalid value 0: must be at least 1",
            &["spec.replicas", "greater than or equal to 1"],
        ),
        case(
            "cluster forwarder that is not an address",
            cluster(json!({"forwarders": ["1.2.3"]})),
            "forwarders must be IP addresses",
            &["forwarders must be IP addresses"],
        ),
        case(
            "forward zone forwarder that is not an address",
            cluster(
                json!({"forwardZones": [{"zone": "corp.example", "forwarders": ["999.1.1.1"]}]}),
            ),
            "forwarders must be IP addresses",
            &["forwarders must be IP addresses"],
        ),
        case(
            "secondary zone without primaries",
            zone(json!({"clusterRef": "c", "zoneName": "partner.example", "type": "secondary"})),
            "spec.primaries is required",
            &["spec.primaries is required"],
        ),
        case(
            "primary zone with primaries",
            zone(
                json!({"clusterRef": "c", "zoneName": "example.com", "primaries": [{"address": "198.51.100.1"}]}),
            ),
            "spec.primaries is required",
            &["spec.primaries is required"],
        ),
        case(
            "secondary zone primary with a bad address",
            zone(
                json!({"clusterRef": "c", "zoneName": "partner.example", "type": "secondary",
                "primaries": [{"address": "198.51.100.999"}]}),
            ),
            "must be an IP address",
            &["must be an IP address"],
        ),
        case(
            "inline zone A record with an IPv6 value",
            zone(
                json!({"clusterRef": "c", "zoneName": "example.com", "records": [{"name": "www", "type": "A", "values": ["::1"]}]}),
            ),
            "IPv4",
            &["IPv4"],
        ),
        case(
            "inline zone CNAME with two values",
            zone(
                json!({"clusterRef": "c", "zoneName": "example.com", "records": [{"name": "x", "type": "CNAME", "values": ["a.", "b."]}]}),
            ),
            "exactly one value",
            &["exactly one value"],
        ),
        case(
            "misspelt field",
            record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "valeus": ["x"]})),
            "spec.valeus: unknown field",
            &["unknown field", "spec.valeus"],
        ),
        case(
            "object name in upper case",
            bad_name,
            "metadata.name",
            &["metadata.name", "Invalid value"],
        ),
        Case {
            what: "zoneRef changed",
            old: Some(named(
                "r-moved",
                record(json!({"zoneRef": "z1", "name": "www", "type": "TXT", "values": ["x"]})),
            )),
            object: named(
                "r-moved",
                record(json!({"zoneRef": "z2", "name": "www", "type": "TXT", "values": ["x"]})),
            ),
            client: "zoneRef is immutable",
            server: &["zoneRef is immutable"],
        },
        Case {
            what: "zoneName changed",
            old: Some(named(
                "z-renamed",
                zone(json!({"clusterRef": "c", "zoneName": "example.com"})),
            )),
            object: named(
                "z-renamed",
                zone(json!({"clusterRef": "c", "zoneName": "example.org"})),
            ),
            client: "zoneName is immutable",
            server: &["zoneName is immutable"],
        },
        Case {
            what: "zoneNamespace added later",
            old: Some(named(
                "r-crossed",
                record(json!({"zoneRef": "z", "name": "www", "type": "TXT", "values": ["x"]})),
            )),
            object: named(
                "r-crossed",
                record(
                    json!({"zoneRef": "z", "zoneNamespace": "platform", "name": "www",
                              "type": "TXT", "values": ["x"]}),
                ),
            ),
            client: "zoneNamespace is immutable",
            server: &["zoneNamespace is immutable"],
        },
        case(
            "recordsFrom Selector without a selector",
            zone(json!({"clusterRef": "c", "zoneName": "example.com",
                        "recordsFrom": [{"from": "Selector", "names": ["*.team-a"]}]})),
            "selector is required",
            &["selector is required"],
        ),
        case(
            "recordsFrom name with a wildcard inside",
            zone(json!({"clusterRef": "c", "zoneName": "example.com",
                        "recordsFrom": [{"from": "All", "names": ["www.*"]}]})),
            "names",
            &["recordsFrom", "names"],
        ),
    ]
}
