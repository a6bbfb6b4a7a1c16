//! Quality as a live signal: a golden set of queries ([`golden`]), each with the document
//! (and optionally the text) a good answer must contain, scored as recall@k and MRR@k
//! ([`score`]) against the live index, in-process and periodically ([`runner`], exported as
//! `casement_eval_*` metrics), or over HTTP against any running service (`casement eval`,
//! which uses the same scoring).

pub mod golden;
pub mod runner;
pub mod score;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use golden::{GoldenCase, GoldenSet, NumberedCase};
pub use runner::Evaluator;
pub use score::{CaseResult, Report, judge};

use crate::error::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("golden set {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("golden set {}, line {line}: {reason}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("golden set {}: no cases (one JSON object per line: query, doc_id, optional text, tenant, id)", path.display())]
    Empty { path: PathBuf },
    #[error("golden set, case {case}: the search failed: {source}")]
    Search { case: String, source: ApiError },
}

pub type Result<T> = std::result::Result<T, Error>;

/// The golden set of `config`, read and checked (at start: a missing or malformed file
/// fails there, with its path and line); None when evaluation is off.
pub fn check(config: &crate::config::EvalConfig) -> Result<Option<GoldenSet>> {
    config.golden().map(GoldenSet::load).transpose()
}
