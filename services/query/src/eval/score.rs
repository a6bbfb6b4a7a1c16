//! Scoring a golden set: a case passes at k when one of the first k windows returned is of
//! its document (`doc_id` within `tenant`) and, when the case gives `text`, contains it
//! (both sides with whitespace runs collapsed to one space and lower-cased). Its rank is
//! the position of the first such window. Over the set, recall@k is the share of cases
//! that pass and MRR@k the mean of 1/rank (0 for a case that does not pass).

use serde::Serialize;

use super::golden::NumberedCase;
use crate::api::WindowAnswer;

/// Characters of the first window's text shown for a failing case.
const EXCERPT_CHARS: usize = 160;

/// Whitespace runs collapsed to one space, lower-cased: how expected text is compared.
pub fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// The case's id, or `line N`.
    pub name: String,
    #[serde(flatten)]
    pub case: NumberedCase,
    /// 1-based position of the first window that satisfies the case, within k.
    pub rank: Option<usize>,
    /// 1-based position of the first window of the expected document within k, whether or
    /// not it holds the text (tells "wrong document" from "right document, text missing").
    pub document_rank: Option<usize>,
    /// What came back first, if anything.
    pub first: Option<Returned>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.rank.is_some()
    }
}

/// A returned window, shortened for reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Returned {
    pub doc_id: String,
    pub tenant: Option<String>,
    pub section_path: Vec<String>,
    /// The window's text, whitespace collapsed, cut to 160 characters.
    pub excerpt: String,
}

impl Returned {
    fn of(window: &WindowAnswer) -> Self {
        let text = window.text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut excerpt: String = text.chars().take(EXCERPT_CHARS).collect();
        if excerpt.len() < text.len() {
            excerpt.push('…');
        }
        Self {
            doc_id: window.doc_id.clone(),
            tenant: window.tenant.clone(),
            section_path: window.section_path.clone(),
            excerpt,
        }
    }
}

/// Judges one case against the windows a search returned, in order (only the first `k`
/// count).
pub fn judge(case: &NumberedCase, windows: &[WindowAnswer], k: usize) -> CaseResult {
    let expected = case.case.text.as_deref().map(normalise);
    let of_document = |w: &WindowAnswer| {
        w.doc_id == case.case.doc_id && w.tenant.as_deref() == case.case.tenant.as_deref()
    };
    let top = &windows[..k.min(windows.len())];
    let document_rank = top.iter().position(of_document).map(|i| i + 1);
    let rank = top
        .iter()
        .position(|w| {
            of_document(w)
                && expected
                    .as_deref()
                    .is_none_or(|text| normalise(&w.text).contains(text))
        })
        .map(|i| i + 1);
    CaseResult {
        name: case.name(),
        case: case.clone(),
        rank,
        document_rank,
        first: windows.first().map(Returned::of),
    }
}

/// A whole run: the figures and every case's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub k: usize,
    pub queries: usize,
    pub passed: usize,
    pub failures: usize,
    /// recall@k: the share of cases that pass.
    pub recall: f64,
    /// MRR@k: the mean of 1/rank over all cases, 0 for a failing one.
    pub mrr: f64,
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn new(k: usize, cases: Vec<CaseResult>) -> Self {
        let queries = cases.len();
        let passed = cases.iter().filter(|c| c.passed()).count();
        let reciprocal: f64 = cases
            .iter()
            .filter_map(|c| c.rank)
            .map(|rank| 1.0 / rank as f64)
            .sum();
        let share = |x: f64| {
            if queries == 0 {
                0.0
            } else {
                x / queries as f64
            }
        };
        Self {
            k,
            queries,
            passed,
            failures: queries - passed,
            recall: share(passed as f64),
            mrr: share(reciprocal),
            cases,
        }
    }

    pub fn failed(&self) -> impl Iterator<Item = &CaseResult> {
        self.cases.iter().filter(|c| !c.passed())
    }

    /// The names of the failing cases, in file order.
    pub fn failed_names(&self) -> Vec<String> {
        self.failed().map(|c| c.name.clone()).collect()
    }

    /// `9/10 passed (recall@5 0.90, MRR@5 0.85)`.
    pub fn summary(&self) -> String {
        format!(
            "{}/{} passed (recall@{k} {:.2}, MRR@{k} {:.2})",
            self.passed,
            self.queries,
            self.recall,
            self.mrr,
            k = self.k
        )
    }

    /// The summary, then each failing case with what came back first: what `casement eval`
    /// prints.
    pub fn render(&self) -> String {
        let mut out = format!("golden set: {}\n", self.summary());
        for case in self.failed() {
            let golden = &case.case.case;
            match &golden.id {
                Some(id) => out.push_str(&format!("FAIL {id} (line {})", case.case.line)),
                None => out.push_str(&format!("FAIL line {}", case.case.line)),
            }
            out.push_str(&format!(
                ": {:?}\n  expected {}",
                golden.query, golden.doc_id
            ));
            if let Some(tenant) = &golden.tenant {
                out.push_str(&format!(" (tenant {tenant})"));
            }
            if let Some(text) = &golden.text {
                out.push_str(&format!(" with {text:?}"));
            }
            out.push('\n');
            match case.document_rank {
                Some(rank) => out.push_str(&format!(
                    "  its document is at rank {rank}, but no window of it in the first {} holds the text\n",
                    self.k
                )),
                None => out.push_str(&format!("  not in the first {}\n", self.k)),
            }
            match &case.first {
                Some(first) => {
                    let place = std::iter::once(first.doc_id.as_str())
                        .chain(first.section_path.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" › ");
                    out.push_str(&format!("  first: {place}: {}\n", first.excerpt));
                }
                None => out.push_str("  first: nothing returned\n"),
            }
        }
        out
    }
}
