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
    let dead_before = engine.events("dead_lettered");
    for event in fixes {
        engine.feeder.send_event(SourceId::Audit, event).await?;
    }
    metrics.fixes.with_label_values(&["sent"]).inc_by(total);
    progress::follow("fixing", engine.all_finished.clone(), 0, total).await;
    let dead = engine.events("dead_lettered") - dead_before;
    eprintln!(
        "fix: {total} repair events applied through the pipeline ({} applied, {} deleted, {} stale, {dead} dead-lettered{})",
        engine.events("applied"),
        engine.events("deleted"),
        engine.events("stale"),
        if dead > 0 {
            format!(", see {}", engine.dead_letters.path().display())
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
