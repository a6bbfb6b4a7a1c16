//! `casement snapshot` and `casement restore` (issue 19): a snapshot of the first half of
//! a revision log, restored into another data directory, then the second half replayed
//! into it, equals a rebuild from the whole log (records, payloads, vectors, revisions).
//! A tampered snapshot, a directory in use or not empty, and an interrupted restore are
//! refused with the reason. Real model, real Qdrant Edge.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use casement_inference::Embed;
use casement_testkit::{assert_equals_rebuild, open_store, read_log};

fn casement(data_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_casement"))
        .env_remove("CASEMENT_CONFIG")
        // Small log segments, so that the snapshot has closed ones to leave out.
        .env("CASEMENT__STORE__EDGE__WAL_SEGMENT_BYTES", "65536")
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .expect("runs")
}

fn ok(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn refused(output: &Output, reason: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "succeeded; expected {reason:?}");
    assert!(stderr.contains(reason), "expected {reason:?} in:\n{stderr}");
}

/// The bundled sample log cut in two: (first half, second half, whole).
fn split_log(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let log =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sample/18f-handbook/revisions.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let (first, rest) = lines.split_at(lines.len() / 2);
    let (a, b) = (dir.join("first.jsonl"), dir.join("rest.jsonl"));
    std::fs::write(&a, first.join("\n") + "\n").unwrap();
    std::fs::write(&b, rest.join("\n") + "\n").unwrap();
    (a, b, log)
}

fn files_under(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                pending.push(entry.path());
            } else {
                let path = entry.path();
                found.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn restore_then_replay_the_rest_equals_a_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let (first, rest, whole) = split_log(dir.path());
    let (a, b, snap) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("snap"),
    );
    ok(&casement(&a, &["backfill", first.to_str().unwrap()]));
    let closed_in_a = files_under(&a.join("index/wal"))
        .into_iter()
        .filter(|f| f.starts_with("closed-"))
        .count();
    assert!(closed_in_a > 1, "the backfill closed log segments");

    let stdout = ok(&casement(&a, &["snapshot", snap.to_str().unwrap()]));
    assert!(stdout.starts_with("snapshot: "), "{stdout}");
    let files = files_under(&snap);
    assert!(files.contains(&"snapshot.json".to_owned()), "{files:?}");
    assert!(files.contains(&"sources.json".to_owned()), "{files:?}");
    assert!(
        !files.iter().any(|f| f.ends_with("casement.lock")),
        "the lock stays behind: {files:?}"
    );
    let closed = files
        .iter()
        .filter(|f| f.starts_with("index/wal/closed-"))
        .count();
    assert_eq!(closed, 1, "only the newest closed log segment: {files:?}");
    assert!(!dir.path().join("snap.partial").exists());
    refused(
        &casement(&a, &["snapshot", snap.to_str().unwrap()]),
        "exists: a snapshot goes to a new path",
    );

    // A tampered copy is refused, naming the file, and the target is left as it was.
    let tampered = dir.path().join("tampered");
    casement_store::copy_tree(&snap, &tampered, &|_| false).unwrap();
    let victim = tampered.join("sources.json");
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes.push(b' ');
    std::fs::write(&victim, bytes).unwrap();
    let untouched = dir.path().join("untouched");
    std::fs::create_dir_all(&untouched).unwrap();
    std::fs::write(untouched.join("keep"), "x").unwrap();
    refused(
        &casement(
            &untouched,
            &["restore", tampered.to_str().unwrap(), "--force"],
        ),
        "sources.json does not match the manifest",
    );
    assert_eq!(files_under(&untouched), ["keep"]);
    refused(
        &casement(&untouched, &["restore", dir.path().to_str().unwrap()]),
        "is not a Casement snapshot",
    );
    // Not empty: refused without --force.
    refused(
        &casement(&untouched, &["restore", snap.to_str().unwrap()]),
        "is not empty",
    );

    // An interrupted restore (its mark left behind) keeps every other command out until
    // a restore completes.
    ok(&casement(&b, &["restore", snap.to_str().unwrap()]));
    std::fs::write(b.join("RESTORING"), snap.display().to_string()).unwrap();
    refused(
        &casement(&b, &["backfill", rest.to_str().unwrap()]),
        "holds an interrupted restore",
    );
    ok(&casement(&b, &["restore", snap.to_str().unwrap()]));
    assert!(!b.join("RESTORING").exists());

    // The rest of the log on the restored copy equals a rebuild from the whole log.
    ok(&casement(&b, &["backfill", rest.to_str().unwrap()]));
    let events = read_log(&whole);
    let dimension = casement_testkit::model().dimension();
    let store = open_store(&b, dimension);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(assert_equals_rebuild(&store, &events, 1));
}

/// Bytes allocated on disk under `root` (not the files' lengths).
fn allocated(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}

/// A snapshot keeps the engine's sparse files sparse and is refused inside the data
/// directory; a snapshot holding a symbolic link (dangling, or to a file elsewhere) or a
/// FIFO is refused before the target is touched, and a retry of a good one works (issue 35,
/// items 16 and 18).
#[test]
fn a_snapshot_holds_only_regular_files_and_stays_sparse() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _, _) = split_log(dir.path());
    let a = dir.path().join("a");
    ok(&casement(&a, &["backfill", first.to_str().unwrap()]));
    refused(
        &casement(&a, &["snapshot", a.join("snaps/one").to_str().unwrap()]),
        "is inside the data directory",
    );
    let snap = dir.path().join("snap");
    ok(&casement(&a, &["snapshot", snap.to_str().unwrap()]));
    let (source, copy) = (allocated(&a), allocated(&snap));
    assert!(
        copy <= source + (1 << 20),
        "the snapshot takes {copy} bytes on disk for {source} in the data directory"
    );

    let target = dir.path().join("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("keep"), "x").unwrap();
    let outside = dir.path().join("secret.txt");
    std::fs::write(&outside, "not Casement's").unwrap();
    type Make<'a> = Box<dyn Fn(&Path) + 'a>;
    let makers: Vec<(&str, Make)> = vec![
        (
            "dangling",
            Box::new(|p: &Path| std::os::unix::fs::symlink("/nonexistent/file", p).unwrap()),
        ),
        (
            "outside",
            Box::new(|p: &Path| std::os::unix::fs::symlink(&outside, p).unwrap()),
        ),
        (
            "fifo",
            Box::new(|p: &Path| {
                let status = Command::new("mkfifo").arg(p).status().unwrap();
                assert!(status.success());
            }),
        ),
    ];
    for (name, make) in makers {
        let hostile = dir.path().join(format!("hostile-{name}"));
        casement_store::copy_tree(&snap, &hostile, &|_| false).unwrap();
        make(&hostile.join("extra"));
        refused(
            &casement(&target, &["restore", hostile.to_str().unwrap(), "--force"]),
            "not a regular file",
        );
        assert_eq!(
            files_under(&target),
            ["keep"],
            "{name}: the target was touched"
        );
        assert!(!target.join("RESTORING").exists());
    }
    ok(&casement(
        &target,
        &["restore", snap.to_str().unwrap(), "--force"],
    ));
    assert!(!target.join("RESTORING").exists());
}
