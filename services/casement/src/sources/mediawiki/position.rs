//! Where the MediaWiki stream resumes: the SSE id of the last event the pipeline's
//! commits passed, kept in `<data_dir>/mediawiki.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::sources::{read_state, write_state};

/// What `mediawiki.json` keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Saved {
    stream_url: String,
    /// The SSE id of the last event durably handled (sent as `Last-Event-ID`).
    last_event_id: Option<String>,
}

/// Where the stream resumes: the SSE ids of the events sent, by their offset in the
/// pipeline, and the last one the pipeline's commits passed.
#[derive(Debug)]
pub struct StreamPosition {
    path: PathBuf,
    stream_url: String,
    inner: Mutex<Position>,
}

#[derive(Debug, Default)]
struct Position {
    sent: BTreeMap<i64, String>,
    committed_next: i64,
    saved: Option<String>,
}

impl StreamPosition {
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("mediawiki.json")
    }

    /// The saved position of `stream_url` (another stream's starts from now).
    pub fn load(data_dir: &Path, stream_url: &str) -> Self {
        let path = Self::path(data_dir);
        let saved: Saved = read_state(&path);
        let saved = (saved.stream_url == stream_url)
            .then_some(saved.last_event_id)
            .flatten();
        // An id an earlier version saved that no header can carry would fail every
        // reconnect: the stream starts from now instead.
        let saved = saved.filter(|id| {
            let usable = super::sse::is_header_value(id);
            if !usable {
                tracing::warn!(path = %path.display(),
                    "the saved stream position is not a valid Last-Event-ID; following the stream from now");
            }
            usable
        });
        Self {
            path,
            stream_url: stream_url.to_owned(),
            inner: Mutex::new(Position {
                saved,
                ..Position::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Position> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The id to resume after (`Last-Event-ID`).
    pub fn resume_after(&self) -> Option<String> {
        self.lock().saved.clone()
    }

    /// The event of SSE id `id` went to the pipeline as `offset`.
    pub(super) fn sent(&self, offset: i64, id: String) {
        let mut position = self.lock();
        position.sent.insert(offset, id);
        // Its commit may have come first.
        let next = position.committed_next;
        if offset < next {
            self.advance(&mut position, next);
        }
    }

    /// The pipeline finished every event of the stream below `next`.
    pub fn committed(&self, next: i64) {
        let mut position = self.lock();
        position.committed_next = position.committed_next.max(next);
        self.advance(&mut position, next);
    }

    fn advance(&self, position: &mut Position, next: i64) {
        let Some(id) = position
            .sent
            .range(..next)
            .next_back()
            .map(|(_, id)| id.clone())
        else {
            return;
        };
        position.sent = position.sent.split_off(&next);
        position.saved = Some(id.clone());
        let saved = Saved {
            stream_url: self.stream_url.clone(),
            last_event_id: Some(id),
        };
        if let Err(error) = write_state(&self.path, &saved) {
            tracing::warn!(%error, "cannot save the stream position (events after the last saved one are read again, safely)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_position_follows_commits_of_sent_events() {
        let dir = tempfile::tempdir().expect("temp dir");
        let position = StreamPosition::load(dir.path(), "http://s");
        position.sent(0, "a".into());
        position.sent(1, "b".into());
        position.sent(2, "c".into());
        position.committed(2);
        assert_eq!(position.resume_after().as_deref(), Some("b"));
        // A commit past an event not yet recorded as sent: saved when it is.
        position.committed(4);
        position.sent(3, "d".into());
        assert_eq!(
            StreamPosition::load(dir.path(), "http://s")
                .resume_after()
                .as_deref(),
            Some("d")
        );
        // Another stream starts from now.
        assert_eq!(
            StreamPosition::load(dir.path(), "http://t").resume_after(),
            None
        );
    }

    /// A saved id no header can carry (saved by an earlier version) is not sent back: the
    /// stream starts from now instead of failing every reconnect.
    #[test]
    fn a_saved_id_that_is_not_a_header_value_is_dropped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let saved = Saved {
            stream_url: "http://s".into(),
            last_event_id: Some("poison\u{1}id".into()),
        };
        crate::sources::write_state(&StreamPosition::path(dir.path()), &saved).expect("write");
        assert_eq!(
            StreamPosition::load(dir.path(), "http://s").resume_after(),
            None
        );
    }
}
