//! How a [`Snapshot`] is shown: the readable table (printed when the
//! session settles or is asked; failed objects listed under it with their
//! whole message), and `status.json` in the state directory, replaced atomically
//! (written to a temporary file, then renamed) so a reader never sees half
//! a file.
//!
//! Rendering is pure and deterministic (sorted input, no timestamps), so
//! "changed" is a string comparison. [`StatusFile`] writes only its own file
//! in the state directory; nothing here touches the cluster.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use super::report::{ObjectStatus, Snapshot};

/// Name of the JSON status file in the state directory.
pub const STATUS_FILE: &str = "status.json";
/// Longest message shown in the table (the JSON has it whole).
const MAX_MESSAGE_CHARS: usize = 100;
/// Above this many objects the table lists only those not Ready.
const MAX_TABLE_OBJECTS: usize = 100;
/// Shown for an empty cell, so columns stay readable.
const EMPTY_CELL: &str = "-";

/// The snapshot as text: a verdict line, the pods, the objects.
pub fn render_table(snapshot: &Snapshot) -> String {
    let total = snapshot.objects.len();
    let ready = snapshot.objects.iter().filter(|o| o.ready).count();
    let mut out = format!(
        "{ready}/{total} objects ready, {} pods, {}; {}\n",
        snapshot.pods.len(),
        if snapshot.converged {
            "converged"
        } else {
            "converging"
        },
        if snapshot.ready { "ready" } else { "not ready" },
    );
    for what in &snapshot.waiting_for {
        let _ = writeln!(out, "waiting for: {what}");
    }

    if !snapshot.pods.is_empty() {
        out.push('\n');
        let rows: Vec<Vec<String>> = snapshot
            .pods
            .iter()
            .map(|p| {
                vec![
                    p.namespace.clone(),
                    p.cluster.clone(),
                    p.name.clone(),
                    p.role.as_str().to_owned(),
                    p.dns.to_string(),
                    if p.ready { "yes" } else { "no" }.to_owned(),
                    p.restarts.to_string(),
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "NAMESPACE",
                "CLUSTER",
                "POD",
                "ROLE",
                "DNS",
                "READY",
                "RESTARTS",
            ],
            &rows,
        );
    }

    let shown: Vec<&ObjectStatus> = if total > MAX_TABLE_OBJECTS {
        snapshot
            .objects
            .iter()
            .filter(|o| !o.ready)
            .take(MAX_TABLE_OBJECTS)
            .collect()
    } else {
        snapshot.objects.iter().collect()
    };
    if !shown.is_empty() {
        out.push('\n');
        let rows: Vec<Vec<String>> = shown
            .iter()
            .map(|o| {
                vec![
                    o.kind.clone(),
                    o.namespace.clone(),
                    o.name.clone(),
                    if o.ready { "yes" } else { "no" }.to_owned(),
                    o.phase.clone(),
                    o.reason.clone(),
                    one_line(&o.message),
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "KIND",
                "NAMESPACE",
                "NAME",
                "READY",
                "PHASE",
                "REASON",
                "MESSAGE",
            ],
            &rows,
        );
    }
    if shown.len() < total {
        let _ = writeln!(
            out,
            "({} more objects not shown; all are in {STATUS_FILE})",
            total - shown.len()
        );
    }
    let errors: Vec<&ObjectStatus> = snapshot
        .objects
        .iter()
        .filter(|o| o.phase == ERROR_PHASE)
        .collect();
    if !errors.is_empty() {
        // The table cuts messages; where the problem is (file, line,
        // column) is often at their end.
        let _ = writeln!(out, "\nErrors:");
        for o in errors.iter().take(MAX_TABLE_OBJECTS) {
            let _ = writeln!(out, "  {}: {}", describe(o), o.message.trim());
        }
        if errors.len() > MAX_TABLE_OBJECTS {
            let _ = writeln!(
                out,
                "  ({} more errors; all are in {STATUS_FILE})",
                errors.len() - MAX_TABLE_OBJECTS
            );
        }
    }
    out
}

/// Phase of a failed row.
const ERROR_PHASE: &str = "Error";

/// `Kind namespace/name (Reason)`, or `manifest (Reason)` for a document
/// that names no object.
pub fn describe(o: &ObjectStatus) -> String {
    let who = match (o.kind.is_empty(), o.namespace.is_empty()) {
        (true, _) => "manifest".to_owned(),
        (false, true) => format!("{} {}", o.kind, o.name),
        (false, false) => format!("{} {}/{}", o.kind, o.namespace, o.name),
    };
    if o.reason.is_empty() {
        who
    } else {
        format!("{who} ({})", o.reason)
    }
}

/// Message squeezed onto one line and cut to `MAX_MESSAGE_CHARS`.
pub fn one_line(message: &str) -> String {
    let flat = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= MAX_MESSAGE_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(MAX_MESSAGE_CHARS - 3).collect();
    format!("{cut}...")
}

/// Left-aligned columns separated by two spaces, no trailing blanks.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let cell = |s: &str| if s.is_empty() { EMPTY_CELL } else { s }.to_owned();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell(c).chars().count());
        }
    }
    let mut line = |cells: Vec<String>| {
        let mut text = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            let _ = write!(text, "{c:<w$}");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        line(row.iter().map(|c| cell(c)).collect());
    }
}

/// The snapshot as the `status.json` document (pretty, trailing newline).
pub fn render_json(snapshot: &Snapshot) -> String {
    let mut json = serde_json::to_string_pretty(snapshot).expect("snapshots serialise");
    json.push('\n');
    json
}

/// `status.json` in a state directory, rewritten only when it changes.
#[derive(Debug)]
pub struct StatusFile {
    path: PathBuf,
    last: Option<String>,
}

impl StatusFile {
    /// Creates the state directory if needed.
    pub fn new(state_dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(state_dir)?;
        Ok(Self {
            path: state_dir.join(STATUS_FILE),
            last: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the snapshot if it differs from the last one written;
    /// returns whether it wrote.
    pub fn write(&mut self, snapshot: &Snapshot) -> io::Result<bool> {
        let json = render_json(snapshot);
        if self.last.as_deref() == Some(json.as_str()) {
            return Ok(false);
        }
        write_atomically(&self.path, json.as_bytes())?;
        self.last = Some(json);
        Ok(true)
    }
}

/// Write to a sibling temporary file, then rename over `path`: the rename is
/// atomic within a filesystem, so readers see the old or the new file.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
