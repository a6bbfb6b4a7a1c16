//! `casement run` as a child process for the bench binaries (`wiki`, `disk`, `watch`): its
//! metrics, its finished events, a clean stop.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Service {
    pub child: Child,
    pub base: String,
    pub http: reqwest::Client,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    /// `casement run` on a free port: `--data-dir data_dir` unless `data_dir` is `None`
    /// (the config names it), then `args`, with `env`.
    pub fn start(data_dir: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_casement"));
        command.env_remove("CASEMENT_CONFIG");
        if let Some(dir) = data_dir {
            command.arg("--data-dir").arg(dir);
        }
        let child = command
            .args(args)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("CASEMENT__LOG__FILTER", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .spawn()
            .expect("start casement (the make target builds it)");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    /// One series of `/metrics` (0 when absent or unreachable).
    pub async fn metric(&self, series: &str) -> f64 {
        let Ok(response) = self.http.get(format!("{}/metrics", self.base)).send().await else {
            return 0.0;
        };
        let text = response.text().await.unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Events finished (applied, deleted, stale, dead-lettered).
    pub async fn finished(&self) -> f64 {
        let mut total = 0.0;
        for outcome in ["applied", "deleted", "stale", "dead_lettered"] {
            total += self
                .metric(&format!(
                    "casement_indexer_events_total{{outcome=\"{outcome}\"}}"
                ))
                .await;
        }
        total
    }

    /// Waits for `events` finished, saying how far it is every 20 s; an hour at most.
    pub async fn wait_finished(&self, events: usize, what: &str) {
        let started = Instant::now();
        let mut said = Instant::now();
        loop {
            let finished = self.finished().await;
            if finished >= events as f64 {
                return;
            }
            if said.elapsed() > Duration::from_secs(20) {
                println!("  {what}: {finished} of {events} events finished");
                said = Instant::now();
            }
            assert!(
                started.elapsed() < Duration::from_secs(3600),
                "{what}: not finished within an hour"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM, and the exit (which must be clean): the stop a user makes.
    pub fn stop(mut self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "casement run exited with {status}");
    }
}

/// The `p` quantile of sorted figures (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}
