//! Bad disks (issue 19), on a small tmpfs mounted for the test: a read-only data directory
//! fails at start with the reason; a disk that fills up during writes (below
//! `store.edge.min_free_bytes`) holds the events (retried, nothing acknowledged that was
//! not written, no SIGBUS from the engine's memory maps), and the service goes on by itself
//! when space returns, ending equal to a rebuild. Skipped, with the reason, where the
//! machine cannot mount a tmpfs (it needs root or CAP_SYS_ADMIN).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use casement_inference::Embed;
use casement_testkit::{assert_equals_rebuild, open_store, read_log};

use crate::support::{Casement, Client};

/// A tmpfs mounted on a temporary directory; unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` (with the reason printed) where mounting is not allowed.
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mnt");
        std::fs::create_dir(&path).unwrap();
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .output();
        match output {
            Ok(output) if output.status.success() => Some(Self { path, _dir: dir }),
            Ok(output) => {
                println!(
                    "skipped: cannot mount a tmpfs here ({}); the bad-disk tests need root or \
                     CAP_SYS_ADMIN",
                    String::from_utf8_lossy(&output.stderr).trim()
                );
                None
            }
            Err(error) => {
                println!("skipped: no mount command ({error})");
                None
            }
        }
    }

    fn remount(&self, options: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.path)
            .status()
            .unwrap();
        assert!(status.success(), "remount {options}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn sample_log() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sample/18f-handbook/revisions.jsonl")
}

#[test]
fn a_read_only_data_directory_fails_at_start_with_the_reason() {
    let Some(disk) = Tmpfs::mount("4m") else {
        return;
    };
    std::fs::create_dir(disk.path.join("data")).unwrap();
    disk.remount("ro");
    for command in [
        vec!["backfill", sample_log().to_str().unwrap()],
        vec!["run", "--replay", sample_log().to_str().unwrap()],
    ] {
        let started = Instant::now();
        let output = Command::new(crate::support::casement_bin())
            .env_remove("CASEMENT_CONFIG")
            .arg("--data-dir")
            .arg(disk.path.join("data"))
            .args(&command)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{command:?}: {stderr}");
        assert!(
            stderr.contains("is not writable") && stderr.contains("Read-only file system"),
            "{command:?}: {stderr}"
        );
        // Before the models load.
        assert!(started.elapsed() < Duration::from_secs(10), "{command:?}");
    }
    // Writable, but already within the store's reserve (4 MiB < 128 MiB): `run` says so
    // and what to do, and does not promise to wait.
    disk.remount("rw");
    let output = Command::new(crate::support::casement_bin())
        .env_remove("CASEMENT_CONFIG")
        .arg("--data-dir")
        .arg(disk.path.join("data"))
        .args(["run", "--replay", sample_log().to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("below store.edge.min_free_bytes") && stderr.contains("free some space"),
        "{stderr}"
    );
    assert!(!stderr.contains("writes wait"), "{stderr}");
}

/// Bytes available on the file system at `dir` (`df`).
fn available(dir: &Path) -> u64 {
    let output = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("df prints the available bytes")
}

/// Fills the file system at `dir` with one file until `leave` bytes are available;
/// returns the file.
fn fill(dir: &Path, leave: u64) -> PathBuf {
    let ballast = dir.join("ballast");
    let mut file = std::fs::File::create(&ballast).unwrap();
    let chunk = vec![7u8; 1 << 20];
    let mut left = available(dir).saturating_sub(leave);
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    file.sync_all().unwrap();
    ballast
}

fn committed(data: &Path) -> u64 {
    std::fs::read(data.join("sources.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["replay_next"].as_u64())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_holds_events_and_recovers_when_space_returns() {
    let Some(disk) = Tmpfs::mount("256m") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = disk.path.join("data");
    let config = dir.path().join("casement.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\n[pipeline]\nretry_max_ms = 500\n\
             [store.edge]\nmin_free_bytes = 33554432\n",
            data.display()
        ),
    )
    .unwrap();
    let log = sample_log();
    let events = read_log(&log);
    let total = events.len() as u64;
    let mut run = Casement::start(
        dir.path(),
        &config,
        &["--replay", log.to_str().unwrap(), "--pace-ms", "150"],
    );
    run.wait_for_line("API listening", Duration::from_secs(300));
    let client = Client::new(&run.base);
    let started = Instant::now();
    while committed(&data) < 8 {
        assert!(started.elapsed() < Duration::from_secs(300), "no progress");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The disk fills to 16 MiB available, under the 32 MiB reserve: writes wait, the
    // pipeline retries, nothing more is committed.
    let ballast = fill(&disk.path, 16 << 20);
    let full_at = committed(&data);
    let retries = "casement_indexer_retries_total{stage=\"write\"}";
    let started = Instant::now();
    while client.metric(retries).await < 3.0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no write retried on a full disk; stderr:\n{}",
            run.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held_at = committed(&data);
    assert!(
        held_at < total,
        "the replay finished on a full disk ({full_at} -> {held_at})"
    );
    let (status, _) = client.get("/healthz").await;
    assert_eq!(status, 200, "the service is up while the disk is full");

    // Space returns: the replay goes on by itself and completes.
    std::fs::remove_file(&ballast).unwrap();
    run.wait_for_line("ready in", Duration::from_secs(600));
    let stderr = run.stop();
    assert!(
        stderr.contains("below store.edge.min_free_bytes"),
        "the wait was logged with its cause:\n{stderr}"
    );
    assert_eq!(committed(&data), total);
    println!(
        "disk full at {full_at} of {total} committed events, held at {held_at}; completed \
         when space returned"
    );
    let store = open_store(&data, casement_testkit::model().dimension());
    assert_equals_rebuild(&store, &events, 1).await;
}
