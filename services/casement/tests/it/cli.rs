//! The all-in-one binary: help, configuration defaults and errors, backfill.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use casement::CasementConfig;

fn casement() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_casement"));
    command.env_remove("CASEMENT_CONFIG");
    command
}

#[test]
fn help_lists_the_commands() {
    let output = casement().arg("--help").output().expect("runs");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for command in [
        "run",
        "backfill",
        "check-config",
        "eval",
        "compact",
        "audit",
        "snapshot",
        "restore",
        "show",
    ] {
        assert!(help.contains(command), "{help}");
    }
}

#[test]
fn version_names_the_commit_and_build_date() {
    let output = casement().arg("--version").output().expect("runs");
    let version = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    // The commit it names is this checkout's HEAD or an ancestor of it (a commit made
    // after the build), as git knows it.
    let prefix = format!("casement {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&prefix), "{version}");
    let commit: String = version[prefix.len()..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    assert_eq!(commit.len(), 12, "{version}");
    let ancestor = Command::new("git")
        .args(["merge-base", "--is-ancestor", &commit, "HEAD"])
        .status()
        .expect("git");
    assert!(
        ancestor.success(),
        "{commit} is not in this checkout's history"
    );
    let built = version.split("built ").nth(1).unwrap_or_default();
    assert!(
        built.len() >= 11 && built.as_bytes()[4] == b'-' && built.as_bytes()[7] == b'-',
        "{version}"
    );
}

#[test]
fn the_example_config_is_the_defaults() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/casement.example.toml");
    let example: CasementConfig =
        casement_config::load(Some(&path), "UNUSED", []).expect("example loads");
    assert_eq!(example, CasementConfig::default());
}

#[test]
fn listen_takes_host_names() {
    // In the configuration (here through the environment): resolved once, at start.
    let output = casement()
        .env("CASEMENT__LISTEN", "localhost:8181")
        .arg("check-config")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("listen = \"127.0.0.1:8181\"")
            || stdout.contains("listen = \"[::1]:8181\""),
        "{stdout}"
    );
    // One underscore is not read, and says so.
    let output = casement()
        .env("CASEMENT_LISTEN", "127.0.0.1:8282")
        .arg("check-config")
        .output()
        .expect("runs");
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("CASEMENT_LISTEN is not read") && stderr.contains("CASEMENT__LISTEN"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("listen = \"127.0.0.1:8080\""));
    // On the command line: a bad port is refused before anything starts, saying why.
    let output = casement()
        .args(["run", "--listen", "localhost:http"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("the port \"http\" is not a number"),
        "{stderr}"
    );
}

#[test]
fn run_fails_at_start_on_bad_config() {
    let dir = tempfile::tempdir().unwrap();
    for (key, value, message) in [
        (
            "CASEMENT__SOURCES__WATCH__POLL_MS",
            "0",
            "sources.watch.poll_ms",
        ),
        ("CASEMENT__SOURCES__NO_SUCH_SOURCE", "1", "no_such_source"),
        ("CASEMENT__LIMITS__MAX_TOP_K", "0", "limits.max_top_k = 0"),
        (
            "CASEMENT__TEXT__WINDOW_RADIUS",
            "2",
            "must equal text.window_radius",
        ),
        (
            "CASEMENT__LISTEN",
            "not-an-address",
            "expected host:port, e.g. 127.0.0.1:8080 or localhost:8080",
        ),
        (
            "CASEMENT__AUDIT__MAX_DELETE_SHARE",
            "2",
            "audit.max_delete_share = 2 must be between 0 and 1",
        ),
        (
            "CASEMENT__AUDIT__SOURCE",
            "/nonexistent/listing.jsonl",
            "/nonexistent/listing.jsonl: No such file",
        ),
    ] {
        let output = casement()
            .env(key, value)
            .arg("--data-dir")
            .arg(dir.path())
            .arg("run")
            .output()
            .expect("runs");
        assert!(!output.status.success(), "{key}={value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{key}={value}: {stderr}");
    }
    // The golden set is read at start: a missing file or a bad line fails there.
    let golden = dir.path().join("golden.jsonl");
    std::fs::write(
        &golden,
        "{\"query\": \"q\", \"doc_id\": \"a\"}\n{\"query\": \"q\", \"doc\": \"a\"}\n",
    )
    .unwrap();
    for (path, message) in [
        (
            "/no/such/golden.jsonl".to_owned(),
            "golden set /no/such/golden.jsonl".to_owned(),
        ),
        (
            golden.display().to_string(),
            format!(
                "golden set {}, line 2: unknown field `doc`",
                golden.display()
            ),
        ),
    ] {
        let output = casement()
            .env("CASEMENT__EVAL__GOLDEN", &path)
            .arg("--data-dir")
            .arg(dir.path())
            .arg("run")
            .output()
            .expect("runs");
        assert!(!output.status.success(), "{path}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&message), "{path}: {stderr}");
    }
    let output = casement()
        .arg("--data-dir")
        .arg(dir.path())
        .args(["run", "--replay", "/no/such/log.jsonl"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("/no/such/log.jsonl"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `backfill` indexes a folder of documents and a revision log and prints the summary; a
/// document file alone is refused with the reason.
#[test]
fn backfill_indexes_and_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("a.md"),
        "# A\n\nFirst page. It has two sentences.\n",
    )
    .unwrap();
    std::fs::write(docs.join("b.txt"), "Second page, plain text.\n").unwrap();
    std::fs::write(docs.join("ignored.png"), [0u8, 1, 2]).unwrap();
    let log = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../sample/18f-handbook/revisions.jsonl");
    // Small log segments, so that the backfill leaves some for `compact` below.
    let output = casement()
        .env("CASEMENT__STORE__EDGE__WAL_SEGMENT_BYTES", "65536")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("backfill")
        .args(["--doc-id-prefix", "mine:"])
        .arg(&docs)
        .arg(&log)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // 56 revisions of the sample + 2 documents; the sample ends with 4 live pages.
    assert!(stdout.contains("backfill: 58 events"), "{stdout}");
    // No letter was written, so no dead-letter file is named; no per-document log lines.
    assert!(stdout.contains("0 rejected) in "), "{stdout}");
    assert!(
        !stdout.contains("dead-letters") && !stderr.contains("dead-letters"),
        "{stdout}{stderr}"
    );
    assert!(!stderr.contains(" INFO "), "{stderr}");
    assert!(stderr.contains("events ("), "a progress line: {stderr}");
    assert!(stdout.contains("index: 6 documents"), "{stdout}");
    assert!(stdout.contains("sentences/s"), "{stdout}");
    // The summary's counts are the index's.
    let sentences: u64 = stdout
        .split("documents, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("sentence count in the summary");
    // `compact` gives the log's disk back; a second one has nothing left to do.
    let compact = || {
        let output = casement()
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("compact")
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let reclaimed: f64 = stdout
            .split(" MiB reclaimed")
            .next()
            .and_then(|s| s.rsplit('(').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no reclaimed figure: {stdout}"));
        reclaimed
    };
    assert!(compact() > 0.0);
    assert_eq!(compact(), 0.0);
    let mut store_config = casement_store::StoreConfig::default();
    store_config.edge.path = dir.path().join("data/index");
    let (stats, documents) = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let store = casement_store::EdgeStore::open(&store_config, 384).unwrap();
        (
            casement_store::Store::stats(&store).await.unwrap(),
            casement_store::Store::documents(&store).await.unwrap(),
        )
    });
    assert_eq!((stats.documents, stats.points), (6, sentences), "{stdout}");
    // The folder's documents carry the prefix asked for; the log's keep their own ids.
    let ids: Vec<&str> = documents.iter().map(|d| d.doc_id.as_str()).collect();
    assert!(
        ids.contains(&"mine:a") && ids.contains(&"mine:b"),
        "{ids:?}"
    );
    assert!(
        ids.iter().any(|id| id.starts_with("18f-handbook:")),
        "{ids:?}"
    );

    let output = casement()
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("backfill")
        .arg(dir.path().join("docs/a.md"))
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("must be a revision log"));

    // The index records what it was made with: another model (same dimension) or another
    // window radius is refused at start, naming both, and the index is left as it was.
    for (settings, message) in [
        (
            [("CASEMENT__EMBEDDER__PRECISION", "int8")].as_slice(),
            "it was embedded with all-minilm-l6-v2:fp32 (384 dimensions), this process embeds with all-minilm-l6-v2:int8 (384 dimensions)",
        ),
        (
            [
                ("CASEMENT__TEXT__WINDOW_RADIUS", "2"),
                ("CASEMENT__SEARCH__INDEXED_WINDOW_RADIUS", "2"),
            ]
            .as_slice(),
            "its windows have a radius of 3 sentences, this process's 2",
        ),
    ] {
        let output = casement()
            .envs(settings.iter().copied())
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("backfill")
            .arg(&log)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(stderr.contains(message), "{message:?} in:\n{stderr}");
    }
}

/// `casement eval` exits 2 when it cannot run: a malformed golden set (with its line), no
/// service at the URL. (Passing and failing cases: `tests/e2e/sample.rs`.)
#[test]
fn eval_that_cannot_run_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("golden.jsonl");
    std::fs::write(&golden, "{\"query\": \"q\", \"doc_id\": \"a\"}\nnot json\n").unwrap();
    let output = casement().arg("eval").arg(&golden).output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(", line 2: "), "{stderr}");

    std::fs::write(&golden, "{\"query\": \"q\", \"doc_id\": \"a\"}\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // Bound and released: nothing listens there now.
    // Asked with --url, and without it where the configuration's `listen` says (a host
    // name, resolved): either way the service, not a case, is named.
    let with_url = ["--url".to_owned(), format!("http://127.0.0.1:{port}")];
    for (listen, url_args) in [
        (None, &with_url[..]),
        (Some(format!("localhost:{port}")), &[][..]),
    ] {
        let mut command = casement();
        if let Some(listen) = listen {
            command.env("CASEMENT__LISTEN", listen);
        }
        let output = command
            .arg("eval")
            .arg(&golden)
            .args(url_args)
            .output()
            .expect("runs");
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!(
                "cannot reach the service at http://127.0.0.1:{port}"
            )),
            "{stderr}"
        );
    }
}

/// `casement show` prints what a real page becomes: Liquid tags gone, the checklist
/// numbered with its lead-in, links with their targets, windows with source offsets; a
/// file whose format cannot be told is refused with a message.
#[test]
fn show_prints_what_a_page_becomes() {
    let page = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/text/tests/fixtures/markdown/18f-going-out-of-office.md");
    let output = casement()
        .args([
            "show",
            "--windows",
            "--url",
            "https://handbook.tts.gsa.gov/x/",
        ])
        .arg(&page)
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(!shown.contains("{%"), "{shown}");
    assert!(
        shown.contains("Before taking leave, be sure to:\n\n1. Submit a leave request"),
        "{shown}"
    );
    assert!(
        shown.contains("- leave request in HR Links -> /tools/hrlinks/#using-leave"),
        "{shown}"
    );
    assert!(
        shown.contains("] source ") && !shown.contains("source unknown"),
        "{shown}"
    );

    let odd = tempfile::tempdir().unwrap();
    let file = odd.path().join("page.xyz");
    std::fs::write(&file, "text").unwrap();
    let output = casement().arg("show").arg(&file).output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--format"));
}
