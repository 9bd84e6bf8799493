//! YAML in and out, one way for the whole crate (the CRDs `crds` prints, the
//! objects `render` writes, the manifests local mode and `render` load, the
//! in-memory API's apply bodies), on serde-saphyr (serde_yaml is no longer
//! maintained; kube-client already depends on serde-saphyr).
//!
//! Reading follows YAML 1.2's core schema, as serde_yaml did: `yes`, `on`,
//! `012` and `1_000` stay strings, only `true`/`false` are booleans. A
//! mapping that repeats a key is an error (kubectl refuses it too) rather
//! than silently keeping one value. [`documents`] is the one multi-document
//! reader: it splits at `---` lines itself (as kubectl does), so one broken
//! document cannot take the ones after it along, and reports each document
//! with the 1-based line it starts on and errors with file line numbers.
//!
//! A leaf: uses nothing else of this crate. Pure, no I/O. Error messages
//! quote positions, never the document's content.

use std::sync::OnceLock;

use regex::Regex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use serde_saphyr::Error;
pub use serde_saphyr::SerializeError;

/// saphyr's advice in its duplicate-key message names its own API.
const DUPLICATE_KEY_ADVICE: &str = ", set DuplicateKeyPolicy in Options if acceptable";

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        // One-line messages: they go into status, Events and tables.
        with_snippet: false,
    }
}

/// One YAML document as `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_saphyr::from_str_with_options(text, options())
}

/// [`from_str`] of UTF-8 bytes.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    serde_saphyr::from_slice_with_options(bytes, options())
}

/// `value` as one YAML document (no leading `---`). Multi-line strings are
/// written as literal blocks; long lines are not folded.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, SerializeError> {
    let mut out = String::new();
    let options = serde_saphyr::ser_options! { folded_wrap_chars: usize::MAX };
    serde_saphyr::to_fmt_writer_with_options(&mut out, value, options)?;
    Ok(out)
}

/// One document of a multi-document text.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 1-based line of the text where the document starts (after its `---`).
    pub line: usize,
    /// The document, or why it is not YAML (positions count from the top
    /// of the text).
    pub value: Result<Value, String>,
}

/// Every non-empty document of `text`, in order. Documents are separated by
/// `---` alone on a line (a comment may follow); a document that is empty,
/// only comments or `null` is skipped (a leading or trailing `---` adds
/// nothing). A document that fails to parse is reported and the next one
/// is read as usual.
pub fn documents(text: &str) -> Vec<Document> {
    let mut out = Vec::new();
    for (line, chunk) in split(text) {
        match serde_saphyr::from_multiple_with_options::<Value>(chunk, options()) {
            Ok(values) => out.extend(
                values
                    .into_iter()
                    .filter(|v| !v.is_null())
                    .map(|v| Document { line, value: Ok(v) }),
            ),
            Err(e) => out.push(Document {
                line,
                value: Err(message(&e, line - 1)),
            }),
        }
    }
    out
}

/// Splits `text` at `---` separator lines; yields each chunk with the
/// 1-based line it starts on.
fn split(text: &str) -> Vec<(usize, &str)> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if is_separator(line) {
            chunks.push((start_line, &text[start..offset]));
            start = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    chunks.push((start_line, &text[start..]));
    chunks
}

/// `---` alone on its line, optionally followed by a comment.
fn is_separator(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("---") else {
        return false;
    };
    let rest = rest.trim();
    rest.is_empty() || rest.starts_with('#')
}

/// The parser's message with its "line N" positions, counted within one
/// document, counted from the top of the text.
fn message(e: &Error, offset: usize) -> String {
    static LINE: OnceLock<Regex> = OnceLock::new();
    let re = LINE.get_or_init(|| Regex::new(r"\bline (\d+)").expect("constant pattern compiles"));
    let text = e.to_string().replace(DUPLICATE_KEY_ADVICE, "");
    re.replace_all(&text, |c: &regex::Captures<'_>| {
        let n: usize = c[1].parse().unwrap_or(0);
        format!("line {}", n + offset)
    })
    .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<(usize, Result<Value, String>)> {
        documents(text)
            .into_iter()
            .map(|d| (d.line, d.value))
            .collect()
    }

    #[test]
    fn split_keeps_line_numbers_and_ignores_inline_dashes() {
        let text = "a: 1\n---\nb: 2\n--- # next\nc: |\n  ---x\n";
        let chunks = split(text);
        assert_eq!(
            chunks,
            vec![(1, "a: 1\n"), (3, "b: 2\n"), (5, "c: |\n  ---x\n")]
        );
        assert!(!is_separator("---x\n"));
        assert!(is_separator("---   \n"));
    }

    #[test]
    fn documents_are_numbered_by_their_first_line_and_empty_ones_skipped() {
        let text = "---\na: 1\n---\n# only a comment\n---\n\n---\nb: 2\n---\n";
        let docs = lines(text);
        assert_eq!(docs.len(), 2, "{docs:?}");
        assert_eq!(docs[0], (2, Ok(serde_json::json!({"a": 1}))));
        assert_eq!(docs[1], (8, Ok(serde_json::json!({"b": 2}))));
        assert!(lines("").is_empty());
        assert!(lines("---\n---\n").is_empty());
        assert!(lines("null\n").is_empty());
    }

    #[test]
    fn a_broken_document_is_reported_at_its_file_line_and_the_next_is_read() {
        let docs = lines("a: 1\n---\nb: [1\nc: 2\n---\nd: 4\n");
        assert_eq!(docs.len(), 3, "{docs:?}");
        assert_eq!(docs[1].0, 3);
        let err = docs[1].1.clone().unwrap_err();
        assert!(err.contains("line 4"), "{err}");
        assert_eq!(docs[2], (6, Ok(serde_json::json!({"d": 4}))));
    }

    #[test]
    fn yaml_1_2_core_schema_and_no_duplicate_keys() {
        let v: Value = from_str("a: yes\nb: on\nc: 012\nd: 1_000\ne: true\nf: 0x1F\n").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": "yes", "b": "on", "c": "012", "d": "1_000", "e": true, "f": 31})
        );
        let err = from_str::<Value>("a: 1\na: 2\n").unwrap_err().to_string();
        assert!(err.contains("duplicate mapping key: a"), "{err}");
        let docs = lines("x: 1\n---\na: 1\na: 2\n");
        let err = docs[1].1.clone().unwrap_err();
        assert!(
            err.contains("line 4") && !err.contains("DuplicateKeyPolicy"),
            "{err}"
        );
    }

    #[test]
    fn written_yaml_reads_back_and_quotes_what_yaml_1_1_would_misread() {
        let v = serde_json::json!({
            "s": "multi\nline\n", "yes": "yes", "n": "012", "t": "true",
            "long": "x ".repeat(80), "list": [{"a": 1}], "empty": {}
        });
        let text = to_string(&v).unwrap();
        assert!(text.contains("s: |\n  multi\n  line\n"), "{text}");
        assert!(text.contains("\"yes\": \"yes\""), "{text}");
        assert!(!text.contains(">"), "long lines are not folded: {text}");
        // YAML 1.1 readers (kubectl, the API server) take these for booleans.
        for word in ["y", "Y", "yes", "No", "on", "OFF"] {
            let text = to_string(&serde_json::json!([word])).unwrap();
            assert_eq!(text, format!("- \"{word}\"\n"));
        }
        assert_eq!(from_str::<Value>(&text).unwrap(), v);
    }
}
