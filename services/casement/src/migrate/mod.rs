//! `casement migrate --set KEY=VALUE ...`: the index built anew under another embedding
//! model, enrichment or window radius, from the records the serving index stores (no call
//! to the CMS; `casement_pipeline::migrate`), in a directory of its own, while the serving
//! index is only read. Then the quality gate: the golden set on both, side by side; the new
//! index must not be worse by more than `--margin` in recall@k or MRR@k (or `--force`).
//! Then the swap: `serving.json` ([`crate::serving`]) names the new index, atomically; the
//! old one is kept `--keep-hours` for `casement migrate --rollback`.
//!
//! A killed migration resumes where it stopped: `serving.json` records it before the new
//! index is created, and a pass copies only documents the new index does not hold as the
//! serving one does. Exit codes: 0 swapped (or rolled back), 1 refused by the gate (the new
//! index is kept: the same command resumes it and `--force` swaps it), 2 could not run.

pub mod build;
pub mod config;
pub mod http;
pub mod metrics;
pub mod online;

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use casement_pipeline::factory;
use casement_store::AnyStore;

use crate::config::CasementConfig;
use crate::serving::{Previous, Serving, Underway, now};
use build::{Lines, Opened};
pub use config::{ConfigSource, changed, reverse, set_as_env};

pub const SWAPPED: u8 = 0;
pub const REFUSED: u8 = 1;
pub const COULD_NOT_RUN: u8 = 2;

#[derive(Debug, Clone)]
pub struct MigrateArgs {
    /// The target's settings, `section.key=value` (as `CASEMENT__SECTION__KEY`).
    pub set: Vec<String>,
    /// Swap even when the gate refuses, or without a golden set.
    pub force: bool,
    /// How much lower the new index's recall@k and MRR@k may be.
    pub margin: f64,
    /// How long the old index is kept for a rollback.
    pub keep_hours: u64,
    /// Most passes before the copy is declared not converging.
    pub max_passes: usize,
}

pub async fn command(
    config: CasementConfig,
    target: CasementConfig,
    args: MigrateArgs,
) -> anyhow::Result<u8> {
    let data_dir = config.data_dir.clone();
    check_embedded(&config)?;
    // What brings the serving configuration back (a rollback's): checked before the copy.
    let restore = reverse(&args.set, &config)?;
    let mut serving = Serving::load(&data_dir)?;
    forget_expired(&mut serving, &data_dir)?;
    let name = begin(&mut serving, &data_dir, &args.set)?;
    eprintln!(
        "migrating {} -> {name} (changing {}); loading the models",
        serving.index,
        changed(&config, &target).join(", ")
    );
    let source_model = factory::load_model(&config.embedder).await?;
    let source = AnyStore::open(&config.store(), source_model.dimension())
        .await
        .context("opening the serving index (is a service running on this data directory? `casement migrate --url` asks it)")?;
    // The serving configuration must describe the serving index.
    casement_query::service::check_index_settings(
        &source,
        &source_model,
        config.text.window_radius,
    )
    .await?;
    build::check_source(&source, &target).await?;
    let new = Opened::open(&name, &target, Some((&config, &source_model))).await?;
    let started = Instant::now();
    new.store.set_bulk(true);
    let passes = build::copy(&source, &new, args.max_passes, None, &Lines::boxed).await?;
    new.store.set_bulk(false);
    new.store.optimize().await?;
    let took = started.elapsed().as_secs_f64();
    let (copied, embedded) = passes
        .iter()
        .fold((0, 0), |(c, e), p| (c + p.copied, e + p.embedded));
    eprintln!(
        "built {name}: {copied} documents copied in {} pass(es), {embedded} sentences embedded in {took:.1} s ({:.0} sentences/s)",
        passes.len(),
        embedded as f64 / took.max(1e-9)
    );
    let gate = build::gate(
        (&config, &source, &source_model),
        &new,
        args.margin,
        args.force,
    )
    .await?;
    gate.print();
    drop((new, source));
    if !gate.passed {
        eprintln!(
            "refused: the new index {name} is kept; the same command resumes it (--force swaps it), \
             another --set starts over"
        );
        return Ok(REFUSED);
    }
    let old = swap(&mut serving, &data_dir, &name, restore, args.keep_hours)?;
    println!(
        "swapped: {} now serves {name}; {old} is kept {} h for `casement migrate --rollback`",
        data_dir.display(),
        args.keep_hours
    );
    println!("set in the configuration every service of this data directory starts with:");
    for pair in &args.set {
        println!("  {pair}");
    }
    Ok(SWAPPED)
}

/// `casement migrate` manages the index directories of the data directory.
pub fn check_embedded(config: &CasementConfig) -> anyhow::Result<()> {
    anyhow::ensure!(
        config.store.backend == casement_store::Backend::Edge,
        "store.backend = \"server\": casement migrate swaps embedded indexes (a Qdrant server's \
         collection alias is not built yet)"
    );
    anyhow::ensure!(
        config.store.edge.path.as_os_str().is_empty(),
        "store.edge.path is set: casement migrate manages the index directories of data_dir \
         (index, index.2, ...); leave store.edge.path unset"
    );
    Ok(())
}

/// The directory a migration builds: the one a killed migration with the same pairs was
/// building (resumed), else a new one, recorded before it is created.
pub fn begin(serving: &mut Serving, data_dir: &Path, set: &[String]) -> anyhow::Result<String> {
    match &serving.migration {
        Some(underway) if underway.set == set => {
            eprintln!("resuming the migration into {}", underway.target);
            Ok(underway.target.clone())
        }
        other => {
            if let Some(stale) = other {
                eprintln!(
                    "discarding the unfinished migration into {} ({}): another was asked",
                    stale.target,
                    stale.set.join(" ")
                );
                remove_index(data_dir, &stale.target)?;
            }
            let name = serving.next_name(data_dir);
            serving.migration = Some(Underway {
                target: name.clone(),
                set: set.to_vec(),
            });
            serving.save(data_dir)?;
            Ok(name)
        }
    }
}

/// Points `serving.json` at `name`, keeping the index it served for a rollback (with the
/// pairs that rebuild its configuration); an older kept index is deleted. Returns the
/// index replaced.
pub fn swap(
    serving: &mut Serving,
    data_dir: &Path,
    name: &str,
    restore: Vec<String>,
    keep_hours: u64,
) -> anyhow::Result<String> {
    let old = std::mem::replace(&mut serving.index, name.to_owned());
    let replaced = serving.previous.replace(Previous {
        index: old.clone(),
        keep_until: now().saturating_add(keep_hours.saturating_mul(3600)),
        restore,
    });
    if serving.migration.as_ref().is_some_and(|m| m.target == name) {
        serving.migration = None;
    }
    serving.save(data_dir)?;
    // The pointer is written: the swap happened, whatever becomes of the older index.
    if let Some(replaced) = replaced.filter(|r| r.index != name && r.index != old)
        && let Err(error) = remove_index(data_dir, &replaced.index)
    {
        tracing::warn!(error = format!("{error:#}"), index = %replaced.index, "the index kept before could not be deleted; delete it by hand");
    }
    Ok(old)
}

/// `casement migrate --rollback`: the index the last migration replaced, brought up to
/// date with what was indexed since (copied from the serving index under its own
/// configuration, rebuilt from the pairs `serving.json` keeps) and served again; the
/// replaced one is kept for as long, so a rollback can be rolled back.
pub async fn rollback(
    config: CasementConfig,
    source: ConfigSource,
    keep_hours: u64,
) -> anyhow::Result<u8> {
    let data_dir = config.data_dir.clone();
    check_embedded(&config)?;
    let mut serving = Serving::load(&data_dir)?;
    let Some(previous) = serving.previous.clone() else {
        anyhow::bail!(
            "nothing to roll back to: {} names no previous index",
            Serving::path(&data_dir).display()
        );
    };
    let dir = Serving::dir(&data_dir, &previous.index);
    anyhow::ensure!(dir.exists(), "the previous index {} is gone", dir.display());
    let earlier = source.target(&config, &previous.restore)?;
    let undo = reverse(&previous.restore, &config)?;
    let model = factory::load_model(&config.embedder).await?;
    let current = AnyStore::open(&config.store(), model.dimension())
        .await
        .context("opening the serving index (is a service running on this data directory? `casement migrate --url` asks it)")?;
    casement_query::service::check_index_settings(&current, &model, config.text.window_radius)
        .await?;
    let back = Opened::open(&previous.index, &earlier, Some((&config, &model))).await?;
    eprintln!(
        "bringing {} up to date with {} before serving it again",
        previous.index, serving.index
    );
    let passes = build::copy(&current, &back, 5, None, &Lines::boxed).await?;
    back.store.optimize().await?;
    drop((back, current));
    let replaced = swap(&mut serving, &data_dir, &previous.index, undo, keep_hours)?;
    println!(
        "rolled back: {} now serves {} again ({} documents brought up to date); {replaced} is kept \
         {keep_hours} h (`casement migrate --rollback` swaps back)",
        data_dir.display(),
        previous.index,
        passes.iter().map(|p| p.copied).sum::<usize>()
    );
    println!("set in the configuration every service of this data directory starts with:");
    for pair in &previous.restore {
        println!("  {pair}");
    }
    Ok(SWAPPED)
}

/// Deletes the previous index once its time is up.
pub fn forget_expired(serving: &mut Serving, data_dir: &Path) -> anyhow::Result<()> {
    if let Some(previous) = &serving.previous
        && previous.keep_until <= now()
    {
        eprintln!(
            "deleting {}: kept for a rollback until its time ran out",
            previous.index
        );
        remove_index(data_dir, &previous.index)?;
        serving.previous = None;
        serving.save(data_dir)?;
    }
    Ok(())
}

fn remove_index(data_dir: &Path, name: &str) -> anyhow::Result<()> {
    let dir = Serving::dir(data_dir, name);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting {}", dir.display())),
    }
}
