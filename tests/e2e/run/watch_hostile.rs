//! A hostile watched folder and a flood of bad webhook bodies, through the real binary: a
//! FIFO, a symlink to `/dev/zero`, a symlink out of the folder, a file that is not UTF-8 and
//! a file being written sit beside a normal file. The normal file must be indexed, the
//! growing one indexed once when it is done, each unusable file logged once; the
//! dead-letter file must keep to its cap; SIGTERM must stop the process cleanly, and a
//! restart with a known file swapped for a `/dev/zero` symlink must neither hang nor drop
//! the document.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Casement, Client, contains, eventually, write_config};

const BOILER: &str = "The boiler room key is kept in locker thirty-one.";

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// How many log lines report `name` as unusable.
fn reports(stderr: &str, name: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.contains("cannot use") && l.contains(name))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_folder_neither_hangs_nor_floods() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("boiler.md"),
        format!("# Boiler room\n\n{BOILER}\n"),
    )
    .unwrap();
    std::fs::write(docs.join("latin1.md"), b"caf\xe9 au lait\n").unwrap();
    mkfifo(&docs.join("pipe.md"));
    std::os::unix::fs::symlink("/dev/zero", docs.join("zero.md")).unwrap();
    std::fs::write(dir.path().join("secret.md"), "Not for the index.\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.md"), docs.join("secret.md")).unwrap();
    let config = write_config(
        dir.path(),
        r#"[events]
max_event_bytes = 65536
[sources.watch]
poll_ms = 100
settle_ms = 1000
[sources.webhook]
dead_letter_max_bytes = 4096
dead_letter_max_payload_bytes = 1024
"#,
    );
    let args = ["--watch", docs.to_str().unwrap()];
    let mut casement = Casement::start(dir.path(), &config, &args);
    casement.wait_for_line("ready in", Duration::from_secs(600));
    let client = Client::new(&casement.base);
    eventually(
        Duration::from_secs(60),
        "the normal file is indexed",
        || async {
            contains(
                &client.search("boiler room key", &["boiler"]).await,
                "thirty-one",
            )
        },
    )
    .await;

    // A file written line by line for 2 s (every 50 ms, well under settle_ms): one event,
    // with everything written.
    let growing = docs.join("growing.md");
    let writer = std::thread::spawn(move || {
        let mut file = std::fs::File::create(growing).unwrap();
        file.write_all(b"# Growing\n\n").unwrap();
        for n in 0..40 {
            writeln!(file, "Entry {n} of the night shift log.").unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        writeln!(file, "The last entry says the furnace was relit at dawn.").unwrap();
    });
    tokio::task::spawn_blocking(move || writer.join().unwrap())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(120),
        "the growing file is indexed when done",
        || async {
            contains(
                &client.search("furnace relit at dawn", &["growing"]).await,
                "furnace was relit",
            )
        },
    )
    .await;
    assert_eq!(
        client
            .metric("casement_source_events_total{source=\"watch\"}")
            .await,
        2.0,
        "one event for the normal file, one for the growing file; none for the others"
    );

    // Bad webhook bodies: each kept (reason and all), the large ones as length and hash,
    // the file rotated at its cap.
    for n in 0..40 {
        let body = format!("not json {n} {}", "x".repeat(30_000)).into_bytes();
        let (status, answer) = client.post_raw("/v1/events", body).await;
        assert_eq!(status, 400, "{answer}");
    }
    let letters_path = data.join("dead-letters.jsonl");
    let rotated = data.join("dead-letters.jsonl.1");
    for path in [&letters_path, &rotated] {
        let size = std::fs::metadata(path).unwrap().len();
        assert!(size <= 4096, "{} is {size} bytes", path.display());
    }
    let last: Value = serde_json::from_str(
        std::fs::read_to_string(&letters_path)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["reason"], "not_json");
    assert_eq!(last["source"], "webhook");
    assert!(last["payload"].is_null());
    assert!(last["payload_bytes"].as_u64().unwrap() > 30_000);
    assert_eq!(last["payload_xxh3_128"].as_str().unwrap().len(), 32);

    let stderr = casement.stop();
    for name in ["latin1.md", "pipe.md", "zero.md", "secret.md"] {
        assert_eq!(reports(&stderr, name), 1, "{name} reported once:\n{stderr}");
    }
    assert!(stderr.contains("not a regular file (a FIFO)"), "{stderr}");
    assert!(
        stderr.contains("not a regular file (a character device)"),
        "{stderr}"
    );
    assert!(stderr.contains("not UTF-8"), "{stderr}");

    // While stopped, the known file becomes a symlink to /dev/zero (and another FIFO
    // appears): the restart's resend must not read it, and must not delete it either.
    std::fs::remove_file(docs.join("boiler.md")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", docs.join("boiler.md")).unwrap();
    mkfifo(&docs.join("pipe2.md"));
    let mut casement = Casement::start(dir.path(), &config, &args);
    casement.wait_for_line("ready in", Duration::from_secs(600));
    let client = Client::new(&casement.base);
    eventually(
        Duration::from_secs(30),
        "the swapped file is reported",
        || async { reports(&casement.stderr_text(), "boiler.md") == 1 },
    )
    .await;
    assert!(
        contains(
            &client.search("boiler room key", &["boiler"]).await,
            "thirty-one"
        ),
        "a file still there but unusable keeps its document"
    );
    let stderr = casement.stop();
    assert_eq!(reports(&stderr, "pipe2.md"), 1, "{stderr}");
}
