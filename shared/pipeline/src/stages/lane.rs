//! A lane: processes its documents' events one by one through the
//! [`Processor`](crate::Processor). A permanent failure dead-letters the event. A transient
//! one is retried with exponential backoff:
//!
//! - a failure of the store or the model holds the lane (every document needs them; a full
//!   pipeline then pauses the source);
//! - a failure to fetch the revision's content (its wiki is down, slow or answers nonsense)
//!   is the document's own: the event is *parked* with its document's later events behind
//!   it, and the lane goes on with other documents. A parked event is retried when its
//!   backoff is over; once it has failed for `pipeline.fetch_give_up_secs` it is
//!   dead-lettered (`fetch_failed`) and its document's next events go on.
//!
//! A delete the mass-deletion guard holds ([`crate::guard`]) is parked the same way, until
//! an operator releases the held deletes.
//!
//! On shutdown the event in hand gets `pipeline.shutdown_grace_ms` to finish; past that it
//! is dropped unfinished (a write cut off heals when it is planned again), not committed,
//! and delivered again after restart, as are parked events.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use casement_store::Store;
use tokio::sync::{mpsc, watch};

use casement_events::Change;

use super::route::LaneItem;
use crate::config::PipelineConfig;
use crate::guard::{DeleteGuard, Verdict};
use crate::outcome::{Reason, RetryStage};
use crate::processor::ProcessError;
use crate::slot::ProcessorSlot;
use crate::source::DeadLetter;
use crate::spawn::{Backoff, Done, Letter};

/// A document within its tenant: the key events are parked under.
type DocKey = (Option<String>, String);

fn key_of(item: &LaneItem) -> DocKey {
    (
        item.event.tenant().map(str::to_owned),
        item.event.doc_id().to_owned(),
    )
}

/// Retrying an event whose content could not be fetched.
#[derive(Debug)]
struct Retry {
    first_failure: Instant,
    attempts: u32,
    backoff: Backoff,
    due: tokio::time::Instant,
}

/// Why a parked document's first event waits.
#[derive(Debug)]
enum Wait {
    /// Behind the document's first event.
    Behind,
    /// For a fetch retry.
    Fetch(Retry),
    /// For an operator to release the held deletes.
    Held,
}

/// The events of documents whose head event waits (a fetch retry, a held delete), in
/// order.
#[derive(Debug, Default)]
struct Parked {
    /// Per document: its events; the first one's wait is not `Behind`.
    documents: HashMap<DocKey, VecDeque<(LaneItem, Wait)>>,
}

impl Parked {
    fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }

    /// Whether events of this document wait: a new one must wait behind them.
    fn holds(&self, key: &DocKey) -> bool {
        self.documents.contains_key(key)
    }

    fn push(&mut self, key: DocKey, item: LaneItem, wait: Wait) {
        let queue = self.documents.entry(key).or_default();
        match wait {
            Wait::Behind => queue.push_back((item, wait)),
            _ => queue.push_front((item, wait)),
        }
    }

    /// The documents whose first event is a held delete.
    fn held(&self) -> Vec<DocKey> {
        self.documents
            .iter()
            .filter(|(_, queue)| matches!(queue.front(), Some((_, Wait::Held))))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Waits until the earliest retry is due; the document whose retry it is.
    async fn due(&self) -> DocKey {
        let earliest = self
            .documents
            .iter()
            .filter_map(|(key, queue)| match queue.front()? {
                (_, Wait::Fetch(retry)) => Some((retry.due, key)),
                _ => None,
            })
            .min_by_key(|(due, _)| *due);
        match earliest {
            Some((due, key)) => {
                tokio::time::sleep_until(due).await;
                key.clone()
            }
            None => std::future::pending().await,
        }
    }

    /// The document's next event (with its wait, for the head).
    fn next(&mut self, key: &DocKey) -> Option<(LaneItem, Wait)> {
        let queue = self.documents.get_mut(key)?;
        let next = queue.pop_front();
        if queue.is_empty() {
            self.documents.remove(key);
        }
        next
    }
}

/// What became of one event.
enum Step {
    /// Done or dead-lettered (handed on).
    Finished,
    /// Its content could not be fetched: retried later.
    Parked(Box<LaneItem>, Retry),
    /// Shutting down, or the next stage is gone.
    Stop,
}

#[allow(clippy::too_many_arguments)]
pub async fn run<S: Store>(
    mut items: mpsc::Receiver<LaneItem>,
    processor: Arc<ProcessorSlot<S>>,
    config: PipelineConfig,
    guard: DeleteGuard,
    letters: mpsc::Sender<Letter>,
    done: mpsc::Sender<Done>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut releases = guard.releases();
    let mut lane = Lane {
        processor,
        config,
        guard,
        live: None,
        letters,
        done,
    };
    let mut parked = Parked::default();
    loop {
        // The documents to go on with, each with its next event.
        let mut ready: Vec<(DocKey, Option<(LaneItem, Wait)>)> = tokio::select! {
            biased;
            changed = releases.changed() => {
                if changed.is_err() {
                    return;
                }
                parked
                    .held()
                    .into_iter()
                    .map(|key| {
                        let next = parked.next(&key);
                        (key, next)
                    })
                    .collect()
            }
            key = parked.due(), if !parked.is_empty() => {
                let next = parked.next(&key);
                vec![(key, next)]
            }
            item = items.recv() => {
                let Some(item) = item else { return };
                let key = key_of(&item);
                if parked.holds(&key) {
                    parked.push(key, item, Wait::Behind);
                    continue;
                }
                vec![(key, Some((item, Wait::Behind)))]
            }
        };
        for (key, next) in &mut ready {
            // The document's events, in order, until one is parked or none is left.
            while let Some((item, wait)) = next.take() {
                if *shutdown.borrow() {
                    return;
                }
                let retry = match wait {
                    Wait::Fetch(retry) => Some(retry),
                    Wait::Held => {
                        lane.guard.count_held(item.receipt.origin.source, -1);
                        None
                    }
                    Wait::Behind => None,
                };
                if lane.holds(&item).await {
                    lane.guard.count_held(item.receipt.origin.source, 1);
                    parked.push(key.clone(), item, Wait::Held);
                    break;
                }
                match lane.process(item, retry, &mut shutdown).await {
                    Step::Finished => *next = parked.next(key),
                    Step::Parked(item, retry) => {
                        parked.push(key.clone(), *item, Wait::Fetch(retry));
                    }
                    Step::Stop => return,
                }
            }
        }
    }
}

struct Lane<S> {
    processor: Arc<ProcessorSlot<S>>,
    config: PipelineConfig,
    guard: DeleteGuard,
    /// The index's live documents, and when they were counted (the guard's denominator).
    live: Option<(u64, Instant)>,
    letters: mpsc::Sender<Letter>,
    done: mpsc::Sender<Done>,
}

impl<S: Store> Lane<S> {
    /// Whether the guard holds this event: a delete from a source the guard counts (not a
    /// start-up resend, a bulk load, a replayed revision log or the audit's own fix).
    async fn holds(&mut self, item: &LaneItem) -> bool {
        let source = item.receipt.origin.source;
        let counted = matches!(item.event.change, Change::Delete { .. })
            && !item.receipt.resend
            && !item.receipt.origin.bulk
            && !matches!(source, crate::SourceId::Audit | crate::SourceId::Replay);
        if !counted {
            return false;
        }
        let fresh = self
            .live
            .is_some_and(|(_, at)| at.elapsed() < Duration::from_secs(1));
        if !fresh {
            let current = self.processor.current();
            // Unknown (the store is down): counted as none, so at most one delete passes.
            let live = current
                .store
                .stats()
                .await
                .map_or(0, |stats| stats.documents);
            self.live = Some((live, Instant::now()));
        }
        let live = self.live.map_or(0, |(live, _)| live);
        let event = &item.event;
        let verdict = self
            .guard
            .decide(source, event.tenant(), event.doc_id(), live);
        if verdict == Verdict::Apply {
            // This delete will take one away.
            self.live = self.live.map(|(live, at)| (live.saturating_sub(1), at));
        }
        verdict == Verdict::Hold
    }

    async fn process(
        &self,
        item: LaneItem,
        mut retry: Option<Retry>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Step {
        let event = &item.event;
        let origin = item.receipt.origin;
        let mut backoff = Backoff::new(&self.config);
        let processed = loop {
            let attempt = tokio::select! {
                processed = async {
                    let (_processing, current) = self.processor.processing().await;
                    current.process(event).await
                } => processed,
                () = grace_over(shutdown.clone(), self.config.shutdown_grace()) => {
                    tracing::warn!(doc_id = event.doc_id(), source = %origin.source,
                        offset = origin.offset, grace_ms = self.config.shutdown_grace_ms,
                        "shutdown grace period over; the event in hand is left for the next start");
                    return Step::Stop;
                }
            };
            match attempt {
                Ok(outcome) => break Ok(outcome),
                Err(error) if error.is_transient() && error.retry_stage() == RetryStage::Fetch => {
                    self.processor.current().metrics().retry(RetryStage::Fetch);
                    let now = Instant::now();
                    let mut retry = retry.take().unwrap_or_else(|| Retry {
                        first_failure: now,
                        attempts: 0,
                        backoff: Backoff::new(&self.config),
                        due: tokio::time::Instant::now(),
                    });
                    retry.attempts += 1;
                    let failing = now.duration_since(retry.first_failure);
                    if failing >= self.config.fetch_give_up() {
                        break Err((
                            Reason::FetchFailed,
                            format!(
                                "gave up after {} attempts over {} s: {error}",
                                retry.attempts,
                                failing.as_secs()
                            ),
                        ));
                    }
                    let delay = retry.backoff.next_delay();
                    retry.due = tokio::time::Instant::now() + delay;
                    tracing::warn!(doc_id = event.doc_id(), source = %origin.source,
                        offset = origin.offset, %error, attempts = retry.attempts,
                        retry_in_ms = delay.as_millis() as u64,
                        "cannot fetch the revision; retrying later, the lane goes on with other documents");
                    return Step::Parked(Box::new(item), retry);
                }
                Err(error) if error.is_transient() => {
                    self.processor
                        .current()
                        .metrics()
                        .retry(error.retry_stage());
                    tracing::warn!(doc_id = event.doc_id(), source = %origin.source,
                        offset = origin.offset, %error, retry_in_ms = backoff.delay().as_millis() as u64,
                        "transient failure; retrying");
                    if backoff.wait(shutdown).await {
                        return Step::Stop; // Not finished: not committed, delivered again after restart.
                    }
                }
                Err(error) => break Err(permanent(&error)),
            }
        };
        let document = Some((event.doc_id().to_owned(), event.revision()));
        let sent = match processed {
            Ok(outcome) => {
                if matches!(outcome, crate::Outcome::Applied(_)) {
                    self.guard.indexed(event.tenant(), event.doc_id());
                }
                let finished = Done::new(item.receipt, document, outcome, None);
                self.done.send(finished).await.is_ok()
            }
            Err((reason, detail)) => {
                // The dead-letter stage reports it when the letter is stored.
                let payload = item.original.payload(event);
                let letter = DeadLetter {
                    origin,
                    key: item.key,
                    payload,
                    reason,
                    detail,
                };
                let letter = Letter {
                    letter,
                    document,
                    receipt: item.receipt,
                };
                self.letters.send(letter).await.is_ok()
            }
        };
        if sent { Step::Finished } else { Step::Stop }
    }
}

fn permanent(error: &ProcessError) -> (Reason, String) {
    (error.reason(), error.to_string())
}

/// Resolves `grace` after shutdown fires (never, if it does not).
async fn grace_over(mut shutdown: watch::Receiver<bool>, grace: Duration) {
    if shutdown.wait_for(|&stop| stop).await.is_err() {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(grace).await;
}
