//! The two evaluation sets, read from `../shared/data`, and the revision logs `casement
//! backfill` indexes them from.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use casement_testkit::read_lines;
use serde_json::{Value, json};

/// One document of a corpus: what `casement backfill` indexes and the chunker cuts.
pub struct Doc {
    pub doc_id: String,
    pub title: String,
    pub text: String,
}

/// Which half of SQuAD a question belongs to: defaults are chosen on `Tune` and reported
/// on `Report`. The split is by article (alternate articles in file order), so no article
/// is in both halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Half {
    Tune,
    Report,
}

impl Half {
    pub fn name(self) -> &'static str {
        match self {
            Half::Tune => "tune",
            Half::Report => "report",
        }
    }
}

pub struct SquadQuestion {
    pub question: String,
    pub doc_id: String,
    /// Character ranges (Unicode scalar values) of the reference answers in the article.
    pub answers: Vec<(usize, usize)>,
    pub half: Half,
}

pub struct Squad {
    pub docs: Vec<Doc>,
    pub questions: Vec<SquadQuestion>,
}

pub struct Claim {
    pub claim: String,
    /// Relevant documents (BEIR qrels, score > 0).
    pub relevant: BTreeSet<String>,
    /// Evidence sentences: document id and character range in the abstract.
    pub evidence: Vec<(String, (usize, usize))>,
}

pub struct SciFact {
    pub docs: Vec<Doc>,
    pub claims: Vec<Claim>,
}

pub fn squad() -> Squad {
    let mut docs = Vec::new();
    let mut questions = Vec::new();
    for (i, line) in read_lines(&casement_testkit::data("squad/dev-v1.1.articles.jsonl"))
        .iter()
        .enumerate()
    {
        let article: Value = serde_json::from_str(line).unwrap();
        let title = article["title"].as_str().unwrap();
        let doc_id = format!("squad:{title}");
        let half = if i % 2 == 0 { Half::Tune } else { Half::Report };
        for qa in article["qas"].as_array().unwrap() {
            let answers = qa["answers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    let start = a["answer_start"].as_u64().unwrap() as usize;
                    (start, start + a["text"].as_str().unwrap().chars().count())
                })
                .collect();
            questions.push(SquadQuestion {
                question: qa["question"].as_str().unwrap().to_owned(),
                doc_id: doc_id.clone(),
                answers,
                half,
            });
        }
        docs.push(Doc {
            doc_id,
            title: title.replace('_', " "),
            text: article["text"].as_str().unwrap().to_owned(),
        });
    }
    Squad { docs, questions }
}

pub fn scifact() -> SciFact {
    let mut docs = Vec::new();
    // Sentence ranges per abstract: `text` is the sentences joined by one space.
    let mut sentences: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
    for line in read_lines(&casement_testkit::data("scifact/corpus.jsonl.gz")) {
        let doc: Value = serde_json::from_str(&line).unwrap();
        let doc_id = format!("scifact:{}", doc["_id"].as_str().unwrap());
        let text = doc["text"].as_str().unwrap().to_owned();
        let mut ranges = Vec::new();
        let mut at = 0;
        for sentence in doc["sentences"].as_array().unwrap() {
            let len = sentence.as_str().unwrap().chars().count();
            ranges.push((at, at + len));
            at += len + 1;
        }
        assert_eq!(
            at.saturating_sub(1),
            text.chars().count(),
            "{doc_id}: sentences do not join to the text"
        );
        sentences.insert(doc_id.clone(), ranges);
        docs.push(Doc {
            doc_id,
            title: doc["title"].as_str().unwrap().to_owned(),
            text,
        });
    }
    let mut relevant: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in read_lines(&casement_testkit::data("scifact/qrels/test.tsv"))
        .iter()
        .skip(1)
    {
        let fields: Vec<&str> = line.split('\t').collect();
        if fields[2].trim().parse::<u32>().unwrap() > 0 {
            relevant
                .entry(fields[0].to_owned())
                .or_default()
                .insert(format!("scifact:{}", fields[1]));
        }
    }
    let mut claims = Vec::new();
    for line in read_lines(&casement_testkit::data(
        "scifact/claims_dev_sentence_evidence.jsonl",
    )) {
        let claim: Value = serde_json::from_str(&line).unwrap();
        let id = claim["id"].as_str().unwrap();
        let mut evidence = Vec::new();
        for (doc, sets) in claim["evidence"].as_object().unwrap() {
            let doc_id = format!("scifact:{doc}");
            let mut indices = BTreeSet::new();
            for set in sets.as_array().unwrap() {
                for i in set["sentences"].as_array().unwrap() {
                    indices.insert(i.as_u64().unwrap() as usize);
                }
            }
            for i in indices {
                evidence.push((doc_id.clone(), sentences[&doc_id][i]));
            }
        }
        claims.push(Claim {
            claim: claim["claim"].as_str().unwrap().to_owned(),
            relevant: relevant.get(id).cloned().unwrap_or_default(),
            evidence,
        });
    }
    assert_eq!(claims.len(), 300, "SciFact test claims");
    SciFact { docs, claims }
}

/// A revision log of creates, one per document, for `casement backfill`.
pub fn write_log(path: &Path, docs: &[Doc]) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for doc in docs {
        let event = json!({
            "doc_id": doc.doc_id,
            "revision": 1,
            "title": doc.title,
            "format": "text",
            "content": doc.text,
            "change": "create",
        });
        writeln!(out, "{event}").unwrap();
    }
    out.flush().unwrap();
}
