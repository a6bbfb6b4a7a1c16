//! The fixed-chunk baseline, built with Casement's own components: each document cut into
//! consecutive chunks of at most `size` cl100k tokens (at word boundaries, no overlap:
//! what a token text splitter does), one point per chunk in the same store (Qdrant Edge,
//! the same BM25 over the same text) with the same embedding model, whose input is the
//! title and the chunk (as Casement embeds the title with each sentence). Chunks are
//! embedded whole: the model reads up to 512 of its tokens, its position limit.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use casement_inference::{Embed, EmbedderConfig, OnnxEmbedder};
use casement_store::{Channels, EdgeStore, HybridQuery, QueryFilter, Store, StoreConfig};
use casement_text::records::{Position, point_id};
use casement_text::{ChangePlan, DocRef, DocumentState, SentenceRecord};
use tiktoken_rs::CoreBPE;
use uuid::Uuid;

use crate::data::Doc;
use crate::score::{Passage, tokens};

/// A chunk's place in its document, in characters.
struct Chunk {
    start: usize,
    end: usize,
    text: String,
}

/// Consecutive chunks of at most `size` cl100k tokens, cut at whitespace.
fn cut(bpe: &CoreBPE, text: &str, size: usize) -> Vec<Chunk> {
    // Words with their character ranges; a word's cost is its tokens with a leading space,
    // which is how cl100k splits running text.
    let mut words: Vec<(usize, usize, usize, usize)> = Vec::new(); // chars, bytes
    let mut start: Option<(usize, usize)> = None;
    let mut chars = 0;
    for (byte, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some((cs, bs)) = start.take() {
                words.push((cs, chars, bs, byte));
            }
        } else if start.is_none() {
            start = Some((chars, byte));
        }
        chars += 1;
    }
    if let Some((cs, bs)) = start {
        words.push((cs, chars, bs, text.len()));
    }
    let mut out: Vec<Chunk> = Vec::new();
    let mut first = 0;
    while first < words.len() {
        let mut used = 0;
        let mut last = first;
        while last < words.len() {
            let (_, _, bs, be) = words[last];
            let cost = tokens(bpe, &format!(" {}", &text[bs..be])).max(1);
            if used + cost > size && last > first {
                break;
            }
            used += cost;
            last += 1;
        }
        let (cs, _, bs, _) = words[first];
        let (_, ce, _, be) = words[last - 1];
        out.push(Chunk {
            start: cs,
            end: ce,
            text: text[bs..be].to_owned(),
        });
        first = last;
    }
    out
}

pub struct ChunkIndex {
    store: EdgeStore,
    tokens: HashMap<Uuid, usize>,
}

impl ChunkIndex {
    /// Builds (or, with `reuse` and a complete index in `dir`, opens) the index of `docs`
    /// cut into `size`-token chunks.
    pub async fn build(
        dir: &Path,
        docs: &[Doc],
        size: usize,
        bpe: &CoreBPE,
        model: &OnnxEmbedder,
        reuse: bool,
    ) -> Self {
        let mut config = StoreConfig::default();
        config.edge.path = dir.join("index");
        config.edge.sync_writes = false;
        let done = dir.join("complete");
        let complete = reuse && done.exists();
        if !complete && dir.exists() {
            std::fs::remove_dir_all(dir).unwrap();
        }
        std::fs::create_dir_all(dir).unwrap();
        let store = EdgeStore::open(&config, model.dimension()).expect("chunk store");
        let started = Instant::now();
        let mut token_counts = HashMap::new();
        let mut embedded = 0;
        for (n, doc) in docs.iter().enumerate() {
            let chunks = cut(bpe, &doc.text, size);
            let doc_ref = DocRef::new(None, &doc.doc_id);
            let records: Vec<SentenceRecord> = chunks
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let hash = format!("chunk-{i}");
                    SentenceRecord {
                        public: true,
                        access_groups: Vec::new(),
                        id: point_id(doc_ref, "chunks", &hash, 0),
                        doc_id: doc.doc_id.clone(),
                        tenant: None,
                        revision: 1,
                        title: doc.title.clone(),
                        url: None,
                        revision_url: None,
                        metadata: Default::default(),
                        section_id: "chunks".to_owned(),
                        section_path: Vec::new(),
                        section_hash: String::new(),
                        section_char_start: 0,
                        sentence: c.text.clone(),
                        position: Position {
                            section: 0,
                            index: i as u32,
                            count: chunks.len() as u32,
                        },
                        char_start: c.start,
                        char_end: c.end,
                        window: c.text.clone(),
                        window_char_start: c.start,
                        window_char_end: c.end,
                        context: doc.title.clone(),
                        context_source: "structural".to_owned(),
                        text_hash: hash.clone(),
                        embed_hash: hash,
                        cite: Default::default(),
                    }
                })
                .collect();
            for r in &records {
                token_counts.insert(r.id, tokens(bpe, &r.sentence));
            }
            if complete {
                continue;
            }
            let inputs: Vec<String> = records
                .iter()
                .map(SentenceRecord::embedding_input)
                .collect();
            let vectors = model
                .embed(&inputs.iter().map(String::as_str).collect::<Vec<_>>())
                .expect("embedding chunks");
            embedded += records.len();
            let plan = ChangePlan {
                doc_id: doc.doc_id.clone(),
                revision: 1,
                document: DocumentState {
                    public: true,
                    access_groups: Vec::new(),
                    doc_id: doc.doc_id.clone(),
                    revision: 1,
                    deleted: false,
                    title: doc.title.clone(),
                    url: None,
                    revision_url: None,
                    tenant: None,
                    sentence_count: records.len(),
                    section_count: 1,
                },
                embed: records,
                update_payload: Vec::new(),
                delete: Vec::new(),
                unchanged: 0,
                reused_sections: 0,
                restore: false,
            };
            store.apply(&plan, &vectors).await.expect("chunk write");
            if n % 500 == 499 {
                eprintln!(
                    "  {size}-token chunks: {} of {} documents, {embedded} chunks, {:.0} s",
                    n + 1,
                    docs.len(),
                    started.elapsed().as_secs_f64()
                );
            }
        }
        if !complete {
            store.sync().await.expect("sync");
            std::fs::write(&done, "").unwrap();
            eprintln!(
                "  {size}-token chunks: {embedded} chunks of {} documents embedded in {:.0} s",
                docs.len(),
                started.elapsed().as_secs_f64()
            );
        }
        Self {
            store,
            tokens: token_counts,
        }
    }

    pub fn chunks(&self) -> usize {
        self.tokens.len()
    }

    pub async fn search(
        &self,
        dense: &[f32],
        text: &str,
        channels: Channels,
        limit: usize,
    ) -> Vec<Passage> {
        let hits = self
            .store
            .query(&HybridQuery {
                dense: dense.to_vec(),
                text: text.to_owned(),
                limit,
                candidates: 100,
                filter: QueryFilter::default(),
                channels,
                channel_ranks: false,
            })
            .await
            .expect("chunk query");
        hits.into_iter()
            .map(|h| Passage {
                tokens: self.tokens.get(&h.record.id).copied().unwrap_or(0),
                doc_id: h.record.doc_id,
                char_start: h.record.char_start,
                char_end: h.record.char_end,
            })
            .collect()
    }
}

/// The embedder chunks are embedded with: the service's model and settings, reading up
/// to the model's 512-token position limit.
pub fn chunk_embedder() -> OnnxEmbedder {
    OnnxEmbedder::load(&EmbedderConfig {
        max_tokens: 512,
        ..EmbedderConfig::default()
    })
    .expect("the embedding model (make models)")
}
