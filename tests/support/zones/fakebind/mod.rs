//! A recording fake of the BIND servers behind the zone pipeline's one
//! port ([`ZoneServers`], the interface production implements with
//! `ExecServers`): it records every operation (pod, kind, zone, view, and
//! for an UPDATE its messages as `update` lines) and answers from a small
//! in-memory model of each pod's named, with the BIND behaviour
//! BIND_FACTS.md lists: a zone listed without its file loads as "not
//! loaded", a leftover journal replays into a re-created zone, a zone
//! whose text named would not load falls back to its bare skeleton, an
//! RRset-wide delete at the apex is ignored and the last apex NS is never
//! deleted, >100 rdata fail the whole message, a CNAME beside other data
//! is silently dropped, updates are refused without the granted key.
//! Secondary pods serve the primary's catalog members at the primary's
//! serial. A pod can be taken down (every operation fails like a stopped
//! named) or wiped (an empty volume). Typed operations in, typed replies
//! out: nothing here reads a command line or a script.
#![allow(dead_code)]

mod model;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use bind_operator::bind::commands::{WriteKind, ZoneWrite};
use bind_operator::bind::dnssec::{Dnskey, KeyFile};
use bind_operator::bind::layout::PodLayout;
use bind_operator::bind::parse::{RndcError, ZoneStatus};
use bind_operator::bind::wire::client::Ixfr;
use bind_operator::bind::wire::codec::wire_name;
use bind_operator::bind::wire::{Op, Rcode, UpdateMessage, WireError};
use bind_operator::bind::wire::{Record, rdata};
use bind_operator::bind::zone::SecondaryZone;
use bind_operator::bind::{Rdata, RecordType, TsigKey, ViewName, ZoneName};
use bind_operator::controller::exec::{ExecError, PodRef};
use bind_operator::controller::zonesync::server::port::{ZoneServers, ZonesApplied};
use bind_operator::controller::zonesync::server::{ServerError, wire_failure};
use futures::FutureExt as _;
use futures::future::BoxFuture;

use model::{PodSim, RrKey, ZoneKey, ZoneSim, fqdn, lower, z_name};

/// What a recorded operation was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// SOA serials read (one call per read, `zone` the first asked).
    Serials,
    /// A signed AXFR.
    Transfer,
    /// A primary zone listed or changed by a zone-list run (one call per
    /// zone of the run).
    PutZone,
    /// A primary zone unlisted by a zone-list run.
    RemoveZone,
    /// `rndc addzone` of a secondary zone.
    AddZone,
    /// `rndc modzone` of a secondary zone.
    ModZone,
    /// `rndc delzone` with the zone's files.
    DelZone,
    ZoneStatus,
    /// UPDATE messages to one zone.
    Update,
    /// `rndc notify` on the pod (it NOTIFYs its secondaries).
    Notify,
    /// A NOTIFY the operator sent the pod (a secondary) over DNS.
    NotifySecondary,
    /// DNSSEC reads and key files.
    Other,
}

/// One recorded operation.
#[derive(Debug, Clone)]
pub struct Call {
    pub pod: String,
    pub kind: Kind,
    /// The zone it is about (the first asked for serials).
    pub zone: Option<String>,
    pub view: Option<String>,
    /// A zone write's or addzone's clause; an UPDATE's messages as the
    /// model's lines (`key ...`, `zone ...`, `update ...`, `send`).
    pub text: Option<String>,
    pub ok: bool,
}

#[derive(Default)]
struct Inner {
    pods: BTreeMap<String, PodSim>,
    calls: Vec<Call>,
}

/// The fake. Pod names ending in `-0` are primaries.
#[derive(Default)]
pub struct FakeBind {
    inner: Mutex<Inner>,
}

impl FakeBind {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap())
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.with(|i| i.calls.clone())
    }

    pub fn clear_calls(&self) {
        self.with(|i| i.calls.clear());
    }

    /// Number of calls so far.
    pub fn count(&self) -> usize {
        self.with(|i| i.calls.len())
    }

    /// Calls of `kind`.
    pub fn count_kind(&self, kind: Kind) -> usize {
        self.with(|i| i.calls.iter().filter(|c| c.kind == kind).count())
    }

    fn is_down(&self, pod: &PodRef) -> bool {
        self.with(|i| i.pods.get(&pod.name).is_some_and(|p| p.down))
    }

    /// Takes a pod's named down (true) or back up (false).
    pub fn set_down(&self, pod: &str, down: bool) {
        self.with(|i| i.pods.entry(pod.to_string()).or_default().down = down);
    }

    /// Empties a pod's volume and named (a restart on an empty volume).
    pub fn wipe(&self, pod: &str) {
        self.with(|i| {
            let p = i.pods.entry(pod.to_string()).or_default();
            p.files.clear();
            p.zones.clear();
            p.listed.clear();
        });
    }

    /// The zone as a pod serves it: (owner, type) -> values; `None` when it
    /// is not served.
    pub fn zone(&self, pod: &str, zone: &str) -> Option<BTreeMap<RrKey, BTreeSet<String>>> {
        self.with(|i| {
            let z = Self::served_zone(i, pod, &lower(zone))?;
            Some(
                z.rrsets
                    .iter()
                    .map(|(k, (_, v))| (k.clone(), v.clone()))
                    .collect(),
            )
        })
    }

    /// Values of one RRset on a pod (empty when absent).
    pub fn values(&self, pod: &str, zone: &str, name: &str, rtype: &str) -> BTreeSet<String> {
        self.zone(pod, zone)
            .and_then(|z| z.get(&(fqdn(name), rtype.to_string())).cloned())
            .unwrap_or_default()
    }

    /// The SOA rdata a pod serves for a zone (`mname rname serial timers`).
    pub fn soa(&self, pod: &str, zone: &str) -> Option<String> {
        self.with(|i| {
            Self::served_zone(i, pod, &lower(zone)).map(|z| {
                let (m, r, t) = &z.soa_rest;
                format!("{m} {r} {} {t}", z.serial)
            })
        })
    }

    /// The serial a pod serves for a zone.
    pub fn serial(&self, pod: &str, zone: &str) -> Option<u32> {
        self.with(|i| Self::served_zone(i, pod, &lower(zone)).map(|z| z.serial))
    }

    /// Whether a file exists on a pod (path relative to the data dir).
    pub fn has_file(&self, pod: &str, rel: &str) -> bool {
        let path = PodLayout::in_cluster().data_path(rel);
        self.with(|i| i.pods.get(pod).is_some_and(|p| p.files.contains_key(&path)))
    }

    /// Writes an RRset directly, as an outside writer (external-dns) would.
    pub fn external_write(&self, pod: &str, zone: &str, name: &str, rtype: &str, values: &[&str]) {
        self.with(|i| {
            let z = i
                .pods
                .get_mut(pod)
                .and_then(|p| {
                    p.zones
                        .values_mut()
                        .find(|z| z.loaded && z_name(z) == lower(zone))
                })
                .expect("zone served");
            let set = values.iter().map(|v| v.to_string()).collect();
            z.rrsets.insert((fqdn(name), rtype.to_string()), (60, set));
            z.serial += 1;
        });
    }

    /// Removes an RRset directly (a change behind the operator's back).
    pub fn external_delete(&self, pod: &str, zone: &str, name: &str, rtype: &str) {
        self.with(|i| {
            let z = i
                .pods
                .get_mut(pod)
                .and_then(|p| {
                    p.zones
                        .values_mut()
                        .find(|z| z.loaded && z_name(z) == lower(zone))
                })
                .expect("zone served");
            z.rrsets.remove(&(fqdn(name), rtype.to_string()));
            z.serial += 1;
        });
    }

    /// Zones the primary's catalog lists.
    pub fn catalog_members(&self, pod: &str, catalog: &str) -> BTreeSet<String> {
        self.with(|i| Self::members(i, pod, &lower(catalog)))
    }

    fn members(i: &Inner, pod: &str, catalog: &str) -> BTreeSet<String> {
        i.pods
            .get(pod)
            .and_then(|p| p.zones.values().find(|z| z.loaded && z_name(z) == catalog))
            .map(|z| {
                z.rrsets
                    .iter()
                    .filter(|((_, t), _)| t == "PTR")
                    .flat_map(|(_, (_, v))| v.iter().map(|s| lower(s)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A zone as `pod` serves it: its own, or (on a secondary) a catalog
    /// member of the primary.
    fn served_zone<'a>(i: &'a Inner, pod: &str, zone: &str) -> Option<&'a ZoneSim> {
        if let Some(p) = i.pods.get(pod) {
            if p.down {
                return None;
            }
            if let Some(z) = p.zones.values().find(|z| z.loaded && z_name(z) == zone) {
                return Some(z);
            }
        }
        if pod.ends_with("-0") {
            return None;
        }
        let primary = format!("{}-0", pod.rsplit_once('-')?.0);
        let pz = i.pods.get(&primary)?;
        if pz.down {
            return None;
        }
        let z = pz.zones.values().find(|z| z.loaded && z_name(z) == zone)?;
        // The catalog zone itself, or a member of any catalog on the primary.
        let is_catalog = z
            .rrsets
            .keys()
            .any(|(n, t)| t == "TXT" && n.starts_with("version."));
        let member = pz
            .zones
            .values()
            .filter(|c| c.loaded)
            .any(|c| Self::members(i, &primary, &z_name(c)).contains(zone));
        (is_catalog || member).then_some(z)
    }

    fn record(&self, pod: &PodRef, call: Op0, ok: bool) {
        let Op0 {
            kind,
            zone,
            view,
            text,
        } = call;
        self.with(|i| {
            i.calls.push(Call {
                pod: pod.name.clone(),
                kind,
                zone,
                view,
                text,
                ok,
            })
        });
    }

    /// Runs `f` on the pod's model unless the pod is down.
    fn on_pod<T>(
        &self,
        pod: &PodRef,
        f: impl FnOnce(&mut PodSim) -> Result<T, ServerError>,
    ) -> Result<T, ServerError> {
        self.with(|i| {
            let p = i.pods.entry(pod.name.clone()).or_default();
            if p.down {
                return Err(down(pod));
            }
            f(p)
        })
    }
}

impl FakeBind {
    /// A DNSSEC read or key-file operation: the model signs nothing and
    /// keeps no key, so `empty` (recorded as [`Kind::Other`]).
    async fn nothing_kept<T>(
        &self,
        pod: &PodRef,
        zone: &ZoneName,
        empty: T,
    ) -> Result<T, ServerError> {
        let result = self.on_pod(pod, |_| Ok(empty));
        self.record(pod, Op0::new(Kind::Other, zone, None), result.is_ok());
        result
    }
}

/// What a call is, before its outcome is known.
struct Op0 {
    kind: Kind,
    zone: Option<String>,
    view: Option<String>,
    text: Option<String>,
}

impl Op0 {
    fn new(kind: Kind, zone: &ZoneName, view: Option<&ViewName>) -> Self {
        Op0 {
            kind,
            zone: Some(zone.as_str().to_string()),
            view: view.map(|v| v.as_str().to_string()),
            text: None,
        }
    }

    fn text(mut self, text: String) -> Self {
        self.text = Some(text);
        self
    }
}

/// What reaching a stopped named gives.
fn down(pod: &PodRef) -> ServerError {
    ServerError::Unreachable {
        pod: pod.to_string(),
        source: Box::new(ExecError::Transport {
            pod: pod.to_string(),
            program: "named".into(),
            reason: "connection refused".into(),
        }),
    }
}

fn key_of(zone: &ZoneName, view: Option<&ViewName>) -> ZoneKey {
    (lower(zone.as_str()), view.map(|v| v.as_str().to_string()))
}

fn rndc_refused(action: &'static str, zone: &ZoneName, pod: &PodRef, e: RndcError) -> ServerError {
    ServerError::Rndc {
        action,
        zone: zone.to_string(),
        pod: pod.to_string(),
        source: e,
    }
}

fn fake_addr() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 5353))
}

/// A zone of the model as an AXFR yields it: the SOA first, then every
/// RRset, rdata in the operator's wire form (values the operator cannot
/// parse, only ever written by a test, as their text bytes).
fn transfer_records(zone: &ZoneName, sim: &ZoneSim) -> Vec<Record> {
    let (m, r, timers) = &sim.soa_rest;
    let mut soa = wire_name(m);
    soa.extend(wire_name(r));
    soa.extend_from_slice(&sim.serial.to_be_bytes());
    for t in timers.split_whitespace() {
        soa.extend_from_slice(&t.parse::<u32>().unwrap_or_default().to_be_bytes());
    }
    let mut out = vec![Record {
        name: wire_name(zone.as_str()),
        rtype: 6,
        class: 1,
        ttl: 300,
        rdata: soa,
    }];
    for ((name, rtype), (ttl, values)) in &sim.rrsets {
        if rtype == "SOA" {
            continue;
        }
        let Ok(t) = rtype.parse::<RecordType>() else {
            continue;
        };
        for v in values {
            let rdata = Rdata::parse(t, v, zone)
                .map(|rd| rdata::encode(&rd))
                .unwrap_or_else(|_| v.as_bytes().to_vec());
            out.push(Record {
                name: wire_name(name),
                rtype: rdata::type_code(t),
                class: 1,
                ttl: *ttl,
                rdata,
            });
        }
    }
    out
}

/// The typed UPDATE messages in the model's line form, each opened by
/// the key that signs it (name and algorithm only) and closed by `send`:
/// what the fake applies and what tests read back from [`Call::text`].
fn transcript(messages: &[UpdateMessage], key: &TsigKey) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&format!(
            "key {}:{} (signed)\nzone {}\n",
            key.algorithm,
            key.name,
            m.zone.fqdn()
        ));
        for line in op_lines(m) {
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str("send\n");
    }
    out
}

/// One message's operations as the model's update lines.
fn op_lines(m: &UpdateMessage) -> Vec<String> {
    let mut out = Vec::new();
    {
        for op in &m.ops {
            let line = match op {
                Op::DeleteRrset { name, rtype } => format!("update delete {} {rtype}", name.fqdn()),
                Op::Add {
                    name,
                    rtype,
                    ttl,
                    rdata,
                } => format!("update add {} {ttl} {rtype} {rdata}", name.fqdn()),
                Op::DeleteRdata { name, rtype, rdata } => {
                    format!("update delete {} {rtype} {rdata}", name.fqdn())
                }
                Op::Soa { ttl, soa, serial } => format!(
                    "update add {} {ttl} SOA {} {} {serial} {} {} {} {}",
                    m.zone.fqdn(),
                    soa.mname,
                    soa.rname,
                    soa.refresh,
                    soa.retry,
                    soa.expire,
                    soa.minimum
                ),
            };
            out.push(line);
        }
    }
    out
}

/// The typed refusal of the model's "update failed: X" text.
fn rcode_of(error: &str) -> Rcode {
    match error.trim().trim_start_matches("update failed: ") {
        "REFUSED" => Rcode::Refused,
        "NOTAUTH" => Rcode::NotAuth,
        "NOTZONE" => Rcode::NotZone,
        "SERVFAIL" => Rcode::ServFail,
        "YXDOMAIN" => Rcode::YxDomain,
        "NXRRSET" => Rcode::NxRrset,
        _ => Rcode::FormErr,
    }
}

impl ZoneServers for FakeBind {
    fn apply_zones<'a>(
        &'a self,
        pod: &'a PodRef,
        writes: &'a [ZoneWrite],
    ) -> BoxFuture<'a, ZonesApplied> {
        async move {
            let applied = self.on_pod(pod, |p| {
                Ok(writes
                    .iter()
                    .enumerate()
                    .map(|(k, w)| {
                        let r = model::apply(p, w).map_err(|e| ServerError::Rndc {
                            action: w.action(),
                            zone: w.zone.to_string(),
                            pod: pod.to_string(),
                            source: e,
                        });
                        (k, r)
                    })
                    .collect::<BTreeMap<_, _>>())
            });
            for (k, w) in writes.iter().enumerate() {
                let (kind, clause) = match &w.kind {
                    WriteKind::Put { clause, .. } => (Kind::PutZone, Some(clause.clone())),
                    WriteKind::Remove => (Kind::RemoveZone, None),
                };
                let mut op = Op0::new(kind, &w.zone, w.view.as_ref());
                op.text = clause;
                let ok = applied
                    .as_ref()
                    .is_ok_and(|r| r.get(&k).is_some_and(Result::is_ok));
                self.record(pod, op, ok);
            }
            match applied {
                Ok(results) => ZonesApplied {
                    results,
                    ..Default::default()
                },
                Err(e) => ZonesApplied {
                    failure: Some(e),
                    ..Default::default()
                },
            }
        }
        .boxed()
    }

    /// Applies the typed messages to the pod's model, in order, stopping
    /// at the first the model refuses (as named answers each message).
    fn update<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        messages: &'a [UpdateMessage],
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            let result = self.on_pod(pod, |p| {
                for m in messages {
                    let lines = op_lines(m);
                    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
                    model::send(p, &lower(m.zone.as_str()), key.name.as_str(), &lines).map_err(
                        |e| {
                            let e = WireError::Rejected {
                                addr: fake_addr(),
                                rcode: rcode_of(&e),
                            };
                            wire_failure(pod, zone, e)
                        },
                    )?;
                }
                Ok(())
            });
            let op = Op0::new(Kind::Update, zone, None).text(transcript(messages, key));
            self.record(pod, op, result.is_ok());
            result
        }
        .boxed()
    }

    fn serials<'a>(
        &'a self,
        pod: &'a PodRef,
        zones: &'a [ZoneName],
        _key: Option<&'a TsigKey>,
    ) -> BoxFuture<'a, Result<BTreeMap<ZoneName, u32>, ServerError>> {
        async move {
            let result = if self.is_down(pod) {
                Err(down(pod))
            } else {
                Ok(self.with(|i| {
                    zones
                        .iter()
                        .filter_map(|z| {
                            Self::served_zone(i, &pod.name, z.as_str())
                                .map(|sim| (z.clone(), sim.serial))
                        })
                        .collect()
                }))
            };
            let op = Op0 {
                kind: Kind::Serials,
                zone: zones.first().map(|z| z.as_str().to_string()),
                view: None,
                text: None,
            };
            self.record(pod, op, result.is_ok());
            result
        }
        .boxed()
    }

    /// The zone from the model as a transfer's records (rdata in wire
    /// form); refused unless the zone's clause allows the key.
    fn transfer<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<Record>, ServerError>> {
        async move {
            let result = if self.is_down(pod) {
                Err(down(pod))
            } else {
                self.with(|i| match Self::served_zone(i, &pod.name, zone.as_str()) {
                    Some(sim) if sim.clause.contains(&format!("key \"{}\"", key.name)) => {
                        Ok(transfer_records(zone, sim))
                    }
                    _ => Err(ServerError::Transfer {
                        zone: zone.to_string(),
                        pod: pod.to_string(),
                        reason: "NOTAUTH".into(),
                    }),
                })
            };
            self.record(pod, Op0::new(Kind::Transfer, zone, None), result.is_ok());
            result
        }
        .boxed()
    }

    /// The model keeps no history: it answers an IXFR with the whole
    /// zone, as a server whose journal does not reach back may.
    fn transfer_since<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        _serial: u32,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Ixfr, ServerError>> {
        async move { self.transfer(pod, zone, key).await.map(Ixfr::Full) }.boxed()
    }

    fn zone_status<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        view: Option<&'a ViewName>,
    ) -> BoxFuture<'a, Result<Option<ZoneStatus>, ServerError>> {
        async move {
            let result = self.on_pod(pod, |p| Ok(model::status(p, &key_of(zone, view))));
            let op = Op0::new(Kind::ZoneStatus, zone, view);
            self.record(pod, op, result.is_ok());
            result
        }
        .boxed()
    }

    fn add_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a SecondaryZone,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            let clause = zone.clause();
            let key = key_of(&zone.zone, zone.view.as_ref());
            let result = self.on_pod(pod, |p| match model::add_secondary(p, key, &clause) {
                Ok(()) | Err(RndcError::AlreadyExists) => Ok(()),
                Err(e) => Err(rndc_refused("add", &zone.zone, pod, e)),
            });
            let op = Op0::new(Kind::AddZone, &zone.zone, zone.view.as_ref()).text(clause);
            self.record(pod, op, result.is_ok());
            result
        }
        .boxed()
    }

    fn modify_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a SecondaryZone,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            let clause = zone.clause();
            let key = key_of(&zone.zone, zone.view.as_ref());
            let result = self.on_pod(pod, |p| {
                model::modify(p, &key, &clause)
                    .map_err(|e| rndc_refused("modify", &zone.zone, pod, e))
            });
            let op = Op0::new(Kind::ModZone, &zone.zone, zone.view.as_ref()).text(clause);
            self.record(pod, op, result.is_ok());
            result
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
            let path = PodLayout::in_cluster().data_path(file);
            let result = self.on_pod(pod, |p| {
                model::delete(p, &key_of(zone, view), &path);
                Ok(())
            });
            self.record(pod, Op0::new(Kind::DelZone, zone, view), result.is_ok());
            result
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
            let result = self.on_pod(pod, |_| Ok(()));
            self.record(pod, Op0::new(Kind::Notify, zone, view), result.is_ok());
            result
        }
        .boxed()
    }

    fn notify_secondary<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        _key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<(), ServerError>> {
        async move {
            let result = self.on_pod(pod, |_| Ok(()));
            self.record(
                pod,
                Op0::new(Kind::NotifySecondary, zone, None),
                result.is_ok(),
            );
            result
        }
        .boxed()
    }

    /// The model signs nothing: no DNSKEY.
    fn dnskeys<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        _key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<Dnskey>, ServerError>> {
        self.nothing_kept(pod, zone, Vec::new()).boxed()
    }

    fn key_files<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
    ) -> BoxFuture<'a, Result<Vec<KeyFile>, ServerError>> {
        self.nothing_kept(pod, zone, Vec::new()).boxed()
    }

    fn restore_key_files<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        _files: &'a [KeyFile],
    ) -> BoxFuture<'a, Result<usize, ServerError>> {
        self.nothing_kept(pod, zone, 0).boxed()
    }
}
