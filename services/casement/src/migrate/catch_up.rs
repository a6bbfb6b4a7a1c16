//! The catch-up after a swap on a Qdrant server: what other processes wrote to the
//! replaced collection before the alias moved, copied into the served one, once; and
//! finishing one a stopped migration left.

use std::sync::Arc;

use anyhow::Context;
use casement_pipeline::Metrics;
use casement_pipeline::migrate::Migration;
use casement_store::AnyStore;

use super::build::{Opened, same_model};
use crate::config::CasementConfig;
use crate::pointer::Pointer;

/// After a swap on a Qdrant server: other processes (indexers, the all-in-one) may have
/// written the replaced collection after the last copy pass. Every event they committed
/// was written before the alias moved (their flush looks at the alias before they commit,
/// and refuses once it moved: `casement_store::Aliases`), so one pass from the replaced
/// collection, now, copies them all; what they write after the move is refused and
/// delivered again once they restart with the new settings. A document the served
/// collection holds newer (its own writers went on) is left as it is. The catch-up is
/// recorded in the served collection before the alias moves and cleared here, so a
/// migration stopped in between finishes it at its next run ([`finish`]).
pub async fn settle(pointer: &Pointer, replaced: &AnyStore, served: &Opened) -> anyhow::Result<()> {
    if !matches!(pointer, Pointer::Alias(_)) {
        return Ok(());
    }
    // A test's kill point: swapped, the catch-up not run.
    if std::env::var_os("CASEMENT_MIGRATE_STALL_BEFORE_CATCH_UP").is_some() {
        eprintln!(
            "stalled before the catch-up (CASEMENT_MIGRATE_STALL_BEFORE_CATCH_UP): waiting to be killed"
        );
        std::future::pending::<()>().await;
    }
    let migration = Migration {
        source: replaced.clone(),
        target: Arc::new(served.processor(&Metrics::new())?),
        concurrency: 4 * served.config.pipeline.embed_concurrency.max(1),
        sync_every: 64,
        stop_after: None,
        reuse_vectors: same_model(replaced, &served.store).await?,
        over_tombstones: false,
    };
    let pass = migration.pass(&()).await?;
    pointer.caught_up(&served.name).await?;
    eprintln!(
        "caught up: {} documents copied from the replaced collection after the swap ({} sentences embedded)",
        pass.copied, pass.embedded
    );
    Ok(())
}

/// A catch-up a stopped migration left pending ([`settle`]), finished under whichever of
/// `configs` the served collection was built with; which one (`configs.len()` when the
/// replaced collection is gone, and there was nothing to copy).
pub async fn finish(
    pointer: &Pointer,
    serving: &str,
    from: &str,
    configs: &[&CasementConfig],
) -> anyhow::Result<usize> {
    eprintln!(
        "finishing what a stopped migration left: copying into {serving} what was written to {from} before the swap"
    );
    if !pointer.exists(from).await? {
        eprintln!("{from} is gone: there is nothing left to copy from it");
        pointer.caught_up(serving).await?;
        return Ok(configs.len());
    }
    let dimension = pointer.dimension(from).await?;
    let mut refused = Vec::new();
    for (which, config) in configs.iter().enumerate() {
        match Opened::open(pointer, serving, config, None).await {
            Ok(served) => {
                let replaced = AnyStore::open(
                    &pointer.store_config(config, from),
                    dimension.unwrap_or(served.model.dimension()),
                )
                .await
                .with_context(|| format!("opening {from}"))?;
                settle(pointer, &replaced, &served).await?;
                return Ok(which);
            }
            Err(error) => refused.push(format!("{error:#}")),
        }
    }
    anyhow::bail!(
        "a migration swapped {serving} in and stopped before copying what was written to {from} \
         just before: run casement migrate with {serving}'s settings (the pairs it printed) to \
         finish it ({})",
        refused.join("; ")
    )
}
