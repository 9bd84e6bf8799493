//! Reads a master-format zone file the way `named-checkzone` does, one
//! entry at a time: `$ORIGIN`, `$TTL`, `$INCLUDE` (a relative path is
//! relative to the including file, and the origin and owner revert after
//! it), `$GENERATE` (expanded in place), `@`, relative and absolute names,
//! an omitted owner, TTL or class inherited from the entry before, TTLs with
//! units (`1h30m`). Each record goes to the caller as a [`RawRecord`]:
//! owner made absolute, TTL and class settled, rdata still as tokens (the
//! importer parses them with the operator's own rdata parsers). Reads files
//! only; holds one entry at a time.
//!
//! Hand-written rather than a crate's parser: hickory-proto's zone parser
//! reads the whole file into memory and refuses `$INCLUDE` and `$GENERATE`,
//! and `domain`'s zonefile reader has no `$GENERATE` either; both would
//! also hand back their own rdata types, which the operator's stricter
//! rdata parsers ([`crate::bind::rdata`]) would have to be fed from again.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::lexer::{Entry, LexError, Lexer, Token, tokenize};

/// Deepest `$INCLUDE` nesting followed (a loop would never end).
const MAX_INCLUDE_DEPTH: usize = 16;
/// Most records one `$GENERATE` may produce.
const MAX_GENERATE: u64 = 65_536;

/// Where something was read: file and 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    pub file: Arc<str>,
    pub line: usize,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One record of the file, its owner absolute and its TTL settled.
#[derive(Debug, Clone)]
pub struct RawRecord {
    pub at: Location,
    /// Absolute owner, lowercase, with the trailing dot.
    pub owner: String,
    pub ttl: u32,
    /// Type mnemonic, upper case.
    pub rtype: String,
    pub rdata: Vec<Token>,
    /// `$ORIGIN` in force (absolute, trailing dot): relative names in the
    /// rdata are relative to it.
    pub origin: Arc<str>,
}

/// What the reader produces: records, and entries it could not read.
#[derive(Debug, Clone)]
pub enum Item {
    Record(RawRecord),
    /// An entry that is not a record (bad syntax, another class, an
    /// unreadable include): skipped, reported.
    Problem {
        at: Location,
        message: String,
    },
}

/// The file itself could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ZoneFileError {
    #[error("failed to open zone file {file}: {source}")]
    Open {
        file: String,
        source: std::io::Error,
    },
    #[error("failed to read zone file {file}: {source}")]
    Syntax { file: String, source: LexError },
}

/// Reading state that carries from entry to entry.
struct State {
    origin: Arc<str>,
    default_ttl: Option<u32>,
    last_ttl: Option<u32>,
    last_owner: Option<String>,
}

/// Reads `file` with `origin` (the zone name) and hands every item to `sink`.
pub fn read(file: &Path, origin: &str, sink: &mut dyn FnMut(Item)) -> Result<(), ZoneFileError> {
    let mut state = State {
        origin: Arc::from(absolute(origin)),
        default_ttl: None,
        last_ttl: None,
        last_owner: None,
    };
    read_file(file, &mut state, 0, sink)
}

fn absolute(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with('.') {
        lower
    } else {
        format!("{lower}.")
    }
}

fn read_file(
    file: &Path,
    state: &mut State,
    depth: usize,
    sink: &mut dyn FnMut(Item),
) -> Result<(), ZoneFileError> {
    let shown: Arc<str> = Arc::from(file.display().to_string());
    let f = std::fs::File::open(file).map_err(|source| ZoneFileError::Open {
        file: shown.to_string(),
        source,
    })?;
    let mut lexer = Lexer::new(BufReader::with_capacity(1 << 16, f));
    while let Some(entry) = lexer.next_entry().map_err(|source| ZoneFileError::Syntax {
        file: shown.to_string(),
        source,
    })? {
        let at = Location {
            file: shown.clone(),
            line: entry.line,
        };
        if let Err(message) = entry_item(file, &entry, &at, state, depth, sink) {
            sink(Item::Problem { at, message });
        }
    }
    Ok(())
}

fn entry_item(
    file: &Path,
    entry: &Entry,
    at: &Location,
    state: &mut State,
    depth: usize,
    sink: &mut dyn FnMut(Item),
) -> Result<(), String> {
    let first = &entry.tokens[0];
    if !entry.blank_owner && first.text.starts_with('$') {
        let args = &entry.tokens[1..];
        return match first.text.to_ascii_uppercase().as_str() {
            "$ORIGIN" => {
                let name = args.first().ok_or("$ORIGIN needs a name")?;
                state.origin = Arc::from(resolve(&name.text, &state.origin));
                Ok(())
            }
            "$TTL" => {
                let t = args.first().ok_or("$TTL needs a TTL")?;
                let ttl = parse_ttl(&t.text).ok_or_else(|| format!("bad $TTL {:?}", t.text))?;
                state.default_ttl = Some(ttl);
                Ok(())
            }
            "$INCLUDE" => include(file, args, state, depth, sink),
            "$GENERATE" => generate(args, at, state, sink),
            other => Err(format!("unknown directive {other}")),
        };
    }
    let (owner, rest) = if entry.blank_owner {
        let owner = state
            .last_owner
            .clone()
            .ok_or("no owner name given and none before it")?;
        (owner, &entry.tokens[..])
    } else {
        let owner = resolve(&first.text, &state.origin);
        state.last_owner = Some(owner.clone());
        (owner, &entry.tokens[1..])
    };
    let record = record(owner, rest, at, state)?;
    sink(Item::Record(record));
    Ok(())
}

/// `[ttl] [class] type rdata...` (TTL and class in either order).
fn record(
    owner: String,
    tokens: &[Token],
    at: &Location,
    state: &mut State,
) -> Result<RawRecord, String> {
    let mut ttl = None;
    let mut class_seen = false;
    let mut i = 0;
    let rtype = loop {
        let t = tokens.get(i).ok_or("no record type")?;
        i += 1;
        if t.quoted {
            return Err(format!("expected a record type, found {}", t.text));
        }
        if ttl.is_none() && t.text.as_bytes()[0].is_ascii_digit() {
            ttl = Some(parse_ttl(&t.text).ok_or_else(|| format!("bad TTL {:?}", t.text))?);
            continue;
        }
        if !class_seen && is_class(&t.text) {
            if !t.text.eq_ignore_ascii_case("IN") {
                return Err(format!(
                    "class {} is not IN: only IN records are imported",
                    t.text
                ));
            }
            class_seen = true;
            continue;
        }
        break t.text.to_ascii_uppercase();
    };
    let rdata = tokens[i..].to_vec();
    let ttl = match ttl {
        Some(t) => {
            state.last_ttl = Some(t);
            t
        }
        None => match (state.default_ttl, state.last_ttl) {
            (Some(t), _) | (None, Some(t)) => t,
            // BIND: "no TTL specified; using SOA MINTTL instead".
            (None, None) if rtype == "SOA" && rdata.len() == 7 => {
                let t = parse_ttl(&rdata[6].text).ok_or("bad SOA minimum")?;
                state.last_ttl = Some(t);
                t
            }
            (None, None) => return Err("no TTL specified (and no $TTL before it)".into()),
        },
    };
    Ok(RawRecord {
        at: at.clone(),
        owner,
        ttl,
        rtype,
        rdata,
        origin: state.origin.clone(),
    })
}

fn is_class(t: &str) -> bool {
    let u = t.to_ascii_uppercase();
    matches!(
        u.as_str(),
        "IN" | "CH" | "CHAOS" | "HS" | "HESIOD" | "CS" | "NONE" | "ANY"
    ) || u
        .strip_prefix("CLASS")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Makes `name` absolute against `origin` (`@` is the origin), lowercase.
pub fn resolve(name: &str, origin: &str) -> String {
    if name == "@" {
        return origin.to_owned();
    }
    let lower = name.to_ascii_lowercase();
    if lower.ends_with('.') && !lower.ends_with("\\.") {
        lower
    } else if origin == "." {
        format!("{lower}.")
    } else {
        format!("{lower}.{origin}")
    }
}

/// A TTL as BIND reads it: seconds, or numbers with units (`1w2d3h4m5s`).
pub fn parse_ttl(text: &str) -> Option<u32> {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok();
    }
    let mut total: u64 = 0;
    let mut num: Option<u64> = None;
    for b in text.bytes() {
        if b.is_ascii_digit() {
            num = Some(num.unwrap_or(0).checked_mul(10)? + u64::from(b - b'0'));
            continue;
        }
        let unit = match b.to_ascii_lowercase() {
            b'w' => 604_800,
            b'd' => 86_400,
            b'h' => 3_600,
            b'm' => 60,
            b's' => 1,
            _ => return None,
        };
        total = total.checked_add(num.take()?.checked_mul(unit)?)?;
    }
    if num.is_some() {
        return None;
    }
    u32::try_from(total).ok()
}

fn include(
    file: &Path,
    args: &[Token],
    state: &mut State,
    depth: usize,
    sink: &mut dyn FnMut(Item),
) -> Result<(), String> {
    if depth >= MAX_INCLUDE_DEPTH {
        return Err(format!("$INCLUDE nested deeper than {MAX_INCLUDE_DEPTH}"));
    }
    let name = args.first().ok_or("$INCLUDE needs a file name")?;
    let name = name.text.trim_matches('"');
    let path = Path::new(name);
    let path: PathBuf = if path.is_absolute() {
        path.to_owned()
    } else {
        file.parent().unwrap_or(Path::new(".")).join(path)
    };
    let saved_origin = state.origin.clone();
    let saved_owner = state.last_owner.clone();
    if let Some(o) = args.get(1) {
        state.origin = Arc::from(resolve(&o.text, &saved_origin));
    }
    let result = read_file(&path, state, depth + 1, sink).map_err(|e| e.to_string());
    state.origin = saved_origin;
    state.last_owner = saved_owner;
    result
}

/// `$GENERATE start-stop[/step] lhs [ttl] [class] type rhs`.
fn generate(
    args: &[Token],
    at: &Location,
    state: &mut State,
    sink: &mut dyn FnMut(Item),
) -> Result<(), String> {
    let range = args.first().ok_or("$GENERATE needs a range")?;
    let (bounds, step) = match range.text.split_once('/') {
        Some((b, s)) => (b, s.parse::<u64>().map_err(|_| "bad $GENERATE step")?),
        None => (range.text.as_str(), 1),
    };
    let (start, stop) = bounds.split_once('-').ok_or("bad $GENERATE range")?;
    let start: u64 = start.parse().map_err(|_| "bad $GENERATE range start")?;
    let stop: u64 = stop.parse().map_err(|_| "bad $GENERATE range stop")?;
    if stop < start || step == 0 || (stop - start) / step >= MAX_GENERATE {
        return Err(format!(
            "$GENERATE range {} is empty or too large",
            range.text
        ));
    }
    let lhs = args.get(1).ok_or("$GENERATE needs an owner template")?;
    let rest = args.get(2..).unwrap_or_default();
    let mut i = start;
    while i <= stop {
        let owner = resolve(&substitute(&lhs.text, i)?, &state.origin);
        let mut tokens = Vec::with_capacity(rest.len());
        for t in rest {
            let text = substitute(&t.text, i)?;
            if t.quoted {
                tokens.push(Token { text, quoted: true });
            } else {
                tokenize(&text, 0, &mut tokens).map_err(str::to_owned)?;
            }
        }
        let record = record(owner, &tokens, at, state)?;
        sink(Item::Record(record));
        i += step;
    }
    Ok(())
}

/// Replaces `$` and `${offset[,width[,base]]}` with the iterator; `\$` is a
/// literal `$`.
fn substitute(template: &str, i: u64) -> Result<String, String> {
    let b = template.as_bytes();
    let mut out = String::with_capacity(template.len() + 8);
    let mut k = 0;
    while k < b.len() {
        match b[k] {
            b'\\' if b.get(k + 1) == Some(&b'$') => {
                out.push('$');
                k += 2;
            }
            b'$' if b.get(k + 1) == Some(&b'{') => {
                let end = template[k..]
                    .find('}')
                    .ok_or("unterminated ${...} in $GENERATE")?;
                let spec = &template[k + 2..k + end];
                let mut parts = spec.split(',');
                let offset: i64 = parts
                    .next()
                    .unwrap_or("0")
                    .trim()
                    .parse()
                    .map_err(|_| "bad $GENERATE offset")?;
                let width: usize = parts
                    .next()
                    .unwrap_or("0")
                    .trim()
                    .parse()
                    .map_err(|_| "bad $GENERATE width")?;
                let base = parts.next().unwrap_or("d").trim();
                let v = i64::try_from(i).map_err(|_| "bad $GENERATE value")? + offset;
                let v = u64::try_from(v).map_err(|_| "$GENERATE offset makes a negative value")?;
                let s = match base {
                    "d" => format!("{v:0width$}"),
                    "o" => format!("{v:0width$o}"),
                    "x" => format!("{v:0width$x}"),
                    "X" => format!("{v:0width$X}"),
                    other => {
                        return Err(format!(
                            "$GENERATE format {other:?} is not supported (d, o, x, X)"
                        ));
                    }
                };
                out.push_str(&s);
                k += end + 1;
            }
            b'$' => {
                out.push_str(&i.to_string());
                k += 1;
            }
            _ => {
                let ch = template[k..].chars().next().unwrap_or_default();
                out.push(ch);
                k += ch.len_utf8();
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_take_units() {
        assert_eq!(parse_ttl("3600"), Some(3600));
        assert_eq!(parse_ttl("1h30m"), Some(5400));
        assert_eq!(parse_ttl("1W"), Some(604_800));
        assert_eq!(parse_ttl("1h3"), None);
        assert_eq!(parse_ttl("x"), None);
    }

    #[test]
    fn names_resolve_against_the_origin() {
        assert_eq!(resolve("@", "example.com."), "example.com.");
        assert_eq!(resolve("WWW", "example.com."), "www.example.com.");
        assert_eq!(resolve("a.b.", "example.com."), "a.b.");
    }

    #[test]
    fn generate_substitutes_offsets_widths_and_bases() {
        assert_eq!(substitute("host-$", 7).unwrap(), "host-7");
        assert_eq!(substitute("h${10,3,d}", 7).unwrap(), "h017");
        assert_eq!(substitute("${0,4,x}", 255).unwrap(), "00ff");
        assert_eq!(substitute("a\\$b", 1).unwrap(), "a$b");
    }
}
