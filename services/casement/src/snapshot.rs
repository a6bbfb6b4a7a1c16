//! `casement snapshot OUT` and `casement restore SNAPSHOT`: a consistent copy of a data
//! directory (the embedded index, the source positions, the webhook's accepted events, the
//! dead letters, the watcher's state) and its way back.
//!
//! A snapshot is a directory: the data directory's files, the index under `index/`, and
//! `snapshot.json`, a manifest with every file's size and SHA-256. It is written under
//! `OUT.partial` and renamed to `OUT` once every file is fsynced, so a snapshot that exists
//! is complete. The index is copied while its lock is held (no service runs on it), and
//! the data directory's files before it: positions never run ahead of the index they
//! describe, so a restored directory resumes its sources where the index stands (an event
//! indexed twice is fenced; none is skipped).
//!
//! Restore checks every file against the manifest first, then, under the index's lock,
//! marks the data directory (`RESTORING`), empties it, copies the snapshot in and removes
//! the mark. A kill midway leaves the mark, and every command but `restore` refuses to
//! open the directory until a restore completes.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::CasementConfig;

/// The manifest's file name, in a snapshot.
pub const MANIFEST: &str = "snapshot.json";
/// Present in a data directory while a restore writes it.
pub const RESTORING: &str = "RESTORING";
/// Where a snapshot keeps the index.
const INDEX_DIR: &str = "index";
const LOCK_FILE: &str = "casement.lock";
const FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub casement_version: String,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
    /// The data directory it was taken from.
    pub data_dir: PathBuf,
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the snapshot, with `/` separators.
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

impl Manifest {
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

/// Refuses a data directory that a restore left half written.
pub fn check_not_restoring(data_dir: &Path) -> anyhow::Result<()> {
    let mark = data_dir.join(RESTORING);
    if let Ok(from) = std::fs::read_to_string(&mark) {
        bail!(
            "{} holds an interrupted restore (of {}): run `casement restore {} --force` again \
             before using it",
            data_dir.display(),
            from.trim(),
            from.trim()
        );
    }
    Ok(())
}

/// Writes a snapshot of the closed data directory into `out` (which must not exist).
pub fn snapshot(config: &CasementConfig, out: &Path) -> anyhow::Result<Manifest> {
    let index = edge_path(config)?;
    check_not_restoring(&config.data_dir)?;
    if out.exists() {
        bail!("{} exists: a snapshot goes to a new path", out.display());
    }
    let partial = partial_path(out);
    if partial.exists() {
        std::fs::remove_dir_all(&partial)
            .with_context(|| format!("removing an unfinished {}", partial.display()))?;
    }
    let out_abs = absolute(out)?;
    let index_abs = absolute(&index)?;
    let partial_abs = absolute(&partial)?;
    let data_abs = absolute(&config.data_dir)?;
    if out_abs.starts_with(&data_abs) || out_abs.starts_with(&index_abs) {
        bail!(
            "{} is inside the data directory {}: a snapshot goes elsewhere (a restore empties \
             the data directory, and a later snapshot would copy this one)",
            out.display(),
            config.data_dir.display()
        );
    }
    // After a migration the data directory holds other indexes (kept for a rollback, or
    // one being built) and the pointer to the served one: the snapshot holds the served
    // index alone, as `index/`, and no pointer.
    let managed = config.store.edge.path.as_os_str().is_empty();
    let other_index = |path: &Path| {
        managed
            && path.parent() == Some(data_abs.as_path())
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| crate::serving::valid_name(n) || n == crate::serving::FILE)
    };
    // Under the index's lock (no service has the directory open): the data directory's
    // own files first (see the module docs), then the index.
    let store = casement_store::EdgeStore::lock_closed(&index)?;
    casement_store::copy_tree(&config.data_dir, &partial, &|path: &Path| {
        let path = absolute(path).unwrap_or_else(|_| path.to_owned());
        path == index_abs
            || other_index(&path)
            || path == out_abs
            || path == partial_abs
            || path.file_name().is_some_and(|n| n == LOCK_FILE)
    })
    .with_context(|| {
        format!(
            "copying {} to {}",
            config.data_dir.display(),
            partial.display()
        )
    })?;
    store
        .snapshot(&partial.join(INDEX_DIR))
        .context("copying the index")?;
    let manifest = Manifest {
        format: FORMAT,
        casement_version: env!("CARGO_PKG_VERSION").to_owned(),
        created_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        data_dir: absolute(&config.data_dir)?,
        files: hash_files(&partial)?,
    };
    write_synced(
        &partial.join(MANIFEST),
        &serde_json::to_vec_pretty(&manifest)?,
    )?;
    std::fs::rename(&partial, out)
        .with_context(|| format!("renaming {} to {}", partial.display(), out.display()))?;
    sync_parent(out)?;
    Ok(manifest)
}

/// Replaces the data directory's contents with the snapshot at `from`. Without `force`, a
/// data directory that holds anything is refused.
pub fn restore(config: &CasementConfig, from: &Path, force: bool) -> anyhow::Result<Manifest> {
    // The served index (what a running service would hold locked), and where the snapshot's
    // goes: `<data_dir>/index` unless `store.edge.path` is set (the pointer of a migration
    // goes with the rest of the directory).
    let serving = edge_path(config)?;
    let index = if config.store.edge.path.as_os_str().is_empty() {
        config.data_dir.join(crate::serving::FIRST)
    } else {
        serving.clone()
    };
    let manifest = verify(from)?;
    let data_dir = &config.data_dir;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating data_dir {}", data_dir.display()))?;
    let interrupted = data_dir.join(RESTORING).exists();
    let occupied = std::fs::read_dir(data_dir)?
        .flatten()
        .any(|e| e.file_name() != RESTORING)
        || index_holds_data(&index)
        || index_holds_data(&serving);
    if occupied && !force && !interrupted {
        bail!(
            "{} is not empty: restoring replaces everything in it (the index, the source \
             positions, the accepted events, the dead letters); add --force to do so",
            data_dir.display()
        );
    }
    let _lock = lock_index(&serving)?;
    write_synced(
        &data_dir.join(RESTORING),
        absolute(from)?.display().to_string().as_bytes(),
    )?;
    // Empty the directory (the mark stays), and the index where it lives apart.
    for entry in std::fs::read_dir(data_dir)?.flatten() {
        if entry.file_name() == RESTORING {
            continue;
        }
        remove(&entry.path())?;
    }
    if index.exists() {
        remove(&index)?;
    }
    // Only the regular files the manifest lists, opened without following links.
    std::fs::create_dir_all(&index)?;
    for file in &manifest.files {
        let source = from.join(&file.path);
        let target = match file.path.strip_prefix(&format!("{INDEX_DIR}/")) {
            Some(inside) => index.join(inside),
            None => data_dir.join(&file.path),
        };
        copy_regular(&source, &target, file.bytes)
            .with_context(|| format!("copying {} to {}", source.display(), target.display()))?;
    }
    std::fs::remove_file(data_dir.join(RESTORING))?;
    std::fs::File::open(data_dir)?.sync_all()?;
    Ok(manifest)
}

/// Reads the manifest and checks every file it lists (size and SHA-256), and that the
/// snapshot holds no file it does not list.
pub fn verify(from: &Path) -> anyhow::Result<Manifest> {
    let bytes = std::fs::read(from.join(MANIFEST)).with_context(|| {
        format!(
            "{} is not a Casement snapshot (no readable {MANIFEST})",
            from.display()
        )
    })?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .with_context(|| format!("reading {}", from.join(MANIFEST).display()))?;
    if manifest.format != FORMAT {
        bail!(
            "{}: snapshot format {} (this Casement reads format {FORMAT})",
            from.display(),
            manifest.format
        );
    }
    for want in &manifest.files {
        let normal = Path::new(&want.path)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !normal || want.path.is_empty() || want.path == MANIFEST {
            bail!(
                "{}: the manifest lists {:?}, which is not a path inside the snapshot",
                from.display(),
                want.path
            );
        }
    }
    let found = hash_files(from)?;
    for want in &manifest.files {
        let Some(got) = found.iter().find(|f| f.path == want.path) else {
            bail!("{}: {} is missing", from.display(), want.path);
        };
        if (got.bytes, &got.sha256) != (want.bytes, &want.sha256) {
            bail!(
                "{}: {} does not match the manifest ({} bytes, sha256 {}; expected {} bytes, {})",
                from.display(),
                want.path,
                got.bytes,
                got.sha256,
                want.bytes,
                want.sha256
            );
        }
    }
    if let Some(extra) = found
        .iter()
        .find(|f| !manifest.files.iter().any(|w| w.path == f.path))
    {
        bail!("{}: {} is not in the manifest", from.display(), extra.path);
    }
    Ok(manifest)
}

fn edge_path(config: &CasementConfig) -> anyhow::Result<PathBuf> {
    let store = config.store();
    if store.backend != casement_store::Backend::Edge {
        bail!(
            "store.backend = \"server\": snapshot and restore concern the embedded store; a \
             Qdrant server has its own snapshots"
        );
    }
    Ok(store.edge.path)
}

fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_owned();
    name.push(".partial");
    out.with_file_name(name)
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))
}

/// Takes the index directory's lock (creating the directory), so no service opens it
/// while it is replaced.
fn lock_index(index: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(index)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(index.join(LOCK_FILE))?;
    match file.try_lock() {
        Ok(()) => {
            casement_store::note_lock_holder(&file);
            Ok(file)
        }
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "{} is in use by a running Casement ({}): stop it before restoring",
            index.display(),
            casement_store::lock_holder(&index.join(LOCK_FILE))
                .unwrap_or_else(|| "another process".into())
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", index.join(LOCK_FILE).display()))
        }
    }
}

fn index_holds_data(index: &Path) -> bool {
    std::fs::read_dir(index)
        .is_ok_and(|entries| entries.flatten().any(|e| e.file_name() != LOCK_FILE))
}

fn remove(path: &Path) -> anyhow::Result<()> {
    let result = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    result.with_context(|| format!("removing {}", path.display()))
}

/// Copies the regular file `source` (a link, a FIFO or a device is refused, never followed
/// or waited on) to `target`, creating its folder, and syncs it; `bytes` is what the
/// manifest says it holds (checked again: the snapshot could change after the check).
fn copy_regular(source: &Path, target: &Path, bytes: u64) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(source)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() != bytes {
        bail!("not the regular file of {bytes} bytes the manifest lists");
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut out = std::fs::File::create(target)?;
    casement_store::copy_sparse(&mut file, &mut out)?;
    out.sync_all()?;
    Ok(())
}

/// Every regular file under `root` but the manifest, sorted by path.
fn hash_files(root: &Path) -> anyhow::Result<Vec<FileEntry>> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            if !kind.is_file() {
                // A link could bring in a file from elsewhere, a FIFO would hang the copy.
                bail!(
                    "{} is a {}, not a regular file: a snapshot holds only files and folders",
                    path.display(),
                    if kind.is_symlink() {
                        "symbolic link"
                    } else {
                        "special file"
                    }
                );
            }
            let relative = path.strip_prefix(root)?;
            let name: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let name = name.join("/");
            if name == MANIFEST {
                continue;
            }
            let (bytes, sha256) = hash_file(&path)?;
            files.push(FileEntry {
                path: name,
                bytes,
                sha256,
            });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn hash_file(path: &Path) -> anyhow::Result<(u64, String)> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 1 << 20];
    let mut bytes = 0;
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        bytes += n as u64;
    }
    let digest = hasher.finalize();
    Ok((bytes, digest.iter().map(|b| format!("{b:02x}")).collect()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file =
        std::fs::File::create(path).with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    sync_parent(path)
}

fn sync_parent(path: &Path) -> anyhow::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::File::open(parent)?.sync_all()?;
    Ok(())
}
