//! `[audit]`: the guard of `casement audit --fix`, and the audit `casement run` repeats.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[audit]`: the guard of `casement audit --fix`, and the audit `casement run` repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// The largest share of the index's live documents a fix may delete without
    /// `--force` (a truncated listing must not empty the index).
    pub max_delete_share: f64,
    /// A revision log or listing that `casement run` audits the index against, read
    /// again at every run (empty: no periodic audit).
    pub source: PathBuf,
    /// Seconds between the periodic audits (the first once the replay is indexed).
    pub interval_secs: u64,
    /// Send the periodic audit's repairs through the pipeline (past the guard), instead
    /// of only reporting them. Documents the source does not list are never deleted by
    /// the running service (it may hold documents of other sources or tenants, or newer
    /// than the source): `casement audit --fix` does that, past the same guard.
    pub fix: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            max_delete_share: 0.10,
            source: PathBuf::new(),
            interval_secs: 3600,
            fix: false,
        }
    }
}

impl AuditConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.max_delete_share) {
            return Err(format!(
                "audit.max_delete_share = {} must be between 0 and 1 (a share of the index's documents)",
                self.max_delete_share
            ));
        }
        if self.interval_secs == 0 {
            return Err("audit.interval_secs must be at least 1".into());
        }
        if self.fix && !self.enabled() {
            return Err("audit.fix needs audit.source".into());
        }
        Ok(())
    }

    /// A periodic audit is configured.
    pub fn enabled(&self) -> bool {
        !self.source.as_os_str().is_empty()
    }
}
