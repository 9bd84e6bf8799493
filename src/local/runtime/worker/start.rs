//! Starting a pod's container: the config volume written with the
//! `..data` swap, the entrypoint's environment (the template's literal
//! values, then the local seam's ports, dirs and named binary), and
//! `sh entrypoint.sh`. Part of the pod worker; touches only local files and
//! processes.

use std::net::{IpAddr, Ipv4Addr};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;

use super::{STARTUP_PROBE_INTERVAL, Worker};
use crate::bind::layout::mount;
use crate::local::runtime::atomic_writer::AtomicWriter;
use crate::local::runtime::container::{Container, ContainerSpec};
use crate::local::runtime::identity;
use crate::local::runtime::statefulset::{POD_INDEX_LABEL, trailing_ordinal};
use crate::local::runtime::volume;
use crate::local::runtime::volume::Payload;

/// The termination message policy that asks for the log tail.
const FALLBACK_TO_LOGS_ON_ERROR: &str = "FallbackToLogsOnError";

impl Worker {
    /// Readies the pod's directories for its user: reachable, and the data
    /// volume owned as kubelet leaves it. The error is the waiting message.
    fn prepare_for_user(&self, pod: &Pod) -> Result<(), String> {
        let run_as = &self.pod.run_as;
        if run_as.is_empty() {
            return Ok(());
        }
        for dir in [self.dirs.root.parent(), Some(self.dirs.root.as_path())]
            .into_iter()
            .flatten()
        {
            identity::make_traversable(dir)
                .map_err(|e| format!("failed to open {} to the pod's user: {e}", dir.display()))?;
        }
        if run_as.uid.is_some_and(|u| u != 0)
            && let Some(blocked) = identity::blocked_ancestor(&self.dirs.root)
        {
            return Err(format!(
                "failed to give the pod's user (uid {}) a way to its volumes: {} is closed to other users; use a state directory others can traverse",
                run_as.uid.unwrap_or_default(),
                blocked.display()
            ));
        }
        let empty_dir = !volume::data_volume_is_persistent(pod);
        run_as
            .prepare_data_volume(&self.dirs.data, empty_dir, self.shared.config.private_files)
            .map_err(|e| format!("failed to set the data volume's ownership: {e}"))
    }

    pub(super) fn mount(&mut self, payload: Payload) -> bool {
        let mut writer = AtomicWriter::new(&self.dirs.config);
        if self.shared.config.private_files {
            // Owner-only; a pod of another user reads through its fsGroup.
            writer = if self.pod.run_as.is_empty() {
                writer.private()
            } else {
                writer.private_to_group()
            };
        }
        // On disk as kubelet writes it for the pod's fsGroup.
        let on_disk = self.pod.run_as.config_payload(&payload);
        let run_as = &self.pod.run_as;
        let written = writer
            .write_with(&on_disk, |dir| run_as.own_config_payload(dir))
            .and_then(|changed| {
                if changed && !run_as.is_empty() {
                    // The volume's root is made owner-only (umask); the
                    // pod's user must pass through it to its payload.
                    identity::make_traversable(&self.dirs.config)?;
                }
                Ok(changed)
            });
        match written {
            Ok(changed) => {
                if changed {
                    tracing::debug!(pod = %self.name(), "config volume updated");
                }
                self.pod.mounted = Some(payload);
                self.pod.pending_since = None;
                true
            }
            Err(e) => {
                tracing::warn!(pod = %self.name(), error = %e, "failed to write config volume");
                self.pod.waiting = (
                    "ContainerCreating".into(),
                    format!("failed to write config volume: {e}"),
                );
                self.pod.restart_at = Some(Instant::now() + self.shared.config.restart_backoff);
                false
            }
        }
    }

    pub(super) fn ordinal(&self, pod: &Pod) -> u32 {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_INDEX_LABEL))
            .and_then(|v| v.parse().ok())
            .or_else(|| trailing_ordinal(self.name()))
            .unwrap_or(0)
    }

    pub(super) fn env(&self, pod: &Pod, ordinal: u32) -> Result<Vec<(String, String)>, String> {
        let layout = self
            .shared
            .layout(self.ns(), self.name())
            .map_err(|e| e.to_string())?;
        let path = std::env::var("PATH").unwrap_or_else(|_| {
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
        });
        let mut env = vec![
            ("PATH".to_string(), path),
            ("HOSTNAME".to_string(), self.name().to_string()),
        ];
        // The template's literal values first; the local seam's overrides win.
        let container = pod.spec.as_ref().and_then(|s| s.containers.first());
        for e in container.and_then(|c| c.env.as_ref()).into_iter().flatten() {
            if let Some(v) = &e.value {
                env.push((e.name.clone(), v.clone()));
            }
        }
        env.extend(layout.entrypoint_env(ordinal, IpAddr::V4(Ipv4Addr::LOCALHOST)));
        env.push((
            crate::bind::layout::env::NAMED_BIN.into(),
            self.shared.named.clone(),
        ));
        Ok(env)
    }

    pub(super) fn start_container(&mut self, pod: &Pod) {
        let ordinal = self.ordinal(pod);
        let script = self.dirs.config.join(mount::ENTRYPOINT);
        let env = match self.env(pod, ordinal) {
            Ok(env) => env,
            Err(e) => {
                self.pod.waiting = ("CreateContainerError".into(), e);
                return;
            }
        };
        if !script.exists() {
            self.pod.waiting = (
                "CreateContainerError".into(),
                format!("failed to find {} in the config volume", mount::ENTRYPOINT),
            );
            return;
        }
        if let Err(e) = std::fs::create_dir_all(&self.dirs.data) {
            self.pod.waiting = ("CreateContainerError".into(), e.to_string());
            return;
        }
        if let Err(e) = self.prepare_for_user(pod) {
            self.pod.waiting = ("CreateContainerError".into(), e);
            self.pod.restart_at = Some(Instant::now() + self.next_backoff());
            return;
        }
        self.pod.fallback_to_logs = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.termination_message_policy.as_deref())
            == Some(FALLBACK_TO_LOGS_ON_ERROR);
        let spec = ContainerSpec {
            script,
            cwd: self.dirs.data.clone(),
            env,
            log: self.dirs.log.clone(),
            run_as: self.pod.run_as.clone(),
            pid_file: self
                .dirs
                .root
                .join(crate::local::runtime::container::PID_FILE),
        };
        let header = format!(
            "{} pod {}/{} uid {} restart {} user {}",
            Timestamp::now(),
            self.ns(),
            self.name(),
            self.pod.uid.as_deref().unwrap_or_default(),
            self.pod.restarts,
            self.pod
                .run_as
                .uid
                .map_or_else(|| "runtime's".to_string(), |u| u.to_string()),
        );
        match Container::start(&spec, &header, &self.shared.pids) {
            Ok(c) => {
                tracing::info!(pod = %self.name(), namespace = %self.ns(), pid = c.pid(), "named started");
                self.pod.container = Some(c);
                self.pod.started_at = Some((Instant::now(), Timestamp::now()));
                self.pod.started_once = true;
                self.pod.probe_failures = 0;
                self.pod.next_probe = Instant::now() + STARTUP_PROBE_INTERVAL;
            }
            Err(e) => {
                tracing::warn!(pod = %self.name(), error = %e, "failed to start named");
                self.pod.waiting = ("CreateContainerError".into(), e.to_string());
                self.pod.restart_at = Some(Instant::now() + self.next_backoff());
            }
        }
    }
}
