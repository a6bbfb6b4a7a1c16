/// Errors of the text core. Malformed markup is not an error (it still yields text);
/// these are inputs that cannot be processed at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown document format `{name}` (expected markdown, html, text or wikitext)")]
    UnknownFormat { name: String },
    #[error("document `{doc_id}` is {bytes} bytes, over the limit of {limit}")]
    TooLarge {
        doc_id: String,
        bytes: usize,
        limit: usize,
    },
    /// Settings that cannot be used (checked at start by `TextConfig::validate`).
    #[error("text settings: {message}")]
    Config { message: String },
}

pub type Result<T> = std::result::Result<T, Error>;
