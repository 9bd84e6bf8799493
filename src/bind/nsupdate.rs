//! Builds one nsupdate script for a zone's batch of RRset changes. Pure, no
//! I/O: the script is handed to [`super::commands::nsupdate`].
//!
//! Rules it enforces (see BIND_FACTS.md and [`UpdateBatch`]): an RRset
//! replace is `update delete NAME TYPE` plus its adds inside one UPDATE
//! message (atomic); inside every message all deletes come before all adds
//! (BIND silently ignores a CNAME added beside other data, and other data
//! added beside a CNAME, so an A replacing a CNAME must follow the CNAME's
//! delete); RRset removals go into the first messages; the apex NS RRset
//! converges per rdata, adds first, then deletes, in one message, after
//! every other change (so glue lands first); messages are cut before an
//! estimated 64 KiB; no RRset may hold more than 100 rdata (BIND fails the
//! whole message); CNAME next to another type at one name is refused.
//! The TSIG key travels in the script (stdin), never in argv or a log line.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use super::error::ValidationError;
use super::name::{DomainName, ZoneName};
use super::rdata::{Rdata, RecordType};
use super::types::{Endpoint, TsigKey, Ttl};
use super::zone::catalog_member_owner;

/// BIND's default `max-records-per-type`.
pub const MAX_RDATA_PER_RRSET: usize = 100;
/// Estimated bytes a message may carry in its update section. DNS messages
/// are capped at 65,535 bytes; the rest is left for header, zone section and
/// TSIG, and the estimate already ignores name compression.
pub const MESSAGE_BUDGET: usize = 60_000;
/// Fixed bytes of an RR besides owner and rdata (type, class, ttl, rdlength).
const RR_FIXED: usize = 10;

/// One RRset the operator owns, as it should end up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RrsetChange {
    /// Make the RRset exactly `values` (delete RRset + adds, atomically).
    Replace {
        name: DomainName,
        rtype: RecordType,
        ttl: Ttl,
        values: Vec<Rdata>,
    },
    /// Remove the RRset.
    Delete { name: DomainName, rtype: RecordType },
}

impl RrsetChange {
    /// Validates a record set written by hand (`name` may be `@`, relative
    /// or absolute; `ttl` falls back to `default_ttl`): the rdata and owner
    /// checks a DNSRecord gets, without its field paths or the batch
    /// checks. Users' records go through `render::validate::dns_record`
    /// and `inline_record` instead; this is for tests and tools that build
    /// a change directly.
    pub fn parse_replace(
        zone: &ZoneName,
        name: &str,
        rtype: &str,
        ttl: Option<i64>,
        default_ttl: Ttl,
        values: &[String],
    ) -> Result<Self, ValidationError> {
        let rtype: RecordType = rtype.parse()?;
        let name = DomainName::resolve(name, zone)?;
        let ttl = match ttl {
            Some(t) => Ttl::new(t)?,
            None => default_ttl,
        };
        let values = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                Rdata::parse(rtype, v, zone)
                    .and_then(|r| r.check_owner(rtype, &name).map(|()| r))
                    .map_err(|e| e.at(&format!("values[{i}]")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RrsetChange::Replace {
            name,
            rtype,
            ttl,
            values,
        })
    }

    /// The owner name.
    pub fn name(&self) -> &DomainName {
        match self {
            RrsetChange::Replace { name, .. } | RrsetChange::Delete { name, .. } => name,
        }
    }

    /// The record type.
    pub fn rtype(&self) -> RecordType {
        match self {
            RrsetChange::Replace { rtype, .. } | RrsetChange::Delete { rtype, .. } => *rtype,
        }
    }
}

/// The apex NS RRset: what the zone should hold and what it holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApexNs {
    pub ttl: Ttl,
    pub wanted: Vec<DomainName>,
    pub current: Vec<DomainName>,
    /// The served TTL, when known; a difference re-adds every wanted rdata.
    pub current_ttl: Option<Ttl>,
}

/// All pending changes of one zone.
///
/// How any encoder of a batch (this module's nsupdate script, or UPDATE
/// messages on the wire) must order it, because BIND applies an UPDATE's
/// records in order and *silently ignores* (still answering NOERROR) a
/// CNAME added beside other data and other data added beside a CNAME:
///
/// 1. Changes that only remove an RRset ([`RrsetChange::Delete`]) go into
///    the first message(s), so a type change (CNAME -> A, A -> CNAME, TXT
///    -> CNAME) never lands its add before the old RRset is gone, even
///    when a batch is cut into several messages.
/// 2. Inside each message every delete (`Delete`, and the "delete RRset"
///    half of each [`RrsetChange::Replace`]) precedes every add.
/// 3. The apex NS ([`ApexNs`]) comes last in the last message, in its own
///    order: the new NS rdata added first, then the old ones deleted per
///    rdata (BIND never deletes a zone's last NS, and an NS needs its glue
///    added before it).
/// 4. A `Replace` is never split across messages (its delete and adds are
///    atomic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateBatch {
    pub zone: ZoneName,
    pub changes: Vec<RrsetChange>,
    pub apex_ns: Option<ApexNs>,
}

/// A batch that must not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("failed to build update: {name} is outside zone {zone}")]
    OutOfZone { name: String, zone: String },
    #[error(
        "failed to build update: the apex NS RRset of {zone} is managed through the zone's nameservers, not as a record set"
    )]
    ApexNsRecord { zone: String },
    #[error("failed to build update: a CNAME at {name} cannot sit at the zone apex")]
    CnameAtApex { name: String },
    #[error("failed to build update: {name} has a CNAME and other record types")]
    CnameConflict { name: String },
    #[error("failed to build update: {name} {rtype} is changed twice in one batch")]
    DuplicateRrset { name: String, rtype: RecordType },
    #[error(
        "failed to build update: {name} {rtype} has {count} values, more than {MAX_RDATA_PER_RRSET}"
    )]
    TooManyValues {
        name: String,
        rtype: RecordType,
        count: usize,
    },
    #[error("failed to build update: {name} {rtype} has no values; delete it instead")]
    NoValues { name: String, rtype: RecordType },
    #[error(
        "failed to build update: {name} {rtype} needs about {size} bytes, more than one message holds"
    )]
    ChangeTooLarge {
        name: String,
        rtype: RecordType,
        size: usize,
    },
    #[error("failed to build update: the apex NS RRset of {zone} cannot be empty")]
    NoNameservers { zone: String },
}

/// A finished script. `Debug` hides the text because it holds the key.
#[derive(Clone, PartialEq, Eq)]
pub struct NsupdateScript {
    text: String,
    /// UPDATE messages (`send`s) in the script.
    pub messages: usize,
    /// RRset changes in the script (apex NS counts as one).
    pub changes: usize,
}

impl NsupdateScript {
    /// The script for nsupdate's stdin. Holds key material: never log it.
    pub fn expose_stdin(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for NsupdateScript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NsupdateScript")
            .field("messages", &self.messages)
            .field("changes", &self.changes)
            .field("text", &"<redacted>")
            .finish()
    }
}

/// One atomic group of update lines with its estimated size: `deletes`
/// go before every add of their message, `adds` after every delete (see
/// [`UpdateBatch`]); `tail` lines keep their own order at the message's end.
struct Unit {
    deletes: Vec<String>,
    adds: Vec<String>,
    tail: Vec<String>,
    size: usize,
}

/// The checks one RRset change must pass on its own, whatever else its
/// batch holds: validation runs them on every record set, so a bad one is
/// refused alone before any batch is built; the batch builder runs them
/// again with the checks between changes.
pub fn check_change(zone: &ZoneName, c: &RrsetChange) -> Result<(), BatchError> {
    let apex = zone.as_domain();
    let (name, rtype) = (c.name(), c.rtype());
    if !name.is_within(apex) {
        return Err(BatchError::OutOfZone {
            name: name.fqdn(),
            zone: zone.to_string(),
        });
    }
    if name == apex && rtype == RecordType::Ns {
        return Err(BatchError::ApexNsRecord {
            zone: zone.to_string(),
        });
    }
    if let RrsetChange::Replace { values, .. } = c {
        if rtype == RecordType::Cname && name == apex {
            return Err(BatchError::CnameAtApex { name: name.fqdn() });
        }
        if values.is_empty() {
            return Err(BatchError::NoValues {
                name: name.fqdn(),
                rtype,
            });
        }
        let distinct: BTreeSet<&Rdata> = values.iter().collect();
        if distinct.len() > MAX_RDATA_PER_RRSET {
            return Err(BatchError::TooManyValues {
                name: name.fqdn(),
                rtype,
                count: distinct.len(),
            });
        }
    }
    let size = change_size(c);
    if size > MESSAGE_BUDGET {
        return Err(BatchError::ChangeTooLarge {
            name: name.fqdn(),
            rtype,
            size,
        });
    }
    Ok(())
}

pub(crate) fn check(batch: &UpdateBatch) -> Result<(), BatchError> {
    let mut seen = BTreeSet::new();
    let mut types_at: BTreeMap<&DomainName, Vec<RecordType>> = BTreeMap::new();
    for c in &batch.changes {
        check_change(&batch.zone, c)?;
        let (name, rtype) = (c.name(), c.rtype());
        if !seen.insert((name, rtype)) {
            return Err(BatchError::DuplicateRrset {
                name: name.fqdn(),
                rtype,
            });
        }
        if matches!(c, RrsetChange::Replace { .. }) {
            types_at.entry(name).or_default().push(rtype);
        }
    }
    for (name, types) in types_at {
        if types.contains(&RecordType::Cname) && types.len() > 1 {
            return Err(BatchError::CnameConflict { name: name.fqdn() });
        }
    }
    if let Some(ns) = &batch.apex_ns
        && ns.wanted.is_empty()
    {
        return Err(BatchError::NoNameservers {
            zone: batch.zone.to_string(),
        });
    }
    Ok(())
}

/// The estimated bytes a change takes in a message (no text is built:
/// validation asks this of every record set).
fn change_size(c: &RrsetChange) -> usize {
    let base = c.name().wire_len() + RR_FIXED;
    let adds = match c {
        RrsetChange::Replace { values, .. } => values
            .iter()
            .collect::<BTreeSet<&Rdata>>()
            .into_iter()
            .map(|v| base + v.wire_len())
            .sum(),
        RrsetChange::Delete { .. } => 0,
    };
    base + adds
}

fn change_unit(c: &RrsetChange) -> Unit {
    let name = c.name();
    let deletes = vec![format!("update delete {} {}", name.fqdn(), c.rtype())];
    let mut adds = Vec::new();
    if let RrsetChange::Replace {
        rtype, ttl, values, ..
    } = c
    {
        let distinct: BTreeSet<&Rdata> = values.iter().collect();
        for v in distinct {
            adds.push(format!(
                "update add {} {} {} {}",
                name.fqdn(),
                ttl,
                rtype,
                v
            ));
        }
    }
    Unit {
        deletes,
        adds,
        tail: Vec::new(),
        size: change_size(c),
    }
}

fn apex_unit(zone: &ZoneName, ns: &ApexNs) -> Option<Unit> {
    let apex = zone.fqdn();
    let base = zone.as_domain().wire_len() + RR_FIXED;
    let wanted: BTreeSet<&DomainName> = ns.wanted.iter().collect();
    let current: BTreeSet<&DomainName> = ns.current.iter().collect();
    let ttl_changed = ns.current_ttl.is_some_and(|t| t != ns.ttl);
    let adds: Vec<&DomainName> = if ttl_changed {
        wanted.iter().copied().collect()
    } else {
        wanted.difference(&current).copied().collect()
    };
    let deletes: Vec<&DomainName> = current.difference(&wanted).copied().collect();
    if adds.is_empty() && deletes.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    let mut size = 0;
    // Adds before deletes: BIND never deletes the last NS of a zone.
    for n in adds {
        lines.push(format!("update add {apex} {} NS {n}", ns.ttl));
        size += base + n.wire_len();
    }
    for n in deletes {
        lines.push(format!("update delete {apex} NS {n}"));
        size += base + n.wire_len();
    }
    Some(Unit {
        deletes: Vec::new(),
        adds: Vec::new(),
        tail: lines,
        size,
    })
}

/// The lines every script starts with: where to send, and the key to sign
/// with (the script goes to nsupdate's stdin, never to a log).
fn script_header(server: Endpoint, key: &TsigKey) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "server {} {}", server.ip, server.port);
    let _ = writeln!(
        text,
        "key {}:{} {}",
        key.algorithm,
        key.name,
        key.secret.expose_base64()
    );
    text
}

/// Many scripts as one, each `send` followed by `answer` so the output
/// tells every message's outcome ([`parse_answers`]). Each script keeps its
/// own `server` and `key` lines, so zones signed with different keys share
/// one nsupdate process.
pub fn join_answered<'a>(scripts: impl IntoIterator<Item = &'a NsupdateScript>) -> NsupdateScript {
    let mut text = String::new();
    let (mut messages, mut changes) = (0, 0);
    for s in scripts {
        for line in s.text.lines() {
            text.push_str(line);
            text.push('\n');
            if line == "send" {
                text.push_str("answer\n");
            }
        }
        messages += s.messages;
        changes += s.changes;
    }
    NsupdateScript {
        text,
        messages,
        changes,
    }
}

/// The answer to one UPDATE message, as `answer` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateAnswer {
    /// The response code (`NOERROR`, `REFUSED`, `NOTAUTH`, ...).
    pub status: String,
    /// The zone the message was for (lower case, with the final dot).
    pub zone: String,
}

/// The answers a [`join_answered`] run printed, in order. nsupdate prints
/// nothing for a message that got no response (the server unreachable), and
/// `answer` may then repeat the previous response: a block whose message id
/// repeats the one before it is dropped, so every answer stands for one
/// response.
pub fn parse_answers(stdout: &str) -> Vec<UpdateAnswer> {
    let mut out = Vec::new();
    let mut last_id: Option<String> = None;
    let mut current: Option<(String, String)> = None;
    let mut flush = |cur: &mut Option<(String, String)>, zone: String| {
        if let Some((id, status)) = cur.take() {
            if last_id.as_deref() != Some(id.as_str()) {
                out.push(UpdateAnswer { status, zone });
            }
            last_id = Some(id);
        }
    };
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix(";; ->>HEADER<<-") {
            let field = |name: &str| {
                rest.split(',')
                    .filter_map(|p| p.trim().strip_prefix(name))
                    .map(|v| v.trim().to_string())
                    .next()
                    .unwrap_or_default()
            };
            current = Some((field("id:"), field("status:")));
        } else if current.is_some()
            && let Some(q) = line.strip_prefix(';')
            && !q.starts_with(';')
            && let Some(zone) = q.split_whitespace().next()
        {
            flush(&mut current, zone.to_ascii_lowercase());
        }
    }
    out
}

/// Builds the script, or `None` when the batch changes nothing. The server
/// line targets `server` (the pod's own named, from its layout).
pub fn build_script(
    batch: &UpdateBatch,
    server: Endpoint,
    key: &TsigKey,
) -> Result<Option<NsupdateScript>, BatchError> {
    check(batch)?;
    // Removals first (stable: otherwise in batch order), see UpdateBatch.
    let (removals, replaces): (Vec<&RrsetChange>, Vec<&RrsetChange>) = batch
        .changes
        .iter()
        .partition(|c| matches!(c, RrsetChange::Delete { .. }));
    let mut units: Vec<Unit> = removals
        .into_iter()
        .chain(replaces)
        .map(change_unit)
        .collect();
    if let Some(u) = batch
        .apex_ns
        .as_ref()
        .and_then(|ns| apex_unit(&batch.zone, ns))
    {
        units.push(u);
    }
    if units.is_empty() {
        return Ok(None);
    }
    if let Some(last) = units.last()
        && last.size > MESSAGE_BUDGET
    {
        return Err(BatchError::ChangeTooLarge {
            name: batch.zone.fqdn(),
            rtype: RecordType::Ns,
            size: last.size,
        });
    }

    // Cut into messages first, then write each: all its deletes, all its
    // adds, then the apex NS lines in their own order.
    let mut messages: Vec<Vec<&Unit>> = Vec::new();
    let mut used = 0;
    for u in &units {
        match messages.last_mut() {
            Some(open) if used + u.size <= MESSAGE_BUDGET => open.push(u),
            _ => {
                messages.push(vec![u]);
                used = 0;
            }
        }
        used += u.size;
    }
    let mut text = script_header(server, key);
    for message in &messages {
        let _ = writeln!(text, "zone {}", batch.zone.fqdn());
        let lines = message
            .iter()
            .flat_map(|u| &u.deletes)
            .chain(message.iter().flat_map(|u| &u.adds))
            .chain(message.iter().flat_map(|u| &u.tail));
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        text.push_str("send\n");
    }
    let messages = messages.len();
    Ok(Some(NsupdateScript {
        text,
        messages,
        changes: units.len(),
    }))
}

/// A one-message script replacing the zone's SOA (names and timers) with
/// `serial`, which must be above the served one: BIND ignores an SOA
/// update whose serial does not move forward.
pub fn build_soa_script(
    zone: &ZoneName,
    soa: &super::zone::Soa,
    serial: u32,
    ttl: Ttl,
    server: Endpoint,
    key: &TsigKey,
) -> NsupdateScript {
    let mut text = script_header(server, key);
    let _ = writeln!(text, "zone {}", zone.fqdn());
    let _ = writeln!(
        text,
        "update add {} {ttl} SOA {} {} {serial} {} {} {} {}",
        zone.fqdn(),
        soa.mname,
        soa.rname,
        soa.refresh,
        soa.retry,
        soa.expire,
        soa.minimum
    );
    text.push_str("send\n");
    NsupdateScript {
        text,
        messages: 1,
        changes: 1,
    }
}

// Catalog membership is a change like any other; the member's owner name
// is zone knowledge (`zone::catalog_member_owner`), the change is ours.

/// The nsupdate change that makes `zone` a catalog member (PTR at its
/// stable member id). Send it signed with the transfer key.
pub fn catalog_add_member(catalog: &ZoneName, zone: &ZoneName) -> RrsetChange {
    RrsetChange::Replace {
        name: catalog_member_owner(catalog, zone),
        rtype: RecordType::Ptr,
        ttl: Ttl::new(0).expect("zero is a ttl"),
        values: vec![Rdata::Name(zone.as_domain().clone())],
    }
}

/// The nsupdate change that removes `zone` from the catalog.
pub fn catalog_remove_member(catalog: &ZoneName, zone: &ZoneName) -> RrsetChange {
    RrsetChange::Delete {
        name: catalog_member_owner(catalog, zone),
        rtype: RecordType::Ptr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::types::{KeyName, TsigAlgorithm, TsigSecret};

    fn key() -> TsigKey {
        TsigKey {
            name: KeyName::parse("upd").unwrap(),
            algorithm: TsigAlgorithm::HmacSha256,
            secret: TsigSecret::from_base64("c2VjcmV0").unwrap(),
        }
    }

    fn zone() -> ZoneName {
        ZoneName::parse("example.com").unwrap()
    }

    fn ep() -> Endpoint {
        Endpoint::new("127.0.0.1".parse().unwrap(), 53).unwrap()
    }

    fn replace(name: &str, t: &str, values: &[&str]) -> RrsetChange {
        let v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        RrsetChange::parse_replace(&zone(), name, t, Some(300), Ttl::new(3600).unwrap(), &v)
            .unwrap()
    }

    fn n(s: &str) -> DomainName {
        DomainName::parse_absolute(s).unwrap()
    }

    #[test]
    fn replace_and_apex_ns_order() {
        let batch = UpdateBatch {
            zone: zone(),
            changes: vec![
                replace("ns3", "A", &["192.0.2.3"]),
                replace("@", "TXT", &["hello \"world\""]),
                RrsetChange::Delete {
                    name: n("old.example.com"),
                    rtype: RecordType::Cname,
                },
            ],
            apex_ns: Some(ApexNs {
                ttl: Ttl::new(3600).unwrap(),
                wanted: vec![n("ns1.example.com"), n("ns3.example.com")],
                current: vec![n("ns1.example.com"), n("ns2.example.com")],
                current_ttl: Some(Ttl::new(3600).unwrap()),
            }),
        };
        let s = build_script(&batch, ep(), &key()).unwrap().unwrap();
        assert_eq!(
            s.expose_stdin(),
            "server 127.0.0.1 53\nkey hmac-sha256:upd c2VjcmV0\nzone example.com.\n\
             update delete old.example.com. CNAME\n\
             update delete ns3.example.com. A\nupdate delete example.com. TXT\n\
             update add ns3.example.com. 300 A 192.0.2.3\n\
             update add example.com. 300 TXT \"hello \\\"world\\\"\"\n\
             update add example.com. 3600 NS ns3.example.com.\nupdate delete example.com. NS ns2.example.com.\n\
             send\n"
        );
        assert_eq!((s.messages, s.changes), (1, 4));
        assert!(!format!("{s:?}").contains("c2VjcmV0"));
    }

    /// The update lines of each message of `s`.
    fn message_lines(s: &NsupdateScript) -> Vec<Vec<&str>> {
        s.expose_stdin()
            .split("send\n")
            .filter(|m| m.contains("update "))
            .map(|m| m.lines().filter(|l| l.starts_with("update ")).collect())
            .collect()
    }

    /// BIND ignores (NOERROR) a CNAME added beside other data and other
    /// data added beside a CNAME: every type change must delete first.
    #[test]
    fn type_changes_delete_before_they_add() {
        // www CNAME -> A and api A -> CNAME in one edit (the plan lists
        // the new RRsets first, the retired ones after).
        let batch = UpdateBatch {
            zone: zone(),
            changes: vec![
                replace("api", "CNAME", &["www"]),
                replace("www", "A", &["192.0.2.1"]),
                RrsetChange::Delete {
                    name: n("api.example.com"),
                    rtype: RecordType::A,
                },
                RrsetChange::Delete {
                    name: n("www.example.com"),
                    rtype: RecordType::Cname,
                },
            ],
            apex_ns: None,
        };
        let s = build_script(&batch, ep(), &key()).unwrap().unwrap();
        let msgs = message_lines(&s);
        assert_eq!(msgs.len(), 1);
        let first_add = msgs[0].iter().position(|l| l.starts_with("update add"));
        let last_delete = msgs[0].iter().rposition(|l| l.starts_with("update delete"));
        assert!(last_delete < first_add, "{:#?}", msgs[0]);
        assert_eq!(msgs[0].len(), 6);
    }

    #[test]
    fn removals_go_first_when_a_batch_needs_several_messages() {
        let mut changes: Vec<RrsetChange> = (0..3000)
            .map(|i| replace(&format!("host{i}"), "A", &["192.0.2.1", "192.0.2.2"]))
            .collect();
        // The CNAME's replacement comes late in the batch; its removal must
        // not land in a later message than the A that replaces it.
        changes.push(replace("late", "A", &["192.0.2.9"]));
        changes.push(RrsetChange::Delete {
            name: n("late.example.com"),
            rtype: RecordType::Cname,
        });
        let batch = UpdateBatch {
            zone: zone(),
            changes,
            apex_ns: None,
        };
        let s = build_script(&batch, ep(), &key()).unwrap().unwrap();
        let msgs = message_lines(&s);
        assert!(msgs.len() >= 2);
        assert_eq!(msgs[0][0], "update delete late.example.com. CNAME");
        for m in &msgs {
            let first_add = m.iter().position(|l| l.starts_with("update add"));
            let last_delete = m.iter().rposition(|l| l.starts_with("update delete"));
            assert!(last_delete < first_add);
        }
    }

    #[test]
    fn splits_before_64k_and_keeps_rrsets_whole() {
        let changes: Vec<RrsetChange> = (0..3000)
            .map(|i| replace(&format!("host{i}"), "A", &["192.0.2.1", "192.0.2.2"]))
            .collect();
        let batch = UpdateBatch {
            zone: zone(),
            changes,
            apex_ns: None,
        };
        let s = build_script(&batch, ep(), &key()).unwrap().unwrap();
        assert!(s.messages >= 5, "{}", s.messages);
        // Every message starts with a zone line and no RRset straddles a send.
        for msg in s
            .expose_stdin()
            .split("send\n")
            .filter(|m| !m.trim().is_empty())
            .skip(1)
        {
            assert!(
                msg.starts_with("zone example.com.\nupdate delete"),
                "{msg:.80}"
            );
        }
    }

    #[test]
    fn rejects_what_bind_would_mangle() {
        let b = |changes: Vec<RrsetChange>| {
            build_script(
                &UpdateBatch {
                    zone: zone(),
                    changes,
                    apex_ns: None,
                },
                ep(),
                &key(),
            )
        };
        assert!(matches!(
            b(vec![replace("@", "NS", &["ns1"])]),
            Err(BatchError::ApexNsRecord { .. })
        ));
        assert!(matches!(
            b(vec![
                replace("www", "CNAME", &["x"]),
                replace("www", "A", &["192.0.2.1"])
            ]),
            Err(BatchError::CnameConflict { .. })
        ));
        assert!(matches!(
            b(vec![replace("@", "CNAME", &["x"])]),
            Err(BatchError::CnameAtApex { .. })
        ));
        let many: Vec<String> = (0..101).map(|i| format!("10.0.0.{}", i % 256)).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(matches!(
            b(vec![replace("big", "A", &many)]),
            Err(BatchError::TooManyValues { count: 101, .. })
        ));
        assert!(matches!(
            b(vec![
                replace("a", "A", &["192.0.2.1"]),
                replace("a", "A", &["192.0.2.2"])
            ]),
            Err(BatchError::DuplicateRrset { .. })
        ));
        let huge: Vec<String> = (0..100)
            .map(|i| format!("{i}{}", "x".repeat(1000)))
            .collect();
        let huge: Vec<&str> = huge.iter().map(String::as_str).collect();
        assert!(matches!(
            b(vec![replace("t", "TXT", &huge)]),
            Err(BatchError::ChangeTooLarge { .. })
        ));
        assert!(b(vec![]).unwrap().is_none());
    }

    #[test]
    fn converged_apex_ns_sends_nothing() {
        let ns = ApexNs {
            ttl: Ttl::new(3600).unwrap(),
            wanted: vec![n("ns1.example.com")],
            current: vec![n("ns1.example.com")],
            current_ttl: Some(Ttl::new(3600).unwrap()),
        };
        let batch = UpdateBatch {
            zone: zone(),
            changes: vec![],
            apex_ns: Some(ns),
        };
        assert!(build_script(&batch, ep(), &key()).unwrap().is_none());
    }

    /// What nsupdate 9.18 printed for three answered messages, the second
    /// refused (captured from a real run).
    const ANSWERS: &str = "Answer:
;; ->>HEADER<<- opcode: UPDATE, status: NOERROR, id:  64649
;; flags: qr; ZONE: 1, PREREQ: 0, UPDATE: 0, ADDITIONAL: 1
;; ZONE SECTION:
;a.test.\t\t\t\tIN\tSOA

;; TSIG PSEUDOSECTION:
k.\t\t\t0\tANY\tTSIG\thmac-sha256. 1796279245 300 32 xj+y= 64649 NOERROR 0 

Answer:
;; ->>HEADER<<- opcode: UPDATE, status: NOTAUTH, id:  61080
;; flags: qr; ZONE: 1, PREREQ: 0, UPDATE: 0, ADDITIONAL: 1
;; ZONE SECTION:
;nope.test.\t\t\tIN\tSOA

Answer:
;; ->>HEADER<<- opcode: UPDATE, status: NOERROR, id:  43584
;; flags: qr; ZONE: 1, PREREQ: 0, UPDATE: 0, ADDITIONAL: 1
;; ZONE SECTION:
;B.test.\t\t\t\tIN\tSOA
";

    #[test]
    fn answers_say_which_message_landed() {
        let a = parse_answers(ANSWERS);
        let got: Vec<(&str, &str)> = a
            .iter()
            .map(|a| (a.zone.as_str(), a.status.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("a.test.", "NOERROR"),
                ("nope.test.", "NOTAUTH"),
                ("b.test.", "NOERROR")
            ]
        );
        // `answer` after a message that got no response repeats the last
        // one: counted once.
        let third = ANSWERS.split("Answer:\n").nth(3).unwrap();
        let repeated = format!("{ANSWERS}Answer:\n{third}");
        assert_eq!(parse_answers(&repeated).len(), 3);
        assert!(parse_answers("; Communication with 127.0.0.1#53 failed\n").is_empty());
    }

    #[test]
    fn joined_scripts_answer_every_send_and_keep_their_keys() {
        let b = |z: &str| {
            let zone = ZoneName::parse(z).unwrap();
            let ttl = Ttl::new(60).unwrap();
            let values = ["192.0.2.1".to_string()];
            let change = RrsetChange::parse_replace(&zone, "www", "A", None, ttl, &values);
            UpdateBatch {
                zone,
                changes: vec![change.unwrap()],
                apex_ns: None,
            }
        };
        let one = build_script(&b("example.com"), ep(), &key())
            .unwrap()
            .unwrap();
        let two = build_script(&b("example.org"), ep(), &key())
            .unwrap()
            .unwrap();
        let joined = join_answered([&one, &two]);
        assert_eq!(joined.messages, 2);
        assert_eq!(joined.changes, 2);
        let text = joined.expose_stdin();
        assert_eq!(text.matches("send\nanswer\n").count(), 2);
        assert_eq!(
            text.matches("\nkey ").count() + usize::from(text.starts_with("key ")),
            2
        );
        assert!(text.find("zone example.com.").unwrap() < text.find("zone example.org.").unwrap());
    }
}
