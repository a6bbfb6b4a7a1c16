//! Tenants truly apart, through the real binary with keys: two tenants post a document of
//! the same id and both stay; a key bound to one tenant can neither read nor write the
//! other's; with `auth.protect_ops`, `/metrics` and `/openapi.json` need an operator key.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Casement, write_config};

const OPERATOR: &str = "operator-key-0123456789";
const ACME: &str = "acme-key-0123456789abcd";
const GLOBEX: &str = "globex-key-0123456789ab";

fn event(tenant: &str, code: &str) -> Value {
    json!({"type": "upsert", "doc_id": "faq/door", "revision": 1, "title": "Door",
           "tenant": tenant, "format": "markdown",
           "content": format!("# Door\n\nThe door code of the {tenant} office is {code}.\n")})
}

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn send(&self, key: Option<&str>, request: reqwest::RequestBuilder) -> (u16, Value) {
        let request = match key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
    async fn post(&self, key: &str, path: &str, body: &Value) -> (u16, Value) {
        let request = self.http.post(format!("{}{path}", self.base)).json(body);
        self.send(Some(key), request).await
    }
    async fn get(&self, key: Option<&str>, path: &str) -> (u16, Value) {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(key, request).await
    }
    /// The text of every window a search with `key` returns.
    async fn search(&self, key: &str, body: Value) -> (u16, String) {
        let (status, answer) = self.post(key, "/v1/search", &body).await;
        let windows = answer["windows"].as_array().cloned().unwrap_or_default();
        let text = windows
            .iter()
            .map(|w| w["text"].as_str().unwrap_or(""))
            .collect();
        (status, text)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_with_the_same_doc_id_stay_apart_and_keys_keep_to_their_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let settings = format!(
        r#"[auth]
protect_ops = true
[[auth.keys]]
token = "{OPERATOR}"
[[auth.keys]]
token = "{ACME}"
tenant = "acme"
[[auth.keys]]
token = "{GLOBEX}"
tenant = "globex"
"#
    );
    let config = write_config(dir.path(), &settings);
    let mut casement = Casement::start(dir.path(), &config, &[]);
    casement.wait_for_line("ready in", Duration::from_secs(600));
    let api = Api {
        http: reqwest::Client::new(),
        base: casement.base.clone(),
    };

    // Each tenant writes its own document of the same id.
    for (key, tenant, code) in [(ACME, "acme", "4417"), (GLOBEX, "globex", "9902")] {
        let (status, answer) = api.post(key, "/v1/events", &event(tenant, code)).await;
        assert_eq!(
            (status, answer["status"].as_str()),
            (200, Some("applied")),
            "{answer}"
        );
    }
    // A tenant's key cannot write the other tenant's document, nor one without a tenant.
    let (status, answer) = api.post(ACME, "/v1/events", &event("globex", "0000")).await;
    assert_eq!(status, 403, "{answer}");
    let mut untenanted = event("acme", "0000");
    untenanted.as_object_mut().unwrap().remove("tenant");
    assert_eq!(api.post(ACME, "/v1/events", &untenanted).await.0, 403);

    // Both documents stay, each read by its own key only.
    let query = json!({"query": "door code office", "rerank": false});
    let (status, acme) = api.search(ACME, query.clone()).await;
    assert_eq!(status, 200);
    assert!(acme.contains("4417") && !acme.contains("9902"), "{acme}");
    let (_, globex) = api.search(GLOBEX, query.clone()).await;
    assert!(
        globex.contains("9902") && !globex.contains("4417"),
        "{globex}"
    );
    assert!(!globex.contains("0000") && !acme.contains("0000"));
    let mut other = query.clone();
    other["tenant"] = "globex".into();
    assert_eq!(api.search(ACME, other).await.0, 403);
    let (status, doc) = api.get(Some(ACME), "/v1/documents/faq/door").await;
    assert_eq!(
        (status, doc["tenant"].as_str()),
        (200, Some("acme")),
        "{doc}"
    );
    assert_eq!(
        api.get(Some(ACME), "/v1/documents/faq/door?tenant=globex")
            .await
            .0,
        403
    );
    let (status, doc) = api
        .get(Some(OPERATOR), "/v1/documents/faq/door?tenant=globex")
        .await;
    assert_eq!(
        (status, doc["tenant"].as_str()),
        (200, Some("globex")),
        "{doc}"
    );
    assert_eq!(
        api.get(Some(OPERATOR), "/v1/documents/faq/door").await.0,
        404,
        "no untenanted one"
    );

    // Operations endpoints behind the operator key.
    for path in ["/metrics", "/openapi.json"] {
        assert_eq!(api.get(None, path).await.0, 401, "{path}");
        assert_eq!(api.get(Some(ACME), path).await.0, 403, "{path}");
        assert_eq!(api.get(Some(OPERATOR), path).await.0, 200, "{path}");
    }
    casement.stop();
}
