//! One local "container": the pod's `entrypoint.sh` run with `sh` from the
//! materialised config volume, which execs `named -g` in the foreground.
//! stdout and stderr (named's log with `-g`) are appended to a per-pod log
//! file.
//!
//! Every process started here is recorded in a [`PidSet`] until it has
//! been reaped, so the runtime can kill all of them synchronously when it
//! is dropped, whatever state its tasks are in: no named outlives the
//! runtime that started it. Processes run in their own process group, so
//! a terminal's Ctrl-C reaches the runtime (which stops them cleanly) and
//! not named directly.
//!
//! What no destructor can cover (SIGKILL of local mode, a panic that
//! aborts): every container gets `PR_SET_PDEATHSIG(SIGKILL)`, so the kernel
//! kills it when local mode dies. The kernel ties that signal to the
//! *thread* that forked, so every container is forked from one thread that
//! lives as long as the process ([`on_spawner_thread`]), never from a Tokio
//! thread that may retire. Each container also leaves a pid file
//! ([`PID_FILE`]: pid and kernel start time) in its pod directory while it
//! runs, so a later run on the same state directory can find and stop what
//! an earlier one left ([`stop_stale`]) without ever signalling a recycled
//! pid.
//!
//! No cluster access; the environment passed in never holds key material.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// Pids (process groups) of running containers.
#[derive(Debug, Default)]
pub struct PidSet(Mutex<BTreeSet<u32>>);

impl PidSet {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, pid: u32) {
        self.lock().insert(pid);
    }

    fn remove(&self, pid: u32) {
        self.lock().remove(&pid);
    }

    /// How many started processes have not been reaped yet.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// SIGKILLs every recorded process group. For drop paths that cannot
    /// wait; the reaping happens in tokio's background reaper.
    pub fn kill_all(&self) {
        for pid in std::mem::take(&mut *self.lock()) {
            signal_group(pid, libc::SIGKILL);
        }
    }
}

fn signal_group(pid: u32, sig: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid
    // addresses the process group we created with process_group(0).
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// Most lines and bytes of the log kubelet puts in a termination message
/// (`FallbackToLogsOnError`).
const TERMINATION_MESSAGE_LINES: usize = 80;
const TERMINATION_MESSAGE_BYTES: usize = 2048;
/// Starts the header line written before each run.
const HEADER_PREFIX: &str = "--- ";

/// What kubelet's `FallbackToLogsOnError` reports for the last run logged
/// in `log`: its last 80 lines, at most 2048 bytes (cut at the front).
/// None when that run printed nothing.
pub fn termination_message(log: &std::path::Path) -> Option<String> {
    let text = std::fs::read(log).ok()?;
    let text = String::from_utf8_lossy(&text);
    let run = match text.rfind(&format!("\n{HEADER_PREFIX}")) {
        Some(i) => &text[i + 1..],
        None => &text[..],
    };
    let lines: Vec<&str> = run
        .lines()
        .filter(|l| !l.starts_with(HEADER_PREFIX))
        .collect();
    let tail = lines[lines.len().saturating_sub(TERMINATION_MESSAGE_LINES)..].join("\n");
    let mut start = tail.len().saturating_sub(TERMINATION_MESSAGE_BYTES);
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    let msg = tail[start..].trim();
    (!msg.is_empty()).then(|| msg.to_string())
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    /// `sh` runs this script.
    pub script: PathBuf,
    /// Working directory (the data directory).
    pub cwd: PathBuf,
    /// The full environment (nothing is inherited).
    pub env: Vec<(String, String)>,
    /// Appended with stdout and stderr.
    pub log: PathBuf,
    /// Who the process runs as.
    pub run_as: super::identity::RunAs,
    /// Holds the pid and start time while the process runs (see
    /// [`stop_stale`]).
    pub pid_file: PathBuf,
}

/// Name of a container's pid file in its pod directory.
pub const PID_FILE: &str = "container.pid";
/// How long [`stop_stale`] waits for a killed process to disappear.
const STALE_KILL_WAIT: Duration = Duration::from_secs(5);

/// A job for the spawner thread.
type SpawnJob = Box<dyn FnOnce() + Send>;

/// Runs `f` on the process-lifetime spawner thread and returns its result.
/// `PR_SET_PDEATHSIG` fires when the forking thread exits, so forking from
/// a thread that never exits makes it mean "when the process dies".
fn on_spawner_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
    static SPAWNER: OnceLock<io::Result<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("container-spawner".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })
            .map(|_| tx)
    });
    let tx = spawner
        .as_ref()
        .map_err(|e| io::Error::other(format!("failed to start the spawner thread: {e}")))?;
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    tx.send(Box::new(move || {
        let _ = done_tx.send(f());
    }))
    .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    done_rx
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))
}

/// The kernel's start time of `pid` (field 22 of `/proc/<pid>/stat`, in
/// clock ticks since boot): with the pid, it names one process for good.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // fields after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn write_pid_file(path: &Path, pid: u32) -> io::Result<()> {
    let start = start_time(pid).unwrap_or_default();
    std::fs::write(path, format!("{pid} {start}\n"))
}

/// Stops what an earlier run left behind under `state_dir`: every process
/// named by a `<state>/<ns>/<pod>/`[`PID_FILE`] that still runs with the
/// recorded start time gets its process group SIGKILLed (its data is
/// replaced by this run anyway), and the pid files go. Returns how many
/// were stopped, after they are gone (or [`STALE_KILL_WAIT`] passed).
pub fn stop_stale(state_dir: &Path) -> usize {
    let mut killed = Vec::new();
    let pods = std::fs::read_dir(state_dir)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|ns| std::fs::read_dir(ns.path()).into_iter().flatten().flatten());
    for pod in pods {
        let file = pod.path().join(PID_FILE);
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let mut fields = text.split_whitespace().map(str::parse::<u64>);
        if let (Some(Ok(pid)), Some(Ok(start))) = (fields.next(), fields.next())
            && let Ok(pid) = u32::try_from(pid)
            && start_time(pid) == Some(start)
        {
            tracing::warn!(pid, pod = %pod.path().display(), "stopping named left running by an earlier run");
            signal_group(pid, libc::SIGKILL);
            killed.push((pid, start));
        }
        let _ = std::fs::remove_file(&file);
    }
    let deadline = Instant::now() + STALE_KILL_WAIT;
    while killed
        .iter()
        .any(|&(pid, start)| start_time(pid) == Some(start))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.len()
}

/// A running container process.
#[derive(Debug)]
pub struct Container {
    child: Child,
    pid: u32,
    pids: Arc<PidSet>,
    pid_file: PathBuf,
    reaped: bool,
}

impl Container {
    /// Starts the script; `header` is written to the log first.
    pub fn start(spec: &ContainerSpec, header: &str, pids: &Arc<PidSet>) -> io::Result<Self> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)?;
        writeln!(log, "{HEADER_PREFIX}{header}")?;
        let mut cmd = Command::new("sh");
        spec.run_as.apply(&mut cmd);
        cmd.arg(&spec.script)
            .current_dir(&spec.cwd)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true);
        let parent = libc::pid_t::try_from(std::process::id()).unwrap_or_default();
        // SAFETY: prctl(2) and getppid(2) are async-signal-safe and touch no
        // memory of the parent; this runs between fork and exec (after any
        // uid change, which would clear the death signal).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent died before prctl: no signal will come.
                if libc::getppid() != parent {
                    return Err(io::Error::other("parent exited during start"));
                }
                Ok(())
            });
        }
        let runtime = tokio::runtime::Handle::current();
        let child = on_spawner_thread(move || {
            let _in_runtime = runtime.enter();
            cmd.spawn()
        })??;
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("failed to start container: no pid"))?;
        pids.insert(pid);
        if let Err(e) = write_pid_file(&spec.pid_file, pid) {
            tracing::warn!(path = %spec.pid_file.display(), error = %e, "failed to write pid file");
        }
        Ok(Container {
            child,
            pid,
            pids: pids.clone(),
            pid_file: spec.pid_file.clone(),
            reaped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits for the process to exit. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let st = self.child.wait().await?;
        self.mark_reaped();
        Ok(st)
    }

    fn mark_reaped(&mut self) {
        if !self.reaped {
            self.reaped = true;
            self.pids.remove(self.pid);
            let _ = std::fs::remove_file(&self.pid_file);
        }
    }

    /// SIGKILL without waiting (the exit shows up in [`Container::wait`]).
    pub fn kill(&self) {
        if !self.reaped {
            signal_group(self.pid, libc::SIGKILL);
        }
    }

    /// Stops like a container runtime: SIGTERM, `grace` to exit, then
    /// SIGKILL; returns once the process is reaped.
    pub async fn stop(mut self, grace: Duration) {
        if self.reaped {
            return;
        }
        signal_group(self.pid, libc::SIGTERM);
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            signal_group(self.pid, libc::SIGKILL);
            let _ = self.child.wait().await;
        }
        self.mark_reaped();
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if !self.reaped {
            // kill_on_drop only signals the direct child; take the group.
            signal_group(self.pid, libc::SIGKILL);
            self.pids.remove(self.pid);
            let _ = std::fs::remove_file(&self.pid_file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn logs_output_and_stops_with_the_group() {
        let tmp = tempfile::tempdir().unwrap();
        let script = tmp.path().join("run.sh");
        std::fs::write(&script, "echo started \"$GREETING\" >&2\nexec sleep 30\n").unwrap();
        let spec = ContainerSpec {
            script,
            cwd: tmp.path().into(),
            env: vec![
                ("GREETING".into(), "hi".into()),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ],
            log: tmp.path().join("log"),
            run_as: Default::default(),
            pid_file: tmp.path().join(PID_FILE),
        };
        let pids = Arc::new(PidSet::default());
        let c = Container::start(&spec, "start 1", &pids).unwrap();
        assert_eq!(pids.len(), 1);
        let pid = c.pid();
        let recorded = std::fs::read_to_string(tmp.path().join(PID_FILE)).unwrap();
        assert!(recorded.starts_with(&format!("{pid} ")), "{recorded}");
        // Wait for the script's line (a fixed sleep lost it under load).
        let log_path = tmp.path().join("log");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&log_path).is_ok_and(|l| l.contains("started hi")) {
            assert!(
                std::time::Instant::now() < deadline,
                "the script never logged"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        c.stop(Duration::from_secs(2)).await;
        assert_eq!(pids.len(), 0);
        assert!(!tmp.path().join(PID_FILE).exists(), "pid file removed");
        let log = std::fs::read_to_string(tmp.path().join("log")).unwrap();
        assert_eq!(log, "--- start 1\nstarted hi\n");
        // The process was reaped: nothing of it is left.
        // SAFETY: signal 0 only checks for existence.
        let alive = unsafe { libc::kill(-(pid as libc::pid_t), 0) } == 0;
        assert!(!alive);
    }

    #[test]
    fn stale_containers_of_an_earlier_run_are_stopped_by_pid_file() {
        let state = tempfile::tempdir().unwrap();
        let pod = state.path().join("default").join("web-0");
        std::fs::create_dir_all(&pod).unwrap();
        use std::os::unix::process::CommandExt as _;
        let mut stale = std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = stale.id();
        write_pid_file(&pod.join(PID_FILE), pid).unwrap();
        // A pid file whose start time does not match (a recycled pid) is
        // removed without signalling anyone.
        let other = state.path().join("default").join("web-1");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join(PID_FILE), format!("{} 1\n", std::process::id())).unwrap();

        assert_eq!(stop_stale(state.path()), 1);
        let status = stale.wait().unwrap();
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!pod.join(PID_FILE).exists());
        assert!(!other.join(PID_FILE).exists());
        assert_eq!(stop_stale(state.path()), 0);
    }
}
