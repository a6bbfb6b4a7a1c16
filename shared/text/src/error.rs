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
}

pub type Result<T> = std::result::Result<T, Error>;
