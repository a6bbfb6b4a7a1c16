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

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use casement_inference::Embed;
use casement_pipeline::factory::{self, ProcessorConfig};
use casement_pipeline::migrate::{Migration, Pass, Progress};
use casement_query::eval::{Evaluator, GoldenSet, Report};
use casement_store::{AnyStore, Store};

use crate::config::CasementConfig;
use crate::serving::{Previous, Serving, Underway, now};

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

/// The `--set` pairs as environment pairs for the config loader, which then reads them as
/// it reads `CASEMENT__*` variables (types, unknown keys and checks included).
pub fn set_as_env(set: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    set.iter()
        .map(|pair| {
            let (key, value) = pair
                .split_once('=')
                .filter(|(k, _)| !k.trim().is_empty())
                .with_context(|| format!("--set {pair}: expected KEY=VALUE, e.g. embedder.precision=int8"))?;
            let name = key
                .trim()
                .split('.')
                .map(str::to_ascii_uppercase)
                .collect::<Vec<_>>()
                .join("__");
            Ok((format!("{}__{name}", crate::config::ENV_PREFIX), value.to_owned()))
        })
        .collect()
}

/// What may differ between the serving configuration and the target's: the embedding
/// model, the enrichment, the window radius (and the query side's copy of it). Anything
/// else (segmentation, store, sources) is refused: the stored records cannot give it.
fn check_target(current: &CasementConfig, target: &CasementConfig) -> anyhow::Result<Vec<String>> {
    let mut same = target.clone();
    same.embedder = current.embedder.clone();
    same.enrich = current.enrich.clone();
    same.text.window_radius = current.text.window_radius;
    same.search.indexed_window_radius = current.search.indexed_window_radius;
    let text = |c: &CasementConfig| toml::to_string(c).unwrap_or_default();
    anyhow::ensure!(
        text(&same) == text(current),
        "a migration changes [embedder], [enrich] and text.window_radius only (the stored \
         records give nothing else); the --set pairs change more"
    );
    let mut changed = Vec::new();
    if toml::to_string(&target.embedder).ok() != toml::to_string(&current.embedder).ok() {
        changed.push("embedder".to_owned());
    }
    if toml::to_string(&target.enrich).ok() != toml::to_string(&current.enrich).ok() {
        changed.push("enrich".to_owned());
    }
    if target.text.window_radius != current.text.window_radius {
        changed.push("text.window_radius".to_owned());
    }
    anyhow::ensure!(
        !changed.is_empty(),
        "nothing to migrate: the --set pairs leave the serving configuration as it is"
    );
    Ok(changed)
}

pub async fn command(
    config: CasementConfig,
    target: CasementConfig,
    args: MigrateArgs,
) -> anyhow::Result<u8> {
    let data_dir = config.data_dir.clone();
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
    let changed = check_target(&config, &target)?;
    let mut serving = Serving::load(&data_dir)?;
    forget_expired(&mut serving, &data_dir)?;
    let name = match &serving.migration {
        Some(underway) if underway.set == args.set => {
            eprintln!("resuming the migration into {}", underway.target);
            underway.target.clone()
        }
        other => {
            if let Some(stale) = other {
                eprintln!(
                    "discarding the unfinished migration into {} ({}): another was asked",
                    stale.target,
                    stale.set.join(" ")
                );
                remove_index(&data_dir, &stale.target)?;
            }
            let name = serving.next_name(&data_dir);
            serving.migration = Some(Underway {
                target: name.clone(),
                set: args.set.clone(),
            });
            serving.save(&data_dir)?;
            name
        }
    };
    eprintln!(
        "migrating {} -> {name} (changing {}); loading the models",
        serving.index,
        changed.join(", ")
    );
    let built = build(&config, &target, &name, &args).await?;
    let verdict = gate(&config, &target, &built, &args).await?;
    drop(built);
    if !verdict {
        eprintln!(
            "refused: the new index {name} is kept; run the same command with --force to swap it, \
             or another --set to start over"
        );
        return Ok(REFUSED);
    }
    let old = std::mem::replace(&mut serving.index, name.clone());
    if let Some(previous) = serving.previous.take() {
        remove_index(&data_dir, &previous.index)?;
    }
    serving.previous = Some(Previous {
        index: old.clone(),
        keep_until: now() + args.keep_hours * 3600,
    });
    serving.migration = None;
    serving.save(&data_dir)?;
    println!(
        "swapped: {} now serves {name}; {old} is kept {} h for `casement migrate --rollback`",
        data_dir.display(),
        args.keep_hours
    );
    println!("set in the config every service of this data directory starts with:");
    for pair in &args.set {
        println!("  {pair}");
    }
    Ok(SWAPPED)
}

/// The indexes, open; the new one built and its vector index optimised.
struct Built {
    source: AnyStore,
    source_model: Arc<dyn Embed>,
    target: AnyStore,
    target_model: Arc<dyn Embed>,
}

async fn build(
    config: &CasementConfig,
    target_config: &CasementConfig,
    name: &str,
    args: &MigrateArgs,
) -> anyhow::Result<Built> {
    let source_model = factory::load_model(&config.embedder).await?;
    let target_model = if target_config.embedder == config.embedder {
        source_model.clone()
    } else {
        factory::load_model(&target_config.embedder).await?
    };
    let source = AnyStore::open(&config.store(), source_model.dimension())
        .await
        .context("opening the serving index (is a service running on this data directory?)")?;
    // The serving configuration must describe the serving index.
    casement_query::service::check_index_settings(
        &source,
        &source_model,
        config.text.window_radius,
    )
    .await?;
    if let Some(settings) = source.settings().await?
        && settings.window_radius == 0
        && target_config.text.window_radius > 0
    {
        anyhow::bail!(
            "the serving index has windows of radius 0, which do not hold the text between \
             sentences: windows of radius {} cannot be built from it (backfill from the source)",
            target_config.text.window_radius
        );
    }
    let mut store = target_config.store();
    store.edge.path = Serving::dir(&config.data_dir, name);
    let target = AnyStore::open(&store, target_model.dimension())
        .await
        .with_context(|| format!("opening the new index {}", store.edge.path.display()))?;
    let processor_config = ProcessorConfig {
        pipeline: &target_config.pipeline,
        enrich: &target_config.enrich,
        text: &target_config.text,
        fetch: &target_config.fetch,
    };
    factory::check_index_settings(&target, &target_model, processor_config).await?;
    let processor = factory::processor(
        processor_config,
        &casement_pipeline::Metrics::new(),
        target_model.clone(),
        target.clone(),
    )?;
    target.set_bulk(true);
    let migration = Migration {
        source: source.clone(),
        target: Arc::new(processor),
        concurrency: 4 * target_config.pipeline.embed_concurrency.max(1),
        sync_every: 64,
    };
    let started = Instant::now();
    let mut copied = Pass::default();
    for round in 1..=args.max_passes.max(1) {
        let pass = migration.pass(&Bar::new(round)).await?;
        eprintln!(
            "pass {round}: {} documents, {} copied ({} sentences embedded), {} deferred, {:.1} s",
            pass.documents,
            pass.copied,
            pass.embedded,
            pass.deferred,
            pass.took.as_secs_f64()
        );
        if pass.extra > 0 {
            tracing::warn!(documents = pass.extra, "the new index holds documents the serving one does not");
        }
        copied.copied += pass.copied;
        copied.embedded += pass.embedded;
        if pass.converged() {
            break;
        }
        anyhow::ensure!(
            round < args.max_passes,
            "the copy did not converge in {round} passes ({} documents still differ)",
            pass.copied + pass.deferred
        );
    }
    target.set_bulk(false);
    target.optimize().await?;
    let took = started.elapsed().as_secs_f64();
    eprintln!(
        "built {name}: {} documents copied, {} sentences embedded in {took:.1} s ({:.0} sentences/s)",
        copied.copied,
        copied.embedded,
        copied.embedded as f64 / took.max(1e-9)
    );
    Ok(Built {
        source,
        source_model,
        target,
        target_model,
    })
}

/// The golden set on both indexes; true when the new one may be served.
async fn gate(
    config: &CasementConfig,
    target: &CasementConfig,
    built: &Built,
    args: &MigrateArgs,
) -> anyhow::Result<bool> {
    let golden = config
        .eval
        .golden()
        .map(Path::to_path_buf)
        .or_else(|| {
            let sample = crate::sample::golden_path(&config.data_dir);
            sample.exists().then_some(sample)
        });
    let Some(golden) = golden else {
        if args.force {
            eprintln!("no golden set ([eval] golden): swapping without the gate (--force)");
            return Ok(true);
        }
        eprintln!("no golden set ([eval] golden): the gate cannot run; pass --force to swap without it");
        return Ok(false);
    };
    let set = GoldenSet::load(&golden)?;
    let old = evaluate(config, built.source.clone(), built.source_model.clone(), &golden, &set).await?;
    let new = evaluate(target, built.target.clone(), built.target_model.clone(), &golden, &set).await?;
    println!(
        "gate ({}, {} queries, k = {}, margin {}):",
        golden.display(),
        old.queries,
        old.k,
        args.margin
    );
    println!("  {:<12} {:>8} {:>8}", "", "serving", "new");
    println!("  {:<12} {:>8.3} {:>8.3}", format!("recall@{}", old.k), old.recall, new.recall);
    println!("  {:<12} {:>8.3} {:>8.3}", format!("MRR@{}", old.k), old.mrr, new.mrr);
    println!("  {:<12} {:>8} {:>8}", "failures", old.failures, new.failures);
    let worse = new.recall < old.recall - args.margin || new.mrr < old.mrr - args.margin;
    if worse && args.force {
        println!("  the new index is worse by more than the margin: swapping anyway (--force)");
        return Ok(true);
    }
    if worse {
        println!("  the new index is worse by more than the margin");
    }
    Ok(!worse)
}

async fn evaluate(
    config: &CasementConfig,
    store: AnyStore,
    model: Arc<dyn Embed>,
    golden: &Path,
    set: &GoldenSet,
) -> anyhow::Result<Report> {
    let mut query = config.query();
    query.eval.golden = golden.to_path_buf();
    let reranker = casement_query::service::load_reranker(&query).await?;
    let app = casement_query::service::app(
        query,
        store,
        model,
        reranker,
        casement_query::Metrics::new(),
    );
    let evaluator = Evaluator::new(&app, &prometheus::Registry::new())
        .context("the golden set is configured")?;
    Ok(evaluator.evaluate(set).await?)
}

/// `casement migrate --rollback`: the previous index served again (the current one kept
/// in its place for as long).
pub fn rollback(config: &CasementConfig, keep_hours: u64) -> anyhow::Result<u8> {
    let data_dir = &config.data_dir;
    let mut serving = Serving::load(data_dir)?;
    let Some(previous) = serving.previous.take() else {
        anyhow::bail!("nothing to roll back to: {} names no previous index", Serving::path(data_dir).display());
    };
    let dir = Serving::dir(data_dir, &previous.index);
    anyhow::ensure!(dir.exists(), "the previous index {} is gone", dir.display());
    let current = std::mem::replace(&mut serving.index, previous.index.clone());
    serving.previous = Some(Previous {
        index: current.clone(),
        keep_until: now() + keep_hours * 3600,
    });
    serving.save(data_dir)?;
    println!(
        "rolled back: {} now serves {} again; {current} is kept {keep_hours} h (`casement migrate --rollback` swaps back)",
        data_dir.display(),
        previous.index
    );
    println!("start the services with the configuration {} was built with", previous.index);
    Ok(SWAPPED)
}

/// Deletes the previous index once its time is up.
fn forget_expired(serving: &mut Serving, data_dir: &Path) -> anyhow::Result<()> {
    if let Some(previous) = &serving.previous
        && previous.keep_until <= now()
    {
        eprintln!("deleting {}: kept for rollback until its time ran out", previous.index);
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

/// Progress of a pass: a bar on a terminal, a line every few seconds otherwise.
struct Bar {
    round: usize,
    state: std::sync::Mutex<(usize, usize, usize, Instant, Instant)>,
}

impl Bar {
    fn new(round: usize) -> Self {
        let now = Instant::now();
        Self {
            round,
            state: std::sync::Mutex::new((0, 0, 0, now, now)),
        }
    }
}

impl Progress for Bar {
    fn started(&self, to_copy: usize) {
        if let Ok(mut state) = self.state.lock() {
            state.1 = to_copy;
        }
    }

    fn copied(&self, sentences: usize) {
        let Ok(mut state) = self.state.lock() else { return };
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
