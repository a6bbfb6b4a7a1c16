//! Hybrid search: the sparse channel, filters.

use casement_store::{Channels, QueryFilter, Store};

use super::{GUIDE, Harness, index, markdown, query};

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
    // BM25 ties among the look-alike sentences make the exact fused position vary by one
    // or two; what must hold is that fusion lifts it well above the dense rank.
    assert!(
        position < 3 && position + 1 < dense_rank,
        "fusion lifts it to position {} (dense alone: {dense_rank})",
        position + 1
    );
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "fused order"
    );

    // One channel alone: its own order, as the channel ranks of the fused query say.
    let alone = |channels| {
        let mut q = query("ERR-4412", 5, QueryFilter::default());
        q.channels = channels;
        q.channel_ranks = true;
        q
    };
    let bm25 = store.query(&alone(Channels::Bm25)).await.expect("query");
    assert_eq!(
        bm25.iter().map(|h| h.sparse_rank).collect::<Vec<_>>(),
        (1..=bm25.len()).map(Some).collect::<Vec<_>>(),
        "BM25 alone is the sparse channel's order"
    );
    // By id: "ERR-44120" contains "ERR-4412" too.
    let target = hit.record.id;
    assert_eq!(
        bm25[0].record.id, target,
        "BM25 alone ranks the identifier first"
    );
    let dense = store.query(&alone(Channels::Dense)).await.expect("query");
    assert_eq!(
        dense.iter().map(|h| h.dense_rank).collect::<Vec<_>>(),
        (1..=dense.len()).map(Some).collect::<Vec<_>>(),
        "dense alone is the dense channel's order"
    );
    assert!(
        dense
            .iter()
            .position(|h| h.record.id == target)
            .is_none_or(|p| p + 1 == dense_rank),
        "dense alone ranks the identifier where the dense channel does ({dense_rank})"
    );
    let mut nothing = alone(Channels::Bm25);
    nothing.text = "the of and".to_owned();
    assert!(
        store.query(&nothing).await.expect("query").is_empty(),
        "BM25 alone with no indexed term finds nothing"
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
            ..QueryFilter::default()
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
        ..QueryFilter::default()
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
        ..QueryFilter::default()
    };
    let hits = store.query(&query("keys", 50, docs)).await.expect("query");
    assert_eq!(hits.len(), 12);
    assert!(hits.iter().all(|h| h.record.doc_id != "acme-guide"));
}

/// Metadata travels with every point, filters on it (a keyword, any of several, an
/// integer, an array element) keep to the matching documents, and a revision that changes
/// only the metadata rewrites payloads without embedding anything.
pub async fn metadata_filter<H: Harness>(harness: &H) {
    use casement_store::{MetadataCondition, MetadataValues};
    let store = harness.open().await;
    let with = |doc_id: &str, revision: u64, metadata: serde_json::Value| {
        let mut revision = markdown(doc_id, revision, None, GUIDE);
        revision.metadata = metadata.as_object().expect("object").clone();
        revision
    };
    index(
        &store,
        &with(
            "billing",
            1,
            serde_json::json!({"team": "billing", "tier": 2}),
        ),
    )
    .await;
    index(
        &store,
        &with(
            "support",
            1,
            serde_json::json!({"team": ["support", "docs"], "tier": 1}),
        ),
    )
    .await;
    index(&store, &markdown("plain", 1, None, GUIDE)).await;
    let docs_of = |condition: Vec<MetadataCondition>| {
        let store = &store;
        async move {
            let filter = QueryFilter {
                metadata: condition,
                ..QueryFilter::default()
            };
            let hits = store
                .query(&query("rotate keys deploy", 50, filter))
                .await
                .expect("query");
            let mut docs: Vec<String> = hits.into_iter().map(|h| h.record.doc_id).collect();
            docs.sort();
            docs.dedup();
            docs
        }
    };
    let keywords = |key: &str, values: &[&str]| MetadataCondition {
        key: key.to_owned(),
        values: MetadataValues::Keywords(values.iter().map(|v| (*v).to_owned()).collect()),
    };
    assert_eq!(
        docs_of(vec![keywords("team", &["billing"])]).await,
        ["billing"]
    );
    assert_eq!(
        docs_of(vec![keywords("team", &["docs"])]).await,
        ["support"],
        "an array matches when one element does"
    );
    assert_eq!(
        docs_of(vec![keywords("team", &["billing", "support"])]).await,
        ["billing", "support"]
    );
    let tier = |values: Vec<i64>| MetadataCondition {
        key: "tier".to_owned(),
        values: MetadataValues::Integers(values),
    };
    assert_eq!(docs_of(vec![tier(vec![1])]).await, ["support"]);
    assert!(
        docs_of(vec![keywords("team", &["billing"]), tier(vec![1])])
            .await
            .is_empty(),
        "conditions are all required"
    );
    assert_eq!(docs_of(Vec::new()).await, ["billing", "plain", "support"]);

    let records = store.records("billing").await.expect("records");
    assert!(records.iter().all(|r| r.metadata["team"] == "billing"));
    assert!(
        store
            .records("plain")
            .await
            .expect("records")
            .iter()
            .all(|r| r.metadata.is_empty())
    );

    // The same text with other metadata: payloads only.
    let (plan, _) = index(
        &store,
        &with("billing", 2, serde_json::json!({"team": "finance"})),
    )
    .await;
    assert!(plan.embed.is_empty(), "nothing re-embedded");
    assert_eq!(plan.update_payload.len(), records.len());
    assert_eq!(
        docs_of(vec![keywords("team", &["finance"])]).await,
        ["billing"]
    );
    assert!(
        docs_of(vec![keywords("team", &["billing"])])
            .await
            .is_empty()
    );
    let finance = serde_json::json!({"team": "finance"});
    for record in store.records("billing").await.expect("records") {
        assert_eq!(
            serde_json::Value::Object(record.metadata),
            finance,
            "replaced whole (tier is gone)"
        );
    }
    // Metadata dropped by the next revision is gone from every point, and the plan of a
    // repeat is empty.
    let (plan, _) = index(&store, &markdown("billing", 3, None, GUIDE)).await;
    assert_eq!(plan.update_payload.len(), records.len());
    assert!(
        store
            .records("billing")
            .await
            .expect("records")
            .iter()
            .all(|r| r.metadata.is_empty())
    );
    let current = store.records("billing").await.expect("records");
    let (again, _) = casement_text::plan_upsert(
        &current,
        &markdown("billing", 4, None, GUIDE),
        &casement_text::TextConfig::default(),
    )
    .expect("plan");
    assert!(again.is_noop(), "nothing left to change: {again:?}");
}

/// A reader's query matches only the points of documents it may read (public ones, those
/// of its groups; an operator every one), inside the engine; a revision that changes only
/// who may read a document rewrites payloads without embedding anything, and the filter
/// follows it at once. A deleted document's tombstone keeps its access.
pub async fn access_filter<H: Harness>(harness: &H) {
    use casement_store::Reader;
    use casement_text::Access;
    let store = harness.open().await;
    let with = |doc_id: &str, revision: u64, access: Option<Access>| {
        let mut revision = markdown(doc_id, revision, None, GUIDE);
        revision.access = access;
        revision
    };
    index(&store, &with("open", 1, Some(Access::public()))).await;
    index(
        &store,
        &with("hr", 1, Some(Access::groups(["hr", "staff"]))),
    )
    .await;
    index(
        &store,
        &with("finance", 1, Some(Access::groups(["finance"]))),
    )
    .await;
    index(&store, &with("sealed", 1, Some(Access::deny()))).await;
    // No access given: public (the pipeline gives events its default before this).
    index(&store, &with("legacy", 1, None)).await;
    let docs_of = |reader: Reader| {
        let store = &store;
        async move {
            let filter = QueryFilter {
                reader,
                ..QueryFilter::default()
            };
            let hits = store
                .query(&query("rotate keys deploy", 100, filter))
                .await
                .expect("query");
            let mut docs: Vec<String> = hits.into_iter().map(|h| h.record.doc_id).collect();
            docs.sort();
            docs.dedup();
            docs
        }
    };
    assert_eq!(docs_of(Reader::public()).await, ["legacy", "open"]);
    assert_eq!(
        docs_of(Reader::groups(["staff"])).await,
        ["hr", "legacy", "open"]
    );
    assert_eq!(
        docs_of(Reader::groups(["finance", "hr"])).await,
        ["finance", "hr", "legacy", "open"]
    );
    assert_eq!(
        docs_of(Reader::Operator).await,
        ["finance", "hr", "legacy", "open", "sealed"]
    );
    let state = store.document("hr").await.expect("state").expect("indexed");
    assert_eq!(state.access(), Access::groups(["hr", "staff"]));
    assert!(!state.readable_by(&Reader::public()));

    // Revoked: from public to `hr`. Payloads only, and the filter follows.
    let records = store.records("open").await.expect("records");
    let (plan, _) = index(&store, &with("open", 2, Some(Access::groups(["hr"])))).await;
    assert!(plan.embed.is_empty(), "nothing re-embedded");
    assert_eq!(plan.update_payload.len(), records.len());
    assert_eq!(docs_of(Reader::public()).await, ["legacy"]);
    assert_eq!(
        docs_of(Reader::groups(["hr"])).await,
        ["hr", "legacy", "open"]
    );
    // Deleted: the tombstone keeps the access it had.
    casement_store::delete_document(&store, "hr", 2)
        .await
        .expect("delete");
    let tombstone = store.document("hr").await.expect("state").expect("kept");
    assert!(tombstone.deleted);
    assert_eq!(tombstone.access(), Access::groups(["hr", "staff"]));
}
