//! The fetcher against wikis that misbehave or events that lie (issue 35): a domain that is
//! not a listed host name is never asked, a redirect to another host is not followed, an
//! oversize answer is cut off, a slow wiki delays only its own revisions, a wiki that keeps
//! failing does not hold the lanes other documents need, and its events end as dead
//! letters (`fetch_failed`) after `pipeline.fetch_give_up_secs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use casement_events::{DecodeConfig, Event};
use casement_inference::Embed;
use casement_pipeline::factory::{self, ProcessorConfig};
use casement_pipeline::{
    Acknowledge, Body, DeadLetter, DeadLetterSink, EnrichConfig, FetchConfig, FetchError, Fetcher,
    Metrics, Offsets, Origin, Outcome, PipelineConfig, Reason, Shutdown, SourceId, SourceMessage,
    Stages,
};
use casement_testkit::wiki::{WikiRevision, WikiStandIn, page_change};
use casement_testkit::{eventually, model};
use casement_text::TextConfig;

use super::support::*;

/// `127.0.0.1:PORT` of a stand-in: the domain events name it by.
fn domain_of(wiki: &WikiStandIn) -> String {
    wiki.api_url
        .trim_start_matches("http://")
        .trim_end_matches("/w/api.php")
        .to_owned()
}

/// One API URL for every wiki (`{domain}`), with `wikis` listed.
fn farm_config(wikis: &[&WikiStandIn]) -> FetchConfig {
    FetchConfig {
        api_url: "http://{domain}/w/api.php".into(),
        domains: wikis.iter().map(|w| domain_of(w)).collect(),
        ..fetch_config(wikis[0])
    }
}

fn fetcher(config: &FetchConfig) -> Fetcher {
    Fetcher::start(config, Metrics::new().fetch.clone())
        .expect("fetcher")
        .expect("configured")
}

fn published(wiki: &WikiStandIn, n: usize) -> Vec<WikiRevision> {
    let revisions: Vec<WikiRevision> = history()
        .into_iter()
        .filter(|r| r.kind == "create")
        .take(n)
        .collect();
    for revision in &revisions {
        wiki.publish(revision);
    }
    revisions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_that_is_not_a_listed_host_name_is_never_asked() {
    let wiki = WikiStandIn::start().await;
    let revision = published(&wiki, 1).remove(0);
    let fetcher = fetcher(&farm_config(&[&wiki]));
    let listed = domain_of(&wiki);
    assert!(fetcher.fetch(&listed, revision.rev_id).await.is_ok());
    for hostile in [
        format!("{listed}/internal/admin?via=webhook&"),
        format!("{listed}#"),
        format!("user@{listed}"),
        "localhost:1".to_owned(),
        "en.wikipedia.org".to_owned(),
    ] {
        let answer = fetcher.fetch(&hostile, revision.rev_id).await;
        assert!(
            matches!(&answer, Err(FetchError::Refused(_))),
            "{hostile}: {answer:?}"
        );
    }
    assert_eq!(wiki.requests().len(), 1, "only the listed wiki was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_host_is_not_followed_and_no_body_is_repeated() {
    let wiki = WikiStandIn::start().await;
    let elsewhere = WikiStandIn::start().await;
    let revision = published(&elsewhere, 1).remove(0);
    // Where the redirect points answers the query itself, were it asked.
    let location = format!(
        "{}?action=query&format=json&formatversion=2&prop=revisions%7Cinfo&inprop=url\
         &rvprop=ids%7Ccontent&rvslots=main&revids={}",
        elsewhere.api_url.replace("127.0.0.1", "localhost"),
        revision.rev_id
    );
    wiki.answer_instead(Some((
        302,
        &[("location", &location)],
        "INTERNAL-ONLY: db_password=hunter2",
    )));
    let config = FetchConfig {
        attempts: 1,
        ..fetch_config(&wiki)
    };
    let answer = fetcher(&config).fetch(DOMAIN, revision.rev_id).await;
    let Err(FetchError::Unavailable(why)) = &answer else {
        panic!("{answer:?}");
    };
    assert!(why.contains("302") && why.contains("not followed"), "{why}");
    assert!(elsewhere.requests().is_empty(), "the other host was asked");

    // An error page's body is not repeated either.
    wiki.answer_instead(Some((403, &[], "INTERNAL-ONLY: db_password=hunter2")));
    let answer = fetcher(&config).fetch(DOMAIN, revision.rev_id).await;
    let text = format!("{answer:?}");
    assert!(
        text.contains("403") && !text.contains("db_password"),
        "{text}"
    );
    wiki.answer_instead(Some((200, &[], "<html>INTERNAL-ONLY: db_password=hunter2")));
    let answer = fetcher(&config).fetch(DOMAIN, revision.rev_id).await;
    let text = format!("{answer:?}");
    assert!(
        text.contains("not the API's JSON") && !text.contains("db_password"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_cap_is_a_failure() {
    let wiki = WikiStandIn::start().await;
    let revision = published(&wiki, 1).remove(0);
    let config = FetchConfig {
        attempts: 1,
        max_response_bytes: 64 * 1024,
        ..fetch_config(&wiki)
    };
    let huge = format!(
        "{{\"batchcomplete\": true, \"pad\": \"{}\"}}",
        "x".repeat(1 << 20)
    );
    wiki.answer_instead(Some((200, &[("content-type", "application/json")], &huge)));
    let answer = fetcher(&config).fetch(DOMAIN, revision.rev_id).await;
    let Err(FetchError::Unavailable(why)) = &answer else {
        panic!("{answer:?}");
    };
    assert!(why.contains("over fetch.max_response_bytes"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_wiki_delays_only_its_own_revisions() {
    let slow = WikiStandIn::start().await;
    let fast = WikiStandIn::start().await;
    let revisions = published(&slow, 2);
    for revision in &revisions {
        fast.publish(revision);
    }
    slow.slow_down(Duration::from_secs(20));
    let fetcher = fetcher(&farm_config(&[&slow, &fast]));
    let waiting = {
        let fetcher = fetcher.clone();
        let (domain, rev_id) = (domain_of(&slow), revisions[0].rev_id);
        tokio::spawn(async move { fetcher.fetch(&domain, rev_id).await })
    };
    // The slow wiki's request is on its way before the fast one is asked.
    eventually(Duration::from_secs(10), "the slow wiki is asked", || {
        std::future::ready(slow.arrivals() == 1)
    })
    .await;
    let answer = fetcher.fetch(&domain_of(&fast), revisions[1].rev_id).await;
    assert_eq!(answer.expect("fetched").content, revisions[1].content);
    assert!(
        !waiting.is_finished(),
        "the fast wiki answered after the slow one: it waited behind it"
    );
    waiting.abort();
}

#[derive(Debug, Default)]
struct Letters(Mutex<Vec<DeadLetter>>);

impl DeadLetterSink for Letters {
    async fn send(&self, letter: &DeadLetter) -> anyhow::Result<()> {
        self.0.lock().expect("letters").push(letter.clone());
        Ok(())
    }
}

#[derive(Debug)]
struct NoCommits;

impl Acknowledge for NoCommits {
    fn commit(&self, _: &[(SourceId, i64)]) {}
}

/// A pipeline of 2 lanes over a fresh index, fetching with `fetch`, giving a fetch up
/// after `give_up_secs`.
struct Pipeline {
    input: tokio::sync::mpsc::Sender<SourceMessage>,
    finished: tokio::sync::mpsc::UnboundedReceiver<casement_pipeline::Finished>,
    letters: Arc<Letters>,
    offsets: Offsets,
    next: i64,
    shutdown: Shutdown,
    tasks: tokio::task::JoinSet<()>,
    _dir: tempfile::TempDir,
}

impl Pipeline {
    fn start(fetch: &FetchConfig, give_up_secs: u64) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = casement_testkit::open_store(dir.path(), model().dimension());
        let metrics = Metrics::new();
        let pipeline = PipelineConfig {
            lanes: 2,
            fetch_give_up_secs: give_up_secs,
            retry_initial_ms: 200,
            retry_max_ms: 1_000,
            ..PipelineConfig::default()
        };
        let config = ProcessorConfig {
            pipeline: &pipeline,
            enrich: &EnrichConfig::default(),
            text: &TextConfig::default(),
            fetch,
        };
        let processor = factory::processor(config, &metrics, model(), store).expect("processor");
        let letters = Arc::new(Letters::default());
        let offsets = Offsets::default();
        let (observer, finished) = tokio::sync::mpsc::unbounded_channel();
        let (shutdown, shutdown_rx) = Shutdown::new();
        let (input, tasks) = casement_pipeline::spawn(
            Stages {
                processor: Arc::new(casement_pipeline::ProcessorSlot::new(processor)),
                config: pipeline.clone(),
                decode: DecodeConfig::default(),
                dead_letters: letters.clone(),
                ack: Arc::new(NoCommits),
                offsets: offsets.clone(),
                observer: Some(observer),
                guard: casement_pipeline::DeleteGuard::disabled(),
            },
            shutdown_rx,
        );
        Self {
            input,
            finished,
            letters,
            offsets,
            next: 0,
            shutdown,
            tasks,
            _dir: dir,
        }
    }

    async fn send(&mut self, event: Event) {
        let origin = Origin {
            source: SourceId::Webhook,
            offset: self.next,
            timestamp_ms: None,
            bulk: false,
        };
        self.next += 1;
        self.offsets.started(&origin);
        self.input
            .send(SourceMessage::new(
                origin,
                None,
                Body::Event(Box::new(event)),
            ))
            .await
            .expect("send");
    }

    async fn outcomes(&mut self, n: usize) -> Vec<casement_pipeline::Finished> {
        let mut outcomes = Vec::new();
        while outcomes.len() < n {
            let done = tokio::time::timeout(Duration::from_secs(180), self.finished.recv())
                .await
                .expect("the events end")
                .expect("finished");
            outcomes.push(done);
        }
        outcomes
    }

    async fn stop(mut self) {
        self.shutdown.trigger();
        drop(self.input);
        while self.tasks.join_next().await.is_some() {}
    }
}

fn wiki_event(wiki_id: &str, wiki: &WikiStandIn, revision: &WikiRevision) -> Event {
    event(&page_change(
        wiki_id,
        &domain_of(wiki),
        "create",
        revision,
        "2026-11-25T06:00:00Z",
    ))
}

/// 12 events of a wiki answering an HTML error page, first in both of 2 lanes, then 12 of
/// a healthy wiki: the healthy pages are all applied while the broken ones wait for their
/// retries (before, they held the lanes until the wiki was fixed); once it is, the broken
/// ones are applied too. A wiki that stays broken ends its events as `fetch_failed` dead
/// letters after `pipeline.fetch_give_up_secs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_wiki_does_not_hold_the_lanes_and_its_events_are_dead_lettered() {
    let broken = WikiStandIn::start().await;
    let healthy = WikiStandIn::start().await;
    let revisions = published(&healthy, 24);
    broken.answer_instead(Some((
        200,
        &[],
        "<html>Service temporarily unavailable</html>",
    )));
    let fetch = FetchConfig {
        attempts: 1,
        ..farm_config(&[&broken, &healthy])
    };
    let mut pipeline = Pipeline::start(&fetch, 3_600);
    for revision in &revisions[..12] {
        pipeline
            .send(wiki_event("brokenwiki", &broken, revision))
            .await;
    }
    for revision in &revisions[12..] {
        pipeline.send(wiki_event(WIKI, &healthy, revision)).await;
    }
    let first = pipeline.outcomes(12).await;
    assert!(
        first.iter().all(|f| {
            f.document.as_ref().is_some_and(|d| d.0.starts_with(WIKI))
                && matches!(f.outcome, Outcome::Applied(_))
        }),
        "the healthy wiki's 12 pages are applied while the broken ones wait: {:?}",
        first
            .iter()
            .map(|f| (&f.document, &f.outcome))
            .collect::<Vec<_>>()
    );
    // The wiki comes back: its events are applied at their next retry.
    for revision in &revisions[..12] {
        broken.publish(revision);
    }
    broken.answer_instead(None);
    let second = pipeline.outcomes(12).await;
    assert!(
        second
            .iter()
            .all(|f| matches!(f.outcome, Outcome::Applied(_))),
        "{second:?}"
    );
    pipeline.stop().await;

    // A wiki that stays broken: dead letters once the budget is spent.
    let mut pipeline = Pipeline::start(&fetch, 2);
    broken.answer_instead(Some((200, &[], "<html>Still down</html>")));
    for revision in &revisions[..3] {
        pipeline
            .send(wiki_event("brokenwiki", &broken, revision))
            .await;
    }
    let given_up = pipeline.outcomes(3).await;
    assert!(
        given_up
            .iter()
            .all(|f| f.outcome == Outcome::DeadLettered(Reason::FetchFailed)),
        "{given_up:?}"
    );
    let letters = pipeline.letters.0.lock().expect("letters").clone();
    assert_eq!(letters.len(), 3);
    assert!(
        letters
            .iter()
            .all(|l| l.reason == Reason::FetchFailed && l.detail.contains("gave up after")),
        "{:?}",
        letters[0]
    );
    pipeline.stop().await;
}
