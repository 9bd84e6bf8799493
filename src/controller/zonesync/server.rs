//! Zone operations on one BIND pod, through the one port to the servers
//! ([`port::ZoneServers`], whose production implementation is
//! [`exec_port::ExecServers`]) and the pod's group commit ([`batch`]):
//! read SOA serials, `zonestatus`, create a primary zone (with its records
//! and catalog join in one round), add a secondary zone, change a zone's
//! clause, configure a zone again keeping its files (a `dnssec-policy` on
//! BIND 9.20), read its DNSKEYs, delete a zone with every file named keeps
//! for it (journal, signed copies, keys), transfer a zone (signed AXFR)
//! and send UPDATE messages.
//!
//! Where zones live: primary zones (BindZones of type primary and the
//! catalog zones) are listed in the primary's zone list files that
//! named.conf includes (see [`crate::bind::commands::apply_zones`]): a
//! round of 1,000 new zones is one exec and one `rndc reconfig`, where
//! `rndc addzone` costs named a serialised add and a new-zone database
//! commit per zone. Secondary-type BindZones stay in the new-zone database
//! (`rndc addzone` on every pod; a secondary pod's named.conf has no list,
//! and they are few).
//!
//! Touches BIND pods through the port only; never the API server.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::bind::commands::{Command, ZoneApplied};
use crate::bind::dnssec::{Dnskey, KeyFile};
use crate::bind::nsupdate::{BatchError, RrsetChange, UpdateBatch};
use crate::bind::parse::{NsupdateError, RndcError, ZoneStatus};
use crate::bind::wire::client::Ixfr;
use crate::bind::wire::{self, Rcode, UpdateMessage, WireError};
use crate::bind::zone::{PrimaryZone, SecondaryZone, Soa};
use crate::bind::{TsigKey, Ttl, ViewName, ZoneName};
use crate::controller::error::Category;
use crate::controller::exec::{ExecError, PodRef};

pub mod batch;
pub mod exec_port;
pub mod port;

use super::diff::Served;
use batch::Batcher;
use port::ZoneServers;

/// A failed zone operation.
#[derive(Debug, Clone, thiserror::Error)]
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
    /// A secondary did not take the operator's NOTIFY (it answered with a
    /// refusal: it does not serve the zone).
    #[error("failed to notify pod {pod} of zone {zone}: {reason}")]
    Notify {
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
            ServerError::Transfer { .. } | ServerError::Notify { .. } => {
                Category::TransferFailed.as_str()
            }
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
    /// File written and zone listed: it holds exactly the text given.
    New,
    /// named would not load the text given (why: checkconf's lines about
    /// the zone's file); the zone was created from its bare skeleton.
    Bare(String),
    /// The pod has the zone already (its contents are unknown).
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

/// One pod, ready to run zone operations: serial reads, zone writes and
/// updates join the pod's next round of its [`Batcher`]; everything else
/// waits for a slot ([`Batcher::unbatched`]).
pub struct Target<'a> {
    servers: &'a Arc<dyn ZoneServers>,
    batcher: &'a Arc<Batcher>,
    pub pod: &'a PodRef,
}

impl<'a> Target<'a> {
    pub fn new(
        servers: &'a Arc<dyn ZoneServers>,
        batcher: &'a Arc<Batcher>,
        pod: &'a PodRef,
    ) -> Self {
        Target {
            servers,
            batcher,
            pod,
        }
    }

    /// SOA serials of `zones` as this pod serves them (pipelined signed
    /// queries over DNS, in the pod's next round), signed with `key` when
    /// given. A zone missing from the result is not served (absent, or
    /// configured but not loaded).
    pub async fn serials(
        &self,
        zones: &[ZoneName],
        key: Option<&TsigKey>,
    ) -> Result<BTreeMap<ZoneName, u32>, ServerError> {
        self.batcher
            .serials(self.servers, self.pod, zones, key)
            .await
    }

    /// `rndc zonestatus`: `None` when rndc does not know the zone.
    pub async fn zone_status(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
    ) -> Result<Option<ZoneStatus>, ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.zone_status(self.pod, zone, view).await
    }

    /// The serial the pod serves for one zone, `None` when it does not
    /// serve it (absent, or configured but not loaded): a SOA query signed
    /// with `key`, which picks the zone's view (a view's key steers into
    /// that view; [`crate::bind::viewkey`]).
    pub async fn serial_of(
        &self,
        zone: &ZoneName,
        key: &TsigKey,
    ) -> Result<Option<u32>, ServerError> {
        Ok(self
            .serials(std::slice::from_ref(zone), Some(key))
            .await?
            .get(zone)
            .copied())
    }

    /// Creates a primary zone in the pod's next round: its file from
    /// `text` (stale journal removed with it: BIND_FACTS, a leftover
    /// `.jnl` replays deleted records), listed, named reconfigured. A zone
    /// the pod has already (listed, in the new-zone database, or with
    /// files on the volume) is left untouched: a SOA query can miss a live
    /// zone (a view, a busy server), and writing its file would throw away
    /// its journal.
    ///
    /// `bare`, when given, is the zone's bare skeleton, which the creation
    /// falls back to when named would not load `text` ([`Created::Bare`]).
    pub async fn create_primary(
        &self,
        zone: &PrimaryZone,
        text: &str,
        bare: Option<&str>,
    ) -> Result<Created, ServerError> {
        self.batcher
            .create_primary(self.servers, self.pod, zone, text, bare)
            .await
    }

    /// [`Self::create_primary`], and when the zone was created, its
    /// catalog `join` in the same round of the pod (one round, not two, for
    /// a first sync's wave of new zones). The join's outcome is `None` when
    /// it was not sent (the zone was there already).
    pub async fn create_primary_joining(
        &self,
        zone: &PrimaryZone,
        text: &str,
        bare: Option<&str>,
        join: CatalogJoin,
    ) -> Result<(Created, Option<Result<(), ServerError>>), ServerError> {
        self.batcher
            .create_primary_joining(self.servers, self.pod, zone, text, bare, Some(join))
            .await
    }

    /// Adds a secondary zone (its file comes from the transfer). Already
    /// there is success.
    pub async fn add_secondary(&self, zone: &SecondaryZone) -> Result<(), ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.add_secondary(self.pod, zone).await
    }

    /// `rndc modzone` of a secondary zone with its current clause.
    pub async fn modify_secondary(&self, zone: &SecondaryZone) -> Result<(), ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.modify_secondary(self.pod, zone).await
    }

    /// `rndc notify`: NOTIFY the zone's secondaries now.
    pub async fn notify(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
    ) -> Result<(), ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.notify(self.pod, zone, view).await
    }

    /// NOTIFYs this pod (a secondary) of `zone` from the operator, over DNS
    /// signed with `key` (no exec): it refreshes the zone from its
    /// primaries now.
    pub async fn notify_secondary(
        &self,
        zone: &ZoneName,
        key: &TsigKey,
    ) -> Result<(), ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.notify_secondary(self.pod, zone, key).await
    }

    /// Brings a served primary zone's clause current: the zone is listed
    /// with `zone`'s clause (moved out of the new-zone database when an
    /// older operator added it there; nothing asked of the pod when this
    /// process saw it listed as it is). Whether anything was written.
    pub async fn relist_primary(
        &self,
        zone: &PrimaryZone,
        skeleton: &str,
    ) -> Result<bool, ServerError> {
        let applied = self
            .batcher
            .put_primary(self.servers, self.pod, zone, skeleton, false)
            .await?;
        Ok(!matches!(applied, ZoneApplied::Listed))
    }

    /// Deletes a primary zone with its files: unlisted in the pod's next
    /// round (a zone rndc added is deleted with `rndc delzone`); a zone
    /// already gone is success.
    pub async fn delete_primary(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
    ) -> Result<(), ServerError> {
        self.batcher
            .remove_primary(self.servers, self.pod, zone, view)
            .await
    }

    /// Makes named configure the zone again from its clause, keeping its
    /// files: how a `dnssec-policy` added to a zone takes effect on BIND
    /// 9.20. The zone is listed with the clause and named reconfigured.
    pub async fn readd(&self, zone: &PrimaryZone) -> Result<(), ServerError> {
        self.batcher
            .put_primary(self.servers, self.pod, zone, "", true)
            .await
            .map(|_| ())
    }

    /// The DNSKEYs the pod serves for the zone (a signed query, so it lands
    /// in the zone's view).
    pub async fn dnskeys(
        &self,
        zone: &ZoneName,
        key: &TsigKey,
    ) -> Result<Vec<Dnskey>, ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.dnskeys(self.pod, zone, key).await
    }

    /// The zone's key files in the pod's key directory (key material:
    /// kept only in the zone's Secret, never logged).
    pub async fn key_files(&self, zone: &ZoneName) -> Result<Vec<KeyFile>, ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.key_files(self.pod, zone).await
    }

    /// Puts kept key files back into the pod's key directory where no file
    /// of their name is; returns how many were written.
    pub async fn restore_key_files(
        &self,
        zone: &ZoneName,
        files: &[KeyFile],
    ) -> Result<usize, ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.restore_key_files(self.pod, zone, files).await
    }

    /// `rndc delzone` of a zone rndc added (a secondary-type zone) plus
    /// removal of its file and journal, so a later zone of the same name
    /// starts clean. A zone already gone is success.
    pub async fn delete(
        &self,
        zone: &ZoneName,
        view: Option<&ViewName>,
        file: &str,
    ) -> Result<(), ServerError> {
        let _slot = self.batcher.unbatched().await;
        self.servers.delete_zone(self.pod, zone, view, file).await
    }

    /// A TSIG-signed AXFR of the zone, over DNS from the operator; in a
    /// view, `key` is the view's.
    pub async fn transfer(&self, zone: &ZoneName, key: &TsigKey) -> Result<Served, ServerError> {
        let _slot = self.batcher.unbatched().await;
        let records = self.servers.transfer(self.pod, zone, key).await?;
        self.served_from(zone, &records)
    }

    /// A whole transfer's records as what the zone holds.
    fn served_from(
        &self,
        zone: &ZoneName,
        records: &[wire::Record],
    ) -> Result<Served, ServerError> {
        Served::from_records(zone, records).ok_or_else(|| ServerError::Transfer {
            zone: zone.to_string(),
            pod: self.pod.to_string(),
            reason: "the transfer carried no SOA".into(),
        })
    }

    /// What the pod serves now, read as the differences since `before`
    /// (an IXFR from its serial, one exchange whatever the zone's size)
    /// applied to it; a whole transfer when `before` is not what the server
    /// held (assumed, [`Served::assumed`]) or the server would not answer
    /// an IXFR.
    pub async fn read_back(
        &self,
        zone: &ZoneName,
        key: &TsigKey,
        before: &Served,
    ) -> Result<Served, ServerError> {
        if before.assumed {
            return self.transfer(zone, key).await;
        }
        let since = {
            let _slot = self.batcher.unbatched().await;
            self.servers
                .transfer_since(self.pod, zone, before.serial, key)
                .await
        };
        match since {
            Ok(Ixfr::UpToDate) => Ok(before.clone()),
            Ok(Ixfr::Deltas { serial, deltas }) => {
                let mut now = before.clone();
                now.apply_ixfr(&deltas, serial);
                Ok(now)
            }
            Ok(Ixfr::Full(records)) => self.served_from(zone, &records),
            Err(ServerError::Transfer { reason, .. }) => {
                tracing::debug!(pod = %self.pod, zone = %zone, reason = %reason, "IXFR refused; transferring the whole zone");
                self.transfer(zone, key).await
            }
            Err(e) => Err(e),
        }
    }

    fn messages(&self, batch: &UpdateBatch) -> Result<Vec<UpdateMessage>, ServerError> {
        wire::update::messages(batch).map_err(|source| ServerError::Batch {
            zone: batch.zone.to_string(),
            source,
        })
    }

    /// Sends the batch as UPDATE messages signed with `key` in the pod's
    /// next round. `Ok(false)`: nothing to send, nothing sent.
    pub async fn update(&self, batch: &UpdateBatch, key: &TsigKey) -> Result<bool, ServerError> {
        let messages = self.messages(batch)?;
        if messages.is_empty() {
            return Ok(false);
        }
        self.batcher
            .update(self.servers, self.pod, &batch.zone, messages, key, false)
            .await?;
        Ok(true)
    }

    /// Sends one catalog membership change: it shares one message with
    /// every change of the round to the same catalog and key (see
    /// [`batch`]).
    pub async fn catalog_change(
        &self,
        catalog: &ZoneName,
        change: RrsetChange,
        key: &TsigKey,
    ) -> Result<(), ServerError> {
        self.batcher
            .catalog_change(self.servers, self.pod, catalog, change, key)
            .await
    }

    /// Sends the batch and reads the serial it produced, in the pod's
    /// round, over DNS signed with `key` (in a view, the view's key: the
    /// read lands in that view). `Ok(None)`: nothing to send;
    /// `Ok(Some(None))`: sent, but the zone is not served after.
    pub async fn update_and_read_serial(
        &self,
        batch: &UpdateBatch,
        key: &TsigKey,
    ) -> Result<Option<Option<u32>>, ServerError> {
        let messages = self.messages(batch)?;
        if messages.is_empty() {
            return Ok(None);
        }
        self.batcher
            .update(self.servers, self.pod, &batch.zone, messages, key, true)
            .await
            .map(Some)
    }

    /// Replaces the zone's SOA names and timers (`serial` above the served
    /// one) and reads the serial after (as [`Self::update_and_read_serial`]).
    pub async fn update_soa(
        &self,
        zone: &ZoneName,
        soa: &Soa,
        serial: u32,
        ttl: Ttl,
        key: &TsigKey,
    ) -> Result<Option<u32>, ServerError> {
        let message = wire::update::soa_message(zone, soa, serial, ttl);
        self.batcher
            .update(self.servers, self.pod, zone, vec![message], key, true)
            .await
    }
}

/// A failed DNS read (`program`: [`crate::controller::exec::DNS_SOA`],
/// [`crate::controller::exec::DNS_AXFR`], ...) as a zone operation's
/// error: the pod's named could not be asked.
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
