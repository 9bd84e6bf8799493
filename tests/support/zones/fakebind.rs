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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use bind_operator::bind::commands::Command;
use bind_operator::bind::layout::PodLayout;
use bind_operator::controller::exec::{ExecError, ExecOutput, PodExecutor, PodRef};
use futures::FutureExt as _;
use futures::future::BoxFuture;

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

type RrKey = (String, String);

#[derive(Debug, Clone, Default)]
struct ZoneSim {
    clause: String,
    file: String,
    loaded: bool,
    secondary: bool,
    serial: u32,
    soa_rest: (String, String, String),
    rrsets: BTreeMap<RrKey, (u32, BTreeSet<String>)>,
}

#[derive(Debug, Default)]
struct PodSim {
    down: bool,
    files: BTreeMap<String, String>,
    /// (zone, view) -> zone.
    zones: BTreeMap<(String, Option<String>), ZoneSim>,
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

fn lower(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn fqdn(name: &str) -> String {
    format!("{}.", lower(name))
}

fn split_view(rest: &[String]) -> Option<String> {
    match rest {
        [a, v, ..] if a == "IN" => Some(v.clone()),
        _ => None,
    }
}

fn exited(pod: &PodRef, cmd: &Command, code: i32, stdout: &str, stderr: &str) -> ExecError {
    ExecError::exited(pod, cmd, code, stdout.to_string(), stderr)
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
                } else if script.contains("delzone") {
                    let zone = lower(&args[3]);
                    if down {
                        let err = "rndc: connect failed: 127.0.0.1#953: connection refused\n";
                        return (Kind::DelZone, Some(zone), Err(exited(pod, cmd, 1, "", err)));
                    }
                    let view = split_view(&args[4..]);
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

fn z_name(z: &ZoneSim) -> String {
    z.rrsets
        .keys()
        .find(|(_, t)| t == "SOA")
        .map(|(n, _)| lower(n))
        .unwrap_or_default()
}

fn soa_line(zone: &str, z: &ZoneSim) -> String {
    let (m, r, timers) = &z.soa_rest;
    format!("{zone}.\t300\tIN\tSOA\t{m} {r} {} {timers}\n", z.serial)
}

fn axfr(zone: &str, z: &ZoneSim) -> String {
    let mut out = soa_line(zone, z);
    for ((name, rtype), (ttl, values)) in &z.rrsets {
        if rtype == "SOA" {
            continue;
        }
        for v in values {
            out.push_str(&format!("{name}\t{ttl}\tIN\t{rtype}\t{v}\n"));
        }
    }
    out.push_str("xfer.\t0\tANY\tTSIG\thmac-sha256. 1 300 32 X 1 NOERROR 0\n");
    out
}

/// Loads a zone file as the skeleton renders it.
fn load_file(text: &str) -> Option<ZoneSim> {
    let mut z = ZoneSim::default();
    let mut default_ttl = 0;
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        match t.as_slice() {
            ["$TTL", v] => default_ttl = v.parse().ok()?,
            [name, "IN", "SOA", m, r, serial, rest @ ..] => {
                z.serial = serial.parse().ok()?;
                z.soa_rest = (m.to_string(), r.to_string(), rest.join(" "));
                z.rrsets.insert(
                    (fqdn(name), "SOA".into()),
                    (default_ttl, BTreeSet::from([String::new()])),
                );
            }
            [name, "IN", rtype, ..] => {
                let v = line
                    .splitn(4, char::is_whitespace)
                    .nth(3)?
                    .trim()
                    .to_string();
                let e = z
                    .rrsets
                    .entry((fqdn(name), rtype.to_string()))
                    .or_insert((default_ttl, BTreeSet::new()));
                e.1.insert(v);
            }
            [name, ttl, "IN", rtype, ..] => {
                let v = line
                    .splitn(5, char::is_whitespace)
                    .nth(4)?
                    .trim()
                    .to_string();
                let e = z
                    .rrsets
                    .entry((fqdn(name), rtype.to_string()))
                    .or_insert((ttl.parse().ok()?, BTreeSet::new()));
                e.1.insert(v);
            }
            _ => {}
        }
    }
    (z.serial != 0).then_some(z)
}

fn clause_field<'a>(clause: &'a str, word: &str) -> Option<&'a str> {
    let at = clause.find(&format!("{word} \""))? + word.len() + 2;
    clause[at..].split('"').next()
}

fn rndc(p: &mut PodSim, sub: &str, rest: &[String]) -> Result<String, String> {
    let zone = lower(rest.first().map(String::as_str).unwrap_or_default());
    let view = split_view(&rest[1..]);
    let key = (zone.clone(), view);
    let data = PodLayout::in_cluster();
    match sub {
        "addzone" => {
            if p.zones.contains_key(&key) {
                return Err("rndc: 'addzone' failed: already exists\n".into());
            }
            let clause = rest.last().cloned().unwrap_or_default();
            let file = data.data_path(clause_field(&clause, "file").unwrap_or_default());
            let mut z = if clause.contains("type secondary") {
                // Transferred at once from its primaries.
                let mut z = ZoneSim {
                    secondary: true,
                    serial: 1,
                    soa_rest: ("ns.".into(), "h.".into(), "1 1 1 1".into()),
                    ..Default::default()
                };
                z.rrsets.insert(
                    (fqdn(&zone), "SOA".into()),
                    (300, BTreeSet::from([String::new()])),
                );
                z.loaded = true;
                z
            } else {
                match p.files.get(&file).and_then(|t| load_file(t)) {
                    Some(mut z) => {
                        z.loaded = true;
                        if let Some(j) = p.files.get(&format!("{file}.jnl")).cloned() {
                            // BIND replays a journal it finds next to the file.
                            for line in j.lines() {
                                let _ = apply_line(&mut z, &zone, line);
                            }
                        }
                        z
                    }
                    None => ZoneSim::default(),
                }
            };
            z.clause = clause;
            z.file = file;
            p.zones.insert(key, z);
            Ok(String::new())
        }
        "modzone" => match p.zones.get_mut(&key) {
            Some(z) => {
                z.clause = rest.last().cloned().unwrap_or_default();
                Ok(String::new())
            }
            None => Err(format!(
                "rndc: 'modzone' failed: not found\nno matching zone '{zone}' in any view\n"
            )),
        },
        "zonestatus" => match p.zones.get(&key) {
            Some(z) if z.loaded => Ok(format!(
                "name: {zone}\ntype: {}\nfiles: {}\nserial: {}\nlast loaded: now\ndynamic: yes\n",
                if z.secondary { "secondary" } else { "primary" },
                z.file,
                z.serial
            )),
            Some(z) => Ok(format!(
                "name: {zone}\ntype: primary\nfiles: {}\nnot loaded\n",
                z.file
            )),
            None => Err(format!(
                "rndc: 'zonestatus' failed: not found\nno matching zone '{zone}' in any view\n"
            )),
        },
        _ => Ok(String::new()),
    }
}

/// Applies one `update add|delete ...` line; returns whether it changed
/// anything. Err: the message must fail with this rcode.
fn apply_line(z: &mut ZoneSim, zone: &str, line: &str) -> Result<bool, String> {
    let t: Vec<&str> = line.split_whitespace().collect();
    let apex = fqdn(zone);
    match t.as_slice() {
        ["update", "delete", name, rtype] => {
            let k = (fqdn(name), rtype.to_string());
            if k.0 == apex && (*rtype == "NS" || *rtype == "SOA") {
                // "attempt to delete all SOA or NS records ignored"
                return Ok(false);
            }
            Ok(z.rrsets.remove(&k).is_some())
        }
        ["update", "delete", name, rtype, ..] => {
            let v = line
                .splitn(5, char::is_whitespace)
                .nth(4)
                .unwrap_or_default()
                .trim();
            let k = (fqdn(name), rtype.to_string());
            let Some(set) = z.rrsets.get_mut(&k) else {
                return Ok(false);
            };
            if k.0 == apex && *rtype == "NS" && set.1.len() == 1 {
                return Ok(false);
            }
            let changed = set.1.remove(v);
            if set.1.is_empty() {
                z.rrsets.remove(&k);
            }
            Ok(changed)
        }
        ["update", "add", name, ttl, rtype, ..] => {
            let v = line
                .splitn(6, char::is_whitespace)
                .nth(5)
                .unwrap_or_default()
                .trim()
                .to_string();
            let owner = fqdn(name);
            let types: BTreeSet<&String> = z
                .rrsets
                .keys()
                .filter(|(n, _)| *n == owner)
                .map(|(_, t)| t)
                .collect();
            let cname = "CNAME".to_string();
            if (*rtype == "CNAME" && types.iter().any(|t| **t != cname))
                || (*rtype != "CNAME" && types.contains(&cname))
            {
                // BIND drops the conflicting record silently (exit 0).
                return Ok(false);
            }
            let e = z
                .rrsets
                .entry((owner, rtype.to_string()))
                .or_insert((0, BTreeSet::new()));
            e.0 = ttl.parse().map_err(|_| "FORMERR".to_string())?;
            Ok(e.1.insert(v))
        }
        _ => Ok(false),
    }
}

/// Runs an nsupdate script: each `send` is one atomic message; the first
/// failing message stops the run (earlier ones stay applied).
fn nsupdate(p: &mut PodSim, script: &str) -> Result<(), String> {
    let mut key_name = String::new();
    let mut zone = String::new();
    let mut lines: Vec<&str> = Vec::new();
    for line in script.lines() {
        if let Some(k) = line.strip_prefix("key ") {
            key_name = k
                .split_whitespace()
                .next()
                .and_then(|s| s.split_once(':'))
                .map(|(_, n)| n.to_string())
                .unwrap_or_default();
        } else if let Some(z) = line.strip_prefix("zone ") {
            zone = lower(z);
        } else if line.starts_with("update ") {
            lines.push(line);
        } else if line == "send" {
            send(p, &zone, &key_name, &lines)?;
            lines.clear();
        }
    }
    Ok(())
}

fn send(p: &mut PodSim, zone: &str, key: &str, lines: &[&str]) -> Result<(), String> {
    let (zkey, z) = p
        .zones
        .iter_mut()
        .find(|(_, z)| z.loaded && !z.secondary && z_name(z) == zone)
        .ok_or_else(|| "update failed: NOTAUTH\n".to_string())?;
    let zkey = zkey.clone();
    if !z.clause.contains(&format!("grant \"{key}\"")) {
        return Err("update failed: REFUSED\n".into());
    }
    let mut work = z.clone();
    let mut changed = false;
    for l in lines {
        changed |= apply_line(&mut work, zone, l).map_err(|e| format!("update failed: {e}\n"))?;
    }
    if work.rrsets.values().any(|(_, v)| v.len() > 100) {
        return Err("update failed: SERVFAIL\n".into());
    }
    // An in-zone apex NS target needs an address (glue) in the zone.
    if let Some((_, ns)) = work.rrsets.get(&(fqdn(zone), "NS".to_string())) {
        for target in ns {
            let in_zone = target.ends_with(&format!(".{}", fqdn(zone)));
            let has_addr = ["A", "AAAA"]
                .iter()
                .any(|t| work.rrsets.contains_key(&(target.clone(), t.to_string())));
            let was_there = z
                .rrsets
                .get(&(fqdn(zone), "NS".to_string()))
                .is_some_and(|(_, v)| v.contains(target));
            if in_zone && !has_addr && !was_there {
                return Err("update failed: REFUSED\n".into());
            }
        }
    }
    if changed {
        work.serial += 1;
        let jnl = format!("{}.jnl", work.file);
        let entry = p.files.entry(jnl).or_default();
        for l in lines {
            entry.push_str(l);
            entry.push('\n');
        }
        p.zones.insert(zkey, work);
    }
    Ok(())
}

impl PodExecutor for FakeBind {
    fn layout(&self, _pod: &PodRef) -> PodLayout {
        PodLayout::in_cluster()
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
