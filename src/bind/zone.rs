//! Zones on the servers: the zone-file skeleton a new primary zone starts
//! from, the zone clauses (primary zone, secondary zone of external
//! primaries, the catalog zone), and catalog membership (RFC 9432 schema 2,
//! stable member ids). Pure, no I/O.
//!
//! A clause is the `{ ... };` body of a `zone` statement. On the primary,
//! primary zones and the catalog are listed by it in the zone list file
//! the rendered named.conf includes (one stanza file per zone, applied by
//! one `rndc reconfig` per round; see `bind::commands::apply_zones`);
//! secondary-type zones are added with it by `rndc addzone`.
//!
//! Why zones (including the catalog) are set up at run time rather than
//! rendered into named.conf.primary (the ConfigMap): a zone in named.conf
//! needs its file before named starts, and its NOTIFY targets are secondary
//! pod addresses, which must never be in rendered config. Set up at run
//! time, every zone follows one path: write the file, list the zone; and a
//! primary restarted on an empty volume is repaired the same way it was
//! first built. Serials start at the caller's clock (seconds since the
//! epoch) and the primary uses `serial-update-method unixtime`, so a
//! re-created zone's serial is ahead of what the secondaries hold and they
//! transfer it.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use super::conf::{ConfWriter, Tok, server_tokens};
use super::error::ValidationError;
use super::grant::Grant;
use super::layout::data;
use super::name::{DomainName, ZoneName};
use super::rdata::{Rdata, RecordType};
use super::types::{AclElement, Endpoint, KeyName, Ttl, ViewName};

/// Name of the server list the primary defines at top level (in
/// `notify-servers.conf`, written at run time) with the secondary pods'
/// endpoints: a zone with its own external secondaries names it in its
/// zone-level `also-notify` (which replaces the options-level list), so the
/// cluster's own secondaries are still notified. Inside view V it is
/// `<this>.<V>`, signed with V's key.
pub const SECONDARIES_LIST: &str = "bind-operator-secondaries";

/// [`SECONDARIES_LIST`] for a zone in `view` (or outside views).
pub fn secondaries_list_name(view: Option<&ViewName>) -> String {
    match view {
        Some(v) => format!("{SECONDARIES_LIST}.{}", v.as_str()),
        None => SECONDARIES_LIST.to_string(),
    }
}

/// A secondary outside the cluster fed by the primary (hidden primary).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExternalSecondary {
    pub endpoint: Endpoint,
    /// Signs its NOTIFYs, transfers and the operator's serial queries.
    pub key: KeyName,
}

/// SOA timers and names of a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Soa {
    /// Primary name server (MNAME).
    pub mname: DomainName,
    /// Responsible mailbox as a domain name (RNAME, `hostmaster.example.com.`).
    pub rname: DomainName,
    pub refresh: Ttl,
    pub retry: Ttl,
    pub expire: Ttl,
    /// Negative-caching TTL.
    pub minimum: Ttl,
}

/// Default SOA timers: refresh 1h, retry 10m, expire 1w, minimum 5m.
pub const DEFAULT_SOA_TIMERS: [u32; 4] = [3600, 600, 604_800, 300];

impl Soa {
    /// SOA with default timers and the usual names `ns1.<zone>` /
    /// `hostmaster.<zone>`.
    pub fn defaults_for(zone: &ZoneName) -> Self {
        let sub = |label: &str| {
            DomainName::resolve(label, zone).unwrap_or_else(|_| zone.as_domain().clone())
        };
        let t = |s: u32| Ttl::new(i64::from(s)).expect("default timers are valid ttls");
        Soa {
            mname: sub("ns1"),
            rname: sub("hostmaster"),
            refresh: t(DEFAULT_SOA_TIMERS[0]),
            retry: t(DEFAULT_SOA_TIMERS[1]),
            expire: t(DEFAULT_SOA_TIMERS[2]),
            minimum: t(DEFAULT_SOA_TIMERS[3]),
        }
    }
}

/// Turns an RNAME given as an email address (`hostmaster@example.com`) or a
/// domain name into a domain name.
pub fn parse_rname(text: &str, zone: &ZoneName) -> Result<DomainName, ValidationError> {
    match text.split_once('@') {
        Some((local, domain)) => {
            if local.contains('.') {
                return Err(ValidationError::new(
                    "soa rname",
                    text,
                    "must not have a dot in the mailbox part",
                ));
            }
            DomainName::parse_absolute(&format!("{local}.{}", domain.trim_end_matches('.')))
        }
        None => DomainName::resolve_target(text, zone),
    }
}

/// The first contents of a primary zone's file: SOA, apex NS and any glue
/// or other records that must be there before the first update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneSkeleton {
    pub zone: ZoneName,
    pub default_ttl: Ttl,
    pub soa: Soa,
    /// Starting serial; use the current time in seconds (see module docs).
    pub serial: u32,
    /// Apex NS targets; empty means the SOA MNAME alone.
    pub nameservers: Vec<DomainName>,
    /// Further records, e.g. glue addresses for in-zone name servers.
    pub records: Vec<(DomainName, RecordType, Ttl, Rdata)>,
}

impl ZoneSkeleton {
    /// The zone file text. Owner names are absolute, so the file does not
    /// depend on `$ORIGIN`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let apex = self.zone.fqdn();
        let _ = writeln!(out, "$TTL {}", self.default_ttl);
        let s = &self.soa;
        let _ = writeln!(
            out,
            "{apex} IN SOA {} {} {} {} {} {} {}",
            s.mname, s.rname, self.serial, s.refresh, s.retry, s.expire, s.minimum
        );
        let ns: Vec<&DomainName> = if self.nameservers.is_empty() {
            vec![&s.mname]
        } else {
            self.nameservers.iter().collect()
        };
        for n in ns {
            let _ = writeln!(out, "{apex} IN NS {n}");
        }
        for (name, rtype, ttl, rdata) in &self.records {
            let _ = writeln!(out, "{name} {ttl} IN {rtype} {rdata}");
        }
        out
    }
}

/// The file of a zone on a server, relative to the data directory:
/// `zones/<zone>.db`, or `zones/<view>/<zone>.db` inside a view.
pub fn zone_file(zone: &ZoneName, view: Option<&ViewName>) -> String {
    match view {
        Some(v) => format!("{}/{}/{}.db", data::ZONES_DIR, v.as_str(), zone.file_stem()),
        None => format!("{}/{}.db", data::ZONES_DIR, zone.file_stem()),
    }
}

/// A primary zone as its stanza in the zone list (or `rndc addzone`)
/// receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryZone {
    pub zone: ZoneName,
    pub view: Option<ViewName>,
    /// May change the zone (`update-policy { grant KEY zonesub ANY; }`).
    pub update_key: KeyName,
    /// Secondaries transfer with it. In a view it is the view's key
    /// ([`super::viewkey`]), which the operator also updates the zone with,
    /// so the update policy grants it too.
    pub transfer_key: KeyName,
    /// Extra transfer ACL (`spec.allowTransfer`), added after the keys.
    pub allow_transfer: Vec<AclElement>,
    /// NOTIFY targets for this zone only, signed with the transfer key.
    /// Empty: the zone inherits the options-level list
    /// (`notify-targets.conf`), which is the normal case.
    pub also_notify: Vec<Endpoint>,
    /// `dnssec-policy` name for inline signing.
    pub dnssec_policy: Option<PolicyName>,
    /// External secondaries of the zone (the cluster's or the zone's own
    /// list): each may transfer it with its key.
    pub external_secondaries: Vec<ExternalSecondary>,
    /// The zone has its own list (`spec.externalSecondaries`): it gets a
    /// zone-level `also-notify` of the cluster's secondaries (the
    /// [`secondaries_list_name`] server list) and its own external ones,
    /// instead of the options-level list.
    pub notify_override: bool,
    /// Other tools' keys' rights (`spec.updatePolicy`), written after the
    /// operator's own `zonesub ANY` grants.
    pub grants: Vec<Grant>,
}

/// A `dnssec-policy` name: 1-63 of `[A-Za-z0-9_-]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyName(String);

impl PolicyName {
    /// Parses a policy name (`default`, `insecure` or one defined by the user).
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        let ok = !text.is_empty()
            && text.len() <= 63
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(ValidationError::new(
                "dnssec policy",
                text,
                "must be 1-63 letters, digits, '-' or '_'",
            ));
        }
        Ok(PolicyName(text.to_string()))
    }

    /// The policy name as named.conf writes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn clause(body: impl FnOnce(&mut ConfWriter)) -> String {
    let mut w = ConfWriter::new();
    w.block(&[], body);
    w.finish().trim_end().to_string()
}

impl PrimaryZone {
    /// The file path relative to the data directory.
    pub fn file(&self) -> String {
        zone_file(&self.zone, self.view.as_ref())
    }

    /// The `{ ... };` text of its stanza (or for `rndc addzone`).
    pub fn clause(&self) -> String {
        let file = self.file();
        clause(|w| {
            w.stmt(&[Tok::Kw("type"), Tok::Kw("primary")]);
            w.stmt(&[Tok::Kw("file"), Tok::Str(&file)]);
            // With integrity checks on, BIND refuses a whole UPDATE message
            // when an in-zone MX/SRV target has no address yet. Records are
            // declarative and batched (a target's address may come in a later
            // message or from another object), so one record must not fail
            // the batch. Apex NS glue is still ordered first by nsupdate.rs.
            w.stmt(&[Tok::Kw("check-integrity"), Tok::Kw("no")]);
            fn grant(k: &KeyName) -> Vec<Tok<'_>> {
                vec![
                    Tok::Kw("grant"),
                    Tok::Str(k.as_str()),
                    Tok::Kw("zonesub"),
                    Tok::Kw("ANY"),
                ]
            }
            let mut grants = vec![grant(&self.update_key)];
            // In a view the operator signs its own updates with the view's
            // key (the only way its messages from loopback reach the view).
            if self.view.is_some() && self.transfer_key != self.update_key {
                grants.push(grant(&self.transfer_key));
            }
            let names: Vec<Option<String>> = self.grants.iter().map(Grant::name_text).collect();
            grants.extend(
                self.grants
                    .iter()
                    .zip(&names)
                    .map(|(g, n)| g.tokens(n.as_deref())),
            );
            w.inline_list(&[Tok::Kw("update-policy")], &grants);
            let mut acl = vec![AclElement::key(self.transfer_key.clone())];
            if self.update_key != self.transfer_key {
                acl.push(AclElement::key(self.update_key.clone()));
            }
            for e in &self.external_secondaries {
                let k = AclElement::key(e.key.clone());
                if !acl.contains(&k) {
                    acl.push(k);
                }
            }
            acl.extend(self.allow_transfer.iter().cloned());
            w.acl(&[Tok::Kw("allow-transfer")], &acl);
            if self.notify_override {
                let list = secondaries_list_name(self.view.as_ref());
                let mut items = vec![vec![Tok::Str(&list)]];
                items.extend(
                    self.external_secondaries
                        .iter()
                        .map(|e| server_tokens(&e.endpoint, Some(&e.key))),
                );
                w.inline_list(&[Tok::Kw("also-notify")], &items);
            } else if !self.also_notify.is_empty() {
                let servers: Vec<_> = self
                    .also_notify
                    .iter()
                    .map(|e| (*e, Some(&self.transfer_key)))
                    .collect();
                w.servers(&[Tok::Kw("also-notify")], &servers);
            }
            if let Some(p) = &self.dnssec_policy {
                w.stmt(&[Tok::Kw("dnssec-policy"), Tok::Str(&p.0)]);
            }
        })
    }
}

/// One external primary of a secondary zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalPrimary {
    pub endpoint: Endpoint,
    pub key: Option<KeyName>,
}

/// A secondary zone transferred from servers outside the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryZone {
    pub zone: ZoneName,
    pub view: Option<ViewName>,
    pub primaries: Vec<ExternalPrimary>,
    pub allow_transfer: Vec<AclElement>,
}

impl SecondaryZone {
    /// The file path relative to the data directory.
    pub fn file(&self) -> String {
        zone_file(&self.zone, self.view.as_ref())
    }

    /// The `{ ... };` text for `rndc addzone`.
    pub fn clause(&self) -> String {
        let file = self.file();
        clause(|w| {
            w.stmt(&[Tok::Kw("type"), Tok::Kw("secondary")]);
            w.stmt(&[Tok::Kw("file"), Tok::Str(&file)]);
            let servers: Vec<_> = self
                .primaries
                .iter()
                .map(|p| (p.endpoint, p.key.as_ref()))
                .collect();
            w.servers(&[Tok::Kw("primaries")], &servers);
            if self.allow_transfer.is_empty() {
                w.acl(
                    &[Tok::Kw("allow-transfer")],
                    &[AclElement::parse("none").expect("fixed")],
                );
            } else {
                w.acl(&[Tok::Kw("allow-transfer")], &self.allow_transfer);
            }
        })
    }
}

/// RFC 9432 schema version this operator writes.
pub const CATALOG_SCHEMA_VERSION: &str = "2";

/// The catalog zone a view's zones belong to: the base name outside views,
/// `<view>.<base>` inside one (BIND catalogs are per view).
pub fn catalog_zone_for(
    base: &ZoneName,
    view: Option<&ViewName>,
) -> Result<ZoneName, ValidationError> {
    match view {
        None => Ok(base.clone()),
        Some(v) => ZoneName::parse(&format!("{}.{}", v.as_str(), base.fqdn())),
    }
}

/// The catalog zone on the primary (added at run time, like every zone).
/// Updates to it are signed with the transfer key.
pub fn catalog_primary_zone(
    catalog: &ZoneName,
    view: Option<&ViewName>,
    transfer_key: &KeyName,
) -> PrimaryZone {
    PrimaryZone {
        zone: catalog.clone(),
        view: view.cloned(),
        update_key: transfer_key.clone(),
        transfer_key: transfer_key.clone(),
        allow_transfer: Vec::new(),
        also_notify: Vec::new(),
        dnssec_policy: None,
        external_secondaries: Vec::new(),
        notify_override: false,
        grants: Vec::new(),
    }
}

/// The catalog zone's first file: SOA and NS at `invalid.` (RFC 9432) and
/// `version TXT "2"`.
pub fn catalog_skeleton(catalog: &ZoneName, serial: u32) -> ZoneSkeleton {
    let invalid = DomainName::parse_absolute("invalid.").expect("fixed name");
    let soa = Soa {
        mname: invalid.clone(),
        rname: invalid.clone(),
        ..Soa::defaults_for(catalog)
    };
    let version = DomainName::resolve("version", catalog).expect("label under a valid zone");
    ZoneSkeleton {
        zone: catalog.clone(),
        default_ttl: Ttl::new(0).expect("zero is a ttl"),
        soa,
        serial,
        nameservers: vec![invalid],
        records: vec![(
            version,
            RecordType::Txt,
            Ttl::new(0).expect("zero is a ttl"),
            Rdata::Txt(vec![CATALOG_SCHEMA_VERSION.as_bytes().to_vec()]),
        )],
    }
}

/// A member's stable id label: the first 20 bytes of sha256 of the zone's
/// FQDN, hex. It depends only on the zone name, so it never changes (a
/// changed id makes secondaries drop and re-transfer the zone).
pub fn catalog_member_id(zone: &ZoneName) -> String {
    let digest = Sha256::digest(zone.fqdn().as_bytes());
    hex::encode(&digest[..20])
}

/// `<id>.zones.<catalog>.`: the member's owner name in the catalog.
pub fn catalog_member_owner(catalog: &ZoneName, zone: &ZoneName) -> DomainName {
    DomainName::resolve(&format!("{}.zones", catalog_member_id(zone)), catalog)
        .expect("a hex label under a valid zone is valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::grant::GrantMatch;

    fn z(s: &str) -> ZoneName {
        ZoneName::parse(s).unwrap()
    }

    #[test]
    fn primary_clause_is_exact() {
        let pz = PrimaryZone {
            zone: z("example.com"),
            view: Some(ViewName::parse("internal").unwrap()),
            update_key: KeyName::parse("upd").unwrap(),
            transfer_key: KeyName::parse("xfer").unwrap(),
            allow_transfer: vec![AclElement::parse("10.0.0.0/8").unwrap()],
            also_notify: vec![Endpoint::new("127.0.0.1".parse().unwrap(), 5301).unwrap()],
            dnssec_policy: Some(PolicyName::parse("default").unwrap()),
            external_secondaries: Vec::new(),
            notify_override: false,
            grants: vec![
                Grant::new(
                    &z("example.com"),
                    KeyName::parse("acme").unwrap(),
                    GrantMatch::Name(
                        DomainName::parse_absolute("_acme-challenge.example.com.").unwrap(),
                    ),
                    vec![RecordType::Txt],
                )
                .unwrap(),
            ],
        };
        assert_eq!(
            pz.clause(),
            "{\n\ttype primary;\n\tfile \"zones/internal/example.com.db\";\n\tcheck-integrity no;\n\tupdate-policy { grant \"upd\" zonesub ANY; grant \"xfer\" zonesub ANY; grant \"acme\" name \"_acme-challenge.example.com.\" TXT; };\n\tallow-transfer { key \"xfer\"; key \"upd\"; 10.0.0.0/8; };\n\talso-notify { 127.0.0.1 port 5301 key \"xfer\"; };\n\tdnssec-policy \"default\";\n};"
        );
    }

    #[test]
    fn external_secondaries_transfer_and_an_own_list_notifies_the_cluster_too() {
        let provider = ExternalSecondary {
            endpoint: Endpoint::new("192.0.2.9".parse().unwrap(), 5300).unwrap(),
            key: KeyName::parse("provider").unwrap(),
        };
        let mut pz =
            catalog_primary_zone(&z("example.com"), None, &KeyName::parse("xfer").unwrap());
        pz.external_secondaries = vec![provider];
        // The cluster's list: allowed to transfer, notified by the
        // options-level list (no zone-level also-notify).
        let inherited = pz.clause();
        assert!(
            inherited.contains("allow-transfer { key \"xfer\"; key \"provider\"; };"),
            "{inherited}"
        );
        assert!(!inherited.contains("also-notify"), "{inherited}");
        // The zone's own list: the cluster's secondaries stay notified.
        pz.notify_override = true;
        assert!(pz.clause().contains(
            "also-notify { \"bind-operator-secondaries\"; 192.0.2.9 port 5300 key \"provider\"; };"
        ));
        pz.external_secondaries.clear();
        let none = pz.clause();
        assert!(
            none.contains("also-notify { \"bind-operator-secondaries\"; };"),
            "{none}"
        );
        assert!(none.contains("allow-transfer { key \"xfer\"; };"), "{none}");
    }

    #[test]
    fn catalog_skeleton_and_members() {
        let cat = z("catalog.example.internal");
        let text = catalog_skeleton(&cat, 1_700_000_000).render();
        assert_eq!(
            text,
            "$TTL 0\ncatalog.example.internal. IN SOA invalid. invalid. 1700000000 3600 600 604800 300\ncatalog.example.internal. IN NS invalid.\nversion.catalog.example.internal. 0 IN TXT \"2\"\n"
        );
        let id = catalog_member_id(&z("Example.COM."));
        assert_eq!(id, catalog_member_id(&z("example.com")));
        assert_eq!(id.len(), 40);
        assert!(
            catalog_member_owner(&cat, &z("example.com"))
                .fqdn()
                .ends_with(".zones.catalog.example.internal.")
        );
        let v = ViewName::parse("ext").unwrap();
        assert_eq!(
            catalog_zone_for(&cat, Some(&v)).unwrap().as_str(),
            "ext.catalog.example.internal"
        );
    }

    #[test]
    fn rname_from_email() {
        let zone = z("example.com");
        assert_eq!(
            parse_rname("hostmaster@example.com", &zone).unwrap().fqdn(),
            "hostmaster.example.com."
        );
        assert_eq!(
            parse_rname("hostmaster", &zone).unwrap().fqdn(),
            "hostmaster.example.com."
        );
        assert!(parse_rname("a.b@example.com", &zone).is_err());
    }
}
