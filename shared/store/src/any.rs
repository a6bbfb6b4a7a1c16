//! The backend chosen by configuration, behind the same contract.

use std::collections::HashMap;

use casement_text::{ChangePlan, DocRef, DocumentState, SentenceRecord};
use uuid::Uuid;

use crate::config::{Backend, StoreConfig};
use crate::{Applied, EdgeStore, Hit, HybridQuery, Result, ServerStore, Store, StoreStats};

/// Either backend, as `store.backend` says.
#[derive(Debug, Clone)]
pub enum AnyStore {
    Edge(EdgeStore),
    Server(ServerStore),
}

impl AnyStore {
    /// Opens (creating when missing) the configured store for dense vectors of `dimension`.
    pub async fn open(config: &StoreConfig, dimension: usize) -> Result<Self> {
        match config.backend {
            Backend::Edge => {
                let config = config.clone();
                tokio::task::spawn_blocking(move || EdgeStore::open(&config, dimension))
                    .await
                    .map_err(|e| crate::Error::backend("open", e))?
                    .map(Self::Edge)
            }
            Backend::Server => ServerStore::open(config, dimension).await.map(Self::Server),
        }
    }

    /// Bulk loading (a backfill): on Edge, the vector index is not built while it is on;
    /// turning it off builds it (see [`EdgeStore::set_bulk`]). A server builds its index
    /// with its own optimizer.
    pub fn set_bulk(&self, on: bool) {
        if let Self::Edge(store) = self {
            store.set_bulk(on);
        }
    }

    /// Builds the vector index now and returns when it is done (Edge); on a server, whose
    /// optimizer runs on its own, waits until it is done.
    pub async fn optimize(&self) -> Result<bool> {
        match self {
            Self::Edge(store) => store.optimize().await,
            Self::Server(store) => store.optimize().await,
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            AnyStore::Edge($store) => $call,
            AnyStore::Server($store) => $call,
        }
    };
}

impl Store for AnyStore {
    fn dimension(&self) -> usize {
        dispatch!(self, s => s.dimension())
    }

    async fn document<'a>(
        &self,
        doc: impl Into<DocRef<'a>> + Send,
    ) -> Result<Option<DocumentState>> {
        let doc = doc.into();
        dispatch!(self, s => s.document(doc).await)
    }

    async fn records<'a>(&self, doc: impl Into<DocRef<'a>> + Send) -> Result<Vec<SentenceRecord>> {
        let doc = doc.into();
        dispatch!(self, s => s.records(doc).await)
    }

    async fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        dispatch!(self, s => s.apply_first(plan, vectors, count).await)
    }

    async fn query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
        dispatch!(self, s => s.query(query).await)
    }

    async fn dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        dispatch!(self, s => s.dense_vectors(ids).await)
    }

    async fn stats(&self) -> Result<StoreStats> {
        dispatch!(self, s => s.stats().await)
    }

    async fn documents(&self) -> Result<Vec<crate::IndexedDocument>> {
        dispatch!(self, s => s.documents().await)
    }

    async fn settings(&self) -> Result<Option<crate::IndexSettings>> {
        dispatch!(self, s => s.settings().await)
    }

    async fn record_settings(&self, settings: &crate::IndexSettings) -> Result<()> {
        dispatch!(self, s => s.record_settings(settings).await)
    }

    fn bind_settings(&self, ours: &crate::IndexSettings, access: crate::Access) {
        dispatch!(self, s => s.bind_settings(ours, access))
    }

    async fn sync(&self) -> Result<()> {
        dispatch!(self, s => s.sync().await)
    }
}
