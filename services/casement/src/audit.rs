//! `casement audit SOURCE`: compares the index in the data directory with a source of truth
//! (a revision log, or a listing of `{doc_id, revision}` lines) and reports what is
//! missing, behind, ahead, left behind or wrong (`casement_pipeline::audit`). With `--fix`
//! the repairs go through the pipeline as events of the `audit` source (fenced,
//! dead-lettered and counted like any other), after the mass-deletion guard
//! (`audit.max_delete_share`, `--force`), and the index is audited again. Exit codes: 0 the
//! index matches (after the fix, with `--fix`), 1 it does not, 2 the audit could not run
//! or the fix was refused. The data directory must not be open in another process.

use std::path::{Path, PathBuf};

use anyhow::Context;
use casement_pipeline::SourceId;
use casement_pipeline::audit::{self, AuditMetrics, Report, Truth};
use prometheus::Registry;

use crate::config::CasementConfig;
use crate::engine::Engine;
use crate::progress;
use crate::sources::Positions;

/// The index matches the source.
pub const CONSISTENT: u8 = 0;
/// It does not.
pub const INCONSISTENT: u8 = 1;
/// The audit could not run, or its fix was refused.
pub const COULD_NOT_RUN: u8 = 2;

#[derive(Debug, Clone)]
pub struct AuditArgs {
    pub source: PathBuf,
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

/// Runs the audit (and the fix); returns the exit code.
pub async fn command(config: CasementConfig, args: AuditArgs) -> anyhow::Result<u8> {
    let truth = Truth::read(&args.source)?;
    let registry = Registry::new();
    let metrics = AuditMetrics::new(&registry);
    let positions = Positions::load(&config.data_dir);
    eprintln!(
        "loading the model and opening {}",
        config.data_dir.display()
    );
    let engine = Engine::start(config.clone(), positions).await?;
    let result = run(&engine, &truth, &args, &metrics).await;
    if result.is_err() {
        metrics.failed();
    }
    if let Some(path) = &args.metrics_file {
        write_metrics(&registry, path)?;
    }
    engine.stop().await?;
    result
}

async fn run(
    engine: &Engine,
    truth: &Truth,
    args: &AuditArgs,
    metrics: &AuditMetrics,
) -> anyhow::Result<u8> {
    let report = audit::audit(&engine.processor, truth).await?;
    metrics.record(&report);
    print(&report, args);
    if report.is_consistent() || !args.fix {
        return Ok(code(&report));
    }
    if !args.force
        && let Err(refused) = report.check_deletions(engine.config.audit.max_delete_share)
    {
        metrics
            .fixes
            .with_label_values(&["refused"])
            .inc_by(report.fixes().len() as u64);
        eprintln!("error: {refused}");
        return Ok(COULD_NOT_RUN);
    }
    let fixes = report.fixes();
    let total = fixes.len() as u64;
    let mut outcomes = Vec::with_capacity(fixes.len());
    for event in fixes {
        outcomes.push(engine.feeder.send_event(SourceId::Audit, event).await?);
    }
    metrics.fixes.with_label_values(&["sent"]).inc_by(total);
    progress::follow("fixing", engine.all_finished.clone(), 0, total).await;
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
    casement_store::Store::sync(&engine.store)
        .await
        .context("making the repairs durable")?;
    let after = audit::audit(&engine.processor, truth).await?;
    metrics.record(&after);
    if !args.json {
        println!("after the fix:");
    }
    print(&after, args);
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
    } else {
        print!("{}", report.text(args.list));
        if !report.is_consistent() && !args.fix {
            let unfixable = report.unfixable();
            println!(
                "--fix would send {} repair events through the pipeline{}",
                report.fixes().len(),
                if unfixable > 0 {
                    format!(
                        "; {unfixable} findings have no repair from this source (ahead of it, or a listing without content)"
                    )
                } else {
                    String::new()
                }
            );
        }
    }
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
/// again each time), its figures as `casement_audit_*` on /metrics, one log line per run;
/// with `fix`, the repairs sent through the pipeline past the mass-deletion guard. Runs
/// until aborted.
pub async fn periodic(
    processor: std::sync::Arc<casement_pipeline::Processor<casement_store::AnyStore>>,
    feeder: crate::sources::Feeder,
    config: casement_pipeline::audit::AuditConfig,
    metrics: AuditMetrics,
) {
    let interval = std::time::Duration::from_secs(config.interval_secs);
    loop {
        let outcome = async {
            let truth = Truth::read(&config.source)?;
            let report = audit::audit(&processor, &truth).await?;
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
                let counts: Vec<String> = casement_pipeline::audit::Kind::ALL
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
    feeder: &crate::sources::Feeder,
    config: &casement_pipeline::audit::AuditConfig,
    metrics: &AuditMetrics,
) {
    let fixes = report.fixes();
    if let Err(refused) = report.check_deletions(config.max_delete_share) {
        metrics
            .fixes
            .with_label_values(&["refused"])
            .inc_by(fixes.len() as u64);
        tracing::error!(
            "audit: {refused} (`casement audit --fix --force` with the service stopped)"
        );
        return;
    }
    let total = fixes.len();
    let mut outcomes = Vec::with_capacity(total);
    for event in fixes {
        match feeder.send_event(SourceId::Audit, event).await {
            Ok(outcome) => outcomes.push(outcome),
            Err(error) => {
                tracing::warn!("audit: a repair was not sent: {error:#}");
                return;
            }
        }
        metrics.fixes.with_label_values(&["sent"]).inc();
    }
    // The next audit must not see the repairs half done (and send them again).
    let by_outcome = outcomes_of(outcomes).await;
    tracing::info!(
        events = total,
        outcomes = ?by_outcome,
        "audit: repairs applied through the pipeline"
    );
}

/// How the repairs ended, by outcome label (`applied`, `deleted`, `stale`,
/// `dead_lettered`), once each is durable.
async fn outcomes_of(
    outcomes: Vec<tokio::sync::oneshot::Receiver<casement_pipeline::Finished>>,
) -> std::collections::BTreeMap<&'static str, usize> {
    let mut by_outcome = std::collections::BTreeMap::new();
    for outcome in outcomes {
        let label = match outcome.await {
            Ok(finished) => finished.outcome.label(),
            Err(_) => "not finished",
        };
        *by_outcome.entry(label).or_default() += 1;
    }
    by_outcome
}
