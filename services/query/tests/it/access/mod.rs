//! Who may read what, end to end through the indexer's stages and the query service: a
//! reader sees only the documents it may read, on every read path, and every readable
//! document stays findable.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use casement_events::Change;
use casement_pipeline::Processor;
use casement_query::api::SearchRequest;
use casement_query::config::{ApiKey, JwtConfig};
use casement_query::error::ApiError;
use casement_query::{App, QueryConfig};
use casement_store::EdgeStore;
use casement_text::{Access, Format, Reader};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use support::*;

const TOPICS: [&str; 10] = [
    "parental leave",
    "expense reports",
    "VPN setup",
    "password resets",
    "payroll dates",
    "office badges",
    "travel booking",
    "laptop replacement",
    "security incidents",
    "customer refunds",
];
const GROUPS: [&str; 4] = ["hr", "finance", "it", "staff"];

fn doc_id(i: usize) -> String {
    format!("kb/page-{i}")
}

/// A code only page `i` holds: what a query finds it by, and what must never show in
/// an answer for a reader who may not read it.
fn code(i: usize) -> String {
    format!("POLICY-{}", 7310 + i * 17)
}

fn page(i: usize) -> String {
    let topic = TOPICS[i];
    format!(
        "# Guide to {topic}\n\nThis page explains {topic} for every team. The {topic} policy \
         code is {code}. Ask your lead when in doubt.\n\n## Details\n\nRequests about {topic} \
         are answered within two days. Keep a copy of what you send.\n",
        code = code(i)
    )
}

fn event(i: usize, revision: u64, access: &Access) -> casement_events::Event {
    let mut event = upsert(
        &doc_id(i),
        revision,
        &format!("Guide to {}", TOPICS[i]),
        None,
        Format::Markdown,
        &page(i),
    );
    if let Change::Upsert(r) = &mut event.change {
        r.access = Some(access.clone());
    }
    event
}

fn access_strategy() -> impl Strategy<Value = Access> {
    prop_oneof![
        2 => Just(Access::public()),
        1 => Just(Access::deny()),
        4 => proptest::sample::subsequence(GROUPS.to_vec(), 1..=2).prop_map(Access::groups),
    ]
}

fn reader_strategy() -> impl Strategy<Value = Reader> {
    prop_oneof![
        1 => Just(Reader::Operator),
        1 => Just(Reader::public()),
        4 => proptest::sample::subsequence(vec!["hr", "finance", "it", "staff", "sales"], 1..=3)
            .prop_map(Reader::groups),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    /// Page `.0` is now readable by `.1` (a revision that changes access only).
    Edit(usize, Access),
    /// `.0` asks for page `.1`'s code (with `min_revision` on it when `.2`).
    Ask(Reader, usize, bool),
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (0..TOPICS.len(), access_strategy()).prop_map(|(i, a)| Step::Edit(i, a)),
        3 => (reader_strategy(), 0..TOPICS.len(), any::<bool>())
            .prop_map(|(r, i, wait)| Step::Ask(r, i, wait)),
    ]
}

struct Fixture {
    indexer: Processor<EdgeStore>,
    app: Arc<App<EdgeStore>>,
    /// Each page's revision and access, as the index holds them.
    pages: std::sync::Mutex<BTreeMap<usize, (u64, Access)>>,
}

impl Fixture {
    async fn set(&self, i: usize, access: &Access) {
        let revision = {
            let mut pages = self.pages.lock().unwrap();
            let entry = pages.entry(i).or_insert((0, Access::public()));
            entry.0 += 1;
            entry.0
        };
        self.indexer
            .process(&event(i, revision, access))
            .await
            .unwrap();
        self.pages
            .lock()
            .unwrap()
            .insert(i, (revision, access.clone()));
    }

    async fn ask(&self, reader: &Reader, target: usize, wait: bool) {
        let pages = self.pages.lock().unwrap().clone();
        let mut request = SearchRequest {
            query: format!("{} policy code {}", TOPICS[target], code(target)),
            top_k: Some(10),
            rerank: Some(false),
            ..SearchRequest::default()
        };
        if wait {
            request.min_revision = BTreeMap::from([(doc_id(target), pages[&target].0)]);
        }
        let config = &self.app.config;
        let mut valid = request
            .validate(
                &config.limits,
                &self.app.searcher.search_config(&config.search),
                false,
                &config.store.indexed_metadata,
            )
            .unwrap();
        valid.reader = reader.clone();
        let readable = |i: usize| pages[&i].1.readable_by(reader);
        let answer = match self.app.searcher.search(valid).await {
            Ok(answer) => answer,
            Err(ApiError::RevisionNotIndexed {
                doc_id, indexed, ..
            }) => {
                assert!(wait && !readable(target), "409 for a readable page");
                assert_eq!(doc_id, self::doc_id(target));
                assert_eq!(indexed, 0, "the 409 tells an unreadable page's revision");
                return;
            }
            Err(other) => panic!("{other}"),
        };
        assert!(
            !wait || readable(target),
            "min_revision on a page the reader may not read answered 200"
        );
        let answer = serde_json::to_value(&answer).unwrap();
        for window in answer["windows"].as_array().unwrap() {
            let id = window["doc_id"].as_str().unwrap();
            let i = (0..TOPICS.len()).find(|&i| doc_id(i) == id).unwrap();
            assert!(
                readable(i),
                "{reader:?} was shown {id}, readable by {:?}",
                pages[&i].1
            );
            assert_eq!(window["title"], format!("Guide to {}", TOPICS[i]));
            let text = window.to_string();
            for j in (0..TOPICS.len()).filter(|&j| !readable(j)) {
                assert!(!text.contains(&code(j)), "{reader:?} was shown {}", code(j));
            }
        }
        let found = answer["windows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["doc_id"] == doc_id(target));
        assert_eq!(
            found,
            readable(target),
            "{reader:?} asking for {} (readable by {:?})",
            doc_id(target),
            pages[&target].1
        );
    }
}

/// Random pages with random access sets, random readers asking for them, and edits that
/// change access between the questions: no answer holds a window (match, title, url or
/// text) of a page its reader may not read, `min_revision` on such a page answers as for
/// a page never indexed (409 at revision 0), and every readable page is found.
#[test]
fn a_reader_sees_only_and_all_of_what_it_may_read() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fixture = runtime.block_on(async {
        let (model, reranker) = models().await;
        let store = open_store(dir.path(), model.dimension());
        let mut config = QueryConfig::default();
        config.limits.max_wait_ms = 40;
        let app = casement_query::service::app(
            config,
            store.clone(),
            model.clone(),
            reranker,
            casement_query::Metrics::new(),
        );
        let fixture = Fixture {
            indexer: indexer(store, model),
            app,
            pages: Default::default(),
        };
        for i in 0..TOPICS.len() {
            fixture.set(i, &Access::public()).await;
        }
        fixture
    });
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    let case = (
        proptest::collection::vec(access_strategy(), TOPICS.len()),
        proptest::collection::vec(step_strategy(), 1..12),
    );
    let asked = std::sync::atomic::AtomicUsize::new(0);
    runner
        .run(&case, |(initial, steps)| {
            runtime.block_on(async {
                for (i, access) in initial.iter().enumerate() {
                    fixture.set(i, access).await;
                }
                for step in &steps {
                    match step {
                        Step::Edit(i, access) => fixture.set(*i, access).await,
                        Step::Ask(reader, target, wait) => {
                            fixture.ask(reader, *target, *wait).await;
                            asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            });
            Ok(())
        })
        .unwrap();
    eprintln!("{} questions checked", asked.into_inner());
    drop(fixture);
    drop(runtime);
}

mod http;
mod tokens;
