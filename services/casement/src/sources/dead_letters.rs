//! The all-in-one's dead-letter sink: one JSON line per rejected event in a file (the Kafka
//! indexer's dead-letter topic, locally), with the reason and where the event came from.
//! Appended and synced before the event counts as handled.
//!
//! A line holds `time_ms`, `source`, `offset`, `reason`, `detail`, the message `key` and the
//! payload: as text (`payload`) when it is UTF-8, else as base64 (`payload_base64`), and
//! `size_bytes` for a webhook body too large to read.
//!
//! The file is bounded (settings in `[sources.webhook]`, checked at start):
//! - A payload or key longer than `dead_letter_max_payload_bytes` (64 KiB) is kept as its
//!   length and hash only: `payload_bytes` and `payload_xxh3_128` (or `key_bytes`,
//!   `key_xxh3_128`), the hash in hex as `xxhsum -H2` prints it, so a sender can find which
//!   of its messages it was. The rest of the line is kept: a letter is never dropped, only
//!   its bulk. A line that would still not fit under the cap keeps both as hashes.
//! - When an append would take the file past `dead_letter_max_bytes` (64 MiB), the file is
//!   first renamed to `<name>.1`, replacing an older one: at most two files, together at
//!   most twice the cap (plus one line). Letters older than the previous file are gone by
//!   design; `casement_indexer_dead_letters_total` still counts them.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use casement_pipeline::{DeadLetter, DeadLetterSink, now_ms};
use serde_json::{Value, json};

use crate::config::DeadLetterFileConfig;

#[derive(Debug)]
pub struct DeadLetterFile {
    config: DeadLetterFileConfig,
    lock: tokio::sync::Mutex<()>,
}

impl DeadLetterFile {
    pub fn new(config: &DeadLetterFileConfig) -> Self {
        Self {
            config: config.clone(),
            lock: tokio::sync::Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.config.path
    }

    /// Appends one line, rotating the file first when the line would take it over its cap.
    pub async fn append(&self, letter: &DeadLetter, size: Option<usize>) -> anyhow::Result<()> {
        let mut line = encode(letter, size, self.config.max_payload_bytes)?;
        if line.len() as u64 >= self.config.max_bytes {
            line = encode(letter, size, 0)?;
        }
        line.push(b'\n');
        let _guard = self.lock.lock().await;
        let (path, max_bytes) = (self.config.path.clone(), self.config.max_bytes);
        tokio::task::spawn_blocking(move || append_capped(&path, &line, max_bytes)).await??;
        Ok(())
    }
}

impl DeadLetterSink for DeadLetterFile {
    async fn send(&self, letter: &DeadLetter) -> anyhow::Result<()> {
        self.append(letter, None).await
    }
}

/// Where a full dead-letter file goes: `<path>.1`.
/// An event over `events.max_event_bytes` that was not read whole (a webhook body, a
/// stream event): recorded with its length and no bytes, and counted as a dead letter.
pub async fn record_too_large(
    file: &DeadLetterFile,
    metrics: &casement_pipeline::Metrics,
    source: casement_pipeline::SourceId,
    size: usize,
    max: usize,
) -> String {
    let detail = format!("the event is over events.max_event_bytes = {max} bytes");
    let letter = DeadLetter {
        origin: casement_pipeline::Origin {
            source,
            offset: -1,
            timestamp_ms: Some(casement_pipeline::now_ms()),
            bulk: false,
        },
        key: None,
        payload: None,
        reason: casement_pipeline::Reason::TooLarge,
        detail: detail.clone(),
    };
    if let Err(error) = file.append(&letter, Some(size)).await {
        tracing::warn!(%error, "cannot record an oversize event in the dead-letter file");
    }
    metrics
        .dead_letters
        .with_label_values(&[casement_pipeline::Reason::TooLarge.as_str()])
        .inc();
    detail
}

pub fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// The letter as one JSON line (without its newline); a payload or key longer than
/// `max_inline` bytes as its length and hash.
fn encode(
    letter: &DeadLetter,
    size: Option<usize>,
    max_inline: usize,
) -> serde_json::Result<Vec<u8>> {
    let mut line = json!({
        "time_ms": now_ms(),
        "source": letter.origin.source.name(),
        "offset": letter.origin.offset,
        "reason": letter.reason.as_str(),
        "detail": letter.detail,
    });
    match letter.key.as_deref() {
        Some(key) if key.len() > max_inline => digest(&mut line, "key", key),
        Some(key) => line["key"] = String::from_utf8_lossy(key).into(),
        None => {}
    }
    match letter.payload.as_deref() {
        Some(payload) if payload.len() > max_inline => digest(&mut line, "payload", payload),
        Some(payload) => match std::str::from_utf8(payload) {
            Ok(text) => line["payload"] = text.into(),
            Err(_) => {
                line["payload_base64"] = base64::engine::general_purpose::STANDARD
                    .encode(payload)
                    .into();
            }
        },
        None => {}
    }
    if let Some(size) = size {
        line["size_bytes"] = size.into();
    }
    serde_json::to_vec(&line)
}

fn digest(line: &mut Value, field: &str, bytes: &[u8]) {
    line[format!("{field}_bytes")] = bytes.len().into();
    line[format!("{field}_xxh3_128")] =
        format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes)).into();
}

/// Appends `line` to `path` and syncs it; first renames a non-empty file to `<path>.1` when
/// the line would take it past `max_bytes`.
fn append_capped(path: &Path, line: &[u8], max_bytes: u64) -> std::io::Result<()> {
    let current = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
        Err(error) => return Err(error),
    };
    let rotate = current > 0 && current + line.len() as u64 > max_bytes;
    if rotate {
        std::fs::rename(path, rotated(path))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(line)?;
    file.sync_data()?;
    if rotate || current == 0 {
        // The new name and the new file are durable too, not only their bytes.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use casement_pipeline::{Origin, Reason, SourceId};

    use super::*;

    fn letter(payload: Vec<u8>) -> DeadLetter {
        DeadLetter {
            origin: Origin {
                source: SourceId::Watch,
                offset: 7,
                timestamp_ms: None,
                bulk: false,
            },
            key: Some(b"kb:big".to_vec()),
            payload: Some(payload),
            reason: Reason::TooLarge,
            detail: "too big".into(),
        }
    }

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn an_oversize_payload_is_kept_as_length_and_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dead-letters.jsonl");
        let file = DeadLetterFile::new(&DeadLetterFileConfig {
            path: path.clone(),
            max_bytes: 1 << 20,
            max_payload_bytes: 16,
        });
        let big = vec![b'x'; 4096];
        file.append(&letter(big.clone()), None).await.unwrap();
        file.append(&letter(b"small".to_vec()), None).await.unwrap();
        file.append(&letter(vec![0xff; 3]), None).await.unwrap();
        let lines = lines(&path);
        assert_eq!(lines.len(), 3);
        let hashed = &lines[0];
        assert_eq!(hashed["payload_bytes"], 4096);
        assert_eq!(
            hashed["payload_xxh3_128"],
            format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&big))
        );
        assert!(hashed.get("payload").is_none() && hashed.get("payload_base64").is_none());
        for field in ["reason", "detail", "source", "offset", "key"] {
            assert!(!hashed[field].is_null(), "{field} missing: {hashed}");
        }
        assert_eq!(
            (
                &hashed["reason"],
                &hashed["source"],
                &hashed["offset"],
                &hashed["key"]
            ),
            (
                &json!("too_large"),
                &json!("watch"),
                &json!(7),
                &json!("kb:big")
            )
        );
        assert!(std::fs::metadata(&path).unwrap().len() < 1024);
        assert_eq!(lines[1]["payload"], "small");
        assert_eq!(lines[2]["payload_base64"], "////");
    }

    #[tokio::test]
    async fn the_file_rotates_at_its_cap_keeping_two_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dead-letters.jsonl");
        let max_bytes = 4096;
        let file = DeadLetterFile::new(&DeadLetterFileConfig {
            path: path.clone(),
            max_bytes,
            max_payload_bytes: 1024,
        });
        let mut written = 0;
        for n in 0..40u8 {
            file.append(&letter(vec![b'a' + n % 26; 1000]), None)
                .await
                .unwrap();
            written += 1;
            assert!(std::fs::metadata(&path).unwrap().len() <= max_bytes);
        }
        let (current, older) = (lines(&path), lines(&rotated(&path)));
        assert!(!older.is_empty() && !current.is_empty());
        assert!(
            current.len() + older.len() < written,
            "older letters rotated out"
        );
        assert!(std::fs::metadata(rotated(&path)).unwrap().len() <= max_bytes);
        let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(files.len(), 2, "at most the file and its .1");
        // The newest letter is last in the current file.
        let last = current.last().unwrap();
        assert_eq!(last["payload"].as_str().unwrap(), "n".repeat(1000));
    }

    #[tokio::test]
    async fn a_line_that_cannot_fit_keeps_hashes_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("letters.jsonl");
        let file = DeadLetterFile::new(&DeadLetterFileConfig {
            path: path.clone(),
            max_bytes: 4096,
            max_payload_bytes: 4096,
        });
        // Control bytes grow sixfold as JSON: 4,000 of them cannot fit in 4 KiB inline.
        file.append(&letter(vec![1; 4000]), None).await.unwrap();
        let lines = lines(&path);
        assert_eq!(lines[0]["payload_bytes"], 4000);
        assert!(std::fs::metadata(&path).unwrap().len() <= 4096);
    }
}
