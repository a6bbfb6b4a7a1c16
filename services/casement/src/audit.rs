//! `casement audit SOURCE`: compares the index in the data directory with a source of truth
//! (a revision log, or a listing of `{doc_id, revision}` lines) and reports what is
//! missing, behind, ahead, left behind or wrong (`casement_pipeline::audit`). With `--fix`
//! the repairs go through the pipeline as events of the `audit` source (fenced,
//! dead-lettered and counted like any other), after the mass-deletion guard
//! (`audit.max_delete_share`, `--force`), and the index is audited again. Exit codes: 0 the
//! index matches (after the fix, with `--fix`), 1 it does not, 2 the audit could not run
//! or the fix was refused. The data directory must not be open in another process.
//!
//! [`periodic`] is the same audit inside `casement run` (`[audit] source`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use casement_events::Event;
use casement_pipeline::audit::{self, AuditConfig, AuditMetrics, FixOutcome, Kind, Report, Truth};
use casement_pipeline::{Finished, ProcessorSlot, SourceId};
use casement_store::AnyStore;
use prometheus::Registry;
use serde_json::json;
use tokio::sync::oneshot;

use crate::config::CasementConfig;
use crate::engine::Engine;
use crate::progress;
use crate::sources::{Feeder, Positions};

/// The index matches the source.
pub const CONSISTENT: u8 = 0;
/// It does not.
pub const INCONSISTENT: u8 = 1;
/// The audit could not run, or its fix was refused.
pub const COULD_NOT_RUN: u8 = 2;

#[derive(Debug, Clone)]
pub struct AuditArgs {
    /// A revision log or a listing; `None` with `wiki`.
    pub source: Option<PathBuf>,
    /// The source is the polled wiki's own listing (`sources.mediawiki.api_url`).
    pub wiki: bool,
    pub fix: bool,
    /// Fix even past `audit.max_delete_share`.
    pub force: bool,
    pub json: bool,
    /// Write the `casement_audit_*` metrics there (Prometheus text format, for
    /// node_exporter's textfile collector), replaced atomically.
    pub metrics_file: Option<PathBuf>,
    /// Documents listed per finding in the text report.
    pub list: usize,
}

/// Runs the audit (and the fix); returns the exit code. The metrics file is written
/// whatever happens, so an audit that could not run shows as one
/// (`casement_audit_runs_total{outcome="error"}`).
pub async fn command(config: CasementConfig, args: AuditArgs) -> anyhow::Result<u8> {
    let registry = Registry::new();
    let metrics = AuditMetrics::new(&registry);
    let result = async {
        let truth = match &args.source {
            Some(source) => Truth::read(source)?,
            None => crate::sources::mediawiki::listing::truth(&config).await?,
        };
        eprintln!(
            "loading the model and opening {}",
            config.data_dir.display()
        );
        let engine = Engine::start(config.clone(), Positions::load(&config.data_dir)).await?;
        let result = run(&engine, &truth, &args, &metrics).await;
        engine.stop().await?;
        result
    }
    .await;
    if result.is_err() {
        metrics.failed();
    }
    if let Some(path) = &args.metrics_file {
        write_metrics(&registry, path)?;
    }
    result
}

async fn run(
    engine: &Engine,
    truth: &Truth,
    args: &AuditArgs,
    metrics: &AuditMetrics,
) -> anyhow::Result<u8> {
    let report = audit::audit(&engine.processor.current(), truth).await?;
    metrics.record(&report);
    if report.is_consistent() || !args.fix {
        print(&report, args);
        return Ok(code(&report));
    }
    if !args.json {
        print(&report, args);
    }
    let fixes = report.fixes(true);
    if !args.force
        && let Err(refused) = report.check_deletions(engine.config.audit.max_delete_share, true)
    {
        metrics.fixes(FixOutcome::Refused, fixes.len());
        if args.json {
            print(&report, args);
        }
        eprintln!("error: {refused}");
        return Ok(COULD_NOT_RUN);
    }
    let total = fixes.len();
    let outcomes = send(&engine.feeder, fixes, metrics).await?;
    progress::follow("fixing", engine.all_finished.clone(), 0, total as u64).await;
    let by_outcome = outcomes_of(outcomes).await;
    let counts: Vec<String> = by_outcome
        .iter()
        .map(|(outcome, n)| format!("{n} {outcome}"))
        .collect();
    eprintln!(
        "fix: {total} repair events through the pipeline: {}{}",
        counts.join(", "),
        if by_outcome.contains_key("dead_lettered") {
            format!(" (see {})", engine.dead_letters.path().display())
        } else {
            String::new()
        },
    );
    casement_store::Store::sync(&engine.store())
        .await
        .context("making the repairs durable")?;
    let after = audit::audit(&engine.processor.current(), truth).await?;
    metrics.record(&after);
    if args.json {
        let both = json!({ "before": report, "fixes": by_outcome, "after": after });
        println!("{both}");
    } else {
        println!("after the fix:");
        print(&after, args);
    }
    Ok(code(&after))
}

fn code(report: &Report) -> u8 {
    if report.is_consistent() {
        CONSISTENT
    } else {
        INCONSISTENT
    }
}

fn print(report: &Report, args: &AuditArgs) {
    if args.json {
        match serde_json::to_string(report) {
            Ok(json) => println!("{json}"),
            Err(error) => eprintln!("error: the report as JSON: {error}"),
        }
        return;
    }
    print!("{}", report.text(args.list));
    if !report.is_consistent() && !args.fix {
        let unfixable = report.unfixable(true);
        println!(
            "--fix would send {} repair events through the pipeline{}",
            report.fixes(true).len(),
            if unfixable > 0 {
                format!("; {unfixable} findings have no repair from this source (see each)")
            } else {
                String::new()
            }
        );
    }
}

/// Sends the repairs as events of the `audit` source, each with its reply channel.
async fn send(
    feeder: &Feeder,
    fixes: Vec<Event>,
    metrics: &AuditMetrics,
) -> anyhow::Result<Vec<oneshot::Receiver<Finished>>> {
    let mut outcomes = Vec::with_capacity(fixes.len());
    for event in fixes {
        match feeder.send_event(SourceId::Audit, event).await {
            Ok(outcome) => outcomes.push(outcome),
            Err(error) => {
                // Those already sent are in the pipeline: wait for them all the same.
                metrics.fixes(FixOutcome::Sent, outcomes.len());
                outcomes_of(outcomes).await;
                return Err(error.context("sending a repair"));
            }
        }
    }
    metrics.fixes(FixOutcome::Sent, outcomes.len());
    Ok(outcomes)
}

/// How the repairs ended, by outcome label (`applied`, `deleted`, `stale`,
/// `dead_lettered`), once each is durable.
async fn outcomes_of(outcomes: Vec<oneshot::Receiver<Finished>>) -> BTreeMap<&'static str, usize> {
    let mut by_outcome = BTreeMap::new();
    for outcome in outcomes {
        let label = match outcome.await {
            Ok(finished) => finished.outcome.label(),
            Err(_) => "not finished",
        };
        *by_outcome.entry(label).or_default() += 1;
    }
    by_outcome
}

/// Writes the registry in Prometheus text format to `path`, through a temporary file and a
/// rename (a collector never reads half a file).
fn write_metrics(registry: &Registry, path: &Path) -> anyhow::Result<()> {
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .context("encoding the audit metrics")?;
    let partial = path.with_extension("prom.partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, path))
        .with_context(|| format!("writing the audit metrics to {}", path.display()))
}

/// `[audit] source` in `casement run`: the audit every `interval_secs` (the source read
/// again each time, off the executor), its figures as `casement_audit_*` on /metrics, one
/// log line per audit; with `fix`, the repairs sent through the pipeline past the
/// mass-deletion guard and awaited before the next audit. Documents the source does not
/// list are reported, never deleted here: the running service may hold documents of other
/// sources or tenants, or newer than the source. Runs until aborted.
pub async fn periodic(
    processor: Arc<ProcessorSlot<AnyStore>>,
    feeder: Feeder,
    config: AuditConfig,
    metrics: AuditMetrics,
) {
    let interval = std::time::Duration::from_secs(config.interval_secs);
    loop {
        let outcome = async {
            let source = config.source.clone();
            let truth = tokio::task::spawn_blocking(move || Truth::read(&source)).await??;
            let report = audit::audit(&processor.current(), &truth).await?;
            metrics.record(&report);
            Ok::<_, anyhow::Error>(report)
        }
        .await;
        match outcome {
            Ok(report) if report.is_consistent() => tracing::info!(
                documents = report.indexed_documents,
                checked = report.content_checked,
                seconds = report.seconds,
                "audit: the index matches {}",
                report.source
            ),
            Ok(report) => {
                let counts: Vec<String> = Kind::ALL
                    .iter()
                    .filter(|kind| report.count(**kind) > 0)
                    .map(|kind| format!("{} {}", report.count(*kind), kind.as_str()))
                    .collect();
                let first = report
                    .findings
                    .first()
                    .map(|f| format!("{}: {}", f.doc, f.detail))
                    .unwrap_or_default();
                tracing::warn!(
                    first = %first,
                    "audit: the index does not match {}: {} (casement audit shows them all)",
                    report.source,
                    counts.join(", ")
                );
                if config.fix {
                    fix_in_service(&report, &feeder, &config, &metrics).await;
                }
            }
            Err(error) => {
                metrics.failed();
                tracing::warn!("audit: could not run: {error:#}");
            }
        }
        tokio::time::sleep(interval).await;
    }
}

async fn fix_in_service(
    report: &Report,
    feeder: &Feeder,
    config: &AuditConfig,
    metrics: &AuditMetrics,
) {
    let fixes = report.fixes(false);
    if fixes.is_empty() {
        return;
    }
    if let Err(refused) = report.check_deletions(config.max_delete_share, false) {
        metrics.fixes(FixOutcome::Refused, fixes.len());
        tracing::error!(
            "audit: {refused} (`casement audit --fix --force` with the service stopped)"
        );
        return;
    }
    let total = fixes.len();
    match send(feeder, fixes, metrics).await {
        Ok(outcomes) => {
            // The next audit must not see the repairs half done (and send them again).
            let by_outcome = outcomes_of(outcomes).await;
            tracing::info!(
                events = total,
                outcomes = ?by_outcome,
                "audit: repairs applied through the pipeline"
            );
        }
        Err(error) => tracing::warn!("audit: {error:#}"),
    }
}
