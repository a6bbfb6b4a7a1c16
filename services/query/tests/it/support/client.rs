//! HTTP helpers shared by the query end-to-end tests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use serde_json::Value;

pub async fn post(base: &str, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/search"))
        .json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub async fn raw(base: &str, key: &str, content_type: Option<&str>, body: Vec<u8>) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/search"))
        .bearer_auth(key)
        .body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let response = request.send().await.expect("request");
    (
        response.status().as_u16(),
        response.json().await.unwrap_or(Value::Null),
    )
}

/// Checks what every answer must hold, and returns its windows.
pub fn windows(answer: &Value) -> Vec<Value> {
    let windows = answer["windows"].as_array().expect("windows").clone();
    let mut sentences = HashSet::new();
    for w in &windows {
        let text: Vec<char> = w["text"].as_str().unwrap().chars().collect();
        let start = w["char_start"].as_u64().unwrap() as usize;
        assert_eq!(text.len(), w["char_end"].as_u64().unwrap() as usize - start);
        for m in w["matches"].as_array().unwrap() {
            let (ms, me) = (
                m["char_start"].as_u64().unwrap() as usize,
                m["char_end"].as_u64().unwrap() as usize,
            );
            // The matched sentence sits in the window at its character range.
            let inside: String = text[ms - start..me - start].iter().collect();
            assert_eq!(inside, m["sentence"].as_str().unwrap());
            assert!(
                sentences.insert((w["doc_id"].as_str().unwrap().to_owned(), ms)),
                "a sentence is in the answer twice"
            );
        }
    }
    windows
}

/// The text of `/metrics` (served without a key unless `auth.protect_ops`).
pub async fn metrics_text(base: &str) -> String {
    reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
