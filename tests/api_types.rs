//! Round-trip and defaulting tests of the CRD types: what a user writes in a
//! manifest survives deserialising into the Rust types and serialising back,
//! and omitted fields get the documented defaults.

use bind_operator::api::{
    BindCluster, BindTSIGKey, BindZone, DNSRecord, DnssecValidation, Phase, RecordType,
    TsigAlgorithm, ZoneType,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses YAML into `T`, serialises back, and asserts the JSON value is
/// unchanged (nothing dropped, nothing renamed).
fn round_trip<T: DeserializeOwned + Serialize>(yaml: &str) -> T {
    let input: Value = bind_operator::yaml::from_str(yaml).expect("fixture is valid YAML");
    let typed: T = serde_json::from_value(input.clone()).expect("fixture deserialises");
    let output = serde_json::to_value(&typed).expect("serialises");
    assert_eq!(
        input,
        output,
        "round trip changed the object:\ninput:  {}\noutput: {}",
        serde_json::to_string_pretty(&input).unwrap(),
        serde_json::to_string_pretty(&output).unwrap()
    );
    typed
}

#[test]
fn bindtsigkey_round_trips_and_uses_wire_spellings() {
    let key: BindTSIGKey = round_trip(
        r#"
apiVersion: bind.unkin.net/v1alpha1
kind: BindTSIGKey
metadata: {name: update-key, namespace: dns}
spec:
  clusterRef: main
  keyName: update-key.example.com
  algorithm: hmac-sha512
  secretRef: {name: tsig, key: secret}
status:
  secretName: tsig
  observedGeneration: 3
  conditions:
  - {type: Ready, status: "True", reason: Resolved, message: "", lastTransitionTime: "2024-01-02T03:04:05Z"}
"#,
    );
    assert_eq!(key.spec.algorithm, TsigAlgorithm::HmacSha512);
    assert_eq!(key.spec.algorithm.key_len(), 64);
}

#[test]
fn bindtsigkey_defaults() {
    let key: BindTSIGKey = bind_operator::yaml::from_str(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata: {name: k}\nspec:\n  secretRef: {name: s}\n",
    )
    .unwrap();
    assert_eq!(key.spec.algorithm, TsigAlgorithm::HmacSha256);
    assert_eq!(key.spec.secret_ref.unwrap().key, "secret");
    assert!(key.spec.cluster_ref.is_none());
}

#[test]
fn bindcluster_round_trips_every_field() {
    let c: BindCluster = round_trip(
        r#"
apiVersion: bind.unkin.net/v1alpha1
kind: BindCluster
metadata: {name: main, namespace: dns}
spec:
  replicas: 3
  image: internetsystemsconsortium/bind9:9.18
  imagePullPolicy: IfNotPresent
  imagePullSecrets: [{name: regcred}]
  resources: {limits: {memory: 512Mi}, requests: {cpu: 100m}}
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: dns, operator: Exists, effect: NoSchedule}]
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm: {topologyKey: kubernetes.io/hostname}
  podAnnotations: {prometheus.io/scrape: "true"}
  service:
    type: LoadBalancer
    annotations: {metallb.universe.tf/address-pool: dns}
    labels: {tier: dns}
    loadBalancerIP: 192.0.2.53
    loadBalancerClass: metallb
    loadBalancerSourceRanges: [10.0.0.0/8]
    externalTrafficPolicy: Local
  storage: {size: 5Gi, storageClassName: fast}
  recursion: true
  allowQuery: [any]
  allowRecursion: [10.0.0.0/8, "!10.9.0.0/16", localnets]
  forwarders: [192.0.2.1, "2001:db8::1"]
  forwardOnly: true
  dnssecValidation: auto
  validateExcept: [corp.example.com]
  forwardZones:
  - {zone: corp.example.com, forwarders: [10.1.1.1], forwardOnly: true}
  views:
  - {name: internal, matchClients: [10.0.0.0/8], matchDestinations: [any], recursion: true}
  - {name: external, matchClients: [any]}
  catalog: {zoneName: catalog.example.invalid, transferKeyRef: transfer}
status:
  observedGeneration: 7
  readyReplicas: 3
  appliedConfig: {main-0: abc, main-1: def}
  conditions:
  - {type: ConfigApplied, status: "False", reason: Propagating, message: "awaiting config on main-2", lastTransitionTime: "2024-01-02T03:04:05Z", observedGeneration: 7}
"#,
    );
    assert_eq!(c.spec.dnssec_validation, Some(DnssecValidation::Auto));
    assert_eq!(c.status.unwrap().applied_config["main-1"], "def");
}

#[test]
fn bindcluster_defaults() {
    let c: BindCluster = bind_operator::yaml::from_str(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata: {name: c}\nspec: {}\n",
    )
    .unwrap();
    assert_eq!(c.spec.replicas, 2);
    assert_eq!(c.spec.image, "internetsystemsconsortium/bind9:9.20");
    assert!(!c.spec.recursion);
    assert!(c.spec.catalog.is_none());
    assert_eq!(c.spec, Default::default());
}

#[test]
fn bindzone_round_trips_every_field() {
    let z: BindZone = round_trip(
        r#"
apiVersion: bind.unkin.net/v1alpha1
kind: BindZone
metadata: {name: example-com, namespace: dns}
spec:
  clusterRef: main
  zoneName: example.com
  view: internal
  type: primary
  catalog: false
  nameservers: [ns1.example.com., ns2]
  soa: {mname: ns1.example.com., rname: hostmaster.example.com., refresh: 7200, retry: 600, expire: 604800, minimum: 60}
  defaultTTL: 300
  records:
  - {name: www, type: A, ttl: 60, values: [192.0.2.10, 192.0.2.11]}
  - {name: "@", type: MX, values: ["10 mail.example.com."]}
  updateKeyRef: update-key
  allowTransfer: [key xfr]
  dnssecPolicy: default
status:
  observedGeneration: 2
  phase: Ready
  serial: 2024010203
  recordCount: 2
  servers: {main-0: 2024010203, main-1: 2024010202}
  conditions:
  - {type: Ready, status: "True", reason: Serving, message: "", lastTransitionTime: "2024-01-02T03:04:05Z"}
"#,
    );
    assert_eq!(z.spec.records[1].type_, RecordType::MX);
    assert_eq!(z.status.unwrap().phase, Some(Phase::Ready));

    let secondary: BindZone = round_trip(
        r#"
apiVersion: bind.unkin.net/v1alpha1
kind: BindZone
metadata: {name: partner}
spec:
  clusterRef: main
  zoneName: partner.example.
  type: secondary
  primaries: [{address: 198.51.100.1, port: 5353, keyRef: partner-xfr}]
  catalog: true
  soa: {refresh: 3600, retry: 900, expire: 1209600, minimum: 300}
  defaultTTL: 3600
"#,
    );
    assert_eq!(secondary.spec.type_, ZoneType::Secondary);
}

#[test]
fn bindzone_defaults() {
    let z: BindZone = bind_operator::yaml::from_str(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindZone\nmetadata: {name: z}\nspec: {clusterRef: c, zoneName: example.com, primaries: [{address: 192.0.2.1}]}\n",
    )
    .unwrap();
    assert_eq!(z.spec.type_, ZoneType::Primary);
    assert!(
        z.spec.catalog,
        "primary zones are catalog members by default"
    );
    assert_eq!(z.spec.default_ttl, 3600);
    assert_eq!(z.spec.soa.refresh, 3600);
    assert_eq!(z.spec.soa.minimum, 300);
    assert!(z.spec.soa.mname.is_none());
    assert_eq!(z.spec.primaries[0].port, 53);
}

#[test]
fn dnsrecord_round_trips_and_defaults_to_apex() {
    let r: DNSRecord = round_trip(
        r#"
apiVersion: bind.unkin.net/v1alpha1
kind: DNSRecord
metadata: {name: www, namespace: dns}
spec:
  zoneRef: example-com
  name: www
  type: AAAA
  ttl: 120
  values: ["2001:db8::10"]
status:
  phase: Error
  reason: Conflict
  message: another DNSRecord owns www.example.com./AAAA
  fqdn: www.example.com.
  recordType: AAAA
  observedGeneration: 1
"#,
    );
    assert_eq!(r.spec.type_, RecordType::AAAA);

    let apex: DNSRecord = bind_operator::yaml::from_str(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata: {name: a}\nspec: {zoneRef: z, type: TXT, values: ['\"hello\"']}\n",
    )
    .unwrap();
    assert_eq!(apex.spec.name, "@");
    assert!(apex.spec.ttl.is_none());
}

#[test]
fn unknown_enum_spellings_are_rejected() {
    for bad in [
        "spec: {zoneRef: z, type: a, values: [1.2.3.4]}",
        "spec: {zoneRef: z, type: SOA, values: [x]}",
    ] {
        let doc = format!(
            "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata: {{name: a}}\n{bad}\n"
        );
        assert!(
            bind_operator::yaml::from_str::<DNSRecord>(&doc).is_err(),
            "{bad} should not parse"
        );
    }
    let doc = "apiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata: {name: k}\nspec: {algorithm: HMAC-SHA256}\n";
    assert!(bind_operator::yaml::from_str::<BindTSIGKey>(doc).is_err());
}

#[test]
fn record_type_parses_case_insensitively_from_bind_output() {
    assert_eq!("aaaa".parse::<RecordType>().unwrap(), RecordType::AAAA);
    assert_eq!("HTTPS".parse::<RecordType>().unwrap(), RecordType::HTTPS);
    assert!("SOA".parse::<RecordType>().is_err());
    for t in RecordType::ALL {
        assert_eq!(
            serde_json::to_value(t).unwrap(),
            Value::String(t.to_string())
        );
    }
    for a in TsigAlgorithm::ALL {
        assert_eq!(
            serde_json::to_value(a).unwrap(),
            Value::String(a.to_string())
        );
    }
}

#[test]
fn catalog_zone_name_is_explicit_or_derived_per_cluster() {
    let mut c: BindCluster = bind_operator::yaml::from_str(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: BindCluster\nmetadata: {name: main, namespace: dns}\nspec: {catalog: {transferKeyRef: xfr}}\n",
    )
    .unwrap();
    assert_eq!(c.catalog_zone_name(), "main.dns.catalog.invalid");
    assert_eq!(c.transfer_key_ref(), Some("xfr"));
    c.spec.catalog.as_mut().unwrap().zone_name = Some("cat.example.".into());
    assert_eq!(c.catalog_zone_name(), "cat.example");
}
