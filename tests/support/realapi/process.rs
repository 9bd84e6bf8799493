//! `bind-operator run` as a child process of a lane test, with the
//! kubeconfig it is given, under a Drop guard (SIGTERM, then SIGKILL).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running `bind-operator run`; its stdout and stderr go to one log file.
pub struct Operator {
    child: Option<Child>,
    pub log: PathBuf,
    health_port: u16,
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
            // JSON lines: no terminal colour codes in the log a test prints.
            .arg("--log-json")
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
            health_port,
        }
    }

    /// Waits until GET /readyz answers 200 (caches synced): objects created
    /// after this are "created after start".
    pub fn wait_ready(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if self.readyz() {
                return;
            }
            assert!(self.running(), "bind-operator run exited\n{}", self.log());
            assert!(
                Instant::now() < deadline,
                "bind-operator run not ready after {limit:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn readyz(&self) -> bool {
        use std::io::{Read as _, Write as _};
        let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", self.health_port)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let request = "GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        if conn.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut answer = String::new();
        let _ = conn.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.1 200")
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
