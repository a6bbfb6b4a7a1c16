//! The store probe: one task per process asks the store for its [`StoreStats`] every few
//! seconds. Readiness (`/readyz`) reads [`StoreProbe::reachable`]; the index gauges are fed
//! from the same answer (`on_stats`), so one probe serves both. The task ends when the last
//! handle is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::{Store, StoreStats};

/// How often the store is asked.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// A handle on the probe's latest answer.
#[derive(Debug, Clone, Default)]
pub struct StoreProbe(Arc<AtomicBool>);

impl StoreProbe {
    /// Starts the probe on the current Tokio runtime; `on_stats` gets every answer.
    pub fn spawn<S, F>(store: S, on_stats: F) -> Self
    where
        S: Store + 'static,
        F: Fn(&StoreStats) + Send + 'static,
    {
        let reachable = Arc::new(AtomicBool::new(false));
        let weak: Weak<AtomicBool> = Arc::downgrade(&reachable);
        tokio::spawn(async move {
            while let Some(flag) = weak.upgrade() {
                let ok = match store.stats().await {
                    Ok(stats) => {
                        on_stats(&stats);
                        true
                    }
                    Err(error) => {
                        tracing::warn!(%error, "store probe failed");
                        false
                    }
                };
                if flag.swap(ok, Ordering::Relaxed) != ok {
                    tracing::info!(reachable = ok, "store probe");
                }
                drop(flag);
                tokio::time::sleep(PROBE_INTERVAL).await;
            }
        });
        Self(reachable)
    }

    /// Whether the store answered the last probe (false until the first answer).
    pub fn reachable(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
