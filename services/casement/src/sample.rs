//! The bundled sample (`sample/18f-handbook`: six public-domain pages of the 18F Handbook
//! with their real edit history), used by `casement run` when no source is configured:
//! its history is replayed, then the latest version of each page is checked out as a
//! Markdown file under `<data_dir>/docs/` and watched, so editing a file is the next
//! revision of the same document.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use casement_events::revision_log;

use crate::config::CasementConfig;

pub const REVISIONS: &str = include_str!("../../../sample/18f-handbook/revisions.jsonl");
pub const LICENSE: &str = include_str!("../../../sample/18f-handbook/README.md");
/// The sample's golden set (ten questions whose answers are in its live pages): the
/// default `eval.golden` of `casement run` on the sample.
pub const GOLDEN: &str = include_str!("../../../sample/18f-handbook/golden.jsonl");
/// Document ids of the sample start with this; the checked-out files drop it.
pub const PREFIX: &str = "18f-handbook:";
/// Asked once the sample is indexed; `casement-data/docs/…/changing-your-name.md` answers
/// ("Wait up to 5 business days…": the README's tour edits that sentence).
pub const QUESTION: &str = "How long does a name change take in GSA systems?";

/// The sample's paths under `data_dir`.
pub fn log_path(data_dir: &Path) -> PathBuf {
    data_dir.join("sample").join("revisions.jsonl")
}

pub fn golden_path(data_dir: &Path) -> PathBuf {
    data_dir.join("sample").join("golden.jsonl")
}

pub fn docs_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("docs")
}

/// Writes the sample log and golden set (once: later edits are the user's) and checks out
/// its pages (once), and points the config's sources at them, and `eval.golden` at the
/// golden set unless one is configured.
pub fn prepare(config: &mut CasementConfig) -> anyhow::Result<()> {
    let data_dir = config.data_dir.clone();
    let log = log_path(&data_dir);
    if !log.exists() {
        let dir = log.parent().unwrap_or(&data_dir);
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(&log, REVISIONS).with_context(|| format!("writing {}", log.display()))?;
        std::fs::write(dir.join("README.md"), LICENSE)?;
    }
    let golden = golden_path(&data_dir);
    if !golden.exists() {
        std::fs::write(&golden, GOLDEN).with_context(|| format!("writing {}", golden.display()))?;
    }
    if config.eval.golden().is_none() {
        config.eval.golden = golden;
    }
    let docs = docs_dir(&data_dir);
    if !docs.exists() {
        let mut checked_out = Vec::new();
        for (doc_id, (revision, content)) in latest_pages()? {
            let relative = doc_id.strip_prefix(PREFIX).unwrap_or(&doc_id);
            let path = docs.join(format!("{relative}.md"));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, content)
                .with_context(|| format!("writing {}", path.display()))?;
            checked_out.push((doc_id, path, revision));
        }
        // The replay indexes these revisions; the watcher starts from them.
        crate::sources::watch::adopt(&data_dir, &checked_out)?;
    }
    config.sources.replay.paths = vec![log];
    config.sources.watch.dirs = vec![docs];
    config.sources.watch.doc_id_prefix = PREFIX.to_owned();
    Ok(())
}

/// The last revision and content of every page the history does not end by deleting.
fn latest_pages() -> anyhow::Result<BTreeMap<String, (u64, String)>> {
    let mut pages = BTreeMap::new();
    let (events, rejected) =
        revision_log::parse(REVISIONS.as_bytes()).context("reading the bundled sample")?;
    anyhow::ensure!(rejected.is_empty(), "the bundled sample: {rejected:?}");
    for event in events {
        if event.is_delete() {
            pages.remove(&event.doc_id);
        } else {
            pages.insert(event.doc_id, (event.revision, event.content));
        }
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sample_checks_out_its_live_pages() {
        let pages = super::latest_pages().expect("sample");
        assert_eq!(pages.len(), 4, "six pages, two deleted by their history");
        assert!(pages.keys().all(|id| id.starts_with(super::PREFIX)));
        assert!(pages.values().any(|(_, c)| c.contains("business days")));
    }

    #[test]
    fn the_golden_set_asks_about_live_pages_and_their_text() {
        let set = casement_query::eval::GoldenSet::parse(
            std::path::Path::new("golden.jsonl"),
            super::GOLDEN,
        )
        .expect("the sample's golden set loads");
        assert_eq!(set.cases.len(), 10);
        let pages = super::latest_pages().expect("sample");
        for case in &set.cases {
            let golden = &case.case;
            let (_, content) = pages
                .get(&golden.doc_id)
                .unwrap_or_else(|| panic!("{}: {} is not a live page", case.name(), golden.doc_id));
            let text = golden
                .text
                .as_deref()
                .expect("every sample case names its text");
            // The citation text drops Markdown link targets: compare against the content
            // with `[text](url)` reduced to `text`.
            let plain = content
                .split("](")
                .enumerate()
                .map(|(i, part)| {
                    if i == 0 {
                        part
                    } else {
                        part.split_once(')').map_or(part, |(_, rest)| rest)
                    }
                })
                .collect::<String>()
                .replace('[', "");
            assert!(
                casement_query::eval::score::normalise(&plain)
                    .contains(&casement_query::eval::score::normalise(text)),
                "{}: {text:?} is not in {}",
                case.name(),
                golden.doc_id
            );
        }
    }
}
