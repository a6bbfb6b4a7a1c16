//! The golden set: one JSON object per line, `{"query", "doc_id", "text"?, "tenant"?, "id"?}`.
//! Blank lines are skipped; anything else that is not such an object (an unknown field
//! included) fails the whole file with its line number, so a typo never silently drops a
//! case.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Error, Result};

/// One golden query: asking `query` (as `tenant`, if given) must return a window of
/// `doc_id` among the first k, holding `text` when given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldenCase {
    /// A name for reports; `line N` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub query: String,
    pub doc_id: String,
    /// Must appear in the window (whitespace runs collapsed, case ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// A case with the line it was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NumberedCase {
    pub line: usize,
    #[serde(flatten)]
    pub case: GoldenCase,
}

impl NumberedCase {
    /// The case's `id`, or `line N`.
    pub fn name(&self) -> String {
        self.case
            .id
            .clone()
            .unwrap_or_else(|| format!("line {}", self.line))
    }
}

/// The cases of one golden file, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoldenSet {
    pub path: PathBuf,
    pub cases: Vec<NumberedCase>,
}

impl GoldenSet {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Checks `text` as the content of `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        let bad = |line: usize, reason: String| Error::Line {
            path: path.to_owned(),
            line,
            reason,
        };
        let mut cases: Vec<NumberedCase> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let case: GoldenCase =
                serde_json::from_str(raw).map_err(|error| bad(line, error.to_string()))?;
            if case.query.trim().is_empty() {
                return Err(bad(line, "`query` must not be empty".into()));
            }
            if case.doc_id.is_empty() {
                return Err(bad(line, "`doc_id` must not be empty".into()));
            }
            if case.text.as_deref().is_some_and(|t| t.trim().is_empty()) {
                return Err(bad(
                    line,
                    "`text` must not be empty (leave it out to require only the document)".into(),
                ));
            }
            if case.tenant.as_deref() == Some("") {
                return Err(bad(
                    line,
                    "`tenant` must not be empty (leave it out for no tenant)".into(),
                ));
            }
            if let Some(id) = &case.id
                && let Some(first) = cases.iter().find(|c| c.case.id.as_ref() == Some(id))
            {
                return Err(bad(
                    line,
                    format!("id {id:?} is already used on line {}", first.line),
                ));
            }
            cases.push(NumberedCase { line, case });
        }
        if cases.is_empty() {
            return Err(Error::Empty {
                path: path.to_owned(),
            });
        }
        Ok(Self {
            path: path.to_owned(),
            cases,
        })
    }
}
