//! The store probe: one task per process asks the store for its [`StoreStats`] every few
//! seconds. Readiness (`/readyz`) reads [`StoreProbe::reachable`]; the index gauges are fed
//! from the same answer (`on_stats`), so one probe serves both. The task ends as soon as the
//! last handle is dropped, releasing its clone of the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::{Store, StoreStats};

/// How often the store is asked.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// A handle on the probe's latest answer.
#[derive(Debug, Clone)]
pub struct StoreProbe(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    reachable: Arc<AtomicBool>,
    /// Dropped with the last handle: the task sees its receiver close and stops.
    _stop: oneshot::Sender<()>,
}

impl StoreProbe {
    /// Starts the probe on the current Tokio runtime; `on_stats` gets every answer.
    pub fn spawn<S, F>(store: S, on_stats: F) -> Self
    where
        S: Store + 'static,
        F: Fn(&StoreStats) + Send + 'static,
    {
        let store = Arc::new(store);
        Self::spawn_asking(
            move || {
                let store = store.clone();
                async move { store.stats().await }
            },
            on_stats,
        )
    }

    /// [`StoreProbe::spawn`] over the store `current` gives at each probe (one that a
    /// migration's swap replaces).
    pub fn spawn_following<S, C, F>(current: C, on_stats: F) -> Self
    where
        S: Store + 'static,
        C: Fn() -> S + Send + Sync + 'static,
        F: Fn(&StoreStats) + Send + 'static,
    {
        Self::spawn_asking(
            move || {
                let store = current();
                async move { store.stats().await }
            },
            on_stats,
        )
    }

    fn spawn_asking<A, Q, F>(ask: A, on_stats: F) -> Self
    where
        A: Fn() -> Q + Send + Sync + 'static,
        Q: std::future::Future<Output = crate::Result<StoreStats>> + Send,
        F: Fn(&StoreStats) + Send + 'static,
    {
        let reachable = Arc::new(AtomicBool::new(false));
        let (stop_tx, mut stop) = oneshot::channel::<()>();
        let flag = reachable.clone();
        tokio::spawn(async move {
            let mut first = true;
            loop {
                let ok = tokio::select! {
                    _ = &mut stop => return,
                    answer = ask() => match answer {
                        Ok(stats) => {
                            on_stats(&stats);
                            true
                        }
                        Err(error) => {
                            // Once per outage, not every probe.
                            if first || flag.load(Ordering::Relaxed) {
                                tracing::warn!(%error, "the store does not answer");
                            }
                            false
                        }
                    },
                };
                if flag.swap(ok, Ordering::Relaxed) != ok {
                    tracing::debug!(reachable = ok, "store probe");
                }
                first = false;
                tokio::select! {
                    _ = &mut stop => return,
                    () = tokio::time::sleep(PROBE_INTERVAL) => {}
                }
            }
        });
        Self(Arc::new(Shared {
            reachable,
            _stop: stop_tx,
        }))
    }

    /// Whether the store answered the last probe (false until the first answer).
    pub fn reachable(&self) -> bool {
        self.0.reachable.load(Ordering::Relaxed)
    }
}
