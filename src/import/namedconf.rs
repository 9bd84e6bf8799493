//! Reads an existing named.conf for `import named-conf`: its primary zones
//! (name, `file`, view) and the options that map onto a BindCluster
//! (`recursion`, `allow-query`, `allow-recursion`, `forwarders`, `forward`,
//! `dnssec-validation`, forward zones, views with `match-clients`,
//! `match-destinations` and `recursion`; named `acl`s are expanded where
//! used). Everything else is listed by file and line as not imported,
//! never dropped silently. Reads the file and its `include`s; pure
//! otherwise.
//!
//! A small hand-written lexer (strings, `//`, `#` and `/* */` comments,
//! blocks, `include`) rather than a crate: no maintained Rust crate parses
//! named.conf, and only its statement structure is needed here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::api::{BindClusterSpec, DnssecValidation, ForwardZone, View};

/// Deepest `include` nesting followed.
const MAX_INCLUDE_DEPTH: usize = 16;

/// named.conf could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NamedConfError {
    #[error("failed to read {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{at}: {message}")]
    Syntax { at: String, message: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Tok {
    text: String,
    quoted: bool,
    at: String,
}

/// A statement: words, an optional block, more words, `;`.
#[derive(Debug, Clone)]
struct Stmt {
    at: String,
    words: Vec<Tok>,
    block: Option<Vec<Stmt>>,
}

impl Stmt {
    fn word(&self, i: usize) -> Option<&str> {
        self.words.get(i).map(|t| t.text.as_str())
    }
    fn name(&self) -> String {
        self.word(0).unwrap_or_default().to_ascii_lowercase()
    }
}

/// A primary zone of the named.conf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneRef {
    pub at: String,
    pub name: String,
    pub file: PathBuf,
    pub view: Option<String>,
}

/// What a named.conf maps to.
#[derive(Debug, Clone, Default)]
pub struct NamedConf {
    pub zones: Vec<ZoneRef>,
    pub cluster: BindClusterSpec,
    /// `file:line: what` for everything not imported.
    pub unmapped: Vec<String>,
}

fn lex(file: &Path, depth: usize, out: &mut Vec<Tok>) -> Result<(), NamedConfError> {
    let text = std::fs::read_to_string(file).map_err(|source| NamedConfError::Read {
        file: file.display().to_string(),
        source,
    })?;
    let shown = file.display().to_string();
    let b = text.as_bytes();
    let (mut i, mut line) = (0, 1);
    let at = |line: usize| format!("{shown}:{line}");
    let start = out.len();
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' || (c == b'/' && b.get(i + 1) == Some(&b'/')) {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                line += usize::from(b[i] == b'\n');
                i += 1;
            }
            i += 2;
        } else if c == b'"' {
            let l = line;
            let mut s = Vec::new();
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                line += usize::from(b[i] == b'\n');
                s.push(b[i]);
                i += 1;
            }
            if i >= b.len() {
                return Err(NamedConfError::Syntax {
                    at: at(l),
                    message: "unterminated string".into(),
                });
            }
            i += 1;
            out.push(Tok {
                text: String::from_utf8_lossy(&s).into_owned(),
                quoted: true,
                at: at(l),
            });
        } else if matches!(c, b'{' | b'}' | b';') {
            out.push(Tok {
                text: (c as char).to_string(),
                quoted: false,
                at: at(line),
            });
            i += 1;
        } else {
            let s = i;
            while i < b.len()
                && !b[i].is_ascii_whitespace()
                && !matches!(b[i], b'{' | b'}' | b';' | b'"')
            {
                i += 1;
            }
            out.push(Tok {
                text: text[s..i].to_owned(),
                quoted: false,
                at: at(line),
            });
        }
    }
    // Splice includes: `include "file";` at any level.
    let mut k = start;
    while k < out.len() {
        if !out[k].quoted && out[k].text == "include" && k + 2 < out.len() && out[k + 2].text == ";"
        {
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(NamedConfError::Syntax {
                    at: out[k].at.clone(),
                    message: "include nested too deep".into(),
                });
            }
            let rel = PathBuf::from(&out[k + 1].text);
            let path = if rel.is_absolute() {
                rel
            } else {
                file.parent().unwrap_or(Path::new(".")).join(rel)
            };
            let mut inner = Vec::new();
            lex(&path, depth + 1, &mut inner)?;
            let n = inner.len();
            out.splice(k..k + 3, inner);
            k += n;
        } else {
            k += 1;
        }
    }
    Ok(())
}

fn parse(toks: &[Tok], i: &mut usize, nested: bool) -> Result<Vec<Stmt>, NamedConfError> {
    let mut out = Vec::new();
    loop {
        let Some(t) = toks.get(*i) else {
            if nested {
                let at = toks.last().map(|t| t.at.clone()).unwrap_or_default();
                return Err(NamedConfError::Syntax {
                    at,
                    message: "'{' never closed".into(),
                });
            }
            return Ok(out);
        };
        if !t.quoted && t.text == "}" {
            if !nested {
                return Err(NamedConfError::Syntax {
                    at: t.at.clone(),
                    message: "'}' without '{'".into(),
                });
            }
            *i += 1;
            return Ok(out);
        }
        let mut stmt = Stmt {
            at: t.at.clone(),
            words: Vec::new(),
            block: None,
        };
        loop {
            let Some(t) = toks.get(*i) else {
                return Err(NamedConfError::Syntax {
                    at: stmt.at,
                    message: "statement without ';'".into(),
                });
            };
            *i += 1;
            match (t.quoted, t.text.as_str()) {
                (false, ";") => break,
                (false, "{") => stmt.block = Some(parse(toks, i, true)?),
                (false, "}") => {
                    return Err(NamedConfError::Syntax {
                        at: t.at.clone(),
                        message: "missing ';' before '}'".into(),
                    });
                }
                _ => stmt.words.push(t.clone()),
            }
        }
        if !stmt.words.is_empty() || stmt.block.is_some() {
            out.push(stmt);
        }
    }
}

/// Reads `file` (and its includes).
pub fn read(file: &Path) -> Result<NamedConf, NamedConfError> {
    let mut toks = Vec::new();
    lex(file, 0, &mut toks)?;
    let stmts = parse(&toks, &mut 0, false)?;
    let mut conf = NamedConf::default();
    let acls: BTreeMap<String, Vec<String>> = stmts
        .iter()
        .filter(|s| s.name() == "acl")
        .filter_map(|s| Some((s.word(1)?.to_owned(), elements(s.block.as_ref()?))))
        .collect();
    let mut directory = file.parent().unwrap_or(Path::new(".")).to_owned();
    for s in &stmts {
        if s.name() == "options" {
            for o in s.block.iter().flatten() {
                if o.name() == "directory"
                    && let Some(d) = o.word(1)
                {
                    directory = directory.join(d);
                }
            }
        }
    }
    let mut reader = Reader {
        conf: &mut conf,
        acls: &acls,
        directory,
    };
    for s in &stmts {
        match s.name().as_str() {
            "options" => {
                for o in s.block.iter().flatten() {
                    reader.option(o, None);
                }
            }
            "acl" => {}
            "zone" => reader.zone(s, None),
            "view" => reader.view(s),
            other => reader.unmapped(s, &format!("`{other}` statement")),
        }
    }
    Ok(conf)
}

/// The first `key "name" { algorithm A; secret "S"; };` of a BIND key file
/// (what `tsig-keygen` writes): name, algorithm, base64 secret. Errors
/// never quote the secret.
pub fn read_key_file(file: &Path) -> Result<(String, String, String), NamedConfError> {
    let mut toks = Vec::new();
    lex(file, MAX_INCLUDE_DEPTH, &mut toks)?;
    let stmts = parse(&toks, &mut 0, false)?;
    let bad = |message: &str| NamedConfError::Syntax {
        at: file.display().to_string(),
        message: message.into(),
    };
    let key = stmts
        .iter()
        .find(|s| s.name() == "key")
        .ok_or_else(|| bad("no `key` statement"))?;
    let name = key.word(1).ok_or_else(|| bad("a key without a name"))?;
    let body = key.block.as_deref().unwrap_or_default();
    let field = |f: &str| {
        body.iter()
            .find(|o| o.name() == f)
            .and_then(|o| o.word(1))
            .map(str::to_owned)
            .ok_or_else(|| bad(&format!("key {name} has no `{f}`")))
    };
    Ok((name.to_owned(), field("algorithm")?, field("secret")?))
}

/// The elements of an address match list, as the API spells them
/// (`10.0.0.0/8`, `!192.0.2.1`, `key name`, `any`).
fn elements(block: &[Stmt]) -> Vec<String> {
    block
        .iter()
        .map(|e| {
            e.words
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

struct Reader<'a> {
    conf: &'a mut NamedConf,
    acls: &'a BTreeMap<String, Vec<String>>,
    directory: PathBuf,
}

impl Reader<'_> {
    fn unmapped(&mut self, s: &Stmt, what: &str) {
        self.conf.unmapped.push(format!(
            "{}: {what} is not mapped onto the operator's objects",
            s.at
        ));
    }

    fn acl(acls: &BTreeMap<String, Vec<String>>, s: &Stmt) -> Vec<String> {
        let mut out = Vec::new();
        for e in elements(s.block.as_deref().unwrap_or_default()) {
            match acls.get(&e) {
                Some(expanded) => out.extend(expanded.iter().cloned()),
                None => out.push(e),
            }
        }
        out
    }

    fn yes(s: &Stmt) -> Option<bool> {
        match s.word(1)?.to_ascii_lowercase().as_str() {
            "yes" | "true" | "1" => Some(true),
            "no" | "false" | "0" => Some(false),
            _ => None,
        }
    }

    /// One `options` (view: Some) statement.
    fn option(&mut self, o: &Stmt, view: Option<usize>) {
        let name = o.name();
        let spec = &mut self.conf.cluster;
        match (name.as_str(), view) {
            ("directory", None) => {}
            ("recursion", None) if Self::yes(o).is_some() => {
                spec.recursion = Self::yes(o).unwrap_or_default();
            }
            ("recursion", Some(v)) if Self::yes(o).is_some() => {
                spec.views[v].recursion = Self::yes(o);
            }
            ("allow-query", None) => spec.allow_query = Self::acl(self.acls, o),
            ("allow-recursion", None) => spec.allow_recursion = Self::acl(self.acls, o),
            ("match-clients", Some(v)) => spec.views[v].match_clients = Self::acl(self.acls, o),
            ("match-destinations", Some(v)) => {
                spec.views[v].match_destinations = Self::acl(self.acls, o)
            }
            ("forwarders", None) => {
                let list = elements(o.block.as_deref().unwrap_or_default());
                let (ips, other): (Vec<_>, Vec<_>) = list
                    .into_iter()
                    .partition(|e| e.parse::<std::net::IpAddr>().is_ok());
                spec.forwarders = ips;
                if !other.is_empty() {
                    self.unmapped(
                        o,
                        &format!("forwarders {other:?} (only plain IP addresses map)"),
                    );
                }
            }
            ("forward", None) if matches!(o.word(1), Some("only" | "first")) => {
                spec.forward_only = o.word(1) == Some("only");
            }
            ("dnssec-validation", None) => {
                spec.dnssec_validation = match o.word(1) {
                    Some("auto") => Some(DnssecValidation::Auto),
                    Some("yes") => Some(DnssecValidation::Yes),
                    Some("no") => Some(DnssecValidation::No),
                    _ => {
                        self.unmapped(o, "`dnssec-validation` with this value");
                        return;
                    }
                };
            }
            ("zone", Some(v)) => {
                let view = self.conf.cluster.views[v].name.clone();
                self.zone(o, Some(view));
            }
            _ => {
                let scope = if view.is_some() {
                    "view option"
                } else {
                    "option"
                };
                self.unmapped(o, &format!("{scope} `{name}`"));
            }
        }
    }

    fn view(&mut self, s: &Stmt) {
        let Some(name) = s.word(1) else {
            return self.unmapped(s, "a view without a name");
        };
        self.conf.cluster.views.push(View {
            name: name.to_owned(),
            match_clients: Vec::new(),
            match_destinations: Vec::new(),
            recursion: None,
        });
        let v = self.conf.cluster.views.len() - 1;
        for o in s.block.iter().flatten() {
            self.option(o, Some(v));
        }
    }

    fn zone(&mut self, s: &Stmt, view: Option<String>) {
        let Some(name) = s.word(1).map(|n| n.trim_end_matches('.').to_owned()) else {
            return self.unmapped(s, "a zone without a name");
        };
        let body = s.block.as_deref().unwrap_or_default();
        let get = |key: &str| body.iter().find(|o| o.name() == key);
        let ztype = get("type")
            .and_then(|t| t.word(1))
            .unwrap_or_default()
            .to_ascii_lowercase();
        match ztype.as_str() {
            "primary" | "master" => {
                let Some(file) = get("file").and_then(|f| f.word(1)) else {
                    return self.unmapped(s, &format!("primary zone {name} without `file`"));
                };
                for o in body {
                    if !matches!(o.name().as_str(), "type" | "file") {
                        self.unmapped(o, &format!("zone {name} option `{}`", o.name()));
                    }
                }
                self.conf.zones.push(ZoneRef {
                    at: s.at.clone(),
                    name,
                    file: self.directory.join(file),
                    view,
                });
            }
            "forward" if view.is_none() => {
                let forwarders = get("forwarders")
                    .map(|f| elements(f.block.as_deref().unwrap_or_default()))
                    .unwrap_or_default();
                let forward_only = get("forward").and_then(|f| f.word(1)) != Some("first");
                self.conf.cluster.forward_zones.push(ForwardZone {
                    zone: name,
                    forwarders,
                    forward_only,
                });
            }
            other => self.unmapped(s, &format!("zone {name} of type `{other}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_options_views_and_unmapped_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("extra.conf"),
            "zone \"fwd.example\" { type forward; forwarders { 192.0.2.9; }; forward only; };\n",
        )
        .unwrap();
        let conf = dir.path().join("named.conf");
        std::fs::write(
            &conf,
            "# c\nacl inside { 10.0.0.0/8; !10.9.0.0/16; };\noptions {\n  directory \"/x\";\n  recursion yes; // r\n  allow-recursion { inside; };\n  forwarders { 192.0.2.1; 192.0.2.2; };\n  forward only;\n  listen-on { any; };\n};\n/* multi\nline */\ninclude \"extra.conf\";\nview \"in\" {\n  match-clients { inside; key \"k\"; };\n  zone \"example.com\" { type master; file \"db.example\"; allow-update { none; }; };\n};\nlogging { };\n",
        )
        .unwrap();
        let c = read(&conf).unwrap();
        assert_eq!(c.zones.len(), 1);
        assert_eq!(c.zones[0].name, "example.com");
        assert_eq!(c.zones[0].view.as_deref(), Some("in"));
        assert_eq!(c.zones[0].file, PathBuf::from("/x/db.example"));
        assert!(c.cluster.recursion);
        assert!(c.cluster.forward_only);
        assert_eq!(c.cluster.allow_recursion, ["10.0.0.0/8", "!10.9.0.0/16"]);
        assert_eq!(c.cluster.forwarders, ["192.0.2.1", "192.0.2.2"]);
        assert_eq!(
            c.cluster.views[0].match_clients,
            ["10.0.0.0/8", "!10.9.0.0/16", "key k"]
        );
        assert_eq!(c.cluster.forward_zones[0].zone, "fwd.example");
        let unmapped = c.unmapped.join("\n");
        assert!(
            unmapped.contains("named.conf:9: option `listen-on`"),
            "{unmapped}"
        );
        assert!(
            unmapped.contains("named.conf:16: zone example.com option `allow-update`"),
            "{unmapped}"
        );
        assert!(
            unmapped.contains("named.conf:18: `logging` statement"),
            "{unmapped}"
        );
    }
}
