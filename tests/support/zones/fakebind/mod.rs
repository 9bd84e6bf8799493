//! A recording fake executor that plays BIND (the seed's `fakeExec`
//! pattern, grown up): it records every command (pod, argv, stdin) and
//! answers the commands the BIND layer builds — `dig` SOA, signed AXFR,
//! zone-file writes, `rndc addzone/modzone/delzone/zonestatus`, nsupdate
//! scripts — from a small in-memory model of each pod's named, with the
//! BIND behaviour BIND_FACTS.md lists: a zone whose file is missing loads
//! as "not loaded", a leftover journal replays into a re-created zone, an
//! RRset-wide delete at the apex is ignored and the last apex NS is never
//! deleted, >100 rdata fail the whole message, a CNAME beside other data is
//! silently dropped, updates are refused without the granted key.
//! Secondary pods serve the primary's catalog members at the primary's
//! serial. A pod can be taken down (every command fails like a stopped
//! named) or wiped (an empty volume).
#![allow(dead_code)]

mod model;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use bind_operator::bind::commands::Command;
use bind_operator::bind::layout::PodLayout;
use bind_operator::bind::wire::codec::wire_name;
use bind_operator::bind::wire::{Op, Rcode, UpdateMessage, WireError};
use bind_operator::bind::wire::{Record, rdata};
use bind_operator::bind::{Rdata, RecordType, TsigKey, ZoneName};
use bind_operator::controller::exec::{ExecError, ExecOutput, PodExecutor, PodRef};
use futures::FutureExt as _;
use futures::future::BoxFuture;

use model::{
    PodSim, RrKey, ZoneSim, axfr, exited, fqdn, lower, nsupdate, rndc, soa_line, split_view, z_name,
};

/// What a recorded command did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    DigSoa,
    Axfr,
    WriteFile,
    AddZone,
    ModZone,
    DelZone,
    ZoneStatus,
    Nsupdate,
    Other,
}

/// One exec call.
#[derive(Debug, Clone)]
pub struct Call {
    pub pod: String,
    pub kind: Kind,
    pub argv: Vec<String>,
    pub stdin: Option<String>,
    /// The zone the call is about (first zone for dig; `zone` line of the
    /// first message for nsupdate).
    pub zone: Option<String>,
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

    fn record(&self, pod: &PodRef, kind: Kind, cmd: &Command, zone: Option<String>, ok: bool) {
        self.with(|i| {
            i.calls.push(Call {
                pod: pod.name.clone(),
                kind,
                argv: cmd.argv.clone(),
                stdin: cmd.stdin.clone(),
                zone,
                ok,
            })
        });
    }

    fn run(
        &self,
        pod: &PodRef,
        cmd: &Command,
    ) -> (Kind, Option<String>, Result<ExecOutput, ExecError>) {
        let argv = &cmd.argv;
        let prog = argv[0].rsplit('/').next().unwrap_or_default();
        let down = self.with(|i| i.pods.get(&pod.name).is_some_and(|p| p.down));
        let ok = |stdout: String| {
            Ok(ExecOutput {
                stdout,
                stderr: String::new(),
            })
        };
        match prog {
            "dig" => {
                let zones: Vec<String> = argv
                    .windows(2)
                    .filter(|w| w[1] == "SOA")
                    .map(|w| lower(&w[0]))
                    .collect();
                let first = zones.first().cloned();
                if down {
                    let out = ";; connection timed out; no servers could be reached\n";
                    return (Kind::DigSoa, first, Err(exited(pod, cmd, 9, out, "")));
                }
                let text = self.with(|i| {
                    let mut out = String::new();
                    for z in &zones {
                        if let Some(sim) = Self::served_zone(i, &pod.name, z) {
                            out.push_str(&soa_line(z, sim));
                        }
                    }
                    out
                });
                (Kind::DigSoa, first, ok(text))
            }
            "nsupdate" => {
                let script = cmd.stdin.clone().unwrap_or_default();
                let zone = script
                    .lines()
                    .find_map(|l| l.strip_prefix("zone "))
                    .map(lower);
                if down {
                    let err = "; Communication with 127.0.0.1#53 failed: connection refused\n";
                    return (Kind::Nsupdate, zone, Err(exited(pod, cmd, 1, "", err)));
                }
                let r =
                    self.with(|i| nsupdate(i.pods.entry(pod.name.clone()).or_default(), &script));
                (
                    Kind::Nsupdate,
                    zone,
                    r.map_err(|e| exited(pod, cmd, 2, "", &e))
                        .and_then(|_| ok(String::new())),
                )
            }
            "rndc" => {
                let sub = argv[3].as_str();
                let zone = argv.get(4).map(|z| lower(z));
                let kind = match sub {
                    "addzone" => Kind::AddZone,
                    "modzone" => Kind::ModZone,
                    "zonestatus" => Kind::ZoneStatus,
                    _ => Kind::Other,
                };
                if down {
                    let err = "rndc: connect failed: 127.0.0.1#953: connection refused\n";
                    return (kind, zone, Err(exited(pod, cmd, 1, "", err)));
                }
                let r = self.with(|i| {
                    let p = i.pods.entry(pod.name.clone()).or_default();
                    rndc(p, sub, &argv[4..])
                });
                (
                    kind,
                    zone,
                    r.map_err(|e| exited(pod, cmd, 1, "", &e)).and_then(ok),
                )
            }
            "sh" => {
                let script = argv[2].as_str();
                let args = &argv[4..];
                if script.contains("\"$n\" -v") {
                    // nsupdate, then the SOA query when it succeeded.
                    let update = Command {
                        argv: vec![args[0].clone(), "-v".into()],
                        stdin: cmd.stdin.clone(),
                    };
                    let (_, zone, r) = self.run(pod, &update);
                    let r = match r {
                        Ok(_) => {
                            let dig = Command {
                                argv: args[1..].to_vec(),
                                stdin: None,
                            };
                            self.run(pod, &dig).2
                        }
                        Err(e) => Err(e),
                    };
                    (Kind::Nsupdate, zone, r)
                } else if script.contains("delzone") && script.contains("rm -f") {
                    // rndc, conf, zone file, key-file prefix, zone [IN view]
                    let zone = lower(&args[4]);
                    if down {
                        let err = "rndc: connect failed: 127.0.0.1#953: connection refused\n";
                        return (Kind::DelZone, Some(zone), Err(exited(pod, cmd, 1, "", err)));
                    }
                    let view = split_view(&args[5..]);
                    let file = args[2].clone();
                    let r = self.with(|i| {
                        let p = i.pods.entry(pod.name.clone()).or_default();
                        let gone = p.zones.remove(&(zone.clone(), view)).is_some();
                        p.files.remove(&file);
                        p.files.remove(&format!("{file}.jnl"));
                        gone
                    });
                    let res = if r {
                        ok(String::new())
                    } else {
                        Err(exited(
                            pod,
                            cmd,
                            1,
                            "",
                            &format!(
                                "rndc: 'delzone' failed: not found\nno matching zone '{zone}' in any view\n"
                            ),
                        ))
                    };
                    (Kind::DelZone, Some(zone), res)
                } else if script.contains("mktemp") {
                    let zone = argv.iter().rev().nth(1).map(|z| lower(z));
                    if down {
                        let out = ";; connection timed out; no servers could be reached\n";
                        return (Kind::Axfr, zone, Err(exited(pod, cmd, 9, out, "")));
                    }
                    let key = cmd
                        .stdin
                        .as_deref()
                        .and_then(|s| s.split('"').nth(1))
                        .unwrap_or_default()
                        .to_string();
                    let z = zone.clone().unwrap_or_default();
                    let text = self.with(|i| match Self::served_zone(i, &pod.name, &z) {
                        Some(sim) if sim.clause.contains(&format!("key \"{key}\"")) => {
                            axfr(&z, sim)
                        }
                        _ => "; Transfer failed.\n".to_string(),
                    });
                    (Kind::Axfr, zone, ok(text))
                } else if script.contains("rm -f \"$f.jnl\"") {
                    let path = args[0].clone();
                    if down {
                        return (
                            Kind::WriteFile,
                            None,
                            Err(ExecError::transport(pod, cmd, "container not running")),
                        );
                    }
                    let text = cmd.stdin.clone().unwrap_or_default();
                    self.with(|i| {
                        let p = i.pods.entry(pod.name.clone()).or_default();
                        p.files.remove(&format!("{path}.jnl"));
                        p.files.insert(path.clone(), text);
                    });
                    (Kind::WriteFile, Some(path), ok(String::new()))
                } else {
                    (Kind::Other, None, ok(String::new()))
                }
            }
            _ => (Kind::Other, None, ok(String::new())),
        }
    }
}

fn fake_addr() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 5353))
}

/// What connecting to a stopped named gives.
fn refused_connection() -> WireError {
    WireError::Connect {
        addr: fake_addr(),
        source: std::io::ErrorKind::ConnectionRefused.into(),
    }
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
/// what the fake applies and what tests read back from [`Call::stdin`].
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

impl PodExecutor for FakeBind {
    fn layout(&self, _pod: &PodRef) -> PodLayout {
        PodLayout::in_cluster()
    }

    /// Applies the typed messages to the pod's model, in order, stopping
    /// at the first the model refuses (as named answers each message).
    fn dns_update<'a>(
        &'a self,
        pod: &'a PodRef,
        messages: &'a [UpdateMessage],
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<usize, WireError>> {
        async move {
            let addr = fake_addr();
            let zone = messages.first().map(|m| m.zone.as_str().to_string());
            let text = transcript(messages, key);
            let cmd = Command {
                argv: vec!["dns-update".into()],
                stdin: Some(text.clone()),
            };
            let down = self.with(|i| i.pods.get(&pod.name).is_some_and(|p| p.down));
            let result = if down {
                Err(WireError::Connect {
                    addr,
                    source: std::io::ErrorKind::ConnectionRefused.into(),
                })
            } else {
                self.with(|i| {
                    let p = i.pods.entry(pod.name.clone()).or_default();
                    for m in messages {
                        let lines = op_lines(m);
                        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
                        model::send(p, &lower(m.zone.as_str()), key.name.as_str(), &lines)?;
                    }
                    Ok::<_, String>(messages.len())
                })
                .map_err(|e| WireError::Rejected {
                    addr,
                    rcode: rcode_of(&e),
                })
            };
            self.record(pod, Kind::Nsupdate, &cmd, zone, result.is_ok());
            result
        }
        .boxed()
    }

    /// Serials from the model, recorded as a [`Kind::DigSoa`] call (its
    /// argv names the zones asked).
    fn dns_serials<'a>(
        &'a self,
        pod: &'a PodRef,
        zones: &'a [ZoneName],
        key: Option<&'a TsigKey>,
    ) -> BoxFuture<'a, Result<BTreeMap<ZoneName, u32>, WireError>> {
        async move {
            let mut argv = vec!["dns-soa".to_string()];
            argv.extend(zones.iter().map(|z| z.fqdn()));
            let cmd = Command {
                argv,
                stdin: key.map(|k| format!("key {}:{} (signed)", k.algorithm, k.name)),
            };
            let first = zones.first().map(|z| z.as_str().to_string());
            let result = if self.is_down(pod) {
                Err(refused_connection())
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
            self.record(pod, Kind::DigSoa, &cmd, first, result.is_ok());
            result
        }
        .boxed()
    }

    /// The zone from the model as a transfer's records (rdata in wire
    /// form), recorded as a [`Kind::Axfr`] call; refused unless the zone's
    /// clause allows the key.
    fn dns_transfer<'a>(
        &'a self,
        pod: &'a PodRef,
        zone: &'a ZoneName,
        key: &'a TsigKey,
    ) -> BoxFuture<'a, Result<Vec<Record>, WireError>> {
        async move {
            let cmd = Command {
                argv: vec!["dns-axfr".into(), zone.fqdn()],
                stdin: Some(format!("key {}:{} (signed)", key.algorithm, key.name)),
            };
            let result = if self.is_down(pod) {
                Err(refused_connection())
            } else {
                self.with(|i| match Self::served_zone(i, &pod.name, zone.as_str()) {
                    Some(sim) if sim.clause.contains(&format!("key \"{}\"", key.name)) => {
                        Ok(transfer_records(zone, sim))
                    }
                    _ => Err(WireError::Rejected {
                        addr: fake_addr(),
                        rcode: Rcode::NotAuth,
                    }),
                })
            };
            self.record(
                pod,
                Kind::Axfr,
                &cmd,
                Some(zone.as_str().to_string()),
                result.is_ok(),
            );
            result
        }
        .boxed()
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        async move {
            let (kind, zone, result) = self.run(pod, cmd);
            self.record(pod, kind, cmd, zone, result.is_ok());
            result
        }
        .boxed()
    }
}
