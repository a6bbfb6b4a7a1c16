//! The watcher against hostile folders: FIFOs, sockets, devices behind symlinks, symlinks
//! out of the folder (`links.rs`), oversize, not-UTF-8 and unreadable files, files still being written.
//! Each scan runs under a deadline on a runtime of its own, so a scan that blocks fails
//! the test instead of hanging it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use casement_events::Change;
use casement_pipeline::{Body, Offsets, SourceMessage};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;
use crate::metrics::LocalMetrics;

/// Runs `work` on a fresh runtime; fails if it takes more than 10 s (a blocked open or an
/// endless read), without waiting for the blocked thread.
fn within_deadline<T>(work: impl Future<Output = T>) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let result =
        runtime.block_on(async { tokio::time::timeout(Duration::from_secs(10), work).await });
    runtime.shutdown_background();
    result.expect("the watcher blocked or read without end")
}

struct Folder {
    _dir: tempfile::TempDir,
    docs: PathBuf,
    data: PathBuf,
}

impl Folder {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (docs, data) = (dir.path().join("docs"), dir.path().join("data"));
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        Self {
            _dir: dir,
            docs,
            data,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.docs.join(name)
    }

    fn write(&self, name: &str, content: impl AsRef<[u8]>) {
        std::fs::write(self.path(name), content).unwrap();
    }

    /// A watcher on the folder and what it sends.
    fn watcher(
        &self,
        settle_ms: u64,
        max_file_bytes: usize,
    ) -> (Watcher, mpsc::Receiver<SourceMessage>) {
        let (input, output) = mpsc::channel(1000);
        let metrics = LocalMetrics::new(&prometheus::Registry::new());
        let feeder = Feeder::new(input, Offsets::default(), 0, metrics);
        let config = WatchConfig {
            dirs: vec![self.docs.clone()],
            settle_ms,
            max_file_bytes: Some(max_file_bytes),
            ..WatchConfig::default()
        };
        (Watcher::new(config, &self.data, feeder), output)
    }
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
}

/// Each event sent: (doc id, `Some(content)` for an upsert, `None` for a delete).
fn sent(output: &mut mpsc::Receiver<SourceMessage>) -> Vec<(String, Option<String>)> {
    let mut events = Vec::new();
    while let Ok(message) = output.try_recv() {
        let Body::Event(event) = message.body else {
            panic!("the watcher sends events it built")
        };
        events.push(match event.change {
            Change::Upsert(revision) => (revision.doc_id, Some(revision.content)),
            Change::Delete { doc_id, .. } => (doc_id, None),
            Change::Fetch(_) | Change::Restore(_) => panic!("the watcher sends plain upserts"),
        });
    }
    events
}

fn reasons(outcome: &ScanOutcome) -> Vec<(String, String)> {
    let mut reasons: Vec<_> = outcome
        .reported
        .iter()
        .map(|(path, why)| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, why.to_string())
        })
        .collect();
    reasons.sort();
    reasons
}

#[test]
fn hostile_entries_are_skipped_promptly_and_reported_once_each() {
    let folder = Folder::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.md"),
        "# Secret\n\nNot for the index.\n",
    )
    .unwrap();
    folder.write("good.md", "# Good\n\nA plain page.\n");
    folder.write("latin1.md", b"caf\xe9 au lait\n");
    folder.write("big.md", "x".repeat(200));
    mkfifo(&folder.path("pipe.md"));
    std::os::unix::fs::symlink("/dev/zero", folder.path("zero.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), folder.path("secret.md")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(folder.path("socket.md")).unwrap();
    let (mut watcher, mut output) = folder.watcher(0, 100);

    let first = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert_eq!(first.sent, 1);
    assert_eq!(
        sent(&mut output),
        [("good".into(), Some("# Good\n\nA plain page.\n".into()))]
    );
    let first = reasons(&first);
    let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "big.md",
            "latin1.md",
            "pipe.md",
            "secret.md",
            "socket.md",
            "zero.md"
        ]
    );
    let why = |name: &str| &first.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(
        why("big.md"),
        "too large: 200 bytes, over the event size limit of 100"
    );
    assert_eq!(why("latin1.md"), "not UTF-8 text");
    assert_eq!(why("pipe.md"), "not a regular file (a FIFO)");
    assert_eq!(why("socket.md"), "not a regular file (a socket)");
    assert_eq!(why("zero.md"), "not a regular file (a character device)");
    assert!(
        why("secret.md").contains("outside the watched folder"),
        "{}",
        why("secret.md")
    );

    // Said once: later scans send and report nothing while nothing changes.
    for _ in 0..3 {
        let again = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
        assert_eq!(
            (again.sent, again.reported.len()),
            (0, 0),
            "{:?}",
            again.reported
        );
    }
    assert!(sent(&mut output).is_empty());

    // A change is news: reported again, with its reason.
    std::fs::OpenOptions::new()
        .append(true)
        .open(folder.path("latin1.md"))
        .unwrap()
        .write_all(b"cr\xe8me\n")
        .unwrap();
    let changed = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert_eq!(
        reasons(&changed),
        [("latin1.md".into(), "not UTF-8 text".into())]
    );
    // Made usable, it is indexed.
    folder.write("latin1.md", "café au lait\n");
    let fixed = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert_eq!((fixed.sent, fixed.reported.len()), (1, 0));
}

#[test]
fn a_fifo_is_never_opened_even_when_swapped_in_after_the_scan() {
    let folder = Folder::new();
    mkfifo(&folder.path("pipe.md"));
    // `read_text` is what the watcher opens files with, after the scan's checks: it must
    // refuse a FIFO rather than wait for a writer.
    let path = folder.path("pipe.md");
    let read = within_deadline(async move {
        tokio::task::spawn_blocking(move || read_text(&path, 1000))
            .await
            .unwrap()
    });
    assert_eq!(read.unwrap_err(), Unusable::NotRegular("a FIFO"));
}

#[test]
fn a_growing_file_is_indexed_once_when_it_settles() {
    let folder = Folder::new();
    let (mut watcher, mut output) = folder.watcher(1000, 1 << 20);
    let start = Instant::now();
    let at = |ms: u64| start + Duration::from_millis(ms);
    let mut growing = std::fs::File::create(folder.path("growing.md")).unwrap();
    let mut text = String::new();
    // Written between every scan (500 ms apart): never the same twice, never read.
    for scan in 0..10 {
        let line = format!("Line {scan} of a file still being written.\n");
        growing.write_all(line.as_bytes()).unwrap();
        text.push_str(&line);
        let outcome = within_deadline(watcher.scan(Some(at(scan * 500)))).unwrap();
        assert_eq!(outcome.sent, 0, "scan {scan} read a file still changing");
    }
    drop(growing);
    // Unchanged, but not yet for settle_ms.
    assert_eq!(
        within_deadline(watcher.scan(Some(at(5000)))).unwrap().sent,
        0
    );
    assert_eq!(
        within_deadline(watcher.scan(Some(at(5499)))).unwrap().sent,
        0
    );
    // Unchanged for settle_ms since the last write was seen (at 4500 ms): one revision,
    // the whole file.
    assert_eq!(
        within_deadline(watcher.scan(Some(at(5500)))).unwrap().sent,
        1
    );
    assert_eq!(sent(&mut output), [("growing".into(), Some(text))]);
    assert_eq!(
        within_deadline(watcher.scan(Some(at(6000)))).unwrap().sent,
        0
    );
    // A one-off scan (backfill) does not wait.
    folder.write("fresh.md", "Just written.\n");
    let (mut backfill, mut output) = folder.watcher(1000, 1 << 20);
    assert_eq!(
        within_deadline(backfill.poll()).unwrap(),
        1,
        "only the new file"
    );
    assert_eq!(
        sent(&mut output),
        [("fresh".into(), Some("Just written.\n".into()))]
    );
}

#[test]
fn a_known_file_that_becomes_unusable_keeps_its_document_until_it_is_gone() {
    let folder = Folder::new();
    folder.write("page.md", "# Page\n\nVersion one.\n");
    let (mut watcher, mut output) = folder.watcher(0, 1000);
    within_deadline(watcher.poll()).unwrap();
    assert_eq!(sent(&mut output).len(), 1);

    // Swapped for a FIFO: reported, not deleted.
    std::fs::remove_file(folder.path("page.md")).unwrap();
    mkfifo(&folder.path("page.md"));
    let swapped = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert_eq!(
        reasons(&swapped),
        [("page.md".into(), "not a regular file (a FIFO)".into())]
    );
    assert!(
        sent(&mut output).is_empty(),
        "no delete for a file still there"
    );
    assert!(!watcher.state["page"].deleted);

    // Really gone: deleted.
    std::fs::remove_file(folder.path("page.md")).unwrap();
    within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert_eq!(sent(&mut output), [("page".into(), None)]);
}

#[test]
fn an_unreadable_file_is_reported_once_as_such_and_retried() {
    use std::os::unix::fs::PermissionsExt;
    let folder = Folder::new();
    folder.write("page.md", "# Page\n\nVersion one.\n");
    let (mut watcher, mut output) = folder.watcher(0, 1000);
    within_deadline(watcher.poll()).unwrap();
    assert_eq!(sent(&mut output).len(), 1);
    folder.write("page.md", "# Page\n\nVersion two.\n");
    let path = folder.path("page.md");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::File::open(&path).is_ok() {
        // Running as root (or with CAP_DAC_OVERRIDE): mode 000 does not stop a read, so
        // there is no unreadable file to test with here.
        eprintln!("skipped: mode 000 files are readable to this user");
        return;
    }
    let first = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    let reasons = reasons(&first);
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].1.contains("Permission denied"), "{reasons:?}");
    for _ in 0..3 {
        let again = within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
        assert!(
            again.reported.is_empty(),
            "said twice: {:?}",
            again.reported
        );
    }
    assert!(sent(&mut output).is_empty(), "kept, not deleted");
    // Readable again without touching the file: picked up.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    within_deadline(watcher.scan(Some(Instant::now()))).unwrap();
    assert_eq!(
        sent(&mut output),
        [("page".into(), Some("# Page\n\nVersion two.\n".into()))]
    );
}

#[test]
fn the_start_up_resend_reads_by_the_same_rules() {
    let folder = Folder::new();
    folder.write("page.md", "# Page\n\nKnown.\n");
    folder.write("kept.md", "# Kept\n\nStill here.\n");
    let (mut watcher, mut output) = folder.watcher(0, 1000);
    within_deadline(watcher.poll()).unwrap();
    assert_eq!(sent(&mut output).len(), 2);
    // While stopped, the known file becomes a symlink to /dev/zero.
    std::fs::remove_file(folder.path("page.md")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", folder.path("page.md")).unwrap();
    let (mut restarted, mut output) = folder.watcher(0, 1000);
    within_deadline(restarted.resend_known()).unwrap();
    assert_eq!(
        sent(&mut output),
        [("kept".into(), Some("# Kept\n\nStill here.\n".into()))],
        "only the file that still holds what was sent"
    );
}

mod links;

/// A file rewritten in place (truncated, then written) can be seen between the two, with
/// its new length under its old modification time: that is not a settled file (before,
/// it was read empty and indexed as an empty revision).
#[test]
fn a_file_seen_truncated_under_its_old_time_is_not_read() {
    let folder = Folder::new();
    let (mut watcher, mut output) = folder.watcher(100, 1 << 20);
    folder.write("page.md", "# Page\n\nThe first text of the page.\n");
    let old = std::fs::metadata(folder.path("page.md"))
        .unwrap()
        .modified()
        .unwrap();
    // Long settled: read at once.
    std::thread::sleep(Duration::from_millis(150));
    let start = Instant::now();
    assert_eq!(within_deadline(watcher.scan(Some(start))).unwrap().sent, 1);
    sent(&mut output);
    // Truncated, its time not moved yet.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(folder.path("page.md"))
        .unwrap();
    file.set_modified(old).unwrap();
    drop(file);
    std::thread::sleep(Duration::from_millis(150));
    let at = |ms: u64| start + Duration::from_millis(ms);
    assert_eq!(
        within_deadline(watcher.scan(Some(at(200)))).unwrap().sent,
        0
    );
    // The write lands: read once it has settled, whole.
    folder.write("page.md", "# Page\n\nThe second text of the page.\n");
    assert_eq!(
        within_deadline(watcher.scan(Some(at(250)))).unwrap().sent,
        0
    );
    assert_eq!(
        within_deadline(watcher.scan(Some(at(400)))).unwrap().sent,
        1
    );
    assert_eq!(
        sent(&mut output),
        [(
            "page".into(),
            Some("# Page\n\nThe second text of the page.\n".into())
        )]
    );
}
