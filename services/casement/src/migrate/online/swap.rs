//! The swap of the running service's migration: the pipeline paused, the last copy, the
//! pointer moved, the pipeline's processor and the searcher's index replaced as one, the
//! catch-up on a server, then events flow again.

use std::time::Instant;

use anyhow::Context;
use casement_pipeline::factory;
use casement_store::AnyStore;

use super::super::build::{self, Opened};
use super::super::catch_up;
use super::{Online, PAUSE_WAIT};
use crate::pointer::Pointer;

impl Online {
    /// Pauses the pipeline, copies the last changes, points `serving.json` (or the alias)
    /// at `new` and puts it in the pipeline and the searcher; then events flow again.
    pub(super) async fn swap_to(
        &self,
        new: Opened,
        restore: Vec<String>,
        keep_hours: u64,
        applied: &[String],
    ) -> anyhow::Result<()> {
        let paused_at = Instant::now();
        // Events in hand finish first (one may be fetching from a slow wiki); new ones wait
        // behind the pause, so it is given up rather than held for long.
        let paused = tokio::time::timeout(PAUSE_WAIT, self.slot.pause())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the events in hand did not finish within {} s, so the pipeline was not \
                     paused for the swap; the same request resumes the migration",
                    PAUSE_WAIT.as_secs()
                )
            })?;
        let source = self.slot.current().store.clone();
        let pointer = self.pointer().map_err(|e| anyhow::anyhow!("{e}"))?;
        let on_server = matches!(pointer, Pointer::Alias(_));
        let last = build::final_pass(&source, &new, !on_server).await?;
        new.store.optimize().await?;
        let mut serving = pointer.load().await?;
        if let AnyStore::Server(store) = &source {
            anyhow::ensure!(
                store.collection() == serving.index,
                "nothing swapped: the alias names {} now, not {}, which this migration copied \
                 from (another migration swapped meanwhile)",
                serving.index,
                store.collection()
            );
        }
        let old = pointer
            .swap(&mut serving, &new.name, restore, keep_hours)
            .await?;
        // On a server, the new collection is used through the alias from now on, so that
        // this process notices when a later migration moves it.
        let new = if on_server {
            let store = AnyStore::open(&new.config.store(), new.model.dimension()).await?;
            factory::check_index_settings(&store, &new.model, build::processor_config(&new.config))
                .await?;
            Opened { store, ..new }
        } else {
            new
        };
        let processor = new.processor(&self.pipeline_metrics)?;
        self.slot.replace(&paused, processor);
        self.app.searcher.swap(
            new.store.clone(),
            new.model.clone(),
            new.config.text.window_radius,
        );
        match self.serving.lock() {
            Ok(mut serving) => *serving = (new.config.clone(), new.model.clone()),
            Err(poisoned) => *poisoned.into_inner() = (new.config.clone(), new.model.clone()),
        }
        match self.applied.lock() {
            Ok(mut pairs) => pairs.extend(applied.iter().cloned()),
            Err(poisoned) => poisoned.into_inner().extend(applied.iter().cloned()),
        }
        self.update(|s| s.serving = new.name.clone());
        // On a server, what other processes wrote to the replaced collection before the
        // move, copied while this pipeline is still paused (its writes would race it).
        let settled = catch_up::settle(pointer, &source, &new).await;
        drop(paused);
        let paused_ms = paused_at.elapsed().as_millis() as u64;
        self.metrics.pause.set(paused_at.elapsed().as_secs_f64());
        self.metrics.documents.inc_by(last.copied as u64);
        self.metrics.sentences.inc_by(last.embedded as u64);
        self.update(|s| s.passes.push(last));
        tracing::info!(serving = %new.name, replaced = %old, last_copied = last.copied, paused_ms,
            "swapped: searches and events now go to the new index");
        settled.with_context(|| {
            format!(
                "swapped to {}, but copying what was written to {old} just before did not \
                 finish; the next migration request finishes it",
                new.name
            )
        })?;
        // The replaced index closes once the searches that started on it finish.
        drop(source);
        Ok(())
    }
}
