use std::path::PathBuf;

/// Store errors. `Unavailable`, `Backend` and `Moved` are worth retrying (the indexer backs off);
/// the others are bugs or misconfiguration and are not.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid store configuration: {0}")]
    Config(String),
    #[error(
        "the store at {location} does not match this configuration: {message} \
         (point Casement at another data directory or collection, or delete this one to rebuild it)"
    )]
    SchemaMismatch { location: String, message: String },
    #[error("cannot open the store at {}: {message}", path.display())]
    Open { path: PathBuf, message: String },
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("store operation `{operation}` failed: {message}")]
    Backend {
        operation: &'static str,
        message: String,
    },
    #[error("plan for {doc_id} has {records} records to embed but {vectors} vectors")]
    VectorCount {
        doc_id: String,
        records: usize,
        vectors: usize,
    },
    #[error("vector of dimension {got} given to a store of dimension {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("revision {0} of a document does not fit a signed 64-bit payload integer")]
    RevisionRange(u64),
    /// The index was made with other settings than this process's (model, radius, ...).
    #[error(
        "the index does not match this configuration: {differences}. {}",
        match access {
            crate::Access::Write => "Configure what it was made with (embedder.model_dir and \
                embedder.precision, or [embedder.openai]; text.window_radius; enrich), or \
                index into another data directory or collection with the new settings \
                (casement backfill) and point the services at it",
            crate::Access::Read => "Configure this query service as the index's indexer \
                (embedder.model_dir and embedder.precision, or [embedder.openai]; \
                search.indexed_window_radius = its text.window_radius)",
        }
    )]
    Settings {
        differences: String,
        access: crate::Access,
    },
    /// The collection alias this process opened now names a collection made with other
    /// settings (a migration swapped it): this process writes nothing until it restarts
    /// with them. Transient: the pipeline retries and commits nothing past the event.
    #[error(
        "the collection alias `{alias}` now names `{target}`, {reason}: this process writes \
         nothing to `{collection}`, the collection it opened, and waits; restart it with the \
         settings of `{target}` (the pairs `casement migrate` printed)"
    )]
    Moved {
        alias: String,
        collection: String,
        target: String,
        reason: String,
    },
    #[error("a stored point of {doc_id} has a payload Casement cannot read: {message}")]
    Payload { doc_id: String, message: String },
}

impl Error {
    /// Whether retrying the same call later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unavailable(_) | Self::Backend { .. } | Self::Moved { .. }
        )
    }

    pub(crate) fn backend(operation: &'static str, error: impl std::fmt::Display) -> Self {
        Self::Backend {
            operation,
            message: error.to_string(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
