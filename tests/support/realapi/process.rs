//! `bind-operator run` as a child process of a lane test, with the
//! kubeconfig it is given, under a Drop guard (SIGTERM, then SIGKILL).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running `bind-operator run`; its stdout and stderr go to one log file.
pub struct Operator {
    child: Option<Child>,
    pub log: PathBuf,
}

impl Operator {
    /// Starts `bind-operator run` with KUBECONFIG=`kubeconfig`, logging to
    /// `log`, health endpoints on 127.0.0.1:`health_port`.
    pub fn run(kubeconfig: &Path, log: &Path, health_port: u16) -> Operator {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_bind-operator"))
            .arg("run")
            .arg("--health-addr")
            .arg(format!("127.0.0.1:{health_port}"))
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,kube=warn")
            .env_remove("BIND_OPERATOR_LEADER_ELECTION")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("bind-operator starts");
        Operator {
            child: Some(child),
            log: log.to_owned(),
        }
    }

    /// Everything it logged so far (all runs appended to one file).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// Sends SIGTERM and waits up to `limit`; returns the exit status and
    /// how long it took, or `None` (after SIGKILL) if it did not exit.
    pub fn terminate(&mut self, limit: Duration) -> Option<(ExitStatus, Duration)> {
        let mut child = self.child.take()?;
        let start = Instant::now();
        signal(child.id(), libc::SIGTERM);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Some((status, start.elapsed()));
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(25);
            while child.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}
