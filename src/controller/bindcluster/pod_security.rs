//! The Pod Security Standards' "restricted" profile (which includes
//! "baseline"), as checks on a pod spec. Pure.
//!
//! Written from the published standard
//! (<https://kubernetes.io/docs/concepts/security/pod-security-standards/>)
//! rather than copied from admission code, so the pod template's own unit
//! test can say which rule a change broke long before a namespace that
//! enforces the profile refuses the pods (the StatefulSet then only shows
//! FailedCreate events). It covers every control that a pod spec
//! expresses in fields the operator could set; nothing here talks to a
//! cluster.

use k8s_openapi::api::core::v1::{
    Capabilities, Container, PodSecurityContext, PodSpec, SeccompProfile, SecurityContext,
};

/// Volume types the restricted profile allows.
const ALLOWED_VOLUME_TYPES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];
/// The only capability a restricted container may add.
const ALLOWED_ADDED_CAPABILITY: &str = "NET_BIND_SERVICE";
/// Sysctls the baseline profile calls safe.
const SAFE_SYSCTLS: [&str; 10] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
/// SELinux types the baseline profile allows (besides unset).
const ALLOWED_SELINUX_TYPES: [&str; 3] = ["container_t", "container_init_t", "container_kvm_t"];

/// Every rule of the restricted profile `spec` breaks, one line each
/// ("container bind: allowPrivilegeEscalation must be false"). Empty: the
/// pod would be admitted.
pub fn restricted_violations(spec: &PodSpec) -> Vec<String> {
    let mut out = Vec::new();
    let pod_sc = spec.security_context.clone().unwrap_or_default();
    host_namespaces(spec, &mut out);
    volumes(spec, &mut out);
    pod_level(&pod_sc, &mut out);
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    for c in containers {
        container(c, &pod_sc, &mut out);
    }
    out
}

fn host_namespaces(spec: &PodSpec, out: &mut Vec<String>) {
    for (field, on) in [
        ("hostNetwork", spec.host_network),
        ("hostPID", spec.host_pid),
        ("hostIPC", spec.host_ipc),
    ] {
        if on == Some(true) {
            out.push(format!("pod: {field} must not be true"));
        }
    }
}

fn volumes(spec: &PodSpec, out: &mut Vec<String>) {
    for v in spec.volumes.iter().flatten() {
        let value = serde_json::to_value(v).expect("a volume serialises");
        let kinds: Vec<String> = value
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .filter(|k| k != "name")
            .collect();
        for kind in kinds {
            if !ALLOWED_VOLUME_TYPES.contains(&kind.as_str()) {
                out.push(format!(
                    "volume {}: type {kind} is not allowed (only {})",
                    v.name,
                    ALLOWED_VOLUME_TYPES.join(", ")
                ));
            }
        }
    }
}

fn seccomp_ok(p: &SeccompProfile) -> bool {
    matches!(p.type_.as_str(), "RuntimeDefault" | "Localhost")
}

fn pod_level(sc: &PodSecurityContext, out: &mut Vec<String>) {
    if sc.run_as_user == Some(0) {
        out.push("pod: runAsUser must not be 0".into());
    }
    if let Some(p) = &sc.seccomp_profile
        && !seccomp_ok(p)
    {
        out.push(format!(
            "pod: seccompProfile.type {} must be RuntimeDefault or Localhost",
            p.type_
        ));
    }
    if sc
        .windows_options
        .as_ref()
        .and_then(|w| w.host_process)
        .unwrap_or(false)
    {
        out.push("pod: windowsOptions.hostProcess must not be true".into());
    }
    if let Some(se) = &sc.se_linux_options {
        selinux("pod", se, out);
    }
    for s in sc.sysctls.iter().flatten() {
        if !SAFE_SYSCTLS.contains(&s.name.as_str()) {
            out.push(format!("pod: sysctl {} is not allowed", s.name));
        }
    }
    if let Some(a) = &sc.app_armor_profile
        && a.type_ == "Unconfined"
    {
        out.push("pod: appArmorProfile.type must not be Unconfined".into());
    }
}

fn selinux(who: &str, se: &k8s_openapi::api::core::v1::SELinuxOptions, out: &mut Vec<String>) {
    if let Some(t) = se.type_.as_deref()
        && !t.is_empty()
        && !ALLOWED_SELINUX_TYPES.contains(&t)
    {
        out.push(format!("{who}: seLinuxOptions.type {t} is not allowed"));
    }
    if se.user.as_deref().is_some_and(|u| !u.is_empty())
        || se.role.as_deref().is_some_and(|r| !r.is_empty())
    {
        out.push(format!("{who}: seLinuxOptions.user and role must be unset"));
    }
}

fn capabilities(who: &str, caps: Option<&Capabilities>, out: &mut Vec<String>) {
    let drops_all = caps
        .and_then(|c| c.drop.as_ref())
        .is_some_and(|d| d.iter().any(|c| c == "ALL"));
    if !drops_all {
        out.push(format!("{who}: capabilities.drop must include ALL"));
    }
    for add in caps.and_then(|c| c.add.as_ref()).into_iter().flatten() {
        if add != ALLOWED_ADDED_CAPABILITY {
            out.push(format!(
                "{who}: capability {add} must not be added (only {ALLOWED_ADDED_CAPABILITY})"
            ));
        }
    }
}

fn container(c: &Container, pod: &PodSecurityContext, out: &mut Vec<String>) {
    let who = format!("container {}", c.name);
    let sc: SecurityContext = c.security_context.clone().unwrap_or_default();
    if sc.privileged == Some(true) {
        out.push(format!("{who}: privileged must not be true"));
    }
    if sc.allow_privilege_escalation != Some(false) {
        out.push(format!("{who}: allowPrivilegeEscalation must be false"));
    }
    capabilities(&who, sc.capabilities.as_ref(), out);
    // runAsNonRoot: the container's own setting wins over the pod's.
    match sc.run_as_non_root.or(pod.run_as_non_root) {
        Some(true) => {}
        _ => out.push(format!(
            "{who}: runAsNonRoot must be true (in the container or the pod)"
        )),
    }
    if sc.run_as_user == Some(0) {
        out.push(format!("{who}: runAsUser must not be 0"));
    }
    match sc.seccomp_profile.as_ref().or(pod.seccomp_profile.as_ref()) {
        Some(p) if seccomp_ok(p) => {}
        Some(p) => out.push(format!(
            "{who}: seccompProfile.type {} must be RuntimeDefault or Localhost",
            p.type_
        )),
        None => out.push(format!(
            "{who}: seccompProfile must be RuntimeDefault or Localhost (in the container or the pod)"
        )),
    }
    if sc.proc_mount.as_deref().is_some_and(|m| m != "Default") {
        out.push(format!("{who}: procMount must be Default"));
    }
    if sc
        .windows_options
        .as_ref()
        .and_then(|w| w.host_process)
        .unwrap_or(false)
    {
        out.push(format!(
            "{who}: windowsOptions.hostProcess must not be true"
        ));
    }
    if let Some(se) = &sc.se_linux_options {
        selinux(&who, se, out);
    }
    if let Some(a) = &sc.app_armor_profile
        && a.type_ == "Unconfined"
    {
        out.push(format!(
            "{who}: appArmorProfile.type must not be Unconfined"
        ));
    }
    for p in c.ports.iter().flatten() {
        if p.host_port.is_some_and(|h| h != 0) {
            out.push(format!(
                "{who}: hostPort {} must not be set",
                p.host_port.unwrap_or_default()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{BindCluster, BindClusterSpec, StorageSpec};
    use crate::controller::bindcluster::statefulset::statefulset;
    use k8s_openapi::api::core::v1::{HostPathVolumeSource, Volume};

    fn cluster(spec: serde_json::Value) -> BindCluster {
        let spec: BindClusterSpec = serde_json::from_value(spec).unwrap();
        let mut c = BindCluster::new("c", spec);
        c.metadata.namespace = Some("ns".into());
        c.metadata.uid = Some("u".into());
        c
    }

    fn pod_spec(c: &BindCluster) -> PodSpec {
        statefulset(c, "#!/bin/sh\n").spec.template.spec.unwrap()
    }

    #[test]
    fn the_default_pod_passes_restricted() {
        let mut c = cluster(serde_json::json!({}));
        assert_eq!(restricted_violations(&pod_spec(&c)), Vec::<String>::new());
        // With persistent storage too (a claim is an allowed volume type).
        c.spec.storage = Some(StorageSpec {
            size: k8s_openapi::apimachinery::pkg::api::resource::Quantity("1Gi".into()),
            storage_class_name: None,
        });
        assert_eq!(restricted_violations(&pod_spec(&c)), Vec::<String>::new());
        // An override of the user that stays non-root still passes.
        let c = cluster(serde_json::json!({
            "podSecurityContext": {"runAsUser": 101, "runAsGroup": 101, "fsGroup": 101}
        }));
        let spec = pod_spec(&c);
        assert_eq!(restricted_violations(&spec), Vec::<String>::new());
        let sc = spec.security_context.unwrap();
        assert_eq!(sc.run_as_user, Some(101));
        // The fields the override left alone keep their defaults.
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    }

    #[test]
    fn overrides_that_break_the_profile_are_named() {
        let root = cluster(serde_json::json!({
            "podSecurityContext": {"runAsUser": 0, "runAsNonRoot": false},
            "securityContext": {"runAsNonRoot": false}
        }));
        let v = restricted_violations(&pod_spec(&root));
        assert!(
            v.contains(&"pod: runAsUser must not be 0".to_string()),
            "{v:?}"
        );
        assert!(
            v.iter().any(|l| l.contains("container bind: runAsNonRoot")),
            "{v:?}"
        );

        let caps = cluster(serde_json::json!({
            "securityContext": {
                "allowPrivilegeEscalation": true,
                "capabilities": {"drop": [], "add": ["NET_ADMIN"]},
                "seccompProfile": {"type": "Unconfined"}
            }
        }));
        let v = restricted_violations(&pod_spec(&caps));
        for want in [
            "container bind: allowPrivilegeEscalation must be false",
            "container bind: capabilities.drop must include ALL",
            "container bind: capability NET_ADMIN must not be added (only NET_BIND_SERVICE)",
            "container bind: seccompProfile.type Unconfined must be RuntimeDefault or Localhost",
        ] {
            assert!(v.contains(&want.to_string()), "{want} not in {v:?}");
        }
    }

    #[test]
    fn host_access_and_volume_types_are_refused() {
        let c = cluster(serde_json::json!({}));
        let mut spec = pod_spec(&c);
        spec.host_network = Some(true);
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: "host".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/var/run".into(),
                type_: None,
            }),
            ..Default::default()
        });
        spec.containers[0].ports.get_or_insert_with(Vec::new)[0].host_port = Some(53);
        spec.security_context.as_mut().unwrap().seccomp_profile = None;
        spec.containers[0]
            .security_context
            .as_mut()
            .unwrap()
            .seccomp_profile = None;
        let v = restricted_violations(&spec);
        for want in [
            "pod: hostNetwork must not be true",
            "container bind: hostPort 53 must not be set",
            "container bind: seccompProfile must be RuntimeDefault or Localhost (in the container or the pod)",
        ] {
            assert!(v.contains(&want.to_string()), "{want} not in {v:?}");
        }
        assert!(
            v.iter()
                .any(|l| l.starts_with("volume host: type hostPath")),
            "{v:?}"
        );
    }

    #[test]
    fn the_default_pod_runs_named_unprivileged_on_a_read_only_root() {
        let c = cluster(serde_json::json!({}));
        let spec = pod_spec(&c);
        let sc = spec.security_context.clone().unwrap();
        assert_eq!(
            (sc.run_as_user, sc.run_as_group, sc.fs_group),
            (Some(53), Some(53), Some(53))
        );
        let bind = &spec.containers[0];
        let csc = bind.security_context.clone().unwrap();
        assert_eq!(csc.read_only_root_filesystem, Some(true));
        assert_eq!(
            bind.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
        // Unprivileged container ports, so no NET_BIND_SERVICE either.
        for p in bind.ports.iter().flatten() {
            assert!(p.container_port >= 1024, "{p:?}");
        }
        // Everything named writes is a volume: data and /tmp.
        let mounts: Vec<(&str, bool)> = bind
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| (m.mount_path.as_str(), m.read_only == Some(true)))
            .collect();
        assert_eq!(
            mounts,
            [
                ("/etc/bind/operator", true),
                ("/var/lib/bind", false),
                ("/tmp", false)
            ]
        );
        // The Secrets are mounted 0440: readable through the fsGroup only.
        let projected = spec.volumes.as_ref().unwrap()[0].projected.clone().unwrap();
        let secret_modes: Vec<Option<i32>> = projected
            .sources
            .unwrap()
            .iter()
            .filter_map(|s| s.secret.as_ref())
            .flat_map(|s| s.items.clone().unwrap())
            .map(|i| i.mode)
            .collect();
        assert_eq!(secret_modes, [Some(0o440), Some(0o440)]);
    }
}
