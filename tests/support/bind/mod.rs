//! Test harness for real `named` processes on 127.0.0.1: a port allocator
//! that is safe across parallel test processes, temp dirs, pods started
//! through the rendered `entrypoint.sh` (so the entrypoint is proven for
//! real), a local command runner for the BIND layer's [`Command`]s, and
//! `dig` helpers. Every named is killed when its [`Pod`] drops.
#![allow(dead_code)]

use std::fs;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use bind_operator::bind::commands::Command;
use bind_operator::bind::entrypoint::render_rndc_key;
use bind_operator::bind::layout::{PodLayout, mount};
use bind_operator::bind::render::{ClusterConfig, DnssecValidation, RenderedFiles};
use bind_operator::bind::zone::PrimaryZone;
use bind_operator::bind::{Endpoint, KeyName, TsigAlgorithm, TsigKey, TsigSecret, ZoneName};

/// How long a pod may take to answer DNS after start.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// Lock files older than this belong to a dead test run.
const STALE_LOCK: Duration = Duration::from_secs(30 * 60);

/// A lock file held until dropped: while it exists, no other test process
/// takes what it names.
struct Lock(PathBuf);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Takes the lock `name` in the shared lock directory, unless another
/// live test process holds it (a lock older than [`STALE_LOCK`] belongs to
/// a dead run and is taken over).
fn lock(name: &str) -> Option<Lock> {
    let dir = std::env::temp_dir().join("bind-operator-test-ports");
    fs::create_dir_all(&dir).expect("create port lock dir");
    let path = dir.join(name);
    if let Ok(meta) = fs::metadata(&path) {
        let age = meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .unwrap_or_default();
        if age > STALE_LOCK {
            let _ = fs::remove_file(&path);
        }
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .ok()
        .map(|_| Lock(path))
}

fn port_free(port: u16) -> bool {
    UdpSocket::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// Where a process's search for ports starts: spread by pid, so parallel
/// test processes rarely probe the same ones.
fn pid_spread() -> u32 {
    std::process::id().wrapping_mul(2_654_435_761) >> 8
}

/// A port reserved for this test process until dropped.
pub struct PortLease {
    pub port: u16,
    _lock: Lock,
}

/// Reserves a port free on 127.0.0.1 for both UDP and TCP, above the
/// kernel's ephemeral range where there is room (61000-65535 on Linux's
/// default): no client socket, `bind(0)` or runtime allocator (their bases
/// sit below 61000) lands there, so a port stays ours even while the test
/// has its named stopped. A lock file created with `create_new` keeps
/// other test processes from taking the same port between our probe and
/// named's bind. Where the ephemeral range leaves no room, the kernel
/// picks (bind to 0).
pub fn reserve_port() -> PortLease {
    let above = ephemeral_range()
        .map(|(_, top)| top)
        .filter(|top| *top < 63_000)
        .map(|top| top + 1);
    let start = pid_spread();
    for i in 0..2_000u32 {
        let port = match above {
            Some(from) => from + (start.wrapping_add(i) % u32::from(u16::MAX - from)) as u16,
            None => {
                let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp probe");
                udp.local_addr().expect("udp addr").port()
            }
        };
        if !port_free(port) {
            continue;
        }
        if let Some(lock) = lock(&format!("{port}.lock")) {
            return PortLease { port, _lock: lock };
        }
    }
    panic!("failed to reserve a free port");
}

/// Ports a local runtime of one test allocates its pods' from (3 per pod,
/// upward from `base`), held by this test process until dropped.
pub struct PortBlock {
    pub base: u16,
    _locks: Vec<Lock>,
}

/// The block one test's local runtime (or local mode) gets: 20 pods'
/// worth, 3 ports each.
pub const RUNTIME_PORTS: u16 = 60;

/// The unit blocks are leased in.
const CHUNK: u16 = 20;
/// Where blocks come from: below the kernel's ephemeral range (32768 on
/// Linux's default), so no client socket takes a pod's port while its
/// named is stopped, and apart from [`reserve_port`]'s ports above it.
const BLOCKS_FROM: u16 = 20_000;

/// Leases `len` consecutive ports (rounded up to whole chunks of
/// [`CHUNK`]), every one of them free now, for a local runtime's pods:
/// one lock file per chunk keeps other test processes, and the other tests
/// of this one, out of them until the block drops. The runtime's own
/// allocator still skips a port taken by something else, so a test that
/// runs more pods than its block holds spills over rather than fails.
pub fn port_block(len: u16) -> PortBlock {
    let below = ephemeral_range()
        .map(|(low, _)| low)
        .filter(|low| *low > BLOCKS_FROM + 1_000)
        .unwrap_or(32_768);
    let per = len.div_ceil(CHUNK);
    let chunks = u32::from((below - BLOCKS_FROM) / CHUNK - per + 1);
    let start = pid_spread();
    'search: for i in 0..chunks {
        let first = (start.wrapping_add(i) % chunks) as u16;
        let base = BLOCKS_FROM + first * CHUNK;
        let mut locks = Vec::new();
        for c in first..first + per {
            match lock(&format!("block-{c}.lock")) {
                Some(l) => locks.push(l),
                None => continue 'search,
            }
        }
        if (base..base + per * CHUNK).all(port_free) {
            return PortBlock {
                base,
                _locks: locks,
            };
        }
    }
    panic!("no free block of {len} ports from {BLOCKS_FROM} to {below}");
}

/// The kernel's ephemeral port range.
fn ephemeral_range() -> Option<(u16, u16)> {
    let range = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = range.split_whitespace();
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Output of a command run locally.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
}

/// Runs a BIND-layer command on this machine, as the local executor would.
pub fn run(cmd: &Command) -> Output {
    let mut child = std::process::Command::new(&cmd.argv[0])
        .args(&cmd.argv[1..])
        .stdin(if cmd.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("failed to spawn {:?}: {e}", cmd.argv[0]));
    if let Some(input) = &cmd.stdin {
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs and asserts success, showing stdout/stderr otherwise.
#[track_caller]
pub fn run_ok(cmd: &Command) -> Output {
    let out = run(cmd);
    assert!(
        out.ok(),
        "command {:?} failed ({}):\nstdout: {}\nstderr: {}",
        cmd.argv,
        out.code,
        out.stdout,
        out.stderr
    );
    out
}

/// A fresh random TSIG key.
pub fn random_key(name: &str, algorithm: TsigAlgorithm) -> TsigKey {
    let bytes: Vec<u8> = (0..algorithm.key_len())
        .map(|_| rand::random::<u8>())
        .collect();
    TsigKey {
        name: KeyName::parse(name).unwrap(),
        algorithm,
        secret: TsigSecret::from_bytes(&bytes).unwrap(),
    }
}

/// A deterministic fake secret for golden files.
pub fn fixed_secret(seed: u8, len: usize) -> TsigSecret {
    let bytes: Vec<u8> = (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
        .collect();
    TsigSecret::from_base64(&base64::engine::general_purpose::STANDARD.encode(bytes)).unwrap()
}

/// A minimal authoritative cluster config with a transfer key and an update key.
pub fn small_config(primary: Endpoint, xfer: &TsigKey, update: &TsigKey) -> ClusterConfig {
    ClusterConfig {
        recursion: false,
        allow_query: vec![],
        allow_recursion: vec![],
        forwarders: vec![],
        forward_only: false,
        dnssec_validation: DnssecValidation::No,
        trust_anchors: vec![],
        validate_except: vec![],
        forward_zones: vec![],
        views: vec![],
        catalog_zone: ZoneName::parse("catalog.test.internal").unwrap(),
        transfer_key: xfer.name.clone(),
        primary_endpoint: primary,
        keys: vec![xfer.clone(), update.clone()],
        external_secondaries: vec![],
        catalog_consumers: vec![],
    }
}

/// A primary zone signed with the test cluster's update key and
/// transferred with its transfer key, in no view, without policy.
pub fn plain_zone(name: &str, update: &TsigKey, xfer: &TsigKey) -> PrimaryZone {
    PrimaryZone {
        zone: ZoneName::parse(name).unwrap(),
        view: None,
        update_key: update.name.clone(),
        transfer_key: xfer.name.clone(),
        allow_transfer: vec![],
        also_notify: vec![],
        grants: vec![],
        dnssec_policy: None,
        external_secondaries: vec![],
        notify_override: false,
    }
}

/// A config directory as kubelet would project it, with a fresh rndc key.
pub fn write_mount(dir: &Path, files: &RenderedFiles) {
    fs::create_dir_all(dir).unwrap();
    for (name, text) in files.files() {
        fs::write(dir.join(name), text).unwrap();
    }
    let rndc = random_key("rndc", TsigAlgorithm::HmacSha256);
    fs::write(
        dir.join(mount::RNDC_KEY),
        render_rndc_key(rndc.algorithm, &rndc.secret),
    )
    .unwrap();
}

/// One BIND pod: its dirs, ports and (once started) its named process.
pub struct Pod {
    pub ordinal: u32,
    pub layout: PodLayout,
    pub dns: PortLease,
    pub control: PortLease,
    child: Option<Child>,
    pub log: PathBuf,
}

impl Pod {
    /// Reserves ports and a data dir under `root`, sharing `config_dir`.
    pub fn new(root: &Path, config_dir: &Path, ordinal: u32) -> Pod {
        let dns = reserve_port();
        let control = reserve_port();
        let data = root.join(format!("pod-{ordinal}"));
        fs::create_dir_all(&data).unwrap();
        let layout = PodLayout::local(&data, config_dir, dns.port, control.port);
        Pod {
            ordinal,
            layout,
            dns,
            control,
            child: None,
            log: root.join(format!("pod-{ordinal}.log")),
        }
    }

    /// This pod's DNS endpoint.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint::new(IpAddr::V4(Ipv4Addr::LOCALHOST), self.dns.port).unwrap()
    }

    fn entrypoint_cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new("sh");
        c.arg(self.layout.config_dir.join(mount::ENTRYPOINT));
        for (k, v) in self
            .layout
            .entrypoint_env(self.ordinal, IpAddr::V4(Ipv4Addr::LOCALHOST))
        {
            c.env(k, v);
        }
        c.env(
            "BIND_NAMED",
            bind_operator::bind::layout::locate_tool("named"),
        );
        c
    }

    /// Runs the entrypoint with `BIND_PREPARE_ONLY=1`: the data dir is laid
    /// out exactly as for a start, but named is not started.
    pub fn prepare(&self) {
        let out = self
            .entrypoint_cmd()
            .env("BIND_PREPARE_ONLY", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "entrypoint failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts named through the rendered entrypoint and waits until it
    /// answers DNS.
    pub fn start(&mut self) {
        let log = fs::File::create(&self.log).unwrap();
        let child = self
            .entrypoint_cmd()
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn entrypoint");
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("named exited early ({status}):\n{}", self.log_text());
            }
            if dig(self.dns.port, &["version.bind", "CH", "TXT", "+short"]).contains('"') {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "named did not answer within {START_TIMEOUT:?}:\n{}",
            self.log_text()
        );
    }

    /// Stops named (SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// named's log so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs a command built for this pod's layout.
    pub fn run(&self, cmd: &Command) -> Output {
        run(cmd)
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `dig -p PORT @127.0.0.1 ARGS...` with short timeouts; stdout.
pub fn dig(port: u16, args: &[&str]) -> String {
    let out = std::process::Command::new(bind_operator::bind::layout::locate_tool("dig"))
        .args(["-p", &port.to_string(), "@127.0.0.1", "+time=1", "+tries=1"])
        .args(args)
        .output()
        .expect("run dig");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The SOA serial `port` serves for `zone`, asked with `key` (`dig -y`
/// form, to reach a view) or unsigned.
pub fn dig_serial(port: u16, key: Option<&str>, zone: &str) -> u32 {
    let mut args = vec!["+short", "+norecurse"];
    if let Some(k) = key {
        args.extend(["-y", k]);
    }
    args.extend([zone, "SOA"]);
    let out = dig(port, &args);
    out.split_whitespace()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no SOA of {zone} on port {port}: {out:?}"))
}

/// The sorted rdata of NAME TYPE as dig +short prints it.
pub fn dig_short(port: u16, name: &str, rtype: &str) -> Vec<String> {
    let mut v: Vec<String> = dig(port, &["+short", "+norecurse", name, rtype])
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .collect();
    v.sort();
    v
}

/// Polls `f` every 50 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Now in seconds since the epoch, as a starting zone serial.
pub fn now_serial() -> u32 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32
}
