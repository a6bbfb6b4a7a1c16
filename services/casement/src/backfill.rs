//! `casement backfill PATH...`: indexes a corpus and exits, with a progress bar and a
//! summary. A path is a revision log (`.jsonl`, `.jsonl.gz`) or a directory: its revision
//! logs are replayed and its Markdown, HTML and text files indexed as documents (the
//! watch source's naming: path without extension, after `sources.watch.doc_id_prefix`).
//!
//! The store is in bulk mode meanwhile (no vector index build as points arrive), and the
//! index is built, in full, before the summary: a backfill that says done is searchable
//! at full speed.

use std::path::PathBuf;
use std::time::Instant;

use casement_pipeline::Decision;

use crate::config::CasementConfig;
use crate::engine::Engine;
use crate::progress;
use crate::sources::watch::Watcher;
use crate::sources::{Positions, replay};

pub async fn backfill(config: CasementConfig, paths: Vec<PathBuf>) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut logs = Vec::new();
    let mut folders = Vec::new();
    for path in paths {
        if path.is_dir() {
            if !replay::log_files(&path)?.is_empty() {
                logs.push(path.clone());
            }
            folders.push(path);
        } else if replay::is_log(&path) {
            logs.push(path);
        } else {
            anyhow::bail!(
                "{}: a file to backfill must be a revision log (.jsonl or .jsonl.gz); give a directory for documents",
                path.display()
            );
        }
    }
    let inputs = replay::read(&logs)?;
    // Always from the start: every event is fenced, so what is already indexed is skipped.
    let positions = Positions {
        replay_inputs: inputs.identity.clone(),
        replay_next: 0,
    };
    eprintln!(
        "loading the models and opening {}",
        config.data_dir.display()
    );
    let engine = Engine::start(config.clone(), positions).await?;
    // Bulk loading: no vector index build while the corpus streams in (each would index
    // everything written so far again and take the cores from the model); one at the end.
    engine.store().set_bulk(true);
    let total = inputs.events.len() as u64;
    let replay_task = tokio::spawn(replay::run(engine.feeder.clone(), inputs.events, 0, None));
    if total > 0 {
        let label = format!("replaying {} revision log(s)", inputs.files.len());
        progress::follow(&label, engine.all_finished.clone(), 0, total).await;
    }
    replay_task.await??;
    let mut documents = 0;
    if !folders.is_empty() {
        let mut watch = config.watch();
        watch.dirs = folders;
        crate::sources::watch::check_dirs(&watch.dirs)?;
        // A folder that lists nothing while documents indexed from it are live deletes
        // nothing (said below); the rest is a bulk load.
        let mut watcher = Watcher::new(watch, &config.data_dir, engine.feeder.bulk())
            .with_guard(engine.guard.clone());
        documents = watcher.poll().await? as u64;
        progress::follow(
            "indexing documents",
            engine.all_finished.clone(),
            total,
            documents,
        )
        .await;
    }
    let kept = engine.guard.held();
    if kept > 0 {
        eprintln!(
            "kept {kept} documents of folders that list no file (not mounted?): nothing was \
             deleted; `casement run` on them holds them the same way until released"
        );
    }
    engine.store().set_bulk(false);
    let building = Instant::now();
    if engine.store().optimize().await? {
        eprintln!(
            "built the vector index in {:.1} s",
            building.elapsed().as_secs_f64()
        );
    }
    let stats = casement_store::Store::stats(&engine.store()).await?;
    let seconds = started.elapsed().as_secs_f64();
    let embedded = engine.sentences(Decision::Embedded);
    let rejected = engine.events("dead_lettered");
    println!(
        "backfill: {} events ({} applied, {} deleted, {} stale, {rejected} rejected{}) in {seconds:.1} s",
        total + documents,
        engine.events("applied"),
        engine.events("deleted"),
        engine.events("stale"),
        if rejected > 0 {
            format!(", see {}", engine.dead_letters.path().display())
        } else {
            String::new()
        },
    );
    println!(
        "index: {} documents, {} sentences; {embedded} sentences embedded ({:.0} sentences/s), {} reused from the cache",
        stats.documents,
        stats.points,
        embedded as f64 / seconds.max(1e-9),
        engine.sentences(Decision::Reused),
    );
    engine.stop().await?;
    if let Some(peak) = peak_memory() {
        println!("peak memory: {peak} bytes ({} MiB)", peak >> 20);
    }
    Ok(())
}

/// The process's peak resident set (`VmHWM` of /proc/self/status), where there is one.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
