//! Rerank stage: the best merged windows scored by a reranker (`casement_inference::Rerank`:
//! a cross-encoder or rescoring), on the blocking pool, one request at a time; each window
//! is given as an excerpt centred on its best match ([`super::excerpt`]).

use std::sync::Arc;

use casement_inference::{Candidate, Rerank, WindowParts};
use tokio::sync::Semaphore;

use super::excerpt;
use super::merge::Window;
use crate::error::ApiError;

/// A reranker run on the blocking pool, one request at a time (each run already uses every
/// ONNX Runtime thread).
#[derive(Clone)]
pub struct Reranker {
    model: Arc<dyn Rerank>,
    permit: Arc<Semaphore>,
    /// Words of each window the model reads ([`excerpt::rerank_text`]).
    max_words: usize,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("name", &self.model.name())
            .finish()
    }
}

impl Reranker {
    pub fn new(model: Arc<dyn Rerank>) -> Self {
        Self {
            model,
            permit: Arc::new(Semaphore::new(1)),
            max_words: usize::MAX,
        }
    }

    /// The model reads at most `max_words` words of each window, centred on its best match.
    pub fn with_max_words(mut self, max_words: usize) -> Self {
        self.max_words = max_words.max(1);
        self
    }

    pub fn name(&self) -> &str {
        self.model.name()
    }

    pub(super) async fn score(
        &self,
        query: &str,
        windows: &[Window],
    ) -> Result<Vec<f32>, ApiError> {
        let _permit = self
            .permit
            .acquire()
            .await
            .map_err(|_| ApiError::Unavailable("reranker closed".into()))?;
        let model = self.model.clone();
        let query = query.to_owned();
        let inputs: Vec<Input> = windows
            .iter()
            .map(|w| Input {
                excerpt: excerpt::rerank_text(w, self.max_words),
                score: w.score,
                title: w.title.clone(),
                headings: w.section_path.clone(),
                text: w.text.clone(),
                matches: w
                    .matches
                    .iter()
                    .map(|m| (m.sentence.clone(), m.score))
                    .collect(),
            })
            .collect();
        tokio::task::spawn_blocking(move || {
            let candidates: Vec<Candidate<'_>> = inputs
                .iter()
                .map(|i| Candidate {
                    text: &i.excerpt,
                    retrieval_score: i.score,
                    window: WindowParts {
                        title: &i.title,
                        headings: &i.headings,
                        text: &i.text,
                        matches: &i.matches,
                    },
                })
                .collect();
            model.score(&query, &candidates)
        })
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "reranker task failed");
            ApiError::Unavailable("the reranker failed; retry later".into())
        })?
        .map_err(ApiError::model)
    }
}

/// A window's parts, owned, for the blocking task.
struct Input {
    excerpt: String,
    score: f32,
    title: String,
    headings: Vec<String>,
    text: String,
    matches: Vec<(String, f32)>,
}
