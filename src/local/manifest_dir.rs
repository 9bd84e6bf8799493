//! Reading a manifest directory: every `*.yaml`, `*.yml` and `*.json` file
//! under it (recursively, in sorted path order, so the result and the
//! "first definition wins" rule for duplicates are deterministic), parsed
//! into documents by `manifests`. Files are re-parsed only when their
//! content hash changes, so a scan of a large directory costs a read and a
//! hash per file; [`DirWatch`] says when a scan is due (file-system events),
//! so an idle directory is not read at all.
//!
//! Skipped: names starting with `.` (editor swap and lock files, `.git`) and
//! `kustomization.yaml`/`.yml` (kustomize input, not an object).
//!
//! Reads the filesystem; never touches the cluster. It must never panic on
//! what it finds: unreadable files and directories become [`ManifestError`]s
//! and mark their path as uncertain, so that a caller never deletes objects
//! just because it could not read where they came from.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::manifests::{DocRef, Manifest, ManifestError, ObjectKey, Problem, parse_file};

/// Deepest directory nesting followed (a symlink loop ends here).
const MAX_DEPTH: usize = 16;
/// File extensions that hold manifests (compared case-insensitively).
const EXTENSIONS: &[&str] = &["yaml", "yml", "json"];
/// File names that are never objects.
const SKIPPED_FILES: &[&str] = &["kustomization.yaml", "kustomization.yml"];

/// Everything one directory scan found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Accepted documents, first definition of each object only, in
    /// directory order.
    pub manifests: Vec<Manifest>,
    /// Bad documents and unreadable files, in directory order.
    pub errors: Vec<ManifestError>,
    /// Files and directories (relative) whose content is not fully known:
    /// unreadable, or holding a document too broken to tell which object it
    /// is. Objects that came from there must be kept, not deleted.
    pub uncertain: Vec<PathBuf>,
    /// The directory itself could not be listed: nothing is known.
    pub root_unreadable: bool,
    /// Whether any file appeared, disappeared or changed since the previous
    /// scan by the same [`ManifestDir`] (always true on the first).
    pub changed: bool,
}

impl Loaded {
    /// Whether objects last seen at `at` must be kept although they are
    /// missing from this scan.
    pub fn is_uncertain(&self, at: &DocRef) -> bool {
        self.root_unreadable || self.uncertain.iter().any(|p| at.file.starts_with(p))
    }

    /// Objects named by a bad document: kept as they are, not deleted.
    pub fn erroneous_keys(&self) -> BTreeSet<ObjectKey> {
        self.errors.iter().filter_map(ManifestError::key).collect()
    }
}

struct CachedFile {
    hash: [u8; 32],
    docs: Vec<Result<Manifest, ManifestError>>,
}

/// A manifest directory with the parse results of its last scan.
pub struct ManifestDir {
    root: PathBuf,
    cache: BTreeMap<PathBuf, CachedFile>,
    scanned: bool,
}

impl ManifestDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            cache: BTreeMap::new(),
            scanned: false,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Scans the directory again; see [`Loaded`].
    pub fn load(&mut self) -> Loaded {
        let mut loaded = Loaded::default();
        let mut files = Vec::new();
        match std::fs::read_dir(&self.root) {
            Ok(_) => self.walk(Path::new(""), 0, &mut files, &mut loaded),
            Err(e) => {
                loaded.root_unreadable = true;
                loaded.errors.push(ManifestError::new(
                    DocRef::file(&self.root),
                    Problem::Read,
                    format!("failed to read manifest directory: {e}"),
                ));
                loaded.changed = !self.scanned;
                self.scanned = true;
                return loaded;
            }
        }

        let mut cache = BTreeMap::new();
        for rel in files {
            match std::fs::read(self.root.join(&rel)) {
                Ok(bytes) => {
                    let hash: [u8; 32] = Sha256::digest(&bytes).into();
                    let entry = match self.cache.remove(&rel) {
                        Some(cached) if cached.hash == hash => cached,
                        _ => {
                            loaded.changed = true;
                            CachedFile {
                                hash,
                                docs: parse_bytes(&rel, &bytes),
                            }
                        }
                    };
                    cache.insert(rel, entry);
                }
                // Removed between listing and reading: as if never listed.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    loaded.errors.push(ManifestError::new(
                        DocRef::file(&rel),
                        Problem::Read,
                        format!("failed to read file: {e}"),
                    ));
                    loaded.uncertain.push(rel);
                }
            }
        }
        // Whatever is left in the old cache was removed.
        loaded.changed |= !self.cache.is_empty() || !self.scanned;
        self.cache = cache;
        self.scanned = true;

        let mut first_seen: BTreeMap<ObjectKey, DocRef> = BTreeMap::new();
        for (rel, file) in &self.cache {
            for doc in &file.docs {
                match doc {
                    Ok(m) => match first_seen.get(&m.key) {
                        Some(first) => loaded.errors.push(duplicate(m, first)),
                        None => {
                            first_seen.insert(m.key.clone(), m.at.clone());
                            loaded.manifests.push(m.clone());
                        }
                    },
                    Err(e) => {
                        if e.key().is_none() && !loaded.uncertain.contains(rel) {
                            loaded.uncertain.push(rel.clone());
                        }
                        loaded.errors.push(e.clone());
                    }
                }
            }
        }
        loaded
    }

    /// Collects manifest files under `rel` in sorted order.
    fn walk(&self, rel: &Path, depth: usize, files: &mut Vec<PathBuf>, loaded: &mut Loaded) {
        let dir = self.root.join(rel);
        let mut fail = |message: String| {
            loaded.errors.push(ManifestError::new(
                DocRef::file(if rel.as_os_str().is_empty() {
                    self.root.clone()
                } else {
                    rel.to_owned()
                }),
                Problem::Read,
                message,
            ));
            loaded.uncertain.push(rel.to_owned());
        };
        if depth > MAX_DEPTH {
            fail(format!(
                "failed to read directory: nested deeper than {MAX_DEPTH} levels (a symlink loop?)"
            ));
            return;
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => return fail(format!("failed to read directory: {e}")),
        };
        let mut names: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        names.sort();
        for name in names {
            let text = name.to_string_lossy();
            if text.starts_with('.') || SKIPPED_FILES.contains(&text.as_ref()) {
                continue;
            }
            let child = rel.join(&name);
            // metadata() follows symlinks: a linked file or directory counts.
            match std::fs::metadata(self.root.join(&child)) {
                Ok(meta) if meta.is_dir() => self.walk(&child, depth + 1, files, loaded),
                Ok(meta) if meta.is_file() && has_manifest_extension(&child) => files.push(child),
                Ok(_) => {}
                // A dangling symlink or a file removed meanwhile.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    if has_manifest_extension(&child) {
                        loaded.errors.push(ManifestError::new(
                            DocRef::file(&child),
                            Problem::Read,
                            format!("failed to read file: {e}"),
                        ));
                        loaded.uncertain.push(child);
                    }
                }
            }
        }
    }
}

fn has_manifest_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

fn parse_bytes(rel: &Path, bytes: &[u8]) -> Vec<Result<Manifest, ManifestError>> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_file(rel, text),
        Err(e) => vec![Err(ManifestError::new(
            DocRef::file(rel),
            Problem::Parse,
            format!("failed to read file as UTF-8 text: {e}"),
        ))],
    }
}

fn duplicate(m: &Manifest, first: &DocRef) -> ManifestError {
    let mut err = ManifestError::new(
        m.at.clone(),
        Problem::Duplicate,
        format!(
            "{} is already defined in {first}; this definition is ignored",
            m.key
        ),
    );
    err.kind = Some(m.key.kind.as_str().to_owned());
    err.namespace = m.key.namespace.clone();
    err.name = Some(m.key.name.clone());
    err
}

/// Loads `dir` once (no cache kept); see [`ManifestDir::load`].
pub fn load_dir(dir: impl Into<PathBuf>) -> Loaded {
    ManifestDir::new(dir).load()
}

/// Quiet time after the last file-system event before the directory is
/// read: editors and `git checkout` write a file in several steps.
pub const SETTLE_EVENTS: std::time::Duration = std::time::Duration::from_millis(100);
/// How often the directory is read when the kernel cannot watch it (no
/// inotify instances left, a file system without events).
pub const FALLBACK_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// Tells when a manifest directory may have changed: file-system events
/// (inotify through `notify`, recursive) when the kernel offers them, a
/// timer otherwise. Idle, it costs nothing: no reads, no wake-ups. Our own
/// reads of the files (access events) are not changes.
pub struct DirWatch {
    events: Option<(
        notify::RecommendedWatcher,
        tokio::sync::mpsc::UnboundedReceiver<()>,
    )>,
    /// An event arrived and the directory has not been reported changed
    /// since.
    pending: bool,
}

impl DirWatch {
    /// Starts watching `root`; falls back to polling (with a warning) when
    /// it cannot be watched.
    pub fn new(root: &Path) -> Self {
        use notify::{EventKind, RecursiveMode, Watcher as _};
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let handler = move |event: notify::Result<notify::Event>| {
            let relevant = match &event {
                Ok(e) => !matches!(e.kind, EventKind::Access(_)),
                // Overflowed queue and the like: read to be sure.
                Err(_) => true,
            };
            if relevant {
                let _ = tx.send(());
            }
        };
        let watcher = notify::recommended_watcher(handler)
            .and_then(|mut w| w.watch(root, RecursiveMode::Recursive).map(|()| w));
        match watcher {
            Ok(w) => Self {
                events: Some((w, rx)),
                pending: false,
            },
            Err(e) => {
                tracing::warn!(dir = %root.display(), error = %e, interval = ?FALLBACK_POLL,
                    "failed to watch the manifest directory; polling it instead");
                Self {
                    events: None,
                    pending: false,
                }
            }
        }
    }

    /// Whether changes arrive as events (false: polling).
    pub fn is_event_driven(&self) -> bool {
        self.events.is_some()
    }

    /// Returns once the directory may have changed and has been quiet for
    /// [`SETTLE_EVENTS`] (or after [`FALLBACK_POLL`] without events).
    /// Cancel-safe.
    pub async fn changed(&mut self) {
        let Some((_, rx)) = &mut self.events else {
            tokio::time::sleep(FALLBACK_POLL).await;
            return;
        };
        // Remembered across a cancelled call (a select! that took another
        // branch while we waited for quiet): an event once received is never
        // lost.
        if !self.pending {
            if rx.recv().await.is_none() {
                // The watcher thread is gone: poll from now on.
                self.events = None;
                return;
            }
            self.pending = true;
        }
        while let Ok(Some(())) = tokio::time::timeout(SETTLE_EVENTS, rx.recv()).await {}
        self.pending = false;
    }
}
