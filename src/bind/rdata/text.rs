//! Presentation-format pieces shared by the rdata types: IPv6 addresses and
//! hex blobs the way BIND prints them, and splitting a value into tokens
//! that respect quoted strings. Pure.

use std::fmt::Write as _;
use std::net::Ipv6Addr;

/// Hex data is printed in chunks of this many digits, separated by a
/// space (what `dig` prints for DS, SSHFP and TLSA; BIND 9.18 and 9.20).
const HEX_CHUNK: usize = 56;

/// An IPv6 address as BIND prints it (`inet_ntop`): RFC 5952 compression of
/// the first longest run of two or more zero groups, lowercase hex, and a
/// dotted quad for the last 32 bits when the address is IPv4-compatible
/// (`::a.b.c.d`, first 96 bits zero, other than `::` and `::1`) or
/// IPv4-mapped (`::ffff:a.b.c.d`). Rust's own `Display` differs on the
/// IPv4-compatible form (`::c000:201` where BIND prints `::192.0.2.1`).
pub fn ipv6_text(ip: &Ipv6Addr) -> String {
    let words = ip.segments();
    // The first longest run of zero words (start, length), when it is at
    // least two long.
    let mut best: Option<(usize, usize)> = None;
    let mut cur: Option<(usize, usize)> = None;
    for (i, w) in words.iter().enumerate() {
        if *w == 0 {
            let run = match cur {
                Some((base, len)) => (base, len + 1),
                None => (i, 1),
            };
            cur = Some(run);
            if best.is_none_or(|(_, l)| run.1 > l) {
                best = Some(run);
            }
        } else {
            cur = None;
        }
    }
    let best = best.filter(|(_, len)| *len >= 2);
    let mut out = String::new();
    let mut i = 0;
    while i < 8 {
        if let Some((base, len)) = best
            && i == base
        {
            out.push(':');
            i += len;
            if i == 8 {
                out.push(':');
            }
            continue;
        }
        if i != 0 {
            out.push(':');
        }
        // The embedded IPv4 forms inet_ntop knows.
        if i == 6
            && best.is_some_and(|(base, len)| {
                base == 0 && (len == 6 || (len == 5 && words[5] == 0xffff))
            })
        {
            let [.., a, b, c, d] = ip.octets();
            let _ = write!(out, "{a}.{b}.{c}.{d}");
            return out;
        }
        let _ = write!(out, "{:x}", words[i]);
        i += 1;
    }
    out
}

/// Hex in upper case, in `HEX_CHUNK`-digit chunks separated by spaces.
pub fn hex_text(bytes: &[u8]) -> String {
    let hex = hex::encode_upper(bytes);
    let chunks: Vec<&str> = hex
        .as_bytes()
        .chunks(HEX_CHUNK)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    chunks.join(" ")
}

/// Decodes hex given as one or more whitespace-separated fields (BIND
/// accepts the data split anywhere, and prints it split).
pub fn hex_data(fields: &[&str]) -> Option<Vec<u8>> {
    let joined: String = fields.concat();
    if joined.is_empty() {
        return None;
    }
    hex::decode(joined).ok()
}

/// Splits a value at whitespace outside double quotes. Tokens keep their
/// quotes and backslash escapes (`alpn="h2,h3 x"` is one token); an
/// unterminated quote or a trailing lone backslash is an error.
pub fn tokens(text: &str) -> Result<Vec<&str>, &'static str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let mut quoted = false;
        while i < bytes.len() && (quoted || !bytes[i].is_ascii_whitespace()) {
            match bytes[i] {
                b'\\' => {
                    if i + 1 >= bytes.len() {
                        return Err("ends in a lone backslash");
                    }
                    i += 2;
                    continue;
                }
                b'"' => quoted = !quoted,
                _ => {}
            }
            i += 1;
        }
        if quoted {
            return Err("has an unterminated quoted string");
        }
        out.push(&text[start..i]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_prints_like_inet_ntop() {
        let t = |s: &str| ipv6_text(&s.parse().unwrap());
        assert_eq!(t("2001:DB8:0:0:0:0:0:1"), "2001:db8::1");
        assert_eq!(t("::"), "::");
        assert_eq!(t("::1"), "::1");
        assert_eq!(t("::192.0.2.1"), "::192.0.2.1");
        assert_eq!(t("::2:3"), "::0.2.0.3");
        assert_eq!(t("::ffff:192.0.2.1"), "::ffff:192.0.2.1");
        assert_eq!(t("::ffff:0:1"), "::ffff:0.0.0.1");
        assert_eq!(t("1:0:0:2:0:0:0:3"), "1:0:0:2::3");
        assert_eq!(t("1:0:0:2:0:0:3:4"), "1::2:0:0:3:4");
        assert_eq!(t("0:0:1::"), "0:0:1::");
        assert_eq!(t("2001:db8:0:1::"), "2001:db8:0:1::");
        assert_eq!(t("2001:0:0:1::1"), "2001:0:0:1::1");
        assert_eq!(t("1:2:3:4:5:6:7:8"), "1:2:3:4:5:6:7:8");
        assert_eq!(t("1:0:3:4:5:6:7:8"), "1:0:3:4:5:6:7:8");
        assert_eq!(t("fe80::"), "fe80::");
    }

    #[test]
    fn hex_chunks_like_dig() {
        assert_eq!(hex_text(&[0xab, 0x01]), "AB01");
        let long = hex_text(&[0xab; 32]);
        assert_eq!(long.split(' ').map(str::len).collect::<Vec<_>>(), [56, 8]);
        assert_eq!(hex_data(&["ab", "CD"]), Some(vec![0xab, 0xcd]));
        assert_eq!(hex_data(&["abc"]), None);
        assert_eq!(hex_data(&[]), None);
    }

    #[test]
    fn tokens_respect_quotes() {
        assert_eq!(
            tokens(r#"1 . alpn="h2, h3" key9="a\" b" x\ y"#).unwrap(),
            ["1", ".", r#"alpn="h2, h3""#, r#"key9="a\" b""#, r"x\ y"]
        );
        assert!(tokens(r#"alpn="h2"#).is_err());
        assert!(tokens("a\\").is_err());
    }
}
