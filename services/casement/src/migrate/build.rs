//! The parts of a migration both `casement migrate` and the running service's use: the new
//! index opened under its configuration and the copy passes from the serving index (the
//! gate is in [`super::gate`], the catch-up after a server swap in [`super::catch_up`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use casement_inference::Embed;
use casement_pipeline::factory::{self, ProcessorConfig};
use casement_pipeline::migrate::{Migration, Pass, Progress};
use casement_pipeline::{Metrics, Processor};
use casement_store::{AnyStore, Store};

use crate::config::CasementConfig;
use crate::pointer::Pointer;

/// An index of the data directory, open under the configuration it is (to be) built with.
#[derive(Clone)]
pub struct Opened {
    pub name: String,
    pub config: CasementConfig,
    pub store: AnyStore,
    pub model: Arc<dyn Embed>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("name", &self.name)
            .field("model", &self.model.model_id())
            .finish_non_exhaustive()
    }
}

impl Opened {
    /// Opens index `name` of the data directory for `config`, loading its model (or
    /// reusing `model` when the embedder is the same), and checks or records its settings
    /// as a writer does.
    pub async fn open(
        pointer: &Pointer,
        name: &str,
        config: &CasementConfig,
        reuse: Option<(&CasementConfig, &Arc<dyn Embed>)>,
    ) -> anyhow::Result<Self> {
        let model = match reuse {
            Some((other, model)) if other.embedder == config.embedder => model.clone(),
            _ => factory::load_model(&config.embedder).await?,
        };
        let store_config = pointer.store_config(config, name);
        let store = AnyStore::open(&store_config, model.dimension())
            .await
            .with_context(|| format!("opening the index {name}"))?;
        factory::check_index_settings(&store, &model, processor_config(config)).await?;
        Ok(Self {
            name: name.to_owned(),
            config: config.clone(),
            store,
            model,
        })
    }

    /// A processor writing this index with this configuration, counting into `metrics`.
    pub fn processor(&self, metrics: &Metrics) -> anyhow::Result<Processor<AnyStore>> {
        factory::processor(
            processor_config(&self.config),
            metrics,
            self.model.clone(),
            self.store.clone(),
        )
    }
}

pub fn processor_config(config: &CasementConfig) -> ProcessorConfig<'_> {
    ProcessorConfig {
        pipeline: &config.pipeline,
        enrich: &config.enrich,
        text: &config.text,
        fetch: &config.fetch,
    }
}

/// Refuses what the stored records cannot give: windows wider than radius 0 from an index
/// of radius 0.
pub async fn check_source(source: &AnyStore, target: &CasementConfig) -> anyhow::Result<()> {
    if let Some(settings) = source.settings().await?
        && settings.window_radius == 0
        && target.text.window_radius > 0
    {
        anyhow::bail!(
            "the serving index has windows of radius 0, which do not hold the text between \
             sentences: windows of radius {} cannot be built from it (backfill from the source)",
            target.text.window_radius
        );
    }
    Ok(())
}

/// Whether both indexes record the same model (their probes' vectors agree).
pub(super) async fn same_model(source: &AnyStore, target: &AnyStore) -> anyhow::Result<bool> {
    Ok(match (source.settings().await?, target.settings().await?) {
        (Some(a), Some(b)) => a.same_model(&b).0,
        _ => false,
    })
}

/// Copy passes while the source keeps being written (a running service's, or a Qdrant
/// server's beside running indexers): they stop once a pass copies at most this many
/// documents; the rest is copied with the pipeline paused, or by the catch-up after the
/// swap ([`super::catch_up::settle`]).
pub const SMALL_ENOUGH: usize = 8;
pub const MAX_PASSES: usize = 12;

/// [`MAX_PASSES`], or `CASEMENT_MIGRATE_MAX_PASSES` (a test's way to run out of passes
/// under a steady stream of edits).
pub fn max_passes() -> usize {
    std::env::var("CASEMENT_MIGRATE_MAX_PASSES")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(MAX_PASSES)
}

/// The passes of `casement migrate` (and `--rollback`): until one copies nothing when
/// nothing else writes the source (the embedded store, locked by this process); on a
/// server, where indexers may go on writing, until one is small enough.
pub async fn copy_offline(
    pointer: &Pointer,
    source: &AnyStore,
    target: &Opened,
    max_passes: usize,
) -> anyhow::Result<Vec<Pass>> {
    match pointer {
        Pointer::Dir(_) => copy(source, target, max_passes, None, &Lines::boxed).await,
        Pointer::Alias(_) => {
            copy(
                source,
                target,
                max_passes.max(MAX_PASSES),
                Some(SMALL_ENOUGH),
                &Lines::boxed,
            )
            .await
        }
    }
}

/// The copy from `source` into `target`, pass after pass, until a pass finds nothing to
/// copy, or (with `until_small`) copies at most that many documents: a running service's
/// index keeps changing, and its last pass runs with the pipeline paused.
pub async fn copy(
    source: &AnyStore,
    target: &Opened,
    max_passes: usize,
    until_small: Option<usize>,
    progress: &(dyn Fn(usize) -> Box<dyn Progress> + Sync),
) -> anyhow::Result<Vec<Pass>> {
    // A test's kill point: the first pass stops (synced) after this many documents and the
    // process waits to be killed.
    let stall_after = std::env::var("CASEMENT_MIGRATE_STALL_AFTER")
        .ok()
        .and_then(|n| n.parse().ok());
    let migration = Migration {
        source: source.clone(),
        target: Arc::new(target.processor(&Metrics::new())?),
        concurrency: 4 * target.config.pipeline.embed_concurrency.max(1),
        sync_every: 64,
        stop_after: stall_after,
        reuse_vectors: same_model(source, &target.store).await?,
        over_tombstones: true,
    };
    let mut passes = Vec::new();
    for round in 1..=max_passes.max(1) {
        let pass = migration.pass(progress(round).as_ref()).await?;
        if let Some(n) = stall_after {
            eprintln!(
                "stalled after {n} documents (CASEMENT_MIGRATE_STALL_AFTER): waiting to be killed"
            );
            std::future::pending::<()>().await;
        }
        eprintln!(
            "pass {round}: {} documents, {} copied ({} sentences embedded), {} deferred, {:.1} s",
            pass.documents,
            pass.copied,
            pass.embedded,
            pass.deferred,
            pass.took.as_secs_f64()
        );
        tracing::debug!(
            round,
            documents = pass.documents,
            copied = pass.copied,
            embedded = pass.embedded,
            deferred = pass.deferred,
            seconds = pass.took.as_secs_f64(),
            "migration pass"
        );
        if pass.extra > 0 {
            tracing::warn!(
                documents = pass.extra,
                "the new index holds documents the serving one does not"
            );
        }
        passes.push(pass);
        // Deferred documents (half-written in the source) are left to the last pass.
        let small = until_small.is_some_and(|n| pass.copied <= n);
        if pass.converged() || small {
            return Ok(passes);
        }
    }
    let last = passes.last().copied().unwrap_or_default();
    if until_small.is_some() {
        // Writes keep coming faster than passes shrink: what is left is copied by the
        // last pass with the pipeline paused (online) or by the catch-up after the swap
        // (a server), whose pause is reported.
        tracing::warn!(
            passes = passes.len(),
            documents = last.copied + last.deferred,
            "the copy passes did not get small under the incoming writes; the rest is copied at the swap"
        );
        return Ok(passes);
    }
    anyhow::bail!(
        "the copy did not converge in {max_passes} passes ({} documents still differed in the last)",
        last.copied + last.deferred
    )
}

/// The last pass, with no event of this process in flight: everything still different is
/// copied, and a document left half-written by a crash (points without a state) is the
/// only thing it may leave. `strict`: a second pass must then copy nothing (no other
/// process writes the source; on a Qdrant server others may, and `settle` follows).
pub async fn final_pass(source: &AnyStore, target: &Opened, strict: bool) -> anyhow::Result<Pass> {
    let migration = Migration {
        source: source.clone(),
        target: Arc::new(target.processor(&Metrics::new())?),
        concurrency: 4 * target.config.pipeline.embed_concurrency.max(1),
        sync_every: usize::MAX,
        stop_after: None,
        reuse_vectors: same_model(source, &target.store).await?,
        over_tombstones: true,
    };
    let pass = migration.pass(&()).await?;
    if !strict {
        return Ok(pass);
    }
    let again = migration.pass(&()).await?;
    anyhow::ensure!(
        again.copied == 0,
        "the new index still differs after the final pass ({} documents)",
        again.copied
    );
    Ok(pass)
}

/// Progress of a pass: a line every few seconds and at its end (stderr).
#[derive(Debug)]
pub struct Lines {
    round: usize,
    state: std::sync::Mutex<(usize, usize, usize, Instant, Instant)>,
}

impl Lines {
    pub fn boxed(round: usize) -> Box<dyn Progress> {
        let now = Instant::now();
        Box::new(Self {
            round,
            state: std::sync::Mutex::new((0, 0, 0, now, now)),
        })
    }
}

impl Progress for Lines {
    fn started(&self, to_copy: usize) {
        if let Ok(mut state) = self.state.lock() {
            state.1 = to_copy;
        }
    }

    fn copied(&self, sentences: usize) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let (done, total, embedded, started, last) = &mut *state;
        *done += 1;
        *embedded += sentences;
        if last.elapsed() >= Duration::from_secs(5) || *done == *total {
            eprintln!(
                "pass {}: {done}/{total} documents, {embedded} sentences embedded ({:.0}/s)",
                self.round,
                *embedded as f64 / started.elapsed().as_secs_f64().max(1e-9)
            );
            *last = Instant::now();
        }
    }
}
