//! The pipeline's Prometheus metrics. Every name here is listed in `docs/metrics.md` (a
//! test scrapes `/metrics` and checks the two agree, label values included). Labelled
//! series are created up front from the enums of [`crate::outcome`], so dashboards and
//! alerts see zeros, and a label value the code never records cannot be registered.

use prometheus::core::Collector;
use prometheus::{
    Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};

use crate::outcome::{Decision, Outcome, Reason, RetryStage, Stage};

#[derive(Debug, Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub events: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub retries: IntCounterVec,
    pub freshness: HistogramVec,
    pub oldest_unapplied_age: Gauge,
    pub last_applied_age: Gauge,
    pub sentences: IntCounterVec,
    pub stage_duration: HistogramVec,
    pub embedding_batch: Histogram,
    pub embedding_duration: Histogram,
    pub enrichment_cache: IntCounterVec,
    pub llm_failures: IntCounter,
    pub consumer_lag: IntGaugeVec,
    pub partitions: IntGauge,
    pub in_flight: IntGauge,
    pub store_write: Histogram,
    pub flush_duration: Histogram,
    pub commit_group: Histogram,
    pub points: IntGauge,
    pub documents: IntGauge,
    pub disk: IntGaugeVec,
    pub disk_available: IntGauge,
    pub replaced: IntGauge,
    /// Deletes held by the mass-deletion guard, by source.
    pub deletes_held: IntGaugeVec,
    pub compactions: IntCounter,
    pub compaction_reclaimed: IntCounter,
    pub compaction_duration: Gauge,
    pub fetch: crate::fetch::FetchMetrics,
}

const LATENCY: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Freshness: the SLO's 250 ms, and a backlog's minutes.
const FRESHNESS: [f64; 16] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0,
];
const BATCH: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

/// Registers metrics in one registry; names are constants, so a failure is a programming
/// error (a duplicate name) and panics at start.
pub(crate) struct Registrar<'a>(pub(crate) &'a Registry);

#[allow(clippy::expect_used)]
impl Registrar<'_> {
    pub(crate) fn add<C: Collector + Clone + 'static>(
        &self,
        collector: prometheus::Result<C>,
    ) -> C {
        let collector = collector.expect("valid metric");
        self.0
            .register(Box::new(collector.clone()))
            .expect("unique metric names");
        collector
    }
    pub(crate) fn counters(
        &self,
        name: &str,
        help: &str,
        label: &str,
        values: &[&str],
    ) -> IntCounterVec {
        let vec = self.add(IntCounterVec::new(Opts::new(name, help), &[label]));
        for value in values {
            vec.with_label_values(&[value]);
        }
        vec
    }
    /// A histogram per value of `label`, every value's series created up front.
    pub(crate) fn histograms(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
        label: &str,
        values: &[&str],
    ) -> HistogramVec {
        let vec = self.add(HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
            &[label],
        ));
        for value in values {
            vec.with_label_values(&[value]);
        }
        vec
    }
    /// A gauge per value of `label`, every value's series created up front.
    pub(crate) fn gauges(
        &self,
        name: &str,
        help: &str,
        label: &str,
        values: &[&str],
    ) -> IntGaugeVec {
        let vec = self.add(IntGaugeVec::new(Opts::new(name, help), &[label]));
        for value in values {
            vec.with_label_values(&[value]);
        }
        vec
    }
    pub(crate) fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> Histogram {
        self.add(Histogram::with_opts(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        ))
    }
    pub(crate) fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help))
    }
    pub(crate) fn seconds(&self, name: &str, help: &str) -> Gauge {
        self.add(Gauge::new(name, help))
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self::with_registry(Registry::new())
    }

    /// The metrics, registered in `registry` (the all-in-one serves one registry for the
    /// pipeline's and the query service's metrics).
    pub fn with_registry(registry: Registry) -> Self {
        let r = Registrar(&registry);
        let stage_duration = r.histograms(
            "casement_indexer_stage_duration_seconds",
            "Time per event in each pipeline stage.",
            &LATENCY,
            "stage",
            &Stage::ALL.map(Stage::as_str),
        );
        Self {
            events: r.counters(
                "casement_indexer_events_total",
                "Events by outcome.",
                "outcome",
                &Outcome::LABELS,
            ),
            dead_letters: r.counters(
                "casement_indexer_dead_letters_total",
                "Events sent to the dead-letter sink, by reason.",
                "reason",
                &Reason::ALL.map(Reason::as_str),
            ),
            retries: r.counters(
                "casement_indexer_retries_total",
                "Transient failures retried with backoff, by stage.",
                "stage",
                &RetryStage::ALL.map(RetryStage::as_str),
            ),
            freshness: r.histograms(
                "casement_indexer_freshness_seconds",
                "Message timestamp (produce time) to durable write, live edits and bulk loads apart.",
                &FRESHNESS,
                "origin",
                &["live", "bulk"],
            ),
            oldest_unapplied_age: r.seconds(
                "casement_indexer_oldest_unapplied_age_seconds",
                "Age of the oldest event received and not yet finished (0: none).",
            ),
            last_applied_age: r.seconds(
                "casement_indexer_last_applied_age_seconds",
                "Time since the last event was applied (since start before the first).",
            ),
            sentences: r.counters(
                "casement_indexer_sentences_total",
                "Sentence decisions of applied events.",
                "decision",
                &Decision::ALL.map(Decision::as_str),
            ),
            stage_duration,
            embedding_batch: r.histogram(
                "casement_indexer_embedding_batch_sentences",
                "Sentences per embedding call.",
                &BATCH,
            ),
            embedding_duration: r.histogram(
                "casement_indexer_embedding_duration_seconds",
                "Duration of one embedding call.",
                &LATENCY,
            ),
            enrichment_cache: r.counters(
                "casement_indexer_enrichment_cache_total",
                "LLM enrichment lookups by outcome (hit: cache or index; miss: model call).",
                "outcome",
                &["hit", "miss"],
            ),
            llm_failures: r.add(IntCounter::new(
                "casement_indexer_enrichment_llm_failures_total",
                "LLM enrichment calls that failed (the structural preamble was used).",
            )),
            consumer_lag: r.add(IntGaugeVec::new(
                Opts::new(
                    "casement_indexer_consumer_lag_messages",
                    "High watermark minus committed offset, per assigned partition.",
                ),
                &["partition"],
            )),
            partitions: r.gauge(
                "casement_indexer_partitions_assigned",
                "Partitions assigned to this consumer.",
            ),
            in_flight: r.gauge(
                "casement_indexer_in_flight_events",
                "Events received and not yet written or dead-lettered.",
            ),
            store_write: r.histogram(
                "casement_indexer_store_write_duration_seconds",
                "Duration of one event's write (its plan), before the group flush.",
                &LATENCY,
            ),
            flush_duration: r.histogram(
                "casement_indexer_store_flush_duration_seconds",
                "Duration of one flush of the store (group commit).",
                &LATENCY,
            ),
            commit_group: r.histogram(
                "casement_indexer_commit_group_events",
                "Written events made durable by one flush (group commit).",
                &BATCH,
            ),
            points: r.gauge("casement_index_points", "Sentence points in the index."),
            documents: r.gauge(
                "casement_index_documents",
                "Documents in the index (tombstones excluded).",
            ),
            disk: r.gauges(
                "casement_index_disk_bytes",
                "Bytes on disk of the embedded index, by part.",
                "part",
                &["segments", "wal"],
            ),
            disk_available: r.gauge(
                "casement_index_disk_available_bytes",
                "Bytes available on the embedded index's file system.",
            ),
            replaced: r.gauge(
                "casement_index_replaced",
                "1 while the collection alias names a collection of other settings than this process's (restart it with them).",
            ),
            deletes_held: r.gauges(
                "casement_source_deletes_held",
                "Deletes held by the mass-deletion guard (more than sources.max_delete_share of the live documents within sources.delete_window_secs), by source, until an operator releases them.",
                "source",
                &["kafka", "replay", "watch", "webhook", "mediawiki"],
            ),
            compactions: r.add(IntCounter::new(
                "casement_index_compactions_total",
                "Compactions of the embedded index's write-ahead log (at open included).",
            )),
            compaction_reclaimed: r.add(IntCounter::new(
                "casement_index_compaction_reclaimed_bytes_total",
                "Bytes of write-ahead log given back by compactions.",
            )),
            compaction_duration: r.seconds(
                "casement_index_last_compaction_duration_seconds",
                "How long the last compaction held writes (and searches, for the reopen).",
            ),
            fetch: crate::fetch::FetchMetrics {
                revisions: r.counters(
                    "casement_indexer_fetches_total",
                    "Revisions fetched from the wiki, by outcome.",
                    "outcome",
                    &["fetched", "gone", "unsupported", "failed"],
                ),
                requests: r.counters(
                    "casement_indexer_fetch_requests_total",
                    "Requests to the wiki's API, by outcome.",
                    "outcome",
                    &["ok", "throttled", "failed"],
                ),
                duration: r.histogram(
                    "casement_indexer_fetch_duration_seconds",
                    "Duration of one request to the wiki's API.",
                    &LATENCY,
                ),
                batch: r.histogram(
                    "casement_indexer_fetch_batch_revisions",
                    "Revisions asked per request to the wiki's API.",
                    &BATCH,
                ),
            },
            registry,
        }
    }

    pub fn stage(&self, stage: Stage, elapsed: std::time::Duration) {
        self.stage_duration
            .with_label_values(&[stage.as_str()])
            .observe(elapsed.as_secs_f64());
    }

    pub fn retry(&self, stage: RetryStage) {
        self.retries.with_label_values(&[stage.as_str()]).inc();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
