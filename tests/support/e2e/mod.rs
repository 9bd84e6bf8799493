//! Shared helpers for the end-to-end tests: the real `bind-operator local`
//! binary run as a child process (killed by a Drop guard whatever happens),
//! manifest fixtures in temp dirs, `status.json`, `dig`, `nsupdate`,
//! named's logs, and the records a manifest directory promises.
//!
//! Every wait is bounded ([`WAIT`]); on timeout the panic message carries
//! the binary's output and the tail of every named log.
#![allow(dead_code, unused_imports)]

mod expected;
mod process;

pub use expected::{Expected, assert_serves_all, expected_records};
pub use process::Local;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bind_operator::local::report::{PodEndpoint, PodRole, Snapshot};

/// Longest wait for anything a user would wait for (an answer, a status).
pub const WAIT: Duration = Duration::from_secs(20);
/// Startup: two named processes and the first convergence, on a busy
/// 2-core machine.
pub const STARTUP: Duration = Duration::from_secs(40);
const POLL: Duration = Duration::from_millis(200);

pub use crate::support_bind::RUNTIME_PORTS as PORTS;

/// The repository's examples/ directory.
pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// A temp dir with a manifest directory and a state directory.
pub struct Fixture {
    pub tmp: tempfile::TempDir,
    /// The manifest directory (`-f`).
    pub dir: PathBuf,
    /// The state directory (`--state-dir`).
    pub state: PathBuf,
    /// The pods' ports: this test's while the fixture lives, the same for
    /// every start of local mode on it.
    pub ports: crate::support_bind::PortBlock,
}

impl Fixture {
    /// An empty manifest directory.
    pub fn empty() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("manifests");
        std::fs::create_dir(&dir).unwrap();
        Fixture {
            state: tmp.path().join("state"),
            dir,
            tmp,
            ports: crate::support_bind::port_block(PORTS),
        }
    }

    /// A copy of examples/.
    pub fn examples() -> Self {
        let f = Self::empty();
        for entry in std::fs::read_dir(examples_dir()).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, f.dir.join(path.file_name().unwrap())).unwrap();
        }
        f
    }

    /// Writes a manifest file atomically (a dot-file renamed into place,
    /// so the poller never reads half of it).
    pub fn write(&self, rel: &str, text: &str) {
        let tmp = self.dir.join(format!(".{rel}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.dir.join(rel)).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.join(rel)).unwrap()
    }

    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.dir.join(rel)).unwrap();
    }

    /// Starts `bind-operator local` on this fixture.
    pub fn start(&self, extra: &[&str]) -> Local {
        Local::start(&self.dir, &self.state, &self.ports, extra)
    }
}

/// status.json under `state`, if written and complete.
/// Local mode in this process (not the binary) on `f`, for tests that
/// reach into its runtime or API; output discarded, a 3 s stop grace.
pub async fn local_in_process(
    f: &Fixture,
    backend: bind_operator::local::command::Backend,
) -> bind_operator::local::command::LocalMode {
    bind_operator::local::command::LocalMode::start(
        bind_operator::local::command::LocalConfig {
            dir: f.dir.clone(),
            state_dir: f.state.clone(),
            base_port: f.ports.base,
        },
        backend,
        |c| c.stop_grace = Duration::from_secs(3),
    )
    .await
    .unwrap()
    .with_output(std::io::sink())
}

/// Runs a blocking check (dig, status polling) off the async workers.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// The keys.conf pod `pod` (namespace default) has mounted now; empty if
/// none yet.
pub fn keys_conf(local: &Local, pod: &str) -> String {
    std::fs::read_to_string(
        local
            .state
            .join("default")
            .join(pod)
            .join("config/keys.conf"),
    )
    .unwrap_or_default()
}

pub fn read_status(state: &Path) -> Option<Snapshot> {
    let text = std::fs::read_to_string(state.join("status.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Converged, every object Ready, at least one pod and all pods Ready.
pub fn all_ready(s: &Snapshot) -> bool {
    s.converged
        && !s.pods.is_empty()
        && s.pods.iter().all(|p| p.ready)
        && s.objects.iter().all(|o| o.ready)
}

/// The pods of `cluster` in status order (primary first).
pub fn pods_of<'a>(s: &'a Snapshot, cluster: &str) -> Vec<&'a PodEndpoint> {
    s.pods.iter().filter(|p| p.cluster == cluster).collect()
}

/// The primary of `cluster`.
pub fn primary<'a>(s: &'a Snapshot, cluster: &str) -> &'a PodEndpoint {
    s.pods
        .iter()
        .find(|p| p.cluster == cluster && p.role == PodRole::Primary)
        .expect("a primary pod")
}

pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The tail of every named log under `state`.
pub fn state_diagnostics(state: &Path) -> String {
    let mut out = String::new();
    for log in named_logs(state) {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        out.push_str(&format!(
            "--- {} (tail)\n{}\n",
            log.display(),
            tail(&text, 40)
        ));
        // The NOTIFY lists: one file, or one per view.
        let mut lists: Vec<PathBuf> = std::fs::read_dir(log.with_file_name("data"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("notify-targets"))
            })
            .collect();
        lists.sort();
        for notify in lists {
            if let Ok(targets) = std::fs::read_to_string(&notify) {
                out.push_str(&format!("--- {}\n{targets}\n", notify.display()));
            }
        }
    }
    out
}

fn named_logs(state: &Path) -> Vec<PathBuf> {
    let mut logs = Vec::new();
    for ns in std::fs::read_dir(state).into_iter().flatten().flatten() {
        for pod in std::fs::read_dir(ns.path()).into_iter().flatten().flatten() {
            let log = pod.path().join("named.log");
            if log.is_file() {
                logs.push(log);
            }
        }
    }
    logs.sort();
    logs
}

/// named's log of one pod (`<state>/<ns>/<pod>/named.log`).
pub fn named_log(state: &Path, namespace: &str, pod: &str) -> String {
    std::fs::read_to_string(state.join(namespace).join(pod).join("named.log")).unwrap_or_default()
}

/// How many `rndc reconfig` commands a pod's named received.
pub fn reconfigs(state: &Path, namespace: &str, pod: &str) -> usize {
    named_log(state, namespace, pod)
        .lines()
        .filter(|l| l.contains("received control channel command 'reconfig'"))
        .count()
}

/// How many times a pod's named started (a restart adds one).
pub fn named_starts(state: &Path, namespace: &str, pod: &str) -> usize {
    named_log(state, namespace, pod)
        .lines()
        .filter(|l| l.contains("starting BIND"))
        .count()
}

/// pids of named processes whose command line mentions `dir`.
pub use crate::support_local::named_under;

/// `dig +short` at 127.0.0.1:port, answers sorted and lowercased; empty
/// when nothing answers.
pub fn dig(port: u16, name: &str, rtype: &str) -> Vec<String> {
    let out = Command::new("dig")
        .args(["+short", "+norec", "+time=1", "+tries=1", "-p"])
        .arg(port.to_string())
        .args(["@127.0.0.1", name, rtype])
        .output()
        .expect("dig runs");
    if !out.status.success() {
        return Vec::new();
    }
    let mut answers: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .map(str::to_lowercase)
        .collect();
    answers.sort();
    answers
}

/// Something that can explain a failed wait.
pub trait Diagnose {
    fn diagnostics(&self) -> String;
}

impl Diagnose for Local {
    fn diagnostics(&self) -> String {
        Local::diagnostics(self)
    }
}

/// A state directory: its named logs.
impl Diagnose for Path {
    fn diagnostics(&self) -> String {
        state_diagnostics(self)
    }
}

/// Polls `dig` until the answer is `want` (any order).
pub fn wait_answer(
    port: u16,
    name: &str,
    rtype: &str,
    want: &[String],
    local: &(impl Diagnose + ?Sized),
) {
    let mut want: Vec<String> = want.iter().map(|v| v.to_lowercase()).collect();
    want.sort();
    let deadline = Instant::now() + WAIT;
    loop {
        let got = dig(port, name, rtype);
        if got == want {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "port {port}: {name} {rtype}: wanted {want:?}, got {got:?}\n{}",
                local.diagnostics()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// A DNSRecord manifest in zone `example-com`.
pub fn record(name: &str, owner: &str, rtype: &str, values: &[&str]) -> String {
    let values: String = values.iter().map(|v| format!("    - '{v}'\n")).collect();
    format!(
        "apiVersion: bind.unkin.net/v1alpha1\nkind: DNSRecord\nmetadata:\n  name: {name}\nspec:\n  zoneRef: example-com\n  name: {owner}\n  type: {rtype}\n  values:\n{values}"
    )
}

/// Runs `nsupdate -y alg:name:secret` against 127.0.0.1:port with the
/// given update lines; Err carries nsupdate's output.
pub fn nsupdate(port: u16, key: &str, lines: &[&str]) -> Result<(), String> {
    use std::io::Write;
    let mut script = format!("server 127.0.0.1 {port}\n");
    for l in lines {
        script.push_str(l);
        script.push('\n');
    }
    script.push_str("send\n");
    let mut child = Command::new("nsupdate")
        .args(["-t", "3", "-y", key])
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
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// pids of every process whose working directory or command line is under
/// `dir` (named, its `sh`, or anything else local mode left there).
pub fn processes_under(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(entry.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        if cwd.starts_with(dir) || cmd.contains(&needle) {
            out.push((pid, cmd));
        }
    }
    out
}

/// Waits until no process is left under `dir`; returns what is left at
/// the deadline.
pub fn wait_no_processes_under(dir: &Path, limit: Duration) -> Vec<(u32, String)> {
    let deadline = Instant::now() + limit;
    loop {
        let left = processes_under(dir);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
