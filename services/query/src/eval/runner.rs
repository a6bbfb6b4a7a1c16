//! The golden set run in-process: each query through the service's own [`Searcher`] (the
//! search a bot's `POST /v1/search` gets, with the configured defaults), scored, and the
//! figures exported as `casement_eval_*` gauges. The file is read again at every run, so
//! cases added to it count from the next run without a restart.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use casement_store::Store;

use super::golden::GoldenSet;
use super::score::{Report, judge};
use super::{Error, Result};
use crate::api::{SearchRequest, SearchResponse, ValidSearch};
use crate::config::{EvalConfig, QueryConfig};
use crate::error::ApiError;
use crate::http::App;
use crate::metrics::{EvalMetrics, EvalOutcome, Metrics};
use crate::search::Searcher;

#[derive(Debug)]
pub struct Evaluator<S> {
    /// The service's searcher, counting into a registry of its own: golden queries are not
    /// user traffic and stay out of the latency and merge panels.
    searcher: Searcher<S>,
    query: QueryConfig,
    metrics: EvalMetrics,
}

impl<S: Store + Clone + 'static> Evaluator<S> {
    /// An evaluator over `app`'s index with `app`'s settings and `[eval]`; its metrics go
    /// to `registry`. None when no golden set is configured.
    pub fn new(app: &App<S>, registry: &prometheus::Registry) -> Option<Self> {
        app.config.eval.golden()?;
        Some(Self {
            searcher: app.searcher.with_metrics(Metrics::new()),
            query: app.config.clone(),
            metrics: EvalMetrics::register(registry),
        })
    }

    fn config(&self) -> &EvalConfig {
        &self.query.eval
    }

    /// Reads the golden set and runs it once, updating the metrics.
    pub async fn run(&self) -> Result<Report> {
        let started = Instant::now();
        let report = match self.golden() {
            Ok(set) => self.evaluate(&set).await,
            Err(error) => Err(error),
        };
        let outcome = match &report {
            Ok(report) if report.failures == 0 => EvalOutcome::Passed,
            Ok(_) => EvalOutcome::Failed,
            Err(_) => EvalOutcome::Error,
        };
        self.metrics.runs.with_label_values(&[outcome.name()]).inc();
        self.metrics
            .duration
            .observe(started.elapsed().as_secs_f64());
        if let Ok(report) = &report {
            self.metrics.recall.set(report.recall);
            self.metrics.mrr.set(report.mrr);
            self.metrics.queries.set(report.queries as i64);
            self.metrics.failures.set(report.failures as i64);
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.metrics.last_run.set(now);
        }
        report
    }

    fn golden(&self) -> Result<GoldenSet> {
        GoldenSet::load(&self.config().golden)
    }

    /// Runs every case of `set` through the searcher and scores the answers.
    pub async fn evaluate(&self, set: &GoldenSet) -> Result<Report> {
        let k = self.config().k;
        let mut results = Vec::with_capacity(set.cases.len());
        for case in &set.cases {
            let request = SearchRequest {
                query: case.case.query.clone(),
                top_k: Some(k),
                tenant: case.case.tenant.clone(),
                ..SearchRequest::default()
            };
            let answer = match request.validate(
                &self.query.limits,
                &self.searcher.search_config(&self.query.search),
                self.query.rerank.by_default,
                &self.query.store.indexed_metadata,
            ) {
                Ok(mut valid) => {
                    valid.reader = self
                        .query
                        .eval
                        .groups
                        .as_ref()
                        .map_or(casement_text::Reader::Operator, |groups| {
                            casement_text::Reader::groups(groups.iter().cloned())
                        });
                    self.search(valid).await
                }
                Err(error) => Err(error),
            };
            match answer {
                Ok(answer) => results.push(judge(case, &answer.windows, k)),
                Err(source) => {
                    return Err(Error::Search {
                        case: case.name(),
                        source,
                    });
                }
            }
        }
        Ok(Report::new(k, results))
    }

    /// The search, boxed as a `Send` future: spawning the run loop otherwise hits the
    /// compiler's higher-ranked `Send` limitation (rust-lang/rust#100013) on the nested
    /// search futures.
    fn search(
        &self,
        request: ValidSearch,
    ) -> Pin<Box<dyn Future<Output = std::result::Result<SearchResponse, ApiError>> + Send + '_>>
    {
        Box::pin(self.searcher.search(request))
    }

    /// Runs the golden set now (logging the result), then every interval: the standalone
    /// query service's schedule, whose index is already built when it starts.
    pub async fn now_and_every_interval(self: Arc<Self>) {
        let first = self.run().await;
        match &first {
            Ok(report) if report.failures == 0 => {
                tracing::info!("golden set: {}", report.summary());
            }
            Ok(report) => {
                tracing::warn!(failing = ?report.failed_names(), "golden set: {}", report.summary());
            }
            Err(error) => tracing::warn!(%error, "golden set run did not finish"),
        }
        self.every_interval(first.ok().as_ref()).await;
    }

    /// Runs the golden set every `eval.interval_secs`, the first run one interval from now,
    /// until the task is dropped. A run whose failing cases differ from the previous run's
    /// (`previous`: the run before this schedule, already reported) is logged as a warning
    /// (passing again at info), one that does not finish too; others at debug.
    pub fn every_interval(
        self: Arc<Self>,
        previous: Option<&Report>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let failing = previous.map(Report::failed_names);
        self.run_every_interval(failing)
    }

    async fn run_every_interval(self: Arc<Self>, mut failing: Option<Vec<String>>) {
        let mut ticks = tokio::time::interval_at(
            tokio::time::Instant::now() + self.config().interval(),
            self.config().interval(),
        );
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            match self.run().await {
                Ok(report) => {
                    let now = report.failed_names();
                    if failing.as_ref() != Some(&now) && !now.is_empty() {
                        tracing::warn!(failing = ?now, "golden set: {}", report.summary());
                    } else if failing.as_ref().is_some_and(|f| !f.is_empty()) && now.is_empty() {
                        tracing::info!("golden set passes again: {}", report.summary());
                    } else {
                        tracing::debug!("golden set: {}", report.summary());
                    }
                    failing = Some(now);
                }
                Err(error) => tracing::warn!(%error, "golden set run did not finish"),
            }
        }
    }
}
