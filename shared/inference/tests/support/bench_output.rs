//! Where the benchmarks of this crate write their JSON: `target/bench` (or under
//! `CARGO_TARGET_DIR`), created if missing.

use std::path::PathBuf;

pub fn bench_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
            PathBuf::from,
        )
        .join("bench");
    std::fs::create_dir_all(&dir).expect("create target/bench");
    dir
}
