//! The local executor: runs a pod command (argv + stdin, built by
//! `bind::commands` from the pod's [`PodLayout`]) as a local process, the
//! way pods/exec runs it in the container. The layout it hands out points
//! at the local pod's directories and ports, so the same command builders
//! produce commands that reach the local named.
//!
//! Like pods/exec, it refuses pods that are not running. Commands run with
//! a minimal environment (only PATH: no HOME, so no `~/.digrc` changes
//! dig's output) in the pod's data directory. stdin may carry TSIG keys:
//! it is never logged nor put into an error; errors carry the exit code and
//! stderr. No cluster access.

use std::process::Stdio;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::process::Command as Process;

use super::Shared;
use crate::bind::PodLayout;
use crate::bind::commands::Command;

/// What a successful command printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalExecOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Why a command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum LocalExecError {
    #[error("failed to exec in pod {namespace}/{pod}: pod not found")]
    NoSuchPod { namespace: String, pod: String },
    #[error("failed to exec in pod {namespace}/{pod}: container not running")]
    NotRunning { namespace: String, pod: String },
    #[error("failed to exec in pod {namespace}/{pod}: empty command")]
    EmptyCommand { namespace: String, pod: String },
    #[error("failed to exec in pod {namespace}/{pod}: {program}: {source}")]
    Spawn {
        namespace: String,
        pod: String,
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to exec in pod {namespace}/{pod}: timed out after {secs}s")]
    Timeout {
        namespace: String,
        pod: String,
        secs: u64,
    },
    #[error("failed to exec in pod {namespace}/{pod}: exit code {code}: {stderr}")]
    Failed {
        namespace: String,
        pod: String,
        /// The process's exit code (128 + signal if it was killed).
        code: i32,
        stdout: String,
        stderr: String,
    },
    #[error(transparent)]
    Ports(#[from] super::PortsExhausted),
}

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

    /// The pod's layout: its data and config dirs, ports and local tools.
    pub fn layout(&self, namespace: &str, pod: &str) -> Result<PodLayout, LocalExecError> {
        Ok(self.shared.layout(namespace, pod)?)
    }

    /// Runs `cmd` "in" the pod; stdout on success.
    pub async fn exec(
        &self,
        namespace: &str,
        pod: &str,
        cmd: &Command,
    ) -> Result<LocalExecOutput, LocalExecError> {
        let ids = || (namespace.to_string(), pod.to_string());
        match self.shared.table.get(namespace, pod) {
            None => {
                let (namespace, pod) = ids();
                return Err(LocalExecError::NoSuchPod { namespace, pod });
            }
            Some(p) if !p.running => {
                let (namespace, pod) = ids();
                return Err(LocalExecError::NotRunning { namespace, pod });
            }
            Some(_) => {}
        }
        let Some((program, args)) = cmd.argv.split_first() else {
            let (namespace, pod) = ids();
            return Err(LocalExecError::EmptyCommand { namespace, pod });
        };
        let dirs = self.shared.dirs(namespace, pod);
        let path = std::env::var("PATH").unwrap_or_else(|_| {
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
        });
        let mut child = Process::new(program)
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
            .map_err(|source| {
                let (namespace, pod) = ids();
                LocalExecError::Spawn {
                    namespace,
                    pod,
                    program: program.clone(),
                    source,
                }
            })?;
        tracing::debug!(namespace, pod, argv = ?cmd.argv, stdin_bytes = cmd.stdin.as_ref().map(String::len), "exec");
        let stdin = child.stdin.take();
        let input = cmd.stdin.clone();
        let feed = async move {
            if let (Some(mut w), Some(text)) = (stdin, input) {
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
                let (namespace, pod) = ids();
                return Err(LocalExecError::Timeout {
                    namespace,
                    pod,
                    secs: timeout.as_secs(),
                });
            }
            Ok(Err(source)) => {
                let (namespace, pod) = ids();
                return Err(LocalExecError::Spawn {
                    namespace,
                    pod,
                    program: program.clone(),
                    source,
                });
            }
            Ok(Ok(out)) => out,
        };
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            return Ok(LocalExecOutput { stdout, stderr });
        }
        use std::os::unix::process::ExitStatusExt;
        let code = out
            .status
            .code()
            .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
        let (namespace, pod) = ids();
        Err(LocalExecError::Failed {
            namespace,
            pod,
            code,
            stdout,
            stderr,
        })
    }
}
