//! A MediaWiki with neither an event stream nor EventBus, polled: `list=recentchanges` of
//! its Action API (`rcdir=newer`, with continuation) every `poll_interval_ms`, each change
//! turned into the `page_change` event a stream would have sent, so that decoding, the
//! fence and the content fetch are the stream's.
//!
//! - Page edits and creations; the log events that change what can be read: delete,
//!   restore, move (a move out of the namespaces indexed is a delete), and revision
//!   visibility (`delete/revision`, `suppress/revision`), and protection, which changes
//!   no text but adds a null revision (fetched, nothing embedded).
//! - A change's place is its timestamp and `rcid`: the position kept in
//!   `<data_dir>/mediawiki.json` is the last change durably indexed, and the next poll
//!   starts at its second and skips what is at or before it, so the boundary second is
//!   neither skipped nor applied twice.
//! - recentchanges keeps `$wgRCMaxAge` (90 days by default): when the oldest change it
//!   still holds is past the position, the changes between are gone. That gap is logged
//!   as an error and counted (`casement_mediawiki_poll_gaps_total`); the repair is
//!   `casement audit --fix --wiki`, which lists the wiki's pages (`allpages`) and their
//!   revisions. Polling goes on from the oldest change held.

use std::sync::Arc;
use std::time::Duration;

use casement_pipeline::{Fetcher, QueryError, SourceId};
use serde_json::Value;

use super::{MediawikiConfig, StreamMetrics, StreamPosition};
use crate::sources::Feeder;
use changes::{events, lookup, name_pages};

mod changes;

/// What the poller needs besides its settings.
#[derive(Debug, Clone)]
pub struct PollSource {
    pub config: MediawikiConfig,
    /// The fetcher's client (`[fetch]`: its User-Agent, limits and `[fetch.auth]` login).
    pub fetcher: Fetcher,
    /// The wiki's host (`host[:port]` of `sources.mediawiki.api_url`), the events'
    /// `meta.domain`.
    pub domain: String,
    pub feeder: Feeder,
    pub position: Arc<StreamPosition>,
    pub metrics: StreamMetrics,
    pub requests_per_second: f64,
}

/// The wiki, as `siteinfo` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wiki {
    /// `wikiid`: the documents are `<wiki_id>:<page_id>`, as a stream's `wiki_id`.
    pub wiki_id: String,
}

/// A change's place in recentchanges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark {
    /// Seconds since the epoch (the API's resolution).
    pub seconds: i64,
    pub rcid: u64,
}

impl Mark {
    /// `2026-11-29T03:58:15Z|12345`, as `mediawiki.json` keeps it.
    pub fn text(&self) -> String {
        format!("{}|{}", timestamp(self.seconds), self.rcid)
    }

    pub fn parse(text: &str) -> Option<Self> {
        let (time, rcid) = text.split_once('|')?;
        Some(Self {
            seconds: chrono::DateTime::parse_from_rfc3339(time).ok()?.timestamp(),
            rcid: rcid.parse().ok()?,
        })
    }

    fn of(change: &Value) -> Option<Self> {
        Some(Self {
            seconds: chrono::DateTime::parse_from_rfc3339(change.get("timestamp")?.as_str()?)
                .ok()?
                .timestamp(),
            rcid: change.get("rcid")?.as_u64()?,
        })
    }
}

fn timestamp(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn strings(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

/// Asks `siteinfo` with the configured login: a wiki that does not let this client read
/// (no login where one is needed, a refused login or token) is an error here, at start,
/// not a dead letter per change.
pub async fn check(fetcher: &Fetcher, domain: &str) -> Result<Wiki, QueryError> {
    let answer = fetcher
        .query(
            domain,
            &strings(&[("meta", "siteinfo"), ("siprop", "general")]),
        )
        .await?;
    let wiki_id = answer
        .pointer("/query/general/wikiid")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            QueryError::Failed(format!(
                "{domain}: the wiki's siteinfo names no wikiid: is sources.mediawiki.api_url a \
                 MediaWiki's api.php?"
            ))
        })?;
    Ok(Wiki {
        wiki_id: wiki_id.to_owned(),
    })
}

/// Where polling begins: the wiki, and the change after which it follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    pub wiki: Wiki,
    pub after: Mark,
    /// `after` is the position kept from an earlier run (not the wiki's newest change).
    pub resumed: bool,
}

/// Asks the wiki who it is and where to begin: after the position kept in
/// `mediawiki.json`, or, when nothing from this wiki was indexed yet, after its newest
/// change by the wiki's own clock (`casement audit --wiki --fix` indexes the pages it
/// already has). Everything the wiki records after this returns is followed.
pub async fn start(source: &PollSource) -> Result<Start, QueryError> {
    let wiki = check(&source.fetcher, &source.domain).await?;
    if let Some(after) = source
        .position
        .resume_after()
        .as_deref()
        .and_then(Mark::parse)
    {
        return Ok(Start {
            wiki,
            after,
            resumed: true,
        });
    }
    Ok(Start {
        wiki,
        after: newest(source).await?,
        resumed: false,
    })
}

/// Polls until the task is aborted, from `start` (`None`: the start could not ask the
/// wiki, and the poller asks until it can).
pub async fn run(source: PollSource, start: Option<Start>) -> anyhow::Result<()> {
    let interval = Duration::from_millis(source.config.poll_interval_ms);
    let Start {
        wiki,
        after: mut last,
        ..
    } = match start {
        Some(start) => start,
        None => {
            let mut wait = interval;
            loop {
                match self::start(&source).await {
                    Ok(start) => {
                        tracing::info!(api = %source.config.api_url, after = %start.after.text(), "polling the wiki's recent changes");
                        break start;
                    }
                    Err(error) => {
                        tracing::warn!(error = %format!("{error:#}"), retry_in_ms = wait.as_millis() as u64, "cannot ask the wiki where to begin; trying again");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(300));
                    }
                }
            }
        }
    };
    let mut gap_checked = false;
    let mut backoff = interval;
    loop {
        if !gap_checked && last.rcid > 0 {
            match gap(&source, last).await {
                Ok(Some(oldest)) => {
                    source.metrics.poll_gaps.inc();
                    tracing::error!(
                        api = %source.config.api_url, position = %last.text(), oldest_held = %oldest.text(),
                        "the wiki's recentchanges no longer holds the changes since the last one indexed (older than $wgRCMaxAge): \
                         what changed in between is missed; run `casement audit --fix --wiki` to compare the index with the wiki's pages and repair it"
                    );
                    last = Mark {
                        seconds: oldest.seconds,
                        rcid: oldest.rcid.saturating_sub(1),
                    };
                    gap_checked = true;
                }
                Ok(None) => gap_checked = true,
                Err(error) => {
                    tracing::warn!(%error, "cannot check the wiki's recentchanges horizon; trying again")
                }
            }
        }
        match poll(&source, &wiki, &mut last).await {
            Ok(()) => backoff = interval,
            Err(QueryError::Later(wait, why)) => {
                tracing::info!(wait_ms = wait.as_millis() as u64, %why, "the wiki asks to wait");
                tokio::time::sleep(wait).await;
            }
            Err(error) => {
                tracing::warn!(%error, retry_in_ms = backoff.as_millis() as u64, "cannot poll the wiki's recent changes; trying again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(300));
            }
        }
        tokio::time::sleep(interval).await;
    }
}

/// The wiki's newest change (none yet: its clock's now, rcid 0).
async fn newest(source: &PollSource) -> Result<Mark, QueryError> {
    let answer = source
        .fetcher
        .query(
            &source.domain,
            &strings(&[
                ("list", "recentchanges"),
                ("rcdir", "older"),
                ("rcprop", "ids|timestamp"),
                ("rclimit", "1"),
            ]),
        )
        .await?;
    Ok(answer
        .pointer("/query/recentchanges/0")
        .and_then(Mark::of)
        .unwrap_or(Mark {
            seconds: chrono::Utc::now().timestamp(),
            rcid: 0,
        }))
}

/// The oldest change recentchanges holds, when it is past `last` with changes missing in
/// between (rcids are consecutive).
async fn gap(source: &PollSource, last: Mark) -> Result<Option<Mark>, QueryError> {
    let answer = source
        .fetcher
        .query(
            &source.domain,
            &strings(&[
                ("list", "recentchanges"),
                ("rcdir", "newer"),
                ("rcprop", "ids|timestamp"),
                ("rclimit", "1"),
            ]),
        )
        .await?;
    let oldest = answer.pointer("/query/recentchanges/0").and_then(Mark::of);
    Ok(oldest.filter(|oldest| oldest.rcid > last.rcid + 1 && *oldest > last))
}

/// One poll: every change after `last`, page by page, handed to the pipeline in order.
async fn poll(source: &PollSource, wiki: &Wiki, last: &mut Mark) -> Result<(), QueryError> {
    let spacing = Duration::from_secs_f64(1.0 / source.requests_per_second);
    let mut continuation: Option<String> = None;
    loop {
        let mut params = strings(&[
            ("list", "recentchanges"),
            ("rcdir", "newer"),
            ("rcprop", "title|ids|timestamp|sizes|loginfo|redirect"),
            ("rctype", "edit|new|log"),
            ("rclimit", "500"),
        ]);
        params.push(("rcstart", timestamp(last.seconds)));
        if let Some(from) = &continuation {
            params.push(("rccontinue", from.clone()));
        }
        let answer = source.fetcher.query(&source.domain, &params).await?;
        let changes: Vec<Value> = answer
            .pointer("/query/recentchanges")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let changes: Vec<(Mark, Value)> = changes
            .into_iter()
            .filter_map(|change| Some((Mark::of(&change)?, change)))
            .filter(|(mark, _)| *mark > *last)
            .collect();
        let mut changes = changes;
        name_pages(source, &mut changes).await?;
        let pages = lookup(source, &changes).await?;
        for (mark, change) in changes {
            for event in events(&source.config, wiki, &source.domain, &change, &pages) {
                send(source, event, mark)
                    .await
                    .map_err(|e| QueryError::Failed(e.to_string()))?;
            }
            *last = mark;
        }
        continuation = answer
            .pointer("/continue/rccontinue")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if continuation.is_none() {
            return Ok(());
        }
        tokio::time::sleep(spacing).await;
    }
}

async fn send(source: &PollSource, event: Value, mark: Mark) -> anyhow::Result<()> {
    let kind = event
        .get("page_change_kind")
        .and_then(Value::as_str)
        .unwrap_or("other")
        .to_owned();
    if !source.config.wants(&event) {
        source.metrics.filtered.inc();
        return Ok(());
    }
    source.metrics.events.with_label_values(&[&kind]).inc();
    let changed = crate::sources::event_time_ms(&event);
    if let Some(dt) = changed {
        source.metrics.lag.observe(dt);
    }
    let offset = source
        .feeder
        .send_bytes(SourceId::Mediawiki, serde_json::to_vec(&event)?, changed)
        .await?;
    source.position.sent(offset, mark.text());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_order_by_time_then_rcid_and_round_trip() {
        let a = Mark::parse("2026-11-29T03:58:15Z|12").expect("a mark");
        let b = Mark::parse("2026-11-29T03:58:15Z|13").expect("a mark");
        let c = Mark::parse("2026-11-29T03:58:16Z|11").expect("a mark");
        assert!(a < b && b < c);
        assert_eq!(Mark::parse(&a.text()), Some(a));
        assert_eq!(a.text(), "2026-11-29T03:58:15Z|12");
        assert!(Mark::parse("yesterday|1").is_none());
    }
}
