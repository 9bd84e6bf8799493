//! The production [`ZoneServers`]: each operation is one exec of a command
//! the BIND layer builds ([`crate::bind::commands`]: zone lists, rndc,
//! key files) or one DNS exchange from the operator with the pod's DNS
//! port (UPDATE, SOA serials, AXFR; through [`PodExecutor`]'s `dns_*`,
//! so a metered executor counts them). Output is parsed here and failures
//! classified into [`ServerError`]s; nothing above reads a command's text.
//!
//! Errors carry the pod, zone and tool's stderr excerpt; never stdin (key
//! material is only ever on stdin or in a DNS message's signature).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;

use crate::bind::commands::{
    self, Command, ZoneApplied, ZoneWrite, addzone, apply_zones, delzone, modzone,
    parse_apply_zones, zonestatus,
};
use crate::bind::dnssec::{Dnskey, KeyFile, parse_dnskeys, parse_key_files};
use crate::bind::parse::{RndcError, ZoneStatus, parse_rndc_error, parse_zonestatus};
use crate::bind::wire::client::Ixfr;
use crate::bind::wire::{Record, UpdateMessage, WireError};
use crate::bind::zone::SecondaryZone;
use crate::bind::{TsigKey, ViewName, ZoneName};
use crate::controller::exec::{
    DNS_AXFR, DNS_IXFR, DNS_NOTIFY, DNS_SOA, ExecError, ExecOutput, PodExecutor, PodRef,
};

use super::port::{Refused, ZoneServers, ZonesApplied};
use super::{ServerError, read_failure, wire_failure};

/// [`ZoneServers`] over a [`PodExecutor`].
pub struct ExecServers {
    exec: Arc<dyn PodExecutor>,
}

impl ExecServers {
    pub fn new(exec: Arc<dyn PodExecutor>) -> Self {
        ExecServers { exec }
    }

    /// Runs an rndc command, classifying failures: an unreachable control
    /// channel or a failed exec is [`ServerError::Unreachable`]; a refusal
    /// is rndc's, typed.
    async fn rndc(
        &self,
        pod: &PodRef,
        cmd: &Command,
    ) -> Result<Result<ExecOutput, RndcError>, ServerError> {
        match self.exec.exec(pod, cmd).await {
            Ok(out) => Ok(Ok(out)),
            Err(e @ ExecError::Transport { .. }) => Err(unreachable(pod, e)),
            Err(e) => match parse_rndc_error(e.stderr()) {
                RndcError::Unreachable => Err(unreachable(pod, e)),
                other => Ok(Err(other)),
            },
        }
    }

    async fn run(&self, pod: &PodRef, cmd: &Command) -> Result<ExecOutput, ServerError> {
        self.exec
            .exec(pod, cmd)
            .await
            .map_err(|e| unreachable(pod, e))
    }
}

fn unreachable(pod: &PodRef, source: ExecError) -> ServerError {
    ServerError::Unreachable {
        pod: pod.to_string(),
        source: Box::new(source),
    }
}

fn refused(action: &'static str, zone: &ZoneName, pod: &PodRef, source: RndcError) -> ServerError {
    tracing::debug!(pod = %pod, zone = %zone, action, error = %source, "rndc refused");
    ServerError::Rndc {
        action,
        zone: zone.to_string(),
        pod: pod.to_string(),
        source,
    }
}

/// A failed transfer (`program`: [`DNS_AXFR`], [`DNS_IXFR`]): no answer
/// is [`ServerError::Unreachable`], a refusal the transfer's own error.
fn transfer_failure(pod: &PodRef, zone: &ZoneName, program: &str, e: WireError) -> ServerError {
    if e.is_unreachable() {
        return read_failure(pod, program, e);
    }
    ServerError::Transfer {
        zone: zone.to_string(),
        pod: pod.to_string(),
        reason: e.to_string(),
    }
}

/// A NOTIFY the pod did not take: no answer, or its refusal.
fn notify_failure(pod: &PodRef, zone: &ZoneName, e: WireError) -> ServerError {
    if e.is_unreachable() {
        return read_failure(pod, DNS_NOTIFY, e);
    }
    ServerError::Notify {
        zone: zone.to_string(),
        pod: pod.to_string(),
        reason: e.to_string(),
    }
}

/// A zone's failure in a batched run, from rndc's stderr for it.
fn write_failure(pod: &PodRef, write: &ZoneWrite, stderr: &str) -> ServerError {
    match parse_rndc_error(stderr) {
        RndcError::Unreachable => {
            let cmd = Command {
                argv: vec!["rndc".into()],
                stdin: None,
            };
            unreachable(pod, ExecError::exited(pod, &cmd, 1, String::new(), stderr))
        }
        source => ServerError::Rndc {
            action: write.action(),
            zone: write.zone.to_string(),
            pod: pod.to_string(),
            source,
        },
    }
}

impl ZoneServers for ExecServers {
    fn apply_zones<'a>(
        &'a self,
        pod: &'a PodRef,
        writes: &'a [ZoneWrite],
    ) -> BoxFuture<'a, ZonesApplied> {
        async move {
            let cmd = apply_zones(&self.exec.layout(pod), writes);
            let out = self.exec.exec(pod, &cmd).await;
            let stdout = match &out {
                Ok(o) => o.stdout.as_str(),
                Err(e) => e.stdout(),
            };
            let outcome = parse_apply_zones(stdout);
            let refused = outcome.refused.map(|refusal| Refused {
                writes: refusal
                    .stanzas()
                    .into_iter()
                    .filter_map(|(stanza, issue)| {
                        let i = writes.iter().position(|w| w.stanza_file() == stanza)?;
                        Some((i, format!("named-checkconf: {}", issue.message)))
                    })
                    .collect(),
                output: refusal.output.trim().to_string(),
            });
            let results = outcome
                .results
                .into_iter()
                .filter(|(i, _)| *i < writes.len())
                .map(|(i, applied)| match applied {
                    ZoneApplied::Failed(stderr) => {
                        (i, Err(write_failure(pod, &writes[i], &stderr)))
                    }
                    applied => (i, Ok(applied)),
                })
                .collect();
            ZonesApplied {
                results,
                refused,
                failure: out.err().map(|e| unreachable(pod, e)),
            }
        }
        .boxed()
    }

    fn update<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        messages: &'a [UpdateMessage],
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            self.exec
                .dns_update(pod, messages, key)
                .await
                .map(|_| ())
                .map_err(|e| wire_failure(pod, zone, e))
        }
        .boxed()
    }

    fn serials<'a>(
        &'a self,
        pod: &'a PodRef,
        zones: &'a [ZoneName],
        key: Option<&'a TsigKey>,
    ) -> BoxFuture<'a, Result<BTreeMap<ZoneName, u32>, ServerError>> {
        async move {
            self.exec
                .dns_serials(pod, zones, key)
                .await
                .map_err(|e| read_failure(pod, DNS_SOA, e))
        }
        .boxed()
    }

    fn transfer<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<Record>, ServerError>> {
        async move {
            self.exec
                .dns_transfer(pod, zone, key)
                .await
                .map_err(|e| transfer_failure(pod, zone, DNS_AXFR, e))
        }
        .boxed()
    }

    fn transfer_since<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        serial: u32,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Ixfr, ServerError>> {
        async move {
            self.exec
                .dns_ixfr(pod, zone, serial, key)
                .await
                .map_err(|e| transfer_failure(pod, zone, DNS_IXFR, e))
        }
        .boxed()
    }

    fn zone_status<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        view: Option<&'a ViewName>,
    ) -> BoxFuture<'a, Result<Option<ZoneStatus>, ServerError>> {
        async move {
            let cmd = zonestatus(&self.exec.layout(pod), zone, view);
            match self.rndc(pod, &cmd).await? {
                Ok(out) => Ok(Some(parse_zonestatus(&out.stdout))),
                Err(RndcError::NotFound) => Ok(None),
                Err(e) => Err(refused("read the status of", zone, pod, e)),
            }
        }
        .boxed()
    }

    fn add_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a SecondaryZone,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            let layout = self.exec.layout(pod);
            let cmd = addzone(&layout, &zone.zone, zone.view.as_ref(), &zone.clause());
            match self.rndc(pod, &cmd).await? {
                Ok(_) | Err(RndcError::AlreadyExists) => Ok(()),
                Err(e) => Err(refused("add", &zone.zone, pod, e)),
            }
        }
        .boxed()
    }

    fn modify_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a SecondaryZone,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            let layout = self.exec.layout(pod);
            let cmd = modzone(&layout, &zone.zone, zone.view.as_ref(), &zone.clause());
            match self.rndc(pod, &cmd).await? {
                Ok(_) => Ok(()),
                Err(e) => Err(refused("modify", &zone.zone, pod, e)),
            }
        }
        .boxed()
    }

    fn delete_zone<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        view: Option<&'a ViewName>,
        file: &'a str,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            let cmd = delzone(&self.exec.layout(pod), zone, view, file);
            match self.rndc(pod, &cmd).await? {
                Ok(_) | Err(RndcError::NotFound) => Ok(()),
                Err(e) => Err(refused("delete", zone, pod, e)),
            }
        }
        .boxed()
    }

    fn notify<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        view: Option<&'a ViewName>,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            let cmd = commands::notify(&self.exec.layout(pod), zone, view);
            match self.rndc(pod, &cmd).await? {
                Ok(_) => Ok(()),
                Err(e) => Err(refused("notify secondaries of", zone, pod, e)),
            }
        }
        .boxed()
    }

    fn notify_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            self.exec
                .dns_notify(pod, zone, key)
                .await
                .map_err(|e| notify_failure(pod, zone, e))
        }
        .boxed()
    }

    fn dnskeys<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<Dnskey>, ServerError>> {
        async move {
            let cmd = commands::dig_dnskey(&self.exec.layout(pod), zone, key);
            let out = self.run(pod, &cmd).await?;
            Ok(parse_dnskeys(&out.stdout, zone))
        }
        .boxed()
    }

    fn key_files<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
    ) -> BoxFuture<'a, Result<Vec<KeyFile>, ServerError>> {
        async move {
            let cmd = commands::read_key_files(&self.exec.layout(pod), zone);
            let out = self.run(pod, &cmd).await?;
            Ok(parse_key_files(&out.stdout, zone))
        }
        .boxed()
    }

    fn restore_key_files<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        files: &'a [KeyFile],
    ) -> BoxFuture<'a, Result<usize, ServerError>> {
        async move {
            let cmd = commands::restore_key_files(&self.exec.layout(pod), zone, files);
            let out = self.run(pod, &cmd).await?;
            Ok(out
                .stdout
                .lines()
                .filter(|l| l.starts_with("@@restored "))
                .count())
        }
        .boxed()
    }
}
