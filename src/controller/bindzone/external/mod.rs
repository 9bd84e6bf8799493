//! BindZones on an external BindCluster (`spec.external`): a BIND the
//! operator did not deploy, reached only over the network. The zone is the
//! same plan as on our own pods (DNSRecords and `spec.records`, conflicts
//! decided, other clients' RRsets never touched); what differs is where
//! the truth comes from and what the operator may change:
//!
//! - read: the primary's SOA (signed with the transfer key, so a server
//!   with views answers from the key's view), then a verified AXFR with
//!   the transfer key, compared in wire form
//!   ([`crate::controller::zonesync::diff::Served::from_records`]) — every pass, so a record deleted
//!   behind the operator's back is seen and written again;
//! - missing zone: created through the primary's rndc channel
//!   ([`crate::bind::rndc`], `addzone`) when `spec.external.rndc` is set,
//!   else reported `ZoneNotFound` with what the server answered;
//! - write: one diff as TSIG-signed UPDATE messages with the zone's update
//!   key, to the listed primary only. The apex NS is converged only when
//!   `spec.nameservers` is set or the operator created the zone, and the
//!   SOA only on a zone it created: a zone that was there before keeps
//!   its owner's SOA and NS;
//! - status: the serial on the primary and on each listed secondary (read
//!   with an unsigned SOA query; nothing is ever sent to a secondary but
//!   that).
//! - delete: a zone the operator created is removed with `delzone -clean`;
//!   from a zone that was there before only the RRsets the BindZone owns
//!   are deleted.
//!
//! Touches the network (the external servers) and, through the zone
//! writers, the cluster (statuses, annotation). Key material stays in
//! [`TsigKey`]s: never in a log line, status or error.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use kube::ResourceExt as _;
use kube::runtime::controller::Action;

use crate::api::{
    BindCluster, BindZone, DNSRecord, ExternalSpec, Phase, REASON_INVALID_SPEC, REASON_RNDC_FAILED,
    REASON_SERVED, REASON_ZONE_NOT_FOUND,
};
use crate::bind::nsupdate::{RrsetChange, UpdateBatch};
use crate::bind::rndc::{self, quoted};
use crate::bind::wire::{self, WireError};
use crate::bind::{RecordType, TsigKey, ZoneName};
use crate::controller::exec::PodRef;
use crate::controller::zonesync::ZoneContext;
use crate::controller::zonesync::access::{Access, NamespaceLabels};
use crate::controller::zonesync::diff::{Served, diff};
use crate::controller::zonesync::plan::{Desired, ZoneInputs};
use crate::controller::zonesync::server::{ServerError, wire_failure};
use crate::controller::zonesync::state::{Snapshot, lock};
use crate::controller::zonesync::writes::ZoneReport;
use crate::render::validate::{PrimaryZoneConfig, ZoneConfig};

use super::Error;
use super::applied::Applied;
use super::apply::{
    NAMESPACES_RECHECK, applied_of, blocked, failed, finish, record_applied, settle_records,
};
use super::read::{Blocked, Inputs};

/// Applied type of a zone that was on the server before (records only).
pub const TYPE_EXTERNAL: &str = "external";
/// Applied type of a zone the operator created through rndc (deleted with
/// its BindZone).
pub const TYPE_EXTERNAL_CREATED: &str = "external-created";

/// How often a zone's serial is read from the external primary. The
/// operator is not the only writer there (a record deleted by hand, another
/// client's update), and a moved serial is what brings the AXFR that finds
/// it; an unchanged serial costs one SOA query and nothing else.
pub const EXTERNAL_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Where the external servers are, validated.
struct Servers {
    primary: SocketAddr,
    secondaries: Vec<SocketAddr>,
    rndc: Option<SocketAddr>,
}

fn socket(address: &str, port: u16) -> Result<SocketAddr, String> {
    address
        .parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, port))
        .map_err(|_| format!("{address} is not an IP address"))
}

fn servers(ext: &ExternalSpec) -> Result<Servers, Blocked> {
    let invalid = |message: String| Blocked {
        reason: REASON_INVALID_SPEC,
        message: format!("spec.external of the cluster: {message}"),
        permanent: true,
    };
    Ok(Servers {
        primary: socket(&ext.primary.address, ext.primary.port).map_err(invalid)?,
        secondaries: ext
            .secondaries
            .iter()
            .map(|s| socket(&s.address, s.port))
            .collect::<Result<_, _>>()
            .map_err(invalid)?,
        rndc: ext
            .rndc
            .as_ref()
            .map(|r| socket(&r.address, r.port))
            .transpose()
            .map_err(invalid)?,
    })
}

/// The server as errors name it.
fn server_ref(zone: &BindZone, addr: SocketAddr) -> PodRef {
    PodRef::new(
        zone.namespace().unwrap_or_default(),
        format!("external-primary@{addr}"),
    )
}

/// The zone's plan, through its plan memo (as on our own pods).
fn plan(
    ctx: &ZoneContext,
    zone: &BindZone,
    cluster: &BindCluster,
    cfg: &PrimaryZoneConfig,
    records: &[Arc<DNSRecord>],
    applied: &Applied,
    labels: Option<NamespaceLabels>,
) -> Arc<Desired> {
    use std::hash::{Hash, Hasher};
    let object_name = zone.name_any();
    let zkey = (zone.namespace().unwrap_or_default(), object_name.clone());
    let made_under = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            &zone.metadata.uid,
            zone.metadata.generation,
            &cluster.metadata.uid,
            cluster.metadata.generation,
        )
            .hash(&mut h);
        h.finish()
    };
    let memo = ctx.state.plan_memo(&zkey);
    let access = Access::new(zone, &cfg.clause.zone, labels);
    lock(&memo).plan(
        &ZoneInputs {
            zone: &cfg.clause.zone,
            object_name: &object_name,
            created: zone.metadata.creation_timestamp.as_ref(),
            default_ttl: cfg.default_ttl,
            nameservers: &cfg.nameservers,
            soa_mname: &cfg.soa.mname,
            inline: &cfg.records,
            applied_inline: &applied.inline_keys(),
            access: &access,
        },
        made_under,
        records,
    )
}

/// The update key of the zone (validation requires a loaded one).
fn update_key<'a>(zone: &BindZone, inputs: &'a Inputs) -> Option<&'a TsigKey> {
    zone.spec
        .update_key_ref
        .as_deref()
        .and_then(|r| inputs.keys.by_object(r))
}

/// Whether the zone's cluster is an external one.
pub fn on_external_cluster(ctx: &ZoneContext, zone: &BindZone) -> bool {
    super::read::cluster_of(ctx, zone).is_some_and(|c| c.external().is_some())
}

/// Reconciles a live BindZone of an external cluster: read and validate
/// as for any zone, then [`apply`].
pub async fn reconcile(zone: &Arc<BindZone>, ctx: &ZoneContext) -> Result<Action, Error> {
    let records = super::read::records_of(ctx, zone);
    if let Some(b) = super::read::duplicate_of(ctx, zone) {
        return blocked(ctx, zone, &records, b).await;
    }
    let inputs = match super::read::inputs(ctx, zone).await? {
        Ok(i) => i,
        Err(b) => return blocked(ctx, zone, &records, b).await,
    };
    let config = match super::read::validate(zone, &inputs) {
        Ok(c) => c,
        Err(b) => return blocked(ctx, zone, &records, b).await,
    };
    let applied = applied_of(ctx, zone);
    match config {
        ZoneConfig::Primary(cfg) => apply(ctx, zone, &inputs, &cfg, &records, &applied).await,
        ZoneConfig::Secondary(_) => {
            let b = Blocked {
                reason: REASON_INVALID_SPEC,
                message: "a secondary zone cannot be placed on an external cluster: configure it on that server".into(),
                permanent: true,
            };
            blocked(ctx, zone, &records, b).await
        }
    }
}

/// Converges a validated primary zone on the external primary.
pub async fn apply(
    ctx: &ZoneContext,
    zone: &Arc<BindZone>,
    inputs: &Inputs,
    cfg: &PrimaryZoneConfig,
    records: &[Arc<DNSRecord>],
    applied: &Applied,
) -> Result<Action, Error> {
    let ext = inputs
        .cluster
        .external()
        .expect("called for external clusters only");
    let at = match servers(ext) {
        Ok(s) => s,
        Err(b) => return blocked(ctx, zone, records, b).await,
    };
    if cfg.clause.view.is_some() {
        let b = Blocked {
            reason: REASON_INVALID_SPEC,
            message: "spec.view cannot be used on an external cluster: the operator signs with the zone's update key, which picks the server's view".into(),
            permanent: true,
        };
        return blocked(ctx, zone, records, b).await;
    }
    let zname = &cfg.clause.zone;
    let Some(ukey) = update_key(zone, inputs) else {
        let b = Blocked {
            reason: crate::api::REASON_KEY_NOT_FOUND,
            message: "a zone on an external cluster needs spec.updateKeyRef: the key the server accepts updates of the zone from".into(),
            permanent: true,
        };
        return blocked(ctx, zone, records, b).await;
    };
    let xfer = &inputs.keys.transfer;
    let primary = wire::Client::new(at.primary);
    let pod = server_ref(zone, at.primary);
    let labels = match super::read::namespace_labels(ctx, zone, records) {
        None => None,
        Some(Some(l)) => Some(l),
        // The Namespace watch wakes the zone once it has listed.
        Some(None) => return Ok(Action::requeue(NAMESPACES_RECHECK)),
    };
    let desired = plan(ctx, zone, &inputs.cluster, cfg, records, applied, labels);

    // Is the zone there?
    let mut created = applied.type_.as_deref() == Some(TYPE_EXTERNAL_CREATED);
    let answer = match primary.soa_answer(zname, Some(xfer)).await {
        Ok(a) => a,
        Err(e) => return failed(ctx, zone, wire_failure(&pod, zname, e)).await,
    };
    // The apex NS is ours on a zone we create (or created), or when the
    // BindZone names nameservers; its glue is checked before anything is
    // created.
    let creating = answer.is_err() && at.rndc.is_some();
    let manage_apex = created || creating || !zone.spec.nameservers.is_empty();
    if manage_apex && !desired.missing_glue.is_empty() {
        let names: Vec<String> = desired.missing_glue.iter().map(|n| n.fqdn()).collect();
        let b = Blocked {
            reason: crate::api::REASON_MISSING_GLUE,
            message: format!(
                "nameserver {} is inside the zone but has no A or AAAA record; add one (spec.records or a DNSRecord)",
                names.join(", ")
            ),
            permanent: true,
        };
        return blocked(ctx, zone, records, b).await;
    }

    if let Err(said) = &answer {
        let Some(rndc_at) = at.rndc else {
            let b = Blocked {
                reason: REASON_ZONE_NOT_FOUND,
                message: format!(
                    "the primary {} does not serve zone {zname} (it answered {said}); create it there, or set spec.external.rndc on BindCluster {} to let the operator create it",
                    at.primary,
                    inputs.cluster.name_any()
                ),
                permanent: false,
            };
            return blocked(ctx, zone, records, b).await;
        };
        if let Err(b) = create(ext, inputs, rndc_at, zname, ukey, xfer).await {
            return blocked(ctx, zone, records, b).await;
        }
        created = true;
        // Recorded at once: should the rest of this pass fail, the zone is
        // still known as ours (its SOA and NS converged, deleted with the
        // BindZone).
        let mut made = applied.clone();
        made.type_ = Some(TYPE_EXTERNAL_CREATED.into());
        record_applied(ctx, zone, &made).await?;
    }
    // Nothing moved since the last pass (same serial, same plan): no
    // transfer, no write.
    let zkey = (zone.namespace().unwrap_or_default(), zone.name_any());
    let serial_now = answer.as_ref().ok().copied();
    let fingerprint = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            desired.fingerprint(),
            format!("{:?}", cfg.soa),
            manage_apex,
            created,
        )
            .hash(&mut h);
        h.finish()
    };
    let identity = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        at.primary.hash(&mut h);
        h.finish()
    };
    let known = ctx.state.snapshot(&zkey).filter(|s| {
        s.primary == identity
            && s.applied == Some(fingerprint)
            && Some(s.served.serial) == serial_now
    });
    let written = async {
        if let Some(snap) = known {
            return Ok((snap.served, false));
        }
        let mut served = transfer(&primary, &pod, zname, xfer).await?;
        let mut batch = diff(zname, &desired, &served);
        if !manage_apex {
            batch.apex_ns = None;
        }
        let messages = wire::update::messages(&batch).map_err(|source| ServerError::Batch {
            zone: zname.to_string(),
            source,
        })?;
        let mut wrote = false;
        // The SOA first: its serial must be above the served one, which
        // the record update would move.
        if created && served.soa_differs(zname.as_domain(), &cfg.soa) {
            let next = served.serial.wrapping_add(1);
            let msg = wire::update::soa_message(zname, &cfg.soa, next, cfg.default_ttl);
            primary
                .update(std::slice::from_ref(&msg), ukey)
                .await
                .map_err(|e| wire_failure(&pod, zname, e))?;
            wrote = true;
        }
        if !messages.is_empty() {
            tracing::debug!(zone = %zname, primary = %at.primary, messages = messages.len(), "updating external zone");
            primary
                .update(&messages, ukey)
                .await
                .map_err(|e| wire_failure(&pod, zname, e))?;
            wrote = true;
        }
        if wrote {
            // What the server kept: BIND answers NOERROR to an add it drops.
            served = transfer(&primary, &pod, zname, xfer).await?;
        }
        Ok::<_, ServerError>((Arc::new(served), wrote))
    };
    let (served, _wrote) = match written.await {
        Ok(w) => w,
        Err(e) => {
            ctx.state.set_snapshot(&zkey, None);
            settle_records(
                ctx,
                &zone.namespace().unwrap_or_default(),
                zname,
                records,
                &desired,
                None,
                None,
            )
            .await?;
            return failed(ctx, zone, e).await;
        }
    };
    ctx.state.set_snapshot(
        &zkey,
        Some(Snapshot {
            served: served.clone(),
            applied: Some(fingerprint),
            verified_at: std::time::Instant::now(),
            written_at: None,
            primary: identity,
        }),
    );
    settle_records(
        ctx,
        &zone.namespace().unwrap_or_default(),
        zname,
        records,
        &desired,
        Some(&*served),
        None,
    )
    .await?;
    let servers = serials(&at, zname, served.serial).await;
    let (phase, reason, message) = match desired.inline_errors.first() {
        None => (Phase::Ready, REASON_SERVED, String::new()),
        Some((reason, _)) => (
            Phase::Error,
            *reason,
            desired
                .inline_errors
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    let report = ZoneReport {
        phase,
        reason,
        message,
        serial: Some(served.serial),
        record_count: Some(u32::try_from(desired.rrsets.len()).unwrap_or(u32::MAX)),
        servers: Some(servers),
        dnssec: Some(None),
        // An external zone is transferred on every pass; no plan to trust.
        applied_plan: Some(None),
        external_secondaries: None,
    };
    let mut want = Applied {
        type_: Some(
            if created {
                TYPE_EXTERNAL_CREATED
            } else {
                TYPE_EXTERNAL
            }
            .into(),
        ),
        ..Default::default()
    };
    want.set_inline(&desired.inline_owned);
    finish(ctx, zone, &report, applied, &want).await?;
    Ok(Action::requeue(EXTERNAL_CHECK))
}

/// A verified AXFR of the zone from the primary.
async fn transfer(
    client: &wire::Client,
    pod: &PodRef,
    zone: &ZoneName,
    key: &TsigKey,
) -> Result<Served, ServerError> {
    let failed = |reason: String| ServerError::Transfer {
        zone: zone.to_string(),
        pod: pod.name.clone(),
        reason,
    };
    let records = client.axfr(zone, key).await.map_err(|e| match e {
        e @ (WireError::Connect { .. } | WireError::Timeout { .. } | WireError::Io { .. }) => {
            wire_failure(pod, zone, e)
        }
        e => failed(e.to_string()),
    })?;
    // Canonical rdata, compared with the wanted records in wire form.
    Served::from_records(zone, &records).ok_or_else(|| failed("the transfer carried no SOA".into()))
}

/// The zone's serial on the primary and on each listed secondary, by
/// `address:port`. A secondary that does not answer, or does not serve
/// the zone, is left out.
async fn serials(at: &Servers, zone: &ZoneName, primary: u32) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::from([(at.primary.to_string(), primary)]);
    let reads = at.secondaries.iter().map(|addr| async move {
        let r = wire::Client::new(*addr).serial(zone, None).await;
        (addr, r)
    });
    for (addr, r) in futures::future::join_all(reads).await {
        match r {
            Ok(Some(s)) => {
                out.insert(addr.to_string(), s);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(zone = %zone, secondary = %addr, error = %e, "secondary did not answer")
            }
        }
    }
    out
}

/// The zone clause given to `rndc addzone`: a primary zone in the
/// server's directory, updated with the zone's key and transferred with
/// the cluster's.
fn addzone_command(zone: &ZoneName, update: &TsigKey, transfer: &TsigKey) -> String {
    format!(
        "addzone {} {{ type primary; file {}; update-policy {{ grant {} zonesub ANY; }}; allow-transfer {{ key {}; }}; }};",
        quoted(zone.as_str()),
        quoted(&format!("{}.db", zone.as_str())),
        quoted(&update.name.to_string()),
        quoted(&transfer.name.to_string()),
    )
}

fn rndc_key<'a>(ext: &ExternalSpec, inputs: &'a Inputs) -> Result<&'a TsigKey, Blocked> {
    let key_ref = ext.rndc.as_ref().map(|r| r.key_ref.as_str()).unwrap_or("");
    inputs.keys.by_object(key_ref).ok_or_else(|| Blocked {
        reason: crate::api::REASON_KEY_NOT_FOUND,
        message: format!(
            "BindTSIGKey {key_ref} (spec.external.rndc.keyRef) is not there or not loaded by the cluster"
        ),
        permanent: false,
    })
}

/// Creates the zone on the primary through rndc. A zone that appeared
/// meanwhile (`already exists`) is fine.
async fn create(
    ext: &ExternalSpec,
    inputs: &Inputs,
    at: SocketAddr,
    zone: &ZoneName,
    update: &TsigKey,
    transfer: &TsigKey,
) -> Result<(), Blocked> {
    let key = rndc_key(ext, inputs)?;
    let command = addzone_command(zone, update, transfer);
    match rndc::Client::new(at, key.clone()).command(&command).await {
        Ok(_) => {
            tracing::info!(zone = %zone, rndc = %at, "created zone on the external primary");
            Ok(())
        }
        Err(e) if e.server_reason() == Some("already exists") => Ok(()),
        Err(e) => Err(Blocked {
            reason: REASON_RNDC_FAILED,
            message: format!("failed to create zone {zone} through rndc at {at}: {e}"),
            permanent: false,
        }),
    }
}

/// Deletes a BindZone's data from the external primary: the zone itself
/// when the operator created it, else only the RRsets it owns (never the
/// apex NS or SOA of a zone that was there before).
pub async fn remove(
    ctx: &ZoneContext,
    zone: &BindZone,
    cluster: &BindCluster,
) -> Result<(), Error> {
    let ext = cluster
        .external()
        .expect("called for external clusters only");
    let applied = Applied::of(zone);
    let Some(type_) = applied.type_.as_deref() else {
        return Ok(());
    };
    let Ok(zname) = ZoneName::parse(&zone.spec.zone_name) else {
        return Ok(());
    };
    let at = servers(ext).map_err(|b| Error::Blocked {
        zone: zname.to_string(),
        reason: b.reason,
        message: b.message,
    })?;
    let inputs = match super::read::inputs(ctx, zone).await? {
        Ok(i) => i,
        Err(b) => {
            return Err(Error::Blocked {
                zone: zname.to_string(),
                reason: b.reason,
                message: format!("cannot remove the zone's data yet: {}", b.message),
            });
        }
    };
    if type_ == TYPE_EXTERNAL_CREATED
        && let Some(rndc_at) = at.rndc
    {
        let key = rndc_key(ext, &inputs).map_err(|b| Error::Blocked {
            zone: zname.to_string(),
            reason: b.reason,
            message: b.message,
        })?;
        let command = format!("delzone -clean {}", quoted(zname.as_str()));
        return match rndc::Client::new(rndc_at, key.clone())
            .command(&command)
            .await
        {
            Ok(_) => {
                tracing::info!(zone = %zname, rndc = %rndc_at, "deleted zone on the external primary");
                Ok(())
            }
            Err(e) if e.server_reason() == Some("not found") => Ok(()),
            Err(e) => Err(Error::Blocked {
                zone: zname.to_string(),
                reason: REASON_RNDC_FAILED,
                message: format!("failed to delete zone {zname} through rndc at {rndc_at}: {e}"),
            }),
        };
    }
    // A zone that was there before: take back what this BindZone wrote.
    let Some(ukey) = update_key(zone, &inputs) else {
        tracing::warn!(zone = %zname, "no update key; leaving the zone's records on the external primary");
        return Ok(());
    };
    let mut owned: Vec<(crate::bind::DomainName, RecordType)> =
        applied.inline_keys().into_iter().collect();
    if let Ok(crate::render::validate::ZoneConfig::Primary(cfg)) =
        super::read::validate(zone, &inputs).map_err(|_| ())
    {
        let records = super::read::records_of(ctx, zone);
        let labels = super::read::namespace_labels(ctx, zone, &records).flatten();
        let desired = plan(ctx, zone, &inputs.cluster, &cfg, &records, &applied, labels);
        owned.extend(desired.rrsets.keys().cloned());
        owned.extend(desired.retired.iter().cloned());
    }
    owned.sort();
    owned.dedup();
    owned.retain(|(name, t)| !(name == zname.as_domain() && *t == RecordType::Ns));
    let batch = UpdateBatch {
        zone: zname.clone(),
        changes: owned
            .into_iter()
            .map(|(name, rtype)| RrsetChange::Delete { name, rtype })
            .collect(),
        apex_ns: None,
    };
    let server = |source| Error::Server {
        zone: zname.to_string(),
        source,
    };
    let messages = wire::update::messages(&batch).map_err(|source| {
        server(ServerError::Batch {
            zone: zname.to_string(),
            source,
        })
    })?;
    let pod = server_ref(zone, at.primary);
    match wire::Client::new(at.primary).update(&messages, ukey).await {
        Ok(_) => Ok(()),
        // The zone is gone from the server: nothing of ours is left.
        Err(WireError::Rejected {
            rcode: wire::Rcode::NotAuth | wire::Rcode::NotZone,
            ..
        }) => Ok(()),
        Err(e) => Err(server(wire_failure(&pod, &zname, e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::{KeyName, TsigAlgorithm, TsigSecret};

    fn key(name: &str) -> TsigKey {
        TsigKey {
            name: KeyName::parse(name).unwrap(),
            algorithm: TsigAlgorithm::HmacSha256,
            secret: TsigSecret::from_bytes(&[1u8; 32]).unwrap(),
        }
    }

    #[test]
    fn addzone_names_the_keys_never_their_material() {
        let z = ZoneName::parse("new.example").unwrap();
        let (u, t) = (key("update-key"), key("xfer-key"));
        let cmd = addzone_command(&z, &u, &t);
        assert_eq!(
            cmd,
            r#"addzone "new.example" { type primary; file "new.example.db"; update-policy { grant "update-key" zonesub ANY; }; allow-transfer { key "xfer-key"; }; };"#
        );
        assert!(!cmd.contains(u.secret.expose_base64()));
    }

    #[test]
    fn servers_must_be_ip_addresses() {
        assert!(socket("192.0.2.1", 53).is_ok());
        assert!(socket("2001:db8::1", 53).is_ok());
        assert!(socket("ns1.example.com", 53).is_err());
    }
}
