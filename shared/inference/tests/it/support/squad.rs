//! Window ranking on SQuAD v1.1 dev, shared by the rescoring test and `make bench-rerank`.
//!
//! Each article is segmented by the text core (one section: windows of radius 3). Retrieval
//! is dense: the question against each sentence's embedding input (title + sentence); the
//! top 10 sentences give candidate windows (deduplicated), each scored by reciprocal rank
//! fusion of its rank, 1 / (60 + rank), as the query service's fusion would. The relevant
//! window is the one containing the answer span. Questions whose answer is in no candidate
//! are counted as retrieval misses and left out of the ranking metrics.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use casement_inference::rerank::blend;
use casement_inference::{Candidate, Embed, cosine, order_by_score};
use casement_text::{Format, Revision, SentenceRecord, TextConfig, build_records, segment};
use serde::Deserialize;

#[derive(Deserialize)]
struct Article {
    title: String,
    text: String,
    qas: Vec<Qa>,
}

#[derive(Deserialize)]
struct Qa {
    question: String,
    answers: Vec<Answer>,
}

#[derive(Deserialize)]
struct Answer {
    text: String,
    answer_start: usize,
}

/// One question with its candidate windows in retrieval order.
pub struct Case {
    pub question: String,
    pub query_vector: Vec<f32>,
    pub windows: Vec<String>,
    pub window_vectors: Vec<Vec<f32>>,
    pub retrieval_scores: Vec<f32>,
    /// Indices of the candidates that contain the answer (overlapping windows can share it).
    pub relevant: Vec<usize>,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Metrics {
    pub hit_at_1: f64,
    pub mrr: f64,
}

pub fn squad_articles() -> PathBuf {
    casement_testkit::data("squad/dev-v1.1.articles.jsonl")
}

/// Builds cases for every `question_stride`-th question of every `article_stride`-th
/// article. Returns the cases and how many questions had no relevant candidate.
pub fn build_cases(
    embedder: &dyn Embed,
    article_stride: usize,
    question_stride: usize,
    max_questions: usize,
) -> (Vec<Case>, usize) {
    build_cases_read(
        embedder,
        article_stride,
        question_stride,
        max_questions,
        usize::MAX,
    )
}

/// [`build_cases`], with the reranker reading at most `max_words` words of each window,
/// centred on the sentence that retrieved it (as the query service does).
pub fn build_cases_read(
    embedder: &dyn Embed,
    article_stride: usize,
    question_stride: usize,
    max_questions: usize,
    max_words: usize,
) -> (Vec<Case>, usize) {
    let path = squad_articles();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let config = TextConfig::default();
    let mut cases = Vec::new();
    let mut misses = 0;
    for line in text.lines().step_by(article_stride) {
        let article: Article = serde_json::from_str(line).expect("article");
        let revision = Revision {
            access: None,
            metadata: Default::default(),
            doc_id: article.title.clone(),
            revision: 1,
            title: Some(article.title.replace('_', " ")),
            url: None,
            tenant: None,
            format: Format::Text,
            content: article.text.clone(),
            revision_url: None,
        };
        let segmented = segment(&revision, &config).expect("segments");
        let records = build_records(&segmented, &config);
        let inputs: Vec<String> = records
            .iter()
            .map(SentenceRecord::embedding_input)
            .collect();
        let sentence_vectors = embedder
            .embed(&inputs.iter().map(String::as_str).collect::<Vec<_>>())
            .expect("embeds");
        let citation: Vec<char> = segmented.text.chars().collect();
        let scale = citation.len() as f64 / article.text.chars().count().max(1) as f64;
        let mut window_cache: HashMap<String, Vec<f32>> = HashMap::new();
        for qa in article.qas.iter().step_by(question_stride) {
            if cases.len() + misses >= max_questions {
                break;
            }
            let Some(answer) = qa.answers.first() else {
                continue;
            };
            let Some(span) = locate(
                &segmented.text,
                &answer.text,
                (answer.answer_start as f64 * scale) as usize,
            ) else {
                continue;
            };
            let query_vector = embedder
                .embed(&[qa.question.as_str()])
                .expect("embeds")
                .remove(0);
            let mut ranked: Vec<(usize, f32)> = sentence_vectors
                .iter()
                .map(|v| cosine(&query_vector, v))
                .enumerate()
                .collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
            let mut windows: Vec<&SentenceRecord> = Vec::new();
            let mut retrieval_scores = Vec::new();
            for (rank, (index, _)) in ranked.iter().take(10).enumerate() {
                let record = &records[*index];
                if windows.iter().any(|w| {
                    w.window_char_start == record.window_char_start
                        && w.window_char_end == record.window_char_end
                }) {
                    continue;
                }
                windows.push(record);
                retrieval_scores.push(1.0 / (60.0 + rank as f32 + 1.0));
            }
            let relevant: Vec<usize> = (0..windows.len())
                .filter(|&i| {
                    windows[i].window_char_start <= span.0 && span.1 <= windows[i].window_char_end
                })
                .collect();
            if relevant.is_empty() {
                misses += 1;
                continue;
            }
            let read: Vec<String> = windows
                .iter()
                .map(|w| {
                    let start = w.char_start - w.window_char_start;
                    let end = w.char_end - w.window_char_start;
                    casement_text::window::excerpt(&w.window, start..end, max_words)
                })
                .collect();
            let missing: Vec<&str> = read
                .iter()
                .map(String::as_str)
                .filter(|t| !window_cache.contains_key(*t))
                .collect();
            if !missing.is_empty() {
                for (text, vector) in missing
                    .iter()
                    .zip(embedder.embed(&missing).expect("embeds"))
                {
                    window_cache.insert((*text).to_owned(), vector);
                }
            }
            cases.push(Case {
                question: qa.question.clone(),
                query_vector,
                window_vectors: read.iter().map(|t| window_cache[t].clone()).collect(),
                windows: windows.iter().map(|w| w.window.clone()).collect(),
                retrieval_scores,
                relevant,
            });
        }
    }
    (cases, misses)
}

/// Character span of the occurrence of `answer` nearest to `near` (a character offset).
fn locate(text: &str, answer: &str, near: usize) -> Option<(usize, usize)> {
    text.match_indices(answer)
        .map(|(byte, _)| text[..byte].chars().count())
        .min_by_key(|&start| start.abs_diff(near))
        .map(|start| (start, start + answer.chars().count()))
}

/// Hit@1 and MRR of the candidates ordered by `scores(case)`.
pub fn evaluate(cases: &[&Case], scores: impl Fn(&Case) -> Vec<f32>) -> Metrics {
    let mut metrics = Metrics::default();
    for case in cases {
        let order = order_by_score(&scores(case));
        let rank = order
            .iter()
            .position(|i| case.relevant.contains(i))
            .unwrap_or(usize::MAX - 1)
            + 1;
        metrics.hit_at_1 += f64::from(u8::from(rank == 1));
        metrics.mrr += 1.0 / rank as f64;
    }
    let n = cases.len().max(1) as f64;
    Metrics {
        hit_at_1: metrics.hit_at_1 / n,
        mrr: metrics.mrr / n,
    }
}

pub fn retrieval_order(case: &Case) -> Vec<f32> {
    case.retrieval_scores.clone()
}

pub fn rescored(case: &Case, weight: f32) -> Vec<f32> {
    let candidates: Vec<Candidate<'_>> = case
        .windows
        .iter()
        .zip(&case.retrieval_scores)
        .map(|(text, &retrieval_score)| Candidate {
            text,
            retrieval_score,
            ..Default::default()
        })
        .collect();
    blend(
        &case.query_vector,
        &case.window_vectors,
        &candidates,
        weight,
    )
}
