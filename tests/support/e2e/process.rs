//! The `bind-operator local` child process of a test, under a Drop guard:
//! whatever happens, the process is stopped and no named it started is
//! left running.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bind_operator::local::report::Snapshot;

use super::{STARTUP, WAIT, all_ready, named_under, read_status, state_diagnostics, tail};

/// How long a stopped `local` may take to exit.
const EXIT_WAIT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(200);

/// A running `bind-operator local`. Dropping it stops the process (SIGTERM,
/// then SIGKILL) and kills any named left under its state dir.
pub struct Local {
    child: std::sync::Mutex<Option<Child>>,
    pub state: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
    _logs: tempfile::TempDir,
}

impl Local {
    /// Runs the binary with `-f dir --state-dir state --base-port P` (the
    /// first of `ports`) and `extra`; stdout and stderr go to files.
    pub fn start(
        dir: &Path,
        state: &Path,
        ports: &crate::support_bind::PortBlock,
        extra: &[&str],
    ) -> Local {
        let logs = tempfile::tempdir().unwrap();
        let stdout = logs.path().join("stdout");
        let stderr = logs.path().join("stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_bind-operator"))
            .arg("local")
            .arg("-f")
            .arg(dir)
            .arg("--state-dir")
            .arg(state)
            .arg("--base-port")
            .arg(ports.base.to_string())
            .args(extra)
            .env("RUST_LOG", "bind_operator=info,kube=warn")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("bind-operator starts");
        Local {
            child: std::sync::Mutex::new(Some(child)),
            state: state.to_owned(),
            stdout,
            stderr,
            _logs: logs,
        }
    }

    /// What the process printed on stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// The last status.json, if one was written and parses.
    pub fn status(&self) -> Option<Snapshot> {
        read_status(&self.state)
    }

    /// Output, status and named logs, for a failure message.
    pub fn diagnostics(&self) -> String {
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        format!(
            "--- stdout (tail)\n{}\n--- stderr (tail)\n{}\n{}",
            tail(&self.stdout(), 40),
            tail(&stderr, 40),
            state_diagnostics(&self.state)
        )
    }

    /// Polls status.json until `pred` holds.
    pub fn wait_status(&self, what: &str, pred: impl Fn(&Snapshot) -> bool) -> Snapshot {
        self.wait_status_for(what, WAIT, pred)
    }

    pub fn wait_status_for(
        &self,
        what: &str,
        limit: Duration,
        pred: impl Fn(&Snapshot) -> bool,
    ) -> Snapshot {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.status().filter(|s| pred(s)) {
                return s;
            }
            if let Some(status) = self.exited() {
                panic!(
                    "bind-operator exited ({status}) while waiting for {what}\n{}",
                    self.diagnostics()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}\n{}\n{}",
                    last_status(self.status().as_ref()),
                    self.diagnostics()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until everything is converged, every object Ready and every
    /// pod Ready; returns that snapshot.
    pub fn wait_all_ready(&self) -> Snapshot {
        self.wait_status_for("every object and pod Ready", STARTUP, all_ready)
    }

    /// The exit status, if the process has exited.
    fn exited(&self) -> Option<ExitStatus> {
        let mut child = self.child.lock().unwrap();
        child.as_mut()?.try_wait().unwrap()
    }

    fn take_child(&mut self) -> Child {
        self.child
            .get_mut()
            .unwrap()
            .take()
            .expect("process not yet waited for")
    }

    /// What the process printed on stderr so far (its log).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends `sig` to the process.
    pub fn signal(&self, sig: libc::c_int) {
        if let Some(child) = self.child.lock().unwrap().as_ref() {
            signal(child.id(), sig);
        }
    }

    /// Waits up to `limit` for the process to exit (whatever made it);
    /// unlike [`Local::wait_exit`], asserts nothing about what is left.
    pub fn exit_status(&self, limit: Duration) -> Option<ExitStatus> {
        let mut child = self.child.lock().unwrap();
        wait_child(child.as_mut()?, limit)
    }

    /// Whether the process is still running.
    pub fn running(&self) -> bool {
        self.child.lock().unwrap().is_some() && self.exited().is_none()
    }

    /// Sends SIGTERM (what Ctrl-C / a service manager sends) and waits for
    /// the exit; asserts that no named is left running.
    pub fn stop(mut self) -> ExitStatus {
        let mut child = self.take_child();
        signal(child.id(), libc::SIGTERM);
        let status = wait_child(&mut child, EXIT_WAIT).unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "bind-operator did not exit after SIGTERM\n{}",
                self.diagnostics()
            )
        });
        let left = named_under(&self.state);
        assert!(left.is_empty(), "named left running after exit: {left:?}");
        status
    }

    /// Waits for the process to exit by itself (`--once`); returns its
    /// status and stdout. Asserts that no named is left running.
    pub fn wait_exit(mut self, limit: Duration) -> (ExitStatus, String) {
        let mut child = self.take_child();
        let status = wait_child(&mut child, limit).unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "bind-operator did not exit in {limit:?}\n{}",
                self.diagnostics()
            )
        });
        let left = named_under(&self.state);
        assert!(left.is_empty(), "named left running after exit: {left:?}");
        (status, self.stdout())
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let child = match self.child.get_mut() {
            Ok(c) => c.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(mut child) = child {
            signal(child.id(), libc::SIGTERM);
            if wait_child(&mut child, EXIT_WAIT).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // Only if the process could not clean up (it was SIGKILLed): its
        // own named processes, found by their config path.
        for pid in named_under(&self.state) {
            signal(pid, libc::SIGKILL);
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

fn wait_child(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the last status.json says is not yet done, for a timeout message.
fn last_status(s: Option<&Snapshot>) -> String {
    let Some(s) = s else {
        return "--- last status: none written".to_owned();
    };
    let pods: Vec<String> = s
        .pods
        .iter()
        .filter(|p| !p.ready || !p.running)
        .map(|p| format!("{}/{} running={}", p.namespace, p.name, p.running))
        .collect();
    let objects: Vec<String> = s
        .objects
        .iter()
        .filter(|o| !o.ready)
        .map(|o| {
            format!(
                "{} {}/{} {} ({}: {})",
                o.kind, o.namespace, o.name, o.phase, o.reason, o.message
            )
        })
        .collect();
    format!(
        "--- last status: converged={} ready={} pods={} objects={}\nwaiting for: {:?}\npods not ready: {:?}\nobjects not ready ({}): {:?}",
        s.converged,
        s.ready,
        s.pods.len(),
        s.objects.len(),
        s.waiting_for,
        pods,
        objects.len(),
        objects.iter().take(20).collect::<Vec<_>>()
    )
}
