//! The all-in-one's dead-letter sink: one JSON line per rejected event in a file (the Kafka
//! indexer's dead-letter topic, locally), with the original bytes, the reason and where the
//! event came from. Appended and synced before the event counts as handled.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use casement_pipeline::{DeadLetter, DeadLetterSink, now_ms};
use serde_json::json;

#[derive(Debug)]
pub struct DeadLetterFile {
    path: PathBuf,
    lock: tokio::sync::Mutex<()>,
}

impl DeadLetterFile {
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            lock: tokio::sync::Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line. The payload is kept as text when it is UTF-8, else as base64.
    pub async fn append(&self, letter: &DeadLetter, size: Option<usize>) -> anyhow::Result<()> {
        let mut line = json!({
            "time_ms": now_ms(),
            "source": letter.origin.source.name(),
            "offset": letter.origin.offset,
            "reason": letter.reason.as_str(),
            "detail": letter.detail,
        });
        if let Some(key) = &letter.key {
            line["key"] = String::from_utf8_lossy(key).into();
        }
        match letter.payload.as_deref().map(std::str::from_utf8) {
            Some(Ok(text)) => line["payload"] = text.into(),
            Some(Err(_)) => {
                line["payload_base64"] = base64::engine::general_purpose::STANDARD
                    .encode(letter.payload.as_deref().unwrap_or_default())
                    .into();
            }
            None => {}
        }
        if let Some(size) = size {
            line["size_bytes"] = size.into();
        }
        let mut bytes = serde_json::to_vec(&line)?;
        bytes.push(b'\n');
        let _guard = self.lock.lock().await;
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            file.write_all(&bytes)?;
            file.sync_data()
        })
        .await??;
        Ok(())
    }
}

impl DeadLetterSink for DeadLetterFile {
    async fn send(&self, letter: &DeadLetter) -> anyhow::Result<()> {
        self.append(letter, None).await
    }
}
