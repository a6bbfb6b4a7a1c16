//! The soak's child processes: a data directory with its config (`Setup`), a running
//! `casement run --replay` on it (`Run`: its committed replay position, metrics, SIGKILL
//! or SIGTERM), and a scrape of its `/metrics`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{stdout_lines, write_config};

/// One data directory and its config; runs replay the same log into it.
pub struct Setup {
    dir: PathBuf,
    pub data: PathBuf,
    config: PathBuf,
    binary: PathBuf,
    log: PathBuf,
}

impl Setup {
    /// `settings`: TOML added to the config.
    pub fn new(dir: &Path, binary: &Path, log: &Path, settings: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let data = dir.join("data");
        let config = write_config(dir, settings);
        Self {
            dir: dir.to_owned(),
            data,
            config,
            binary: binary.to_owned(),
            log: log.to_owned(),
        }
    }

    /// The replay position the pipeline committed (`sources.json`).
    pub fn committed(&self) -> u64 {
        std::fs::read(self.data.join("sources.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|v| v["replay_next"].as_u64())
            .unwrap_or(0)
    }

    /// Every run's stderr, appended.
    pub fn stderr(&self) -> PathBuf {
        self.dir.join("stderr.log")
    }

    pub fn start(&self) -> Run {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let stderr_path = self.dir.join("stderr.log");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_path)
            .unwrap();
        let mut child = Command::new(&self.binary)
            .arg("--config")
            .arg(&self.config)
            .args(["run", "--listen", &format!("127.0.0.1:{port}"), "--replay"])
            .arg(&self.log)
            .env(
                "CASEMENT__LOG__FILTER",
                "warn,casement=info,casement_store=info",
            )
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start casement");
        let lines = stdout_lines(&mut child);
        Run {
            child,
            lines,
            seen: Vec::new(),
            stderr: stderr_path,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }
}

/// A running `casement run`; dropped, it is SIGKILLed.
pub struct Run {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
    base: String,
    http: reqwest::Client,
}

impl Run {
    /// Waits for a stdout line containing `needle`; when it came.
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> Instant {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.seen.push(line);
                    if found {
                        return Instant::now();
                    }
                }
                Err(_) => panic!(
                    "no line with {needle:?} within {timeout:?}; stdout:\n{}\nstderr ({}):\n{}",
                    self.seen.join("\n"),
                    self.stderr.display(),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                ),
            }
        }
    }

    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "casement exited ({status}); stderr ({}):\n{}",
                self.stderr.display(),
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            );
        }
    }

    /// Some stdout line so far contains `needle`.
    pub fn saw(&mut self, needle: &str) -> bool {
        self.seen.extend(self.lines.try_iter());
        self.seen.iter().any(|l| l.contains(needle))
    }

    /// `/metrics` (empty when not answered).
    pub async fn scrape(&self) -> Metrics {
        let response = self
            .http
            .get(format!("{}/metrics", self.base))
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match response {
            Ok(response) => Metrics(response.text().await.unwrap_or_default()),
            Err(_) => Metrics(String::new()),
        }
    }

    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }

    /// SIGTERM; the exit must be clean.
    pub fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "exit {status}; stderr:\n{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
                return;
            }
            assert!(Instant::now() < deadline, "did not stop after SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One scrape of `/metrics`.
pub struct Metrics(String);

impl Metrics {
    /// One series' value (0 when not served).
    pub fn get(&self, series: &str) -> f64 {
        self.0
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Point writes this run: sentences embedded or reused (upserts), payload updates,
    /// deletes.
    pub fn point_writes(&self) -> f64 {
        ["embedded", "reused", "payload_updated", "deleted"]
            .iter()
            .map(|d| {
                self.get(&format!(
                    "casement_indexer_sentences_total{{decision=\"{d}\"}}"
                ))
            })
            .sum()
    }

    pub fn disk(&self, part: &str) -> f64 {
        self.get(&format!("casement_index_disk_bytes{{part=\"{part}\"}}"))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
