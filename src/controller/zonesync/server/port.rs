//! The one port between the zone pipeline and the BIND servers: typed
//! operations in, typed replies out ([`ZoneServers`]). The zone pipeline
//! ([`super::Target`], the group commit of [`super::batch`]) speaks only
//! this; [`super::exec_port::ExecServers`] is its one production
//! implementation (pods/exec for what needs the pod's files or rndc, DNS
//! messages from the operator for records, serials and transfers), and
//! the controller tests' fake implements it over a model of named: no
//! command line or script is ever parsed to know what was asked.
//!
//! Errors are [`ServerError`]s, classified by the implementation (rndc's
//! refusals, an UPDATE's response code, an unreachable pod), so callers
//! decide on kinds, never on text.

use std::collections::BTreeMap;

use futures::future::BoxFuture;

use crate::bind::commands::{ZoneApplied, ZoneWrite};
use crate::bind::dnssec::{Dnskey, KeyFile};
use crate::bind::parse::ZoneStatus;
use crate::bind::wire::client::Ixfr;
use crate::bind::wire::{Record, UpdateMessage};
use crate::bind::zone::SecondaryZone;
use crate::bind::{TsigKey, ViewName, ZoneName};
use crate::controller::exec::PodRef;

use super::ServerError;

/// What one [`ZoneServers::apply_zones`] run did, per write (by its
/// position in the run).
#[derive(Debug, Default)]
pub struct ZonesApplied {
    /// Each write reached: its outcome, or that zone's own failure
    /// (never [`ZoneApplied::Failed`]: that is an error here). A write
    /// missing was not reached.
    pub results: BTreeMap<usize, Result<ZoneApplied, ServerError>>,
    /// named-checkconf refused the new zone lists: nothing was applied.
    pub refused: Option<Refused>,
    /// The run itself failed (the pod or its named could not be reached):
    /// every write not in `results` failed with it.
    pub failure: Option<ServerError>,
}

/// named-checkconf's refusal of a run's zone lists.
#[derive(Debug, Default)]
pub struct Refused {
    /// The writes whose stanza it named, with its message.
    pub writes: BTreeMap<usize, String>,
    /// Its whole output (for the writes it did not name).
    pub output: String,
}

/// Zone operations on the BIND pods of every cluster, by pod. Every
/// method is one exchange with one pod (one exec, or one DNS connection).
pub trait ZoneServers: Send + Sync {
    /// Lists, changes or unlists primary zones on the pod in one run (one
    /// `named-checkconf` of the new lists and one `rndc reconfig`; see
    /// [`crate::bind::commands::apply_zones`]).
    fn apply_zones<'a>(
        &'a self,
        pod: &'a PodRef,
        writes: &'a [ZoneWrite],
    ) -> BoxFuture<'a, ZonesApplied>;

    /// Sends one zone's UPDATE messages, in order on one connection,
    /// signed with `key`; the first refused stops the rest.
    fn update<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        messages: &'a [UpdateMessage],
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), ServerError>>;

    /// SOA serials of `zones` as the pod serves them (queries signed with
    /// `key` when given, which picks the view). A zone missing from the
    /// result is not served.
    fn serials<'a>(
        &'a self,
        pod: &'a PodRef,
        zones: &'a [ZoneName],
        key: Option<&'a TsigKey>,
    ) -> BoxFuture<'a, Result<BTreeMap<ZoneName, u32>, ServerError>>;

    /// A signed AXFR of the zone: its records (the closing SOA dropped).
    fn transfer<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<Record>, ServerError>>;

    /// A signed IXFR of the zone from `serial`: the differences since, or
    /// the whole zone (see [`crate::bind::wire::Client::ixfr`]).
    fn transfer_since<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        serial: u32,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Ixfr, ServerError>>;

    /// `rndc zonestatus`: `None` when named does not know the zone.
    fn zone_status<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        view: Option<&'a ViewName>,
    ) -> BoxFuture<'a, Result<Option<ZoneStatus>, ServerError>>;

    /// Adds a secondary zone (`rndc addzone`); already there is success.
    fn add_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a SecondaryZone,
    ) -> BoxFuture<'a, Result<(), ServerError>>;

    /// Changes a secondary zone's clause (`rndc modzone`).
    fn modify_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a SecondaryZone,
    ) -> BoxFuture<'a, Result<(), ServerError>>;

    /// Deletes a zone named added by rndc, with its files (`file`, its
    /// journal, signed copies); already gone is success.
    fn delete_zone<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        view: Option<&'a ViewName>,
        file: &'a str,
    ) -> BoxFuture<'a, Result<(), ServerError>>;

    /// `rndc notify`: the pod NOTIFYs the zone's secondaries now.
    fn notify<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        view: Option<&'a ViewName>,
    ) -> BoxFuture<'a, Result<(), ServerError>>;

    /// A NOTIFY of `zone` from the operator itself to the pod (a
    /// secondary), signed with `key`, over DNS: the pod refreshes the
    /// zone from its primaries now. No exec.
    fn notify_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), ServerError>>;

    /// The DNSKEYs the pod serves for the zone (signed with `key`, so the
    /// query lands in the zone's view).
    fn dnskeys<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<Dnskey>, ServerError>>;

    /// The zone's key files in the pod's key directory (key material).
    fn key_files<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
    ) -> BoxFuture<'a, Result<Vec<KeyFile>, ServerError>>;

    /// Puts kept key files back where no file of their name is; how many
    /// were written.
    fn restore_key_files<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        files: &'a [KeyFile],
    ) -> BoxFuture<'a, Result<usize, ServerError>>;
}
