//! The quality gate of a migration: the golden set on the serving index and on the new
//! one, side by side; the new one may be served when it is not worse by more than a margin.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use casement_inference::Embed;
use casement_query::eval::{Evaluator, GoldenSet, Report};
use casement_store::AnyStore;
use serde::Serialize;

use super::build::Opened;
use crate::config::CasementConfig;

/// The golden set's figures for both indexes, and whether the new one may be served.
#[derive(Debug, Clone, Serialize)]
pub struct Gate {
    pub golden: Option<PathBuf>,
    pub margin: f64,
    pub serving: Option<Figures>,
    pub new: Option<Figures>,
    pub passed: bool,
    /// Passed only because it was forced.
    pub forced: bool,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figures {
    pub k: usize,
    pub queries: usize,
    pub recall: f64,
    pub mrr: f64,
    pub failures: usize,
}

impl From<&Report> for Figures {
    fn from(report: &Report) -> Self {
        Self {
            k: report.k,
            queries: report.queries,
            recall: report.recall,
            mrr: report.mrr,
            failures: report.failures,
        }
    }
}

impl Gate {
    /// The side-by-side table.
    pub fn print(&self) {
        let (Some(golden), Some(old), Some(new)) = (&self.golden, self.serving, self.new) else {
            println!(
                "gate: no golden set ([eval] golden){}",
                if self.forced {
                    ": swapping without it (--force)"
                } else {
                    ": it cannot run; --force swaps without it"
                }
            );
            return;
        };
        println!(
            "gate ({}, {} queries, k = {}, margin {}):",
            golden.display(),
            old.queries,
            old.k,
            self.margin
        );
        println!("  {:<12} {:>8} {:>8}", "", "serving", "new");
        let recall = format!("recall@{}", old.k);
        println!("  {recall:<12} {:>8.3} {:>8.3}", old.recall, new.recall);
        let mrr = format!("MRR@{}", old.k);
        println!("  {mrr:<12} {:>8.3} {:>8.3}", old.mrr, new.mrr);
        println!(
            "  {:<12} {:>8} {:>8}",
            "failures", old.failures, new.failures
        );
        if self.forced {
            println!("  worse than the margin allows: swapping anyway (--force)");
        } else if !self.passed {
            println!("  the new index is worse than the margin allows");
        }
    }
}

/// The golden set of `config` (the sample's, on a data directory made by the sample).
pub fn golden_set(config: &CasementConfig) -> Option<PathBuf> {
    config.eval.golden().map(Path::to_path_buf).or_else(|| {
        let sample = crate::sample::golden_path(&config.data_dir);
        sample.exists().then_some(sample)
    })
}

/// Runs the golden set on the serving index and on the new one.
pub async fn gate(
    serving: (&CasementConfig, &AnyStore, &Arc<dyn Embed>),
    new: &Opened,
    margin: f64,
    force: bool,
) -> anyhow::Result<Gate> {
    let Some(golden) = golden_set(serving.0) else {
        return Ok(Gate {
            golden: None,
            margin,
            serving: None,
            new: None,
            passed: force,
            forced: force,
        });
    };
    let set = GoldenSet::load(&golden)?;
    let old = evaluate(serving.0, serving.1, serving.2, &golden, &set).await?;
    let fresh = evaluate(&new.config, &new.store, &new.model, &golden, &set).await?;
    let worse = fresh.recall < old.recall - margin || fresh.mrr < old.mrr - margin;
    Ok(Gate {
        golden: Some(golden),
        margin,
        serving: Some((&old).into()),
        new: Some((&fresh).into()),
        passed: !worse || force,
        forced: worse && force,
    })
}

async fn evaluate(
    config: &CasementConfig,
    store: &AnyStore,
    model: &Arc<dyn Embed>,
    golden: &Path,
    set: &GoldenSet,
) -> anyhow::Result<Report> {
    let mut query = config.query();
    query.eval.golden = golden.to_path_buf();
    let reranker = casement_query::service::load_reranker(&query).await?;
    let app = casement_query::service::app(
        query,
        store.clone(),
        model.clone(),
        reranker,
        casement_query::Metrics::new(),
    );
    let evaluator = Evaluator::new(&app, &prometheus::Registry::new())
        .context("the golden set is configured")?;
    Ok(evaluator.evaluate(set).await?)
}
