//! DNS-01 with the real ACME clients users run, against a zone served by
//! local mode: pebble (the ACME test CA) validates challenges by asking
//! the primary pod, lego's and certbot's rfc2136 plugins write the
//! challenge TXT with a BindTSIGKey that `spec.updatePolicy` limits to
//! TXT at the `_acme-challenge` names, and remove it afterwards. The same
//! key is refused anything else. The values here are the ones
//! docs/integrations.md shows.
//!
//! The TSIG secret reaches the clients through 0600 files in the test's
//! temp dir (lego's `RFC2136_TSIG_SECRET_FILE`, certbot's credentials
//! file, nsupdate's key file), never argv. Without pebble, lego or
//! certbot installed (Debian packages `pebble lego certbot
//! python3-certbot-dns-rfc2136`; CI installs them) a test prints SKIP.

use crate::support_e2e as support;

use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bind_operator::local::report::{PodRole, Snapshot};
use support::{Fixture, Local, WAIT, dig, pods_of};

/// The BindTSIGKey (and BIND key name) the ACME clients sign with.
const ACME_KEY: &str = "acme-dns01";
/// The algorithm of that key, as BIND, lego and cert-manager spell it.
const ACME_ALGORITHM: &str = "hmac-sha256";
/// ... and as certbot's dns-rfc2136 plugin spells it.
const CERTBOT_ALGORITHM: &str = "HMAC-SHA256";
/// Longest an ACME client may take to get a certificate here.
const ISSUE_LIMIT: Duration = Duration::from_secs(120);

/// The key, its Secret (data key `secret`, as the BindTSIGKey's
/// secretRef reads by default) and the example zone with the grants: TXT
/// only, at the challenge names of the apex (and so `*.example.com`),
/// `www` and `api`.
fn manifests(material: &str) -> (String, String) {
    let key = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {ACME_KEY}-material\ntype: Opaque\ndata:\n  secret: {}\n---\napiVersion: bind.unkin.net/v1alpha1\nkind: BindTSIGKey\nmetadata:\n  name: {ACME_KEY}\nspec:\n  clusterRef: example\n  algorithm: {ACME_ALGORITHM}\n  secretRef:\n    name: {ACME_KEY}-material\n",
        STANDARD.encode(material)
    );
    let policy = format!(
        "  updatePolicy:\n    - keyRef: {ACME_KEY}\n      match: name\n      name: _acme-challenge\n      types: [TXT]\n    - keyRef: {ACME_KEY}\n      match: name\n      name: _acme-challenge.www\n      types: [TXT]\n    - keyRef: {ACME_KEY}\n      match: name\n      name: _acme-challenge.api\n      types: [TXT]\n"
    );
    (key, policy)
}

fn which(bin: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Prints SKIP and returns false when a binary is missing.
fn have(test: &str, bins: &[&str]) -> bool {
    let missing: Vec<&str> = bins.iter().copied().filter(|b| !which(b)).collect();
    if missing.is_empty() {
        return true;
    }
    println!(
        "SKIP {test}: {} not installed (apt-get install pebble lego certbot python3-certbot-dns-rfc2136 openssl); DNS-01 was NOT checked",
        missing.join(", ")
    );
    false
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes `text` to `path` readable by its owner only.
fn write_private(path: &Path, text: &str) {
    std::fs::write(path, "").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A child process killed when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// pebble on 127.0.0.1 with a fresh self-signed TLS certificate, asking
/// `dns` for challenges.
struct Pebble {
    _child: Guard,
    /// The ACME directory URL.
    directory: String,
    /// The TLS certificate clients must trust.
    ca: PathBuf,
    log: PathBuf,
}

impl Pebble {
    fn start(dir: &Path, dns: u16) -> Pebble {
        let (cert, key) = (dir.join("pebble-cert.pem"), dir.join("pebble-key.pem"));
        let out = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-keyout",
            ])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let config = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{port}"),
            "managementListenAddress": format!("127.0.0.1:{}", free_port()),
            "certificate": cert,
            "privateKey": key,
            "httpPort": free_port(),
            "tlsPort": free_port(),
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
        }});
        let config_path = dir.join("pebble-config.json");
        std::fs::write(&config_path, config.to_string()).unwrap();
        let log = dir.join("pebble.log");
        let child = Command::new("pebble")
            .arg("-config")
            .arg(&config_path)
            .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
            ))
            .spawn()
            .expect("pebble runs");
        let pebble = Pebble {
            _child: Guard(child),
            directory: format!("https://127.0.0.1:{port}/dir"),
            ca: cert,
            log,
        };
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "pebble never listened:\n{}",
                pebble.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        pebble
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Runs `cmd` to completion within [`ISSUE_LIMIT`]; (success, output).
fn run(mut cmd: Command) -> (bool, String) {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    let child = cmd
        .stdout(Stdio::from(tmp.reopen().unwrap()))
        .stderr(Stdio::from(tmp.reopen().unwrap()))
        .spawn()
        .expect("client runs");
    let mut guard = Guard(child);
    let deadline = Instant::now() + ISSUE_LIMIT;
    let ok = loop {
        if let Some(status) = guard.0.try_wait().unwrap() {
            break status.success();
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(guard);
    (ok, std::fs::read_to_string(tmp.path()).unwrap_or_default())
}

/// The names in a PEM certificate's subjectAltName, as openssl prints them.
fn cert_names(pem: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
        .arg(pem)
        .output()
        .expect("openssl runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Everything the tests share: local mode serving example.com with the
/// ACME key granted, and the ports.
struct Setup {
    f: Fixture,
    local: Local,
    primary: u16,
    secondaries: Vec<u16>,
    material: String,
}

fn setup() -> Setup {
    let material = STANDARD.encode(rand_bytes());
    let f = Fixture::examples();
    let (key, policy) = manifests(&material);
    f.write("acme-key.yaml", &key);
    let zone = f.read("bindzone.yaml");
    assert!(zone.contains("  updateKeyRef: update-key\n"));
    f.write(
        "bindzone.yaml",
        &zone.replace(
            "  updateKeyRef: update-key\n",
            &format!("  updateKeyRef: update-key\n{policy}"),
        ),
    );
    let local = f.start(&[]);
    let s: Snapshot = local.wait_all_ready();
    let primary = support::primary(&s, "example").dns.port();
    let secondaries = pods_of(&s, "example")
        .iter()
        .filter(|p| p.role != PodRole::Primary)
        .map(|p| p.dns.port())
        .collect();
    Setup {
        f,
        local,
        primary,
        secondaries,
        material,
    }
}

fn rand_bytes() -> [u8; 32] {
    use rand::RngCore as _;
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    b
}

impl Setup {
    fn ports(&self) -> Vec<u16> {
        std::iter::once(self.primary)
            .chain(self.secondaries.iter().copied())
            .collect()
    }

    /// Waits until no pod serves a TXT at `name`; panics if one still does
    /// after [`WAIT`] (a challenge left behind).
    fn wait_no_txt(&self, name: &str) {
        for port in self.ports() {
            let deadline = Instant::now() + WAIT;
            loop {
                let got = dig(port, name, "TXT");
                if got.is_empty() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "port {port}: the challenge {name} TXT was left behind: {got:?}\n{}",
                    self.local.diagnostics()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    /// nsupdate signed with the ACME key (from a 0600 key file): Ok, or
    /// Err with nsupdate's output.
    fn nsupdate(&self, dir: &Path, lines: &[&str]) -> Result<(), String> {
        use std::io::Write as _;
        let keyfile = dir.join("acme.key");
        write_private(
            &keyfile,
            &format!(
                "key \"{ACME_KEY}\" {{ algorithm {ACME_ALGORITHM}; secret \"{}\"; }};\n",
                self.material
            ),
        );
        let mut script = format!("server 127.0.0.1 {}\n", self.primary);
        for l in lines {
            script.push_str(l);
            script.push('\n');
        }
        script.push_str("send\n");
        let mut child = Command::new("nsupdate")
            .args(["-t", "3", "-k"])
            .arg(&keyfile)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nsupdate runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(())
        } else {
            Err(text)
        }
    }
}

#[test]
fn lego_issues_certificates_with_a_key_limited_to_challenge_txt() {
    let test = "lego_issues_certificates_with_a_key_limited_to_challenge_txt";
    if !have(test, &["pebble", "lego", "openssl"]) {
        return;
    }
    let s = setup();
    let tmp = tempfile::tempdir().unwrap();
    let pebble = Pebble::start(tmp.path(), s.primary);

    // The key may write exactly what DNS-01 needs and nothing else.
    for (what, line) in [
        (
            "a CNAME at a challenge name",
            "update add _acme-challenge.www.example.com. 60 CNAME elsewhere.example.org.",
        ),
        (
            "an A record elsewhere",
            "update add acme-test.example.com. 60 A 192.0.2.1",
        ),
        (
            "a TXT record elsewhere",
            "update add www.example.com. 60 TXT \"not-a-challenge\"",
        ),
        (
            "a TXT record at another host's challenge name",
            "update add _acme-challenge.mail.example.com. 60 TXT \"x\"",
        ),
    ] {
        let e = s
            .nsupdate(tmp.path(), &[line])
            .expect_err(&format!("{what} was accepted"));
        assert!(e.contains("REFUSED"), "{what}: {e}");
    }
    assert_eq!(
        dig(s.primary, "www.example.com.", "TXT"),
        Vec::<String>::new()
    );

    let secret_file = tmp.path().join("tsig.secret");
    write_private(&secret_file, &s.material);
    let mut lego = Command::new("lego");
    lego.current_dir(tmp.path())
        .env("RFC2136_NAMESERVER", format!("127.0.0.1:{}", s.primary))
        .env("RFC2136_TSIG_KEY", ACME_KEY)
        .env("RFC2136_TSIG_ALGORITHM", format!("{ACME_ALGORITHM}."))
        .env("RFC2136_TSIG_SECRET_FILE", &secret_file)
        .env("RFC2136_PROPAGATION_TIMEOUT", "30")
        .env("RFC2136_POLLING_INTERVAL", "1")
        .env("RFC2136_SEQUENCE_INTERVAL", "1")
        .env("LEGO_CA_CERTIFICATES", &pebble.ca)
        .args(["--accept-tos", "--email", "acme@example.com"])
        .args(["--server", &pebble.directory])
        .args(["--dns", "rfc2136", "--dns.disable-cp"])
        .args(["--dns.resolvers", &format!("127.0.0.1:{}", s.primary)])
        .args(["--domains", "www.example.com", "--domains", "*.example.com"])
        .arg("--path")
        .arg(tmp.path().join("lego"))
        .arg("run");
    let started = Instant::now();
    let (ok, out) = run(lego);
    let cert = tmp.path().join("lego/certificates/www.example.com.crt");
    assert!(
        ok && cert.exists(),
        "lego did not get a certificate:\n{out}\npebble:\n{}\n{}",
        pebble.log(),
        s.local.diagnostics()
    );
    println!("lego issued in {:?}", started.elapsed());
    let names = cert_names(&cert);
    assert!(
        names.contains("DNS:www.example.com") && names.contains("DNS:*.example.com"),
        "{names}"
    );
    // Cleaned up everywhere, and nothing of the challenge left on a pod.
    s.wait_no_txt("_acme-challenge.www.example.com.");
    s.wait_no_txt("_acme-challenge.example.com.");
    drop(s.f);
    assert!(s.local.stop().success());
}

#[test]
fn certbot_issues_a_certificate_with_a_key_limited_to_challenge_txt() {
    let test = "certbot_issues_a_certificate_with_a_key_limited_to_challenge_txt";
    if !have(test, &["pebble", "certbot", "openssl"]) {
        return;
    }
    let s = setup();
    let tmp = tempfile::tempdir().unwrap();
    let pebble = Pebble::start(tmp.path(), s.primary);
    let credentials = tmp.path().join("rfc2136.ini");
    write_private(
        &credentials,
        &format!(
            "dns_rfc2136_server = 127.0.0.1\ndns_rfc2136_port = {}\ndns_rfc2136_name = {ACME_KEY}\ndns_rfc2136_secret = {}\ndns_rfc2136_algorithm = {CERTBOT_ALGORITHM}\n",
            s.primary, s.material
        ),
    );
    let certbot_dir = tmp.path().join("certbot");
    let mut certbot = Command::new("certbot");
    certbot
        .env("REQUESTS_CA_BUNDLE", &pebble.ca)
        .args([
            "certonly",
            "--non-interactive",
            "--agree-tos",
            "--no-eff-email",
        ])
        .args(["--email", "acme@example.com", "--server", &pebble.directory])
        .arg("--config-dir")
        .arg(certbot_dir.join("config"))
        .arg("--work-dir")
        .arg(certbot_dir.join("work"))
        .arg("--logs-dir")
        .arg(certbot_dir.join("logs"))
        .args([
            "--authenticator",
            "dns-rfc2136",
            "--dns-rfc2136-credentials",
        ])
        .arg(&credentials)
        .args(["--dns-rfc2136-propagation-seconds", "1"])
        .args(["-d", "api.example.com"]);
    let started = Instant::now();
    let (ok, out) = run(certbot);
    let cert = certbot_dir.join("config/live/api.example.com/fullchain.pem");
    assert!(
        ok && cert.exists(),
        "certbot did not get a certificate:\n{out}\npebble:\n{}\n{}",
        pebble.log(),
        s.local.diagnostics()
    );
    println!("certbot issued in {:?}", started.elapsed());
    assert!(
        cert_names(&cert).contains("DNS:api.example.com"),
        "{}",
        cert_names(&cert)
    );
    s.wait_no_txt("_acme-challenge.api.example.com.");
    drop(s.f);
    assert!(s.local.stop().success());
}

/// The row of one object in status.json, if listed.
fn row<'a>(s: &'a Snapshot, name: &str) -> Option<&'a bind_operator::local::report::ObjectStatus> {
    s.objects.iter().find(|o| o.name == name)
}

#[test]
fn a_bad_grant_fails_the_zone_and_changes_nothing_served() {
    let s = setup();
    let tmp = tempfile::tempdir().unwrap();
    let www = vec!["192.0.2.10".to_string(), "192.0.2.11".to_string()];
    support::wait_answer(s.primary, "www.example.com.", "A", &www, &s.local);
    let good = s.f.read("bindzone.yaml");
    for (bad, reason, needle) in [
        (
            good.replacen("  - keyRef: acme-dns01\n", "  - keyRef: no-such-key\n", 1),
            "KeyNotFound",
            "updatePolicy key no-such-key is not a BindTSIGKey the cluster loads",
        ),
        (
            good.replacen(
                "      name: _acme-challenge\n",
                "      name: _acme-challenge.example.org.\n",
                1,
            ),
            "InvalidSpec",
            "spec.updatePolicy[0].name",
        ),
    ] {
        assert_ne!(bad, good);
        s.f.write("bindzone.yaml", &bad);
        let snap = s.local.wait_status(reason, |snap| {
            row(snap, "example-com")
                .is_some_and(|o| !o.ready && o.reason == reason && o.message.contains(needle))
        });
        assert_eq!(row(&snap, "example-com").unwrap().phase, "Error");
        // What was served before still is: the records, and the grants
        // (the key may still write its challenge, and only that).
        for port in s.ports() {
            assert_eq!(dig(port, "www.example.com.", "A"), www, "port {port}");
        }
        s.nsupdate(
            tmp.path(),
            &["update add _acme-challenge.www.example.com. 60 TXT \"still-granted\""],
        )
        .unwrap();
        s.nsupdate(
            tmp.path(),
            &["update delete _acme-challenge.www.example.com. TXT"],
        )
        .unwrap();
        let e = s
            .nsupdate(tmp.path(), &["update add other.example.com. 60 TXT \"x\""])
            .unwrap_err();
        assert!(e.contains("REFUSED"), "{e}");
    }
    s.f.write("bindzone.yaml", &good);
    s.local.wait_status("example-com Ready again", |snap| {
        row(snap, "example-com").is_some_and(|o| o.ready)
    });
    assert!(s.local.stop().success());
}
