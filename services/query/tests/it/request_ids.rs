//! Every answer carries `x-request-id`: the caller's when it sends one, else a new one for
//! each request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use casement_query::QueryConfig;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_the_callers_request_id_or_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let served = serve(QueryConfig::default(), store).await;
    let base = served.base.as_str();
    let client = reqwest::Client::new();
    let id = |response: &reqwest::Response| {
        response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    let response = client
        .get(format!("{base}/healthz"))
        .header("x-request-id", "bot-7f3a")
        .send()
        .await
        .unwrap();
    assert_eq!(id(&response), "bot-7f3a");
    let first = id(&client.get(format!("{base}/healthz")).send().await.unwrap());
    let second = id(&client.get(format!("{base}/healthz")).send().await.unwrap());
    assert!(!first.is_empty() && first != second, "{first} {second}");
}
