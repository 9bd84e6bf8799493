//! Shared helpers for the import tests: zone files written for the test
//! (every syntax `named-checkzone` reads, every record type the CRDs admit,
//! a large generated zone), the `bind-operator import` binary, and RRsets as
//! BIND prints them (`named-checkzone -D`, `dig AXFR`) for comparison.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Types the operator leaves out (DNSSEC) or does not manage at all.
pub const NOT_IMPORTED: [&str; 4] = ["DNSKEY", "RRSIG", "NSEC", "HINFO"];

/// The syntax zone: every master-file feature and every admitted type.
pub const SYNTAX_ZONE: &str = r#"; every syntax named-checkzone reads
$TTL 1h
$ORIGIN example.com.
@   IN  SOA ns1 hostmaster.example.com. (
            2024010101 ; serial
            3600       ; refresh
            15M        ; retry
            2w         ; expire
            300 )      ; minimum
    IN  NS  ns1
    NS      ns2.example.com.
    MX  10 mail
    TXT "v=spf1 -all"
    CAA 0 issue "letsencrypt.org"
    DNSKEY 257 3 13 ( mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+
                      KkxLbxILfDLUT0rAK9iUzy1L53eKGQ== )
ns1     A   192.0.2.53
ns2 300 IN  A   192.0.2.54
        AAAA 2001:db8::54
mail    IN 600 A 192.0.2.25
www     CNAME   @
txt     TXT "quoted \"escape\" and semi;colon" bare\;word "\065\066C" ( "multi"
            "line" )
_sip._tcp SRV 10 60 5060 sip
sip     A 192.0.2.60
*.app   A 192.0.2.80
ptr     PTR host.example.net.
sub     NS ns.sub
ns.sub  A 192.0.2.99
sub     DS 12345 13 2 ( 8A9B0C1D2E3F405162738495A6B7C8D9
                        E0F1021324354657687980A1B2C3D4E5 )
_443._tcp.www TLSA 3 1 1 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
host    SSHFP 4 2 0123456789abcdef0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
host    HINFO "PC" "Linux"
naptr   NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp
svc     SVCB 1 . alpn="h2,h3" port=8443 ipv4hint=192.0.2.1
@       HTTPS 1 . alpn=h2
old     DNAME new.example.net.
loc     LOC 52 22 23.000 N 4 53 32.000 E -2.00m 0.00m 10000m 10m
$GENERATE 1-5 gen-$ A 192.0.2.${100,0,d}
$GENERATE 10-12/2 rev${0,3,x} CNAME gen-1
$INCLUDE sub/inc.db inc
back    A 192.0.2.200
"#;

/// Included by the syntax zone with origin `inc.example.com.`.
pub const SYNTAX_INCLUDE: &str = "; included\n@   A 192.0.2.150\nh1  A 192.0.2.151\n    TXT included\n$ORIGIN deeper.inc.example.com.\nh2  A 192.0.2.152\n";

/// Writes the syntax zone (`db.example` and `sub/inc.db`) into `dir`.
pub fn write_syntax_zone(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/inc.db"), SYNTAX_INCLUDE).unwrap();
    let file = dir.join("db.example");
    std::fs::write(&file, SYNTAX_ZONE).unwrap();
    file
}

/// A zone of `hosts` hosts, each with A, AAAA and TXT, plus MX and SRV
/// every tenth (about 3.2 records per host).
pub fn big_zone_text(zone: &str, hosts: usize) -> String {
    let mut t = format!(
        "$TTL 300\n@ IN SOA ns1.{zone}. hostmaster.{zone}. 1 3600 900 1209600 300\n  NS ns1\nns1 A 192.0.2.1\n"
    );
    for i in 0..hosts {
        let (a, b) = (i / 250, i % 250);
        t.push_str(&format!(
            "h{i} A 10.{a}.{b}.1\n  AAAA fd00::{a:x}:{b:x}\n  TXT \"host {i}\"\n"
        ));
        if i % 10 == 0 {
            t.push_str(&format!(
                "  MX 10 h{i}\n_svc._tcp.h{i} 600 SRV 0 5 80{} h{i}\n",
                i % 10
            ));
        }
    }
    t
}

/// Output of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `bind-operator import ARGS` (environment: `env`).
pub fn import(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_bind-operator"))
        .arg("import")
        .args(args)
        .envs(env.iter().copied())
        .env_remove("BIND_OPERATOR_TSIG")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// (owner, type) -> (TTL, rdata texts).
pub type Rrsets = BTreeMap<(String, String), (u32, BTreeSet<String>)>;

/// RRsets of BIND's one-record-per-line output (`named-checkzone -D`, dig
/// AXFR): SOA serial dropped (the operator sets its own), whitespace in
/// rdata normalised, types in `NOT_IMPORTED` dropped.
pub fn rrsets(text: &str) -> Rrsets {
    let mut out = Rrsets::new();
    for line in text.lines() {
        if line.starts_with(';') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[2] != "IN" {
            continue;
        }
        let (owner, ttl, rtype) = (f[0].to_ascii_lowercase(), f[1].parse().unwrap(), f[3]);
        if NOT_IMPORTED.contains(&rtype) {
            continue;
        }
        let mut rdata: Vec<&str> = f[4..].to_vec();
        if rtype == "SOA" {
            rdata.remove(2);
        }
        let e = out
            .entry((owner, rtype.to_owned()))
            .or_insert((ttl, BTreeSet::new()));
        e.1.insert(rdata.join(" "));
    }
    out
}

/// `named-checkzone -D` of `file` (run in its directory, so `$INCLUDE`
/// paths resolve as the importer resolves them).
pub fn checkzone(file: &Path, zone: &str) -> Rrsets {
    let out = Command::new("named-checkzone")
        .current_dir(file.parent().unwrap())
        .args(["-D", "-o", "-", zone])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "named-checkzone refused the test's zone:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    rrsets(&String::from_utf8_lossy(&out.stdout))
}

/// `dig AXFR` of `zone` at 127.0.0.1:port, signed with `key`
/// (`alg:name:secret`).
pub fn dig_axfr(port: u16, zone: &str, key: &str) -> Rrsets {
    let out = Command::new("dig")
        .args(["+nocmd", "+nostats", "+noall", "+answer", "+onesoa", "-p"])
        .arg(port.to_string())
        .args(["-y", key, "@127.0.0.1", zone, "AXFR"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("SOA"),
        "AXFR of {zone} failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    rrsets(&text)
}

/// Asserts two zones hold the same RRsets, listing the differences.
#[track_caller]
pub fn assert_same(expected: &Rrsets, served: &Rrsets, what: &str) {
    let mut diff = Vec::new();
    for (k, v) in expected {
        match served.get(k) {
            Some(s) if s == v => {}
            Some(s) => diff.push(format!("{k:?}: expected {v:?}, served {s:?}")),
            None => diff.push(format!("{k:?}: expected {v:?}, not served")),
        }
    }
    for (k, v) in served {
        if !expected.contains_key(k) {
            diff.push(format!("{k:?}: served {v:?}, not in the original"));
        }
    }
    assert!(
        diff.is_empty(),
        "{what}: {} RRsets differ:\n{}",
        diff.len(),
        diff.join("\n")
    );
}

/// The transfer key local mode generated for a cluster, from a pod's
/// keys.conf, as `alg:name:secret`.
pub fn transfer_key(state: &Path, pod: &str) -> String {
    let text =
        std::fs::read_to_string(state.join("default").join(pod).join("config/keys.conf")).unwrap();
    let start = text
        .find("key \"bind-operator-transfer\"")
        .unwrap_or_else(|| panic!("no transfer key in keys.conf"));
    let block = &text[start..];
    let block = &block[..block.find("};").unwrap()];
    let field = |name: &str| {
        let at = block.find(name).unwrap() + name.len();
        block[at..]
            .split(';')
            .next()
            .unwrap()
            .trim()
            .trim_matches('"')
            .to_owned()
    };
    format!(
        "{}:bind-operator-transfer:{}",
        field("algorithm"),
        field("secret")
    )
}

/// A plain named serving zone files from `dir` on a free port, transfers
/// allowed only with the TSIG key `import-key`; killed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
    _lease: crate::support_bind::PortLease,
    log: PathBuf,
}

impl Server {
    /// `zones`: (zone name, file name in `dir`).
    pub fn start(dir: &Path, zones: &[(&str, &str)], secret_b64: &str) -> Server {
        let lease = crate::support_bind::reserve_port();
        let port = lease.port;
        let mut conf = format!(
            "key \"import-key\" {{ algorithm hmac-sha256; secret \"{secret_b64}\"; }};\noptions {{\n  directory \"{}\";\n  pid-file none;\n  listen-on port {port} {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  recursion no;\n  allow-transfer {{ key \"import-key\"; }};\n}};\ncontrols {{ }};\n",
            dir.display()
        );
        for (z, f) in zones {
            conf.push_str(&format!(
                "zone \"{z}\" {{ type primary; file \"{f}\"; }};\n"
            ));
        }
        let conf_file = dir.join("server.conf");
        std::fs::write(&conf_file, conf).unwrap();
        let log = dir.join("server.log");
        let child = Command::new(bind_operator::bind::layout::locate_tool("named"))
            .arg("-g")
            .arg("-c")
            .arg(&conf_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut server = Server {
            child,
            port,
            _lease: lease,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Over TCP, as every import transfer asks: named (9.20 seen in
            // CI) may answer on UDP a moment before its TCP listener takes
            // connections.
            let out = crate::support_bind::dig(port, &[zones[0].0, "SOA", "+short", "+tcp"]);
            if out.contains(' ') {
                return server;
            }
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "named exited ({status}): {}",
                    std::fs::read_to_string(&server.log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "named never answered");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
