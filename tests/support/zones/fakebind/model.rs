//! The fake's model of one pod's named: zones (listed with the files the
//! operator's zone writes give them, added by rndc, or transferred for
//! secondary zones), their RRsets and serials, journals, and what zone
//! writes, rndc and UPDATE messages do to them, with BIND's quirks (see
//! the parent module).

use std::collections::{BTreeMap, BTreeSet};

use bind_operator::bind::commands::{WriteKind, ZoneApplied, ZoneWrite};
use bind_operator::bind::layout::PodLayout;
use bind_operator::bind::parse::{RndcError, ZoneStatus};

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

/// A zone on a pod: its name and view.
pub(super) type ZoneKey = (String, Option<String>);

#[derive(Debug, Default)]
pub(super) struct PodSim {
    pub(super) down: bool,
    pub(super) files: BTreeMap<String, String>,
    /// (zone, view) -> zone.
    pub(super) zones: BTreeMap<ZoneKey, ZoneSim>,
    /// The zones in the pod's zone lists, with their clause (the others
    /// in `zones` were added by rndc).
    pub(super) listed: BTreeMap<ZoneKey, String>,
}

pub(super) fn lower(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

pub(super) fn fqdn(name: &str) -> String {
    format!("{}.", lower(name))
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

/// A zone's file from its clause, as a path on the pod.
fn file_of(clause: &str) -> String {
    PodLayout::in_cluster().data_path(clause_field(clause, "file").unwrap_or_default())
}

/// Loads a primary zone from its file (and the journal beside it, which
/// BIND replays); `Err` when named would not load it.
fn load_primary(p: &PodSim, zone: &str, file: &str) -> Result<ZoneSim, String> {
    let text = p.files.get(file).ok_or("file not found")?;
    let mut z = load_file(text).ok_or("no SOA")?;
    if !glue_ok(&z, zone) {
        // "NS 'ns1.x' has no address records", whatever check-integrity says.
        return Err(format!(
            "zone {zone}/IN: NS has no address records (A or AAAA)"
        ));
    }
    z.loaded = true;
    if let Some(j) = p.files.get(&format!("{file}.jnl")).cloned() {
        for line in j.lines() {
            let _ = apply_line(&mut z, zone, line);
        }
    }
    Ok(z)
}

/// One write of a zone-list run (as `apply_zones.sh` does it): a zone
/// listed as asked is left alone; a listed zone gets the new clause; a
/// zone added by rndc, or whose files are on the volume, is listed keeping
/// them; a new zone is written from its text (from its bare skeleton when
/// named would not load the text). Removal unlists (or deletes what rndc
/// added) and removes the files.
pub(super) fn apply(p: &mut PodSim, write: &ZoneWrite) -> Result<ZoneApplied, RndcError> {
    let zone = lower(write.zone.as_str());
    let key: ZoneKey = (
        zone.clone(),
        write.view.as_ref().map(|v| v.as_str().to_string()),
    );
    match &write.kind {
        WriteKind::Put {
            clause, text, bare, ..
        } => {
            if let Some(old) = p.listed.get(&key) {
                if old == clause {
                    return Ok(ZoneApplied::Listed);
                }
                p.listed.insert(key.clone(), clause.clone());
                if let Some(z) = p.zones.get_mut(&key) {
                    z.clause = clause.clone();
                }
                return Ok(ZoneApplied::Changed);
            }
            let file = file_of(clause);
            let fresh = !p.zones.contains_key(&key)
                && ["", ".jnl"]
                    .iter()
                    .all(|s| !p.files.contains_key(&format!("{file}{s}")));
            let (mut z, applied) = if fresh {
                p.files.insert(file.clone(), text.clone());
                match (load_primary(p, &zone, &file), bare) {
                    (Ok(z), _) => (z, ZoneApplied::New),
                    (Err(why), Some(bare)) => {
                        p.files.insert(file.clone(), bare.clone());
                        match load_primary(p, &zone, &file) {
                            Ok(z) => (z, ZoneApplied::NewBare(why)),
                            Err(e) => {
                                p.files.remove(&file);
                                return Err(RndcError::Other(e));
                            }
                        }
                    }
                    (Err(why), None) => {
                        p.files.remove(&file);
                        return Err(RndcError::Other(why));
                    }
                }
            } else {
                let z = match p.zones.remove(&key) {
                    Some(z) => z,
                    // Files without a zone: named loads them.
                    None => load_primary(p, &zone, &file).unwrap_or_default(),
                };
                (z, ZoneApplied::Migrated)
            };
            z.clause = clause.clone();
            z.file = file;
            p.zones.insert(key.clone(), z);
            p.listed.insert(key, clause.clone());
            Ok(applied)
        }
        WriteKind::Remove => {
            p.listed.remove(&key);
            if let Some(z) = p.zones.remove(&key) {
                p.files.remove(&z.file);
                p.files.remove(&format!("{}.jnl", z.file));
            }
            Ok(ZoneApplied::Removed)
        }
    }
}

/// `rndc addzone` of a secondary zone: transferred at once from its
/// primaries.
pub(super) fn add_secondary(p: &mut PodSim, key: ZoneKey, clause: &str) -> Result<(), RndcError> {
    if p.zones.contains_key(&key) {
        return Err(RndcError::AlreadyExists);
    }
    let mut z = ZoneSim {
        secondary: true,
        serial: 1,
        soa_rest: ("ns.".into(), "h.".into(), "1 1 1 1".into()),
        clause: clause.to_string(),
        file: file_of(clause),
        loaded: true,
        ..Default::default()
    };
    z.rrsets.insert(
        (fqdn(&key.0), "SOA".into()),
        (300, BTreeSet::from([String::new()])),
    );
    p.zones.insert(key, z);
    Ok(())
}

/// `rndc modzone`.
pub(super) fn modify(p: &mut PodSim, key: &ZoneKey, clause: &str) -> Result<(), RndcError> {
    let z = p.zones.get_mut(key).ok_or(RndcError::NotFound)?;
    z.clause = clause.to_string();
    Ok(())
}

/// `rndc zonestatus`.
pub(super) fn status(p: &PodSim, key: &ZoneKey) -> Option<ZoneStatus> {
    let z = p.zones.get(key)?;
    Some(ZoneStatus {
        zone_type: if z.secondary { "secondary" } else { "primary" }.into(),
        serial: z.loaded.then_some(z.serial),
        files: vec![z.file.clone()],
        dynamic: true,
        loaded: z.loaded,
        ..Default::default()
    })
}

/// `rndc delzone` with the zone's files; whether the zone was there.
pub(super) fn delete(p: &mut PodSim, key: &ZoneKey, file: &str) -> bool {
    let gone = p.zones.remove(key).is_some();
    p.listed.remove(key);
    p.files.remove(file);
    p.files.remove(&format!("{file}.jnl"));
    gone
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

/// Applies one UPDATE message's lines, atomically.
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
