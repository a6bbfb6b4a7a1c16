//! Keys and a person's token over HTTP, on every route.

use super::*;

pub(super) const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes!";

pub(super) fn token(groups: &[&str], expires_in: i64, secret: &str) -> String {
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

pub(super) async fn search(base: &str, key: &str, user: Option<&str>, body: Value) -> (u16, Value) {
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

pub(super) fn key(token: &str, name: &str, groups: Option<&[&str]>) -> ApiKey {
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
