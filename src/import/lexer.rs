//! The master-file tokenizer: splits a zone file, read line by line, into
//! entries (one record or directive, parentheses joining lines) of tokens,
//! as BIND's `isc_lex` does for `named-checkzone`. Comments (`;`) end at the
//! line; quoted strings keep their quotes and escapes verbatim (the rdata
//! parsers decode them); a backslash escapes the next character or `\DDD`
//! outside quotes too. Pure apart from the reader it is given; holds one
//! entry at a time, never the file.

use std::io::BufRead;

/// One token of an entry, as written (quotes and escapes included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub text: String,
    pub quoted: bool,
}

/// One logical entry: the tokens of a record or directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line the entry starts on.
    pub line: usize,
    /// The first line starts with blank space: the owner is omitted.
    pub blank_owner: bool,
    pub tokens: Vec<Token>,
}

/// A syntax error at a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LexError {
    pub line: usize,
    pub message: String,
}

/// Streams entries out of a reader.
pub struct Lexer<R> {
    src: R,
    line: usize,
    buf: String,
}

impl<R: BufRead> Lexer<R> {
    pub fn new(src: R) -> Self {
        Lexer {
            src,
            line: 0,
            buf: String::new(),
        }
    }

    fn read_line(&mut self) -> Result<bool, LexError> {
        self.buf.clear();
        let n = self.src.read_line(&mut self.buf).map_err(|e| LexError {
            line: self.line + 1,
            message: format!("failed to read: {e}"),
        })?;
        if n > 0 {
            self.line += 1;
        }
        Ok(n > 0)
    }

    /// The next entry, or `None` at the end of input.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, LexError> {
        loop {
            if !self.read_line()? {
                return Ok(None);
            }
            let start = self.line;
            let blank_owner = self.buf.starts_with([' ', '\t']);
            let mut tokens = Vec::new();
            let mut depth = 0usize;
            loop {
                depth = tokenize(&self.buf, depth, &mut tokens).map_err(|message| LexError {
                    line: self.line,
                    message: message.into(),
                })?;
                if depth == 0 {
                    break;
                }
                if !self.read_line()? {
                    return Err(LexError {
                        line: start,
                        message: "unbalanced parentheses: '(' never closed".into(),
                    });
                }
            }
            if !tokens.is_empty() {
                return Ok(Some(Entry {
                    line: start,
                    blank_owner,
                    tokens,
                }));
            }
        }
    }
}

/// Tokenizes one physical line at parenthesis depth `depth`; returns the
/// depth at its end.
pub fn tokenize(line: &str, mut depth: usize, out: &mut Vec<Token>) -> Result<usize, &'static str> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b';' => break,
            b'(' => {
                depth += 1;
                i += 1;
            }
            b')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or("unbalanced parentheses: ')' without '('")?;
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match b.get(i) {
                        None | Some(b'\n') => return Err("unterminated quoted string"),
                        Some(b'\\') => i += 2,
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                let end = i.min(b.len());
                out.push(Token {
                    text: line[start..end].to_owned(),
                    quoted: true,
                });
            }
            _ => {
                let start = i;
                while i < b.len() {
                    match b[i] {
                        b'\\' => i += 2,
                        // A quoted part inside a word (`alpn="h2,h3"`)
                        // belongs to the word, as BIND reads it.
                        b'"' => {
                            i += 1;
                            loop {
                                match b.get(i) {
                                    None | Some(b'\n') => return Err("unterminated quoted string"),
                                    Some(b'\\') => i += 2,
                                    Some(b'"') => {
                                        i += 1;
                                        break;
                                    }
                                    Some(_) => i += 1,
                                }
                            }
                        }
                        b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')' => break,
                        _ => i += 1,
                    }
                }
                let end = i.min(b.len());
                out.push(Token {
                    text: line[start..end].to_owned(),
                    quoted: false,
                });
            }
        }
    }
    Ok(depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<Entry> {
        let mut l = Lexer::new(text.as_bytes());
        let mut out = Vec::new();
        while let Some(e) = l.next_entry().unwrap() {
            out.push(e);
        }
        out
    }

    fn texts(e: &Entry) -> Vec<&str> {
        e.tokens.iter().map(|t| t.text.as_str()).collect()
    }

    #[test]
    fn parentheses_join_lines_and_comments_end_at_the_line() {
        let e = entries(
            "@ IN SOA ns1 host ( 1 ; serial\n 2 3 ; x\n 4 5 )\n\n; only\n  www A 1.2.3.4\n",
        );
        assert_eq!(e.len(), 2);
        assert_eq!(
            texts(&e[0]),
            ["@", "IN", "SOA", "ns1", "host", "1", "2", "3", "4", "5"]
        );
        assert!(!e[0].blank_owner);
        assert_eq!(e[1].line, 6);
        assert!(e[1].blank_owner);
    }

    #[test]
    fn quoted_strings_keep_escapes_and_semicolons() {
        let e = entries("t TXT \"a;b \\\" c\" x\\;y \"\\065\" alpn=\"h2,h3 x\"\n");
        assert_eq!(
            texts(&e[0]),
            [
                "t",
                "TXT",
                "\"a;b \\\" c\"",
                "x\\;y",
                "\"\\065\"",
                "alpn=\"h2,h3 x\""
            ]
        );
        assert!(e[0].tokens[2].quoted);
    }

    #[test]
    fn unbalanced_input_is_an_error_with_its_line() {
        let mut l = Lexer::new("a A (\n1.2.3.4\n".as_bytes());
        assert_eq!(l.next_entry().unwrap_err().line, 1);
        let mut l = Lexer::new("\na TXT \"open\n".as_bytes());
        assert_eq!(l.next_entry().unwrap_err().line, 2);
    }
}
