//! Kubelet's atomic writer for ConfigMap / Secret / projected volumes, on a
//! local directory, so readers see the same shapes a pod sees:
//!
//! ```text
//! dir/..2025_01_31_12_00_00.123456789.a1b2/   the payload, one dir per version
//! dir/..data -> ..2025_01_31_12_00_00.123456789.a1b2
//! dir/named.conf.primary -> ..data/named.conf.primary
//! ```
//!
//! An update writes a new timestamped directory, points a temporary
//! `..data_tmp` symlink at it and renames it over `..data` (one atomic
//! step: a reader following `named.conf.primary` sees the old file or the
//! new one, never a mix), then adds or removes the top-level symlinks and
//! deletes the old directory. A symlink that exists before and after the
//! update is never touched, so paths that resolve through it (such as the
//! data directory's `named.conf` link) keep resolving.
//!
//! Local filesystem only; never logs payload bytes (they may be Secrets).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::volume::{FileContent, Payload};

/// The symlink that names the current payload directory.
pub const DATA_DIR_LINK: &str = "..data";
const DATA_DIR_TMP_LINK: &str = "..data_tmp";

/// Permission bits a file may keep by default (all of them).
const ALL_BITS: u32 = 0o7777;
/// Permission bits an owner-only volume keeps.
const OWNER_BITS: u32 = 0o700;
/// Group permission bits.
const GROUP_BITS: u32 = 0o070;
/// Mode of a payload directory (kubelet's).
const PAYLOAD_DIR_MODE: u32 = 0o755;

/// Writes payloads into one volume directory.
#[derive(Debug, Clone)]
pub struct AtomicWriter {
    dir: PathBuf,
    /// Permission bits kept from the payload's modes.
    keep: u32,
}

impl AtomicWriter {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        AtomicWriter {
            dir: dir.into(),
            keep: ALL_BITS,
        }
    }

    /// Owner-only: group and other bits are dropped from every file and
    /// directory (local mode, where the volume holds keys on a shared
    /// machine rather than inside a container).
    pub fn private(mut self) -> Self {
        self.keep = OWNER_BITS;
        self
    }

    /// Owner and group only: [`Self::private`] for a volume whose reader is
    /// the pod's fsGroup rather than the runtime's user.
    pub fn private_to_group(mut self) -> Self {
        self.keep = OWNER_BITS | GROUP_BITS;
        self
    }

    fn masked(&self, payload: &Payload) -> Payload {
        payload
            .iter()
            .map(|(rel, c)| {
                let content = FileContent {
                    bytes: c.bytes.clone(),
                    mode: c.mode & self.keep,
                };
                (rel.clone(), content)
            })
            .collect()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The payload currently visible through `..data`, if any.
    pub fn current(&self) -> io::Result<Option<Payload>> {
        let data = self.dir.join(DATA_DIR_LINK);
        if fs::symlink_metadata(&data).is_err() {
            return Ok(None);
        }
        let mut out = Payload::new();
        read_tree(&data, "", &mut out)?;
        Ok(Some(out))
    }

    /// Makes the volume hold exactly `payload`. Returns whether anything
    /// changed (an equal payload is left alone, `..data` and all).
    pub fn write(&self, payload: &Payload) -> io::Result<bool> {
        self.write_with(payload, |_| Ok(()))
    }

    /// [`Self::write`], calling `set_perms` on the new payload directory
    /// before `..data` points at it, as kubelet's writer calls its
    /// `setPerms` (volume ownership): a reader never sees a file the pod's
    /// user cannot open yet.
    pub fn write_with(
        &self,
        payload: &Payload,
        set_perms: impl FnOnce(&Path) -> io::Result<()>,
    ) -> io::Result<bool> {
        let payload = &self.masked(payload);
        if self.current()?.as_ref() == Some(payload) {
            return Ok(false);
        }
        fs::create_dir_all(&self.dir)?;
        let old_target = fs::read_link(self.dir.join(DATA_DIR_LINK)).ok();

        let ts_name = timestamped_name();
        let ts_dir = self.dir.join(&ts_name);
        fs::create_dir(&ts_dir)?;
        for (rel, content) in payload {
            write_file(&ts_dir.join(rel), content)?;
        }
        fs::set_permissions(
            &ts_dir,
            fs::Permissions::from_mode(PAYLOAD_DIR_MODE & self.keep),
        )?;
        if let Err(e) = set_perms(&ts_dir) {
            let _ = fs::remove_dir_all(&ts_dir);
            return Err(e);
        }

        let tmp = self.dir.join(DATA_DIR_TMP_LINK);
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&ts_name, &tmp)?;
        fs::rename(&tmp, self.dir.join(DATA_DIR_LINK))?;

        let wanted: BTreeSet<&str> = payload.keys().map(|k| top_level(k)).collect();
        for name in &wanted {
            let link = self.dir.join(name);
            let target = Path::new(DATA_DIR_LINK).join(name);
            match fs::read_link(&link) {
                Ok(t) if t == target => continue,
                Ok(_) => fs::remove_file(&link)?,
                Err(_) if fs::symlink_metadata(&link).is_ok() => remove_any(&link)?,
                Err(_) => {}
            }
            std::os::unix::fs::symlink(&target, &link)?;
        }
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with("..") || wanted.contains(name) {
                continue;
            }
            if entry.file_type()?.is_symlink() {
                fs::remove_file(entry.path())?;
            }
        }
        if let Some(old) = old_target {
            let old = self.dir.join(old);
            if old != ts_dir {
                let _ = fs::remove_dir_all(old);
            }
        }
        Ok(true)
    }
}

fn top_level(rel: &str) -> &str {
    rel.split('/').next().unwrap_or(rel)
}

fn remove_any(p: &Path) -> io::Result<()> {
    if fs::symlink_metadata(p)?.is_dir() {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)
    }
}

fn write_file(path: &Path, content: &FileContent) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, &content.bytes)?;
    fs::set_permissions(path, fs::Permissions::from_mode(content.mode & 0o7777))
}

fn read_tree(dir: &Path, prefix: &str, out: &mut Payload) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let meta = entry.metadata()?;
        if meta.is_dir() {
            read_tree(&entry.path(), &rel, out)?;
        } else {
            out.insert(
                rel,
                FileContent {
                    bytes: fs::read(entry.path())?,
                    mode: meta.permissions().mode() & 0o7777,
                },
            );
        }
    }
    Ok(())
}

/// `..YYYY_MM_DD_HH_MM_SS.<nanos>.<random>`, unique per write like
/// kubelet's `MkdirTemp` names.
fn timestamped_name() -> String {
    let now = jiff::Timestamp::now();
    let dt = now.to_zoned(jiff::tz::TimeZone::UTC);
    format!(
        "..{}.{:09}.{:04x}",
        dt.strftime("%Y_%m_%d_%H_%M_%S"),
        dt.subsec_nanosecond(),
        rand::random::<u16>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(items: &[(&str, &str)]) -> Payload {
        items
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    FileContent {
                        bytes: v.as_bytes().to_vec(),
                        mode: 0o644,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn swaps_data_link_and_keeps_stable_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let w = AtomicWriter::new(tmp.path().join("vol"));
        assert!(
            w.write(&payload(&[("a.conf", "one"), ("sub/b", "two")]))
                .unwrap()
        );
        let first = fs::read_link(w.dir().join(DATA_DIR_LINK)).unwrap();
        assert_eq!(
            fs::read_link(w.dir().join("a.conf")).unwrap(),
            Path::new("..data/a.conf")
        );
        assert_eq!(fs::read_to_string(w.dir().join("sub/b")).unwrap(), "two");
        // An outside link through the volume, like the data dir's named.conf.
        let outside = tmp.path().join("named.conf");
        std::os::unix::fs::symlink(w.dir().join("a.conf"), &outside).unwrap();

        assert!(
            !w.write(&payload(&[("a.conf", "one"), ("sub/b", "two")]))
                .unwrap()
        );
        assert!(w.write(&payload(&[("a.conf", "three")])).unwrap());
        let second = fs::read_link(w.dir().join(DATA_DIR_LINK)).unwrap();
        assert_ne!(first, second);
        assert!(!w.dir().join(&first).exists(), "old payload dir removed");
        assert!(fs::symlink_metadata(w.dir().join("sub")).is_err());
        assert_eq!(fs::read_to_string(&outside).unwrap(), "three");
        assert_eq!(
            w.current().unwrap().unwrap(),
            payload(&[("a.conf", "three")])
        );
    }

    /// Ownership is set on the new payload before readers can reach it:
    /// while `set_perms` runs, `a.conf` still reads the old content, and
    /// what `set_perms` sees is the new payload's directory.
    #[test]
    fn set_perms_runs_before_the_swap() {
        let tmp = tempfile::tempdir().unwrap();
        let w = AtomicWriter::new(tmp.path().join("vol"));
        w.write(&payload(&[("a.conf", "old")])).unwrap();
        let mut seen = None;
        let changed = w
            .write_with(&payload(&[("a.conf", "new")]), |dir| {
                seen = Some((
                    fs::read_to_string(w.dir().join("a.conf"))?,
                    fs::read_to_string(dir.join("a.conf"))?,
                    dir.to_owned(),
                ));
                Ok(())
            })
            .unwrap();
        assert!(changed);
        let (visible, staged, dir) = seen.expect("set_perms was called");
        assert_eq!((visible.as_str(), staged.as_str()), ("old", "new"));
        assert_eq!(
            w.dir()
                .join(fs::read_link(w.dir().join(DATA_DIR_LINK)).unwrap()),
            dir
        );
        assert_eq!(fs::read_to_string(w.dir().join("a.conf")).unwrap(), "new");
    }
}
