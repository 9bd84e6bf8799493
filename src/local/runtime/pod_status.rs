//! The Pod status a kubelet would report for a local pod, as a JSON value
//! for a merge patch of `pods/status`: phase, the four standard
//! conditions, 127.0.0.1 as host and pod IP, and one container status
//! (running / waiting, restart count, last termination).
//!
//! Pure. Condition `lastTransitionTime`s move only when a condition flips
//! ([`Conditions`] remembers them), so an unchanged pod produces an equal
//! value and the worker writes nothing.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Value, json};

/// The pod IP and host IP of every local pod.
pub const LOCAL_IP: &str = "127.0.0.1";

/// Condition types in the order kubelet lists them.
const CONDITION_TYPES: [&str; 4] = ["PodScheduled", "Initialized", "ContainersReady", "Ready"];

/// Condition states with their transition times.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    by_type: BTreeMap<&'static str, (bool, Timestamp)>,
}

impl Conditions {
    /// Sets a condition; its transition time moves only on a flip.
    pub fn set(&mut self, type_: &'static str, status: bool, now: Timestamp) {
        match self.by_type.get(type_) {
            Some((s, _)) if *s == status => {}
            _ => {
                self.by_type.insert(type_, (status, now));
            }
        }
    }

    fn to_json(&self) -> Value {
        CONDITION_TYPES
            .iter()
            .filter_map(|t| {
                let (s, at) = self.by_type.get(t)?;
                Some(json!({
                    "type": t,
                    "status": if *s { "True" } else { "False" },
                    "lastProbeTime": null,
                    "lastTransitionTime": rfc3339(*at),
                }))
            })
            .collect()
    }
}

/// How the last run of the container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    pub exit_code: i32,
    /// The tail of the log (`FallbackToLogsOnError` and a failed exit).
    pub message: Option<String>,
    pub signal: Option<i32>,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
}

/// What the container is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerPhase {
    Waiting { reason: String, message: String },
    Running { since: Timestamp, pid: u32 },
}

/// Inputs for one pod's status.
#[derive(Debug, Clone)]
pub struct StatusInput<'a> {
    pub container_name: &'a str,
    pub image: &'a str,
    pub start_time: Timestamp,
    /// The container has run at least once for this Pod object.
    pub started_once: bool,
    pub phase: &'a ContainerPhase,
    pub ready: bool,
    pub restarts: u32,
    pub last_terminated: Option<&'a Terminated>,
    pub conditions: &'a Conditions,
}

fn rfc3339(t: Timestamp) -> String {
    // Kubernetes times have second precision.
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The `status` object.
pub fn build(input: &StatusInput<'_>) -> Value {
    let state = match input.phase {
        ContainerPhase::Waiting { reason, message } => {
            json!({"waiting": {"reason": reason, "message": message}})
        }
        ContainerPhase::Running { since, .. } => json!({"running": {"startedAt": rfc3339(*since)}}),
    };
    let container_id = match input.phase {
        ContainerPhase::Running { pid, .. } => Value::String(format!("local://{pid}")),
        ContainerPhase::Waiting { .. } => Value::Null,
    };
    let last_state = match input.last_terminated {
        Some(t) => json!({"terminated": {
            "exitCode": t.exit_code,
            "signal": t.signal,
            "reason": if t.exit_code == 0 && t.signal.is_none() { "Completed" } else { "Error" },
            "startedAt": rfc3339(t.started_at),
            "finishedAt": rfc3339(t.finished_at),
            "message": t.message,
        }}),
        None => json!({}),
    };
    let running = matches!(input.phase, ContainerPhase::Running { .. });
    json!({
        "phase": if input.started_once { "Running" } else { "Pending" },
        "conditions": input.conditions.to_json(),
        "hostIP": LOCAL_IP,
        "hostIPs": [{"ip": LOCAL_IP}],
        "podIP": LOCAL_IP,
        "podIPs": [{"ip": LOCAL_IP}],
        "startTime": rfc3339(input.start_time),
        "containerStatuses": [{
            "name": input.container_name,
            "image": input.image,
            "imageID": "",
            "containerID": container_id,
            "ready": input.ready,
            "started": running,
            "restartCount": input.restarts,
            "state": state,
            "lastState": last_state,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_times_move_only_on_flips() {
        let t0: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2025-01-01T00:00:05Z".parse().unwrap();
        let mut c = Conditions::default();
        c.set("Ready", false, t0);
        c.set("Ready", false, t1);
        let phase = ContainerPhase::Running { since: t0, pid: 7 };
        let input = StatusInput {
            container_name: "bind",
            image: "img",
            start_time: t0,
            started_once: true,
            phase: &phase,
            ready: false,
            restarts: 2,
            last_terminated: None,
            conditions: &c,
        };
        let s = build(&input);
        assert_eq!(
            s["conditions"][0]["lastTransitionTime"],
            "2025-01-01T00:00:00Z"
        );
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["podIP"], "127.0.0.1");
        assert_eq!(s["containerStatuses"][0]["restartCount"], 2);
        assert_eq!(s["containerStatuses"][0]["containerID"], "local://7");
        let mut c2 = c.clone();
        c2.set("Ready", true, t1);
        let s2 = build(&StatusInput {
            conditions: &c2,
            ..input
        });
        assert_eq!(
            s2["conditions"][0]["lastTransitionTime"],
            "2025-01-01T00:00:05Z"
        );
        assert_eq!(s2["conditions"][0]["status"], "True");
    }
}
