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

const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";

fn token(groups: &[&str], expires_in: i64, secret: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": "person", "groups": groups, "exp": now + expires_in, "iss": "https://sso.example"}),
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap(),
    )
    .unwrap()
}

async fn get(base: &str, path: &str, key: &str, user: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(key);
    if let Some(user) = user {
        request = request.header("X-Casement-User", user);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn search(base: &str, key: &str, user: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/search"))
        .bearer_auth(key)
        .json(&body);
    if let Some(user) = user {
        request = request.header("X-Casement-User", user);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn docs(answer: &Value) -> Vec<String> {
    let mut docs: Vec<String> = answer["windows"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|w| w["doc_id"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    docs.dedup();
    docs
}

fn key(token: &str, name: &str, groups: Option<&[&str]>) -> ApiKey {
    ApiKey {
        token: token.into(),
        tenant: None,
        name: Some(name.into()),
        groups: groups.map(|g| g.iter().map(|g| (*g).to_owned()).collect()),
    }
}

/// Over HTTP: a customer key (public only), a staff bot key, a person's token narrowing
/// the bot, an operator key with a token; `GET /v1/documents` answers 404 for a page its
/// reader may not read, and a bad, expired or unverifiable token is a 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_tokens_read_only_their_groups_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let indexer = indexer(store.clone(), model);
    // Page 0 public, page 1 for hr, page 2 for finance.
    indexer
        .process(&event(0, 1, &Access::public()))
        .await
        .unwrap();
    indexer
        .process(&event(1, 1, &Access::groups(["hr"])))
        .await
        .unwrap();
    indexer
        .process(&event(2, 1, &Access::groups(["finance"])))
        .await
        .unwrap();
    let mut config = QueryConfig::default();
    config.limits.max_wait_ms = 50;
    config.auth.keys = vec![
        key("customer-bot-key-0001", "customer-bot", Some(&[])),
        key(
            "staff-bot-key-000001",
            "staff-bot",
            Some(&["hr", "finance", "staff"]),
        ),
        key("operator-key-0000001", "operator", None),
    ];
    config.auth.jwt = Some(JwtConfig {
        secret: SECRET.into(),
        issuer: Some("https://sso.example".into()),
        ..JwtConfig::default()
    });
    casement_config::Config::validate(&config).unwrap();
    let served = serve(config, store).await;
    let base = &served.base;
    let ask = |i: usize| json!({"query": format!("{} policy code {}", TOPICS[i], code(i)), "top_k": 10, "rerank": false});

    // Which of the three pages a reader finds, each asked for by its own code (the pages
    // share a template, so one question for all would have merge drop look-alikes).
    let found = |key: &'static str, user: Option<String>| async move {
        let mut found = Vec::new();
        for i in 0..3 {
            let (status, answer) = search(base, key, user.as_deref(), ask(i)).await;
            assert_eq!(status, 200, "{answer}");
            if docs(&answer).contains(&doc_id(i)) {
                found.push(i);
            }
        }
        found
    };
    assert_eq!(
        found("customer-bot-key-0001", None).await,
        [0],
        "public pages only"
    );
    assert_eq!(found("staff-bot-key-000001", None).await, [0, 1, 2]);
    assert_eq!(found("operator-key-0000001", None).await, [0, 1, 2]);
    // A person in hr through the staff bot: the bot's groups that the person has.
    let hr = token(&["hr"], 300, SECRET);
    assert_eq!(
        found("staff-bot-key-000001", Some(hr.clone())).await,
        [0, 1]
    );
    // The customer bot cannot be widened by a token.
    assert_eq!(found("customer-bot-key-0001", Some(hr.clone())).await, [0]);
    // An operator key with a token reads as the token.
    let finance = token(&["finance"], 300, SECRET);
    assert_eq!(
        found("operator-key-0000001", Some(finance.clone())).await,
        [0, 2]
    );
    // A person in a group the bot does not have reads what the bot's public pages are.
    let sales = token(&["sales"], 300, SECRET);
    assert_eq!(found("staff-bot-key-000001", Some(sales)).await, [0]);

    // Bad tokens: 401, never the key's own groups.
    for (bad, why) in [
        (token(&["hr"], -120, SECRET), "expired"),
        (
            token(&["hr"], 300, "another-secret-of-at-least-32-bytes"),
            "signature",
        ),
        ("not.a.token".to_owned(), "JSON Web Token"),
    ] {
        let (status, answer) = search(base, "staff-bot-key-000001", Some(&bad), ask(0)).await;
        assert_eq!(status, 401, "{why}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_user_token", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{message}");
        let (status, _) = get(
            base,
            &format!("/v1/documents/{}", doc_id(1)),
            "staff-bot-key-000001",
            Some(&bad),
        )
        .await;
        assert_eq!(status, 401);
    }

    // Documents: 404 (not 403) for a page the reader may not read, with or without /text.
    for path in [
        format!("/v1/documents/{}", doc_id(1)),
        format!("/v1/documents/{}/text", doc_id(1)),
    ] {
        let (status, answer) = get(base, &path, "customer-bot-key-0001", None).await;
        assert_eq!(status, 404, "{path}: {answer}");
        assert!(!answer.to_string().contains("hr"), "{answer}");
        let (status, _) = get(base, &path, "staff-bot-key-000001", Some(&finance)).await;
        assert_eq!(status, 404, "{path} for a person in finance");
        let (status, answer) = get(base, &path, "staff-bot-key-000001", Some(&hr)).await;
        assert_eq!(status, 200, "{path}: {answer}");
    }
    let (status, answer) = get(
        base,
        &format!("/v1/documents/{}/text", doc_id(1)),
        "staff-bot-key-000001",
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(answer["text"].as_str().unwrap().contains(&code(1)));

    // min_revision on an unreadable page: as if it were never indexed.
    let mut waiting = ask(0);
    waiting["min_revision"] = json!({ doc_id(1): 1 });
    let (status, answer) = search(base, "customer-bot-key-0001", None, waiting.clone()).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["indexed_revision"], 0, "{answer}");
    let (status, answer) = search(base, "staff-bot-key-000001", Some(&hr), waiting).await;
    assert_eq!(status, 200, "{answer}");

    // Revoked: page 0 moves from public to hr; the customer no longer finds it, hr does.
    indexer
        .process(&event(0, 2, &Access::groups(["hr"])))
        .await
        .unwrap();
    let (_, answer) = search(base, "customer-bot-key-0001", None, ask(0)).await;
    assert!(docs(&answer).is_empty(), "{answer}");
    let (_, answer) = search(base, "staff-bot-key-000001", Some(&hr), ask(0)).await;
    assert!(docs(&answer).contains(&doc_id(0)), "{answer}");
    drop((served, indexer));
}

/// A token sent where no `[auth.jwt]` is configured is refused, not ignored; a
/// configuration that could not verify one fails at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_a_verifier_is_refused_and_bad_jwt_config_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let mut config = QueryConfig::default();
    config.auth.keys = vec![key("staff-bot-key-000001", "staff-bot", Some(&["hr"]))];
    let served = serve(config.clone(), store).await;
    let (status, answer) = search(
        &served.base,
        "staff-bot-key-000001",
        Some(&token(&["hr"], 300, SECRET)),
        json!({"query": "anything"}),
    )
    .await;
    assert_eq!(status, 401, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[auth.jwt]")
    );

    let invalid = |jwt: JwtConfig| {
        let mut config = config.clone();
        config.auth.jwt = Some(jwt);
        casement_config::Config::validate(&config).unwrap_err()
    };
    assert!(invalid(JwtConfig::default()).contains("exactly one of secret"));
    assert!(
        invalid(JwtConfig {
            secret: "short".into(),
            ..JwtConfig::default()
        })
        .contains("32 bytes")
    );
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, "{\"keys\": []}").unwrap();
    assert!(
        invalid(JwtConfig {
            jwks_file: Some(jwks),
            ..JwtConfig::default()
        })
        .contains("holds no key")
    );
    // Keys, or a loopback address, or allow_open: never open by accident.
    let mut open = QueryConfig {
        listen: "0.0.0.0:8080".parse().unwrap(),
        ..QueryConfig::default()
    };
    let error = casement_config::Config::validate(&open).unwrap_err();
    assert!(error.contains("auth.allow_open"), "{error}");
    open.auth.allow_open = true;
    casement_config::Config::validate(&open).unwrap();
}

/// An RSA key made with the `openssl` CLI: its PKCS#1 DER (what signs) and its public JWK.
fn rsa_key(dir: &std::path::Path, name: &str, kid: &str) -> (Vec<u8>, Value) {
    let pem = dir.join(format!("{name}.pem"));
    let der = dir.join(format!("{name}.der"));
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&[
        "genrsa",
        "-traditional",
        "-out",
        pem.to_str().unwrap(),
        "2048",
    ]);
    run(&[
        "rsa",
        "-in",
        pem.to_str().unwrap(),
        "-traditional",
        "-outform",
        "DER",
        "-out",
        der.to_str().unwrap(),
    ]);
    let modulus = run(&["rsa", "-in", pem.to_str().unwrap(), "-noout", "-modulus"]);
    let hex = modulus.trim().trim_start_matches("Modulus=");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let jwk = json!({"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                     "n": base64url(&bytes), "e": "AQAB"});
    (std::fs::read(der).unwrap(), jwk)
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// `[auth.jwt] jwks_file`: RS256 tokens verified by the key their `kid` names; one signed
/// by another key, naming a key not in the set, or made with HS256 (the public key used
/// as a shared secret) is refused.
#[test]
fn a_key_set_verifies_rs256_tokens_by_kid() {
    use casement_query::auth::UserTokens;
    let dir = tempfile::tempdir().unwrap();
    let (first_der, first) = rsa_key(dir.path(), "first", "sso-2026-a");
    let (_, second) = rsa_key(dir.path(), "second", "sso-2026-b");
    let (stranger_der, _) = rsa_key(dir.path(), "stranger", "sso-2026-a");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, json!({"keys": [first, second]}).to_string()).unwrap();
    let users = UserTokens::load(&JwtConfig {
        jwks_file: Some(jwks),
        audience: Some("casement".into()),
        ..JwtConfig::default()
    })
    .unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    let claims = json!({"sub": "dana", "groups": ["hr", "staff"], "aud": "casement", "exp": exp});
    let sign = |der: &[u8], kid: &str| {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_rsa_der(der),
        )
        .unwrap()
    };
    assert_eq!(
        users.verify(&sign(&first_der, "sso-2026-a")).unwrap(),
        Reader::groups(["hr", "staff"])
    );
    let refused = |token: String| match users.verify(&token) {
        Err(ApiError::UserToken(why)) => why,
        other => panic!("accepted: {other:?}"),
    };
    assert!(refused(sign(&stranger_der, "sso-2026-a")).contains("signature"));
    assert!(refused(sign(&first_der, "sso-2026-b")).contains("signature"));
    assert!(refused(sign(&first_der, "sso-1999")).contains("not in auth.jwt.jwks_file"));
    let hs256 = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("sso-2026-a".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(first["n"].as_str().unwrap().as_bytes()).unwrap(),
    )
    .unwrap();
    assert!(refused(hs256).contains("HS256"));
    let wrong_audience = json!({"sub": "dana", "groups": ["hr"], "aud": "another", "exp": exp});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("sso-2026-a".into());
    let token = jsonwebtoken::encode(
        &header,
        &wrong_audience,
        &jsonwebtoken::EncodingKey::from_rsa_der(&first_der),
    )
    .unwrap();
    assert!(refused(token).contains("audience"));
}
