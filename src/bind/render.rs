//! Renders a cluster's mounted files from validated input:
//! `named.conf.primary`, `named.conf.secondary`, `keys.conf`, `rndc.key` and
//! `entrypoint.sh`. Pure and deterministic: same input, same bytes. Never
//! touches the cluster.
//!
//! Rendered text holds no pod IP and no per-pod port. The only
//! environment-dependent input is [`ClusterConfig::primary_endpoint`], where
//! secondaries reach the primary (the primary Service's ClusterIP:53 in a
//! cluster, `127.0.0.1:<primary port>` locally). Listening details come from
//! files the entrypoint writes; the primary's NOTIFY targets from
//! `notify-targets.conf`, which the operator writes at run time.
//!
//! With views, every view is steered by its own key ([`super::viewkey`]):
//! keys.conf also holds each view's key, a view's match-clients starts
//! with `key <its key>; !key <the other views' keys>;`, and inside view V
//! the secondaries' catalog primaries, their allow-notify and the
//! primary's NOTIFY list (`notify-targets.<V>.conf`, included in the view)
//! use V's key instead of the transfer key.
//!
//! The primary's zones are not in the rendered text: named.conf includes
//! the zone list the operator keeps in the data directory
//! (`primary-zones.conf`, or `primary-zones.<V>.conf` inside view V; see
//! [`super::commands::apply_zones`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::conf::{ConfWriter, Tok, server_tokens};
use super::dnssec::{TrustAnchor, write_trust_anchors};
use super::entrypoint::render_entrypoint;
use super::layout::{data, mount};
use super::name::ZoneName;
use super::types::{AclElement, AclTarget, Endpoint, KeyName, TsigKey, ViewName};
use super::viewkey::{view_key, view_key_name};
use super::zone::catalog_zone_for;
pub use super::zone::{ExternalSecondary, SECONDARIES_LIST, secondaries_list_name};

/// Largest number of concurrent outgoing transfers on the primary.
pub const PRIMARY_TRANSFERS_OUT: u64 = 50;
/// NOTIFY messages per second the primary may send; with the default (20)
/// a first sync that writes 1,000 zones at once reaches the secondaries
/// ~50 s after the primary (measured: primary 65 s, secondary 110 s).
pub const PRIMARY_NOTIFY_RATE: u64 = 1000;
/// Concurrent transfers a secondary runs against one primary. Kept well
/// below [`PRIMARY_TRANSFERS_OUT`] so even ten secondaries onboarding at once
/// never hit the primary's quota (which stalls transfers for ~a minute).
/// 10 onboarded 1,000 catalog members faster but was not kept: 3 of 6 runs
/// had one member transferred ~5.5 s late. That tail showed with 5 too: a
/// member's SOA answer over UDP lost, retried 5 s later; secondaries now
/// ask their primary over TCP only (see `render_named_conf`), and 10
/// against 5 measured within the runs' noise (at-once 4.5-6.0 s against
/// 4.6-7.2 s), so 5 stays: ten secondaries at 5 fill the primary's 50.
pub const SECONDARY_TRANSFERS_PER_NS: u64 = 5;
/// Concurrent incoming transfers on a secondary.
pub const SECONDARY_TRANSFERS_IN: u64 = 20;
/// SOA queries per second a secondary may send; the default (20) makes
/// onboarding 1,000 catalog members take about a minute.
pub const SECONDARY_SERIAL_QUERY_RATE: u64 = 1000;
/// Seconds between catalog-zone processing runs on a secondary. None: a
/// first sync's joins span several UPDATE messages (64 KiB each), so the
/// catalog moves through a few versions within ~0.1 s; with 1 the members
/// of every version after the first waited a second (measured: 1,000
/// members, ~300 of them onboarded, then the secondary idle until the
/// deferred version was processed).
pub const CATALOG_MIN_UPDATE_INTERVAL: u64 = 0;

/// Seconds between SOA checks of a consumed catalog (its zone's
/// `min-refresh-time` and `max-refresh-time`): the source's primary does not
/// NOTIFY this cluster unless told to (its externalSecondaries), so a zone
/// added to or removed from the source catalog is seen within this.
pub const CONSUMED_CATALOG_REFRESH: u64 = 2;
/// Longest retry of a consumed catalog whose source did not answer.
pub const CONSUMED_CATALOG_MAX_RETRY: u64 = 10;

/// A catalog zone of another server the cluster follows (RFC 9432
/// consumer): every pod serves its members as secondary zones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedCatalog {
    pub zone: ZoneName,
    /// The source's primaries (IPs: BIND takes no names).
    pub primaries: Vec<Endpoint>,
    /// Signs the catalog's and its members' transfers; must be loaded.
    pub key: KeyName,
}

/// `dnssec-validation` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DnssecValidation {
    /// Authoritative-only servers must not chase the root trust anchor.
    #[default]
    No,
    Yes,
    Auto,
}

/// A forward zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardZone {
    pub zone: ZoneName,
    pub forwarders: Vec<Endpoint>,
    pub forward_only: bool,
}

/// A view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub name: ViewName,
    /// Empty renders `any`.
    pub match_clients: Vec<AclElement>,
    /// Empty omits the statement.
    pub match_destinations: Vec<AclElement>,
    /// Overrides the server-wide recursion setting.
    pub recursion: Option<bool>,
}

/// Everything that decides a cluster's rendered files, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub recursion: bool,
    /// Empty omits the statement (BIND default).
    pub allow_query: Vec<AclElement>,
    /// Empty omits the statement (BIND default).
    pub allow_recursion: Vec<AclElement>,
    pub forwarders: Vec<Endpoint>,
    pub forward_only: bool,
    pub dnssec_validation: DnssecValidation,
    /// `trust-anchors` (required by `dnssec-validation yes`: BIND 9.20
    /// refuses that without anchors).
    pub trust_anchors: Vec<TrustAnchor>,
    pub validate_except: Vec<ZoneName>,
    pub forward_zones: Vec<ForwardZone>,
    pub views: Vec<View>,
    /// The catalog zone outside views; inside a view it is
    /// `<view>.<catalog_zone>` (see [`catalog_zone_for`]).
    pub catalog_zone: ZoneName,
    /// Signs transfers and NOTIFY between primary and secondaries; must be
    /// one of [`ClusterConfig::keys`].
    pub transfer_key: KeyName,
    /// Where secondaries reach the primary (IP only: BIND takes no names).
    pub primary_endpoint: Endpoint,
    /// Every TSIG key the cluster loads.
    pub keys: Vec<TsigKey>,
    /// The cluster's external secondaries (not rendered: the primary's
    /// NOTIFY list is written at run time; zones allow their keys).
    pub external_secondaries: Vec<ExternalSecondary>,
    /// Catalogs of other servers every pod follows (not with views).
    pub catalog_consumers: Vec<ConsumedCatalog>,
}

/// A render input that BIND would accept syntactically but not run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("failed to render: transfer key {0} is not among the cluster's loaded keys")]
    TransferKeyNotLoaded(String),
    #[error("failed to render: key {0} is defined twice")]
    DuplicateKey(String),
    #[error("failed to render: view {0} is defined twice")]
    DuplicateView(String),
    #[error("failed to render: forward zone {0} is defined twice")]
    DuplicateForwardZone(String),
    #[error("failed to render: forward zone {0} has no forwarders")]
    EmptyForwarders(String),
    #[error("failed to render: key {0} is named like the rndc control key")]
    ReservedKeyName(String),
    #[error("failed to render: catalog zone for view {0}: {1}")]
    CatalogName(String, String),
    #[error("failed to render: key of view {0}: {1}")]
    ViewKey(String, String),
    #[error("failed to render: {0}")]
    CatalogConsumer(String),
}

/// The files of one cluster, keyed by their names in the mount. The rndc
/// key is rendered on its own ([`super::entrypoint::render_rndc_key`]): it is
/// generated once per cluster and kept, independent of this input.
#[derive(Clone, PartialEq, Eq)]
pub struct RenderedFiles {
    pub named_conf_primary: String,
    pub named_conf_secondary: String,
    /// Holds key material: never log it.
    pub keys_conf: String,
    pub entrypoint: String,
}

impl std::fmt::Debug for RenderedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderedFiles")
            .field("named_conf_primary", &self.named_conf_primary)
            .field("named_conf_secondary", &self.named_conf_secondary)
            .field("keys_conf", &"<redacted>")
            .field("entrypoint", &self.entrypoint)
            .finish()
    }
}

impl RenderedFiles {
    /// `(file name in the mount, contents)`, sorted by name (rndc.key is
    /// not among them).
    pub fn files(&self) -> BTreeMap<&'static str, &str> {
        BTreeMap::from([
            (mount::NAMED_CONF_PRIMARY, self.named_conf_primary.as_str()),
            (
                mount::NAMED_CONF_SECONDARY,
                self.named_conf_secondary.as_str(),
            ),
            (mount::KEYS_CONF, self.keys_conf.as_str()),
            (mount::ENTRYPOINT, self.entrypoint.as_str()),
        ])
    }
}

/// Which half of the StatefulSet a named.conf is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Primary,
    Secondary,
}

/// Renders every file of a cluster.
pub fn render_cluster(cfg: &ClusterConfig) -> Result<RenderedFiles, RenderError> {
    check(cfg)?;
    Ok(RenderedFiles {
        named_conf_primary: render_named_conf(cfg, Role::Primary)?,
        named_conf_secondary: render_named_conf(cfg, Role::Secondary)?,
        keys_conf: render_keys_conf(&all_keys(cfg)?),
        entrypoint: render_entrypoint(),
    })
}

fn check(cfg: &ClusterConfig) -> Result<(), RenderError> {
    let mut names = std::collections::BTreeSet::new();
    for k in &cfg.keys {
        if k.name.as_str() == super::entrypoint::RNDC_KEY_NAME {
            return Err(RenderError::ReservedKeyName(k.name.to_string()));
        }
        if !names.insert(&k.name) {
            return Err(RenderError::DuplicateKey(k.name.to_string()));
        }
    }
    if !names.contains(&cfg.transfer_key) {
        return Err(RenderError::TransferKeyNotLoaded(
            cfg.transfer_key.to_string(),
        ));
    }
    let mut views = std::collections::BTreeSet::new();
    for v in &cfg.views {
        if !views.insert(&v.name) {
            return Err(RenderError::DuplicateView(v.name.to_string()));
        }
    }
    for (_, k) in view_key_names(cfg)? {
        if names.contains(&k) {
            return Err(RenderError::DuplicateKey(k.to_string()));
        }
    }
    let mut cats = std::collections::BTreeSet::from([&cfg.catalog_zone]);
    for c in &cfg.catalog_consumers {
        if !cfg.views.is_empty() {
            return Err(RenderError::CatalogConsumer(
                "catalogConsumers cannot be used with views (BIND catalogs are per view)".into(),
            ));
        }
        if !cats.insert(&c.zone) {
            return Err(RenderError::CatalogConsumer(format!(
                "catalog zone {} is the cluster's own catalog or consumed twice",
                c.zone
            )));
        }
        if !names.contains(&c.key) {
            return Err(RenderError::CatalogConsumer(format!(
                "transfer key {} of consumed catalog {} is not among the cluster's loaded keys",
                c.key, c.zone
            )));
        }
        if c.primaries.is_empty() {
            return Err(RenderError::CatalogConsumer(format!(
                "consumed catalog {} has no primaries",
                c.zone
            )));
        }
    }
    let mut fz = std::collections::BTreeSet::new();
    for f in &cfg.forward_zones {
        if !fz.insert(&f.zone) {
            return Err(RenderError::DuplicateForwardZone(f.zone.to_string()));
        }
        if f.forwarders.is_empty() {
            return Err(RenderError::EmptyForwarders(f.zone.to_string()));
        }
    }
    Ok(())
}

/// Each view's key ([`view_key`]), in view order; empty without views.
/// The transfer key must be loaded (else [`RenderError::TransferKeyNotLoaded`]).
pub fn view_keys(cfg: &ClusterConfig) -> Result<Vec<(ViewName, TsigKey)>, RenderError> {
    if cfg.views.is_empty() {
        return Ok(Vec::new());
    }
    let transfer = cfg
        .keys
        .iter()
        .find(|k| k.name == cfg.transfer_key)
        .ok_or_else(|| RenderError::TransferKeyNotLoaded(cfg.transfer_key.to_string()))?;
    cfg.views
        .iter()
        .map(|v| {
            view_key(transfer, &v.name)
                .map(|k| (v.name.clone(), k))
                .map_err(|e| RenderError::ViewKey(v.name.to_string(), e.to_string()))
        })
        .collect()
}

/// The names of [`view_keys`], derived without the key material.
pub fn view_key_names(cfg: &ClusterConfig) -> Result<Vec<(ViewName, KeyName)>, RenderError> {
    cfg.views
        .iter()
        .map(|v| {
            view_key_name(&cfg.transfer_key, &v.name)
                .map(|k| (v.name.clone(), k))
                .map_err(|e| RenderError::ViewKey(v.name.to_string(), e.to_string()))
        })
        .collect()
}

/// Every key keys.conf holds: the loaded keys and each view's key.
fn all_keys(cfg: &ClusterConfig) -> Result<Vec<TsigKey>, RenderError> {
    let mut keys = cfg.keys.clone();
    keys.extend(view_keys(cfg)?.into_iter().map(|(_, k)| k));
    Ok(keys)
}

/// `keys.conf`: one `key` clause per key, sorted by name.
pub fn render_keys_conf(keys: &[TsigKey]) -> String {
    let mut sorted: Vec<&TsigKey> = keys.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut w = ConfWriter::new();
    for k in sorted {
        w.block(&[Tok::Kw("key"), Tok::Str(k.name.as_str())], |w| {
            w.stmt(&[Tok::Kw("algorithm"), Tok::Kw(k.algorithm.as_str())]);
            w.stmt(&[Tok::Kw("secret"), Tok::Str(k.secret.expose_base64())]);
        });
    }
    w.finish()
}

fn forwarders(w: &mut ConfWriter, list: &[Endpoint], only: bool) {
    let items: Vec<Vec<Tok<'_>>> = list.iter().map(|e| server_tokens(e, None)).collect();
    w.inline_list(&[Tok::Kw("forwarders")], &items);
    w.stmt(&[
        Tok::Kw("forward"),
        Tok::Kw(if only { "only" } else { "first" }),
    ]);
}

fn yes_no(b: bool) -> Tok<'static> {
    Tok::Kw(if b { "yes" } else { "no" })
}

/// Renders named.conf for one role.
pub fn render_named_conf(cfg: &ClusterConfig, role: Role) -> Result<String, RenderError> {
    let mut w = ConfWriter::new();
    w.comment("Rendered by bind-operator; changes here are overwritten.");
    match role {
        Role::Primary => {
            w.comment("Role: primary (StatefulSet ordinal 0). Zones, including the catalog")
        }
        Role::Secondary => {
            w.comment("Role: secondary. Zones arrive through the catalog zone from the")
        }
    };
    match role {
        Role::Primary => {
            w.comment("zone, are listed at run time by the operator in primary-zones*.conf.")
        }
        Role::Secondary => w.comment("primary, signed with the transfer key."),
    };
    w.comment("Paths are relative to the data directory, named's working directory.");
    w.stmt(&[Tok::Kw("include"), Tok::Str(data::KEYS_CONF)]);
    w.stmt(&[Tok::Kw("include"), Tok::Str(data::RNDC_KEY)]);
    w.stmt(&[Tok::Kw("include"), Tok::Str(data::POD_CONTROLS)]);
    w.stmt(&[Tok::Kw("include"), Tok::Str(data::POD_STATISTICS)]);
    if role == Role::Primary {
        w.stmt(&[Tok::Kw("include"), Tok::Str(data::NOTIFY_SERVERS)]);
    }
    w.blank();
    let xfer_acl = [AclElement::key(cfg.transfer_key.clone())];
    let query_keys = all_keys(cfg)?;
    // Inside view V, V's key replaces the transfer key (see super::viewkey).
    let view_keys = view_key_names(cfg)?;
    let mut catalog_names = Vec::new();
    if role == Role::Secondary {
        if cfg.views.is_empty() {
            catalog_names.push((None, cfg.catalog_zone.clone()));
        } else {
            for v in &cfg.views {
                let cat = catalog_zone_for(&cfg.catalog_zone, Some(&v.name))
                    .map_err(|e| RenderError::CatalogName(v.name.to_string(), e.to_string()))?;
                catalog_names.push((Some(v.name.clone()), cat));
            }
        }
    }
    // One `catalog-zones` statement: the own catalog (secondaries) and
    // every consumed one (all pods).
    let catalog_zones = |w: &mut ConfWriter, own: Option<(&ZoneName, &KeyName)>| {
        let mut entries: Vec<(&ZoneName, Vec<Vec<Tok<'_>>>)> = Vec::new();
        if let Some((cat, key)) = own {
            entries.push((cat, vec![server_tokens(&cfg.primary_endpoint, Some(key))]));
        }
        for c in &cfg.catalog_consumers {
            let servers = c
                .primaries
                .iter()
                .map(|p| server_tokens(p, Some(&c.key)))
                .collect();
            entries.push((&c.zone, servers));
        }
        if entries.is_empty() {
            return;
        }
        w.block(&[Tok::Kw("catalog-zones")], |w| {
            for (cat, servers) in entries {
                w.stmt(&[
                    Tok::Kw("zone"),
                    Tok::Str(cat.as_str()),
                    Tok::Kw("default-primaries"),
                    Tok::List(servers),
                    Tok::Kw("zone-directory"),
                    Tok::Str(data::ZONES_DIR),
                    Tok::Kw("min-update-interval"),
                    Tok::Num(CATALOG_MIN_UPDATE_INTERVAL),
                ]);
            }
        });
    };
    let consumed_zone_stmts = |w: &mut ConfWriter| {
        for c in &cfg.catalog_consumers {
            let servers: Vec<_> = c.primaries.iter().map(|p| (*p, Some(&c.key))).collect();
            let file = format!("{}/{}.db", data::CATALOG_DIR, c.zone.file_stem());
            w.block(&[Tok::Kw("zone"), Tok::Str(c.zone.as_str())], |w| {
                w.stmt(&[Tok::Kw("type"), Tok::Kw("secondary")]);
                w.stmt(&[Tok::Kw("file"), Tok::Str(&file)]);
                w.servers(&[Tok::Kw("primaries")], &servers);
                w.stmt(&[
                    Tok::Kw("min-refresh-time"),
                    Tok::Num(CONSUMED_CATALOG_REFRESH),
                ]);
                w.stmt(&[
                    Tok::Kw("max-refresh-time"),
                    Tok::Num(CONSUMED_CATALOG_REFRESH),
                ]);
                w.stmt(&[
                    Tok::Kw("min-retry-time"),
                    Tok::Num(CONSUMED_CATALOG_REFRESH),
                ]);
                w.stmt(&[
                    Tok::Kw("max-retry-time"),
                    Tok::Num(CONSUMED_CATALOG_MAX_RETRY),
                ]);
            });
        }
    };
    // NOTIFYs of a source that lists this cluster as its external
    // secondary are signed with the consumer's key, from an address that
    // may not be the one in `primaries` (a Service in front of its pod).
    let consumer_notify: Vec<AclElement> = cfg
        .catalog_consumers
        .iter()
        .map(|c| AclElement::key(c.key.clone()))
        .collect();
    let catalog_zone_stmt = |w: &mut ConfWriter, cat: &ZoneName, key: &KeyName| {
        let primary_server = [(cfg.primary_endpoint, Some(key))];
        let file = format!("{}/{}.db", data::CATALOG_DIR, cat.file_stem());
        w.block(&[Tok::Kw("zone"), Tok::Str(cat.as_str())], |w| {
            w.stmt(&[Tok::Kw("type"), Tok::Kw("secondary")]);
            w.stmt(&[Tok::Kw("file"), Tok::Str(&file)]);
            w.servers(&[Tok::Kw("primaries")], &primary_server);
        });
    };
    let forward_zones = |w: &mut ConfWriter| {
        for fz in &cfg.forward_zones {
            w.block(&[Tok::Kw("zone"), Tok::Str(fz.zone.as_str())], |w| {
                w.stmt(&[Tok::Kw("type"), Tok::Kw("forward")]);
                forwarders(w, &fz.forwarders, fz.forward_only);
            });
        }
    };

    w.block(&[Tok::Kw("options")], |w| {
        w.stmt(&[Tok::Kw("directory"), Tok::Str(".")]);
        w.stmt(&[Tok::Kw("include"), Tok::Str(data::POD_LISTEN)]);
        if role == Role::Primary && cfg.views.is_empty() {
            w.stmt(&[Tok::Kw("include"), Tok::Str(data::NOTIFY_TARGETS)]);
        }
        w.stmt(&[Tok::Kw("pid-file"), Tok::Str("named.pid")]);
        w.stmt(&[Tok::Kw("session-keyfile"), Tok::Str("session.key")]);
        w.stmt(&[Tok::Kw("managed-keys-directory"), Tok::Str(".")]);
        w.stmt(&[Tok::Kw("new-zones-directory"), Tok::Str(data::ZONES_DIR)]);
        w.stmt(&[Tok::Kw("allow-new-zones"), yes_no(true)]);
        w.stmt(&[Tok::Kw("recursion"), yes_no(cfg.recursion)]);
        // The operator reads serials and zones over DNS from its own
        // address, signed: every key keys.conf holds may query whatever
        // the user's list says about addresses (a list opening with `any`
        // admits them already).
        let admits_all = cfg
            .allow_query
            .first()
            .is_some_and(|e| !e.negated && matches!(e.target, AclTarget::Any));
        if admits_all {
            w.acl(&[Tok::Kw("allow-query")], &cfg.allow_query);
        } else if !cfg.allow_query.is_empty() {
            let mut acl: Vec<AclElement> = query_keys
                .iter()
                .map(|k| AclElement::key(k.name.clone()))
                .collect();
            acl.extend(cfg.allow_query.iter().cloned());
            w.acl(&[Tok::Kw("allow-query")], &acl);
        }
        // allow-recursion only where recursion is on: named-checkconf warns
        // about it anywhere else, and a warning would read like a failure.
        if !cfg.allow_recursion.is_empty() && cfg.views.is_empty() && cfg.recursion {
            w.acl(&[Tok::Kw("allow-recursion")], &cfg.allow_recursion);
        }
        if !cfg.forwarders.is_empty() {
            forwarders(w, &cfg.forwarders, cfg.forward_only);
        }
        let dv = match cfg.dnssec_validation {
            DnssecValidation::No => "no",
            DnssecValidation::Yes => "yes",
            DnssecValidation::Auto => "auto",
        };
        w.stmt(&[Tok::Kw("dnssec-validation"), Tok::Kw(dv)]);
        if !cfg.validate_except.is_empty() {
            let items: Vec<Vec<Tok<'_>>> = cfg
                .validate_except
                .iter()
                .map(|z| vec![Tok::Str(z.as_str())])
                .collect();
            w.inline_list(&[Tok::Kw("validate-except")], &items);
        }
        // Transfers by key only; zones widen this per zone.
        w.acl(&[Tok::Kw("allow-transfer")], &xfer_acl);
        match role {
            Role::Primary => {
                // Only the also-notify list: NOTIFY to NS names would leave the cluster.
                w.stmt(&[Tok::Kw("notify"), Tok::Kw("explicit")]);
                w.stmt(&[Tok::Kw("notify-delay"), Tok::Num(0)]);
                w.stmt(&[Tok::Kw("serial-update-method"), Tok::Kw("unixtime")]);
                w.stmt(&[Tok::Kw("transfers-out"), Tok::Num(PRIMARY_TRANSFERS_OUT)]);
                w.stmt(&[Tok::Kw("notify-rate"), Tok::Num(PRIMARY_NOTIFY_RATE)]);
                if !cfg.catalog_consumers.is_empty() {
                    // The primary pod is a secondary of the consumed
                    // catalogs' members too: onboard them as fast as the
                    // secondaries do.
                    w.acl(&[Tok::Kw("allow-notify")], &consumer_notify);
                    w.stmt(&[
                        Tok::Kw("serial-query-rate"),
                        Tok::Num(SECONDARY_SERIAL_QUERY_RATE),
                    ]);
                    w.stmt(&[Tok::Kw("transfers-in"), Tok::Num(SECONDARY_TRANSFERS_IN)]);
                    w.stmt(&[
                        Tok::Kw("transfers-per-ns"),
                        Tok::Num(SECONDARY_TRANSFERS_PER_NS),
                    ]);
                    catalog_zones(w, None);
                }
            }
            Role::Secondary => {
                w.stmt(&[Tok::Kw("notify"), Tok::Kw("no")]);
                let mut notify_acl = xfer_acl.to_vec();
                notify_acl.extend(consumer_notify.iter().cloned());
                w.acl(&[Tok::Kw("allow-notify")], &notify_acl);
                w.stmt(&[
                    Tok::Kw("serial-query-rate"),
                    Tok::Num(SECONDARY_SERIAL_QUERY_RATE),
                ]);
                w.stmt(&[Tok::Kw("transfers-in"), Tok::Num(SECONDARY_TRANSFERS_IN)]);
                w.stmt(&[
                    Tok::Kw("transfers-per-ns"),
                    Tok::Num(SECONDARY_TRANSFERS_PER_NS),
                ]);
                if cfg.views.is_empty() {
                    catalog_zones(w, Some((&cfg.catalog_zone, &cfg.transfer_key)));
                }
            }
        }
    });
    // Top level: every view validates with them.
    write_trust_anchors(&mut w, &cfg.trust_anchors);
    // Every server this pod refreshes zones from is asked over TCP only:
    // onboarding 1,000 catalog members sends their SOA queries in a burst,
    // and over UDP one answer now and then never arrived; named retried
    // that member's refresh only after its 5 s UDP timeout, so one zone of
    // the 1,000 reached the secondary ~5 s after all the others (bench
    // at-once: the secondary done in 7.8-9.3 s in 4 of 6 runs, 4.6-5.6 s
    // in the other two; with TCP 4.5-7.2 s in 7 runs, never that tail).
    // The same held for the members of a consumed catalog (bench
    // catalog-consumer: B served every zone of A 1.99 s after it was
    // created in one run, 6.21 s in the next). Transfers were TCP
    // already; only SOA queries change. One statement per address.
    let mut refresh_from: Vec<IpAddr> = cfg
        .catalog_consumers
        .iter()
        .flat_map(|c| c.primaries.iter().map(|p| p.ip))
        .collect();
    if role == Role::Secondary {
        refresh_from.push(cfg.primary_endpoint.ip);
    }
    refresh_from.sort_unstable();
    refresh_from.dedup();
    for ip in refresh_from {
        w.block(&[Tok::Kw("server"), Tok::Ip(ip)], |w| {
            w.stmt(&[Tok::Kw("tcp-only"), Tok::Kw("yes")]);
        });
    }

    if cfg.views.is_empty() {
        if !cfg.forward_zones.is_empty() || role == Role::Secondary {
            w.blank();
        }
        forward_zones(&mut w);
        match role {
            Role::Primary => {
                w.blank();
                w.stmt(&[Tok::Kw("include"), Tok::Str(data::PRIMARY_ZONES)]);
            }
            Role::Secondary => catalog_zone_stmt(&mut w, &cfg.catalog_zone, &cfg.transfer_key),
        }
        consumed_zone_stmts(&mut w);
    } else {
        for (i, v) in cfg.views.iter().enumerate() {
            w.blank();
            let own = &view_keys[i].1;
            w.block(&[Tok::Kw("view"), Tok::Str(v.name.as_str())], |w| {
                // Signed with this view's key: always here; with another
                // view's key: never here; else the user's list.
                let mut clients = vec![AclElement::key(own.clone())];
                clients.extend(view_keys.iter().filter(|(name, _)| name != &v.name).map(
                    |(_, k)| AclElement {
                        negated: true,
                        target: AclTarget::Key(k.clone()),
                    },
                ));
                if v.match_clients.is_empty() {
                    clients.push(AclElement::allow(AclTarget::Any));
                } else {
                    clients.extend(v.match_clients.iter().cloned());
                }
                w.acl(&[Tok::Kw("match-clients")], &clients);
                // The operator's own messages go to 127.0.0.1 (or a pod
                // address): its key must pass the destination test too.
                if !v.match_destinations.is_empty() {
                    let mut destinations = vec![AclElement::key(own.clone())];
                    destinations.extend(v.match_destinations.iter().cloned());
                    w.acl(&[Tok::Kw("match-destinations")], &destinations);
                }
                if let Some(r) = v.recursion {
                    w.stmt(&[Tok::Kw("recursion"), yes_no(r)]);
                }
                if !cfg.allow_recursion.is_empty() && v.recursion.unwrap_or(cfg.recursion) {
                    w.acl(&[Tok::Kw("allow-recursion")], &cfg.allow_recursion);
                }
                match role {
                    Role::Primary => {
                        let file = data::notify_targets_of(&v.name);
                        w.stmt(&[Tok::Kw("include"), Tok::Str(&file)]);
                    }
                    Role::Secondary => {
                        w.acl(&[Tok::Kw("allow-notify")], &[AclElement::key(own.clone())]);
                        catalog_zones(w, Some((&catalog_names[i].1, own)));
                    }
                }
                forward_zones(w);
                match role {
                    Role::Primary => {
                        let list = data::primary_zones_of(&v.name);
                        w.stmt(&[Tok::Kw("include"), Tok::Str(&list)]);
                    }
                    Role::Secondary => catalog_zone_stmt(w, &catalog_names[i].1, own),
                }
            });
        }
    }
    Ok(w.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::types::{TsigAlgorithm, TsigSecret};

    fn key(name: &str, secret: &str) -> TsigKey {
        TsigKey {
            name: KeyName::parse(name).unwrap(),
            algorithm: TsigAlgorithm::HmacSha256,
            secret: TsigSecret::from_base64(secret).unwrap(),
        }
    }

    fn view(name: &str, clients: &[&str]) -> View {
        View {
            name: ViewName::parse(name).unwrap(),
            match_clients: clients
                .iter()
                .map(|c| AclElement::parse(c).unwrap())
                .collect(),
            match_destinations: Vec::new(),
            recursion: None,
        }
    }

    fn cfg(views: Vec<View>, keys: Vec<TsigKey>) -> ClusterConfig {
        ClusterConfig {
            recursion: false,
            allow_query: Vec::new(),
            allow_recursion: Vec::new(),
            forwarders: Vec::new(),
            forward_only: false,
            dnssec_validation: DnssecValidation::No,
            trust_anchors: vec![],
            validate_except: Vec::new(),
            forward_zones: Vec::new(),
            views,
            catalog_zone: ZoneName::parse("catalog.invalid").unwrap(),
            transfer_key: KeyName::parse("xfer").unwrap(),
            primary_endpoint: Endpoint::new("10.96.0.10".parse().unwrap(), 53).unwrap(),
            keys,
            external_secondaries: Vec::new(),
            catalog_consumers: Vec::new(),
        }
    }

    #[test]
    fn a_restrictive_allow_query_admits_the_clusters_keys_first() {
        let mut c = cfg(
            vec![],
            vec![key("xfer", "c2VjcmV0"), key("upd", "c2VjcmV0")],
        );
        c.allow_query = vec![
            AclElement::parse("!10.66.0.0/16").unwrap(),
            AclElement::parse("10.0.0.0/8").unwrap(),
        ];
        let conf = render_named_conf(&c, Role::Primary).unwrap();
        assert!(
            conf.contains("allow-query { key \"xfer\"; key \"upd\"; !10.66.0.0/16; 10.0.0.0/8; };"),
            "{conf}"
        );
        // A list that opens with `any` admits everyone already.
        c.allow_query = vec![AclElement::parse("any").unwrap()];
        let conf = render_named_conf(&c, Role::Primary).unwrap();
        assert!(conf.contains("allow-query { any; };"), "{conf}");
    }

    #[test]
    fn views_load_their_keys_and_steer_by_them() {
        let c = cfg(
            vec![view("internal", &["10.0.0.0/8"]), view("external", &[])],
            vec![key("xfer", "c2VjcmV0")],
        );
        let files = render_cluster(&c).unwrap();
        let derived = view_keys(&c).unwrap();
        assert_eq!(
            derived
                .iter()
                .map(|(_, k)| k.name.clone())
                .collect::<Vec<_>>(),
            view_key_names(&c)
                .unwrap()
                .into_iter()
                .map(|(_, k)| k)
                .collect::<Vec<_>>()
        );
        for (_, k) in &derived {
            assert!(files.keys_conf.contains(&format!(
                "key \"{}\" {{\n\talgorithm hmac-sha256;\n\tsecret \"{}\";",
                k.name,
                k.secret.expose_base64()
            )));
        }
        assert!(!format!("{files:?}").contains(derived[0].1.secret.expose_base64()));
        let p = &files.named_conf_primary;
        assert!(p.contains("match-clients { key \"internal.view.xfer\"; !key \"external.view.xfer\"; 10.0.0.0/8; };"), "{p}");
        assert!(
            p.contains(
                "match-clients { key \"external.view.xfer\"; !key \"internal.view.xfer\"; any; };"
            ),
            "{p}"
        );
        assert!(p.contains("include \"notify-targets.internal.conf\";"));
        assert!(!p.contains("include \"notify-targets.conf\";"));
        let s = &files.named_conf_secondary;
        assert!(
            s.contains("allow-notify { key \"external.view.xfer\"; };"),
            "{s}"
        );
        assert!(s.contains("primaries { 10.96.0.10 port 53 key \"internal.view.xfer\"; };"));

        // Without views: no derived keys, the options-level NOTIFY list.
        let plain = cfg(Vec::new(), vec![key("xfer", "c2VjcmV0")]);
        let files = render_cluster(&plain).unwrap();
        assert_eq!(files.keys_conf, render_keys_conf(&plain.keys));
        assert!(
            files
                .named_conf_primary
                .contains("include \"notify-targets.conf\";")
        );

        // A loaded key named like a view key would be ambiguous: refused.
        let clash = cfg(
            vec![view("internal", &[])],
            vec![
                key("xfer", "c2VjcmV0"),
                key("internal.view.xfer", "b3RoZXI="),
            ],
        );
        assert_eq!(
            render_cluster(&clash).unwrap_err(),
            RenderError::DuplicateKey("internal.view.xfer".into())
        );
    }

    #[test]
    fn consumed_catalogs_are_followed_by_every_pod() {
        let mut c = cfg(
            Vec::new(),
            vec![key("xfer", "c2VjcmV0"), key("src", "b3RoZXI=")],
        );
        c.catalog_consumers = vec![ConsumedCatalog {
            zone: ZoneName::parse("a.default.catalog.invalid").unwrap(),
            primaries: vec![Endpoint::new("192.0.2.10".parse().unwrap(), 5300).unwrap()],
            key: KeyName::parse("src").unwrap(),
        }];
        let files = render_cluster(&c).unwrap();
        let entry = "zone \"a.default.catalog.invalid\" default-primaries { 192.0.2.10 port 5300 key \"src\"; } zone-directory \"zones\" min-update-interval 0;";
        for conf in [&files.named_conf_primary, &files.named_conf_secondary] {
            assert!(conf.contains(entry), "{conf}");
            assert!(
                conf.contains("zone \"a.default.catalog.invalid\" {\n\ttype secondary;"),
                "{conf}"
            );
            assert!(conf.contains("max-refresh-time 2;"), "{conf}");
            // The members' SOA queries go to the source over TCP.
            assert!(
                conf.contains("server 192.0.2.10 {\n\ttcp-only yes;\n};"),
                "{conf}"
            );
        }
        // A secondary's own primary once, even when it is also the source.
        let mut same = c.clone();
        same.catalog_consumers[0].primaries = vec![c.primary_endpoint];
        let files = render_cluster(&same).unwrap();
        let server = format!("server {} {{", c.primary_endpoint.ip);
        assert_eq!(files.named_conf_secondary.matches(&server).count(), 1);
        assert_eq!(files.named_conf_primary.matches(&server).count(), 1);
        // One catalog-zones statement on a secondary: its own catalog first.
        let s = &files.named_conf_secondary;
        assert_eq!(s.matches("catalog-zones {").count(), 1, "{s}");
        assert!(
            s.contains("allow-notify { key \"xfer\"; key \"src\"; };"),
            "{s}"
        );
        assert!(
            files
                .named_conf_primary
                .contains("allow-notify { key \"src\"; };")
        );
        assert!(
            files
                .named_conf_primary
                .contains("include \"notify-servers.conf\";")
        );

        // Its own catalog, an unloaded key, views: refused before rendering.
        let mut own = c.clone();
        own.catalog_consumers[0].zone = c.catalog_zone.clone();
        assert!(matches!(
            render_cluster(&own),
            Err(RenderError::CatalogConsumer(_))
        ));
        let mut unloaded = c.clone();
        unloaded.catalog_consumers[0].key = KeyName::parse("nope").unwrap();
        assert!(matches!(
            render_cluster(&unloaded),
            Err(RenderError::CatalogConsumer(_))
        ));
        let mut views = c.clone();
        views.views = vec![view("internal", &[])];
        assert!(matches!(
            render_cluster(&views),
            Err(RenderError::CatalogConsumer(_))
        ));
    }
}
