//! Every command the operator runs inside a BIND pod, as argv + stdin.
//! Pure: nothing here starts a process; an executor (pods/exec or the local
//! runner) does. Paths, ports and tool names all come from a [`PodLayout`].
//!
//! User values never reach a shell as script text: where a command needs a
//! shell (pipes, several steps), the script is fixed text here and values
//! are passed as positional arguments (`sh -c SCRIPT sh ARG...`). Key
//! material travels only on stdin, and [`Command`]'s `Debug` hides stdin.

use std::fmt;

use super::conf::{ConfWriter, server_tokens};
use super::dnssec::key_file_prefix;
use super::entrypoint::RNDC_KEY_NAME;
use super::layout::{PodLayout, data};
use super::name::ZoneName;
use super::nsupdate::NsupdateScript;
use super::render::render_keys_conf;
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
    /// `nsupdate`, `write_notify_targets`, ...). Bounded by construction: a
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
            CREATE_ZONES_SCRIPT => "create_zones",
            UPDATES_THEN_SOA_SCRIPT => "nsupdate",
            READD_SCRIPT => "readd_zone",
            WRITE_FILE_SCRIPT => "write_zone_file",
            WRITE_NOTIFY_SCRIPT | WRITE_VIEW_NOTIFY_SCRIPT => "write_notify_targets",
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

const DELZONE_SCRIPT: &str = r#"rndc="$1" conf="$2" file="$3" keys="$4"
shift 4
"$rndc" -c "$conf" delzone "$@"
rc=$?
rm -f "$file" "$file.jnl" "$file.jbk" "$file.signed" "$file.signed.jnl" \
    "$keys"*.key "$keys"*.private "$keys"*.state
exit $rc"#;

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

const READD_SCRIPT: &str = r#"rndc="$1" conf="$2" clause="$3"
shift 3
"$rndc" -c "$conf" delzone "$@" || exit $?
exec "$rndc" -c "$conf" addzone "$@" "$clause""#;

/// `rndc delzone ZONE [IN VIEW]` (files kept) then `rndc addzone` with
/// `clause`, in one exec: what makes BIND 9.20 apply a `dnssec-policy`
/// added to an existing zone (its modzone records the policy but does not
/// sign until a reconfig; measured). The zone file and journal stay, so
/// the zone comes back with every record.
pub fn readd_zone(
    layout: &PodLayout,
    zone: &ZoneName,
    view: Option<&ViewName>,
    clause: &str,
) -> Command {
    let mut a = vec![
        layout.tools.rndc.clone(),
        layout.rndc_conf(),
        clause.to_string(),
    ];
    a.extend(zone_args(zone, view));
    Command::sh(READD_SCRIPT, a)
}

const WRITE_FILE_SCRIPT: &str = r#"set -e
f="$1"
mkdir -p "$(dirname "$f")"
rm -f "$f.jnl" "$f.jbk" "$f.signed" "$f.signed.jnl"
cat >"$f.tmp"
mv -f "$f.tmp" "$f""#;

/// Writes a zone file (text on stdin) to `file` relative to the data dir,
/// atomically, removing any stale journal and inline-signing copies first
/// (keys stay: a zone the primary lost keeps its DS valid). Run before
/// `addzone`.
pub fn write_zone_file(layout: &PodLayout, file: &str, text: &str) -> Command {
    Command::sh(WRITE_FILE_SCRIPT, vec![layout.data_path(file)]).with_stdin(text.to_string())
}

const CREATE_ZONES_SCRIPT: &str = r#"rndc="$1" conf="$2" jobs="$3"
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
n=0
while IFS= read -r zone && IFS= read -r view && IFS= read -r clause &&
    IFS= read -r file && IFS= read -r lines; do
  n=$((n + 1))
  if [ -n "$view" ]; then set -- "$zone" IN "$view"; else set -- "$zone"; fi
  fresh=yes
  for s in "" .jnl .jbk .signed .signed.jnl; do
    [ ! -e "$file$s" ] || fresh=
  done
  err=
  if [ -n "$fresh" ]; then
    result=NEW
  elif err=$("$rndc" -c "$conf" zonestatus "$@" 2>&1 >/dev/null </dev/null); then
    result=EXISTS err=
  else
    case "$err" in
      *"not found"*|*"no matching zone"*) result=NEW err= ;;
      *) result=FAIL ;;
    esac
  fi
  dir=${file%/*}
  [ "$result" != NEW ] || [ -d "$dir" ] || mkdir -p "$dir" </dev/null || result=FAIL
  if [ "$result" = NEW ]; then
    for s in .jnl .jbk .signed .signed.jnl; do
      [ ! -e "$file$s" ] || rm -f "$file$s" </dev/null
    done
    : >"$file" || result=FAIL
  fi
  i=0
  while [ "$i" -lt "$lines" ]; do
    IFS= read -r line
    [ "$result" != NEW ] || printf '%s\n' "$line" >>"$file"
    i=$((i + 1))
  done
  if [ "$result" = NEW ]; then
    (
      if err=$("$rndc" -c "$conf" addzone "$@" "$clause" 2>&1 >/dev/null); then
        err=
      else
        case "$err" in
          *"already exists"*) result=EXISTS ;;
          *) result=FAIL ;;
        esac
      fi
      printf '@@zone %s %s\n%s\n@@end\n' "$zone" "$result" "$err"
    ) </dev/null >"$out/$n" &
    [ $((n % jobs)) -ne 0 ] || wait
  else
    printf '@@zone %s %s\n%s\n@@end\n' "$zone" "$result" "$err"
  fi
done
wait
set -- "$out"/*
[ ! -e "$1" ] || cat "$@""#;

/// `rndc addzone`s a [`create_zones`] run keeps going at once. named
/// serialises the adds, but each rndc process spends most of its ~0.1 s
/// waiting (start, authentication, the new-zone database's commit):
/// measured on 9.18, 100 adds took 11.8 s one after the other and 4.0 s
/// eight at a time. The script waits for each group of this many before
/// starting the next, so a slow add holds up its group: on 2 busy cores
/// (load 11-19), 200 adds took 8.0-9.9 s eight at a time, 6.1-7.6 s
/// sixteen at a time and 8.8 s thirty-two at a time.
pub const ADDZONES_AT_ONCE: usize = 16;

/// A primary zone to create in a [`create_zones`] run.
pub struct NewZone<'a> {
    pub zone: &'a ZoneName,
    pub view: Option<&'a ViewName>,
    /// The `{ ... };` clause (from [`super::zone::PrimaryZone::clause`]).
    pub clause: &'a str,
    /// The zone file, relative to the data dir.
    pub file: &'a str,
    /// Its initial contents (the skeleton: no key material).
    pub text: &'a str,
}

/// Creates many primary zones in one run, each as [`write_zone_file`] then
/// [`addzone`] would, but only when the zone is new: none of its files is
/// on the volume (the first sync: no rndc call needed to know), or `rndc
/// zonestatus` does not know it (a zone named already serves keeps its file
/// and journal; an addzone that finds it there reports it as existing, so
/// a zone whose files vanished behind named's back is not touched either,
/// beyond its file being written again). Zones,
/// clauses and files travel on stdin, one value a line (the file text as a
/// line count and its lines), so no user value reaches the script as
/// text and argv stays short at any zone count. Prints one block per zone:
/// `@@zone ZONE NEW|EXISTS|FAIL`, rndc's stderr when it failed, `@@end`;
/// parse with [`parse_create_zones`]. Costs one rndc process per zone
/// (two for a zone whose files are there but rndc does not know), inside
/// one exec, the adds [`ADDZONES_AT_ONCE`] at a time (files are written in
/// order before each add starts).
pub fn create_zones(layout: &PodLayout, zones: &[NewZone<'_>]) -> Command {
    let mut stdin = String::new();
    for z in zones {
        let text = z.text.strip_suffix('\n').unwrap_or(z.text);
        let lines: Vec<&str> = if text.is_empty() {
            Vec::new()
        } else {
            text.split('\n').collect()
        };
        // The clause is BIND syntax we rendered; its line breaks are
        // whitespace to named.
        let clause = z.clause.replace('\n', " ");
        let view = z.view.map(ViewName::as_str).unwrap_or_default();
        let _ = std::fmt::Write::write_fmt(
            &mut stdin,
            format_args!(
                "{}\n{}\n{}\n{}\n{}\n",
                z.zone.as_str(),
                view,
                clause,
                layout.data_path(z.file),
                lines.len()
            ),
        );
        for l in lines {
            stdin.push_str(l);
            stdin.push('\n');
        }
    }
    Command::sh(
        CREATE_ZONES_SCRIPT,
        vec![
            layout.tools.rndc.clone(),
            layout.rndc_conf(),
            ADDZONES_AT_ONCE.to_string(),
        ],
    )
    .with_stdin(stdin)
}

/// What a [`create_zones`] run did to one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneCreated {
    /// File written and zone added.
    New,
    /// rndc already knew the zone; nothing was written.
    Existing,
    /// rndc failed; its stderr (parse with [`super::parse::parse_rndc_error`]).
    Failed(String),
}

/// The per-zone results of a [`create_zones`] run, by zone name as given.
/// A zone missing from the map was not reached (the run died before it).
pub fn parse_create_zones(stdout: &str) -> std::collections::BTreeMap<String, ZoneCreated> {
    let mut out = std::collections::BTreeMap::new();
    let mut lines = stdout.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("@@zone ") else {
            continue;
        };
        let mut parts = rest.split(' ');
        let (Some(zone), Some(result)) = (parts.next(), parts.next()) else {
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
            "NEW" => ZoneCreated::New,
            "EXISTS" => ZoneCreated::Existing,
            _ => ZoneCreated::Failed(err),
        };
        out.insert(zone.to_string(), r);
    }
    out
}

const UPDATES_THEN_SOA_SCRIPT: &str = r#"n="$1"
shift
umask 077
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
awk -v dir="$out" 'BEGIN { f = dir "/p0" }
    $0 == "@@part" { close(f); i++; f = dir "/p" i; next }
    { print > f }' || exit 1
for p in "$out"/p*; do
  "$n" -v "$p" >"$p.out" 2>"$p.err" </dev/null &
done
wait
for p in "$out"/p*[0-9]; do
  cat "$p.out"
  echo "@@stderr"
  cat "$p.err"
  echo "@@end-part"
done
echo "@@nsupdate"
[ "$#" -gt 0 ] || exit 0
"$@""#;

/// Separates the parts of a [`nsupdate_then_soa`] script on stdin.
const PART_SEPARATOR: &str = "@@part\n";

/// nsupdate processes that one [`nsupdate_then_soa`] run starts at once.
/// named works on updates of different zones in parallel, and each message
/// waits on its journal write: measured on 9.18, 200 one-message zone
/// updates took 4.3 s through one process and 1.9 s through four.
pub const NSUPDATES_AT_ONCE: usize = 4;

/// Many zones' scripts (each message followed by `answer`, see
/// [`super::nsupdate::join_answered`]) in one exec: the `parts` run as that
/// many nsupdate processes at once (at most [`NSUPDATES_AT_ONCE`] make
/// sense; a zone's messages belong in one part, in order), their outputs
/// printed in part order (each part's stdout, `@@stderr`, its stderr,
/// `@@end-part`; then `@@nsupdate`); then, whatever they returned, the SOA query of
/// `read_back` (when not empty) so every zone's serial after the run comes
/// with it. nsupdate goes on after a refused message (measured, 9.18), so
/// one zone's failure leaves the others' messages applied;
/// [`super::nsupdate::parse_answers`] tells which landed. The scripts (key
/// material) go through files only in a private temporary directory,
/// removed when the run ends.
pub fn nsupdate_then_soa(
    layout: &PodLayout,
    parts: &[NsupdateScript],
    read_back: &[ZoneName],
) -> Command {
    let mut args = vec![layout.tools.nsupdate.clone()];
    if !read_back.is_empty() {
        args.extend(dig_soa(layout, read_back).argv);
    }
    let stdin = parts
        .iter()
        .map(NsupdateScript::expose_stdin)
        .collect::<Vec<_>>()
        .join(PART_SEPARATOR);
    Command::sh(UPDATES_THEN_SOA_SCRIPT, args).with_stdin(stdin)
}

/// The primary's options-level NOTIFY list, signed with the transfer key.
pub fn render_notify_targets(targets: &[Endpoint], transfer_key: &KeyName) -> String {
    let mut sorted = targets.to_vec();
    sorted.sort();
    sorted.dedup();
    let mut w = ConfWriter::new();
    let items: Vec<_> = sorted
        .iter()
        .map(|e| server_tokens(e, Some(transfer_key)))
        .collect();
    w.inline_list(&[super::conf::Tok::Kw("also-notify")], &items);
    w.finish()
}

const WRITE_NOTIFY_SCRIPT: &str = r#"set -e
f="$1" rndc="$2" conf="$3"
cat >"$f.tmp"
mv -f "$f.tmp" "$f"
exec "$rndc" -c "$conf" reconfig"#;

/// Rewrites `notify-targets.conf` on the primary (the secondaries' pod
/// endpoints) and reconfigs so every zone NOTIFYs them. Compare with
/// [`read_notify_targets`] first: a converged cluster runs nothing.
pub fn write_notify_targets(
    layout: &PodLayout,
    targets: &[Endpoint],
    transfer_key: &KeyName,
) -> Command {
    Command::sh(
        WRITE_NOTIFY_SCRIPT,
        vec![
            layout.data_path(data::NOTIFY_TARGETS),
            layout.tools.rndc.clone(),
            layout.rndc_conf(),
        ],
    )
    .with_stdin(render_notify_targets(targets, transfer_key))
}

/// The primary's NOTIFY lists with views: each view `V` includes
/// `notify-targets.<V>.conf`, NOTIFYs signed with V's key (so they land in
/// V on the secondaries). `views`: each view with its key name.
pub fn render_view_notify_targets(targets: &[Endpoint], views: &[(ViewName, KeyName)]) -> String {
    views
        .iter()
        .map(|(_, key)| render_notify_targets(targets, key))
        .collect()
}

const WRITE_VIEW_NOTIFY_SCRIPT: &str = r#"set -e
rndc="$1" conf="$2"
shift 2
while [ $# -gt 1 ]; do
    printf '%s' "$2" >"$1.tmp"
    mv -f "$1.tmp" "$1"
    shift 2
done
exec "$rndc" -c "$conf" reconfig"#;

/// Rewrites every view's NOTIFY list on the primary, then one reconfig.
/// The lists hold addresses and key names only (no material), so they
/// travel as arguments. Compare with [`read_view_notify_targets`] first.
pub fn write_view_notify_targets(
    layout: &PodLayout,
    targets: &[Endpoint],
    views: &[(ViewName, KeyName)],
) -> Command {
    let mut a = vec![layout.tools.rndc.clone(), layout.rndc_conf()];
    for (view, key) in views {
        a.push(layout.data_path(&data::notify_targets_of(view)));
        a.push(render_notify_targets(targets, key));
    }
    Command::sh(WRITE_VIEW_NOTIFY_SCRIPT, a)
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

const ENSURE_NOTIFY_SCRIPT: &str = r#"cd "$1" || exit 1
for f in $(sed -n 's/^[[:space:]]*include "\(notify-targets\.[A-Za-z0-9_.-]*\.conf\)";$/\1/p' named.conf); do
    [ -e "$f" ] || echo 'also-notify { };' >"$f" || exit 1
done"#;

/// Creates (empty) every NOTIFY list file named.conf includes that is
/// missing, as the entrypoint does at start: a view added at run time
/// names a file `rndc reconfig` would otherwise fail on.
pub fn ensure_notify_files(layout: &PodLayout) -> Command {
    Command::sh(
        ENSURE_NOTIFY_SCRIPT,
        vec![layout.data_dir.to_string_lossy().into_owned()],
    )
}

/// Whether a named.conf includes per-view NOTIFY lists (a primary with
/// views), i.e. needs [`ensure_notify_files`] before a reconfig.
pub fn has_view_notify_files(named_conf: &str) -> bool {
    let plain = format!("include \"{}\";", data::NOTIFY_TARGETS);
    let prefix = format!("include \"{}", data::NOTIFY_TARGETS_PREFIX);
    named_conf
        .lines()
        .map(str::trim)
        .any(|l| l.starts_with(&prefix) && l != plain)
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

/// sha256 hex of a pod's wanted config: its role's named.conf + keys.conf,
/// the same bytes [`read_mounted_config`] prints.
pub fn config_hash(named_conf: &str, keys_conf: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(named_conf.as_bytes());
    h.update(keys_conf.as_bytes());
    hex::encode(h.finalize())
}

const CHECKCONF_SCRIPT: &str = r#"cd "$1" || exit 1
shift
exec "$@""#;

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

const DIG_KEYFILE_SCRIPT: &str = r#"umask 077
k=$(mktemp) || exit 1
trap 'rm -f "$k"' EXIT
cat >"$k"
"$@" -k "$k""#;

/// `dig AXFR` signed with `key` (from a temp key file fed on stdin, so the
/// secret is in no argv); parse with [`super::parse::parse_axfr`].
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
        );
        assert_eq!(
            n,
            "also-notify { 10.0.0.2 port 53 key \"xfer\"; 127.0.0.1 port 5302 key \"xfer\"; };\n"
        );
        assert_eq!(render_notify_targets(&[], &key.name), "also-notify { };\n");
        assert_eq!(config_hash("a", "b"), config_hash("ab", ""));
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
            render_view_notify_targets(&t, &views),
            "also-notify { 10.0.0.2 port 53 key \"internal.view.xfer\"; };\nalso-notify { 10.0.0.2 port 53 key \"external.view.xfer\"; };\n"
        );
        let w = write_view_notify_targets(&l, &t, &views);
        assert_eq!(
            &w.argv[4..],
            [
                "rndc",
                "/var/lib/bind/rndc.conf",
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
        assert!(has_view_notify_files(
            "view \"a\" {\n\tinclude \"notify-targets.a.conf\";\n};\n"
        ));
        assert!(!has_view_notify_files(
            "options {\n\tinclude \"notify-targets.conf\";\n};\n"
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
                write_notify_targets(&l, &[], &key.name),
                "write_notify_targets",
            ),
            (read_notify_targets(&l), "read_notify_targets"),
            (
                write_view_notify_targets(&l, &[], &[(v.clone(), key.name.clone())]),
                "write_notify_targets",
            ),
            (
                read_view_notify_targets(&l, &[(v.clone(), key.name.clone())]),
                "read_notify_targets",
            ),
            (ensure_notify_files(&l), "ensure_notify_targets"),
            (read_mounted_config(&l), "read_mounted_config"),
            (checkconf(&l, true), "checkconf"),
            (nsupdate(&l, &script), "nsupdate"),
            (probe(&l), "probe"),
            (dig_soa(&l, std::slice::from_ref(&z)), "dig_soa"),
            (dig_axfr(&l, &z, &key), "dig_axfr"),
            (dig_dnskey(&l, &z, &key), "dig_dnskey"),
            (readd_zone(&l, &z, None, "{ type primary; };"), "readd_zone"),
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
    fn create_zones_carries_values_on_stdin_and_reports_per_zone() {
        let layout = PodLayout::in_cluster();
        let a = ZoneName::parse("a.test").unwrap();
        let b = ZoneName::parse("b.test").unwrap();
        let v = ViewName::parse("inside").unwrap();
        let cmd = create_zones(
            &layout,
            &[
                NewZone {
                    zone: &a,
                    view: None,
                    clause: "{ type primary;\n file \"a.db\"; };",
                    file: "a.db",
                    text: "$TTL 60\n@ SOA x. y. 1 2 3 4 5\n",
                },
                NewZone {
                    zone: &b,
                    view: Some(&v),
                    clause: "{ type primary; };",
                    file: "inside/b.db",
                    text: "",
                },
            ],
        );
        assert_eq!(cmd.verb(), "create_zones");
        // argv: the script, the rndc invocation and the parallelism only,
        // at any zone count.
        assert_eq!(cmd.argv.len(), 7);
        let stdin = cmd.stdin.as_deref().unwrap();
        let data = layout.data_path("a.db");
        assert!(stdin.starts_with(&format!(
            "a.test\n\n{{ type primary;  file \"a.db\"; }};\n{data}\n2\n$TTL 60\n@ SOA x. y. 1 2 3 4 5\n"
        )));
        assert!(stdin.ends_with(&format!(
            "b.test\ninside\n{{ type primary; }};\n{}\n0\n",
            layout.data_path("inside/b.db")
        )));

        let out = "@@zone a.test NEW\n\n@@end\n@@zone b.test FAIL\nrndc: 'addzone' failed: bad\nmore\n@@end\n@@zone c.test EXISTS\n\n@@end\n";
        let r = parse_create_zones(out);
        assert_eq!(r["a.test"], ZoneCreated::New);
        assert_eq!(r["c.test"], ZoneCreated::Existing);
        assert_eq!(
            r["b.test"],
            ZoneCreated::Failed("rndc: 'addzone' failed: bad\nmore\n".into())
        );
    }
}
