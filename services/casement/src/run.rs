//! `casement run`: the pipeline and the query API in one process. Replays the configured
//! revision logs (with a progress bar), then watches the configured folders and takes
//! webhook events, and serves searches over the same index until SIGTERM or Ctrl-C.
//! With no source configured it runs the bundled sample ([`crate::sample`]) and answers a
//! sample question. With a golden set (`[eval]`; the sample's own on the sample) it runs
//! it once the replay is indexed, shows the result in the banner, and again periodically.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use casement_pipeline::Decision;
use casement_pipeline::audit::AuditMetrics;
use casement_query::api::{SearchRequest, SearchResponse};
use casement_query::eval::{Evaluator, Report};
use casement_query::service::{app_with, load_reranker};
use tokio::sync::oneshot;

use crate::config::CasementConfig;
use crate::engine::Engine;
use crate::sources::journal::Journal;
use crate::sources::{Positions, mediawiki, replay, watch::Watcher};
use crate::webhook::{self, Webhook};
use crate::{progress, sample};

/// Resolves once `count` (changes found at start, not yet applied) is 0, saying what it
/// waits for meanwhile.
async fn wait_caught_up(count: &std::sync::atomic::AtomicUsize) {
    let mut said = Instant::now() - Duration::from_secs(10);
    loop {
        let left = count.load(std::sync::atomic::Ordering::SeqCst);
        if left == 0 {
            return;
        }
        if said.elapsed() >= Duration::from_secs(2) {
            eprintln!("catching up {left} changes found at start");
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Says at start what anyone who reaches the port can do without a key.
fn warn_what_is_open(config: &CasementConfig) {
    let admin = if config.auth.has_operator_key() {
        "on, with an operator key"
    } else {
        "off (no operator key configured)"
    };
    if config.auth.keys.is_empty() {
        let open = if config.sources.webhook.enabled {
            "search, read documents and post events (POST /v1/events)"
        } else {
            "search and read documents"
        };
        if config.listen.ip().is_loopback() {
            tracing::info!(listen = %config.listen,
                "no API keys configured ([[auth.keys]]): anyone on this machine can {open}; admin routes: {admin}");
        } else {
            tracing::warn!(listen = %config.listen,
                "no API keys configured ([[auth.keys]]) and listening beyond localhost: anyone who can reach it can {open}; admin routes: {admin}");
        }
    } else {
        tracing::info!(
            keys = config.auth.keys.len(),
            "API keys required; admin routes: {admin}"
        );
    }
}

pub async fn run(
    mut config: CasementConfig,
    source: crate::migrate::ConfigSource,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stop);
    let started = Instant::now();
    // Checked with the config too; again here with the address `--listen` gave.
    config
        .auth
        .check_open(config.listen)
        .map_err(anyhow::Error::msg)?;
    let sources = &config.sources;
    let sample_mode = sources.replay.paths.is_empty()
        && sources.watch.dirs.is_empty()
        && !sources.mediawiki.enabled();
    crate::snapshot::check_not_restoring(&config.data_dir)?;
    crate::engine::prepare_data_dir(&config.data_dir)?;
    if sample_mode {
        sample::prepare(&mut config)?;
    }
    // A missing or malformed golden set fails here, before the models load.
    casement_query::eval::check(&config.eval)?;
    // So does a watched folder that is not there: a typo or an unmounted volume would
    // otherwise look like every file deleted.
    crate::sources::watch::check_dirs(&config.sources.watch.dirs)?;
    if config.audit.enabled() {
        // An unreadable source fails here, not an hour later.
        casement_pipeline::audit::Truth::read(&config.audit.source)?;
    }
    let inputs = replay::read(&config.sources.replay.paths)?;
    let mut positions = Positions::load(&config.data_dir);
    if positions.replay_inputs != inputs.identity {
        positions = Positions {
            replay_inputs: inputs.identity.clone(),
            replay_next: 0,
        };
    }
    let start = usize::try_from(positions.replay_next)
        .unwrap_or(0)
        .min(inputs.events.len());
    eprintln!(
        "loading the models and opening {}",
        config.data_dir.display()
    );
    let engine = Engine::start(config.clone(), positions).await?;
    // A wiki that refuses to let this client read stops the start (the polled one is
    // asked by the poller's own start, below).
    let fetcher = engine.processor.current().fetcher().cloned();
    if !config.sources.mediawiki.polling()
        && let Some(fetcher) = &fetcher
    {
        fetcher.check_access().await.map_err(|denied| {
            anyhow::anyhow!("fetch.api_url = {:?}: {denied}", config.fetch.api_url)
        })?;
    }
    // Events answered 202 by an earlier run and not finished then: applied first.
    let (journal, accepted) = Journal::open(
        &config.data_dir,
        config.sources.webhook.journal_max_bytes,
        config.store.edge.min_free_bytes,
    )?;
    let journal = Arc::new(journal);
    let query_config = config.query();
    let reranker = load_reranker(&query_config).await?;
    let query_metrics = casement_query::Metrics::with_registry(engine.registry.clone());
    let openapi = webhook::openapi(&query_config, config.sources.webhook.enabled);
    let query_app = app_with(
        query_config,
        engine.store(),
        engine.model.clone(),
        reranker,
        query_metrics,
        openapi,
        engine.store_probe.clone(),
    );
    // Not ready until the start-up work is done: the replay, what an earlier run
    // accepted, and what changed in the watched folders while it was stopped (one more
    // until the watchers have counted theirs).
    query_app
        .catching_up
        .fetch_add(accepted.len() + 1, std::sync::atomic::Ordering::SeqCst);
    let journal_task = tokio::spawn(journal.clone().replay(
        engine.feeder.clone(),
        accepted,
        query_app.catching_up.clone(),
    ));
    let evaluator = Evaluator::new(&query_app, &engine.registry).map(Arc::new);
    // Migrations to another model, enrichment or radius, while serving.
    let mut routes = crate::migrate::http::router(crate::migrate::online::Online::new(
        source,
        config.clone(),
        engine.model.clone(),
        engine.processor.clone(),
        query_app.clone(),
        engine.pipeline_metrics.clone(),
        &engine.registry,
    ));
    // Releasing the deletes the mass-deletion guard holds.
    routes = routes.merge(crate::deletes::router(
        engine.guard.clone(),
        config.auth.clone(),
    ));
    if config.sources.webhook.enabled {
        routes = routes.merge(webhook::router(Arc::new(Webhook {
            feeder: engine.feeder.clone(),
            dead_letters: engine.dead_letters.clone(),
            journal: journal.clone(),
            auth: config.auth.clone(),
            max_event_bytes: config.events.max_event_bytes,
            decode: config.decode(),
            wait: Duration::from_millis(config.sources.webhook.wait_ms),
            metrics: engine.local_metrics.clone(),
            pipeline_metrics: engine.pipeline_metrics.clone(),
        })));
    }
    // One router, so the webhook and admin routes are observed like the rest (access log,
    // request id, request metrics).
    let router = casement_query::http::router_with(query_app.clone(), routes);
    warn_what_is_open(&config);
    let listener = casement_query::service::bind(config.listen).await?;
    let address = listener.local_addr()?;
    let (stop_http, http_stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = http_stopped.await;
            })
            .await
    });
    println!("API listening on http://{address} (searches work while indexing)");

    let total = (inputs.events.len() - start) as u64;
    let replay_task = tokio::spawn(replay::run(
        engine.feeder.clone(),
        inputs.events,
        start,
        (config.sources.replay.pace_ms > 0)
            .then(|| Duration::from_millis(config.sources.replay.pace_ms)),
    ));
    if total > 0 {
        let label = format!("replaying {} revision log(s)", inputs.files.len());
        tokio::select! {
            () = progress::follow(&label, engine.replay_finished.clone(), 0, total) => {}
            () = &mut stop => {
                eprintln!("stopping during the replay; it resumes where it stopped");
                replay_task.abort();
                journal_task.abort();
                return shutdown(engine, stop_http, server, Vec::new()).await;
            }
        }
    } else if !inputs.files.is_empty() {
        eprintln!("the replay finished in an earlier run; nothing to replay");
    }
    let mut watchers = Vec::new();
    if !config.sources.watch.dirs.is_empty() {
        let watcher = Watcher::new(config.watch(), &config.data_dir, engine.feeder.clone())
            .with_guard(engine.guard.clone())
            .with_readiness(query_app.catching_up.clone());
        watchers.push(tokio::spawn(watcher.run()));
    }
    // The watchers count their own catch-up from here.
    query_app
        .catching_up
        .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    if let Some(position) = &engine.stream_position
        && config.sources.mediawiki.polling()
    {
        let polled = &config.sources.mediawiki;
        let domain = polled.polled_domain().unwrap_or_default();
        // The pipeline's own fetcher: one login (one session) per wiki, not two.
        let fetcher = fetcher
            .clone()
            .context("sources.mediawiki.api_url needs the fetcher (fetch.api_url)")?;
        let source = mediawiki::poll::PollSource {
            config: polled.clone(),
            fetcher,
            domain,
            feeder: engine.feeder.clone(),
            position: position.clone(),
            metrics: engine.local_metrics.mediawiki.clone(),
            requests_per_second: config.fetch.requests_per_second,
        };
        // A wiki that refuses this client stops the start: every change would fail.
        let start = match mediawiki::poll::start(&source).await {
            Ok(start) => {
                println!(
                    "polling the recent changes of {} every {} ms, {} {}",
                    polled.api_url,
                    polled.poll_interval_ms,
                    if start.resumed {
                        "resuming after"
                    } else {
                        "from its newest change,"
                    },
                    start.after.text()
                );
                Some(start)
            }
            Err(casement_pipeline::QueryError::Denied(denied)) => {
                anyhow::bail!("sources.mediawiki.api_url = {:?}: {denied}", polled.api_url)
            }
            Err(error) => {
                eprintln!(
                    "cannot ask the wiki {} yet ({error}); polling when it answers",
                    polled.api_url
                );
                None
            }
        };
        watchers.push(tokio::spawn(mediawiki::poll::run(source, start)));
    } else if let Some(position) = &engine.stream_position {
        println!(
            "following the MediaWiki stream {}",
            config.sources.mediawiki.stream_url
        );
        watchers.push(tokio::spawn(mediawiki::run(mediawiki::StreamSource {
            config: config.sources.mediawiki.clone(),
            user_agent: config.fetch.user_agent.clone(),
            feeder: engine.feeder.clone(),
            position: position.clone(),
            metrics: engine.local_metrics.mediawiki.clone(),
            dead_letters: engine.dead_letters.clone(),
            pipeline_metrics: engine.pipeline_metrics.clone(),
            max_event_bytes: config.events.max_event_bytes,
        })));
    }
    // Ready means caught up: what an earlier run accepted and what changed in the watched
    // folders while it was stopped are applied before the banner (and `/readyz`) say so.
    tokio::select! {
        () = wait_caught_up(&query_app.catching_up) => {}
        () = &mut stop => {
            eprintln!("stopping while catching up; the rest is found again at the next start");
            replay_task.abort();
            journal_task.abort();
            return shutdown(engine, stop_http, server, watchers).await;
        }
    }
    // The audit against its source, from now on (the replay is indexed).
    let auditing = config.audit.enabled().then(|| {
        tokio::spawn(crate::audit::periodic(
            engine.processor.clone(),
            engine.feeder.clone(),
            config.audit.clone(),
            AuditMetrics::new(&engine.registry),
        ))
    });
    // The golden set once over what was just indexed (for the banner), then periodically.
    let evaluation = match &evaluator {
        Some(evaluator) => {
            let first = evaluator.run().await;
            let periodic = tokio::spawn(evaluator.clone().every_interval(first.as_ref().ok()));
            Some((first, periodic))
        }
        None => None,
    };
    banner(&config, &engine, address, started, sample_mode);
    if let Some((first, _)) = &evaluation {
        golden_banner(&config, first);
    }
    println!(
        "Ctrl-C stops; the index and the source positions are kept in {}.",
        config.data_dir.display()
    );
    if sample_mode {
        sample_answer(&query_app).await;
    }
    since_make_run();
    stop.await;
    eprintln!("stopping: finishing the events in hand");
    replay_task.abort();
    journal_task.abort();
    if let Some((_, periodic)) = evaluation {
        periodic.abort();
    }
    if let Some(auditing) = auditing {
        auditing.abort();
    }
    shutdown(engine, stop_http, server, watchers).await
}

/// Stops the sources (`watchers`: the folder watcher and the MediaWiki stream), then the
/// HTTP server, then drains the pipeline.
async fn shutdown(
    engine: Engine,
    stop_http: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    watchers: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
) -> anyhow::Result<()> {
    let _ = stop_http.send(());
    for watcher in watchers {
        watcher.abort();
        let _ = watcher.await;
    }
    server.await?.context("HTTP server")?;
    engine.stop().await?;
    eprintln!("stopped; the index is kept");
    Ok(())
}

fn banner(
    config: &CasementConfig,
    engine: &Engine,
    address: std::net::SocketAddr,
    started: Instant,
    sample_mode: bool,
) {
    println!();
    println!(
        "ready in {:.1} s: {} events applied, {} deleted, {} stale, {} rejected; {} sentences embedded",
        started.elapsed().as_secs_f64(),
        engine.events("applied"),
        engine.events("deleted"),
        engine.events("stale"),
        engine.events("dead_lettered"),
        engine.sentences(Decision::Embedded),
    );
    let query = if sample_mode { sample::QUESTION } else { "..." };
    println!(
        "  search      curl -s http://{address}/v1/search -H 'content-type: application/json' -d '{{\"query\": \"{query}\"}}'"
    );
    println!("  OpenAPI     http://{address}/openapi.json");
    println!("  metrics     http://{address}/metrics");
    if config.sources.webhook.enabled {
        println!(
            "  webhook     POST http://{address}/v1/events (native, CloudEvents, Debezium, MediaWiki page_change)"
        );
    }
    for dir in &config.sources.watch.dirs {
        println!(
            "  watching    {} (save a file to index its new revision)",
            dir.display()
        );
    }
    println!("  index       {}", config.store().edge.path.display());
    if sample_mode {
        println!(
            "  try         edit {}/_pages/how-we-work/changing-your-name.md and ask again",
            sample::docs_dir(&config.data_dir).display()
        );
    }
}

/// The banner's golden-set line: the first run's figures, or why it did not finish.
fn golden_banner(config: &CasementConfig, first: &casement_query::eval::Result<Report>) {
    let golden = config.eval.golden.display();
    match first {
        Ok(report) => {
            println!(
                "  golden set  {}: {golden}, run again every {} s (casement_eval_* on /metrics)",
                report.summary(),
                config.eval.interval_secs
            );
            let failing = report.failed_names();
            if !failing.is_empty() {
                println!(
                    "              failing: {} (`casement eval {golden}` shows what came back)",
                    failing.join(", ")
                );
            }
        }
        Err(error) => println!("  golden set  did not run: {error}"),
    }
}

/// `make run` sets `CASEMENT_STARTED_AT` (seconds since the epoch) before provisioning
/// the models and building: the time to the first answer, all included.
fn since_make_run() {
    let Some(started) = std::env::var("CASEMENT_STARTED_AT")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!();
    println!(
        "first answer {} s after `make run` started (models, build and indexing included)",
        now.saturating_sub(started)
    );
}

/// Asks the sample question through the query service's own search path and prints the
/// best window with its citation.
async fn sample_answer<S: casement_store::Store + 'static>(app: &casement_query::App<S>) {
    let request: SearchRequest =
        match serde_json::from_value(serde_json::json!({"query": sample::QUESTION, "top_k": 1})) {
            Ok(request) => request,
            Err(_) => return,
        };
    let valid = match request.validate(
        &app.config.limits,
        &app.config.search,
        app.config.rerank.by_default,
        &app.config.store.indexed_metadata,
    ) {
        Ok(valid) => valid,
        Err(error) => {
            eprintln!("sample question: {error}");
            return;
        }
    };
    match app.searcher.search(valid).await {
        Ok(SearchResponse { windows, .. }) => {
            println!();
            println!("Q: {}", sample::QUESTION);
            match windows.first() {
                Some(w) => {
                    // Line by line, as the bot reads it (a list keeps its items).
                    let mut lines = w
                        .text
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "));
                    println!("A: {}", lines.next().unwrap_or_default());
                    for line in lines {
                        println!("   {line}");
                    }
                    let place = std::iter::once(w.title.as_str())
                        .chain(w.section_path.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" › ");
                    println!(
                        "   — {place} (doc {}, revision {}, characters {}..{})",
                        w.doc_id, w.revision, w.char_start, w.char_end
                    );
                }
                None => println!("A: (nothing indexed yet)"),
            }
        }
        Err(error) => eprintln!("sample question failed: {error}"),
    }
}
