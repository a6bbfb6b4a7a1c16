//! Runs models off the async executor: each call goes to Tokio's blocking pool, and at most
//! `max_concurrent` calls run at once (each ONNX run already uses several threads).

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::embedder::Embed;
use crate::error::{Error, Result};

#[derive(Clone)]
pub struct BlockingPool {
    embedder: Arc<dyn Embed>,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for BlockingPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingPool")
            .field("model", &self.embedder.model_id())
            .field("available", &self.permits.available_permits())
            .finish()
    }
}

impl BlockingPool {
    pub fn new(embedder: Arc<dyn Embed>, max_concurrent: usize) -> Self {
        Self {
            embedder,
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
        }
    }

    /// Embeds on the blocking pool; the calling task only awaits.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        let _permit = self.permits.acquire().await.map_err(|_| Error::Inference {
            reason: "embedding pool closed".to_owned(),
        })?;
        let embedder = self.embedder.clone();
        tokio::task::spawn_blocking(move || {
            embedder.embed(&texts.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .map_err(|e| Error::Inference {
            reason: format!("embedding task failed: {e}"),
        })?
    }
}
