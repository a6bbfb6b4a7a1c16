//! The migration inside `casement run`: `POST /v1/admin/migrations` builds the new index
//! while the service keeps indexing events into the serving one and answering searches
//! from it; passes copy what changed meanwhile; the gate runs; then the swap pauses the
//! pipeline (the events in hand finish, new ones wait), copies the last changes, points
//! `serving.json` at the new index and replaces, as one each, the pipeline's processor
//! and the searcher's index and model. Searches never wait: one under way finishes on the
//! index it started with. `POST /v1/admin/migrations/rollback` does the same back to the
//! index the last migration replaced, brought up to date first. `GET /v1/admin/migrations`
//! says where it stands (the routes and `casement migrate --url` in [`super::http`]).
//! Operator routes: with `[auth] keys`, a key bound to no tenant.

use std::sync::Arc;
use std::time::Instant;

use casement_inference::Embed;
use casement_pipeline::migrate::Progress;
use casement_pipeline::{Metrics, ProcessorSlot};
use casement_query::App;
use casement_query::config::AuthConfig;
use casement_query::error::ApiError;
use casement_store::AnyStore;

use super::build::{self, Opened};
use super::config::{ConfigSource, reverse};
use super::http::{MigrateRequest, Phase, RollbackRequest, Status};
use super::metrics::MigrationMetrics;
use super::{catch_up, gate};
use crate::config::CasementConfig;
use crate::pointer::Pointer;
use crate::serving::Serving;

/// Longest wait for the events in hand before a swap.
const PAUSE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Longest time an index is kept for a rollback (ten years).
pub(super) const MAX_KEEP_HOURS: u64 = 24 * 365 * 10;

mod swap;

pub struct Online {
    pub source: ConfigSource,
    /// What names the served index (`serving.json` or the server's alias); an error when
    /// this configuration cannot migrate (`store.edge.path` set).
    pointer: Result<Pointer, String>,
    pub slot: Arc<ProcessorSlot<AnyStore>>,
    pub app: Arc<App<AnyStore>>,
    pub pipeline_metrics: Metrics,
    pub auth: AuthConfig,
    /// The serving index's configuration and model (after a swap, the new index's).
    serving: std::sync::Mutex<(CasementConfig, Arc<dyn Embed>)>,
    /// The pairs this process's swaps applied over the configuration it started with (its
    /// file and environment): a later migration's target is those and its own pairs.
    applied: std::sync::Mutex<Vec<String>>,
    status: std::sync::Mutex<Status>,
    /// Held by the migration or rollback under way: one at a time.
    busy: Arc<tokio::sync::Mutex<()>>,
    metrics: MigrationMetrics,
}

impl std::fmt::Debug for Online {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Online")
            .field("pointer", &self.pointer)
            .finish_non_exhaustive()
    }
}

impl Online {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        source: ConfigSource,
        config: CasementConfig,
        model: Arc<dyn Embed>,
        slot: Arc<ProcessorSlot<AnyStore>>,
        app: Arc<App<AnyStore>>,
        pipeline_metrics: Metrics,
        registry: &prometheus::Registry,
    ) -> Arc<Self> {
        let serving = match &slot.current().store {
            AnyStore::Edge(_) => Serving::load(&config.data_dir)
                .map(|s| s.index)
                .unwrap_or_default(),
            AnyStore::Server(store) => store.collection(),
        };
        Arc::new(Self {
            source,
            pointer: Pointer::of(&config).map_err(|e| format!("{e:#}")),
            auth: config.auth.clone(),
            slot,
            app,
            pipeline_metrics,
            serving: std::sync::Mutex::new((config, model)),
            applied: std::sync::Mutex::new(Vec::new()),
            status: std::sync::Mutex::new(Status {
                serving,
                ..Status::default()
            }),
            busy: Arc::new(tokio::sync::Mutex::new(())),
            metrics: MigrationMetrics::new(registry),
        })
    }

    /// Where the migrations stand. After a restart, a migration the pointer records as
    /// under way and that nothing here runs is `interrupted` (posting the same request
    /// again resumes it), not `idle`.
    pub async fn status(&self) -> Status {
        let status = self.current_status();
        if status.phase != Phase::Idle || self.busy.try_lock().is_err() {
            return status;
        }
        let Ok(pointer) = self.pointer() else {
            return status;
        };
        match pointer.load().await {
            Ok(serving) => match serving.migration {
                Some(underway) => Status {
                    phase: Phase::Interrupted,
                    target: Some(underway.target),
                    set: underway.set,
                    error: Some(
                        "a migration was under way when the service stopped; post the same \
                         request again to resume it"
                            .into(),
                    ),
                    ..status
                },
                None => status,
            },
            Err(error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "cannot read the serving pointer"
                );
                status
            }
        }
    }

    pub(super) fn current_status(&self) -> Status {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn update(&self, change: impl FnOnce(&mut Status)) {
        if let Ok(mut status) = self.status.lock() {
            change(&mut status);
        }
    }

    /// The pairs applied so far, then `more`.
    fn pairs(&self, more: &[String]) -> Vec<String> {
        let applied = match self.applied.lock() {
            Ok(applied) => applied.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        applied.into_iter().chain(more.iter().cloned()).collect()
    }

    fn serving(&self) -> (CasementConfig, Arc<dyn Embed>) {
        match self.serving.lock() {
            Ok(serving) => serving.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Starts a migration; its target configuration is checked before this returns.
    pub fn start(self: &Arc<Self>, request: MigrateRequest) -> Result<Status, ApiError> {
        let guard = self
            .busy
            .clone()
            .try_lock_owned()
            .map_err(|_| ApiError::Conflict("a migration or rollback is under way".into()))?;
        let (running, _) = self.serving();
        let invalid = |e: anyhow::Error| ApiError::Invalid(format!("{e:#}"));
        self.pointer()?;
        let target = self
            .source
            .target(&running, &self.pairs(&request.set))
            .map_err(invalid)?;
        // What brings the serving configuration back: checked now, not after the copy.
        let restore = reverse(&request.set, &running).map_err(invalid)?;
        self.update(|s| {
            *s = Status {
                phase: Phase::Building,
                serving: s.serving.clone(),
                set: request.set.clone(),
                ..Status::default()
            };
        });
        self.metrics.in_progress.set(1);
        let online = self.clone();
        tokio::spawn(async move {
            let work = online.clone();
            // A panic in the migration ends it as failed, not stuck in its phase.
            let result = tokio::spawn(async move { work.migrate(request, target, restore).await })
                .await
                .unwrap_or_else(|e| Err(anyhow::anyhow!("the migration task ended: {e}")));
            online.finish(result);
            drop(guard);
        });
        Ok(self.current_status())
    }

    fn pointer(&self) -> Result<&Pointer, ApiError> {
        self.pointer
            .as_ref()
            .map_err(|e| ApiError::Invalid(e.clone()))
    }

    /// Starts a rollback to the index the last migration replaced.
    pub async fn start_rollback(
        self: &Arc<Self>,
        request: RollbackRequest,
    ) -> Result<Status, ApiError> {
        let guard = self
            .busy
            .clone()
            .try_lock_owned()
            .map_err(|_| ApiError::Conflict("a migration or rollback is under way".into()))?;
        let pointer = self.pointer()?;
        let unavailable = |e: anyhow::Error| ApiError::Unavailable(format!("{e:#}"));
        let serving = pointer.load().await.map_err(unavailable)?;
        let previous = serving.previous.ok_or_else(|| {
            ApiError::Conflict("nothing to roll back to: no index was replaced".into())
        })?;
        if !pointer.exists(&previous.index).await.map_err(unavailable)? {
            return Err(ApiError::Conflict(format!(
                "the replaced index {} is gone",
                previous.index
            )));
        }
        let (running, _) = self.serving();
        let invalid = |e: anyhow::Error| ApiError::Invalid(format!("{e:#}"));
        let earlier = self
            .source
            .target(&running, &self.pairs(&previous.restore))
            .map_err(invalid)?;
        let undo = reverse(&previous.restore, &running).map_err(invalid)?;
        self.update(|s| {
            *s = Status {
                phase: Phase::RollingBack,
                serving: s.serving.clone(),
                target: Some(previous.index.clone()),
                set: previous.restore.clone(),
                ..Status::default()
            };
        });
        self.metrics.in_progress.set(1);
        let online = self.clone();
        tokio::spawn(async move {
            let work = online.clone();
            let result = tokio::spawn(async move {
                work.rollback(
                    previous.index,
                    previous.restore,
                    undo,
                    earlier,
                    request.keep_hours,
                )
                .await
            })
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the rollback task ended: {e}")));
            online.finish(result);
            drop(guard);
        });
        Ok(self.current_status())
    }

    fn finish(&self, result: anyhow::Result<Phase>) {
        self.metrics.in_progress.set(0);
        let outcome = match &result {
            Ok(Phase::Swapped) => "swapped",
            Ok(Phase::Refused) => "refused",
            Ok(Phase::RolledBack) => "rolled_back",
            _ => "failed",
        };
        self.metrics.runs.with_label_values(&[outcome]).inc();
        match result {
            Ok(phase) => self.update(|s| {
                s.phase = phase;
                s.progress = None;
            }),
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "migration failed");
                self.update(|s| {
                    s.phase = Phase::Failed;
                    s.progress = None;
                    s.error = Some(format!("{error:#}"));
                });
            }
        }
    }

    async fn migrate(
        self: &Arc<Self>,
        request: MigrateRequest,
        target: CasementConfig,
        restore: Vec<String>,
    ) -> anyhow::Result<Phase> {
        let (running, model) = self.serving();
        let pointer = self.pointer().map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut serving = pointer.load().await?;
        self.finish_pending(pointer, &serving, &running).await?;
        pointer.forget_expired(&mut serving).await?;
        let name = pointer.begin(&mut serving, &request.set).await?;
        self.update(|s| s.target = Some(name.clone()));
        let source = self.slot.current().store.clone();
        build::check_source(&source, &target).await?;
        let new = Opened::open(pointer, &name, &target, Some((&running, &model))).await?;
        pointer.opened(&name, &request.set).await?;
        tracing::info!(index = %name, set = ?request.set, "migration: building the new index while serving the old");
        self.copy(&source, &new).await?;
        self.update(|s| s.phase = Phase::Gating);
        let gate = gate::gate(
            (&running, &source, &model),
            &new,
            request.margin,
            request.force,
        )
        .await?;
        self.update(|s| s.gate = Some(gate.clone()));
        if !gate.passed {
            tracing::warn!(index = %name, "migration refused by the golden-set gate; the new index is kept");
            return Ok(Phase::Refused);
        }
        self.update(|s| s.phase = Phase::Swapping);
        self.swap_to(new, restore, request.keep_hours, &request.set)
            .await?;
        Ok(Phase::Swapped)
    }

    async fn rollback(
        self: &Arc<Self>,
        index: String,
        restore: Vec<String>,
        undo: Vec<String>,
        earlier: CasementConfig,
        keep_hours: u64,
    ) -> anyhow::Result<Phase> {
        let (running, model) = self.serving();
        let pointer = self.pointer().map_err(|e| anyhow::anyhow!("{e}"))?;
        self.finish_pending(pointer, &pointer.load().await?, &running)
            .await?;
        let back = Opened::open(pointer, &index, &earlier, Some((&running, &model))).await?;
        let source = self.slot.current().store.clone();
        tracing::info!(index = %index, "rollback: bringing the previous index up to date");
        self.copy(&source, &back).await?;
        self.update(|s| s.phase = Phase::Swapping);
        self.swap_to(back, undo, keep_hours, &restore).await?;
        Ok(Phase::RolledBack)
    }

    /// A catch-up a stopped migration left (on a server), finished while this pipeline is
    /// paused: its writes to the same documents would race the catch-up's.
    async fn finish_pending(
        &self,
        pointer: &Pointer,
        serving: &Serving,
        running: &CasementConfig,
    ) -> anyhow::Result<()> {
        let Some(from) = pointer.pending_catch_up(serving).await? else {
            return Ok(());
        };
        let paused = tokio::time::timeout(PAUSE_WAIT, self.slot.pause())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the events in hand did not finish within {} s, so the pipeline was not \
                     paused for the catch-up a stopped migration left",
                    PAUSE_WAIT.as_secs()
                )
            })?;
        let finished = catch_up::finish(pointer, &serving.index, &from, &[running]).await;
        drop(paused);
        finished.map(drop)
    }

    /// Copy passes while events flow, then the vector index built.
    async fn copy(self: &Arc<Self>, source: &AnyStore, target: &Opened) -> anyhow::Result<()> {
        let started = Instant::now();
        target.store.set_bulk(true);
        let online = self.clone();
        let passes = build::copy(
            source,
            target,
            build::max_passes(),
            Some(build::SMALL_ENOUGH),
            &move |_| {
                Box::new(StatusProgress {
                    online: online.clone(),
                    done: std::sync::atomic::AtomicUsize::new(0),
                    embedded: std::sync::atomic::AtomicUsize::new(0),
                }) as Box<dyn Progress>
            },
        )
        .await;
        target.store.set_bulk(false);
        let passes = passes?;
        target.store.optimize().await?;
        let embedded: usize = passes.iter().map(|p| p.embedded).sum();
        let copied: usize = passes.iter().map(|p| p.copied).sum();
        self.metrics.documents.inc_by(copied as u64);
        self.metrics.sentences.inc_by(embedded as u64);
        let rate = embedded as f64 / started.elapsed().as_secs_f64().max(1e-9);
        self.update(|s| {
            s.passes = passes;
            s.progress = None;
            s.sentences_per_second = Some(rate);
        });
        Ok(())
    }
}

struct StatusProgress {
    online: Arc<Online>,
    done: std::sync::atomic::AtomicUsize,
    embedded: std::sync::atomic::AtomicUsize,
}

impl Progress for StatusProgress {
    fn started(&self, to_copy: usize) {
        self.online.update(|s| s.progress = Some([0, to_copy, 0]));
    }

    fn copied(&self, sentences: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let done = self.done.fetch_add(1, Relaxed) + 1;
        let embedded = self.embedded.fetch_add(sentences, Relaxed) + sentences;
        self.online.update(|s| {
            if let Some(progress) = &mut s.progress {
                progress[0] = done;
                progress[2] = embedded;
            }
        });
    }
}
