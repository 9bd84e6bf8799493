//! The local executor: runs a pod command (argv + stdin, built by
//! `bind::commands` from the pod's [`PodLayout`]) as a local process, the
//! way pods/exec runs it in the container. The layout it hands out points
//! at the local pod's directories and ports, so the same command builders
//! produce commands that reach the local named.
//!
//! Like pods/exec, it refuses pods that are not running, and runs the
//! command as the pod's user (when the runtime can switch users). Commands run with
//! a minimal environment (only PATH: no HOME, so no `~/.digrc` changes
//! dig's output) in the pod's data directory. stdin may carry TSIG keys:
//! it is never logged nor put into an error; errors carry the exit code and
//! stderr. Implements the controllers' [`PodExecutor`]. No cluster access.

use std::process::Stdio;
use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::io::AsyncWriteExt;
use tokio::process::Command as Process;

use super::Shared;
use crate::bind::PodLayout;
use crate::bind::commands::Command;
use crate::controller::exec::{ExecError, ExecOutput, PodExecutor, PodRef};

/// Runs commands against the runtime's local pods. Cheap to clone.
#[derive(Clone)]
pub struct LocalExecutor {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalExecutor").finish_non_exhaustive()
    }
}

impl LocalExecutor {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        LocalExecutor { shared }
    }

    async fn run(&self, pod: &PodRef, cmd: &Command) -> Result<ExecOutput, ExecError> {
        let run_as = match self.shared.table.get(&pod.namespace, &pod.name) {
            None => return Err(ExecError::transport(pod, cmd, "pod not found")),
            Some(p) if !p.running => {
                return Err(ExecError::transport(pod, cmd, "container not running"));
            }
            Some(p) => p.run_as,
        };
        let Some((program, args)) = cmd.argv.split_first() else {
            return Err(ExecError::transport(pod, cmd, "empty command"));
        };
        let dirs = self.shared.dirs(&pod.namespace, &pod.name);
        let path = std::env::var("PATH").unwrap_or_else(|_| {
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
        });
        let mut process = Process::new(program);
        // As the container's user, like pods/exec.
        run_as.apply(&mut process);
        let mut child = process
            .args(args)
            .current_dir(&dirs.data)
            .env_clear()
            .env("PATH", path)
            .stdin(if cmd.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ExecError::transport(pod, cmd, e))?;
        tracing::debug!(pod = %pod, argv = ?cmd.argv, stdin_bytes = cmd.stdin.as_ref().map(String::len), "exec");
        let stdin = child.stdin.take();
        let feed = async move {
            if let (Some(mut w), Some(text)) = (stdin, cmd.stdin.as_deref()) {
                // A command that exits without reading all of stdin is its
                // own business; its exit status tells.
                let _ = w.write_all(text.as_bytes()).await;
                let _ = w.shutdown().await;
            }
        };
        let run = async {
            let ((), out) = tokio::join!(feed, child.wait_with_output());
            out
        };
        let timeout = self.shared.config.exec_timeout;
        let out = match tokio::time::timeout(timeout, run).await {
            Err(_) => {
                return Err(ExecError::transport(
                    pod,
                    cmd,
                    format!("timed out after {}s", timeout.as_secs()),
                ));
            }
            Ok(Err(e)) => return Err(ExecError::transport(pod, cmd, e)),
            Ok(Ok(out)) => out,
        };
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            return Ok(ExecOutput { stdout, stderr });
        }
        use std::os::unix::process::ExitStatusExt;
        let code = out
            .status
            .code()
            .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
        Err(ExecError::exited(pod, cmd, code, stdout, &stderr))
    }
}

impl PodExecutor for LocalExecutor {
    /// The pod's local layout: its data and config dirs under the state
    /// dir, its ports, and the tools found on this machine.
    fn layout(&self, pod: &PodRef) -> PodLayout {
        self.shared
            .layout(&pod.namespace, &pod.name)
            .unwrap_or_else(|e| {
                // Only after ~30,000 pods; exec then fails on port 0.
                tracing::error!(pod = %pod, error = %e, "no ports left for pod");
                let dirs = self.shared.dirs(&pod.namespace, &pod.name);
                PodLayout {
                    data_dir: dirs.data,
                    config_dir: dirs.config,
                    server_addr: std::net::Ipv4Addr::LOCALHOST.into(),
                    dns_port: 0,
                    control_port: 0,
                    stats_port: 0,
                    tools: self.shared.tools.clone(),
                }
            })
    }

    fn exec<'a>(
        &'a self,
        pod: &'a PodRef,
        cmd: &'a Command,
    ) -> BoxFuture<'a, Result<ExecOutput, ExecError>> {
        self.run(pod, cmd).boxed()
    }
}
