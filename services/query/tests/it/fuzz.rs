//! API fuzzing with schemathesis (from PyPI; `make tools` installs it) against the served
//! OpenAPI document: no 5xx, every status documented, every body valid against its schema.
//! Bounded here (`SCHEMATHESIS_MAX_EXAMPLES`, default 100 per operation); docs/development.md
//! gives a longer run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::PathBuf;

use casement_query::QueryConfig;
use casement_query::config::ApiKey;
use casement_text::Format;
use support::*;

const KEY: &str = "fuzz-key-0123456789abcdef";
const USER_SECRET: &str = "fuzz-user-secret-0123456789abcdef0123";

fn schemathesis() -> PathBuf {
    let dir = std::env::var_os("CASEMENT_TOOLS_DIR").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/casement/tools"),
        PathBuf::from,
    );
    let path = dir.join("venv/bin/schemathesis");
    assert!(
        path.exists(),
        "{} is missing: run `make tools` (deploy/tools/provision.sh) first",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    let binary = schemathesis();
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let indexer = indexer(store.clone(), model);
    let article = &squad_articles(1)[0];
    indexer
        .process(&upsert(
            "squad-0",
            1,
            &article.title,
            Some("acme"),
            Format::Text,
            &article.text,
        ))
        .await
        .unwrap();
    let mut config = QueryConfig::default();
    config.auth.keys = vec![ApiKey {
        groups: None,
        token: KEY.into(),
        tenant: None,
        name: None,
    }];
    config.limits.max_wait_ms = 100;
    // A person's token on every request (a valid one: the 401s of bad tokens are the
    // access tests'), so the fuzzing goes into the searches and documents behind it.
    config.auth.jwt = Some(casement_query::config::JwtConfig {
        secret: USER_SECRET.into(),
        ..Default::default()
    });
    let user = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({"sub": "fuzz", "groups": ["staff"], "exp": 4_102_444_800_u64}),
        &jsonwebtoken::EncodingKey::from_secret(USER_SECRET.as_bytes()).unwrap(),
    )
    .unwrap();
    let served = serve(config, store).await;

    let examples = std::env::var("SCHEMATHESIS_MAX_EXAMPLES").unwrap_or_else(|_| "100".into());
    let report = dir.path().join("schemathesis");
    let output = tokio::process::Command::new(binary)
        .arg("run")
        .arg(format!("{}/openapi.json", served.base))
        .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"])
        .args(["--max-examples", &examples, "--seed", "20261123", "--workers", "1"])
        .args(["--generation-database", "none", "--no-color", "--request-timeout", "30"])
        .args(["--header", &format!("Authorization: Bearer {KEY}")])
        .args(["--header", &format!("X-Casement-User: {user}")])
        .arg("--report-dir")
        .arg(&report)
        .env("SCHEMATHESIS_HOOKS", "")
        .output()
        .await
        .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}\n{stderr}");
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{stdout}\n{stderr}"
    );
    // It did exercise the search and document operations, with accepted and rejected
    // requests, and the server answered no 5xx (counted by the server itself).
    let metrics = casement_service::render(&served.app.metrics.registry);
    let count = |route: &str, class: char| -> u64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "casement_query_requests_total{{route=\"{route}\",status=\"{class}"
                ))
            })
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum()
    };
    let search = ["2", "4"].map(|c| count("/v1/search", c.chars().next().unwrap()));
    println!("/v1/search answers: {} 2xx, {} 4xx", search[0], search[1]);
    assert!(search[0] >= 20 && search[1] >= 20, "{search:?}");
    assert!(count("/v1/documents/{*doc_id}", '4') + count("/v1/documents/{*doc_id}", '2') >= 20);
    for route in ["/v1/search", "/v1/documents/{*doc_id}", "unmatched"] {
        assert_eq!(count(route, '5'), 0, "5xx on {route}");
    }
}
