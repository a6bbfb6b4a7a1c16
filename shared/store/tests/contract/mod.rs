//! The store contract, written once and run against every backend (`edge.rs`, and
//! `server.rs` when `QDRANT_URL` is set). Vectors come from the real embedding model
//! (`make models`); texts from the bundled 18F sample and small hand-written documents.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::OnceLock;

use casement_inference::{Embed, EmbedderConfig, OnnxEmbedder};
use casement_store::{Applied, HybridQuery, QueryFilter, Store, delete_document};
use casement_text::{
    ChangePlan, Fence, Format, Revision, SentenceRecord, TextConfig, fence, plan_delete,
    plan_upsert,
};
use serde::Deserialize;
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

fn plan_vectors(plan: &ChangePlan) -> Vec<Vec<f32>> {
    embed(
        &plan
            .embed
            .iter()
            .map(SentenceRecord::embedding_input)
            .collect::<Vec<_>>(),
    )
}

pub fn markdown(doc_id: &str, revision: u64, tenant: Option<&str>, content: &str) -> Revision {
    Revision {
        doc_id: doc_id.to_owned(),
        revision,
        title: Some(format!("Title of {doc_id}")),
        url: Some(format!("https://wiki.example/{doc_id}")),
        tenant: tenant.map(str::to_owned),
        format: Format::Markdown,
        content: content.to_owned(),
    }
}

/// What the pipeline does with one upsert: fence, read, plan, embed, write.
pub async fn index<S: Store>(store: &S, revision: &Revision) -> (ChangePlan, Applied) {
    let indexed = store.document(&revision.doc_id).await.expect("document");
    if let Fence::Stale { indexed_revision } = fence(indexed.as_ref(), revision.revision, false) {
        let (plan, _) = plan_upsert(&[], revision, &TextConfig::default()).expect("plan");
        return (plan, Applied::Stale { indexed_revision });
    }
    let current = store.records(&revision.doc_id).await.expect("records");
    let (plan, _) = plan_upsert(&current, revision, &TextConfig::default()).expect("plan");
    let applied = store
        .apply(&plan, &plan_vectors(&plan))
        .await
        .expect("apply");
    (plan, applied)
}

fn by_id(records: Vec<SentenceRecord>) -> BTreeMap<Uuid, SentenceRecord> {
    records.into_iter().map(|r| (r.id, r)).collect()
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: dimension");
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-4, "{what}: vectors differ by {worst}");
}

const GUIDE: &str = "# Deploying\n\nDeploys run from the main branch. Every deploy is \
announced in the release channel. A failed deploy is rolled back automatically.\n\n\
## Credentials\n\nService accounts rotate their keys every ninety days. Ask the platform \
team for a new key. Never paste a key into a ticket.\n";

fn query(text: &str, limit: usize, filter: QueryFilter) -> HybridQuery {
    HybridQuery {
        dense: embed(&[text.to_owned()]).remove(0),
        text: text.to_owned(),
        limit,
        candidates: 50,
        filter,
        channel_ranks: true,
    }
}

/// A new store is empty; a reopened one has the same points, documents and answers.
pub async fn schema_and_reopen<H: Harness>(harness: &H) {
    let (before, hits_before) = {
        let store = harness.open().await;
        assert_eq!(store.dimension(), DIMENSION);
        let stats = store.stats().await.expect("stats");
        assert_eq!((stats.points, stats.documents, stats.tombstones), (0, 0, 0));
        index(&store, &markdown("guide", 1, None, GUIDE)).await;
        let stats = store.stats().await.expect("stats");
        assert_eq!((stats.points, stats.documents), (6, 1));
        let hits = store
            .query(&query(
                "how often do keys rotate",
                3,
                QueryFilter::default(),
            ))
            .await
            .expect("query");
        (store.records("guide").await.expect("records"), hits)
    };
    // Dropped: reopen from the same location.
    let store = harness.open().await;
    assert_eq!(
        by_id(store.records("guide").await.expect("records")),
        by_id(before)
    );
    let document = store
        .document("guide")
        .await
        .expect("document")
        .expect("indexed");
    assert_eq!((document.revision, document.sentence_count), (1, 6));
    let stats = store.stats().await.expect("stats");
    assert_eq!((stats.points, stats.documents), (6, 1));
    let hits = store
        .query(&query(
            "how often do keys rotate",
            3,
            QueryFilter::default(),
        ))
        .await
        .expect("query");
    assert_eq!(hits, hits_before);
    assert!(
        hits[0].record.sentence.contains("ninety days"),
        "{:?}",
        hits[0].record
    );
    // Writing after a reopen works too.
    index(
        &store,
        &markdown("guide", 2, None, &GUIDE.replace("ninety", "thirty")),
    )
    .await;
    assert_eq!(store.stats().await.expect("stats").points, 6);
}

/// What is written is read back exactly: records, vectors, document state.
pub async fn read_back_exactly<H: Harness>(harness: &H) {
    let store = harness.open().await;
    let (plan, applied) = index(&store, &markdown("guide", 7, Some("acme"), GUIDE)).await;
    assert_eq!(applied, Applied::Written);
    let stored = by_id(store.records("guide").await.expect("records"));
    assert_eq!(stored, by_id(plan.embed.clone()));
    assert_eq!(
        store.document("guide").await.expect("document"),
        Some(plan.document.clone())
    );
    let ids: Vec<Uuid> = plan.embed.iter().map(|r| r.id).collect();
    let vectors = store.dense_vectors(&ids).await.expect("vectors");
    assert_eq!(vectors.len(), ids.len());
    for (record, expected) in plan.embed.iter().zip(plan_vectors(&plan)) {
        assert_close(&vectors[&record.id], &expected, &record.sentence);
    }
    assert!(store.records("missing").await.expect("records").is_empty());
    assert_eq!(store.document("missing").await.expect("document"), None);
}

/// A sentence whose neighbours changed gets a payload-only update: its payload follows the
/// new revision and its vector is the one written first.
pub async fn payload_update_keeps_vector<H: Harness>(harness: &H) {
    let store = harness.open().await;
    let (first, _) = index(&store, &markdown("guide", 1, None, GUIDE)).await;
    let edited = GUIDE.replace(
        "Deploys run from the main branch.",
        "Deploys run from the main branch. They start at nine.",
    );
    let (second, _) = index(&store, &markdown("guide", 2, None, &edited)).await;
    assert_eq!(second.embed.len(), 1, "only the new sentence is embedded");
    assert!(
        !second.update_payload.is_empty(),
        "neighbours get payload updates"
    );
    let before: HashMap<Uuid, Vec<f32>> = first
        .embed
        .iter()
        .map(|r| r.id)
        .zip(plan_vectors(&first))
        .collect();
    let ids: Vec<Uuid> = second.update_payload.iter().map(|r| r.id).collect();
    let after = store.dense_vectors(&ids).await.expect("vectors");
    let stored = by_id(store.records("guide").await.expect("records"));
    for record in &second.update_payload {
        assert_close(&after[&record.id], &before[&record.id], &record.sentence);
        assert_eq!(&stored[&record.id], record, "payload follows revision 2");
        assert_eq!(stored[&record.id].revision, 2);
    }
    assert!(
        stored.values().all(|r| r.revision == 2),
        "every point is stamped"
    );
}

/// A delete leaves a tombstone; an upsert with an older or equal revision changes nothing;
/// a newer one brings the document back.
pub async fn delete_tombstone_stale<H: Harness>(harness: &H) {
    let store = harness.open().await;
    index(&store, &markdown("guide", 2, None, GUIDE)).await;
    index(
        &store,
        &markdown("other", 1, None, "# Other\n\nUnrelated text stays.\n"),
    )
    .await;
    assert_eq!(
        delete_document(&store, "guide", 3).await.expect("delete"),
        Applied::Written
    );
    assert!(store.records("guide").await.expect("records").is_empty());
    let tombstone = store
        .document("guide")
        .await
        .expect("document")
        .expect("tombstone");
    assert!(tombstone.deleted);
    assert_eq!(tombstone.revision, 3);
    let stats = store.stats().await.expect("stats");
    assert_eq!((stats.documents, stats.tombstones), (1, 1));
    // A late event of an older revision, planned as if the store were empty, and written
    // without the pipeline's fence: the store's own fence refuses it.
    for stale_revision in [2, 3] {
        let (plan, _) = plan_upsert(
            &[],
            &markdown("guide", stale_revision, None, GUIDE),
            &TextConfig::default(),
        )
        .expect("plan");
        let applied = store
            .apply(&plan, &plan_vectors(&plan))
            .await
            .expect("apply");
        assert_eq!(
            applied,
            Applied::Stale {
                indexed_revision: 3
            }
        );
        assert!(store.records("guide").await.expect("records").is_empty());
    }
    let hits = store
        .query(&query(
            "how often do keys rotate",
            10,
            QueryFilter::default(),
        ))
        .await
        .expect("query");
    assert!(hits.iter().all(|h| h.record.doc_id == "other"));
    // A newer revision applies.
    let (_, applied) = index(&store, &markdown("guide", 4, None, GUIDE)).await;
    assert_eq!(applied, Applied::Written);
    assert_eq!(store.records("guide").await.expect("records").len(), 6);
    assert_eq!(store.stats().await.expect("stats").tombstones, 0);
}

/// Error-code sentences that a dense model sees as near-identical: neighbouring codes
/// (ERR-4411, ERR-4413, ERR-4421, ...) in the same template, and the ERR-4412 sentence
/// phrased differently, deep in a longer sentence.
fn error_catalogue() -> String {
    let mut content = String::from("# Error catalogue\n\n");
    let causes = [
        (4410, "the session is missing"),
        (4411, "the upload exceeded the size limit"),
        (4413, "the account is locked after failed logins"),
        (4414, "the payment provider declined the card"),
        (4421, "the export job timed out"),
        (4142, "the webhook signature did not verify"),
        (4402, "the API key lacks the required scope"),
        (44120, "the workspace reached its seat limit"),
        (1244, "the file type is not supported"),
        (4512, "the request was rate limited"),
        (4415, "the SSO certificate expired"),
        (4416, "the database replica is read-only"),
    ];
    for (code, cause) in causes {
        content.push_str(&format!("Error ERR-{code} is shown when {cause}.\n\n"));
    }
    content.push_str(
        "When the mobile app signs a user out without warning and the logs show ERR-4412, \
         the refresh token was revoked by an administrator, so the user has to sign in again.\n\n",
    );
    content
}

/// An exact identifier is found through the BM25 channel even when the dense channel
/// ranks its sentence low.
pub async fn sparse_channel_finds_identifier<H: Harness>(harness: &H) {
    let store = harness.open().await;
    index(&store, &markdown("errors", 1, None, &error_catalogue())).await;
    let hits = store
        .query(&query("ERR-4412", 5, QueryFilter::default()))
        .await
        .expect("query");
    let position = hits
        .iter()
        .position(|h| h.record.sentence.contains("ERR-4412"))
        .unwrap_or_else(|| panic!("ERR-4412 not in the fused top 5: {hits:#?}"));
    let hit = &hits[position];
    assert_eq!(hit.sparse_rank, Some(1), "BM25 ranks the identifier first");
    let dense_rank = hit.dense_rank.unwrap_or(usize::MAX);
    eprintln!(
        "ERR-4412: dense rank {dense_rank}, sparse rank {:?}, fused position {position}",
        hit.sparse_rank
    );
    assert!(
        dense_rank > 3,
        "the dense channel alone ranks it {dense_rank}, so this test would not show the sparse channel"
    );
    assert!(
        position < 2,
        "fusion keeps it near the top (position {position})"
    );
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "fused order"
    );
}

/// A query filtered by tenant never sees another tenant's points; a document filter
/// keeps to its documents.
pub async fn tenant_filter<H: Harness>(harness: &H) {
    let store = harness.open().await;
    index(&store, &markdown("acme-guide", 1, Some("acme"), GUIDE)).await;
    index(&store, &markdown("globex-guide", 1, Some("globex"), GUIDE)).await;
    index(&store, &markdown("public-guide", 1, None, GUIDE)).await;
    for tenant in ["acme", "globex"] {
        let filter = QueryFilter {
            tenant: Some(tenant.to_owned()),
            doc_ids: Vec::new(),
        };
        let hits = store
            .query(&query("rotate keys deploy", 50, filter))
            .await
            .expect("query");
        assert_eq!(hits.len(), 6, "all of {tenant}'s sentences, nothing else");
        assert!(
            hits.iter()
                .all(|h| h.record.tenant.as_deref() == Some(tenant))
        );
    }
    let none = QueryFilter {
        tenant: Some("initech".into()),
        doc_ids: Vec::new(),
    };
    assert!(
        store
            .query(&query("keys", 10, none))
            .await
            .expect("query")
            .is_empty()
    );
    let docs = QueryFilter {
        tenant: None,
        doc_ids: vec!["public-guide".into(), "globex-guide".into()],
    };
    let hits = store.query(&query("keys", 50, docs)).await.expect("query");
    assert_eq!(hits.len(), 12);
    assert!(hits.iter().all(|h| h.record.doc_id != "acme-guide"));
}

#[derive(Deserialize)]
struct SampleEvent {
    doc_id: String,
    revision: u64,
    title: Option<String>,
    format: String,
    content: String,
    change: String,
    path: Option<String>,
}

fn sample_events() -> Vec<SampleEvent> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sample/18f-handbook/revisions.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).expect("sample line"))
        .collect()
}

/// xorshift64*: a seeded, dependency-free source of cut-off points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

/// Every event of the sample is first written only up to a random operation (a crash),
/// then planned again against what the store returns and applied: the store ends equal
/// to indexing each document's last revision from scratch (records and vectors).
pub async fn cut_off_write_heals<H: Harness>(harness: &H, seed: u64) {
    let store = harness.open().await;
    let config = TextConfig::default();
    let mut rng = Rng(seed | 1);
    let mut last: BTreeMap<String, Option<Revision>> = BTreeMap::new();
    for event in sample_events() {
        let current = store.records(&event.doc_id).await.expect("records");
        let revision = Revision {
            doc_id: event.doc_id.clone(),
            revision: event.revision,
            title: event.title.clone(),
            url: event.path.clone(),
            tenant: None,
            format: event.format.parse().expect("format"),
            content: event.content.clone(),
        };
        let plan = if event.change == "delete" {
            plan_delete(&current, &event.doc_id, event.revision)
        } else {
            plan_upsert(&current, &revision, &config).expect("plan").0
        };
        let cut = rng.below(plan.operations().count() + 1);
        store
            .apply_first(&plan, &plan_vectors(&plan), cut)
            .await
            .expect("partial apply");
        // Redelivery: plan again from the index itself.
        let current = store.records(&event.doc_id).await.expect("records");
        let healed = if event.change == "delete" {
            plan_delete(&current, &event.doc_id, event.revision)
        } else {
            plan_upsert(&current, &revision, &config).expect("plan").0
        };
        assert_eq!(
            store
                .apply(&healed, &plan_vectors(&healed))
                .await
                .expect("apply"),
            Applied::Written
        );
        let redelivered = plan_upsert_or_delete(&store, &event, &revision, &config).await;
        assert!(redelivered.is_noop(), "a third delivery changes nothing");
        last.insert(
            event.doc_id.clone(),
            (event.change != "delete").then_some(revision),
        );
    }
    for (doc_id, revision) in last {
        let stored = by_id(store.records(&doc_id).await.expect("records"));
        let Some(revision) = revision else {
            assert!(stored.is_empty(), "{doc_id} was deleted");
            assert!(
                store
                    .document(&doc_id)
                    .await
                    .expect("doc")
                    .expect("tombstone")
                    .deleted
            );
            continue;
        };
        let (rebuild, _) = plan_upsert(&[], &revision, &config).expect("plan");
        assert_eq!(
            stored,
            by_id(rebuild.embed.clone()),
            "{doc_id}: records equal a rebuild"
        );
        let ids: Vec<Uuid> = rebuild.embed.iter().map(|r| r.id).collect();
        let vectors = store.dense_vectors(&ids).await.expect("vectors");
        for (record, expected) in rebuild.embed.iter().zip(plan_vectors(&rebuild)) {
            assert_close(&vectors[&record.id], &expected, &record.sentence);
        }
        let document = store.document(&doc_id).await.expect("doc").expect("state");
        assert_eq!(document, rebuild.document, "{doc_id}: document state");
    }
}

async fn plan_upsert_or_delete<S: Store>(
    store: &S,
    event: &SampleEvent,
    revision: &Revision,
    config: &TextConfig,
) -> ChangePlan {
    let current = store.records(&event.doc_id).await.expect("records");
    if event.change == "delete" {
        plan_delete(&current, &event.doc_id, event.revision)
    } else {
        plan_upsert(&current, revision, config).expect("plan").0
    }
}
