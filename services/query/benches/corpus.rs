//! The benchmark corpus: real text only, indexed by the indexer's own stages with the real
//! embedding model, until at least `target` sentences: SciFact abstracts, the SQuAD v1.1 dev
//! articles, the 18F Handbook pages (final revisions), the Wikipedia pages (final revisions),
//! then older revisions as separate documents (old versions of a page kept next to the
//! current one, as knowledge bases do): the Wikipedia pages' first sampled revisions, then
//! the middle revision of each Wikipedia page and of each 18F page.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use casement_events::revision_log::LogEvent;
use casement_events::{Change, Event, EventFormat};
use casement_text::{Format, Revision};

pub use casement_testkit::data;

fn lines(path: &Path) -> Vec<serde_json::Value> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader: Box<dyn BufRead> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::new(flate2::read::GzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    };
    reader
        .lines()
        .map(|l| serde_json::from_str(&l.expect("line")).expect("json"))
        .collect()
}

fn event(doc_id: String, title: &str, format: Format, content: String) -> Event {
    Event {
        change: Change::Upsert(Revision {
            access: None,
            metadata: Default::default(),
            doc_id,
            revision: 1,
            title: Some(title.to_owned()),
            url: None,
            tenant: None,
            format,
            content,
            revision_url: None,
        }),
        format: EventFormat::Native,
    }
}

/// The non-delete revisions with content of each document of a revision log, oldest first
/// (a delete forgets the document's earlier revisions), in the log's one publish order.
fn revisions(path: &Path) -> Vec<Vec<LogEvent>> {
    let mut pages: BTreeMap<String, Vec<LogEvent>> = BTreeMap::new();
    for event in casement_testkit::read_log(path) {
        if event.is_delete() {
            pages.remove(&event.doc_id);
        } else if !event.content.is_empty() {
            pages.entry(event.doc_id.clone()).or_default().push(event);
        }
    }
    pages.into_values().collect()
}

/// The middle revision of each document with at least three revisions.
fn middles(pages: &[Vec<LogEvent>]) -> impl Iterator<Item = Event> + '_ {
    pages
        .iter()
        .filter(|revs| revs.len() >= 3)
        .map(|revs| log_event("middle-revision:", &revs[revs.len() / 2]))
}

fn log_event(prefix: &str, line: &LogEvent) -> Event {
    let format = match line.format.as_str() {
        "text" => Format::Text,
        _ => Format::Markdown,
    };
    event(
        format!("{prefix}{}", line.doc_id),
        line.title.as_deref().unwrap_or("untitled"),
        format,
        line.content.clone(),
    )
}

/// Every corpus event in order; the caller stops once the index is big enough.
pub fn events() -> impl Iterator<Item = Event> {
    let scifact = lines(&data("scifact/corpus.jsonl.gz"))
        .into_iter()
        .map(|a| {
            event(
                format!("scifact:{}", a["_id"].as_str().unwrap_or_default()),
                a["title"].as_str().unwrap_or_default(),
                Format::Text,
                a["text"].as_str().unwrap_or_default().to_owned(),
            )
        });
    let squad = lines(&data("squad/dev-v1.1.articles.jsonl"))
        .into_iter()
        .map(|a| {
            let title = a["title"].as_str().unwrap_or_default().to_owned();
            event(
                format!("squad:{title}"),
                &title,
                Format::Text,
                a["text"].as_str().unwrap_or_default().to_owned(),
            )
        });
    let handbook = revisions(&data("revisions/18f-handbook/all.jsonl.gz"));
    let wikipedia = revisions(&data("revisions/wikipedia-versions/all.jsonl.gz"));
    let last = |pages: &[Vec<LogEvent>]| -> Vec<Event> {
        pages
            .iter()
            .filter_map(|revs| revs.last())
            .map(|l| log_event("", l))
            .collect()
    };
    let wikipedia_first: Vec<Event> = wikipedia
        .iter()
        .filter(|revs| revs.len() >= 2)
        .map(|revs| log_event("first-revision:", &revs[0]))
        .collect();
    let older: Vec<Event> = middles(&wikipedia).chain(middles(&handbook)).collect();
    scifact
        .chain(squad)
        .chain(last(&handbook))
        .chain(last(&wikipedia))
        .chain(wikipedia_first)
        .chain(older)
}

/// SQuAD v1.1 dev questions, in file order.
pub fn questions() -> Vec<String> {
    let raw = std::fs::read_to_string(data("squad/dev-v1.1.json")).expect("SQuAD");
    let json: serde_json::Value = serde_json::from_str(&raw).expect("json");
    let mut out = Vec::new();
    for article in json["data"].as_array().expect("data") {
        for paragraph in article["paragraphs"].as_array().expect("paragraphs") {
            for qa in paragraph["qas"].as_array().expect("qas") {
                out.push(qa["question"].as_str().expect("q").to_owned());
            }
        }
    }
    out
}
