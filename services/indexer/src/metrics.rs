//! The indexer's Prometheus metrics. Every name here is listed in `docs/metrics.md` (a
//! test scrapes `/metrics` and checks the two agree).

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// Event outcomes (`outcome` label).
pub const OUTCOMES: [&str; 4] = ["applied", "stale", "deleted", "dead_lettered"];
/// Sentence decisions (`decision` label).
pub const DECISIONS: [&str; 5] = [
    "embedded",
    "reused",
    "payload_updated",
    "deleted",
    "unchanged",
];
/// Pipeline stages (`stage` label) of the stage-duration histogram.
pub const STAGES: [&str; 7] = [
    "decode", "fence", "read", "plan", "enrich", "embed", "write",
];

#[derive(Debug, Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub events: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub retries: IntCounterVec,
    pub freshness: prometheus::Histogram,
    pub sentences: IntCounterVec,
    pub stage_duration: HistogramVec,
    pub embedding_batch: prometheus::Histogram,
    pub embedding_duration: prometheus::Histogram,
    pub enrichment_cache: IntCounterVec,
    pub llm_failures: IntCounter,
    pub consumer_lag: IntGaugeVec,
    pub partitions: IntGauge,
    pub in_flight: IntGauge,
    pub store_write: prometheus::Histogram,
    pub points: IntGauge,
    pub documents: IntGauge,
}

fn seconds(name: &str, help: &str, buckets: Vec<f64>) -> HistogramOpts {
    HistogramOpts::new(name, help).buckets(buckets)
}

const LATENCY: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

impl Metrics {
    pub fn new() -> Self {
        Self::with_registry(Registry::new())
    }

    /// The metrics, registered in `registry` (the all-in-one serves one registry for the
    /// indexer's and the query service's metrics).
    #[allow(clippy::expect_used)] // Names are constants: a failure here is a programming error.
    pub fn with_registry(registry: Registry) -> Self {
        let latency = LATENCY.to_vec();
        let events = IntCounterVec::new(
            Opts::new("casement_indexer_events_total", "Events by outcome."),
            &["outcome"],
        )
        .expect("metric");
        let dead_letters = IntCounterVec::new(
            Opts::new(
                "casement_indexer_dead_letters_total",
                "Events sent to the dead-letter topic, by reason.",
            ),
            &["reason"],
        )
        .expect("metric");
        let retries = IntCounterVec::new(
            Opts::new(
                "casement_indexer_retries_total",
                "Transient failures retried with backoff, by stage.",
            ),
            &["stage"],
        )
        .expect("metric");
        let freshness = prometheus::Histogram::with_opts(seconds(
            "casement_indexer_freshness_seconds",
            "Message timestamp (produce time) to durable write.",
            latency.clone(),
        ))
        .expect("metric");
        let sentences = IntCounterVec::new(
            Opts::new(
                "casement_indexer_sentences_total",
                "Sentence decisions of applied events.",
            ),
            &["decision"],
        )
        .expect("metric");
        let stage_duration = HistogramVec::new(
            seconds(
                "casement_indexer_stage_duration_seconds",
                "Time per event in each pipeline stage.",
                latency.clone(),
            ),
            &["stage"],
        )
        .expect("metric");
        let embedding_batch = prometheus::Histogram::with_opts(
            HistogramOpts::new(
                "casement_indexer_embedding_batch_sentences",
                "Sentences per embedding call.",
            )
            .buckets(vec![
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0,
            ]),
        )
        .expect("metric");
        let embedding_duration = prometheus::Histogram::with_opts(seconds(
            "casement_indexer_embedding_duration_seconds",
            "Duration of one embedding call.",
            latency.clone(),
        ))
        .expect("metric");
        let enrichment_cache = IntCounterVec::new(
            Opts::new(
                "casement_indexer_enrichment_cache_total",
                "LLM enrichment lookups by outcome (hit: cache or index; miss: model call).",
            ),
            &["outcome"],
        )
        .expect("metric");
        let llm_failures = IntCounter::new(
            "casement_indexer_enrichment_llm_failures_total",
            "LLM enrichment calls that failed (the structural preamble was used).",
        )
        .expect("metric");
        let consumer_lag = IntGaugeVec::new(
            Opts::new(
                "casement_indexer_consumer_lag_messages",
                "High watermark minus committed offset, per assigned partition.",
            ),
            &["partition"],
        )
        .expect("metric");
        let partitions = IntGauge::new(
            "casement_indexer_partitions_assigned",
            "Partitions assigned to this consumer.",
        )
        .expect("metric");
        let in_flight = IntGauge::new(
            "casement_indexer_in_flight_events",
            "Events received and not yet written or dead-lettered.",
        )
        .expect("metric");
        let store_write = prometheus::Histogram::with_opts(seconds(
            "casement_indexer_store_write_duration_seconds",
            "Duration of one durable write (one event's plan).",
            latency,
        ))
        .expect("metric");
        let points = IntGauge::new(
            "casement_index_points",
            "Points in the index (sentences and document states).",
        )
        .expect("metric");
        let documents = IntGauge::new(
            "casement_index_documents",
            "Documents in the index (tombstones excluded).",
        )
        .expect("metric");
        let metrics = Self {
            registry,
            events,
            dead_letters,
            retries,
            freshness,
            sentences,
            stage_duration,
            embedding_batch,
            embedding_duration,
            enrichment_cache,
            llm_failures,
            consumer_lag,
            partitions,
            in_flight,
            store_write,
            points,
            documents,
        };
        metrics.register_all();
        // Labelled series exist from the start, so dashboards and alerts see zeros.
        for outcome in OUTCOMES {
            metrics.events.with_label_values(&[outcome]);
        }
        for decision in DECISIONS {
            metrics.sentences.with_label_values(&[decision]);
        }
        for stage in STAGES {
            metrics.stage_duration.with_label_values(&[stage]);
        }
        for reason in casement_events::REASONS.iter().chain(&["text", "store"]) {
            metrics.dead_letters.with_label_values(&[reason]);
        }
        for stage in ["embed", "write", "dead_letter"] {
            metrics.retries.with_label_values(&[stage]);
        }
        for outcome in ["hit", "miss"] {
            metrics.enrichment_cache.with_label_values(&[outcome]);
        }
        metrics
    }

    #[allow(clippy::expect_used)]
    fn register_all(&self) {
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(self.events.clone()),
            Box::new(self.dead_letters.clone()),
            Box::new(self.retries.clone()),
            Box::new(self.freshness.clone()),
            Box::new(self.sentences.clone()),
            Box::new(self.stage_duration.clone()),
            Box::new(self.embedding_batch.clone()),
            Box::new(self.embedding_duration.clone()),
            Box::new(self.enrichment_cache.clone()),
            Box::new(self.llm_failures.clone()),
            Box::new(self.consumer_lag.clone()),
            Box::new(self.partitions.clone()),
            Box::new(self.in_flight.clone()),
            Box::new(self.store_write.clone()),
            Box::new(self.points.clone()),
            Box::new(self.documents.clone()),
        ];
        for collector in collectors {
            self.registry
                .register(collector)
                .expect("unique metric names");
        }
    }

    pub fn stage(&self, stage: &str, elapsed: std::time::Duration) {
        self.stage_duration
            .with_label_values(&[stage])
            .observe(elapsed.as_secs_f64());
    }

    /// The text exposition format served at `/metrics`.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::error!(%error, "encoding metrics");
        }
        String::from_utf8_lossy(&buffer).into_owned()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
