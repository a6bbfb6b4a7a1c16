//! The input of the text core: one revision of one document.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Markup language of a revision's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// CommonMark with tables, strikethrough and YAML front matter.
    Markdown,
    /// HTML5, parsed as browsers do.
    Html,
    /// Plain text: blank lines separate paragraphs.
    Text,
    /// MediaWiki wikitext.
    Wikitext,
}

impl FromStr for Format {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self, Error> {
        match name.to_ascii_lowercase().as_str() {
            "markdown" | "md" | "commonmark" | "text/markdown" => Ok(Self::Markdown),
            "html" | "htm" | "text/html" => Ok(Self::Html),
            "text" | "plain" | "txt" | "text/plain" => Ok(Self::Text),
            "wikitext" | "mediawiki" | "text/x-wiki" => Ok(Self::Wikitext),
            _ => Err(Error::UnknownFormat {
                name: name.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Markdown => "markdown",
            Self::Html => "html",
            Self::Text => "text",
            Self::Wikitext => "wikitext",
        })
    }
}

/// One revision of a document, as the CMS published it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revision {
    pub doc_id: String,
    /// Comparable per document: a newer revision has a larger number.
    pub revision: u64,
    /// Title given by the CMS; when absent, the front-matter title or the first heading is used.
    pub title: Option<String>,
    pub url: Option<String>,
    /// The address of this very revision (a wiki's `index.php?oldid=N`), beside `url`,
    /// which names the page: a citation that still reads as quoted after later edits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_url: Option<String>,
    pub tenant: Option<String>,
    pub format: Format,
    pub content: String,
    /// The event's free-form `metadata` (a JSON object): stored on every point of the
    /// document, returned with each search result, filterable on the keys the operator
    /// declares (`store.indexed_metadata`).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Who may read the document. `None`: the event did not say; the pipeline gives it
    /// its source's default (`[access] default`) before it is indexed, and a revision
    /// indexed without one is public.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<crate::Access>,
}
