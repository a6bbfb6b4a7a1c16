//! The cross-service end-to-end suite's harness: the `casement` binary (the indexing
//! pipeline, its sources and the query API in one process) as a child process on a
//! temporary directory, and an HTTP client. The suite itself is `e2e/` (`cargo test -p
//! casement-e2e`, or `make test`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

pub use casement_testkit::{data, eventually};

/// The `casement` binary that `cargo test --workspace` builds beside this suite
/// (`target/<profile>/casement`). It is another package's binary, so Cargo does not rebuild
/// it for `cargo test -p casement-e2e` alone: a missing binary, or one older than the
/// sources it is built from, fails here with the command to run rather than testing stale
/// code.
pub fn casement_bin() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let test = std::env::current_exe().expect("test binary path");
        // target/<profile>/deps/e2e-<hash> -> target/<profile>/casement
        let binary = test
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps")
            .join(format!("casement{}", std::env::consts::EXE_SUFFIX));
        let built = std::fs::metadata(&binary)
            .and_then(|m| m.modified())
            .unwrap_or_else(|_| {
                panic!(
                    "{} is not built: run `cargo build -p casement` first (`cargo test \
                     --workspace` and `make test` build it)",
                    binary.display()
                )
            });
        if let Some(newer) = newest_source(&binary).filter(|(_, at)| *at > built) {
            panic!(
                "{} is older than {}: run `cargo build -p casement` first (`cargo test \
                 --workspace` and `make test` build it)",
                binary.display(),
                newer.0.display()
            );
        }
        binary
    })
}

/// The most recently modified source the `casement` binary was built from, with its time:
/// the files of this repository that Cargo's dep-info for it (`target/<profile>/casement.d`)
/// lists, which are exactly the sources compiled into it (git's own files, which its build
/// script reads for the commit it names, left out: a commit is not a source change), plus
/// `Cargo.lock`. No dep-info, no check (the binary was not built by Cargo).
fn newest_source(binary: &Path) -> Option<(PathBuf, SystemTime)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().unwrap_or(root);
    let dep_info = std::fs::read_to_string(binary.with_extension("d")).ok()?;
    let mut newest: Option<(PathBuf, SystemTime)> = None;
    let sources = dep_info_paths(&dep_info)
        .into_iter()
        .filter(|path| {
            path.starts_with(&root) && !path.components().any(|c| c.as_os_str() == ".git")
        })
        .chain([root.join("Cargo.lock")]);
    for path in sources {
        if let Ok(at) = std::fs::metadata(&path).and_then(|m| m.modified())
            && newest.as_ref().is_none_or(|(_, n)| at > *n)
        {
            newest = Some((path, at));
        }
    }
    newest
}

#[doc(hidden)]
/// The prerequisites of a Makefile-style dep-info file (`target: a b\ c`): paths after the
/// first rule's colon, separated by spaces, `\ ` an escaped space.
pub fn dep_info_paths(dep_info: &str) -> Vec<PathBuf> {
    let Some(line) = dep_info.lines().find(|line| !line.trim().is_empty()) else {
        return Vec::new();
    };
    let Some((_, prerequisites)) = line.split_once(": ") else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    let mut current = String::new();
    let mut chars = prerequisites.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            ' ' => {
                if !current.is_empty() {
                    paths.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        paths.push(PathBuf::from(current));
    }
    paths
}

/// Writes `<dir>/casement.toml`: `data_dir = "<dir>/data"`, then `settings` (TOML).
pub fn write_config(dir: &Path, settings: &str) -> PathBuf {
    let config = dir.join("casement.toml");
    let data_dir = format!("data_dir = \"{}\"\n", dir.join("data").display());
    std::fs::write(&config, data_dir + settings).expect("config");
    config
}

/// The child's stdout (piped), line by line, read on a thread of its own.
pub fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A running `casement run`; its stdout lines arrive on `lines`, its stderr goes to a file
/// printed when a wait fails.
#[derive(Debug)]
pub struct Casement {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub stdout: Vec<String>,
    stderr: PathBuf,
    pub base: String,
}

impl Casement {
    pub fn start(dir: &Path, config: &Path, args: &[&str]) -> Self {
        Self::start_with(dir, config, args, &[])
    }

    /// [`Casement::start`] with more environment variables.
    pub fn start_with(dir: &Path, config: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let port = free_port();
        let stderr = dir.join(format!("stderr-{port}.log"));
        let mut child = Command::new(casement_bin())
            .arg("--config")
            .arg(config)
            .arg("run")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(args)
            .env("CASEMENT__LOG__FILTER", "warn,casement=info")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("start casement");
        let lines = stdout_lines(&mut child);
        Self {
            child,
            lines,
            stdout: Vec::new(),
            stderr,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Waits for a stdout line containing `needle`.
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stdout.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line with {needle:?} within {timeout:?}; stdout so far:\n{}\nstderr:\n{}",
                    self.stdout.join("\n"),
                    self.stderr_text()
                ),
            }
        }
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// SIGTERM, then the exit status (must be success).
    pub fn stop(mut self) -> String {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(
                    status.success(),
                    "exit {status}; stderr:\n{}",
                    self.stderr_text()
                );
                return self.stderr_text();
            }
            assert!(Instant::now() < deadline, "did not stop after SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Casement {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

/// An operator's key (bound to no tenant): what the admin routes need.
pub const OPERATOR_KEY: &str = "operator-key-0123456789abcdef";

/// The configuration lines of [`OPERATOR_KEY`] (a table array: put them last).
pub const OPERATOR_KEYS: &str =
    "\n[[auth.keys]]\ntoken = \"operator-key-0123456789abcdef\"\nname = \"ops-oncall\"\n";

impl Client {
    /// A client that sends `key` as `Authorization: Bearer` with every request.
    pub fn with_key(base: &str, key: &str) -> Self {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {key}").parse().unwrap(),
        );
        Self {
            http: reqwest::Client::builder()
                .default_headers(headers)
                .build()
                .unwrap(),
            base: base.to_owned(),
        }
    }

    /// The value of one series of `/metrics` (0 when it is not served).
    pub async fn metric(&self, series: &str) -> f64 {
        let (_, text) = self.get("/metrics").await;
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    pub fn new(base: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: base.to_owned(),
        }
    }

    pub async fn post_raw(&self, path: &str, body: Vec<u8>) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn event(&self, event: &Value) -> (u16, Value) {
        self.post_raw("/v1/events", serde_json::to_vec(event).unwrap())
            .await
    }

    /// Windows of a search (top 5), optionally within some documents.
    pub async fn search(&self, query: &str, doc_ids: &[&str]) -> Vec<Value> {
        let (status, body) = self
            .post_raw(
                "/v1/search",
                serde_json::to_vec(&json!({"query": query, "top_k": 5, "doc_ids": doc_ids}))
                    .unwrap(),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body["windows"].as_array().cloned().unwrap_or_default()
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        (
            response.status().as_u16(),
            response.text().await.expect("body"),
        )
    }
}

/// Whitespace runs collapsed, for comparing source lines with window text.
pub fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Some window's text contains `needle` (whitespace-insensitive).
pub fn contains(windows: &[Value], needle: &str) -> bool {
    let needle = squash(needle);
    windows
        .iter()
        .any(|w| squash(w["text"].as_str().unwrap_or("")).contains(&needle))
}
