//! One zone's records, read from a file or a transfer, turned into the
//! objects the operator serves it from: the SOA and apex NS into a
//! BindZone, every other RRset into a DNSRecord. Every record is parsed by
//! the operator's rdata parsers and every object is checked by the very
//! functions the reconcilers and the API server use
//! ([`crate::render::validate::dns_record`],
//! [`crate::render::validate::zone_config`] and
//! [`crate::api::admission::admit_typed`]), so what is written is what the
//! operator admits; what is not is reported with where it was read.
//! DNSSEC records are left out (the operator signs zones itself with
//! `spec.dnssecPolicy`). Pure: no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::api::ObjectMeta;

use crate::api::{
    self, BindTSIGKey, BindTSIGKeySpec, BindZone, BindZoneSpec, DNSRecord, DNSRecordSpec, SoaSpec,
    ZoneType,
};
use crate::bind::{
    DomainName, KeyName, Rdata, RecordType, TsigAlgorithm, TsigKey, TsigSecret, Ttl, ZoneName,
};
use crate::render::validate::{LoadedKey, dns_record, zone_config};

use super::lexer::Token;
use super::names;
use super::zonefile::{Item, Location, RawRecord, parse_ttl};

/// Types named signs itself; an imported zone gets them from dnssecPolicy.
const DNSSEC_TYPES: [&str; 8] = [
    "RRSIG",
    "NSEC",
    "NSEC3",
    "NSEC3PARAM",
    "DNSKEY",
    "CDS",
    "CDNSKEY",
    "KEY",
];
/// Hint printed with left-out DNSSEC records.
pub const DNSSEC_HINT: &str = "DNSSEC records are made by named itself: set spec.dnssecPolicy (e.g. `default`) on the BindZone to sign the zone, then publish the new DS at the parent";

/// Where the imported objects go: cluster, namespace, update key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub cluster: String,
    pub namespace: Option<String>,
    pub update_key: String,
}

/// A record that was not imported, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Skipped {
    /// `file:line`, or the server a transfer came from.
    pub at: String,
    pub owner: String,
    pub rtype: String,
    pub reason: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.owner.is_empty() {
            write!(f, "{}: {}", self.at, self.reason)
        } else {
            write!(
                f,
                "{}: {} {}: {}",
                self.at, self.owner, self.rtype, self.reason
            )
        }
    }
}

struct Rrset {
    at: Location,
    ttl: u32,
    values: BTreeSet<Rdata>,
}

struct SoaFields {
    ttl: u32,
    mname: DomainName,
    rname: DomainName,
    timers: [u32; 4],
}

/// Collects one zone's records.
pub struct Collector {
    zone: ZoneName,
    view: Option<String>,
    origin: Option<(Arc<str>, ZoneName)>,
    soa: Option<SoaFields>,
    apex_ns: Vec<DomainName>,
    apex_ns_ttl: Option<u32>,
    rrsets: BTreeMap<(DomainName, RecordType), Rrset>,
    skipped: Vec<Skipped>,
    dnssec: Vec<Skipped>,
    notes: Vec<String>,
    records_read: usize,
}

/// One zone, imported: its objects and what was left behind.
pub struct ZoneOutput {
    pub zone: ZoneName,
    pub zone_object: BindZone,
    pub records: Vec<DNSRecord>,
    /// Records that failed to parse or validate (what `--strict` refuses).
    pub skipped: Vec<Skipped>,
    /// DNSSEC records left out (see [`DNSSEC_HINT`]).
    pub dnssec: Vec<Skipped>,
    /// Things kept but changed (a TTL the operator cannot carry).
    pub notes: Vec<String>,
    /// Records read (every RR of the input, DNSSEC and skipped included).
    pub records_read: usize,
}

/// The zone could not be imported at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneError {
    #[error("zone {0} has no SOA record at its apex")]
    NoSoa(String),
    #[error("zone {0} has no NS record at its apex")]
    NoApexNs(String),
    #[error("zone {zone}: the BindZone is refused: {message}")]
    Invalid { zone: String, message: String },
}

impl Collector {
    pub fn new(zone: ZoneName, view: Option<String>) -> Self {
        Collector {
            zone,
            view,
            origin: None,
            soa: None,
            apex_ns: Vec::new(),
            apex_ns_ttl: None,
            rrsets: BTreeMap::new(),
            skipped: Vec::new(),
            dnssec: Vec::new(),
            notes: Vec::new(),
            records_read: 0,
        }
    }

    /// Takes one item of the zone-file reader.
    pub fn add(&mut self, item: Item) {
        match item {
            Item::Record(r) => {
                self.records_read += 1;
                if let Err(reason) = self.record(&r) {
                    self.skip(&r, reason);
                }
            }
            Item::Problem { at, message } => self.skipped.push(Skipped {
                at: at.to_string(),
                owner: String::new(),
                rtype: String::new(),
                reason: message,
            }),
        }
    }

    fn skip(&mut self, r: &RawRecord, reason: String) {
        self.skipped.push(Skipped {
            at: r.at.to_string(),
            owner: r.owner.clone(),
            rtype: r.rtype.clone(),
            reason,
        });
    }

    fn origin_zone(&mut self, origin: &Arc<str>) -> Result<ZoneName, String> {
        if let Some((o, z)) = &self.origin
            && Arc::ptr_eq(o, origin)
        {
            return Ok(z.clone());
        }
        let z = ZoneName::parse(origin).map_err(|e| format!("$ORIGIN: {e}"))?;
        self.origin = Some((origin.clone(), z.clone()));
        Ok(z)
    }

    fn record(&mut self, r: &RawRecord) -> Result<(), String> {
        let owner = DomainName::parse_absolute(&r.owner).map_err(|e| e.to_string())?;
        if !owner.is_within(self.zone.as_domain()) {
            return Err(format!(
                "outside zone {} (named ignores out-of-zone data too)",
                self.zone
            ));
        }
        let apex = owner == *self.zone.as_domain();
        if DNSSEC_TYPES.contains(&r.rtype.as_str()) {
            self.dnssec.push(Skipped {
                at: r.at.to_string(),
                owner: r.owner.clone(),
                rtype: r.rtype.clone(),
                reason: "DNSSEC record left out".into(),
            });
            return Ok(());
        }
        let origin = self.origin_zone(&r.origin)?;
        if r.rtype == "SOA" {
            if !apex {
                return Err("an SOA record belongs at the zone apex only".into());
            }
            return self.soa(r, &origin);
        }
        let rtype: RecordType = r.rtype.parse().map_err(|_| {
            format!(
                "type {} is not one the operator manages (A, AAAA, CNAME, DNAME, NS, PTR, MX, TXT, SRV, CAA, SSHFP, TLSA, DS, NAPTR, SVCB, HTTPS, LOC)",
                r.rtype
            )
        })?;
        let text = rdata_text(rtype, &r.rdata)?;
        let rdata = Rdata::parse(rtype, &text, &origin).map_err(|e| e.to_string())?;
        if apex && rtype == RecordType::Ns {
            let Rdata::Name(target) = rdata else {
                unreachable!("NS rdata is a name")
            };
            self.apex_ns_ttl.get_or_insert(r.ttl);
            if !self.apex_ns.contains(&target) {
                self.apex_ns.push(target);
            }
            return Ok(());
        }
        let set = self.rrsets.entry((owner, rtype)).or_insert_with(|| Rrset {
            at: r.at.clone(),
            ttl: r.ttl,
            values: BTreeSet::new(),
        });
        if set.ttl != r.ttl {
            self.notes.push(format!(
                "{}: {} {}: TTL {} set to the RRset's first TTL {} (as named does)",
                r.at, r.owner, r.rtype, r.ttl, set.ttl
            ));
        }
        set.values.insert(rdata);
        Ok(())
    }

    fn soa(&mut self, r: &RawRecord, origin: &ZoneName) -> Result<(), String> {
        if self.soa.is_some() {
            return Err("a second SOA record".into());
        }
        let [mname, rname, _serial, timers @ ..] = r.rdata.as_slice() else {
            return Err("an SOA record has 7 fields".into());
        };
        if timers.len() != 4 {
            return Err("an SOA record has 7 fields".into());
        }
        let name =
            |t: &Token| DomainName::resolve_target(&t.text, origin).map_err(|e| e.to_string());
        let mut out = [0u32; 4];
        for (o, t) in out.iter_mut().zip(timers) {
            *o = parse_ttl(&t.text).ok_or_else(|| format!("bad SOA timer {:?}", t.text))?;
        }
        self.soa = Some(SoaFields {
            ttl: r.ttl,
            mname: name(mname)?,
            rname: name(rname)?,
            timers: out,
        });
        Ok(())
    }

    /// Builds and checks the objects.
    pub fn finish(mut self, target: &Target) -> Result<ZoneOutput, ZoneError> {
        let zone_str = self.zone.to_string();
        let soa = self
            .soa
            .take()
            .ok_or_else(|| ZoneError::NoSoa(zone_str.clone()))?;
        if self.apex_ns.is_empty() {
            return Err(ZoneError::NoApexNs(zone_str));
        }
        let default_ttl = most_common_ttl(
            self.rrsets
                .values()
                .map(|s| s.ttl)
                .chain(self.apex_ns_ttl)
                .chain([soa.ttl]),
        );
        if soa.ttl != default_ttl {
            self.notes.push(format!(
                "the SOA's TTL {} becomes the zone's defaultTTL {default_ttl}",
                soa.ttl
            ));
        }
        if let Some(t) = self.apex_ns_ttl.filter(|t| *t != default_ttl) {
            self.notes.push(format!(
                "the apex NS TTL {t} becomes the zone's defaultTTL {default_ttl}"
            ));
        }
        let zone_object = names::zone_object(self.zone.as_str(), self.view.as_deref());
        let bind_zone = BindZone {
            metadata: meta(&zone_object, target),
            spec: BindZoneSpec {
                cluster_ref: target.cluster.clone(),
                zone_name: self.zone.as_str().to_owned(),
                view: self.view.clone(),
                type_: ZoneType::Primary,
                primaries: Vec::new(),
                catalog: true,
                nameservers: self.apex_ns.iter().map(DomainName::fqdn).collect(),
                soa: SoaSpec {
                    mname: Some(soa.mname.fqdn()),
                    rname: Some(soa.rname.fqdn()),
                    refresh: soa.timers[0],
                    retry: soa.timers[1],
                    expire: soa.timers[2],
                    minimum: soa.timers[3],
                },
                default_ttl,
                records: Vec::new(),
                update_key_ref: Some(target.update_key.clone()),
                allow_transfer: Vec::new(),
                dnssec_policy: None,
                update_policy: Vec::new(),
                records_from: Vec::new(),
                external_secondaries: None,
            },
            status: None,
        };
        check_zone(&bind_zone, target).map_err(|message| ZoneError::Invalid {
            zone: zone_str.clone(),
            message,
        })?;

        let rrsets = std::mem::take(&mut self.rrsets);
        let keys: Vec<(String, String)> = rrsets
            .keys()
            .map(|(name, t)| (relative(name, &self.zone), t.as_str().to_owned()))
            .collect();
        let object_names = names::record_objects(&zone_object, &keys);
        let ttl = Ttl::new(i64::from(default_ttl)).expect("a TTL read as u32 within range");
        let mut built = Vec::with_capacity(rrsets.len());
        for (((_, rtype), set), ((owner, _), object)) in
            rrsets.into_iter().zip(keys.into_iter().zip(object_names))
        {
            let mut values: Vec<String> = set.values.iter().map(ToString::to_string).collect();
            values.sort();
            let record = DNSRecord {
                metadata: meta(&object, target),
                spec: DNSRecordSpec {
                    zone_ref: zone_object.clone(),
                    zone_namespace: None,
                    name: owner,
                    type_: api_type(rtype),
                    ttl: (set.ttl != default_ttl).then_some(set.ttl),
                    values,
                },
                status: None,
            };
            built.push((set.at, record));
        }
        // Checking is most of the work at 100,000 records (schema and CEL
        // per object); each object alone, so spread over the cores, the
        // results kept in order.
        let verdicts = check_records(&built, &self.zone, ttl);
        let mut records = Vec::with_capacity(built.len());
        for ((at, record), verdict) in built.into_iter().zip(verdicts) {
            match verdict {
                Ok(()) => records.push(record),
                Err(reason) => self.skipped.push(Skipped {
                    at: at.to_string(),
                    owner: record.spec.name,
                    rtype: record.spec.type_.to_string(),
                    reason,
                }),
            }
        }
        Ok(ZoneOutput {
            zone: self.zone,
            zone_object: bind_zone,
            records,
            skipped: self.skipped,
            dnssec: self.dnssec,
            notes: self.notes,
            records_read: self.records_read,
        })
    }
}

/// Runs the reconciler's record validation and admission on every record,
/// on all cores; one verdict per record, in order.
fn check_records(
    records: &[(Location, DNSRecord)],
    zone: &ZoneName,
    ttl: Ttl,
) -> Vec<Result<(), String>> {
    let check = |record: &DNSRecord| -> Result<(), String> {
        dns_record(record, zone, ttl, true)
            .set
            .map_err(|e| format!("{}: {}", e.reason, e.message))?;
        api::admission::admit_typed(record, None).map_err(|e| e.to_string())?;
        Ok(())
    };
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let chunk = records.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = records
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|(_, r)| check(r)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a record check does not panic"))
            .collect()
    })
}

/// The rdata tokens as one presentation value for [`Rdata::parse`]: the
/// tokens as written, except TXT, whose every token (quoted or bare, as a
/// zone file allows) becomes one quoted character-string.
fn rdata_text(rtype: RecordType, tokens: &[Token]) -> Result<String, String> {
    if tokens.is_empty() {
        return Err("no rdata".into());
    }
    if tokens[0].text == "\\#" {
        return Err(
            "rdata in the generic \\# form is not imported; write it in the type's own form".into(),
        );
    }
    let mut out = String::new();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if rtype == RecordType::Txt {
            let strings = crate::bind::rdata::parse_charstrings(&t.text)
                .map_err(|r| format!("TXT value {}: {r}", t.text))?;
            for s in strings {
                out.push_str(&crate::bind::rdata::quote_charstring(&s));
            }
        } else {
            out.push_str(&t.text);
        }
    }
    Ok(out)
}

/// The owner relative to the zone (`@` for the apex).
fn relative(name: &DomainName, zone: &ZoneName) -> String {
    if name == zone.as_domain() {
        return "@".into();
    }
    if zone.as_domain().is_root() {
        return name.as_str().to_owned();
    }
    name.as_str()
        .strip_suffix(zone.as_str())
        .and_then(|s| s.strip_suffix('.'))
        .unwrap_or(name.as_str())
        .to_owned()
}

fn api_type(t: RecordType) -> api::RecordType {
    t.as_str()
        .parse()
        .expect("every BIND-layer record type is an API record type")
}

fn meta(name: &str, target: &Target) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: target.namespace.clone(),
        ..ObjectMeta::default()
    }
}

/// The TTL most RRsets have (ties: the smallest), so fewest DNSRecords
/// need their own.
fn most_common_ttl(ttls: impl Iterator<Item = u32>) -> u32 {
    let mut count: BTreeMap<u32, usize> = BTreeMap::new();
    for t in ttls {
        *count.entry(t).or_default() += 1;
    }
    count
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map_or(api::bindzone::DEFAULT_ZONE_TTL, |(t, _)| *t)
}

/// The BindZone through the reconciler's validation (with a stand-in for
/// its update key: only the key's name matters there) and admission.
fn check_zone(zone: &BindZone, target: &Target) -> Result<(), String> {
    let key_object = update_key_object(target);
    let key = TsigKey {
        name: KeyName::parse(&target.update_key).map_err(|e| e.to_string())?,
        algorithm: TsigAlgorithm::HmacSha256,
        secret: TsigSecret::from_bytes(&[0; 32]).map_err(|e| e.to_string())?,
    };
    let loaded = [LoadedKey {
        object: &key_object,
        key,
    }];
    let transfer = KeyName::parse("transfer").map_err(|e| e.to_string())?;
    zone_config(zone, &loaded, &transfer, &[]).map_err(|e| e.to_string())?;
    api::admission::admit_typed(zone, None).map_err(|e| e.to_string())?;
    Ok(())
}

/// The BindTSIGKey the zones' `updateKeyRef` names (material generated by
/// the operator).
pub fn update_key_object(target: &Target) -> BindTSIGKey {
    BindTSIGKey {
        metadata: meta(&target.update_key, target),
        spec: BindTSIGKeySpec {
            cluster_ref: Some(target.cluster.clone()),
            key_name: None,
            algorithm: api::TsigAlgorithm::HmacSha256,
            secret_ref: None,
        },
        status: None,
    }
}
