//! Zone operations on one BIND pod, each one exec of a command the BIND
//! layer builds or one DNS exchange from the operator (or, on a batched
//! [`Target`], one request joining the pod's next round of [`batch`]):
//! read SOA serials (pipelined signed queries over DNS), `zonestatus`,
//! create a primary zone, add a secondary
//! zone, change a zone's clause, configure a zone again keeping its files
//! (a `dnssec-policy` on BIND 9.20), read its DNSKEYs, delete a zone with
//! every file named keeps for it (journal, signed copies, keys), transfer
//! a zone (signed AXFR over DNS) and send UPDATE messages.
//!
//! Where zones live: on a batched target (the operator's, see
//! [`Target::batched`]) primary zones — BindZones of type primary and the
//! catalog zones — are listed in the primary's zone list files that
//! named.conf includes (see [`commands::apply_zones`]): a round of 1,000
//! new zones is one exec and one `rndc reconfig`, where `rndc addzone`
//! costs named a serialised add and a new-zone database commit per zone.
//! Secondary-type BindZones stay in the new-zone database (`rndc addzone`
//! on every pod; a secondary pod's named.conf has no list, and they are
//! few). An unbatched target (batching off, as some tests run the
//! controller) keeps the rndc path for primaries too: file then
//! `addzone`, `modzone`, `delzone`.
//!
//! Touches BIND pods through the executor only; never the API server.
//! Errors carry the pod, zone and tool's stderr excerpt; never stdin (the
//! nsupdate script and AXFR key file hold key material).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::bind::commands::{
    self, Command, addzone, delzone, modzone, write_zone_file, zonestatus,
};
use crate::bind::dnssec::{Dnskey, KeyFile, parse_dnskeys, parse_key_files};
use crate::bind::layout::PodLayout;
use crate::bind::nsupdate::{BatchError, RrsetChange, UpdateBatch};
use crate::bind::parse::{
    NsupdateError, RndcError, ZoneStatus, parse_rndc_error, parse_zonestatus,
};
use crate::bind::wire::{self, Rcode, UpdateMessage, WireError};
use crate::bind::zone::{PrimaryZone, SecondaryZone, Soa};
use crate::bind::{TsigKey, Ttl, ViewName, ZoneName};
use crate::controller::error::Category;
use crate::controller::exec::{DNS_AXFR, DNS_SOA, ExecError, ExecOutput, PodExecutor, PodRef};

pub mod batch;

use super::diff::Served;
use batch::Batcher;

/// A failed zone operation.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The pod or its named could not be reached (pod down, named stopped,
    /// exec refused). Transient.
    #[error("failed to reach named in pod {pod}: {source}")]
    Unreachable {
        pod: String,
        #[source]
        source: Box<ExecError>,
    },
    /// rndc refused a zone command.
    #[error("failed to {action} zone {zone} in pod {pod}: {source}")]
    Rndc {
        action: &'static str,
        zone: String,
        pod: String,
        #[source]
        source: RndcError,
    },
    /// The primary refused or failed an update.
    #[error("failed to update zone {zone} in pod {pod}: {source}")]
    Update {
        zone: String,
        pod: String,
        #[source]
        source: NsupdateError,
    },
    /// A signed zone transfer failed.
    #[error("failed to transfer zone {zone} from pod {pod}: {reason}")]
    Transfer {
        zone: String,
        pod: String,
        reason: String,
    },
    /// The batch could not be built (a plan bug: the plan checks each change).
    #[error("failed to build the update for zone {zone}: {source}")]
    Batch {
        zone: String,
        #[source]
        source: BatchError,
    },
}

impl ServerError {
    /// Static category: Event and condition reason.
    pub fn category(&self) -> &'static str {
        match self {
            ServerError::Unreachable { .. } => Category::PrimaryUnavailable.as_str(),
            ServerError::Rndc { .. } => Category::ZoneCommandFailed.as_str(),
            ServerError::Update { .. } => Category::UpdateFailed.as_str(),
            ServerError::Transfer { .. } => Category::TransferFailed.as_str(),
            ServerError::Batch { .. } => Category::InvalidBatch.as_str(),
        }
    }

    /// Whether the zone itself is gone (so tracked state is stale).
    pub fn zone_missing(&self) -> bool {
        matches!(
            self,
            ServerError::Update {
                source: NsupdateError::NotAuth | NsupdateError::NotZone,
                ..
            } | ServerError::Rndc {
                source: RndcError::NotFound,
                ..
            }
        )
    }
}

/// Whether [`Target::create_primary`] made the zone or found it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// File written and zone added: it holds exactly the text given.
    New,
    /// named would not load the text given (why: checkconf's lines about
    /// the zone's file); the zone was created from its bare skeleton.
    Bare(String),
    /// rndc already knows the zone (its contents are unknown).
    Existing,
}

/// A catalog join carried by a zone's creation ([`Target::create_primary_joining`]):
/// sent in the same round as the creation, right after it, only when the
/// zone was created.
#[derive(Debug, Clone)]
pub struct CatalogJoin {
    pub catalog: ZoneName,
    /// The membership change (see [`crate::bind::nsupdate::catalog_add_member`]).
    pub change: RrsetChange,
    /// Signs the change: the transfer key (in a view, the view's key).
    pub key: TsigKey,
}

/// One pod, with its layout, ready to run zone commands.
pub struct Target<'a> {
    exec: &'a dyn PodExecutor,
    pub pod: &'a PodRef,
    pub layout: PodLayout,
    /// Serial reads, zone creation and updates join the pod's next round;
    /// everything else waits for a slot ([`Batcher::unbatched`]).
    batch: Option<(&'a Arc<Batcher>, &'a Arc<dyn PodExecutor>)>,
}

impl<'a> Target<'a> {
    pub fn new(exec: &'a dyn PodExecutor, pod: &'a PodRef) -> Self {
        Target {
            exec,
            pod,
            layout: exec.layout(pod),
            batch: None,
        }
    }

    /// A target whose operations go through `batcher` (see [`batch`]).
    /// Whether zone writes join the pod's rounds (where a new zone is
    /// created with its records; see [`Self::create_primary`]).
    pub fn batched_writes(&self) -> bool {
        self.batch.is_some()
    }

    pub fn batched(
        exec: &'a Arc<dyn PodExecutor>,
        batcher: &'a Arc<Batcher>,
        pod: &'a PodRef,
    ) -> Self {
        Target {
            exec: exec.as_ref(),
            pod,
            layout: exec.layout(pod),
            batch: Some((batcher, exec)),
        }
    }

    fn unreachable(&self, source: ExecError) -> ServerError {
        ServerError::Unreachable {
            pod: self.pod.to_string(),
            source: Box::new(source),
        }
    }

    async fn run(&self, cmd: &Command) -> Result<ExecOutput, ExecError> {
        let _slot = match self.batch {
            Some((b, _)) => Some(b.unbatched().await),
            None => None,
        };
        self.exec.exec(self.pod, cmd).await
    }

    /// Runs an rndc command, classifying failures. Unreachable control
    /// channels and transport failures are [`ServerError::Unreachable`].
    async fn rndc(
        &self,
        action: &'static str,
        zone: &ZoneName,
        cmd: &Command,
    ) -> Result<Result<ExecOutput, RndcError>, ServerError> {
        match self.run(cmd).await {
            Ok(out) => Ok(Ok(out)),
            Err(e @ ExecError::Transport { .. }) => Err(self.unreachable(e)),
            Err(e) => match parse_rndc_error(e.stderr()) {
                RndcError::Unreachable => Err(self.unreachable(e)),
                other => {
                    tracing::debug!(pod = %self.pod, zone = %zone, action, error = %other, "rndc refused");
                    Ok(Err(other))
                }
            },
        }
    }

    fn rndc_error(&self, action: &'static str, zone: &ZoneName, source: RndcError) -> ServerError {
        ServerError::Rndc {
            action,
            zone: zone.to_string(),
            pod: self.pod.to_string(),
            source,
        }
    }

    /// SOA serials of `zones` as this pod serves them, over DNS from the
    /// operator (pipelined on one connection, see
    /// [`PodExecutor::dns_serials`]), signed with `key` when given. A zone
    /// missing from the result is not served (absent, or configured but
    /// not loaded).
    pub async fn serials(
        &self,
        zones: &[ZoneName],
        key: Option<&TsigKey>,
    ) -> Result<BTreeMap<ZoneName, u32>, ServerError> {
        if let Some((b, exec)) = self.batch {
            return b.serials(exec, self.pod, zones, key).await;
        }
        self.exec
            .dns_serials(self.pod, zones, key)
            .await
            .map_err(|e| read_failure(self.pod, DNS_SOA, e))
    }

    /// `rndc zonestatus`: `None` when rndc does not know the zone.
    pub async fn zone_status(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
    ) -> Result<Option<ZoneStatus>, ServerError> {
        match self
            .rndc(
                "read the status of",
                zone,
                &zonestatus(&self.layout, zone, view),
            )
            .await?
        {
            Ok(out) => Ok(Some(parse_zonestatus(&out.stdout))),
            Err(RndcError::NotFound) => Ok(None),
            Err(e) => Err(self.rndc_error("read the status of", zone, e)),
        }
    }

    /// The serial the pod serves for one zone, `None` when it does not
    /// serve it. Outside views a SOA query signed with `key`; a zone in a
    /// view is asked through rndc, which names the view (and tells a zone
    /// configured but not loaded apart).
    pub async fn serial_of(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
        key: Option<&TsigKey>,
    ) -> Result<Option<u32>, ServerError> {
        match view {
            Some(_) => Ok(self
                .zone_status(zone, view)
                .await?
                .filter(|s| s.loaded)
                .and_then(|s| s.serial)),
            None => Ok(self
                .serials(std::slice::from_ref(zone), key)
                .await?
                .get(zone)
                .copied()),
        }
    }

    /// Creates a primary zone: the zone file first (BIND loads a zone whose
    /// file is missing as "not loaded" and SERVFAILs it, with reconfig and
    /// addzone both reporting success), stale journal removed with it
    /// (BIND_FACTS: a leftover `.jnl` replays deleted records), then
    /// `rndc addzone`. A zone rndc already knows is left untouched: a SOA
    /// query can miss a live zone (a view, a busy server), and writing its
    /// file would throw away its journal.
    ///
    /// `text` is the zone's first contents; `bare`, when given, its bare
    /// skeleton, which a batched creation falls back to when named would
    /// not load `text` ([`Created::Bare`]). Unbatched, the zone is created
    /// from `bare` when given (`rndc addzone` has no load check to fall
    /// back on; the records follow by UPDATE).
    pub async fn create_primary(
        &self,
        zone: &PrimaryZone,
        text: &str,
        bare: Option<&str>,
    ) -> Result<Created, ServerError> {
        if let Some((b, exec)) = self.batch {
            return b.create_primary(exec, self.pod, zone, text, bare).await;
        }
        self.create_unbatched(zone, text, bare).await
    }

    /// [`Self::create_primary`], and when the zone was created, its
    /// catalog `join` in the same round of the pod (one round, not two, for
    /// a first sync's wave of new zones). The join's outcome is `None` when
    /// it was not sent: the zone was there already, or the target is
    /// unbatched (the caller joins by itself then).
    pub async fn create_primary_joining(
        &self,
        zone: &PrimaryZone,
        text: &str,
        bare: Option<&str>,
        join: CatalogJoin,
    ) -> Result<(Created, Option<Result<(), ServerError>>), ServerError> {
        if let Some((b, exec)) = self.batch {
            return b
                .create_primary_joining(exec, self.pod, zone, text, bare, Some(join))
                .await;
        }
        Ok((self.create_unbatched(zone, text, bare).await?, None))
    }

    async fn create_unbatched(
        &self,
        zone: &PrimaryZone,
        text: &str,
        bare: Option<&str>,
    ) -> Result<Created, ServerError> {
        let skeleton = bare.unwrap_or(text);
        if self
            .zone_status(&zone.zone, zone.view.as_ref())
            .await?
            .is_some()
        {
            return Ok(Created::Existing);
        }
        self.run(&write_zone_file(&self.layout, &zone.file(), skeleton))
            .await
            .map_err(|e| self.unreachable(e))?;
        let cmd = addzone(&self.layout, &zone.zone, zone.view.as_ref(), &zone.clause());
        match self.rndc("add", &zone.zone, &cmd).await? {
            Ok(_) => Ok(Created::New),
            Err(RndcError::AlreadyExists) => Ok(Created::Existing),
            Err(e) => Err(self.rndc_error("add", &zone.zone, e)),
        }
    }

    /// Adds a secondary zone (its file comes from the transfer). Already
    /// there is success.
    pub async fn add_secondary(&self, zone: &SecondaryZone) -> Result<(), ServerError> {
        let cmd = addzone(&self.layout, &zone.zone, zone.view.as_ref(), &zone.clause());
        match self.rndc("add", &zone.zone, &cmd).await? {
            Ok(_) | Err(RndcError::AlreadyExists) => Ok(()),
            Err(e) => Err(self.rndc_error("add", &zone.zone, e)),
        }
    }

    /// `rndc notify`: NOTIFY the zone's secondaries now.
    pub async fn notify(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
    ) -> Result<(), ServerError> {
        let cmd = commands::notify(&self.layout, zone, view);
        match self.rndc("notify secondaries of", zone, &cmd).await? {
            Ok(_) => Ok(()),
            Err(e) => Err(self.rndc_error("notify secondaries of", zone, e)),
        }
    }

    /// Brings a served primary zone's clause current: batched, the zone is
    /// listed with `zone`'s clause (moved out of the new-zone database when
    /// an older operator added it there; no exec when this process saw it
    /// listed as it is); unbatched, `rndc modzone` when `changed`. Whether
    /// anything was written.
    pub async fn relist_primary(
        &self,
        zone: &PrimaryZone,
        skeleton: &str,
        changed: bool,
    ) -> Result<bool, ServerError> {
        if let Some((b, exec)) = self.batch {
            let applied = b.put_primary(exec, self.pod, zone, skeleton, false).await?;
            return Ok(!matches!(applied, commands::ZoneApplied::Listed));
        }
        if !changed {
            return Ok(false);
        }
        self.modzone(&zone.zone, zone.view.as_ref(), &zone.clause())
            .await
            .map(|_| true)
    }

    /// Deletes a primary zone with its files (see [`Self::delete`]);
    /// batched, it is unlisted in the pod's next round.
    pub async fn delete_primary(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
        file: &str,
    ) -> Result<(), ServerError> {
        if let Some((b, exec)) = self.batch {
            return b.remove_primary(exec, self.pod, zone, view).await;
        }
        self.delete(zone, view, file).await
    }

    /// `rndc modzone` with a new clause (update key, transfer ACL, policy).
    pub async fn modzone(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
        clause: &str,
    ) -> Result<(), ServerError> {
        let cmd = modzone(&self.layout, zone, view, clause);
        match self.rndc("modify", zone, &cmd).await? {
            Ok(_) => Ok(()),
            Err(e) => Err(self.rndc_error("modify", zone, e)),
        }
    }

    /// Makes named configure the zone again from its clause, keeping its
    /// files: how a `dnssec-policy` added to a zone takes effect on BIND
    /// 9.20. Batched, the zone is listed with the clause and named
    /// reconfigured; unbatched, it is deleted (files kept) and added again
    /// (see [`commands::readd_zone`]).
    pub async fn readd(&self, zone: &PrimaryZone) -> Result<(), ServerError> {
        if let Some((b, exec)) = self.batch {
            return b
                .put_primary(exec, self.pod, zone, "", true)
                .await
                .map(|_| ());
        }
        let (view, clause) = (zone.view.as_ref(), zone.clause());
        let zone = &zone.zone;
        let cmd = commands::readd_zone(&self.layout, zone, view, &clause);
        match self.rndc("re-add", zone, &cmd).await? {
            Ok(_) => Ok(()),
            Err(e) => Err(self.rndc_error("re-add", zone, e)),
        }
    }

    /// The DNSKEYs the pod serves for the zone (a signed query, so it lands
    /// in the zone's view).
    pub async fn dnskeys(
        &self,
        zone: &ZoneName,
        key: &TsigKey,
    ) -> Result<Vec<Dnskey>, ServerError> {
        let out = self
            .run(&commands::dig_dnskey(&self.layout, zone, key))
            .await
            .map_err(|e| self.unreachable(e))?;
        Ok(parse_dnskeys(&out.stdout, zone))
    }

    /// The zone's key files in the pod's key directory (key material:
    /// kept only in the zone's Secret, never logged).
    pub async fn key_files(&self, zone: &ZoneName) -> Result<Vec<KeyFile>, ServerError> {
        let out = self
            .run(&commands::read_key_files(&self.layout, zone))
            .await
            .map_err(|e| self.unreachable(e))?;
        Ok(parse_key_files(&out.stdout, zone))
    }

    /// Puts kept key files back into the pod's key directory where no file
    /// of their name is; returns how many were written.
    pub async fn restore_key_files(
        &self,
        zone: &ZoneName,
        files: &[KeyFile],
    ) -> Result<usize, ServerError> {
        let out = self
            .run(&commands::restore_key_files(&self.layout, zone, files))
            .await
            .map_err(|e| self.unreachable(e))?;
        Ok(out
            .stdout
            .lines()
            .filter(|l| l.starts_with("@@restored "))
            .count())
    }

    /// `rndc delzone` plus removal of the file and its journal, so a
    /// later zone of the same name starts clean. A zone already gone is
    /// success.
    pub async fn delete(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
        file: &str,
    ) -> Result<(), ServerError> {
        let cmd = delzone(&self.layout, zone, view, file);
        match self.rndc("delete", zone, &cmd).await? {
            Ok(_) | Err(RndcError::NotFound) => Ok(()),
            Err(e) => Err(self.rndc_error("delete", zone, e)),
        }
    }

    /// A TSIG-signed AXFR of the zone, over DNS from the operator (see
    /// [`PodExecutor::dns_transfer`]); in a view, `key` is the view's.
    pub async fn transfer(&self, zone: &ZoneName, key: &TsigKey) -> Result<Served, ServerError> {
        let _slot = match self.batch {
            Some((b, _)) => Some(b.unbatched().await),
            None => None,
        };
        let failed = |reason: String| ServerError::Transfer {
            zone: zone.to_string(),
            pod: self.pod.to_string(),
            reason,
        };
        let records = match self.exec.dns_transfer(self.pod, zone, key).await {
            Ok(r) => r,
            Err(e) if e.is_unreachable() => return Err(read_failure(self.pod, DNS_AXFR, e)),
            Err(e) => return Err(failed(e.to_string())),
        };
        Served::from_records(zone, &records)
            .ok_or_else(|| failed("the transfer carried no SOA".into()))
    }

    fn messages(&self, batch: &UpdateBatch) -> Result<Vec<UpdateMessage>, ServerError> {
        wire::update::messages(batch).map_err(|source| ServerError::Batch {
            zone: batch.zone.to_string(),
            source,
        })
    }

    /// Sends the messages to the pod's DNS port (see
    /// [`PodExecutor::dns_update`]).
    async fn send(
        &self,
        zone: &ZoneName,
        messages: &[UpdateMessage],
        key: &TsigKey,
    ) -> Result<(), ServerError> {
        tracing::debug!(
            pod = %self.pod,
            zone = %zone,
            messages = messages.len(),
            changes = messages.iter().map(|m| m.changes).sum::<usize>(),
            "sending update"
        );
        self.exec
            .dns_update(self.pod, messages, key)
            .await
            .map(|_| ())
            .map_err(|e| wire_failure(self.pod, zone, e))
    }

    /// Sends the batch as UPDATE messages signed with `key`. `Ok(false)`:
    /// nothing to send, nothing sent.
    pub async fn update(&self, batch: &UpdateBatch, key: &TsigKey) -> Result<bool, ServerError> {
        let messages = self.messages(batch)?;
        if messages.is_empty() {
            return Ok(false);
        }
        if let Some((b, exec)) = self.batch {
            b.update(exec, self.pod, &batch.zone, messages, key, false)
                .await?;
            return Ok(true);
        }
        self.send(&batch.zone, &messages, key).await.map(|()| true)
    }

    /// Sends one catalog membership change. Batched, it shares one message
    /// with every change of the round to the same catalog and key (see
    /// [`batch`]); otherwise it is a message of its own.
    pub async fn catalog_change(
        &self,
        catalog: &ZoneName,
        change: RrsetChange,
        key: &TsigKey,
    ) -> Result<(), ServerError> {
        if let Some((b, exec)) = self.batch {
            return b.catalog_change(exec, self.pod, catalog, change, key).await;
        }
        let batch = UpdateBatch {
            zone: catalog.clone(),
            changes: vec![change],
            apex_ns: None,
        };
        self.update(&batch, key).await.map(|_| ())
    }

    /// Sends the batch and reads the serial it produced. `Ok(None)`: nothing
    /// to send; `Ok(Some(None))`: sent, but the zone is not served after.
    /// Batched outside a view, the serial is read in the pod's round; in a
    /// view it comes from rndc afterwards.
    pub async fn update_and_read_serial(
        &self,
        batch: &UpdateBatch,
        key: &TsigKey,
        view: Option<&ViewName>,
    ) -> Result<Option<Option<u32>>, ServerError> {
        let messages = self.messages(batch)?;
        if messages.is_empty() {
            return Ok(None);
        }
        if let (Some((b, exec)), None) = (self.batch, view) {
            return b
                .update(exec, self.pod, &batch.zone, messages, key, true)
                .await
                .map(Some);
        }
        self.send(&batch.zone, &messages, key).await?;
        self.serial_of(&batch.zone, view, Some(key)).await.map(Some)
    }

    /// Replaces the zone's SOA names and timers (`serial` above the served
    /// one) and reads the serial after.
    pub async fn update_soa(
        &self,
        zone: &ZoneName,
        soa: &Soa,
        serial: u32,
        ttl: Ttl,
        key: &TsigKey,
        view: Option<&ViewName>,
    ) -> Result<Option<u32>, ServerError> {
        let message = wire::update::soa_message(zone, soa, serial, ttl);
        self.send(zone, std::slice::from_ref(&message), key).await?;
        self.serial_of(zone, view, Some(key)).await
    }
}

/// A failed DNS read (`program`: [`DNS_SOA`], [`DNS_AXFR`]) as a zone
/// operation's error: the pod's named could not be asked.
pub fn read_failure(pod: &PodRef, program: &str, e: WireError) -> ServerError {
    let cmd = Command {
        argv: vec![program.into()],
        stdin: None,
    };
    ServerError::Unreachable {
        pod: pod.to_string(),
        source: Box::new(ExecError::transport(pod, &cmd, &e)),
    }
}

/// A failed DNS exchange with a pod, as a zone operation's error: no
/// answer is [`ServerError::Unreachable`]; an answer is the update's
/// typed refusal.
pub fn wire_failure(pod: &PodRef, zone: &ZoneName, e: WireError) -> ServerError {
    if e.is_unreachable() {
        let cmd = Command {
            argv: vec!["dns-update".into()],
            stdin: None,
        };
        return ServerError::Unreachable {
            pod: pod.to_string(),
            source: Box::new(ExecError::transport(pod, &cmd, &e)),
        };
    }
    let source = match e.rcode() {
        Some(Rcode::Refused) => NsupdateError::Refused,
        Some(Rcode::BadKey) => NsupdateError::BadKey,
        Some(Rcode::BadSig) => NsupdateError::BadSig,
        Some(Rcode::BadTime) => NsupdateError::BadTime,
        Some(Rcode::NotAuth) => NsupdateError::NotAuth,
        Some(Rcode::NotZone) => NsupdateError::NotZone,
        Some(Rcode::YxDomain) => NsupdateError::YxDomain,
        Some(Rcode::NxDomain) => NsupdateError::NxDomain,
        Some(Rcode::YxRrset) => NsupdateError::YxRrset,
        Some(Rcode::NxRrset) => NsupdateError::NxRrset,
        Some(Rcode::ServFail) => NsupdateError::ServFail,
        _ if matches!(e, WireError::TooLarge { .. }) => NsupdateError::MessageTooLarge,
        _ => NsupdateError::Other(e.to_string()),
    };
    ServerError::Update {
        zone: zone.to_string(),
        pod: pod.to_string(),
        source,
    }
}
