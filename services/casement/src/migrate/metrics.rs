//! `casement_migration*` (docs/metrics.md): what the running service's migrations did.

/// `casement_migration*` (docs/metrics.md), on the all-in-one's registry.
#[derive(Debug, Clone)]
pub struct MigrationMetrics {
    pub(super) runs: prometheus::IntCounterVec,
    pub(super) documents: prometheus::IntCounter,
    pub(super) sentences: prometheus::IntCounter,
    pub(super) in_progress: prometheus::IntGauge,
    pub(super) pause: prometheus::Gauge,
}

/// Outcomes of `casement_migrations_total`.
pub const OUTCOMES: [&str; 4] = ["swapped", "refused", "rolled_back", "failed"];

impl MigrationMetrics {
    #[allow(clippy::expect_used)] // Names are constants: a failure here is a programming error.
    pub fn new(registry: &prometheus::Registry) -> Self {
        let runs = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "casement_migrations_total",
                "Migrations and rollbacks of the served index, by outcome.",
            ),
            &["outcome"],
        )
        .expect("metric");
        for outcome in OUTCOMES {
            runs.with_label_values(&[outcome]);
        }
        let documents = prometheus::IntCounter::new(
            "casement_migration_documents_copied_total",
            "Documents copied into a new index by migrations and rollbacks.",
        )
        .expect("metric");
        let sentences = prometheus::IntCounter::new(
            "casement_migration_sentences_embedded_total",
            "Sentences embedded with the new model by migrations and rollbacks.",
        )
        .expect("metric");
        let in_progress = prometheus::IntGauge::new(
            "casement_migration_in_progress",
            "1 while a migration or rollback runs.",
        )
        .expect("metric");
        let pause = prometheus::Gauge::new(
            "casement_migration_last_pause_seconds",
            "How long the last swap held the pipeline (searches never wait).",
        )
        .expect("metric");
        for metric in [
            Box::new(runs.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(documents.clone()),
            Box::new(sentences.clone()),
            Box::new(in_progress.clone()),
            Box::new(pause.clone()),
        ] {
            registry.register(metric).expect("unique metric names");
        }
        Self {
            runs,
            documents,
            sentences,
            in_progress,
            pause,
        }
    }
}
