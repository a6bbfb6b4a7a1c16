//! `casement migrate --set KEY=VALUE ...`: the index built anew under another embedding
//! model, enrichment or window radius, from the records the serving index stores (no call
//! to the CMS; `casement_pipeline::migrate`), in a directory (embedded store) or a
//! collection (Qdrant server) of its own, while the serving index is only read. Then the
//! quality gate: the golden set on both, side by side; the new index must not be worse by
//! more than `--margin` in recall@k or MRR@k (or `--force`). Then the swap
//! ([`crate::pointer`]): `serving.json` names the new index, or the collection alias
//! `store.collection` on the server, atomically; the old one is kept `--keep-hours` for
//! `casement migrate --rollback`. On a server, the services running beside the migration
//! notice the swap ([`casement_store::Aliases`]: query services of the same model and
//! radius follow it, the others stay on the old collection and writers with the old
//! settings write nothing until restarted with the printed pairs); the migration waits for
//! them and copies what they wrote to the old collection before they noticed.
//!
//! A killed migration resumes where it stopped: the pointer records it (a new directory
//! before it is created, a new collection in its metadata), and a pass copies only
//! documents the new index does not hold as the serving one does. Exit codes: 0 swapped (or rolled back), 1 refused by the gate (the new
//! index is kept: the same command resumes it and `--force` swaps it), 2 could not run, 3
//! swapped on a server but the catch-up is pending (the next run finishes it).

pub mod build;
pub mod catch_up;
pub mod config;
pub mod gate;
pub mod http;
pub mod metrics;
pub mod online;

use std::time::Instant;

use anyhow::Context;
use casement_pipeline::factory;
use casement_store::AnyStore;

use crate::config::CasementConfig;
use crate::pointer::Pointer;
use build::Opened;
pub use config::{ConfigSource, changed, reverse, set_as_env};

pub const SWAPPED: u8 = 0;
pub const REFUSED: u8 = 1;
pub const COULD_NOT_RUN: u8 = 2;
/// Swapped (on a Qdrant server), but the catch-up from the replaced collection did not
/// finish; the next `casement migrate` finishes it.
pub const CATCH_UP_PENDING: u8 = 3;

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
    let pointer = Pointer::of(&config)?;
    // What brings the serving configuration back (a rollback's): checked before the copy.
    let restore = reverse(&args.set, &config)?;
    let serving_now = pointer.load().await?;
    eprintln!("loading the models and opening {}", serving_now.index);
    let source_model = factory::load_model(&config.embedder).await?;
    // The serving index first: on the embedded store this takes its lock, so a data
    // directory a running service holds is refused before anything in it changes (the
    // pointer, a migration under way, the kept indexes).
    let source = AnyStore::open(
        &pointer.store_config(&config, &serving_now.index),
        source_model.dimension(),
    )
    .await
    .with_context(|| pointer.busy_hint())?;
    let mut serving = pointer.load().await?;
    anyhow::ensure!(
        serving.index == serving_now.index,
        "{} changed while this command started (another migration swapped): run it again",
        pointer.describe()
    );
    if let Some(from) = pointer.pending_catch_up(&serving).await? {
        let finished =
            catch_up::finish(&pointer, &serving.index, &from, &[&target, &config]).await?;
        if finished == 0 {
            // This very migration, stopped after its swap: now complete.
            println!("the migration into {} is complete", serving.index);
            print_pairs(&args.set);
            return Ok(SWAPPED);
        }
    }
    pointer.forget_expired(&mut serving).await?;
    let name = pointer.begin(&mut serving, &args.set).await?;
    eprintln!(
        "migrating {} -> {name} (changing {})",
        serving.index,
        changed(&config, &target).join(", ")
    );
    // The serving configuration must describe the serving index.
    casement_query::service::check_index_settings(
        &source,
        &source_model,
        config.text.window_radius,
    )
    .await?;
    build::check_source(&source, &target).await?;
    let new = Opened::open(&pointer, &name, &target, Some((&config, &source_model))).await?;
    pointer.opened(&name, &args.set).await?;
    let started = Instant::now();
    new.store.set_bulk(true);
    let passes = build::copy_offline(&pointer, &source, &new, args.max_passes).await?;
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
    let gate = gate::gate(
        (&config, &source, &source_model),
        &new,
        args.margin,
        args.force,
    )
    .await?;
    gate.print();
    if !gate.passed {
        eprintln!(
            "refused: the new index {name} is kept; the same command resumes it (--force swaps it), \
             another --set starts over"
        );
        return Ok(REFUSED);
    }
    last_pass(&pointer, &source, &new).await?;
    let old = pointer
        .swap(&mut serving, &name, restore, &args.set, args.keep_hours)
        .await?;
    println!(
        "swapped: {} now serves {name}; {old} is kept {} h for `casement migrate --rollback`",
        pointer.describe(),
        args.keep_hours
    );
    // The catch-up before the pairs: services restarted with them write the new index,
    // and their writes should not meet the catch-up's.
    let settled = catch_up::settle(&pointer, &source, &new).await;
    print_pairs(&args.set);
    Ok(caught_up(settled, &old))
}

/// On a server, one more pass just before the swap, while nothing but this migration
/// writes the new collection (so the source is the truth, also over a tombstone there): the
/// catch-up after the swap, where other writers may have gone on, leaves such documents as
/// it finds them. On the embedded store the passes ran until one copied nothing.
async fn last_pass(pointer: &Pointer, source: &AnyStore, new: &Opened) -> anyhow::Result<()> {
    if matches!(pointer, Pointer::Alias(_)) {
        let pass = build::final_pass(source, new, false).await?;
        eprintln!(
            "last pass before the swap: {} documents copied ({} sentences embedded)",
            pass.copied, pass.embedded
        );
    }
    Ok(())
}

/// A catch-up a stopped migration left on a server, finished under `config`: what
/// `casement migrate` does before refusing pairs that change nothing (they are already
/// in the configuration). Whether there was one.
pub async fn finish_pending(config: &CasementConfig) -> anyhow::Result<bool> {
    let pointer = Pointer::of(config)?;
    let serving = pointer.load().await?;
    let Some(from) = pointer.pending_catch_up(&serving).await? else {
        return Ok(false);
    };
    catch_up::finish(&pointer, &serving.index, &from, &[config]).await?;
    println!("the migration into {} is complete", serving.index);
    Ok(true)
}

fn print_pairs(pairs: &[String]) {
    println!("set in the configuration every service of this index starts with:");
    for pair in pairs {
        println!("  {pair}");
    }
}

/// The exit code after a swap: [`SWAPPED`], or [`CATCH_UP_PENDING`] when the catch-up
/// from the replaced index failed (said on stderr).
fn caught_up(settled: anyhow::Result<()>, replaced: &str) -> u8 {
    match settled {
        Ok(()) => SWAPPED,
        Err(error) => {
            eprintln!(
                "the swap happened, but copying what was written to {replaced} just before it did \
                 not finish: {error:#}\nthe next `casement migrate` finishes it: the same command, \
                 or the same pairs once set in the configuration"
            );
            CATCH_UP_PENDING
        }
    }
}

/// `casement migrate --rollback`: the index the last migration replaced, brought up to
/// date with what was indexed since (copied from the serving index under its own
/// configuration, rebuilt from the pairs the pointer keeps) and served again; the
/// replaced one is kept for as long, so a rollback can be rolled back.
pub async fn rollback(
    config: CasementConfig,
    source: ConfigSource,
    keep_hours: u64,
) -> anyhow::Result<u8> {
    let pointer = Pointer::of(&config)?;
    let mut serving = pointer.load().await?;
    if let Some(from) = pointer.pending_catch_up(&serving).await? {
        catch_up::finish(&pointer, &serving.index, &from, &[&config]).await?;
    }
    let Some(previous) = serving.previous.clone() else {
        anyhow::bail!(
            "nothing to roll back to: {} names no previous index",
            pointer.describe()
        );
    };
    anyhow::ensure!(
        pointer.exists(&previous.index).await?,
        "the previous index {} is gone",
        previous.index
    );
    // The configuration of the served index, and of the one to return to. When the file
    // already describes the latter (the pairs of the swap were never set: an online
    // migration's), the served one is the file with those pairs.
    let with_restore = source.with_pairs(&config, &previous.restore)?;
    let (running, earlier) =
        if changed(&config, &with_restore).is_empty() && !previous.applied.is_empty() {
            let running = source
                .with_pairs(&config, &previous.applied)
                .context("the pairs that built the served index")?;
            eprintln!(
                "the configuration already describes {}: {} serves it with {}",
                previous.index,
                serving.index,
                previous.applied.join(" ")
            );
            (running, config.clone())
        } else {
            (config.clone(), source.target(&config, &previous.restore)?)
        };
    let config = running;
    let undo = reverse(&previous.restore, &config)?;
    let model = factory::load_model(&config.embedder).await?;
    let current = AnyStore::open(
        &pointer.store_config(&config, &serving.index),
        model.dimension(),
    )
    .await
    .with_context(|| pointer.busy_hint())?;
    casement_query::service::check_index_settings(&current, &model, config.text.window_radius)
        .await?;
    let back = Opened::open(&pointer, &previous.index, &earlier, Some((&config, &model))).await?;
    eprintln!(
        "bringing {} up to date with {} before serving it again",
        previous.index, serving.index
    );
    let passes = build::copy_offline(&pointer, &current, &back, 5).await?;
    back.store.optimize().await?;
    last_pass(&pointer, &current, &back).await?;
    let replaced = pointer
        .swap(
            &mut serving,
            &previous.index,
            undo,
            &previous.restore,
            keep_hours,
        )
        .await?;
    println!(
        "rolled back: {} now serves {} again ({} documents brought up to date); {replaced} is kept \
         {keep_hours} h (`casement migrate --rollback` swaps back)",
        pointer.describe(),
        previous.index,
        passes.iter().map(|p| p.copied).sum::<usize>()
    );
    let settled = catch_up::settle(&pointer, &current, &back).await;
    print_pairs(&previous.restore);
    Ok(caught_up(settled, &replaced))
}
