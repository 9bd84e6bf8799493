//! Every command the operator runs inside a BIND pod, as argv + stdin.
//! Pure: nothing here starts a process; an executor (pods/exec or the local
//! runner) does. Paths, ports and tool names all come from a [`PodLayout`].
//!
//! User values never reach a shell as script text: where a command needs a
//! shell (pipes, several steps), the script is fixed text here and values
//! are passed as positional arguments (`sh -c SCRIPT sh ARG...`). Key
//! material travels only on stdin, and [`Command`]'s `Debug` hides stdin.
//!
//! Each script is a file in `scripts/` (`include_str!`), with a header
//! saying what it does and what it must never do. They run under the
//! image's `/bin/sh` (BusyBox in ISC's Alpine image): POSIX sh, BusyBox
//! awk/sed, `shellcheck -s sh` clean (`.ci/run` checks both).

use std::collections::BTreeMap;
use std::fmt;

use super::conf::{ConfWriter, server_tokens};
use super::dnssec::{KeyFile, key_file_prefix, render_key_files};
use super::entrypoint::RNDC_KEY_NAME;
use super::layout::{PodLayout, data};
use super::name::ZoneName;
use super::nsupdate::NsupdateScript;
use super::render::{ExternalSecondary, render_keys_conf};
use super::types::{Endpoint, KeyName, TsigKey, ViewName};

/// A command to run in a pod: argv and optional stdin.
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    pub argv: Vec<String>,
    /// May hold key material; never log it.
    pub stdin: Option<String>,
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("argv", &self.argv)
            .field("stdin_bytes", &self.stdin.as_ref().map(String::len))
            .finish()
    }
}

impl Command {
    fn new<I: IntoIterator<Item = S>, S: Into<String>>(argv: I) -> Self {
        Command {
            argv: argv.into_iter().map(Into::into).collect(),
            stdin: None,
        }
    }

    fn with_stdin(mut self, stdin: String) -> Self {
        self.stdin = Some(stdin);
        self
    }

    /// A shell script (fixed text) with positional arguments.
    fn sh(script: &'static str, args: Vec<String>) -> Self {
        let mut argv = vec![
            "sh".to_string(),
            "-c".to_string(),
            script.to_string(),
            "sh".to_string(),
        ];
        argv.extend(args);
        Command { argv, stdin: None }
    }
}

/// Verb of a command this module did not build and cannot name.
pub const VERB_OTHER: &str = "other";

impl Command {
    /// What the command does, as a short static name for metrics and logs:
    /// the name of the function here that built it (`reconfig`, `addzone`,
    /// `nsupdate`, `write_notify_targets`, ...; [`reconfig_when_mounted`]
    /// is a `reconfig` too, the step's one exec). Bounded by construction: a
    /// command built elsewhere from a fixed script is named by the program
    /// its first argument runs, anything else is [`VERB_OTHER`]. Never
    /// derived from user values or stdin.
    pub fn verb(&self) -> &'static str {
        verb_of(&self.argv)
    }
}

fn verb_of(argv: &[String]) -> &'static str {
    let arg = |i: usize| argv.get(i).map(String::as_str).unwrap_or_default();
    let program = arg(0).rsplit('/').next().unwrap_or_default();
    let has = |word: &str| argv.iter().any(|a| a == word);
    match program {
        "sh" if arg(1) == "-c" => match arg(2) {
            DELZONE_SCRIPT => "delzone",
            APPLY_ZONES_SCRIPT => "apply_zones",
            WRITE_FILE_SCRIPT => "write_zone_file",
            READ_KEYS_SCRIPT => "read_key_files",
            RESTORE_KEYS_SCRIPT => "restore_key_files",
            WRITE_NOTIFY_SCRIPT => "write_notify_targets",
            RECONFIG_WHEN_MOUNTED_SCRIPT => "reconfig",
            ENSURE_NOTIFY_SCRIPT => "ensure_notify_targets",
            CHECKCONF_SCRIPT => "checkconf",
            DIG_KEYFILE_SCRIPT if has("DNSKEY") => "dig_dnskey",
            DIG_KEYFILE_SCRIPT => "dig_axfr",
            // `sh -c SCRIPT sh PROGRAM ...`: named after PROGRAM.
            _ => argv.get(4..).map_or(VERB_OTHER, verb_of),
        },
        "rndc" => match arg(3) {
            "reconfig" => "reconfig",
            "addzone" => "addzone",
            "modzone" => "modzone",
            "zonestatus" => "zonestatus",
            "delzone" => "delzone",
            _ => "rndc",
        },
        "nsupdate" => "nsupdate",
        // The operator's own DNS UPDATE exchange, told to exec observers.
        "dns-update" => "dns_update",
        "dns-soa" => "dns_soa",
        "dns-axfr" => "dns_axfr",
        "dns-ixfr" => "dns_ixfr",
        "dns-notify" => "dns_notify",
        "dig" if has("version.bind") => "probe",
        "dig" if has("AXFR") => "dig_axfr",
        "dig" if has("SOA") => "dig_soa",
        "dig" => "dig",
        "cat"
            if arg(1)
                .rsplit('/')
                .next()
                .is_some_and(|f| f.starts_with(data::NOTIFY_TARGETS_PREFIX)) =>
        {
            "read_notify_targets"
        }
        "cat" => "read_mounted_config",
        _ => VERB_OTHER,
    }
}

fn rndc(layout: &PodLayout, args: Vec<String>) -> Command {
    let mut argv = vec![layout.tools.rndc.clone(), "-c".into(), layout.rndc_conf()];
    argv.extend(args);
    Command::new(argv)
}

/// `zone [IN view]` as rndc wants it.
fn zone_args(zone: &ZoneName, view: Option<&ViewName>) -> Vec<String> {
    let mut a = vec![zone.as_str().to_string()];
    if let Some(v) = view {
        a.push("IN".into());
        a.push(v.as_str().into());
    }
    a
}

/// `rndc reconfig`: re-read named.conf (the symlink into the mount).
pub fn reconfig(layout: &PodLayout) -> Command {
    rndc(layout, vec!["reconfig".into()])
}

/// `rndc addzone ZONE [IN VIEW] CLAUSE` (clause from [`super::zone`]).
pub fn addzone(
    layout: &PodLayout,
    zone: &ZoneName,
    view: Option<&ViewName>,
    clause: &str,
) -> Command {
    let mut a = vec!["addzone".to_string()];
    a.extend(zone_args(zone, view));
    a.push(clause.to_string());
    rndc(layout, a)
}

/// `rndc modzone ZONE [IN VIEW] CLAUSE`.
pub fn modzone(
    layout: &PodLayout,
    zone: &ZoneName,
    view: Option<&ViewName>,
    clause: &str,
) -> Command {
    let mut a = vec!["modzone".to_string()];
    a.extend(zone_args(zone, view));
    a.push(clause.to_string());
    rndc(layout, a)
}

/// `rndc notify ZONE [IN VIEW]`: NOTIFY the zone's also-notify list now
/// (secondaries that missed a NOTIFY, e.g. while the list was being
/// restored after a restart, transfer without waiting for the refresh).
pub fn notify(layout: &PodLayout, zone: &ZoneName, view: Option<&ViewName>) -> Command {
    let mut a = vec!["notify".to_string()];
    a.extend(zone_args(zone, view));
    rndc(layout, a)
}

/// `rndc zonestatus ZONE [IN VIEW]`; parse with [`super::parse::parse_zonestatus`].
pub fn zonestatus(layout: &PodLayout, zone: &ZoneName, view: Option<&ViewName>) -> Command {
    let mut a = vec!["zonestatus".to_string()];
    a.extend(zone_args(zone, view));
    rndc(layout, a)
}

const DELZONE_SCRIPT: &str = include_str!("scripts/delzone.sh");

/// `rndc delzone ZONE [IN VIEW]`, then removes every file named keeps for
/// the zone: the zone file, its
/// journal (a stale one replays deleted records into a re-created zone),
/// the inline-signing `.jbk`, `.signed` and `.signed.jnl`, and the
/// `K<zone>.+alg+tag.{key,private,state}` files in the key directory (the
/// data directory), so a zone created again gets new keys. Not `-clean`:
/// named removes those files later, when the zone is finally released
/// (asynchronously; it also leaves the `.jbk` and the `K*` files), and on a
/// busy BIND 9.20 that came after the zone was created again and took the
/// new zone file with it (`addzone` then failed with "file not found").
/// Removing the files here, after rndc returned, is synchronous. Exit status is
/// rndc's; a zone already gone shows as
/// [`super::parse::RndcError::NotFound`].
pub fn delzone(
    layout: &PodLayout,
    zone: &ZoneName,
    view: Option<&ViewName>,
    file: &str,
) -> Command {
    let mut a = vec![
        layout.tools.rndc.clone(),
        layout.rndc_conf(),
        layout.data_path(file),
        layout.data_path(&key_file_prefix(zone)),
    ];
    a.extend(zone_args(zone, view));
    Command::sh(DELZONE_SCRIPT, a)
}

const WRITE_FILE_SCRIPT: &str = include_str!("scripts/write_file.sh");

/// Writes a zone file (text on stdin) to `file` relative to the data dir,
/// atomically, removing any stale journal and inline-signing copies first
/// (keys stay: a zone the primary lost keeps its DS valid). Run before
/// `addzone`.
pub fn write_zone_file(layout: &PodLayout, file: &str, text: &str) -> Command {
    Command::sh(WRITE_FILE_SCRIPT, vec![layout.data_path(file)]).with_stdin(text.to_string())
}

const READ_KEYS_SCRIPT: &str = include_str!("scripts/read_keys.sh");

/// Prints the zone's key files from the key directory (the data
/// directory: the config sets no `key-directory`); parse with
/// [`super::dnssec::parse_key_files`]. The output is key material.
pub fn read_key_files(layout: &PodLayout, zone: &ZoneName) -> Command {
    Command::sh(
        READ_KEYS_SCRIPT,
        vec![layout.data_path(&key_file_prefix(zone))],
    )
}

const RESTORE_KEYS_SCRIPT: &str = include_str!("scripts/restore_keys.sh");

/// Puts the zone's kept key files (on stdin, key material) back into the
/// key directory, each only where no file of its name is; run before the
/// zone is created, so named signs it with them. Prints `@@restored NAME`
/// per file written.
pub fn restore_key_files(layout: &PodLayout, zone: &ZoneName, files: &[KeyFile]) -> Command {
    Command::sh(
        RESTORE_KEYS_SCRIPT,
        vec![layout.data_dir.to_string_lossy().into_owned()],
    )
    .with_stdin(render_key_files(files, zone))
}

const APPLY_ZONES_SCRIPT: &str = include_str!("scripts/apply_zones.sh");

/// A change to one primary zone in an [`apply_zones`] run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneWrite {
    pub zone: ZoneName,
    pub view: Option<ViewName>,
    pub kind: WriteKind,
}

/// What an [`apply_zones`] run does to a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteKind {
    /// List the zone with this clause (from
    /// [`super::zone::PrimaryZone::clause`]): created from `text` (its
    /// skeleton, no key material) when none of its files is on the volume,
    /// moved out of named's new-zone database when it is there, its stanza
    /// replaced when the clause changed, left alone when listed as is.
    /// `reconfig`: reconfigure even when nothing changed (what makes a
    /// `dnssec-policy` take effect on BIND 9.20 when named has not applied
    /// it yet).
    Put {
        clause: String,
        text: String,
        /// The zone's bare skeleton (SOA, apex NS, glue) when `text`
        /// holds more: a new zone whose `text` named would not load (a
        /// record a file load refuses) is created from `bare` instead, so
        /// it is served and its records go by UPDATE, where a bad one
        /// fails alone ([`ZoneApplied::NewBare`]).
        bare: Option<String>,
        reconfig: bool,
    },
    /// Unlist the zone (or `rndc delzone` it when it is not listed: added
    /// by an older operator) and, once named let go of it, remove its file,
    /// journal, inline-signing copies and `K*` key files.
    Remove,
}

impl ZoneWrite {
    /// What the write does, as an error's verb.
    pub fn action(&self) -> &'static str {
        match self.kind {
            WriteKind::Put { .. } => "configure",
            WriteKind::Remove => "delete",
        }
    }

    /// The zone file, relative to the data directory.
    pub fn file(&self) -> String {
        super::zone::zone_file(&self.zone, self.view.as_ref())
    }

    /// The stanza file, relative to the data directory.
    pub fn stanza_file(&self) -> String {
        data::stanza_of(&self.zone, self.view.as_ref())
    }
}

/// The one-line `zone` statement a listed zone has in its zone list. The
/// clause is BIND syntax rendered by [`super::zone`]; its line breaks are
/// whitespace to named, and one line per zone is what maps a
/// named-checkconf line number back to its zone.
pub fn zone_stanza(zone: &ZoneName, clause: &str) -> String {
    let clause = clause.replace(['\n', '\r'], " ");
    format!("zone \"{}\" {clause}", zone.as_str())
}

/// Applies many primary-zone changes in one run, in the data directory:
///
/// 0. when named.conf does not include a zone list yet (an operator
///    upgrade: kubelet has not swapped the new config in), every change
///    fails and nothing is touched: a zone moved out of the new-zone
///    database into a list named does not read would stop being served;
/// 1. per zone (values on stdin behind `@@zone K`, one a line; its stanza,
///    text and bare skeleton behind `@@stanza K`, `@@text K`, `@@bare K`;
///    so no user value is script text and argv stays short at any zone
///    count; one awk pass splits stdin into files, since a shell `read`
///    costs a syscall per byte: 1,000 zones of 10 records took ~2 s of
///    system time that way): write a new zone's file (only when none of its
///    files — file, `.jnl`, `.jbk`, `.signed*` — is there: a zone that has
///    them keeps its journal), write, replace (old kept as `.prev`) or
///    remove its stanza file ([`data::stanza_of`]); a listed zone is known
///    by its stanza file, no rndc call; new zones' files and stanzas are
///    copied into place by one awk process; the new zones written
///    with a bare skeleton beside their text are then loaded by one
///    `named-checkconf -z` over a throwaway config listing just their
///    files (~0.1 s for 1,000 zones of 10 records); a zone whose file it
///    refuses (a record a file load rejects though an UPDATE may take it:
///    a wildcard NS, CNAME beside other data; measured) gets its bare
///    skeleton instead and reports `NEWBARE` with checkconf's lines about
///    its file;
/// 2. rebuild the zone lists ([`data::PRIMARY_ZONES`], one per view) as
///    the concatenation of the stanza files (tmp + mv), then
///    `named-checkconf`; when it refuses, every stanza change is undone,
///    the lists rebuilt as they were and the run exits 3 after printing
///    `@@checkconf`, its output and `@@list LIST` + that list's stanza
///    files in order (line N of a list is its Nth stanza): parse with
///    [`parse_apply_zones`] and run again without the zones it names;
/// 3. a zone that has files but no stanza (added by `rndc addzone` before
///    zones were listed) is `rndc delzone`d without `-clean` (its files
///    and journal stay; in both the new-zone database and the config,
///    reconfig would fail), or, when named does not know it, written
///    fresh;
/// 4. one `rndc reconfig` (when anything changed): on failure every change
///    is undone as in 2 and each changed zone reports reconfig's error;
///    named keeps serving what it served;
/// 5. after reconfig returned, the files of removed zones go (an unlisted
///    zone asked to go is `rndc delzone`d first, as before).
///
/// Prints one block per change, by position (1-based): `@@zone N RESULT`,
/// the error when it failed, `@@end`.
pub fn apply_zones(layout: &PodLayout, writes: &[ZoneWrite]) -> Command {
    use std::fmt::Write as _;
    // A zone's text (rendered, one record a line, no line starts with
    // `@@`) and its bare skeleton, each behind its section line.
    fn section(stdin: &mut String, what: &str, k: usize, text: &str) {
        let _ = writeln!(stdin, "@@{what} {k}");
        let text = text.strip_suffix('\n').unwrap_or(text);
        if !text.is_empty() {
            stdin.push_str(text);
            stdin.push('\n');
        }
    }
    let mut stdin = String::new();
    for (i, w) in writes.iter().enumerate() {
        let k = i + 1;
        let op = match &w.kind {
            WriteKind::Put { reconfig: true, .. } => "force",
            WriteKind::Put { .. } => "put",
            WriteKind::Remove => "del",
        };
        let view = w.view.as_ref().map(ViewName::as_str).unwrap_or_default();
        let _ = write!(
            stdin,
            "@@zone {k}\n{op}\n{}\n{view}\n{}\n{}\n{}\n",
            w.zone.as_str(),
            w.stanza_file(),
            w.file(),
            key_file_prefix(&w.zone),
        );
        match &w.kind {
            WriteKind::Put {
                clause, text, bare, ..
            } => {
                section(&mut stdin, "stanza", k, &zone_stanza(&w.zone, clause));
                section(&mut stdin, "text", k, text);
                if let Some(bare) = bare {
                    section(&mut stdin, "bare", k, bare);
                }
            }
            // The stanza line is always there (empty), so every zone's
            // values are seven lines.
            WriteKind::Remove => {
                let _ = writeln!(stdin, "@@stanza {k}\n");
            }
        }
    }
    Command::sh(
        APPLY_ZONES_SCRIPT,
        vec![
            layout.tools.rndc.clone(),
            layout.rndc_conf(),
            layout.tools.checkconf.clone(),
            layout.data_dir.to_string_lossy().into_owned(),
        ],
    )
    .with_stdin(stdin)
}

/// What an [`apply_zones`] run did to one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneApplied {
    /// File written and zone listed: it holds exactly the text given.
    New,
    /// File written from the bare skeleton and zone listed: named would
    /// not load the text given (`named-checkconf -z`'s lines about the
    /// zone's file, which name the line and why).
    NewBare(String),
    /// Listed already with this clause; nothing written.
    Listed,
    /// Listed already; its stanza was replaced (contents kept).
    Changed,
    /// Moved from named's new-zone database to the list, files and journal
    /// kept.
    Migrated,
    /// Unlisted (or deleted by rndc) and its files removed.
    Removed,
    /// Not applied; why (rndc's stderr, or the run's own message).
    Failed(String),
}

/// The outcome of an [`apply_zones`] run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApplyOutcome {
    /// Per change, by position (0-based). A change missing was not reached.
    pub results: BTreeMap<usize, ZoneApplied>,
    /// named-checkconf refused the new lists: nothing was applied.
    pub refused: Option<Refusal>,
}

/// named-checkconf's refusal of an [`apply_zones`] run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Refusal {
    /// Its output.
    pub output: String,
    /// Each zone list checked and its stanza files, in order.
    pub lists: Vec<(String, Vec<String>)>,
}

impl Refusal {
    /// The checkconf issues that name a line of a zone list, each with the
    /// stanza file on that line (relative to the data directory).
    pub fn stanzas(&self) -> Vec<(String, super::parse::CheckconfIssue)> {
        super::parse::parse_checkconf(&self.output)
            .into_iter()
            .filter_map(|issue| {
                let line = issue.line? as usize;
                let name = issue.file.rsplit('/').next().unwrap_or_default();
                let (_, stanzas) = self.lists.iter().find(|(l, _)| l == name)?;
                let stanza = stanzas.get(line.checked_sub(1)?)?;
                Some((stanza.clone(), issue))
            })
            .collect()
    }
}

/// Parses an [`apply_zones`] run's stdout.
pub fn parse_apply_zones(stdout: &str) -> ApplyOutcome {
    let mut out = ApplyOutcome::default();
    let mut lines = stdout.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "@@checkconf" {
            let mut refusal = Refusal::default();
            for l in lines.by_ref() {
                if let Some(list) = l.strip_prefix("@@list ") {
                    refusal.lists.push((list.to_string(), Vec::new()));
                } else if let Some((_, stanzas)) = refusal.lists.last_mut() {
                    stanzas.push(l.to_string());
                } else {
                    refusal.output.push_str(l);
                    refusal.output.push('\n');
                }
            }
            out.refused = Some(refusal);
            break;
        }
        let Some(rest) = line.strip_prefix("@@zone ") else {
            continue;
        };
        let mut parts = rest.split(' ');
        let (Some(Ok(n)), Some(result)) = (parts.next().map(str::parse::<usize>), parts.next())
        else {
            continue;
        };
        let mut err = String::new();
        for l in lines.by_ref() {
            if l == "@@end" {
                break;
            }
            err.push_str(l);
            err.push('\n');
        }
        let r = match result {
            "NEW" => ZoneApplied::New,
            "NEWBARE" => ZoneApplied::NewBare(err),
            "LISTED" => ZoneApplied::Listed,
            "CHANGED" => ZoneApplied::Changed,
            "MIGRATED" => ZoneApplied::Migrated,
            "REMOVED" => ZoneApplied::Removed,
            _ => ZoneApplied::Failed(err),
        };
        if let Some(i) = n.checked_sub(1) {
            out.results.insert(i, r);
        }
    }
    out
}

/// The primary's options-level NOTIFY list: the secondary pods signed
/// with the transfer key (or a view's key), then the cluster's external
/// secondaries, each signed with its own key.
pub fn render_notify_targets(
    targets: &[Endpoint],
    transfer_key: &KeyName,
    external: &[ExternalSecondary],
) -> String {
    let mut sorted = targets.to_vec();
    sorted.sort();
    sorted.dedup();
    let mut w = ConfWriter::new();
    let mut items: Vec<_> = sorted
        .iter()
        .map(|e| server_tokens(e, Some(transfer_key)))
        .collect();
    items.extend(
        external
            .iter()
            .filter(|e| !sorted.contains(&e.endpoint))
            .map(|e| server_tokens(&e.endpoint, Some(&e.key))),
    );
    w.inline_list(&[super::conf::Tok::Kw("also-notify")], &items);
    w.finish()
}

/// `notify-servers.conf`: the top-level server lists a zone with its own
/// external secondaries names in its `also-notify`
/// ([`super::render::secondaries_list_name`]), one per `(view, key)`, or
/// one signed with `transfer_key` without views. An empty list is valid.
pub fn render_notify_servers(
    targets: &[Endpoint],
    transfer_key: &KeyName,
    views: &[(ViewName, KeyName)],
) -> String {
    let mut sorted = targets.to_vec();
    sorted.sort();
    sorted.dedup();
    let lists: Vec<(String, &KeyName)> = if views.is_empty() {
        vec![(super::render::secondaries_list_name(None), transfer_key)]
    } else {
        views
            .iter()
            .map(|(v, k)| (super::render::secondaries_list_name(Some(v)), k))
            .collect()
    };
    let mut w = ConfWriter::new();
    for (name, key) in &lists {
        let items: Vec<_> = sorted.iter().map(|e| server_tokens(e, Some(key))).collect();
        w.inline_list(
            &[
                super::conf::Tok::Kw("primaries"),
                super::conf::Tok::Str(name),
            ],
            &items,
        );
    }
    w.finish()
}

const WRITE_NOTIFY_SCRIPT: &str = include_str!("scripts/write_notify.sh");

/// What [`write_notify_targets`] prints when every list already was the
/// wanted one (nothing written, no reconfig).
pub const NOTIFY_UNCHANGED: &str = "@@notify-unchanged";
/// What it prints after rewriting a list and reconfiguring.
pub const NOTIFY_CHANGED: &str = "@@notify-changed";

/// Whether a [`write_notify_targets`] / [`write_view_notify_targets`] run
/// that exited 0 rewrote a list (`Some(true)`), found every list current
/// (`Some(false)`), or printed neither (`None`).
pub fn parse_write_notify(stdout: &str) -> Option<bool> {
    match stdout.lines().last() {
        Some(NOTIFY_CHANGED) => Some(true),
        Some(NOTIFY_UNCHANGED) => Some(false),
        _ => None,
    }
}

/// Makes `notify-targets.conf` on the primary the secondaries' pod
/// endpoints, in one exec: compares the file with the wanted list and only
/// when it differs (or is missing) rewrites it and reconfigs so every zone
/// NOTIFYs them; prints [`NOTIFY_CHANGED`] or [`NOTIFY_UNCHANGED`] (parse
/// with [`parse_write_notify`]). A converged cluster runs it only when the
/// operator does not remember the list (after a start or a pod restart).
pub fn write_notify_targets(
    layout: &PodLayout,
    targets: &[Endpoint],
    transfer_key: &KeyName,
    external: &[ExternalSecondary],
) -> Command {
    let mut a = vec![layout.tools.rndc.clone(), layout.rndc_conf()];
    for (file, text) in notify_list_files(layout, targets, transfer_key, &[], external) {
        a.push(file);
        a.push(text);
    }
    Command::sh(WRITE_NOTIFY_SCRIPT, a)
}

/// The primary's NOTIFY list files as (path, text): `notify-servers.conf`
/// and, without views, `notify-targets.conf` signed with `transfer_key`;
/// with views, each view's `notify-targets.<V>.conf` signed with its key.
/// Addresses and key names only, never key material.
pub fn notify_list_files(
    layout: &PodLayout,
    targets: &[Endpoint],
    transfer_key: &KeyName,
    views: &[(ViewName, KeyName)],
    external: &[ExternalSecondary],
) -> Vec<(String, String)> {
    if views.is_empty() {
        return vec![
            (
                layout.data_path(data::NOTIFY_SERVERS),
                render_notify_servers(targets, transfer_key, &[]),
            ),
            (
                layout.data_path(data::NOTIFY_TARGETS),
                render_notify_targets(targets, transfer_key, external),
            ),
        ];
    }
    // Any key: with views only the views' lists are rendered.
    let mut out = vec![(
        layout.data_path(data::NOTIFY_SERVERS),
        render_notify_servers(targets, &views[0].1, views),
    )];
    for (view, key) in views {
        out.push((
            layout.data_path(&data::notify_targets_of(view)),
            render_notify_targets(targets, key, external),
        ));
    }
    out
}

/// The primary's NOTIFY lists with views: each view `V` includes
/// `notify-targets.<V>.conf`, NOTIFYs signed with V's key (so they land in
/// V on the secondaries). `views`: each view with its key name.
pub fn render_view_notify_targets(
    targets: &[Endpoint],
    views: &[(ViewName, KeyName)],
    external: &[ExternalSecondary],
) -> String {
    views
        .iter()
        .map(|(_, key)| render_notify_targets(targets, key, external))
        .collect()
}

/// [`write_notify_targets`] for every view's NOTIFY list at once: each
/// list compared and rewritten only when it differs, then one reconfig if
/// any was. The lists hold addresses and key names only (no material), so
/// they travel as arguments.
pub fn write_view_notify_targets(
    layout: &PodLayout,
    targets: &[Endpoint],
    views: &[(ViewName, KeyName)],
    external: &[ExternalSecondary],
) -> Command {
    let mut a = vec![layout.tools.rndc.clone(), layout.rndc_conf()];
    if let Some((_, k)) = views.first() {
        for (file, text) in notify_list_files(layout, targets, k, views, external) {
            a.push(file);
            a.push(text);
        }
    }
    Command::sh(WRITE_NOTIFY_SCRIPT, a)
}

/// `cat` of every view's NOTIFY list, in view order: the same bytes as
/// [`render_view_notify_targets`] when current.
pub fn read_view_notify_targets(layout: &PodLayout, views: &[(ViewName, KeyName)]) -> Command {
    let mut a = vec!["cat".to_string()];
    a.extend(
        views
            .iter()
            .map(|(v, _)| layout.data_path(&data::notify_targets_of(v))),
    );
    Command::new(a)
}

/// `ensure_includes`, the function both scripts below start with.
macro_rules! ensure_includes_fn {
    () => {
        include_str!("scripts/ensure_includes.sh")
    };
}

const ENSURE_NOTIFY_SCRIPT: &str = concat!(
    ensure_includes_fn!(),
    include_str!("scripts/ensure_notify.sh")
);

/// Creates (empty) every NOTIFY list and zone list file named.conf
/// includes that is missing, as the entrypoint does at start: a view added
/// at run time, or a primary started by an operator that did not list
/// zones yet, names a file `rndc reconfig` would otherwise fail on.
pub fn ensure_notify_files(layout: &PodLayout) -> Command {
    Command::sh(
        ENSURE_NOTIFY_SCRIPT,
        vec![layout.data_dir.to_string_lossy().into_owned()],
    )
}

/// Whether a named.conf includes runtime files that may be missing on a
/// running pod (per-view NOTIFY lists, zone lists: a primary), i.e. needs
/// them created before a reconfig ([`reconfig_when_mounted`]'s
/// `ensure_includes`).
pub fn has_runtime_includes(named_conf: &str) -> bool {
    let plain = format!("include \"{}\";", data::NOTIFY_TARGETS);
    let prefix = format!("include \"{}", data::NOTIFY_TARGETS_PREFIX);
    let zones = format!("include \"{}", data::PRIMARY_ZONES_PREFIX);
    named_conf
        .lines()
        .map(str::trim)
        .any(|l| (l.starts_with(&prefix) && l != plain) || l.starts_with(&zones))
}

/// `cat notify-targets.conf`.
pub fn read_notify_targets(layout: &PodLayout) -> Command {
    Command::new(["cat".to_string(), layout.data_path(data::NOTIFY_TARGETS)])
}

/// `cat named.conf keys.conf` through the run-path symlinks: its sha256 is
/// the pod's mounted config hash (named.conf for its role + keys.conf).
pub fn read_mounted_config(layout: &PodLayout) -> Command {
    Command::new(["cat".to_string(), layout.run_conf(), layout.keys_conf()])
}

const RECONFIG_WHEN_MOUNTED_SCRIPT: &str = concat!(
    ensure_includes_fn!(),
    include_str!("scripts/reconfig_when_mounted.sh")
);

/// What [`reconfig_when_mounted`] found and did, from its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenMounted {
    /// The mounted files are not the wanted ones yet: nothing was run.
    NotMounted,
    /// The mount matched and `rndc reconfig` succeeded.
    Reconfigured,
    /// The mount matched and `rndc reconfig` failed (the command exited
    /// with rndc's status and stderr).
    ReconfigFailed,
}

impl WhenMounted {
    /// The line the script prints last for this outcome.
    pub const fn marker(self) -> &'static str {
        match self {
            WhenMounted::NotMounted => "@@not-mounted",
            WhenMounted::Reconfigured => "@@reconfigured",
            WhenMounted::ReconfigFailed => "@@reconfig-failed",
        }
    }
}

/// The outcome [`reconfig_when_mounted`] printed (on stdout, whether it
/// exited 0 or not); `None` when it stopped before deciding (the mount
/// could not be read, an include file not created).
pub fn parse_reconfig_when_mounted(stdout: &str) -> Option<WhenMounted> {
    let last = stdout.lines().last()?;
    [
        WhenMounted::NotMounted,
        WhenMounted::Reconfigured,
        WhenMounted::ReconfigFailed,
    ]
    .into_iter()
    .find(|m| m.marker() == last)
}

/// The reconfig step of one pod in one exec (DESIGN "Behaviour 2"):
/// compares the mounted files ([`read_mounted_config`]'s bytes) with the
/// wanted `named_conf` + `keys_conf` (on stdin: keys.conf is key material)
/// and, only when they are the same, creates the include files
/// `ensure_includes` asks for ([`ensure_notify_files`]), writes `lists`
/// (the primary's NOTIFY list files as [`notify_list_files`] gives them,
/// each only when it differs: they name keys, and a key the new keys.conf
/// no longer defines would fail the reconfig) and runs [`reconfig`].
/// Prints one [`WhenMounted`] marker (parse with
/// [`parse_reconfig_when_mounted`]); prints neither file. Byte equality is
/// what [`config_hash`] equality means, without a hashing tool in the
/// image. Named `reconfig` in metrics and logs: it is the reconfig attempt.
pub fn reconfig_when_mounted(
    layout: &PodLayout,
    named_conf: &str,
    keys_conf: &str,
    ensure_includes: bool,
    lists: &[(String, String)],
) -> Command {
    let mut a = vec![
        layout.data_dir.to_string_lossy().into_owned(),
        layout.run_conf(),
        layout.keys_conf(),
        if ensure_includes { "1" } else { "" }.to_string(),
        lists.len().to_string(),
    ];
    for (file, text) in lists {
        a.push(file.clone());
        a.push(text.clone());
    }
    a.extend(reconfig(layout).argv);
    Command::sh(RECONFIG_WHEN_MOUNTED_SCRIPT, a).with_stdin(format!("{named_conf}{keys_conf}"))
}

/// sha256 hex of a pod's wanted config: its role's named.conf + keys.conf,
/// the same bytes [`read_mounted_config`] prints.
pub fn config_hash(named_conf: &str, keys_conf: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(named_conf.as_bytes());
    h.update(keys_conf.as_bytes());
    hex::encode(h.finalize())
}

const CHECKCONF_SCRIPT: &str = include_str!("scripts/checkconf.sh");

/// `named-checkconf [-z] named.conf`, run in the data directory so relative
/// includes resolve as they do for named. Errors are on stdout; parse with
/// [`super::parse::parse_checkconf`].
pub fn checkconf(layout: &PodLayout, load_zones: bool) -> Command {
    let mut a = vec![
        layout.data_dir.to_string_lossy().into_owned(),
        layout.tools.checkconf.clone(),
    ];
    if load_zones {
        a.push("-z".into());
    }
    a.push(data::RUN_CONF.into());
    Command::sh(CHECKCONF_SCRIPT, a)
}

/// nsupdate over TCP (`-v`: slow stdin would time out over UDP) with the
/// script (server, key and messages) on stdin.
pub fn nsupdate(layout: &PodLayout, script: &NsupdateScript) -> Command {
    Command::new([layout.tools.nsupdate.clone(), "-v".to_string()])
        .with_stdin(script.expose_stdin().to_string())
}

/// The endpoint in-pod tools use to reach this pod's named.
pub fn local_server(layout: &PodLayout) -> Endpoint {
    Endpoint {
        ip: layout.server_addr,
        port: layout.dns_port,
    }
}

fn dig_base(layout: &PodLayout) -> Vec<String> {
    vec![
        layout.tools.dig.clone(),
        "-p".into(),
        layout.dns_port.to_string(),
        format!("@{}", layout.server_addr),
        "+time=2".into(),
        "+tries=1".into(),
    ]
}

/// The pods' liveness/readiness probe (the StatefulSet's exec probe runs
/// this argv): asks this pod's named for `version.bind` (CHAOS TXT), which
/// it answers itself (`+norecurse`). dig exits 0 on any answer and 9 when
/// no server replied, so the probe checks DNS, not just the process (a
/// named that lost its listener keeps running).
pub fn probe(layout: &PodLayout) -> Command {
    let mut a = dig_base(layout);
    a.extend([
        "+norecurse".into(),
        "version.bind".into(),
        "CH".into(),
        "TXT".into(),
    ]);
    Command::new(a)
}

/// One `dig` asking SOA of many zones; parse with
/// [`super::parse::parse_dig_soa`]. A zone missing from the answer is not
/// served by this pod.
pub fn dig_soa(layout: &PodLayout, zones: &[ZoneName]) -> Command {
    let mut a = dig_base(layout);
    a.extend(["+noall".into(), "+answer".into(), "+norecurse".into()]);
    for z in zones {
        a.push(z.fqdn());
        a.push("SOA".into());
    }
    Command::new(a)
}

const DIG_KEYFILE_SCRIPT: &str = include_str!("scripts/dig_key_on_stdin.sh");

/// `dig AXFR` signed with `key` (the key clause goes on stdin and reaches
/// dig through a FIFO, so the secret is in no argv and no stored file);
/// parse with [`super::parse::parse_axfr`].
pub fn dig_axfr(layout: &PodLayout, zone: &ZoneName, key: &TsigKey) -> Command {
    let mut a = dig_base(layout);
    a.extend([
        "+noall".into(),
        "+answer".into(),
        "+onesoa".into(),
        zone.fqdn(),
        "AXFR".into(),
    ]);
    Command::sh(DIG_KEYFILE_SCRIPT, a).with_stdin(render_keys_conf(std::slice::from_ref(key)))
}

/// `dig DNSKEY` of the zone signed with `key` (so it lands in the zone's
/// view, like [`dig_axfr`]); parse with [`super::dnssec::parse_dnskeys`].
pub fn dig_dnskey(layout: &PodLayout, zone: &ZoneName, key: &TsigKey) -> Command {
    let mut a = dig_base(layout);
    a.extend([
        "+noall".into(),
        "+answer".into(),
        "+norecurse".into(),
        zone.fqdn(),
        "DNSKEY".into(),
    ]);
    Command::sh(DIG_KEYFILE_SCRIPT, a).with_stdin(render_keys_conf(std::slice::from_ref(key)))
}

/// rndc's key name, for callers checking names do not clash.
pub fn rndc_key_name() -> &'static str {
    RNDC_KEY_NAME
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::types::{TsigAlgorithm, TsigSecret};

    #[test]
    fn commands_use_the_layout_and_hide_secrets() {
        let l = PodLayout::in_cluster();
        let z = ZoneName::parse("example.com").unwrap();
        let v = ViewName::parse("ext").unwrap();
        assert_eq!(
            reconfig(&l).argv,
            ["rndc", "-c", "/var/lib/bind/rndc.conf", "reconfig"]
        );
        assert_eq!(
            zonestatus(&l, &z, Some(&v)).argv,
            [
                "rndc",
                "-c",
                "/var/lib/bind/rndc.conf",
                "zonestatus",
                "example.com",
                "IN",
                "ext"
            ]
        );
        assert_eq!(
            read_mounted_config(&l).argv,
            [
                "cat",
                "/var/lib/bind/named.conf",
                "/var/lib/bind/config/keys.conf"
            ]
        );
        let d = dig_soa(&l, &[z.clone(), ZoneName::parse("b.org").unwrap()]);
        assert_eq!(
            &d.argv[d.argv.len() - 4..],
            ["example.com.", "SOA", "b.org.", "SOA"]
        );
        let key = TsigKey {
            name: KeyName::parse("xfer").unwrap(),
            algorithm: TsigAlgorithm::HmacSha256,
            secret: TsigSecret::from_base64("c2VjcmV0").unwrap(),
        };
        let ax = dig_axfr(&l, &z, &key);
        assert!(ax.argv.iter().all(|a| !a.contains("c2VjcmV0")));
        assert!(ax.stdin.as_deref().unwrap().contains("c2VjcmV0"));
        assert!(!format!("{ax:?}").contains("c2VjcmV0"));
        let n = render_notify_targets(
            &[
                Endpoint::new("127.0.0.1".parse().unwrap(), 5302).unwrap(),
                Endpoint::new("10.0.0.2".parse().unwrap(), 53).unwrap(),
            ],
            &key.name,
            &[ExternalSecondary {
                endpoint: Endpoint::new("192.0.2.9".parse().unwrap(), 5300).unwrap(),
                key: KeyName::parse("provider").unwrap(),
            }],
        );
        assert_eq!(
            n,
            "also-notify { 10.0.0.2 port 53 key \"xfer\"; 127.0.0.1 port 5302 key \"xfer\"; 192.0.2.9 port 5300 key \"provider\"; };\n"
        );
        assert_eq!(
            render_notify_targets(&[], &key.name, &[]),
            "also-notify { };\n"
        );
        assert_eq!(
            render_notify_servers(
                &[Endpoint::new("10.0.0.2".parse().unwrap(), 53).unwrap()],
                &key.name,
                &[]
            ),
            "primaries \"bind-operator-secondaries\" { 10.0.0.2 port 53 key \"xfer\"; };\n"
        );
        assert_eq!(config_hash("a", "b"), config_hash("ab", ""));
    }

    #[test]
    fn reconfig_when_mounted_sends_the_wanted_files_on_stdin_only() {
        let l = PodLayout::in_cluster();
        let keys = "key \"xfer\" { algorithm hmac-sha256; secret \"c2VjcmV0\"; };\n";
        let cmd = reconfig_when_mounted(&l, "options { };\n", keys, true, &[]);
        assert_eq!(
            &cmd.argv[4..],
            [
                "/var/lib/bind",
                "/var/lib/bind/named.conf",
                "/var/lib/bind/config/keys.conf",
                "1",
                "0",
                "rndc",
                "-c",
                "/var/lib/bind/rndc.conf",
                "reconfig"
            ]
        );
        assert!(cmd.argv.iter().all(|a| !a.contains("c2VjcmV0")));
        assert_eq!(
            cmd.stdin.as_deref(),
            Some(format!("options {{ }};\n{keys}").as_str())
        );
        assert!(!format!("{cmd:?}").contains("c2VjcmV0"));
        assert_eq!(cmd.verb(), "reconfig");
        assert_eq!(reconfig_when_mounted(&l, "", "", false, &[]).argv[7], "");
        // The primary's NOTIFY lists travel as FILE TEXT pairs, counted.
        let lists = notify_list_files(
            &l,
            &[Endpoint::new("10.0.0.2".parse().unwrap(), 53).unwrap()],
            &KeyName::parse("xfer").unwrap(),
            &[],
            &[],
        );
        let cmd = reconfig_when_mounted(&l, "", "", false, &lists);
        assert_eq!(cmd.argv[8], "2");
        assert_eq!(cmd.argv[9], "/var/lib/bind/notify-servers.conf");
        assert_eq!(cmd.argv[11], "/var/lib/bind/notify-targets.conf");
        assert_eq!(cmd.argv[13], "rndc");

        assert_eq!(
            parse_reconfig_when_mounted("@@not-mounted\n"),
            Some(WhenMounted::NotMounted)
        );
        assert_eq!(
            parse_reconfig_when_mounted("@@reconfigured\n"),
            Some(WhenMounted::Reconfigured)
        );
        assert_eq!(
            parse_reconfig_when_mounted("@@reconfig-failed\n"),
            Some(WhenMounted::ReconfigFailed)
        );
        assert_eq!(parse_reconfig_when_mounted(""), None);
        assert_eq!(parse_reconfig_when_mounted("@@reconfigured\nmore\n"), None);
        assert_eq!(parse_write_notify("@@notify-changed\n"), Some(true));
        assert_eq!(parse_write_notify("@@notify-unchanged\n"), Some(false));
        assert_eq!(parse_write_notify("rndc: connection refused\n"), None);
    }

    #[test]
    fn view_notify_lists_are_one_file_per_view_with_its_key() {
        let l = PodLayout::in_cluster();
        let views = [
            (
                ViewName::parse("internal").unwrap(),
                KeyName::parse("internal.view.xfer").unwrap(),
            ),
            (
                ViewName::parse("external").unwrap(),
                KeyName::parse("external.view.xfer").unwrap(),
            ),
        ];
        let t = [Endpoint::new("10.0.0.2".parse().unwrap(), 53).unwrap()];
        assert_eq!(
            render_view_notify_targets(&t, &views, &[]),
            "also-notify { 10.0.0.2 port 53 key \"internal.view.xfer\"; };\nalso-notify { 10.0.0.2 port 53 key \"external.view.xfer\"; };\n"
        );
        let w = write_view_notify_targets(&l, &t, &views, &[]);
        assert_eq!(
            &w.argv[4..],
            [
                "rndc",
                "/var/lib/bind/rndc.conf",
                "/var/lib/bind/notify-servers.conf",
                "primaries \"bind-operator-secondaries.internal\" { 10.0.0.2 port 53 key \"internal.view.xfer\"; };\nprimaries \"bind-operator-secondaries.external\" { 10.0.0.2 port 53 key \"external.view.xfer\"; };\n",
                "/var/lib/bind/notify-targets.internal.conf",
                "also-notify { 10.0.0.2 port 53 key \"internal.view.xfer\"; };\n",
                "/var/lib/bind/notify-targets.external.conf",
                "also-notify { 10.0.0.2 port 53 key \"external.view.xfer\"; };\n",
            ]
        );
        assert_eq!(
            read_view_notify_targets(&l, &views).argv,
            [
                "cat",
                "/var/lib/bind/notify-targets.internal.conf",
                "/var/lib/bind/notify-targets.external.conf"
            ]
        );
        assert!(has_runtime_includes(
            "view \"a\" {\n\tinclude \"notify-targets.a.conf\";\n};\n"
        ));
        assert!(!has_runtime_includes(
            "options {\n\tinclude \"notify-targets.conf\";\n};\n"
        ));
        assert!(has_runtime_includes(
            "options {\n\tinclude \"notify-targets.conf\";\n};\ninclude \"primary-zones.conf\";\n"
        ));
    }

    #[test]
    fn every_command_is_named_by_its_builder() {
        let l = PodLayout::in_cluster();
        let z = ZoneName::parse("example.com").unwrap();
        let v = ViewName::parse("internal").unwrap();
        let key = TsigKey {
            name: KeyName::parse("xfer").unwrap(),
            algorithm: TsigAlgorithm::HmacSha256,
            secret: TsigSecret::from_base64("c2VjcmV0").unwrap(),
        };
        let batch = crate::bind::nsupdate::UpdateBatch {
            zone: z.clone(),
            changes: vec![
                crate::bind::nsupdate::RrsetChange::parse_replace(
                    &z,
                    "www",
                    "A",
                    None,
                    crate::bind::Ttl::new(300).unwrap(),
                    &["192.0.2.1".to_string()],
                )
                .unwrap(),
            ],
            apex_ns: None,
        };
        let script = crate::bind::nsupdate::build_script(&batch, local_server(&l), &key)
            .unwrap()
            .unwrap();
        let cases = [
            (reconfig(&l), "reconfig"),
            (addzone(&l, &z, None, "{ type primary; };"), "addzone"),
            (modzone(&l, &z, None, "{ type primary; };"), "modzone"),
            (zonestatus(&l, &z, None), "zonestatus"),
            (delzone(&l, &z, None, "example.com.db"), "delzone"),
            (write_zone_file(&l, "example.com.db", ""), "write_zone_file"),
            (
                write_notify_targets(&l, &[], &key.name, &[]),
                "write_notify_targets",
            ),
            (read_notify_targets(&l), "read_notify_targets"),
            (
                write_view_notify_targets(&l, &[], &[(v.clone(), key.name.clone())], &[]),
                "write_notify_targets",
            ),
            (
                read_view_notify_targets(&l, &[(v.clone(), key.name.clone())]),
                "read_notify_targets",
            ),
            (ensure_notify_files(&l), "ensure_notify_targets"),
            (read_mounted_config(&l), "read_mounted_config"),
            (reconfig_when_mounted(&l, "", "", true, &[]), "reconfig"),
            (checkconf(&l, true), "checkconf"),
            (nsupdate(&l, &script), "nsupdate"),
            (probe(&l), "probe"),
            (dig_soa(&l, std::slice::from_ref(&z)), "dig_soa"),
            (dig_axfr(&l, &z, &key), "dig_axfr"),
            (dig_dnskey(&l, &z, &key), "dig_dnskey"),
        ];
        for (cmd, verb) in cases {
            assert_eq!(cmd.verb(), verb, "{cmd:?}");
        }
        // A fixed script built elsewhere is named after the program it runs.
        let chained = Command::sh("\"$@\"", vec!["/usr/bin/nsupdate".into(), "-v".into()]);
        assert_eq!(chained.verb(), "nsupdate");
        assert_eq!(Command::new(["true"]).verb(), VERB_OTHER);
        assert_eq!(Command::new(Vec::<String>::new()).verb(), VERB_OTHER);
    }

    #[test]
    fn apply_zones_carries_values_on_stdin_and_reports_per_zone() {
        let layout = PodLayout::in_cluster();
        let a = ZoneName::parse("a.test").unwrap();
        let b = ZoneName::parse("b.test").unwrap();
        let v = ViewName::parse("inside").unwrap();
        let cmd = apply_zones(
            &layout,
            &[
                ZoneWrite {
                    zone: a.clone(),
                    view: None,
                    kind: WriteKind::Put {
                        clause: "{ type primary;\n file \"a.db\"; };".into(),
                        text: "$TTL 60\n@ SOA x. y. 1 2 3 4 5\n".into(),
                        bare: None,
                        reconfig: false,
                    },
                },
                ZoneWrite {
                    zone: b.clone(),
                    view: Some(v),
                    kind: WriteKind::Remove,
                },
            ],
        );
        assert_eq!(cmd.verb(), "apply_zones");
        // argv: the script, the tools and the data dir only, at any zone count.
        assert_eq!(cmd.argv.len(), 8);
        let stdin = cmd.stdin.as_deref().unwrap();
        assert!(stdin.starts_with(
            "@@zone 1\nput\na.test\n\nzones.d/a.test.conf\nzones/a.test.db\nKa.test.+\n@@stanza 1\nzone \"a.test\" { type primary;  file \"a.db\"; };\n@@text 1\n$TTL 60\n@ SOA x. y. 1 2 3 4 5\n"
        ), "{stdin}");
        assert!(stdin.ends_with(
            "@@zone 2\ndel\nb.test\ninside\nzones.d/inside/b.test.conf\nzones/inside/b.test.db\nKb.test.+\n@@stanza 2\n\n"
        ), "{stdin}");

        let out = "@@zone 1 NEW\n\n@@end\n@@zone 2 FAIL\nrndc: 'delzone' failed: bad\nmore\n@@end\n@@zone 3 LISTED\n\n@@end\n";
        let r = parse_apply_zones(out);
        assert_eq!(r.results[&0], ZoneApplied::New);
        assert_eq!(r.results[&2], ZoneApplied::Listed);
        assert_eq!(
            r.results[&1],
            ZoneApplied::Failed("rndc: 'delzone' failed: bad\nmore\n".into())
        );
        assert!(r.refused.is_none());

        let out = "@@checkconf\nprimary-zones.inside.conf:2: unknown option 'bogus'\n@@list primary-zones.conf\nzones.d/*.conf\n@@list primary-zones.inside.conf\nzones.d/inside/a.test.conf\nzones.d/inside/b.test.conf\n";
        let r = parse_apply_zones(out).refused.unwrap();
        let s = r.stanzas();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].0, "zones.d/inside/b.test.conf");
        assert_eq!(s[0].1.message, "unknown option 'bogus'");
    }
}
