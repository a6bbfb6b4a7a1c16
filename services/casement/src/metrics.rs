//! Metrics of the all-in-one's own parts (the local sources). They are served with the
//! indexer's and the query service's from one registry; every name is in `docs/metrics.md`.

use prometheus::{IntCounterVec, Opts, Registry};

use casement_pipeline::SourceId;

#[derive(Debug, Clone)]
pub struct LocalMetrics {
    pub webhook_requests: IntCounterVec,
    pub source_events: IntCounterVec,
    pub mediawiki: crate::sources::mediawiki::StreamMetrics,
}

impl LocalMetrics {
    #[allow(clippy::expect_used)] // Names are constants: a failure here is a programming error.
    pub fn new(registry: &Registry) -> Self {
        let webhook_requests = IntCounterVec::new(
            Opts::new(
                "casement_webhook_requests_total",
                "Requests to POST /v1/events by HTTP status code.",
            ),
            &["status"],
        )
        .expect("metric");
        let source_events = IntCounterVec::new(
            Opts::new(
                "casement_source_events_total",
                "Events handed to the pipeline by each local source.",
            ),
            &["source"],
        )
        .expect("metric");
        for source in SourceId::LOCAL {
            source_events.with_label_values(&[source.name()]);
        }
        registry
            .register(Box::new(webhook_requests.clone()))
            .expect("unique metric names");
        registry
            .register(Box::new(source_events.clone()))
            .expect("unique metric names");
        Self {
            webhook_requests,
            source_events,
            mediawiki: crate::sources::mediawiki::StreamMetrics::new(registry),
        }
    }
}
