//! What `make bench-migrate` indexes and asks: the SQuAD v1.1 dev articles, their
//! questions, and the embedding inputs a migration sends to the model.

use std::collections::BTreeSet;

use casement_text::{Format, Revision, TextConfig, build_records, segment};
use serde_json::Value;

pub struct Article {
    pub doc_id: String,
    pub title: String,
    pub text: String,
}

pub fn articles() -> Vec<Article> {
    casement_testkit::read_lines(&casement_testkit::data("squad/dev-v1.1.articles.jsonl"))
        .iter()
        .map(|line| {
            let doc: Value = serde_json::from_str(line).unwrap();
            let title = doc["title"].as_str().unwrap();
            Article {
                doc_id: format!("squad:{title}"),
                title: title.replace('_', " "),
                text: doc["text"].as_str().unwrap().to_owned(),
            }
        })
        .collect()
}

/// (question, doc_id, answer) of the SQuAD dev set, every `step`-th.
pub fn questions(step: usize) -> Vec<(String, String, String)> {
    let raw = std::fs::read_to_string(casement_testkit::data("squad/dev-v1.1.json")).unwrap();
    let squad: Value = serde_json::from_str(&raw).unwrap();
    let mut out = Vec::new();
    for article in squad["data"].as_array().unwrap() {
        let doc_id = format!("squad:{}", article["title"].as_str().unwrap());
        for paragraph in article["paragraphs"].as_array().unwrap() {
            for qa in paragraph["qas"].as_array().unwrap() {
                let answer = qa["answers"][0]["text"].as_str().unwrap_or_default();
                out.push((
                    qa["question"].as_str().unwrap().to_owned(),
                    doc_id.clone(),
                    answer.to_owned(),
                ));
            }
        }
    }
    out.into_iter().step_by(step.max(1)).collect()
}

/// The distinct embedding inputs of the articles (what a migration embeds).
pub fn embedding_inputs(articles: &[Article]) -> Vec<String> {
    let text = TextConfig::default();
    let mut seen = BTreeSet::new();
    let mut inputs = Vec::new();
    for article in articles {
        let revision = Revision {
            access: None,
            doc_id: article.doc_id.clone(),
            revision: 1,
            title: Some(article.title.clone()),
            url: None,
            tenant: None,
            format: Format::Text,
            content: article.text.clone(),
            metadata: serde_json::Map::new(),
            revision_url: None,
        };
        let segmented = segment(&revision, &text).unwrap();
        for record in build_records(&segmented, &text) {
            let input = record.embedding_input();
            if seen.insert(input.clone()) {
                inputs.push(input);
            }
        }
    }
    inputs
}
