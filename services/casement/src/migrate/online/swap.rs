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
    /// The new collection through the alias (so that this process notices a later move),
    /// or, when that cannot be opened now, as it is.
    async fn through_alias(&self, new: Opened) -> Opened {
        let opened = async {
            let store = AnyStore::open(&new.config.store(), new.model.dimension()).await?;
            factory::check_index_settings(&store, &new.model, build::processor_config(&new.config))
                .await?;
            anyhow::Ok(store)
        };
        match opened.await {
            Ok(store) => Opened { store, ..new },
            Err(error) => {
                tracing::warn!(error = format!("{error:#}"), collection = %new.name, "the new collection could not be opened through the alias; this process uses it directly and will not notice a later move before it restarts");
                new
            }
        }
    }

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
            .swap(&mut serving, &new.name, restore, applied, keep_hours)
            .await?;
        // On a server, the new collection is used through the alias from now on, so that
        // this process notices when a later migration moves it.
        // The swap happened: from here on nothing may leave the pipeline on the old index.
        let new = if on_server {
            self.through_alias(new).await
        } else {
            new
        };
        let processor = match new.processor(&self.pipeline_metrics) {
            Ok(processor) => processor,
            // Built from the configuration the copy already ran with: not expected to fail.
            Err(error) => {
                tracing::error!(
                    error = format!("{error:#}"),
                    "the swap happened but its processor could not be built: restart this service with the printed pairs"
                );
                return Err(error);
            }
        };
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
        let pause_seconds = paused_at.elapsed().as_secs_f64();
        self.update(|s| {
            s.passes.push(last);
            s.pause_seconds = Some(pause_seconds);
        });
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
