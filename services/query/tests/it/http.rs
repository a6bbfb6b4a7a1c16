//! The query service end to end over HTTP: a Qdrant Edge store indexed from real text
//! (SQuAD v1.1 dev articles for tenant `acme`, 18F Handbook pages for tenant `globex`) by
//! the indexer's own stages with the real models.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;

use casement_query::QueryConfig;
use casement_query::config::ApiKey;
use casement_store::{HybridQuery, QueryFilter, Store};
use casement_text::Format;
use serde_json::{Value, json};
use support::*;

const ACME: &str = "acme-key-0123456789abcdef";
const GLOBEX: &str = "globex-key-0123456789abcdef";
const ADMIN: &str = "admin-key-0123456789abcdef";
const IDENTIFIER: &str = "QX-7741-ZETA";

fn config() -> QueryConfig {
    let mut config = QueryConfig::default();
    config.auth.keys = vec![
        ApiKey {
            groups: None,
            token: ACME.into(),
            tenant: Some("acme".into()),
            name: None,
        },
        ApiKey {
            groups: None,
            token: GLOBEX.into(),
            tenant: Some("globex".into()),
            name: None,
        },
        ApiKey {
            groups: None,
            token: ADMIN.into(),
            tenant: None,
            name: None,
        },
    ];
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let indexer = indexer(store.clone(), model);
    let articles = squad_articles(4);
    for (i, article) in articles.iter().enumerate() {
        let event = upsert(
            &format!("squad-{i}"),
            1,
            &article.title,
            Some("acme"),
            Format::Text,
            &article.text,
        );
        indexer.process(&event).await.expect("index article");
    }
    let runbook = format!(
        "# Sync agent runbook\n\nThe sync agent copies pages to the index.\n\nTo reset the sync agent, run the purge command with shard {IDENTIFIER} and wait for the green light. Then check the dashboard.\n"
    );
    indexer
        .process(&upsert(
            "acme-runbook",
            1,
            "Runbook",
            Some("acme"),
            Format::Markdown,
            &runbook,
        ))
        .await
        .unwrap();
    let pages = handbook_pages(10);
    for page in &pages {
        let mut page = page.clone();
        page.tenant = Some("globex".into());
        let event = casement_events::Event {
            change: casement_events::Change::Upsert(page),
            format: casement_events::EventFormat::Native,
        };
        indexer.process(&event).await.expect("index page");
    }
    let served = serve(config(), store.clone()).await;
    let base = served.base.as_str();

    // A question whose answer sentence is known.
    let (status, body) = post(
        base,
        Some(ACME),
        json!({"query": "Which NFL team represented the AFC at Super Bowl 50?", "timings": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let found = windows(&body);
    let answer = found
        .iter()
        .find(|w| w["text"].as_str().unwrap().contains("Denver Broncos"))
        .unwrap_or_else(|| panic!("no window with the answer: {body}"));
    assert_eq!(answer["title"], "Super_Bowl_50");
    assert!(body["timings_ms"]["total"].as_f64().unwrap() > 0.0);

    // Asked again, the question's embedding comes from the cache: the same answer, one hit.
    let (status, again) = post(
        base,
        Some(ACME),
        json!({"query": "Which NFL team represented the AFC at Super Bowl 50?"}),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    let again_windows = windows(&again);
    assert_eq!(
        again_windows, found,
        "a cached embedding changed the answer"
    );
    let metrics = metrics_text(base).await;
    assert!(
        metrics.contains("casement_query_embedding_cache_total{outcome=\"hit\"} 1\n"),
        "{metrics}"
    );

    // A small token budget: windows are narrowed around their best match to fit it.
    let (status, small) = post(
        base,
        Some(ACME),
        json!({"query": "Which NFL team represented the AFC at Super Bowl 50?", "token_budget": 80}),
    )
    .await;
    assert_eq!(status, 200, "{small}");
    let small = windows(&small);
    let used: u64 = small.iter().map(|w| w["tokens"].as_u64().unwrap()).sum();
    assert!(!small.is_empty() && used <= 80, "{used} tokens: {small:?}");
    let inside = |w: &Value, of: &Value| {
        w["doc_id"] == of["doc_id"]
            && w["char_start"].as_u64() >= of["char_start"].as_u64()
            && w["char_end"].as_u64() <= of["char_end"].as_u64()
    };
    assert!(
        inside(&small[0], &again_windows[0]),
        "the first window narrowed from the first full one"
    );
    assert!(
        small
            .iter()
            .all(|w| !w["matches"].as_array().unwrap().is_empty())
    );
    let metrics = metrics_text(base).await;
    assert!(
        !metrics.contains("casement_query_merge_decisions_total{decision=\"narrowed\"} 0\n"),
        "no window was narrowed: {metrics}"
    );

    // Answer recall over the indexed articles' questions.
    let titles: Vec<&str> = articles.iter().map(|a| a.title.as_str()).collect();
    let questions = squad_questions(&titles);
    let sample: Vec<_> = questions
        .iter()
        .step_by(questions.len() / 60)
        .take(60)
        .collect();
    let mut hits = 0;
    for (_, question, answer) in &sample {
        let (status, body) = post(base, Some(ACME), json!({"query": question, "top_k": 5})).await;
        assert_eq!(status, 200, "{body}");
        if windows(&body)
            .iter()
            .any(|w| w["text"].as_str().unwrap().contains(answer.as_str()))
        {
            hits += 1;
        }
    }
    let recall = hits as f64 / sample.len() as f64;
    println!(
        "answer in the top 5 windows: {hits}/{} = {recall:.2}",
        sample.len()
    );
    assert!(recall >= 0.75, "answer recall@5 {recall:.2}");

    // An exact identifier is found, through the BM25 channel.
    let (status, body) = post(base, Some(ACME), json!({"query": IDENTIFIER})).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        windows(&body)[0]["text"]
            .as_str()
            .unwrap()
            .contains(IDENTIFIER)
    );
    let (embedder, _) = models().await;
    let dense = embedder.embed(&[IDENTIFIER]).unwrap().remove(0);
    let ranked = store
        .query(&HybridQuery {
            dense,
            text: IDENTIFIER.into(),
            limit: 1,
            candidates: 100,
            filter: QueryFilter::default(),
            channels: casement_store::Channels::Hybrid,
            channel_ranks: true,
        })
        .await
        .unwrap();
    assert!(ranked[0].record.sentence.contains(IDENTIFIER));
    assert_eq!(ranked[0].sparse_rank, Some(1), "{:?}", ranked[0]);

    // Tenant isolation: a bound key sees only its tenant, and cannot ask for another.
    let handbook_question = pages[0]
        .content
        .lines()
        .find(|l| l.len() > 60 && !l.starts_with('#'))
        .unwrap()
        .to_owned();
    for (key, tenant) in [(ACME, "acme"), (GLOBEX, "globex")] {
        let (status, body) = post(
            base,
            Some(key),
            json!({"query": handbook_question, "top_k": 10}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let seen: BTreeSet<String> = windows(&body)
            .iter()
            .map(|w| w["tenant"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(seen, BTreeSet::from([tenant.to_owned()]));
    }
    let (status, body) = post(
        base,
        Some(ACME),
        json!({"query": "handbook", "tenant": "globex"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
    let (status, body) = post(
        base,
        Some(ADMIN),
        json!({"query": handbook_question, "tenant": "globex"}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(windows(&body).iter().all(|w| w["tenant"] == "globex"));
    let client = reqwest::Client::new();
    // A document is its id within its tenant: the key's, or the one an operator names.
    let doc = |key: &str, id: &str| {
        client
            .get(format!("{base}/v1/documents/{id}"))
            .bearer_auth(key.to_owned())
            .send()
    };
    assert_eq!(
        doc(ACME, &pages[0].doc_id).await.unwrap().status().as_u16(),
        404
    );
    assert_eq!(
        doc(ADMIN, &pages[0].doc_id)
            .await
            .unwrap()
            .status()
            .as_u16(),
        404,
        "the operator key without ?tenant= looks for the document without a tenant"
    );
    let in_globex = format!("{}?tenant=globex", pages[0].doc_id);
    let info: Value = doc(ADMIN, &in_globex).await.unwrap().json().await.unwrap();
    assert_eq!(info["revision"].as_u64(), Some(pages[0].revision), "{info}");
    assert!(
        info["sentence_count"].as_u64().unwrap() > 10
            && !info["sections"].as_array().unwrap().is_empty()
    );
    assert_eq!(
        doc(ADMIN, "no-such-document")
            .await
            .unwrap()
            .status()
            .as_u16(),
        404
    );

    // Rerank: the configured reranker orders the windows, scores monotone.
    let (status, body) = post(
        base,
        Some(ACME),
        json!({"query": "Who won Super Bowl 50?", "rerank": true, "top_k": 8}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reranker"], "learned:shipped");
    let scores: Vec<f64> = windows(&body)
        .iter()
        .map(|w| w["scores"]["rerank"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|p| p[0] >= p[1]), "{scores:?}");

    // A smaller window radius: each window is its matched sentences and what lies between.
    let (_, wide) = post(
        base,
        Some(ACME),
        json!({"query": "Levi's Stadium", "top_k": 3}),
    )
    .await;
    let (status, narrow) = post(
        base,
        Some(ACME),
        json!({"query": "Levi's Stadium", "top_k": 3, "window_radius": 0}),
    )
    .await;
    assert_eq!(status, 200, "{narrow}");
    for w in windows(&narrow) {
        let matches = w["matches"].as_array().unwrap();
        assert_eq!(w["char_start"], matches[0]["char_start"]);
        assert_eq!(w["char_end"], matches[matches.len() - 1]["char_end"]);
    }
    let length = |b: &Value| {
        windows(b)
            .iter()
            .map(|w| w["text"].as_str().unwrap().len())
            .sum::<usize>()
    };
    assert!(length(&narrow) < length(&wide));
}

/// What a support bot reads from a real page: the 18F Handbook's Liquid page (tags gone,
/// `{% page %}` links resolved against the page's url), a hit on a checklist step windowed
/// with the sentence that introduces the list and its numbering, offsets that slice the
/// submitted page and the document's citation text, and `top_k` met while merges happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_bot_reads_from_a_real_page() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let indexer = indexer(store.clone(), model);
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/text/tests/fixtures/markdown/18f-going-out-of-office.md"),
    )
    .unwrap();
    indexer
        .process(&upsert(
            "going-out-of-office",
            1,
            "Going out of office",
            None,
            Format::Markdown,
            &page,
        ))
        .await
        .unwrap();
    let articles = squad_articles(3);
    for (i, article) in articles.iter().enumerate() {
        indexer
            .process(&upsert(
                &format!("squad-{i}"),
                1,
                &article.title,
                None,
                Format::Text,
                &article.text,
            ))
            .await
            .unwrap();
    }
    let served = serve(QueryConfig::default(), store.clone()).await;
    let base = served.base.as_str();

    let (status, body) = post(
        base,
        None,
        json!({"query": "What should I do with my Slack status before I take leave?", "top_k": 3, "doc_ids": ["going-out-of-office"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let found = windows(&body);
    let step = found
        .iter()
        .find(|w| {
            w["text"]
                .as_str()
                .unwrap()
                .contains("6. Update your Slack status")
        })
        .unwrap_or_else(|| panic!("no window with the step: {body}"));
    let text = step["text"].as_str().unwrap();
    assert!(
        text.contains("Before taking leave, be sure to:\n\n1. Submit a leave request"),
        "{text}"
    );
    for window in &found {
        let text = window["text"].as_str().unwrap();
        assert!(!text.contains("{%") && !text.contains("]("), "{text}");
    }

    // The window, sliced out of the submitted page by its source offsets (characters).
    let chars: Vec<char> = page.chars().collect();
    let (start, end) = (
        step["source_start"].as_u64().unwrap() as usize,
        step["source_end"].as_u64().unwrap() as usize,
    );
    let slice: String = chars[start..end].iter().collect();
    assert!(
        slice.starts_with("Before taking leave, be sure to:"),
        "{slice}"
    );
    assert!(
        slice.contains("Update your Slack status to indicate that you are OOO."),
        "{slice}"
    );
    // And out of the citation text by char_start/char_end.
    let cited: Value = reqwest::get(format!("{base}/v1/documents/going-out-of-office/text"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cited["revision"], 1);
    let citation: Vec<char> = cited["text"].as_str().unwrap().chars().collect();
    for window in &found {
        let (s, e) = (
            window["char_start"].as_u64().unwrap() as usize,
            window["char_end"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            citation[s..e].iter().collect::<String>(),
            window["text"].as_str().unwrap()
        );
    }

    // Links keep their targets, resolved against the document's url.
    let (_, body) = post(base, None, json!({"query": "approved leave request in HR Links every scheduled work day", "top_k": 1, "doc_ids": ["going-out-of-office"]})).await;
    let links = windows(&body)[0]["links"].as_array().unwrap().clone();
    let hr = links
        .iter()
        .find(|l| l["text"] == "leave request in HR Links")
        .unwrap_or_else(|| panic!("{links:?}"));
    assert_eq!(hr["url"], "https://example.org/tools/hrlinks/#using-leave");
    let window_text: Vec<char> = windows(&body)[0]["text"]
        .as_str()
        .unwrap()
        .chars()
        .collect();
    let (s, e) = (
        hr["start"].as_u64().unwrap() as usize,
        hr["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(
        window_text[s..e].iter().collect::<String>(),
        "leave request in HR Links"
    );

    // `top_k` met although merges eat hits; fewer only when no more exist, and said.
    for top_k in [5, 10] {
        let (status, body) = post(
            base,
            None,
            json!({"query": "When did the Normans conquer England?", "top_k": top_k}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(windows(&body).len(), top_k, "{body}");
        assert!(body.get("short").is_none(), "{body}");
    }
    // More than the server's cap (search.token_budget) holds whole: all 40 still come back,
    // within the cap, the later ones narrowed around their best match.
    let (_, body) = post(
        base,
        None,
        json!({"query": "When did the Normans conquer England?", "top_k": 40}),
    )
    .await;
    assert_eq!(windows(&body).len(), 40, "{body}");
    let tokens: u64 = windows(&body)
        .iter()
        .map(|w| w["tokens"].as_u64().unwrap())
        .sum();
    assert!(tokens <= 4_000, "{tokens}");
    assert!(body.get("short").is_none(), "{body}");
    // More than a request's own budget holds even narrowed: cut, and said.
    let (_, body) = post(
        base,
        None,
        json!({"query": "When did the Normans conquer England?", "top_k": 40, "token_budget": 300}),
    )
    .await;
    assert!(windows(&body).len() < 40);
    assert_eq!(body["short"], "token_budget", "{}", body["short"]);
    let (_, body) = post(
        base,
        None,
        json!({"query": "leave", "top_k": 50, "doc_ids": ["going-out-of-office"]}),
    )
    .await;
    let count = windows(&body).len();
    assert!(count < 50 && count > 3, "{count}");
    assert_eq!(body["short"], "no_more_matches", "{body}");
    let metrics = metrics_text(base).await;
    assert!(
        !metrics.contains("casement_query_search_rounds_count 0\n"),
        "{metrics}"
    );
}
