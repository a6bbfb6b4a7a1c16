//! `casement_audit_*`: the last audit's findings, registered only where audits run.

use prometheus::{Gauge, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use super::{Kind, Report};
use crate::metrics::Registrar;

/// How an audit ended (`outcome` of `casement_audit_runs_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    Consistent,
    Inconsistent,
    /// It could not finish (an unreadable source, a store error).
    Error,
}

impl RunOutcome {
    pub const ALL: [Self; 3] = [Self::Consistent, Self::Inconsistent, Self::Error];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Consistent => "consistent",
            Self::Inconsistent => "inconsistent",
            Self::Error => "error",
        }
    }
}

/// What became of a repair (`outcome` of `casement_audit_fixes_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixOutcome {
    /// Sent through the pipeline.
    Sent,
    /// Held back by the mass-deletion guard.
    Refused,
}

impl FixOutcome {
    pub const ALL: [Self; 2] = [Self::Sent, Self::Refused];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Refused => "refused",
        }
    }
}

#[derive(Debug, Clone)]
pub struct AuditMetrics {
    findings: IntGaugeVec,
    source_documents: IntGauge,
    indexed_documents: IntGauge,
    last_run: Gauge,
    duration: Gauge,
    runs: IntCounterVec,
    fixes: IntCounterVec,
}

impl AuditMetrics {
    pub fn new(registry: &Registry) -> Self {
        let r = Registrar(registry);
        Self {
            findings: r.gauges(
                "casement_audit_documents",
                "Last audit: documents found wrong, by finding.",
                "finding",
                &Kind::ALL.map(Kind::as_str),
            ),
            source_documents: r.gauge(
                "casement_audit_source_documents",
                "Last audit: documents the source of truth lists.",
            ),
            indexed_documents: r.gauge(
                "casement_audit_indexed_documents",
                "Last audit: live documents in the index.",
            ),
            last_run: r.seconds(
                "casement_audit_last_run_timestamp_seconds",
                "Unix time the last audit finished (0: none yet).",
            ),
            duration: r.seconds(
                "casement_audit_last_run_duration_seconds",
                "How long the last audit took.",
            ),
            runs: r.counters(
                "casement_audit_runs_total",
                "Audits by outcome.",
                "outcome",
                &RunOutcome::ALL.map(RunOutcome::as_str),
            ),
            fixes: r.counters(
                "casement_audit_fixes_total",
                "Repair events an audit sent through the pipeline, or held back by the mass-deletion guard.",
                "outcome",
                &FixOutcome::ALL.map(FixOutcome::as_str),
            ),
        }
    }

    /// A finished audit: its figures, and one run counted.
    pub fn record(&self, report: &Report) {
        for kind in Kind::ALL {
            self.findings
                .with_label_values(&[kind.as_str()])
                .set(report.count(kind) as i64);
        }
        self.source_documents.set(report.source_documents as i64);
        self.indexed_documents.set(report.indexed_documents as i64);
        self.duration.set(report.seconds);
        self.last_run.set(crate::now_ms() as f64 / 1000.0);
        let outcome = if report.is_consistent() {
            RunOutcome::Consistent
        } else {
            RunOutcome::Inconsistent
        };
        self.runs.with_label_values(&[outcome.as_str()]).inc();
    }

    /// An audit that could not finish: counted, the figures left as they were.
    pub fn failed(&self) {
        self.runs
            .with_label_values(&[RunOutcome::Error.as_str()])
            .inc();
    }

    pub fn fixes(&self, outcome: FixOutcome, count: usize) {
        self.fixes
            .with_label_values(&[outcome.as_str()])
            .inc_by(count as u64);
    }
}
