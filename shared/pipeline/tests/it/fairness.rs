//! Head-of-line blocking (issue 22): a large valid document takes turns on the model with
//! the other lanes' events (the batcher anchors each batch on the event served longest ago),
//! so a small edit sent while it is being embedded finishes long before it, and so does a
//! revocation (a revision that changes only who may read a page: nothing to embed); a
//! revision over `max_document_sentences` is dead-lettered as too large instead of being
//! embedded.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use casement_events::{DecodeConfig, Event, EventFormat};
use casement_inference::Embed;
use casement_pipeline::factory::{self, ProcessorConfig};
use casement_pipeline::stages::route::lane_of;
use casement_pipeline::{
    Acknowledge, Body, DeadLetter, DeadLetterSink, EnrichConfig, Metrics, Offsets, Origin, Outcome,
    PipelineConfig, Reason, Shutdown, SourceId, SourceMessage, Stages,
};
use casement_testkit::model;
use casement_text::{Format, Revision, TextConfig};

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

fn upsert(doc_id: &str, content: String) -> Event {
    Event {
        change: casement_events::Change::Upsert(Revision {
            access: None,
            metadata: Default::default(),
            doc_id: doc_id.into(),
            revision: 1,
            title: Some(doc_id.into()),
            url: None,
            tenant: None,
            format: Format::Markdown,
            content,
            revision_url: None,
        }),
        format: EventFormat::Native,
    }
}

/// `n` distinct sentences of ordinary length.
fn sentences(n: usize) -> String {
    let mut text = String::from("# Handbook\n\n");
    for i in 0..n {
        text.push_str(&format!(
            "Step {i} of the procedure asks the reviewer to check item {} twice. ",
            i * 7 + 3
        ));
        if i % 8 == 7 {
            text.push_str("\n\n");
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_document_does_not_hold_a_small_edit_and_an_oversize_one_is_dead_lettered() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = casement_testkit::open_store(dir.path(), model().dimension());
    let metrics = Metrics::new();
    let pipeline = PipelineConfig {
        lanes: 2,
        embed_batch: 32,
        max_document_sentences: 1_000,
        ..PipelineConfig::default()
    };
    let config = ProcessorConfig {
        pipeline: &pipeline,
        enrich: &EnrichConfig::default(),
        text: &TextConfig::default(),
        fetch: &casement_pipeline::FetchConfig::default(),
    };
    let processor = factory::processor(config, &metrics, model(), store).expect("processor");
    let letters = Arc::new(Letters::default());
    let offsets = Offsets::default();
    let (observer, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let (shutdown, shutdown_rx) = Shutdown::new();
    let (input, mut tasks) = casement_pipeline::spawn(
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
    let mut next = 0;
    let mut send = |event: Event| {
        let origin = Origin {
            source: SourceId::Replay,
            offset: next,
            timestamp_ms: None,
            bulk: true,
        };
        offsets.started(&origin);
        next += 1;
        input.send(SourceMessage::new(
            origin,
            None,
            Body::Event(Box::new(event)),
        ))
    };

    // 960 sentences: 30 slices of 32 on the model.
    let big = "handbook/everything";
    let mut other_lane = (0..)
        .map(|i| format!("faq/{i}"))
        .filter(|id| lane_of(id, 2) != lane_of(big, 2));
    let small = other_lane.next().expect("a document on the other lane");
    // A public page, indexed first; revoked (made hr only) while the big one embeds.
    let policy = other_lane
        .next()
        .expect("another document on the other lane");
    let policy_text = "# Pay\n\nSalary bands are reviewed every March.\n";
    send(upsert(&policy, policy_text.into()))
        .await
        .expect("send");
    let indexed = finished.recv().await.expect("finished");
    assert!(matches!(indexed.outcome, Outcome::Applied(d) if d.embedded == 1));
    let batches_before = metrics.embedding_batch.get_sample_count();
    send(upsert(big, sentences(960))).await.expect("send");
    let started = Instant::now();
    while metrics.embedding_batch.get_sample_count() == batches_before {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the big document never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let sent_small = Instant::now();
    send(upsert(
        &small,
        "# FAQ\n\nReset the router. Then pair it again.\n".into(),
    ))
    .await
    .expect("send");
    let mut revoke = upsert(&policy, policy_text.into());
    if let casement_events::Change::Upsert(revision) = &mut revoke.change {
        revision.revision = 2;
        revision.access = Some(casement_text::Access::groups(["hr"]));
    }
    send(revoke).await.expect("send");
    let first = finished.recv().await.expect("finished");
    let small_took = sent_small.elapsed();
    // Counted when the small edit finishes, not after the revocation behind it: the
    // large document goes on embedding meanwhile, and those slices did not hold the edit.
    let slices_before_small = metrics.embedding_batch.get_sample_count() - batches_before;
    let revoked = finished.recv().await.expect("finished");
    let revoke_took = sent_small.elapsed();
    let second = finished.recv().await.expect("finished");
    let big_took = sent_small.elapsed();
    let slices = metrics.embedding_batch.get_sample_count() - batches_before;
    eprintln!(
        "revocation: {} ms after the small edit was sent",
        revoke_took.as_millis()
    );
    assert_eq!(
        revoked.document.as_ref().map(|d| d.0.as_str()),
        Some(policy.as_str()),
        "the revocation finishes before the large document"
    );
    assert!(
        matches!(revoked.outcome, Outcome::Applied(d) if d.embedded == 0),
        "a change of access embeds nothing: {:?}",
        revoked.outcome
    );
    eprintln!(
        "small edit: {} ms after it was sent, {slices_before_small} slices on the model by then; \
         the large document: {} ms, {slices} slices",
        small_took.as_millis(),
        big_took.as_millis()
    );
    assert_eq!(
        first.document.as_ref().map(|d| d.0.as_str()),
        Some(small.as_str()),
        "the small edit finishes first"
    );
    assert!(matches!(first.outcome, Outcome::Applied(d) if d.embedded == 2));
    assert_eq!(second.document.as_ref().map(|d| d.0.as_str()), Some(big));
    assert!(matches!(second.outcome, Outcome::Applied(d) if d.embedded == 960));
    // In arrival order the edit would wait for all 30 slices. It joins the batch after
    // the one running when it arrives (2 or 3 batches counted); the batches that finish
    // while it is written and acknowledged count too, more of them on a loaded machine
    // (CI's slow writes), so the bound leaves room for those and still tells the two apart.
    assert!(
        slices_before_small <= 8,
        "the edit waited for {slices_before_small} batches"
    );
    assert_eq!(
        slices, 31,
        "962 sentences in batches of 32: the edit shares a batch with the large document"
    );

    // Over the limit: dead-lettered with the reason, nothing embedded.
    send(upsert("handbook/runaway", sentences(1_001)))
        .await
        .expect("send");
    let rejected = finished.recv().await.expect("finished");
    assert_eq!(rejected.outcome, Outcome::DeadLettered(Reason::TooLarge));
    let letters = letters.0.lock().expect("letters").clone();
    assert_eq!(letters.len(), 1);
    assert!(
        letters[0]
            .detail
            .contains("1001 sentences, over pipeline.max_document_sentences = 1000"),
        "{}",
        letters[0].detail
    );
    assert_eq!(
        metrics.embedding_batch.get_sample_count() - batches_before,
        slices
    );
    shutdown.trigger();
    drop(input);
    while tasks.join_next().await.is_some() {}
}
