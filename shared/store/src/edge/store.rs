//! The store contract over the engine: every call runs on Tokio's blocking pool.

use std::collections::HashMap;

use casement_text::{ChangePlan, DocRef, DocumentState, SentenceRecord};
use uuid::Uuid;

use super::{EdgeStore, blocking};
use crate::error::Result;
use crate::{Applied, Hit, HybridQuery, Store, StoreStats};

impl Store for EdgeStore {
    fn dimension(&self) -> usize {
        self.inner.dimension
    }

    async fn document<'a>(
        &self,
        doc: impl Into<DocRef<'a>> + Send,
    ) -> Result<Option<DocumentState>> {
        let doc = doc.into();
        let inner = self.inner.clone();
        let (tenant, doc_id) = (doc.tenant.map(str::to_owned), doc.doc_id.to_owned());
        blocking(move || inner.document(DocRef::new(tenant.as_deref(), &doc_id))).await
    }

    async fn records<'a>(&self, doc: impl Into<DocRef<'a>> + Send) -> Result<Vec<SentenceRecord>> {
        let doc = doc.into();
        let inner = self.inner.clone();
        let (tenant, doc_id) = (doc.tenant.map(str::to_owned), doc.doc_id.to_owned());
        blocking(move || inner.records(DocRef::new(tenant.as_deref(), &doc_id))).await
    }

    async fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        let (inner, plan, vectors) = (self.inner.clone(), plan.clone(), vectors.to_vec());
        let applied = blocking({
            let inner = inner.clone();
            move || inner.apply_first(&plan, &vectors, count)
        })
        .await?;
        inner.build_if_due();
        Ok(applied)
    }

    async fn sync(&self) -> Result<()> {
        if !self.inner.sync_writes {
            return Ok(());
        }
        let inner = self.inner.clone();
        blocking(move || {
            inner.sync()?;
            inner.compact_if_due();
            Ok(())
        })
        .await
    }

    async fn query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
        let (inner, query) = (self.inner.clone(), query.clone());
        blocking(move || inner.query(&query)).await
    }

    async fn dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        let (inner, ids) = (self.inner.clone(), ids.to_vec());
        blocking(move || inner.dense_vectors(&ids)).await
    }

    async fn stats(&self) -> Result<StoreStats> {
        let inner = self.inner.clone();
        blocking(move || inner.stats()).await
    }

    async fn documents(&self) -> Result<Vec<crate::IndexedDocument>> {
        let inner = self.inner.clone();
        blocking(move || inner.documents()).await
    }

    async fn settings(&self) -> Result<Option<crate::IndexSettings>> {
        let inner = self.inner.clone();
        blocking(move || inner.settings()).await
    }

    async fn record_settings(&self, settings: &crate::IndexSettings) -> Result<()> {
        let (inner, settings) = (self.inner.clone(), settings.clone());
        blocking(move || inner.record_settings(&settings)).await
    }
}
