//! Which files of a watched folder are documents, and as what: format by extension,
//! document id from the path, title from the content; the scan that finds them and the
//! only way the watcher reads one ([`read_text`]): a regular file, bounded, never opened
//! when it could block (a FIFO) or never end (a device).

use std::fs::{FileType, Metadata};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

pub(super) use super::unusable::Unusable;

/// A file's size and modification time: what says it changed, or is still changing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Stamp {
    pub len: u64,
    pub mtime_ns: u128,
}

impl Stamp {
    pub fn of(meta: &Metadata) -> Self {
        Self {
            len: meta.len(),
            mtime_ns: mtime_ns(meta),
        }
    }
}

/// A document file found by a scan, usable or not.
#[derive(Debug)]
pub(super) struct Found {
    pub doc_id: String,
    /// As found in the folder (a symlink's own path): the document's url.
    pub path: PathBuf,
    pub format: &'static str,
    /// Of what would be read (a symlink's target); of the entry itself when unusable.
    pub stamp: Stamp,
    /// The regular file to read (a symlink resolved), or why there is none.
    pub file: Result<PathBuf, Unusable>,
}

/// What a scan saw: the document files, the folders it could not list (their files are
/// neither found nor gone), and the symlinks it did not follow (to a folder, or to nothing
/// under a document's name), to say why.
#[derive(Debug, Default)]
pub(super) struct Scan {
    pub found: Vec<Found>,
    pub unlisted: Vec<(PathBuf, Unusable)>,
    pub skipped: Vec<(PathBuf, Unusable)>,
}

/// The format of a file by its extension; other files are not documents.
pub fn format_of(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    if name.starts_with('.') || name.ends_with('~') {
        return None;
    }
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "md" | "markdown" | "mdx" => Some("markdown"),
        "html" | "htm" => Some("html"),
        "txt" | "text" => Some("text"),
        "wiki" | "mediawiki" => Some("wikitext"),
        _ => None,
    }
}

/// `prefix` + the path under `root` without its extension, with `/` separators.
pub fn doc_id(prefix: &str, root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?.with_extension("");
    let parts: Vec<&str> = relative
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    Some(format!("{prefix}{}", parts.join("/")))
}

/// The title: a YAML front-matter `title:`, else the first Markdown `# ` heading or HTML
/// `<title>`, else the file name.
pub fn title_of(path: &Path, content: &str) -> String {
    let front_matter = content
        .strip_prefix("---\n")
        .and_then(|rest| rest.split("\n---").next())
        .and_then(|block| block.lines().find_map(|l| l.strip_prefix("title:")));
    let heading = || content.lines().find_map(|l| l.strip_prefix("# "));
    let html = || {
        let start = content.find("<title>")? + "<title>".len();
        let end = content[start..].find("</title>")?;
        Some(&content[start..start + end])
    };
    front_matter
        .or_else(heading)
        .or_else(html)
        .map(|t| t.trim().trim_matches('"').to_owned())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| {
            path.file_stem().map_or_else(String::new, |s| {
                s.to_string_lossy().replace(['-', '_'], " ")
            })
        })
}

/// Every document file under `roots` (recursively; hidden entries skipped, symlinked
/// folders skipped and listed in [`Scan::skipped`]), each checked without opening it: a
/// regular file, or a symlink to one inside its root; at most `limit` bytes. A document
/// file that vanished meanwhile, or a symlink whose target does not exist, is not found (it
/// is gone; such a symlink is listed in [`Scan::skipped`]). A Kubernetes ConfigMap mount
/// works as is: its files are symlinks through the hidden `..data` link into a hidden
/// folder of the mount, all inside it.
pub(super) fn scan(roots: &[PathBuf], prefix: &str, limit: usize) -> Scan {
    let mut scan = Scan::default();
    for root in roots {
        let canonical_root = match std::fs::canonicalize(root) {
            Ok(path) => path,
            Err(error) => {
                scan.unlisted.push((root.clone(), error.into()));
                continue;
            }
        };
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(error) => {
                    scan.unlisted.push((dir, error.into()));
                    continue;
                }
            };
            for entry in entries.flatten() {
                let path = entry.path();
                // The entry's own type: a symlink is not followed here.
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                let hidden = entry.file_name().to_string_lossy().starts_with('.');
                if file_type.is_dir() {
                    if !hidden {
                        stack.push(path);
                    }
                    continue;
                }
                if file_type.is_symlink() && !hidden {
                    match std::fs::metadata(&path) {
                        Ok(meta) if meta.is_dir() => {
                            let target = std::fs::canonicalize(&path).unwrap_or_default();
                            let inside = target.starts_with(&canonical_root);
                            let why = Unusable::SymlinkedFolder { target, inside };
                            scan.skipped.push((path, why));
                            continue;
                        }
                        Err(error)
                            if error.kind() == ErrorKind::NotFound
                                && format_of(&path).is_some() =>
                        {
                            let target = std::fs::read_link(&path).unwrap_or_default();
                            scan.skipped.push((path, Unusable::Dangling(target)));
                            continue;
                        }
                        _ => {}
                    }
                }
                let (Some(format), Some(doc_id)) = (format_of(&path), doc_id(prefix, root, &path))
                else {
                    continue;
                };
                let Some((stamp, file)) = inspect(&canonical_root, &path, limit) else {
                    continue;
                };
                scan.found.push(Found {
                    doc_id,
                    path,
                    format,
                    stamp,
                    file,
                });
            }
        }
    }
    scan.found.sort_by(|a, b| a.doc_id.cmp(&b.doc_id));
    scan
}

/// Whether `path` can be read as a document of the folder `canonical_root`, without
/// opening it: its stamp and the regular file to read, or why not. `None` when it does
/// not exist (or is a symlink to nothing).
pub(super) fn inspect(
    canonical_root: &Path,
    path: &Path,
    limit: usize,
) -> Option<(Stamp, Result<PathBuf, Unusable>)> {
    let own = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == ErrorKind::NotFound => return None,
        Err(error) => return Some((Stamp::default(), Err(error.into()))),
    };
    let stamp = Stamp::of(&own);
    let (stamp, target) = if own.file_type().is_symlink() {
        let target = match std::fs::canonicalize(path) {
            Ok(target) => target,
            Err(error) if error.kind() == ErrorKind::NotFound => return None,
            Err(error) => return Some((stamp, Err(error.into()))),
        };
        let meta = match std::fs::metadata(&target) {
            Ok(meta) => meta,
            Err(error) => return Some((stamp, Err(error.into()))),
        };
        if !meta.is_file() {
            return Some((stamp, Err(Unusable::NotRegular(kind(meta.file_type())))));
        }
        if !target.starts_with(canonical_root) {
            return Some((stamp, Err(Unusable::OutsideFolder(target))));
        }
        (Stamp::of(&meta), target)
    } else if own.is_file() {
        (stamp, path.to_owned())
    } else {
        return Some((stamp, Err(Unusable::NotRegular(kind(own.file_type())))));
    };
    if stamp.len > limit as u64 {
        return Some((
            stamp,
            Err(Unusable::TooLarge {
                len: stamp.len,
                limit,
            }),
        ));
    }
    Some((stamp, Ok(target)))
}

/// Reads a regular file as UTF-8, at most `limit` bytes, with the stamp it had once read
/// (compare it with the scan's: a difference means it changed meanwhile). Opened without
/// blocking and checked again once open, so a file swapped for a FIFO or a device after
/// the scan is refused, not waited on.
pub(super) fn read_text(path: &Path, limit: usize) -> Result<(String, Stamp), Unusable> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Unusable::NotRegular(kind(meta.file_type())));
    }
    if meta.len() > limit as u64 {
        return Err(Unusable::TooLarge {
            len: meta.len(),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(limit));
    (&file).take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Err(Unusable::TooLarge {
            len: bytes.len() as u64,
            limit,
        });
    }
    let stamp = Stamp::of(&file.metadata()?);
    let text = String::from_utf8(bytes).map_err(|_| Unusable::NotUtf8)?;
    Ok((text, stamp))
}

/// `O_NONBLOCK` (std has no name for it and the `libc` crate is not a dependency): an
/// `open` of a FIFO with it returns at once instead of waiting for a writer; it changes
/// nothing for a regular file. On a platform not listed, 0: the type checks before
/// opening still keep FIFOs out, with a window for a file swapped meanwhile.
const O_NONBLOCK: i32 = if cfg!(all(
    target_os = "linux",
    any(
        target_arch = "x86",
        target_arch = "x86_64",
        target_arch = "arm",
        target_arch = "aarch64",
        target_arch = "riscv64",
        target_arch = "powerpc64",
        target_arch = "s390x",
        target_arch = "loongarch64"
    )
)) {
    0o4000
} else if cfg!(any(
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly"
)) {
    0x0004
} else {
    0
};

fn kind(file_type: FileType) -> &'static str {
    if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symlink"
    } else {
        "not a plain file"
    }
}

/// A file's modification time in nanoseconds since the epoch (0 when unknown).
/// Whether `path` is on a network or user-space file system (NFS, SMB/CIFS, 9p, AFS,
/// Ceph, FUSE): changes made on another machine raise no notification there, so such a
/// folder is polled. Read from `/proc/self/mountinfo` (the mount that holds the path).
pub(super) fn is_network_fs(path: &Path) -> bool {
    let (Ok(path), Ok(mounts)) = (
        std::fs::canonicalize(path),
        std::fs::read_to_string("/proc/self/mountinfo"),
    ) else {
        return false;
    };
    fs_type_of(&path, &mounts).is_some_and(|kind| {
        matches!(
            kind,
            "nfs" | "nfs4" | "cifs" | "smb3" | "smbfs" | "9p" | "afs" | "ceph" | "glusterfs"
        ) || kind.starts_with("fuse")
    })
}

/// The file system type of the mount (in `mountinfo`'s format) that holds `path`.
fn fs_type_of<'a>(path: &Path, mountinfo: &'a str) -> Option<&'a str> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            // The mount point, with spaces written as \040 (and tabs, newlines, \).
            let mount = fields
                .get(4)?
                .replace("\\040", " ")
                .replace("\\011", "\t")
                .replace("\\012", "\n")
                .replace("\\134", "\\");
            let dash = fields.iter().position(|f| *f == "-")?;
            Some((mount, *fields.get(dash + 1)?))
        })
        .filter(|(mount, _)| path.starts_with(mount))
        .max_by_key(|(mount, _)| mount.len())
        .map(|(_, kind)| kind)
}

pub(super) fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_that_holds_a_path_says_its_file_system() {
        let mountinfo = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
                         40 22 0:50 / /mnt/share rw - nfs4 server:/export rw\n\
                         41 22 0:51 / /mnt/my\\040docs rw - fuse.sshfs host: rw\n";
        assert_eq!(
            fs_type_of(Path::new("/home/a/docs"), mountinfo),
            Some("ext4")
        );
        assert_eq!(
            fs_type_of(Path::new("/mnt/share/kb"), mountinfo),
            Some("nfs4")
        );
        assert_eq!(
            fs_type_of(Path::new("/mnt/my docs/x"), mountinfo),
            Some("fuse.sshfs")
        );
        assert!(!is_network_fs(Path::new("/nonexistent-path")));
    }

    #[test]
    fn doc_ids_formats_and_titles() {
        let root = Path::new("/docs");
        assert_eq!(
            doc_id("kb:", root, Path::new("/docs/a/b-c.md")).as_deref(),
            Some("kb:a/b-c")
        );
        assert_eq!(format_of(Path::new("x.MD")), Some("markdown"));
        assert_eq!(format_of(Path::new("x.htm")), Some("html"));
        assert_eq!(format_of(Path::new(".x.md")), None);
        assert_eq!(format_of(Path::new("x.md~")), None);
        assert_eq!(format_of(Path::new("x.png")), None);
        let p = Path::new("/docs/changing-your-name.md");
        assert_eq!(
            title_of(p, "---\ntitle: Changing your name\n---\nText."),
            "Changing your name"
        );
        assert_eq!(title_of(p, "Intro.\n# Heading\n"), "Heading");
        assert_eq!(title_of(p, "<html><title> Page </title>"), "Page");
        assert_eq!(title_of(p, "no title"), "changing your name");
    }
}
