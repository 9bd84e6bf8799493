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
//! not named directly. No cluster access; the environment passed in never
//! holds key material.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
}

/// A running container process.
#[derive(Debug)]
pub struct Container {
    child: Child,
    pid: u32,
    pids: Arc<PidSet>,
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
        let child = cmd.spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("failed to start container: no pid"))?;
        pids.insert(pid);
        Ok(Container {
            child,
            pid,
            pids: pids.clone(),
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
        };
        let pids = Arc::new(PidSet::default());
        let c = Container::start(&spec, "start 1", &pids).unwrap();
        assert_eq!(pids.len(), 1);
        let pid = c.pid();
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.stop(Duration::from_secs(2)).await;
        assert_eq!(pids.len(), 0);
        let log = std::fs::read_to_string(tmp.path().join("log")).unwrap();
        assert_eq!(log, "--- start 1\nstarted hi\n");
        // The process was reaped: nothing of it is left.
        // SAFETY: signal 0 only checks for existence.
        let alive = unsafe { libc::kill(-(pid as libc::pid_t), 0) } == 0;
        assert!(!alive);
    }
}
