use super::*;

fn z() -> ZoneName {
    ZoneName::parse("example.com").unwrap()
}

fn p(t: &str, v: &str) -> Result<String, ValidationError> {
    Rdata::parse(t.parse().unwrap(), v, &z()).map(|r| r.to_string())
}

const H20: &str = "abcdef0123456789abcdef0123456789abcdef01";
const H32: &str = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789";

/// (type, what a user may write, what `dig AXFR` printed for it). Every
/// right-hand side was printed by dig 9.18.49 and 9.20.30 (identically)
/// for a zone holding the left-hand side; each must also parse back to
/// itself, since the operator reads served RRsets through the same parser.
fn dig_cases() -> Vec<(&'static str, String, String)> {
    let s = |a: &str| a.to_string();
    let up = |h: &str| h.to_ascii_uppercase();
    vec![
        ("A", s("192.0.2.1"), s("192.0.2.1")),
        ("AAAA", s("2001:DB8:0:0:0:0:0:1"), s("2001:db8::1")),
        ("AAAA", s("::ffff:192.0.2.1"), s("::ffff:192.0.2.1")),
        ("AAAA", s("::192.0.2.1"), s("::192.0.2.1")),
        ("AAAA", s("::2:3"), s("::0.2.0.3")),
        ("AAAA", s("2001:db8:0:1:0:0:0:0"), s("2001:db8:0:1::")),
        ("AAAA", s("1:0:0:2:0:0:3:4"), s("1::2:0:0:3:4")),
        ("CNAME", s("WWW.Example.com."), s("www.example.com.")),
        ("CNAME", s("www"), s("www.example.com.")),
        ("DNAME", s("Other.Example."), s("other.example.")),
        ("PTR", s("Host.Example."), s("host.example.")),
        ("NS", s("ns.Other.example."), s("ns.other.example.")),
        ("MX", s("10  Mail.Other.ORG."), s("10 mail.other.org.")),
        ("MX", s("0 ."), s("0 .")),
        ("SRV", s("0 5 5060 Sip"), s("0 5 5060 sip.example.com.")),
        (
            "CAA",
            s("0 issue letsencrypt.org"),
            s("0 issue \"letsencrypt.org\""),
        ),
        ("CAA", s("128 ISSUE \"ca;x\""), s("128 issue \"ca;x\"")),
        (
            "CAA",
            s("0 iodef \"mailto:a@b.c\""),
            s("0 iodef \"mailto:a@b.c\""),
        ),
        ("CAA", s("0 issuewild \";\""), s("0 issuewild \";\"")),
        (
            "CAA",
            s(r#"0 issue "ca;x \"q\" caf\195\169""#),
            s(r#"0 issue "ca;x \"q\" caf\195\169""#),
        ),
        (
            "CAA",
            s(r"0 issue caf\195\169"),
            s(r#"0 issue "caf\195\169""#),
        ),
        ("CAA", s("0 tbs \"\""), s("0 tbs \"\"")),
        ("TXT", s("v=spf1 -all"), s("\"v=spf1 -all\"")),
        ("TXT", s("say \"hi\""), s(r#""say \"hi\"""#)),
        ("TXT", s(r#""a b" "c\"d" e"#), s(r#""a b" "c\"d" "e""#)),
        (
            "TXT",
            s(r#""caf\195\169 \\ \; \@ \( ~""#),
            s(r#""caf\195\169 \\ ; @ ( ~""#),
        ),
        ("TXT", s("\"\""), s("\"\"")),
        (
            "TXT",
            s(r#""tab\009here" "\127\128\255""#),
            s(r#""tab\009here" "\127\128\255""#),
        ),
        ("TXT", s("café"), s(r#""caf\195\169""#)),
        (
            "NAPTR",
            s("100 10 S SIP+D2U \"\" _sip._udp"),
            s("100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.example.com."),
        ),
        (
            "NAPTR",
            s(r#"100 10 "u" "E2U+sip" "!^.*$!sip:info@example.com!" ."#),
            s(r#"100 10 "u" "E2U+sip" "!^.*$!sip:info@example.com!" ."#),
        ),
        (
            "NAPTR",
            s(r#"100 10 "" "" "!a\\b\"c!x!" ."#),
            s(r#"100 10 "" "" "!a\\b\"c!x!" ."#),
        ),
        ("SSHFP", format!("1 1 {H20}"), format!("1 1 {}", up(H20))),
        (
            "SSHFP",
            format!("4 2 {H32}"),
            format!("4 2 {} {}", up(&H32[..56]), up(&H32[56..])),
        ),
        (
            "TLSA",
            format!("3 1 1 {}", &H32[..32].to_ascii_uppercase()),
            format!("3 1 1 {}", up(&H32[..32])),
        ),
        (
            "TLSA",
            format!("3 1 1 {} {}", &H32[..10], &H32[10..]),
            format!("3 1 1 {} {}", up(&H32[..56]), up(&H32[56..])),
        ),
        ("TLSA", s("3 1 0 a b"), s("3 1 0 AB")),
        (
            "DS",
            format!("12345 13 2 {H32}"),
            format!("12345 13 2 {} {}", up(&H32[..56]), up(&H32[56..])),
        ),
        (
            "DS",
            format!("12345 8 1 {H20}"),
            format!("12345 8 1 {}", up(H20)),
        ),
        ("DS", s("1 13 9 ab"), s("1 13 9 AB")),
        (
            "HTTPS",
            s("1 . alpn=h2,h3 port=443"),
            s("1 . alpn=\"h2,h3\" port=443"),
        ),
        (
            "HTTPS",
            s("1 . ALPN=\"h2,h3\" port=443"),
            s("1 . alpn=\"h2,h3\" port=443"),
        ),
        (
            "HTTPS",
            s(
                "1 . alpn=\"h2,h3\" port=\"443\" ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:DB8::1,2001:db8:0::2",
            ),
            s(
                "1 . alpn=\"h2,h3\" port=443 ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:db8::1,2001:db8::2",
            ),
        ),
        (
            "HTTPS",
            s("1 . mandatory=port,alpn alpn=h3 port=8443 ech=AEX+DQBBfwAgACB/fn8="),
            s("1 . mandatory=alpn,port alpn=\"h3\" port=8443 ech=AEX+DQBBfwAgACB/fn8="),
        ),
        ("HTTPS", s("0 Target.Example."), s("0 target.example.")),
        (
            "SVCB",
            s("2 svc.example. no-default-alpn alpn=h2 key65000=abc"),
            s("2 svc.example. alpn=\"h2\" no-default-alpn key65000=\"abc\""),
        ),
        (
            "SVCB",
            s(r#"1 . alpn="a\\,b,c\044d""#),
            s(r#"1 . alpn="a\\,b,c,d""#),
        ),
        (
            "HTTPS",
            s("1 . dohpath=/dns-query{?dns}"),
            s("1 . key7=\"/dns-query{?dns}\""),
        ),
        (
            "SVCB",
            s(r#"1 . key65000="a\"b\\c\009\255" mandatory=key65000,alpn alpn=h2"#),
            s(r#"1 . mandatory=alpn,key65000 alpn="h2" key65000="a\"b\\c\009\255""#),
        ),
        (
            "SVCB",
            s("1 . ipv6hint=::ffff:192.0.2.1,::192.0.2.1"),
            s("1 . ipv6hint=::ffff:192.0.2.1,::192.0.2.1"),
        ),
        (
            "SVCB",
            s(r#"1 . alpn="h2,a\"b,c d" port=0"#),
            s(r#"1 . alpn="h2,a\"b,c\032d" port=0"#),
        ),
        (
            "SVCB",
            s(r#"1 . alpn="a@b,c\;d,e\\\\f,g\"h,i j,k\255l,m~n,o(p)""#),
            s(r#"1 . alpn="a@b,c;d,e\\\\f,g\"h,i\032j,k\255l,m~n,o(p)""#),
        ),
        (
            "SVCB",
            s(r#"1 . key65000="a@b;c d(e)\\,f,g""#),
            s(r#"1 . key65000="a@b;c d(e)\\,f,g""#),
        ),
        (
            "SVCB",
            s("1 . key65001 key65002=\"\""),
            s("1 . key65001 key65002"),
        ),
        ("SVCB", s("1 . ech=\"\""), s("1 . ech")),
        ("SVCB", s("65535 x.Y.z."), s("65535 x.y.z.")),
        ("SVCB", s("1 . port=08"), s("1 . port=8")),
        (
            "LOC",
            s("52 22 23.000 N  4 53 32.000 E -2.00m"),
            s("52 22 23.000 N 4 53 32.000 E -2.00m 1m 10000m 10m"),
        ),
        (
            "LOC",
            s("52 22 23.5 S 4 53 32.123 W 100.5m 2m 3m 4m"),
            s("52 22 23.500 S 4 53 32.123 W 100.50m 2m 3m 4m"),
        ),
    ]
}

#[test]
fn values_print_what_dig_prints_and_read_back_unchanged() {
    for (t, input, dig) in dig_cases() {
        assert_eq!(p(t, &input).unwrap(), dig, "{t} {input}");
        assert_eq!(
            p(t, &dig).unwrap(),
            dig,
            "{t} {dig} must read back as itself"
        );
        assert_eq!(
            Rdata::parse(t.parse().unwrap(), &input, &z()).unwrap(),
            Rdata::parse(t.parse().unwrap(), &dig, &z()).unwrap(),
            "{t}: one value"
        );
    }
}

#[test]
fn a_bare_txt_keeps_its_leading_and_trailing_spaces() {
    let r = Rdata::parse(RecordType::Txt, "  indented ", &z()).unwrap();
    assert_eq!(r, Rdata::Txt(vec![b"  indented ".to_vec()]));
    assert_eq!(r.to_string(), "\"  indented \"");
    // A quoted value: the quotes say where the text is.
    let q = Rdata::parse(RecordType::Txt, " \" x\" ", &z()).unwrap();
    assert_eq!(q, Rdata::Txt(vec![b" x".to_vec()]));
    assert!(Rdata::parse(RecordType::Txt, "   ", &z()).is_err());
}

#[test]
fn long_txt_splits_into_255_byte_strings() {
    let long = "x".repeat(300);
    let r = Rdata::parse(RecordType::Txt, &long, &z()).unwrap();
    let Rdata::Txt(strings) = &r else { panic!() };
    assert_eq!(
        strings.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![255, 45]
    );
    assert_eq!(r.wire_len(), 302);
}

#[test]
fn wire_len_is_an_upper_bound() {
    let Rdata::Svcb(s) = Rdata::parse(
        RecordType::Https,
        "1 . alpn=h2,h3 port=443 ipv6hint=::1",
        &z(),
    )
    .unwrap() else {
        panic!()
    };
    // priority 2, root 1, alpn 4+6, port 4+2, ipv6hint 4+16.
    assert_eq!(s.wire_len(), 39);
    let loc = Rdata::parse(RecordType::Loc, "52 N 4 E 0m", &z()).unwrap();
    assert_eq!(loc.wire_len(), 16);
    let ds = Rdata::parse(RecordType::Ds, &format!("1 13 2 {H32}"), &z()).unwrap();
    assert_eq!(ds.wire_len(), 36);
}

#[test]
fn what_bind_refuses_is_refused_with_a_reason() {
    for (t, v) in [
        ("DS", format!("1 13 2 {H20}")),
        ("DS", format!("1 13 1 {H32}")),
        ("DS", format!("70000 13 2 {H32}")),
        ("DS", format!("1 256 2 {H32}")),
        ("DS", format!("1 13 2 {}", &H32[..63])),
        ("SSHFP", format!("1 1 {H32}")),
        ("SSHFP", format!("1 2 {H20}")),
        ("SSHFP", format!("300 1 {H20}")),
        ("TLSA", "3 1 1 -".into()),
        ("TLSA", "3 1 1".into()),
        ("CAA", "0 issue".into()),
        ("CAA", "256 issue x".into()),
        ("CAA", "0 is-sue x".into()),
        ("SVCB", "1 . mandatory=alpn".into()),
        ("SVCB", "1 . no-default-alpn".into()),
        ("SVCB", "1 . alpn=h2 alpn=h3".into()),
        ("SVCB", "1 . port=1 mandatory=mandatory".into()),
        ("SVCB", "1 . ipv4hint=1.2.3".into()),
        ("SVCB", "1 . ipv4hint=01.2.3.4".into()),
        ("HTTPS", "1 . alpn=h2 mandatory=port".into()),
        ("SVCB", "1 . alpn=,h2".into()),
        ("SVCB", "1 . alpn=\"\"".into()),
        ("SVCB", "1 . alpn".into()),
        ("SVCB", "1 . ech=!!".into()),
        ("SVCB", "1 . ech=AEX+DQBBfwAgACB/fn8".into()),
        ("SVCB", "1 . dohpath=/x".into()),
        ("SVCB", "1 . key01=abc".into()),
        ("SVCB", "1 . key65536=abc".into()),
        ("SVCB", "1 . key1=h2".into()),
        ("SVCB", "1 . key0=alpn alpn=h2".into()),
        ("SVCB", "1 . port=+8".into()),
        ("SVCB", "1 . port=65536".into()),
        ("SVCB", "1 . bogus=1".into()),
        ("SVCB", "0 . alpn=h2".into()),
        ("SVCB", "1".into()),
        ("LOC", "1 2 3.0004 N 1 E 0m".into()),
        ("LOC", "1 N 1 E 0.005m".into()),
    ] {
        assert!(p(t, &v).is_err(), "{t} {v} must be refused");
    }
}

#[test]
fn hostile_values_are_rejected() {
    assert!(p("TXT", "a\nupdate add evil. 1 A 1.2.3.4").is_err());
    assert!(p("TXT", "\"unterminated").is_err());
    assert!(p("TXT", "\"a\"b").is_err());
    assert!(p("TXT", "\"a\" b;c").is_err());
    assert!(p("A", "1.2.3.4; x").is_err());
    assert!(p("CNAME", "a b").is_err());
    assert!(p("CNAME", "a\"b").is_err());
    assert!(p("MX", "70000 mail").is_err());
    assert!(p("CAA", "0 issue a b").is_err());
    assert!(p("CAA", "0 issue a;b").is_err());
    assert!(p("SSHFP", "1 1 xyz").is_err());
    assert!("SOA".parse::<RecordType>().is_err());
    assert!(p("HTTPS", "1 . alpn=\"h2\";x").is_err());
    assert!(p("HTTPS", "1 . alpn=h2 x\\y").is_err());
    assert!(p("HTTPS", "1 . alpn=\"h2").is_err());
    assert!(p("HTTPS", "1 . key9=a\"b").is_err());
    assert!(p("LOC", "52 22 N; 4").is_err());
    assert!(p("NAPTR", "100 10 \"S\" \"SIP\" \"\"").is_err());
    // Whatever is accepted prints on one line with its strings quoted.
    for v in [
        r#"1 . key9="x\010y""#,
        r#"1 . alpn="a\010b""#,
        r#"1 . key9="a;b" alpn=";""#,
    ] {
        let out = p("SVCB", v).unwrap();
        assert!(!out.contains('\n'), "{out}");
        assert!(out.contains("\\010") || out.contains("\";\""), "{out}");
    }
}

#[test]
fn dns_server_svcb_needs_what_bind_9_20_checks() {
    let owner = |n: &str| DomainName::resolve(n, &z()).unwrap();
    let check = |n: &str, v: &str| {
        Rdata::parse(RecordType::Svcb, v, &z())
            .unwrap()
            .check_owner(RecordType::Svcb, &owner(n))
    };
    // Each verdict as BIND 9.20.30's named-checkzone gave it.
    for (name, value, ok) in [
        ("_dns", "1 . alpn=h2", false),
        ("_dns", "1 . alpn=h3", false),
        ("_dns", "1 . alpn=h2c", false),
        ("_dns", "1 . alpn=http/1.1", false),
        ("_dns", "1 . alpn=dot,h2", false),
        ("_DNS", "1 . alpn=h2", false),
        ("_dns.x", "1 . alpn=h2", false),
        ("_853._dns", "1 . alpn=h2", false),
        ("_dns._dns", "1 . alpn=h2", false),
        ("_dns", "1 . port=53", false),
        ("_dns", "0 foo.", false),
        ("_dns", "1 . alpn=dot,doq", true),
        ("_dns", "1 . alpn=H2", true),
        ("_dns", "1 . alpn=h3-29", true),
        ("_dns", "1 . alpn=h2 dohpath=/q{?dns}", true),
        ("_dns", "1 . alpn=h2 key7=\"/q{?dns}\"", true),
        ("x._dns", "1 . alpn=h2", true),
        ("_x._dns", "1 . alpn=h2", true),
        ("www", "1 . alpn=h2", true),
    ] {
        assert_eq!(check(name, value).is_ok(), ok, "{name} SVCB {value}");
    }
    // HTTPS records are not checked.
    let https = Rdata::parse(RecordType::Https, "1 . alpn=h2", &z()).unwrap();
    assert!(https.check_owner(RecordType::Https, &owner("_dns")).is_ok());
}

/// BIND's check-names and wildcard-NS rules, each verdict as nsupdate
/// 9.18.49 (check-names) or named (wildcard NS) gave it.
#[test]
fn host_names_and_wildcard_ns_follow_what_bind_refuses() {
    let owner = |n: &str| DomainName::resolve(n, &z()).unwrap();
    let check = |t: &str, n: &str, v: &str| {
        let t: RecordType = t.parse().unwrap();
        Rdata::parse(t, v, &z()).unwrap().check_owner(t, &owner(n))
    };
    for (t, name, value, ok) in [
        ("A", "a_b", "192.0.2.1", false),
        ("A", "-a", "192.0.2.1", false),
        ("A", "a-", "192.0.2.1", false),
        ("A", "a--b", "192.0.2.1", true),
        ("A", "1a", "192.0.2.1", true),
        ("A", "*", "192.0.2.1", true),
        ("AAAA", "_x", "2001:db8::1", false),
        ("TXT", "_dmarc", "\"v=DMARC1\"", true),
        ("SRV", "_sip._tcp", "0 5 5060 sip.example.com.", true),
        ("SRV", "_sip._tcp", "0 5 5060 s_p.example.com.", false),
        ("SRV", "_sip._tcp", "0 0 0 .", true),
        ("MX", "@", "10 a_b.example.", false),
        ("MX", "@", "0 .", true),
        ("NS", "sub", "ns_1.example.", false),
        ("NS", "sub", "ns1.example.", true),
        ("NS", "*", "ns1.example.", false),
        ("CNAME", "a_b", "x_y.example.", true),
    ] {
        assert_eq!(check(t, name, value).is_ok(), ok, "{name} {t} {value}");
    }
    let e = check("A", "a_b", "192.0.2.1").unwrap_err().to_string();
    assert!(
        e.contains("a_b.example.com") && e.contains("check-names"),
        "{e}"
    );
}

/// Names in rdata: named keeps the case it was given and prints it (dig
/// showed `WWW.Example.com.`), DNS compares without case, so both sides
/// fold to lowercase. Escaped labels (`\.`, `\032`) are outside the name
/// alphabet: refused from users, and a served one never parses, so it stays
/// as dig's text and differs from anything wanted (it is rewritten).
#[test]
fn rdata_names_fold_case_and_refuse_escapes() {
    for (t, v) in [
        ("CNAME", "WWW.Example.COM."),
        ("MX", "10 WWW.Example.COM."),
        ("SRV", "0 0 1 WWW.Example.COM."),
        ("HTTPS", "1 WWW.Example.COM."),
    ] {
        let out = p(t, v).unwrap();
        let last = out.split(' ').next_back().unwrap();
        assert_eq!(last, "www.example.com.", "{t} {v}");
    }
    for v in [r"a\.b.example.", r"a\032b.example.", "a b.", "é.example."] {
        assert!(p("CNAME", v).is_err(), "{v}");
        assert!(p("HTTPS", &format!("1 {v}")).is_err(), "{v}");
    }
}
