//! A small typed writer for named.conf syntax (`word "string" { ... };`).
//! Pure, no I/O.
//!
//! Keywords are `&'static str`, so only text written in this crate can appear
//! unquoted; every runtime value goes through a typed token (quoted string,
//! number, address, network, address-match element). Quoted strings are
//! escaped even though validation already forbids quotes and backslashes,
//! so a validation gap cannot become a config injection. Output is
//! deterministic: it is exactly the sequence of calls, tab-indented.

use std::fmt::Write as _;
use std::net::IpAddr;

use ipnet::IpNet;

use super::types::{AclElement, AclTarget, Endpoint, KeyName};

/// One token in a named.conf statement.
#[derive(Debug, Clone)]
pub enum Tok<'a> {
    /// A keyword or fixed word chosen by this crate.
    Kw(&'static str),
    /// A double-quoted, escaped string.
    Str(&'a str),
    /// A decimal number.
    Num(u64),
    /// An address.
    Ip(IpAddr),
    /// A CIDR network.
    Net(IpNet),
    /// An inline `{ a; b; }` list without the trailing `;` (for the
    /// `catalog-zones` grammar, which nests lists inside one statement).
    List(Vec<Vec<Tok<'a>>>),
}

/// Appends `s` quoted and escaped for named.conf. Control characters cannot
/// come from validated input; they are replaced rather than written raw.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn write_tok(out: &mut String, tok: &Tok<'_>) {
    match tok {
        Tok::Kw(k) => out.push_str(k),
        Tok::Str(s) => out.push_str(&quote(s)),
        Tok::Num(n) => {
            let _ = write!(out, "{n}");
        }
        Tok::Ip(ip) => {
            let _ = write!(out, "{ip}");
        }
        Tok::List(items) => {
            out.push('{');
            for item in items {
                out.push(' ');
                write_toks(out, item);
                out.push(';');
            }
            out.push_str(" }");
        }
        Tok::Net(net) => {
            if net.prefix_len() == net.max_prefix_len() {
                let _ = write!(out, "{}", net.addr());
            } else {
                let _ = write!(out, "{net}");
            }
        }
    }
}

/// Space-separated tokens; a `!` negation is glued to the element it negates.
fn write_toks(out: &mut String, toks: &[Tok<'_>]) {
    for (i, t) in toks.iter().enumerate() {
        if i > 0 && !matches!(toks[i - 1], Tok::Kw("!")) {
            out.push(' ');
        }
        write_tok(out, t);
    }
}

/// Builds named.conf text statement by statement.
#[derive(Debug, Default)]
pub struct ConfWriter {
    out: String,
    depth: usize,
}

impl ConfWriter {
    /// An empty document.
    pub fn new() -> Self {
        Self::default()
    }

    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.out.push('\t');
        }
    }

    fn words(&mut self, toks: &[Tok<'_>]) {
        self.indent();
        write_toks(&mut self.out, toks);
    }

    /// A `// comment` line with fixed text.
    pub fn comment(&mut self, text: &'static str) -> &mut Self {
        self.indent();
        self.out.push_str("// ");
        self.out.push_str(text);
        self.out.push('\n');
        self
    }

    /// An empty line between sections.
    pub fn blank(&mut self) -> &mut Self {
        self.out.push('\n');
        self
    }

    /// `tok tok tok;`
    pub fn stmt(&mut self, toks: &[Tok<'_>]) -> &mut Self {
        self.words(toks);
        self.out.push_str(";\n");
        self
    }

    /// `tok tok { ... };` with the body written by `body`.
    pub fn block(&mut self, toks: &[Tok<'_>], body: impl FnOnce(&mut ConfWriter)) -> &mut Self {
        self.words(toks);
        if !toks.is_empty() {
            self.out.push(' ');
        }
        self.out.push_str("{\n");
        self.depth += 1;
        body(self);
        self.depth -= 1;
        self.indent();
        self.out.push_str("};\n");
        self
    }

    /// `keyword { a; b; };` on one line: short lists (addresses, keys).
    pub fn inline_list(&mut self, head: &[Tok<'_>], items: &[Vec<Tok<'_>>]) -> &mut Self {
        self.words(head);
        self.out.push_str(" {");
        for item in items {
            self.out.push(' ');
            write_toks(&mut self.out, item);
            self.out.push(';');
        }
        self.out.push_str(" };\n");
        self
    }

    /// An address match list: `keyword { !10.0.0.0/8; key "k"; any; };`.
    pub fn acl(&mut self, head: &[Tok<'_>], elements: &[AclElement]) -> &mut Self {
        let items: Vec<Vec<Tok<'_>>> = elements.iter().map(acl_tokens).collect();
        self.inline_list(head, &items)
    }

    /// A server list with ports and keys: `head { IP port P key "K"; ... };`
    /// (`primaries`, `also-notify`, `default-primaries`).
    pub fn servers(
        &mut self,
        head: &[Tok<'_>],
        servers: &[(Endpoint, Option<&KeyName>)],
    ) -> &mut Self {
        let items: Vec<Vec<Tok<'_>>> = servers
            .iter()
            .map(|(ep, key)| server_tokens(ep, *key))
            .collect();
        self.inline_list(head, &items)
    }

    /// The finished text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// Tokens for one address-match element.
pub fn acl_tokens(e: &AclElement) -> Vec<Tok<'_>> {
    let mut t = Vec::with_capacity(3);
    if e.negated {
        t.push(Tok::Kw("!"));
    }
    match &e.target {
        AclTarget::Any => t.push(Tok::Kw("any")),
        AclTarget::None => t.push(Tok::Kw("none")),
        AclTarget::Localhost => t.push(Tok::Kw("localhost")),
        AclTarget::Localnets => t.push(Tok::Kw("localnets")),
        AclTarget::Net(n) => t.push(Tok::Net(*n)),
        AclTarget::Key(k) => {
            t.push(Tok::Kw("key"));
            t.push(Tok::Str(k.as_str()));
        }
    }
    t
}

/// Tokens for `IP port P [key "K"]`.
pub fn server_tokens<'a>(ep: &Endpoint, key: Option<&'a KeyName>) -> Vec<Tok<'a>> {
    let mut t = vec![
        Tok::Ip(ep.ip),
        Tok::Kw("port"),
        Tok::Num(u64::from(ep.port)),
    ];
    if let Some(k) = key {
        t.push(Tok::Kw("key"));
        t.push(Tok::Str(k.as_str()));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_quotes_and_nests() {
        let mut w = ConfWriter::new();
        w.block(&[Tok::Kw("zone"), Tok::Str("a\"b\\c\nd")], |w| {
            w.stmt(&[Tok::Kw("type"), Tok::Kw("primary")]);
            w.acl(
                &[Tok::Kw("allow-query")],
                &[
                    AclElement::parse("!10.0.0.0/8").unwrap(),
                    AclElement::parse("key xfer").unwrap(),
                    AclElement::parse("192.0.2.1").unwrap(),
                ],
            );
        });
        assert_eq!(
            w.finish(),
            "zone \"a\\\"b\\\\c?d\" {\n\ttype primary;\n\tallow-query { !10.0.0.0/8; key \"xfer\"; 192.0.2.1; };\n};\n"
        );
    }
}
