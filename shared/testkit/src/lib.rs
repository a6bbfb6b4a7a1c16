//! Dev-only helpers shared by Casement's tests and benchmarks (a `[dev-dependencies]` entry
//! only; nothing here ships): where the shared data is, waiting on a condition with a
//! deadline (never a bare sleep), where benchmarks write their JSON, the metric list of
//! `docs/metrics.md`; with the `index` feature, revision logs, the real model and an Edge
//! store, the processor over them, and the rebuild a stream must end equal to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod metrics_doc;
pub mod tls;

use std::path::PathBuf;
use std::time::{Duration, Instant};

#[cfg(feature = "index")]
mod index;
#[cfg(feature = "index")]
pub use index::*;

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A path in the shared data: `$CASEMENT_SHARED_DATA/<path>`, by default
/// `../shared/data/<path>` beside the repository (where CI has it).
pub fn data(path: &str) -> PathBuf {
    std::env::var_os("CASEMENT_SHARED_DATA")
        .map_or_else(|| repo_root().join("../shared/data"), PathBuf::from)
        .join(path)
}

/// The non-blank lines of a text file (gunzipped when its name ends in `.gz`), e.g. a JSONL
/// file of `../shared/data`; panics naming the file when it cannot be read.
pub fn read_lines(path: &std::path::Path) -> Vec<String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path)
        .unwrap_or_else(|e| panic!("{}: {e} (benchmarks read ../shared/data)", path.display()));
    let reader: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(file)))
    } else {
        Box::new(std::io::BufReader::new(file))
    };
    reader
        .lines()
        .map(|l| l.unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// Polls `check` every 200 ms until it holds; fails the test after `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "not within {timeout:?}: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Where benchmarks write their JSON: `target/bench` (under `CARGO_TARGET_DIR` if set).
pub fn bench_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from)
        .join("bench");
    std::fs::create_dir_all(&dir).expect("create target/bench");
    dir
}

/// Writes a benchmark's report to `target/bench/<name>` and says where.
pub fn write_bench_json(name: &str, report: &impl serde::Serialize) -> PathBuf {
    let file = bench_dir().join(name);
    std::fs::write(&file, serde_json::to_string_pretty(report).expect("json"))
        .expect("write the bench report");
    println!("wrote {}", file.display());
    file
}
