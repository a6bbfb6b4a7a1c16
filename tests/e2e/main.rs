//! The cross-service end-to-end suite, one binary: the `casement` binary (sources, the
//! indexing pipeline, the query API and the admin routes in one process) started as a
//! child process on a temporary directory, as a user runs it, and driven over HTTP and its
//! command line. Real models, real Qdrant Edge (a Qdrant server where `QDRANT_URL` says).
//!
//! - `run`: `casement run` with each source (replay, watched folder, webhook, MediaWiki
//!   stream), deletes, durability, tenants, hostile input, bad disks, Prometheus.
//! - `audit`: `casement audit` against a rebuild.
//! - `migrate`: offline and online model migrations (and on a Qdrant server).
//! - `soak`: the kill-and-restart soak (`#[ignore]`d; `make soak`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use casement_e2e as support;

mod audit;
mod migrate;
mod run;
mod soak;

/// The harness's staleness check reads Cargo's dep-info: paths split on unescaped spaces.
#[test]
fn dep_info_paths_split_on_unescaped_spaces() {
    let paths = support::dep_info_paths(
        "/t/debug/casement: /r/src/main.rs /r/my\\ dir/lib.rs\n\n/r/src/main.rs:\n",
    );
    assert_eq!(
        paths,
        [
            std::path::PathBuf::from("/r/src/main.rs"),
            std::path::PathBuf::from("/r/my dir/lib.rs")
        ]
    );
}
