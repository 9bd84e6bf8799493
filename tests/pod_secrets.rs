//! Key material in a pod goes nowhere but named's own files: the commands
//! that carry TSIG secrets (an UPDATE batch, a signed AXFR and DNSKEY
//! query, the reconfig that compares keys.conf) run against a real named
//! with every program their scripts start replaced by a recorder (argv and
//! environment to a log, then the real tool), `mktemp` pointed at a
//! directory the test keeps and `rm` kept from removing it. Afterwards no
//! argv, no environment, no temporary file and no file in the data
//! directory holds a secret. A deliberately leaking script shows the
//! recorder would see it.

use crate::support_bind as harness;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use bind_operator::bind::commands::{self, Command, local_server};
use bind_operator::bind::layout::{PodLayout, Tools, locate_tool};
use bind_operator::bind::nsupdate::{RrsetChange, UpdateBatch, build_script};
use bind_operator::bind::render::render_cluster;
use bind_operator::bind::zone::{Soa, ZoneSkeleton};
use bind_operator::bind::{DomainName, Rdata, RecordType, TsigAlgorithm, Ttl, ZoneName};
use harness::{Pod, run_ok};

/// Every program a pod script may start by name.
const TOOLS: &[&str] = &[
    "awk",
    "cat",
    "dirname",
    "grep",
    "ln",
    "mkdir",
    "mkfifo",
    "mv",
    "sed",
    "xargs",
    "dig",
    "nsupdate",
    "rndc",
    "named-checkconf",
];

/// A PATH of recorders: each tool logs its argv and environment to `log`
/// and runs the real one; `mktemp` makes everything under `keep`; `rm`
/// removes nothing (what a script wrote stays for the scan).
struct Recorder {
    bin: PathBuf,
    keep: PathBuf,
    log: PathBuf,
}

impl Recorder {
    fn new(root: &Path) -> Recorder {
        let (bin, keep) = (root.join("bin"), root.join("keep"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&keep).unwrap();
        let log = root.join("argv.log");
        std::fs::write(&log, "").unwrap();
        let record = format!(
            "{{ printf '%s' \"${{0##*/}}\"; printf ' %s' \"$@\"; printf '\\n'; /usr/bin/env; }} >>'{}'\n",
            log.display()
        );
        let shim = |name: &str, tail: String| {
            let p = bin.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{record}{tail}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        for t in TOOLS {
            shim(t, format!("exec '{}' \"$@\"", locate_tool(t)));
        }
        shim(
            "mktemp",
            format!(
                "exec '{}' -p '{}' \"$@\"",
                locate_tool("mktemp"),
                keep.display()
            ),
        );
        shim("rm", "exit 0".into());
        Recorder { bin, keep, log }
    }

    /// Runs `cmd` as the local executor does (cleared environment but
    /// PATH, in the data directory), with the recorders first on PATH.
    fn run(&self, layout: &PodLayout, cmd: &Command) -> harness::Output {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = std::process::Command::new(&cmd.argv[0])
            .args(&cmd.argv[1..])
            .current_dir(&layout.data_dir)
            .env_clear()
            .env("PATH", path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = cmd.stdin.clone().unwrap_or_default();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = stdin.write_all(input.as_bytes());
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        let out = harness::Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        assert!(
            out.ok(),
            "{:?} failed: {}\n{}",
            cmd.argv.first(),
            out.stdout,
            out.stderr
        );
        out
    }

    /// Where a secret shows: the recorded argv/environment, a kept
    /// temporary file, a file in `data` (symlinks skipped: `config` is the
    /// mount named loads its keys from).
    fn leaks(&self, data: &Path, secrets: &[&str]) -> Vec<String> {
        let mut found = Vec::new();
        let log = std::fs::read_to_string(&self.log).unwrap();
        for s in secrets {
            if log.contains(s) {
                found.push(format!("argv or environment: {s}"));
            }
        }
        for dir in [self.keep.as_path(), data] {
            for file in files_under(dir) {
                let bytes = std::fs::read(&file).unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                if secrets.iter().any(|s| text.contains(s)) {
                    found.push(format!("file {}", file.display()));
                }
            }
        }
        found
    }

    fn ran(&self, tool: &str) -> bool {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .any(|l| l.starts_with(&format!("{tool} ")))
    }
}

/// Regular files under `dir`, recursively (no symlinks, no FIFOs).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.extend(files_under(&e.path()));
        } else if t.is_file() {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn no_secret_in_a_pod_commands_argv_environment_or_files() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let mut primary = Pod::new(tmp.path(), &config, 0);
    let xfer = harness::random_key("xfer", TsigAlgorithm::HmacSha256);
    let update = harness::random_key("update", TsigAlgorithm::HmacSha256);
    let cfg = harness::small_config(primary.endpoint(), &xfer, &update);
    let files = render_cluster(&cfg).unwrap();
    harness::write_mount(&config, &files);
    primary.start();

    // A zone to update and transfer.
    let zone = ZoneName::parse("secret.test").unwrap();
    let pz = harness::plain_zone("secret.test", &update, &xfer);
    let ns1 = DomainName::resolve("ns1", &zone).unwrap();
    let skel = ZoneSkeleton {
        zone: zone.clone(),
        default_ttl: Ttl::new(300).unwrap(),
        soa: Soa::defaults_for(&zone),
        serial: harness::now_serial(),
        nameservers: vec![ns1.clone()],
        records: vec![(
            ns1,
            RecordType::A,
            Ttl::new(300).unwrap(),
            Rdata::A("192.0.2.53".parse().unwrap()),
        )],
    };
    let real = &primary.layout;
    run_ok(&commands::write_zone_file(real, &pz.file(), &skel.render()));
    run_ok(&commands::addzone(real, &zone, None, &pz.clause()));

    // The pod's tools by name, as in the image: the recorders catch them.
    let layout = PodLayout {
        tools: Tools::from_path(),
        ..real.clone()
    };
    let rec = Recorder::new(&tmp.path().join("recorder"));
    let secrets = [update.secret.expose_base64(), xfer.secret.expose_base64()];

    // One UPDATE of two RRsets, the script carrying its key.
    let change = |name: &str, ip: &str| {
        RrsetChange::parse_replace(
            &zone,
            name,
            "A",
            None,
            Ttl::new(300).unwrap(),
            &[ip.to_string()],
        )
        .unwrap()
    };
    let batch = UpdateBatch {
        zone: zone.clone(),
        changes: vec![change("www", "192.0.2.10"), change("api", "192.0.2.11")],
        apex_ns: None,
    };
    let script = build_script(&batch, local_server(&layout), &update)
        .unwrap()
        .unwrap();
    let cmds = [
        commands::nsupdate(&layout, &script),
        commands::dig_axfr(&layout, &zone, &xfer),
        commands::dig_dnskey(&layout, &zone, &xfer),
        commands::reconfig_when_mounted(
            &layout,
            &files.named_conf_primary,
            &files.keys_conf,
            false,
            &[],
        ),
    ];
    let mut outputs = Vec::new();
    for cmd in &cmds {
        assert!(
            cmd.stdin
                .as_deref()
                .is_some_and(|s| secrets.iter().any(|k| s.contains(k))),
            "{cmd:?} carries a key on stdin"
        );
        for s in secrets {
            assert!(
                !cmd.argv.iter().any(|a| a.contains(s)),
                "{cmd:?}: key in argv"
            );
        }
        outputs.push(rec.run(&layout, cmd));
    }

    // They did their work, through the recorders.
    assert_eq!(
        harness::dig_short(primary.dns.port, "www.secret.test", "A"),
        ["192.0.2.10"]
    );
    assert_eq!(
        harness::dig_short(primary.dns.port, "api.secret.test", "A"),
        ["192.0.2.11"]
    );
    let axfr = bind_operator::bind::parse::parse_axfr(&outputs[1].stdout, &zone).unwrap();
    assert!(
        axfr.iter()
            .any(|r| r.name.to_string().starts_with("www.secret.test")),
        "{}",
        outputs[1].stdout
    );
    assert!(
        outputs[3].stdout.ends_with("@@reconfigured\n"),
        "{}",
        outputs[3].stdout
    );
    for tool in ["nsupdate", "dig", "mktemp", "rndc"] {
        assert!(rec.ran(tool), "{tool} did not run through its recorder");
    }

    let leaks = rec.leaks(&layout.data_dir, &secrets);
    assert!(
        leaks.is_empty(),
        "key material outside named's files: {leaks:?}"
    );

    // The scan sees a script that stores its stdin in a temporary file.
    let leaky = Command {
        argv: ["sh", "-c", "k=$(mktemp) && cat >\"$k\"", "sh"]
            .map(String::from)
            .to_vec(),
        stdin: cmds[1].stdin.clone(),
    };
    rec.run(&layout, &leaky);
    assert!(!rec.leaks(&layout.data_dir, &secrets).is_empty());
}
