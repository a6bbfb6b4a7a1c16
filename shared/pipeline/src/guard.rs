//! The mass-deletion guard: deletes that would remove more than `max_delete_share` of the
//! index's live documents within `delete_window_secs` are held, not applied, the same
//! rule `casement audit --fix` keeps. A truncated replay, a CMS bug that publishes a burst
//! of deletes, a watched folder that lost its mount: each looks like a great many deletes
//! at once, and each is an accident far more often than an intent.
//!
//! Per source (a delete from the webhook does not count against the watcher's): the
//! deletes let through in the window are counted against the live documents at the
//! window's start (live now plus those deletes), at least one delete per window always
//! passes (a normal delete of one file is immediate). What a burst could lose is what was
//! there before it: a delete of a document this process indexed within the window (a
//! history streamed in, where pages come and go) is not counted, nor are bulk loads (a
//! replayed revision log, a backfill, Kafka messages with the `casement.bulk` header: an
//! operator's deliberate act). Past the share every further delete
//! of that source is held (the lane parks it, its document's later events behind it, and
//! goes on; it is not finished, so nothing is committed past it) until an operator
//! releases the held deletes (`release`: `POST /v1/admin/deletes/release` or `casement
//! release-deletes`, which also lets deletes through for one window), or the service
//! starts with `allow_mass_delete = true`. A hold is logged once with its count and
//! exported as `casement_source_deletes_held{source}`. Resent events (a source's start-up
//! resend of what it already sent) and the audit's own fixes are not counted.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::IntGaugeVec;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::source::SourceId;

/// `[sources]` settings of the guard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeleteGuardConfig {
    /// The largest share of the index's live documents one source may delete within
    /// `delete_window_secs` before its further deletes are held.
    pub max_delete_share: f64,
    /// The window deletes are counted over.
    pub delete_window_secs: u64,
    /// Lets every delete through (for one start: set it, start, unset it).
    pub allow_mass_delete: bool,
}

impl Default for DeleteGuardConfig {
    fn default() -> Self {
        Self {
            max_delete_share: 0.10,
            delete_window_secs: 600,
            allow_mass_delete: false,
        }
    }
}

impl DeleteGuardConfig {
    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        if !(self.max_delete_share.is_finite() && (0.0..=1.0).contains(&self.max_delete_share)) {
            return Err(format!(
                "{prefix}.max_delete_share = {} must be between 0 and 1 (a share of the index's live documents)",
                self.max_delete_share
            ));
        }
        if self.delete_window_secs == 0 {
            return Err(format!("{prefix}.delete_window_secs must be at least 1"));
        }
        Ok(())
    }

    fn window(&self) -> Duration {
        Duration::from_secs(self.delete_window_secs)
    }
}

/// What to do with a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Apply,
    Hold,
}

/// The guard, shared by every lane (and the watcher, which holds a folder that emptied
/// itself); cheap to clone.
#[derive(Debug, Clone)]
pub struct DeleteGuard {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: DeleteGuardConfig,
    state: Mutex<State>,
    /// Bumped by every release: parked deletes wake up and ask again.
    released: watch::Sender<u64>,
    held_gauge: IntGaugeVec,
}

#[derive(Debug, Default)]
struct State {
    /// Per source, when each delete let through in the window was.
    recent: HashMap<&'static str, VecDeque<Instant>>,
    /// Per source, deletes held now in lanes.
    held: HashMap<&'static str, i64>,
    /// Per source, documents a source holds itself (a watched folder taken as not
    /// mounted).
    kept: HashMap<&'static str, i64>,
    /// Sources whose hold was logged (once per hold).
    announced: HashMap<&'static str, bool>,
    /// Until when an operator's release lets every delete through.
    released_until: Option<Instant>,
    /// Documents indexed within the window (an upsert applied), with when.
    indexed: HashMap<(Option<String>, String), Instant>,
    /// The same, in order, to forget them once out of the window.
    indexed_order: VecDeque<(Instant, (Option<String>, String))>,
}

impl DeleteGuard {
    /// The guard, exporting `casement_source_deletes_held` through `held_gauge` (the
    /// pipeline's metrics).
    pub fn new(config: DeleteGuardConfig, held_gauge: IntGaugeVec) -> Self {
        if config.allow_mass_delete {
            tracing::warn!(
                "sources.allow_mass_delete is set: every delete is applied, however many; unset it once the deletes it was set for are done"
            );
        }
        let (released, _) = watch::channel(0);
        Self {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(State::default()),
                released,
                held_gauge,
            }),
        }
    }

    /// A guard that lets everything through (tests, one-off tools).
    pub fn disabled() -> Self {
        Self::new(
            DeleteGuardConfig {
                allow_mass_delete: true,
                ..DeleteGuardConfig::default()
            },
            IntGaugeVec::new(
                prometheus::Opts::new("casement_source_deletes_held", "unregistered"),
                &["source"],
            )
            .unwrap_or_else(|_| unreachable!("constant metric")),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An upsert of the document (`tenant`, `doc_id`) was applied: its delete within the
    /// window loses nothing that was there before the burst.
    pub fn indexed(&self, tenant: Option<&str>, doc_id: &str) {
        let now = Instant::now();
        let window = self.inner.config.window();
        let key = (tenant.map(str::to_owned), doc_id.to_owned());
        let mut state = self.lock();
        state.indexed.insert(key.clone(), now);
        state.indexed_order.push_back((now, key));
        while let Some((at, _)) = state.indexed_order.front() {
            if now.duration_since(*at) <= window {
                break;
            }
            if let Some((at, key)) = state.indexed_order.pop_front()
                && state.indexed.get(&key) == Some(&at)
            {
                state.indexed.remove(&key);
            }
        }
    }

    /// Whether a delete of (`tenant`, `doc_id`) from `source` may be applied now, with
    /// `live` documents in the index. An applied one is counted.
    pub fn decide(
        &self,
        source: SourceId,
        tenant: Option<&str>,
        doc_id: &str,
        live: u64,
    ) -> Verdict {
        let config = &self.inner.config;
        let now = Instant::now();
        let mut state = self.lock();
        let released = state.released_until.is_some_and(|until| now < until);
        let window = config.window();
        let key = (tenant.map(str::to_owned), doc_id.to_owned());
        if state
            .indexed
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) <= window)
        {
            return Verdict::Apply;
        }
        let recent = state.recent.entry(source.name()).or_default();
        while recent
            .front()
            .is_some_and(|at| now.duration_since(*at) > window)
        {
            recent.pop_front();
        }
        if config.allow_mass_delete || released {
            recent.push_back(now);
            return Verdict::Apply;
        }
        // The live documents when the window began: those left plus those deleted since.
        let baseline = live as f64 + recent.len() as f64;
        let allowed = (config.max_delete_share * baseline).max(1.0);
        if (recent.len() + 1) as f64 <= allowed {
            recent.push_back(now);
            return Verdict::Apply;
        }
        let deleted = recent.len();
        let announced = state.announced.entry(source.name()).or_insert(false);
        if !*announced {
            *announced = true;
            tracing::warn!(
                source = source.name(),
                deleted_in_window = deleted,
                live,
                window_secs = config.delete_window_secs,
                max_delete_share = config.max_delete_share,
                "holding deletes: this source would delete more than sources.max_delete_share of the index's live documents within sources.delete_window_secs; nothing more is deleted until an operator releases them (POST /v1/admin/deletes/release, `casement release-deletes`, or sources.allow_mass_delete = true for one start)"
            );
        }
        Verdict::Hold
    }

    /// A delete of `source` is held (`1`) or no longer (`-1`): the exported count.
    pub fn count_held(&self, source: SourceId, change: i64) {
        let mut state = self.lock();
        let held = state.held.entry(source.name()).or_insert(0);
        *held = (*held + change).max(0);
        if *held == 0 {
            state.announced.insert(source.name(), false);
        }
        self.export(&state, source);
    }

    /// Sets how many documents `source` holds itself (a watched folder that lists nothing).
    pub fn set_held(&self, source: SourceId, held: i64) {
        let mut state = self.lock();
        state.kept.insert(source.name(), held.max(0));
        self.export(&state, source);
    }

    fn export(&self, state: &State, source: SourceId) {
        let name = source.name();
        let total =
            state.held.get(name).copied().unwrap_or(0) + state.kept.get(name).copied().unwrap_or(0);
        self.inner.held_gauge.with_label_values(&[name]).set(total);
    }

    /// Deletes held now, over every source.
    pub fn held(&self) -> i64 {
        let state = self.lock();
        state.held.values().chain(state.kept.values()).sum()
    }

    /// An operator's release: every held delete is applied, and every delete for the next
    /// window too (a watcher sends the deletes of a folder it held only now). Returns how
    /// many were held.
    pub fn release(&self) -> i64 {
        let held = {
            let mut state = self.lock();
            state.released_until = Some(Instant::now() + self.inner.config.window());
            state.recent.clear();
            state.announced.clear();
            state.held.values().chain(state.kept.values()).sum()
        };
        tracing::warn!(held, "an operator released the held deletes");
        self.inner.released.send_modify(|n| *n += 1);
        held
    }

    /// Changes with each release.
    pub fn releases(&self) -> watch::Receiver<u64> {
        self.inner.released.subscribe()
    }

    /// How many releases so far.
    pub fn release_count(&self) -> u64 {
        *self.inner.released.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(share: f64) -> DeleteGuard {
        let gauge = IntGaugeVec::new(prometheus::Opts::new("held", "held"), &["source"])
            .unwrap_or_else(|_| unreachable!());
        DeleteGuard::new(
            DeleteGuardConfig {
                max_delete_share: share,
                ..DeleteGuardConfig::default()
            },
            gauge,
        )
    }

    /// 10% of 100 documents: ten deletes pass, the eleventh is held, and so is every
    /// later one; another source counts apart; a release lets them all through.
    #[test]
    fn deletes_past_the_share_are_held_until_released() {
        let guard = guard(0.10);
        let mut live = 100;
        let kafka = SourceId::Kafka { partition: 0 };
        for n in 0..10 {
            assert_eq!(
                guard.decide(kafka, None, &format!("d{n}"), live),
                Verdict::Apply
            );
            live -= 1;
        }
        assert_eq!(guard.decide(kafka, None, "d10", live), Verdict::Hold);
        assert_eq!(guard.decide(kafka, None, "d11", live), Verdict::Hold);
        assert_eq!(
            guard.decide(SourceId::Webhook, None, "d12", live),
            Verdict::Apply
        );
        // A document indexed within the window: its delete loses nothing older.
        guard.indexed(None, "new-page");
        assert_eq!(guard.decide(kafka, None, "new-page", live), Verdict::Apply);
        guard.count_held(SourceId::Kafka { partition: 0 }, 1);
        guard.count_held(SourceId::Kafka { partition: 0 }, 1);
        assert_eq!(guard.held(), 2);
        let before = guard.release_count();
        assert_eq!(guard.release(), 2);
        assert_eq!(guard.release_count(), before + 1);
        for n in 0..50 {
            assert_eq!(
                guard.decide(kafka, None, &format!("e{n}"), live),
                Verdict::Apply
            );
            live -= 1;
        }
    }

    /// One delete in a window always passes, whatever the index's size; a second one in
    /// an index of five documents is held.
    #[test]
    fn one_delete_is_immediate_even_in_a_small_index() {
        let guard = guard(0.10);
        assert_eq!(guard.decide(SourceId::Watch, None, "a", 5), Verdict::Apply);
        assert_eq!(guard.decide(SourceId::Watch, None, "b", 4), Verdict::Hold);
        let open = DeleteGuard::disabled();
        for live in (0..20).rev() {
            assert_eq!(
                open.decide(SourceId::Watch, None, "c", live),
                Verdict::Apply
            );
        }
    }
}
