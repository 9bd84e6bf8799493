//! The fake's model of one pod's named: zones (loaded from the files the
//! operator writes, or transferred for secondary zones), their RRsets and
//! serials, journals, and what `rndc` and nsupdate do to them, with BIND's
//! quirks (see the parent module).

use std::collections::{BTreeMap, BTreeSet};

use bind_operator::bind::commands::Command;
use bind_operator::bind::layout::PodLayout;
use bind_operator::controller::exec::{ExecError, PodRef};

pub(super) type RrKey = (String, String);

#[derive(Debug, Clone, Default)]
pub(super) struct ZoneSim {
    pub(super) clause: String,
    pub(super) file: String,
    pub(super) loaded: bool,
    pub(super) secondary: bool,
    pub(super) serial: u32,
    pub(super) soa_rest: (String, String, String),
    pub(super) rrsets: BTreeMap<RrKey, (u32, BTreeSet<String>)>,
}

#[derive(Debug, Default)]
pub(super) struct PodSim {
    pub(super) down: bool,
    pub(super) files: BTreeMap<String, String>,
    /// (zone, view) -> zone.
    pub(super) zones: BTreeMap<(String, Option<String>), ZoneSim>,
}

pub(super) fn lower(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

pub(super) fn fqdn(name: &str) -> String {
    format!("{}.", lower(name))
}

pub(super) fn split_view(rest: &[String]) -> Option<String> {
    match rest {
        [a, v, ..] if a == "IN" => Some(v.clone()),
        _ => None,
    }
}

pub(super) fn exited(
    pod: &PodRef,
    cmd: &Command,
    code: i32,
    stdout: &str,
    stderr: &str,
) -> ExecError {
    ExecError::exited(pod, cmd, code, stdout.to_string(), stderr)
}

pub(super) fn z_name(z: &ZoneSim) -> String {
    z.rrsets
        .keys()
        .find(|(_, t)| t == "SOA")
        .map(|(n, _)| lower(n))
        .unwrap_or_default()
}

pub(super) fn soa_line(zone: &str, z: &ZoneSim) -> String {
    let (m, r, timers) = &z.soa_rest;
    format!("{zone}.\t300\tIN\tSOA\t{m} {r} {} {timers}\n", z.serial)
}

pub(super) fn axfr(zone: &str, z: &ZoneSim) -> String {
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
pub(super) fn load_file(text: &str) -> Option<ZoneSim> {
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

/// Every in-zone apex NS target has an address record.
pub(super) fn glue_ok(z: &ZoneSim, zone: &str) -> bool {
    let apex = fqdn(zone);
    z.rrsets
        .get(&(apex.clone(), "NS".to_string()))
        .map(|(_, ns)| {
            ns.iter().all(|t| {
                !t.ends_with(&format!(".{apex}"))
                    || ["A", "AAAA"]
                        .iter()
                        .any(|ty| z.rrsets.contains_key(&(t.clone(), ty.to_string())))
            })
        })
        .unwrap_or(true)
}

fn clause_field<'a>(clause: &'a str, word: &str) -> Option<&'a str> {
    let at = clause.find(&format!("{word} \""))? + word.len() + 2;
    clause[at..].split('"').next()
}

pub(super) fn rndc(p: &mut PodSim, sub: &str, rest: &[String]) -> Result<String, String> {
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
                let loaded = p.files.get(&file).and_then(|t| load_file(t));
                if loaded.as_ref().is_some_and(|z| !glue_ok(z, &zone)) {
                    // "NS 'ns1.x' has no address records", whatever
                    // check-integrity says; addzone reverts.
                    return Err("rndc: 'addzone' failed: bad zone\n".into());
                }
                match loaded {
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
pub(super) fn apply_line(z: &mut ZoneSim, zone: &str, line: &str) -> Result<bool, String> {
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
        ["update", "add", name, _, "SOA", m, r, serial, rest @ ..] if fqdn(name) == apex => {
            // An SOA with a higher serial replaces names, timers and serial.
            let serial: u32 = serial.parse().map_err(|_| "FORMERR".to_string())?;
            if serial <= z.serial {
                return Ok(false);
            }
            z.soa_rest = (m.to_string(), r.to_string(), rest.join(" "));
            z.serial = serial - 1; // the message's bump lands on `serial`
            Ok(true)
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
pub(super) fn nsupdate(p: &mut PodSim, script: &str) -> Result<(), String> {
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

pub(super) fn send(p: &mut PodSim, zone: &str, key: &str, lines: &[&str]) -> Result<(), String> {
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
