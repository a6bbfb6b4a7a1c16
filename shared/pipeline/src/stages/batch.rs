//! The embedding batcher: one task in front of the model gathers the sentences of every
//! lane's events into model batches of up to `pipeline.embed_batch` sentences and hands each
//! event its vectors.
//!
//! - **Cross-event batches.** Eight events of four sentences make one model call, not eight.
//!   While the model runs a batch, the next events' sentences queue up; the next batch takes
//!   them as soon as the model is free, so a backlog keeps the model busy with full batches.
//! - **Linger only while work is queued.** A batch that is not full waits up to
//!   `pipeline.embed_linger_ms` for more sentences, and only while other events are on their
//!   way to the model (read, segmented, planned). A single live edit goes to the model at
//!   once.
//! - **Similar lengths.** The model pads a batch to its longest input, so a batch is the
//!   window of waiting sentences, sorted by length, with the least spread: with a few lanes
//!   of work waiting, batches are nearly as uniform as a corpus sorted by length.
//! - **Turns.** Each batch is anchored on one event and includes its shortest unsent
//!   sentence. A newly arrived event is anchored next, then events take turns, the one served
//!   longest ago first. So a small edit that arrives while a large document is on the model
//!   is embedded in the next batch, and every waiting event gets a sentence into one of the
//!   next few batches (only one event per lane waits at a time).
//!
//! A text's vector does not depend on the batch it is computed in with the default models
//! (fp32, static int8), so batching changes no vector (invariant 1). A failed model call fails
//! every event with a sentence in it; their lanes retry.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use casement_inference::{BlockingPool, Error, Result};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinSet;

use crate::metrics::Metrics;

/// How batches are formed.
#[derive(Debug, Clone, Copy)]
pub struct BatchConfig {
    /// Sentences per model call.
    pub batch: usize,
    /// Longest wait for a batch to fill while other events are on their way.
    pub linger: Duration,
    /// Model calls at once.
    pub concurrency: usize,
}

/// The handle the embed stage uses; cheap to clone. The batching task starts with the
/// first request (inside the runtime) and ends when every handle is dropped.
#[derive(Clone)]
pub struct Batcher {
    inner: Arc<Shared>,
}

struct Shared {
    pool: BlockingPool,
    config: BatchConfig,
    metrics: Metrics,
    upstream: Arc<Upstream>,
    requests: OnceLock<mpsc::UnboundedSender<Request>>,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("pool", &self.inner.pool)
            .field("config", &self.inner.config)
            .field(
                "upstream",
                &self.inner.upstream.count.load(Ordering::Relaxed),
            )
            .finish()
    }
}

/// Events between the start of their processing and their embedding request: while there
/// are any, a partial batch may linger for them.
#[derive(Debug, Default)]
struct Upstream {
    count: AtomicUsize,
    changed: Notify,
}

/// Held by an event until it asks for its vectors (or finishes without).
#[derive(Debug)]
pub struct OnTheWay(Arc<Upstream>);

impl Drop for OnTheWay {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_one();
    }
}

struct Request {
    texts: Vec<String>,
    reply: oneshot::Sender<Result<Vec<Vec<f32>>>>,
}

impl Batcher {
    pub fn new(pool: BlockingPool, config: BatchConfig, metrics: Metrics) -> Self {
        Self {
            inner: Arc::new(Shared {
                pool,
                config: BatchConfig {
                    batch: config.batch.max(1),
                    concurrency: config.concurrency.max(1),
                    ..config
                },
                metrics,
                upstream: Arc::default(),
                requests: OnceLock::new(),
            }),
        }
    }

    /// Marks an event as on its way to the model until the guard is dropped.
    pub fn on_the_way(&self) -> OnTheWay {
        self.inner.upstream.count.fetch_add(1, Ordering::AcqRel);
        OnTheWay(self.inner.upstream.clone())
    }

    /// The vectors of `texts`, in order, computed in batches shared with other events.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let requests = self.inner.requests.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            let shared = &self.inner;
            tokio::spawn(run(
                rx,
                shared.pool.clone(),
                shared.config,
                shared.upstream.clone(),
                shared.metrics.clone(),
            ));
            tx
        });
        let (reply, answer) = oneshot::channel();
        let closed = || Error::Inference {
            reason: "the embedding batcher stopped".to_owned(),
        };
        requests
            .send(Request { texts, reply })
            .map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }
}

/// One sentence of one request in a batch.
type Slot = (u64, usize);

/// A batch's result: its slots, the vectors (or the failure) and the model time.
type Ran = (Vec<Slot>, Result<Vec<Vec<f32>>>, Duration);

async fn run(
    mut incoming: mpsc::UnboundedReceiver<Request>,
    pool: BlockingPool,
    config: BatchConfig,
    upstream: Arc<Upstream>,
    metrics: Metrics,
) {
    let mut queue = Queue::default();
    let mut running: JoinSet<Ran> = JoinSet::new();
    let mut open = true;
    // Set when the model could take a partial batch: how long it may wait for more.
    let mut linger_until: Option<tokio::time::Instant> = None;
    loop {
        while let Ok(request) = incoming.try_recv() {
            queue.push(request);
        }
        queue.drop_abandoned();
        let mut lingering = false;
        while running.len() < config.concurrency && queue.unsent > 0 {
            let full = queue.unsent >= config.batch;
            let others_coming = upstream.count.load(Ordering::Acquire) > 0;
            let deadline =
                *linger_until.get_or_insert_with(|| tokio::time::Instant::now() + config.linger);
            if !full && open && others_coming && tokio::time::Instant::now() < deadline {
                lingering = true;
                break;
            }
            linger_until = None;
            let slots = queue.next_batch(config.batch);
            let texts: Vec<String> = slots.iter().map(|&s| queue.text(s).to_owned()).collect();
            let pool = pool.clone();
            running.spawn(async move {
                let started = Instant::now();
                let vectors = pool.embed(texts).await;
                (slots, vectors, started.elapsed())
            });
        }
        if !open && queue.requests.is_empty() && running.is_empty() {
            return;
        }
        tokio::select! {
            Some(ran) = running.join_next(), if !running.is_empty() => match ran {
                Ok((slots, vectors, took)) => {
                    metrics.embedding_duration.observe(took.as_secs_f64());
                    metrics.embedding_batch.observe(slots.len() as f64);
                    queue.deliver(&slots, vectors);
                }
                Err(error) => queue.fail_all(&format!("embedding task failed: {error}")),
            },
            request = incoming.recv(), if open => match request {
                Some(request) => queue.push(request),
                None => open = false,
            },
            () = tokio::time::sleep_until(linger_until.unwrap_or_else(tokio::time::Instant::now)),
                if lingering => {}
            () = upstream.changed.notified(), if lingering => {}
        }
    }
}

/// The requests waiting for vectors, and whose turn it is.
#[derive(Default)]
struct Queue {
    requests: HashMap<u64, Pending>,
    /// Requests with unsent sentences: the newest arrival, then the one served longest ago.
    turns: VecDeque<u64>,
    next_id: u64,
    /// Sentences not yet in a batch.
    unsent: usize,
}

struct Pending {
    texts: Vec<String>,
    /// Sentences not yet in a batch, shortest first.
    unsent: VecDeque<usize>,
    vectors: Vec<Option<Vec<f32>>>,
    /// Sentences without a vector yet.
    missing: usize,
    reply: Option<oneshot::Sender<Result<Vec<Vec<f32>>>>>,
}

impl Queue {
    fn push(&mut self, request: Request) {
        let n = request.texts.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| request.texts[i].len());
        let id = self.next_id;
        self.next_id += 1;
        self.unsent += n;
        self.turns.push_front(id);
        self.requests.insert(
            id,
            Pending {
                vectors: vec![None; n],
                missing: n,
                unsent: order.into(),
                texts: request.texts,
                reply: Some(request.reply),
            },
        );
    }

    fn text(&self, (id, i): Slot) -> &str {
        &self.requests[&id].texts[i]
    }

    /// Forgets requests whose event stopped waiting (shutdown grace over).
    fn drop_abandoned(&mut self) {
        let abandoned: Vec<u64> = self
            .requests
            .iter()
            .filter(|(_, p)| p.reply.as_ref().is_none_or(oneshot::Sender::is_closed))
            .map(|(&id, _)| id)
            .collect();
        for id in abandoned {
            self.remove(id);
        }
    }

    fn remove(&mut self, id: u64) {
        if let Some(pending) = self.requests.remove(&id) {
            self.unsent -= pending.unsent.len();
            self.turns.retain(|&t| t != id);
        }
    }

    /// The next batch: `size` waiting sentences of similar length (the model pads a batch
    /// to its longest input), always including the anchor's shortest unsent sentence.
    fn next_batch(&mut self, size: usize) -> Vec<Slot> {
        let Some(anchor) = self.turns.pop_front() else {
            return Vec::new();
        };
        let anchor_first = *self.requests[&anchor]
            .unsent
            .front()
            .expect("a turn has unsent sentences");
        let mut pool: Vec<(usize, Slot)> = std::iter::once(anchor)
            .chain(self.turns.iter().copied())
            .flat_map(|id| {
                let pending = &self.requests[&id];
                pending
                    .unsent
                    .iter()
                    .map(move |&i| (pending.texts[i].len(), (id, i)))
            })
            .collect();
        pool.sort_unstable();
        let chosen = if pool.len() <= size {
            pool
        } else {
            let at = pool
                .iter()
                .position(|&(_, slot)| slot == (anchor, anchor_first))
                .expect("the anchor's sentence is in the pool");
            // The window of `size` around it with the least spread of lengths.
            let first = at.saturating_sub(size - 1);
            let last = at.min(pool.len() - size);
            let start = (first..=last)
                .min_by_key(|&s| pool[s + size - 1].0 - pool[s].0)
                .expect("a window");
            pool[start..start + size].to_vec()
        };
        let slots: Vec<Slot> = chosen.into_iter().map(|(_, slot)| slot).collect();
        for &(id, i) in &slots {
            let pending = self.requests.get_mut(&id).expect("a slot has a request");
            if let Some(at) = pending.unsent.iter().position(|&j| j == i) {
                pending.unsent.remove(at);
            }
        }
        if !self.requests[&anchor].unsent.is_empty() {
            self.turns.push_back(anchor);
        }
        self.turns.retain(|id| !self.requests[id].unsent.is_empty());
        self.unsent -= slots.len();
        slots
    }

    fn deliver(&mut self, slots: &[Slot], vectors: Result<Vec<Vec<f32>>>) {
        let vectors = match vectors {
            Ok(vectors) if vectors.len() == slots.len() => vectors,
            Ok(vectors) => {
                let reason = format!(
                    "the model returned {} vectors for {} texts",
                    vectors.len(),
                    slots.len()
                );
                return self.fail(slots, &reason);
            }
            Err(error) => return self.fail(slots, &error.to_string()),
        };
        for (&(id, i), vector) in slots.iter().zip(vectors) {
            let Some(pending) = self.requests.get_mut(&id) else {
                continue; // Abandoned meanwhile.
            };
            pending.vectors[i] = Some(vector);
            pending.missing -= 1;
            if pending.missing == 0 {
                let pending = self.requests.remove(&id).expect("just seen");
                let vectors = pending.vectors.into_iter().flatten().collect();
                if let Some(reply) = pending.reply {
                    let _ = reply.send(Ok(vectors));
                }
            }
        }
    }

    /// Fails every request with a sentence in `slots`.
    fn fail(&mut self, slots: &[Slot], reason: &str) {
        let mut ids: Vec<u64> = slots.iter().map(|&(id, _)| id).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            if let Some(reply) = self.requests.get_mut(&id).and_then(|p| p.reply.take()) {
                let _ = reply.send(Err(Error::Inference {
                    reason: reason.to_owned(),
                }));
            }
            self.remove(id);
        }
    }

    fn fail_all(&mut self, reason: &str) {
        let slots: Vec<Slot> = self.requests.keys().map(|&id| (id, 0)).collect();
        self.fail(&slots, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(texts: &[&str]) -> (Request, oneshot::Receiver<Result<Vec<Vec<f32>>>>) {
        let (reply, answer) = oneshot::channel();
        let texts = texts.iter().map(|t| (*t).to_owned()).collect();
        (Request { texts, reply }, answer)
    }

    #[test]
    fn a_batch_mixes_events_and_every_waiting_event_gets_a_turn() {
        let mut queue = Queue::default();
        let long: Vec<String> = (0..100)
            .map(|i| format!("sentence {i:03} of the big one"))
            .collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let (big, _big_answer) = request(&long);
        let (small, mut small_answer) = request(&["a", "bb"]);
        queue.push(big);
        // The big request alone fills the batch.
        let first = queue.next_batch(32);
        assert_eq!(first.len(), 32);
        assert!(first.iter().all(|&(id, _)| id == 0));
        // The small one arrives while the model runs it and is anchored next: both its
        // sentences and 30 of the big one.
        queue.push(small);
        assert_eq!(queue.unsent, 70);
        let second = queue.next_batch(32);
        assert_eq!(second.iter().filter(|&&(id, _)| id == 1).count(), 2);
        assert_eq!(second.len(), 32);
        queue.deliver(&second, Ok(vec![vec![1.0]; 32]));
        let vectors = small_answer.try_recv().expect("answered").expect("vectors");
        assert_eq!(vectors.len(), 2);
        assert_eq!(queue.unsent, 102 - 64);
        // Then the big one again.
        let third = queue.next_batch(32);
        assert!(third.iter().all(|&(id, _)| id == 0));
    }

    #[test]
    fn the_rest_of_a_batch_is_filled_with_sentences_of_similar_length() {
        let mut queue = Queue::default();
        let (anchor, _a) = request(&["x".repeat(50).as_str()]);
        let (other, _b) = request(&[
            "y".repeat(5).as_str(),
            "y".repeat(49).as_str(),
            "y".repeat(200).as_str(),
            "y".repeat(52).as_str(),
        ]);
        queue.push(other);
        queue.push(anchor); // The newest arrival is anchored.
        let batch = queue.next_batch(3);
        let mut lengths: Vec<usize> = batch.iter().map(|&s| queue.text(s).len()).collect();
        lengths.sort_unstable();
        assert_eq!(lengths, vec![49, 50, 52]);
    }

    #[test]
    fn a_failed_batch_fails_its_events_and_vectors_come_back_in_order() {
        let mut queue = Queue::default();
        let (a, mut a_answer) = request(&["ccc", "a", "bb"]);
        let (b, mut b_answer) = request(&["dddd"]);
        queue.push(b);
        queue.push(a);
        let batch = queue.next_batch(2);
        assert_eq!(batch, vec![(1, 1), (1, 2)]);
        let rest = queue.next_batch(8);
        // Vectors are the text lengths: the answer must be in the request's order.
        let by_len = |slots: &[Slot], queue: &Queue| -> Vec<Vec<f32>> {
            slots
                .iter()
                .map(|&s| vec![queue.text(s).len() as f32])
                .collect()
        };
        let first = by_len(&batch, &queue);
        queue.deliver(&batch, Ok(first));
        let rest_vectors = by_len(&rest, &queue);
        queue.deliver(&rest, Ok(rest_vectors));
        let a_vectors = a_answer.try_recv().expect("answered").expect("vectors");
        assert_eq!(a_vectors, vec![vec![3.0], vec![1.0], vec![2.0]]);
        assert_eq!(
            b_answer.try_recv().expect("answered").expect("b"),
            vec![vec![4.0]]
        );

        let (c, mut c_answer) = request(&["e", "f"]);
        queue.push(c);
        let batch = queue.next_batch(1);
        queue.deliver(
            &batch,
            Err(Error::Inference {
                reason: "boom".into(),
            }),
        );
        assert!(c_answer.try_recv().expect("answered").is_err());
        assert!(queue.requests.is_empty());
        assert_eq!(queue.unsent, 0);
    }
}
