//! The store contract, written once and run against every backend (`edge.rs`, and
//! `server.rs` when `QDRANT_URL` is set). Vectors come from the real embedding model
//! (`make models`); texts from the bundled 18F sample and small hand-written documents.

#![allow(dead_code)]

mod healing;
mod search;
mod writes;

pub use healing::cut_off_write_heals;
pub use search::{access_filter, metadata_filter, sparse_channel_finds_identifier, tenant_filter};
pub use writes::{
    delete_tombstone_stale, documents_listing, payload_update_keeps_vector, read_back_exactly,
    schema_and_reopen, settings_recorded_and_checked,
};

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::OnceLock;

use casement_inference::{Embed, EmbedderConfig, OnnxEmbedder};
use casement_store::{Applied, HybridQuery, QueryFilter, Store};
use casement_text::{
    ChangePlan, Fence, Format, Revision, SentenceRecord, TextConfig, fence, plan_upsert,
};
use uuid::Uuid;

/// Opens the backend's store at one fixed location: every call after the first reopens
/// what the earlier ones wrote.
pub trait Harness {
    type S: Store;
    fn open(&self) -> impl Future<Output = Self::S>;
}

pub fn embedder() -> &'static OnnxEmbedder {
    static EMBEDDER: OnceLock<OnnxEmbedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| {
        OnnxEmbedder::load(&EmbedderConfig::default()).expect("model loads (run `make models`)")
    })
}

pub const DIMENSION: usize = 384;

pub fn embed(texts: &[String]) -> Vec<Vec<f32>> {
    if texts.is_empty() {
        return Vec::new();
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    embedder().embed(&refs).expect("embeds")
}

pub fn plan_vectors(plan: &ChangePlan) -> Vec<Vec<f32>> {
    embed(
        &plan
            .embed
            .iter()
            .map(SentenceRecord::embedding_input)
            .collect::<Vec<_>>(),
    )
}

/// The metadata keys both harnesses declare (`store.indexed_metadata`).
pub const INDEXED_METADATA: [&str; 2] = ["team", "tier"];

pub fn markdown(doc_id: &str, revision: u64, tenant: Option<&str>, content: &str) -> Revision {
    Revision {
        access: None,
        metadata: Default::default(),
        doc_id: doc_id.to_owned(),
        revision,
        title: Some(format!("Title of {doc_id}")),
        url: Some(format!("https://wiki.example/{doc_id}")),
        tenant: tenant.map(str::to_owned),
        format: Format::Markdown,
        content: content.to_owned(),
        revision_url: None,
    }
}

/// What the pipeline does with one upsert: fence, read, plan, embed, write.
pub async fn index<S: Store>(store: &S, revision: &Revision) -> (ChangePlan, Applied) {
    let doc = casement_text::DocRef::new(revision.tenant.as_deref(), &revision.doc_id);
    let indexed = store.document(doc).await.expect("document");
    if let Fence::Stale { indexed_revision } = fence(indexed.as_ref(), revision.revision) {
        let (plan, _) = plan_upsert(&[], revision, &TextConfig::default()).expect("plan");
        return (plan, Applied::Stale { indexed_revision });
    }
    let current = store.records(doc).await.expect("records");
    let (plan, _) = plan_upsert(&current, revision, &TextConfig::default()).expect("plan");
    let applied = store
        .apply(&plan, &plan_vectors(&plan))
        .await
        .expect("apply");
    (plan, applied)
}

pub fn by_id(records: Vec<SentenceRecord>) -> BTreeMap<Uuid, SentenceRecord> {
    records.into_iter().map(|r| (r.id, r)).collect()
}

pub fn assert_close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: dimension");
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "{what}: vectors differ by {worst}");
}

pub const GUIDE: &str = "# Deploying\n\nDeploys run from the main branch. Every deploy is \
announced in the release channel. A failed deploy is rolled back automatically.\n\n\
## Credentials\n\nService accounts rotate their keys every ninety days. Ask the platform \
team for a new key. Never paste a key into a ticket.\n";

pub fn query(text: &str, limit: usize, filter: QueryFilter) -> HybridQuery {
    HybridQuery {
        dense: embed(&[text.to_owned()]).remove(0),
        text: text.to_owned(),
        limit,
        candidates: 50,
        filter,
        channels: casement_store::Channels::Hybrid,
        channel_ranks: true,
    }
}
