//! Who a local pod's processes run as, and the file ownership kubelet would
//! give its volumes, so local mode runs named exactly as a cluster would:
//! the pod's runAsUser / runAsGroup (the container's settings over the
//! pod's), with the fsGroup and supplementalGroups as extra groups; the
//! config volume's files group-owned by the fsGroup with the group read bit
//! kubelet adds; the data volume group-owned and group-writable (setgid
//! directories) as kubelet's volume ownership management leaves it (all of
//! it, or only when its root does not match, with `OnRootMismatch`).
//!
//! Only when the runtime itself runs as root: a runtime started by an
//! ordinary user runs everything as that user, as before (local mode needs
//! no root). Numeric ids only: no user or group needs to exist. Local files
//! and processes only; no cluster access.

use std::io;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

use super::volume::Payload;

/// Bits kubelet adds to a read-only volume's files for the fsGroup.
const RO_GROUP_MASK: u32 = 0o440;
/// Bits kubelet adds to a writable volume's files for the fsGroup.
const RW_GROUP_MASK: u32 = 0o660;
/// Bits (setgid, group rwx) kubelet adds to a writable volume's directories.
const RW_DIR_MASK: u32 = 0o2770;
/// Mode of a fresh emptyDir (kubelet's default).
const EMPTY_DIR_MODE: u32 = 0o777;

/// Whether this process may switch users (is root).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The identity a pod's processes get. Empty (all `None`): run as the
/// runtime's own user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunAs {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Supplementary groups: fsGroup first, then supplementalGroups.
    pub groups: Vec<u32>,
    /// The pod's fsGroup: the group its volumes are given to.
    pub fs_group: Option<u32>,
    /// `fsGroupChangePolicy: OnRootMismatch`.
    pub on_root_mismatch: bool,
}

fn id(v: Option<i64>) -> Option<u32> {
    v.and_then(|v| u32::try_from(v).ok())
}

impl RunAs {
    /// The identity the pod asks for, honoured only when `root` (the
    /// runtime can switch users); otherwise empty.
    pub fn of_pod(pod: &Pod, root: bool) -> Self {
        if !root {
            return RunAs::default();
        }
        let Some(spec) = pod.spec.as_ref() else {
            return RunAs::default();
        };
        let psc = spec.security_context.clone().unwrap_or_default();
        let csc = spec
            .containers
            .first()
            .and_then(|c| c.security_context.clone())
            .unwrap_or_default();
        let uid = id(csc.run_as_user.or(psc.run_as_user));
        // A runtime gives a user without a group the image's group for it;
        // with numeric ids and no passwd entry that is group 0.
        let gid = id(csc.run_as_group.or(psc.run_as_group)).or(uid.map(|_| 0));
        let fs_group = id(psc.fs_group);
        let mut groups: Vec<u32> = fs_group.into_iter().collect();
        for g in psc.supplemental_groups.iter().flatten() {
            if let Some(g) = id(Some(*g))
                && !groups.contains(&g)
            {
                groups.push(g);
            }
        }
        RunAs {
            uid,
            gid,
            groups,
            fs_group,
            on_root_mismatch: psc.fs_group_change_policy.as_deref() == Some("OnRootMismatch"),
        }
    }

    /// Nothing to switch: processes keep the runtime's identity.
    pub fn is_empty(&self) -> bool {
        self.uid.is_none() && self.gid.is_none() && self.groups.is_empty()
    }

    /// Makes `cmd` run as this identity: groups, then group, then user (the
    /// order in which each step still has the privilege the next needs).
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        if self.is_empty() {
            return;
        }
        let (uid, gid) = (self.uid, self.gid);
        let groups: Vec<libc::gid_t> = self.groups.clone();
        // SAFETY: the closure runs in the forked child before exec and only
        // makes async-signal-safe system calls on data allocated before the
        // fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if let Some(g) = gid
                    && libc::setgid(g) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                if let Some(u) = uid
                    && libc::setuid(u) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// The config volume's files as kubelet writes them for this pod: with
    /// an fsGroup, every file also readable by the group.
    pub fn config_payload(&self, payload: &Payload) -> Payload {
        let mut out = payload.clone();
        if self.fs_group.is_some() {
            for f in out.values_mut() {
                f.mode |= RO_GROUP_MASK;
            }
        }
        out
    }

    /// Gives a config volume's payload directory, and the files in it, to
    /// the fsGroup (before `..data` points at it; the symlinks stay
    /// root's).
    pub fn own_config_payload(&self, payload_dir: &Path) -> io::Result<()> {
        let Some(group) = self.fs_group else {
            return Ok(());
        };
        walk(payload_dir, &mut |p, _| chgrp(p, group))
    }

    /// Prepares the data volume as kubelet would before the container
    /// starts: an emptyDir is world-writable; with an fsGroup the volume is
    /// given to the group, group-writable with setgid directories (all of
    /// it, or with `OnRootMismatch` only when its root does not already
    /// match). This is also what lets a pod of a new user take over a
    /// volume an older root-run pod filled.
    ///
    /// `private` (local mode, where "others" are the machine's other users,
    /// not other containers): the emptyDir is not opened to everyone; the
    /// pod's user gets it through its fsGroup, or as its owner without one.
    pub fn prepare_data_volume(
        &self,
        dir: &Path,
        empty_dir: bool,
        private: bool,
    ) -> io::Result<()> {
        if empty_dir && private && self.fs_group.is_none() && self.uid.is_some() {
            std::os::unix::fs::chown(dir, self.uid, self.gid)?;
        } else if empty_dir && !private && !self.is_empty() {
            let meta = std::fs::metadata(dir)?;
            let mode = meta.permissions().mode() & 0o7777;
            if mode & EMPTY_DIR_MODE != EMPTY_DIR_MODE {
                std::fs::set_permissions(
                    dir,
                    std::fs::Permissions::from_mode(mode | EMPTY_DIR_MODE),
                )?;
            }
        }
        let Some(group) = self.fs_group else {
            return Ok(());
        };
        let meta = std::fs::metadata(dir)?;
        let root_matches =
            meta.gid() == group && meta.permissions().mode() & RW_DIR_MASK == RW_DIR_MASK;
        if self.on_root_mismatch && root_matches {
            return Ok(());
        }
        walk(dir, &mut |p, is_dir| {
            chgrp(p, group)?;
            let mode = std::fs::symlink_metadata(p)?.permissions().mode() & 0o7777;
            let add = if is_dir { RW_DIR_MASK } else { RW_GROUP_MASK };
            if mode | add != mode {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | add))?;
            }
            Ok(())
        })
    }
}

/// Calls `f(path, is_dir)` on `root` and everything under it, without
/// following symlinks (they are skipped: chmod would follow them).
fn walk(root: &Path, f: &mut dyn FnMut(&Path, bool) -> io::Result<()>) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(root)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    f(root, meta.is_dir())?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(root)? {
            walk(&entry?.path(), f)?;
        }
    }
    Ok(())
}

fn chgrp(path: &Path, group: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, None, Some(group))
}

/// Search (execute) permission for group and others: enough for a pod user
/// to pass through to its volumes, not to list what else is there.
const TRAVERSE_BITS: u32 = 0o011;

/// Lets other users pass through `dir` (execute only, so a private state
/// directory's listing stays private), so a pod's user can reach its
/// volumes below it.
pub fn make_traversable(dir: &Path) -> io::Result<()> {
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
    if mode & TRAVERSE_BITS != TRAVERSE_BITS {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | TRAVERSE_BITS))?;
    }
    Ok(())
}

/// The first directory above `dir` (inclusive) that other users cannot
/// pass through, if any.
pub fn blocked_ancestor(dir: &Path) -> Option<std::path::PathBuf> {
    dir.ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| {
            std::fs::metadata(a)
                .map(|m| m.permissions().mode() & 0o001 == 0)
                .unwrap_or(false)
        })
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p-0"},
            "spec": json,
        }))
        .unwrap()
    }

    #[test]
    fn the_container_wins_over_the_pod_and_groups_follow_the_fs_group() {
        let p = pod(serde_json::json!({
            "securityContext": {"runAsUser": 53, "runAsGroup": 53, "fsGroup": 1000,
                                "supplementalGroups": [1000, 7], "fsGroupChangePolicy": "OnRootMismatch"},
            "containers": [{"name": "bind", "securityContext": {"runAsUser": 101}}]
        }));
        let r = RunAs::of_pod(&p, true);
        assert_eq!(r.uid, Some(101));
        assert_eq!(r.gid, Some(53));
        assert_eq!(r.groups, [1000, 7]);
        assert!(r.on_root_mismatch);
        // Not root: nothing is switched.
        assert!(RunAs::of_pod(&p, false).is_empty());
        // A user without a group gets group 0, as a runtime would.
        let p = pod(serde_json::json!({
            "securityContext": {"runAsUser": 53},
            "containers": [{"name": "bind"}]
        }));
        assert_eq!(RunAs::of_pod(&p, true).gid, Some(0));
        let none = pod(serde_json::json!({"containers": [{"name": "bind"}]}));
        assert!(RunAs::of_pod(&none, true).is_empty());
    }

    #[test]
    fn config_modes_gain_group_read_only_with_an_fs_group() {
        use super::super::volume::FileContent;
        let payload = Payload::from([(
            "rndc.key".to_string(),
            FileContent {
                bytes: b"k".to_vec(),
                mode: 0o400,
            },
        )]);
        let with = RunAs {
            fs_group: Some(53),
            ..Default::default()
        };
        assert_eq!(with.config_payload(&payload)["rndc.key"].mode, 0o440);
        assert_eq!(
            RunAs::default().config_payload(&payload)["rndc.key"].mode,
            0o400
        );
    }
}
