//! The query service's Prometheus metrics. Every name here is listed in `docs/metrics.md`
//! (a test scrapes `/metrics` and checks the two agree).

use prometheus::{Gauge, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

/// Search stages (`stage` label).
pub const STAGES: [&str; 7] = [
    "wait", "embed", "search", "expand", "merge", "rerank", "select",
];
/// Merge decisions (`decision` label): returned, absorbed into an overlapping window,
/// dropped as contained in a better one, cut by the token budget, narrowed around its best
/// match to fit the token budget (also counted as kept).
pub const DECISIONS: [&str; 5] = ["kept", "merged", "dropped", "truncated", "narrowed"];

/// How a golden-set run ended (`outcome` label of `casement_eval_runs_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalOutcome {
    /// Every case passed.
    Passed,
    /// Some case failed.
    Failed,
    /// The run could not finish (the golden file unreadable, a search failed); the gauges
    /// keep the last finished run.
    Error,
}

impl EvalOutcome {
    pub const ALL: [Self; 3] = [Self::Passed, Self::Failed, Self::Error];

    pub fn name(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Error => "error",
        }
    }
}

const LATENCY: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.035, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 5.0,
];
const COUNTS: [f64; 9] = [0.0, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0];
const TOKENS: [f64; 9] = [
    0.0, 100.0, 250.0, 500.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0,
];

#[derive(Debug, Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub requests: IntCounterVec,
    pub request_duration: HistogramVec,
    pub stage_duration: HistogramVec,
    pub merge_decisions: IntCounterVec,
    pub windows_returned: prometheus::Histogram,
    pub tokens_returned: prometheus::Histogram,
    pub rerank_candidates: prometheus::Histogram,
    pub search_rounds: prometheus::Histogram,
    pub embedding_cache: IntCounterVec,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self::with_registry(Registry::new())
    }

    /// The metrics, registered in `registry` (the all-in-one serves one registry for the
    /// indexer's and the query service's metrics).
    #[allow(clippy::expect_used)] // Names are constants: a failure here is a programming error.
    pub fn with_registry(registry: Registry) -> Self {
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            prometheus::Histogram::with_opts(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
            )
            .expect("metric")
        };
        let requests = IntCounterVec::new(
            Opts::new(
                "casement_query_requests_total",
                "HTTP requests by route and status code.",
            ),
            &["route", "status"],
        )
        .expect("metric");
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "casement_query_request_duration_seconds",
                "Whole-request duration by route and status class (2xx, 4xx, 5xx).",
            )
            .buckets(LATENCY.to_vec()),
            &["route", "status_class"],
        )
        .expect("metric");
        // The search route's series exist from the first scrape (the SLO panels and alerts
        // read them).
        for class in ["2xx", "4xx", "5xx"] {
            request_duration.with_label_values(&["/v1/search", class]);
        }
        let stage_duration = HistogramVec::new(
            HistogramOpts::new(
                "casement_query_stage_duration_seconds",
                "Search duration by stage (wait for min_revision, embed, search, expand, merge, rerank, select).",
            )
            .buckets(LATENCY.to_vec()),
            &["stage"],
        )
        .expect("metric");
        let merge_decisions = IntCounterVec::new(
            Opts::new(
                "casement_query_merge_decisions_total",
                "Windows by merge decision (kept, merged, dropped, truncated, narrowed).",
            ),
            &["decision"],
        )
        .expect("metric");
        let windows_returned = histogram(
            "casement_query_returned_windows",
            "Windows returned per search.",
            &COUNTS,
        );
        let tokens_returned = histogram(
            "casement_query_returned_tokens",
            "Estimated tokens returned per search (all windows).",
            &TOKENS,
        );
        let rerank_candidates = histogram(
            "casement_query_rerank_candidates",
            "Windows scored by the reranker per reranked search.",
            &COUNTS,
        );
        let search_rounds = histogram(
            "casement_query_search_rounds",
            "Store searches per search: more than one when merging left fewer than top_k windows and the search was run again for more hits.",
            &COUNTS,
        );
        let embedding_cache = IntCounterVec::new(
            Opts::new(
                "casement_query_embedding_cache_total",
                "Query embeddings by cache outcome (hit: the query was embedded recently; miss: the model ran).",
            ),
            &["outcome"],
        )
        .expect("metric");
        for collector in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(request_duration.clone()),
            Box::new(stage_duration.clone()),
            Box::new(merge_decisions.clone()),
            Box::new(windows_returned.clone()),
            Box::new(tokens_returned.clone()),
            Box::new(rerank_candidates.clone()),
            Box::new(search_rounds.clone()),
            Box::new(embedding_cache.clone()),
        ] {
            registry.register(collector).expect("register metric");
        }
        for stage in STAGES {
            stage_duration.with_label_values(&[stage]);
        }
        for decision in DECISIONS {
            merge_decisions.with_label_values(&[decision]);
        }
        for outcome in ["hit", "miss"] {
            embedding_cache.with_label_values(&[outcome]);
        }
        Self {
            registry,
            requests,
            request_duration,
            stage_duration,
            merge_decisions,
            windows_returned,
            tokens_returned,
            rerank_candidates,
            search_rounds,
            embedding_cache,
        }
    }
}

/// The golden set's metrics (`crate::eval`), registered only when `eval.golden` is set: a
/// service that evaluates nothing serves none of them. The gauges hold the last finished
/// run (0 before the first; `casement_eval_last_run_timestamp_seconds` is 0 then).
#[derive(Debug, Clone)]
pub struct EvalMetrics {
    pub recall: Gauge,
    pub mrr: Gauge,
    pub queries: IntGauge,
    pub failures: IntGauge,
    pub last_run: Gauge,
    pub runs: IntCounterVec,
    pub duration: prometheus::Histogram,
}

const EVAL_DURATION: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

impl EvalMetrics {
    #[allow(clippy::expect_used)] // Names are constants: a failure here is a programming error.
    pub fn register(registry: &Registry) -> Self {
        let gauge = |name: &str, help: &str| Gauge::new(name, help).expect("metric");
        let int_gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("metric");
        let recall = gauge(
            "casement_eval_recall",
            "Golden set, last run: share of queries whose document (and text) is in the first eval.k windows.",
        );
        let mrr = gauge(
            "casement_eval_mrr",
            "Golden set, last run: mean reciprocal rank within eval.k (0 for a failing query).",
        );
        let queries = int_gauge(
            "casement_eval_queries",
            "Golden set, last run: queries evaluated.",
        );
        let failures = int_gauge(
            "casement_eval_failures",
            "Golden set, last run: queries that failed.",
        );
        let last_run = gauge(
            "casement_eval_last_run_timestamp_seconds",
            "Unix time the last golden-set run finished (0: none yet).",
        );
        let runs = IntCounterVec::new(
            Opts::new(
                "casement_eval_runs_total",
                "Golden-set runs by outcome (passed, failed, error).",
            ),
            &["outcome"],
        )
        .expect("metric");
        let duration = prometheus::Histogram::with_opts(
            HistogramOpts::new(
                "casement_eval_duration_seconds",
                "Duration of one golden-set run.",
            )
            .buckets(EVAL_DURATION.to_vec()),
        )
        .expect("metric");
        for collector in [
            Box::new(recall.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(mrr.clone()),
            Box::new(queries.clone()),
            Box::new(failures.clone()),
            Box::new(last_run.clone()),
            Box::new(runs.clone()),
            Box::new(duration.clone()),
        ] {
            registry.register(collector).expect("register metric");
        }
        for outcome in EvalOutcome::ALL {
            runs.with_label_values(&[outcome.name()]);
        }
        Self {
            recall,
            mrr,
            queries,
            failures,
            last_run,
            runs,
            duration,
        }
    }
}
