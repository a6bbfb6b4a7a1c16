//! The engine's configuration for a new store, and the check of an existing one's
//! against this configuration (dense dimension and distance, BM25 with IDF).

use std::path::Path;

use qdrant_edge::{
    Distance, EdgeConfigBuilder, EdgeShard, EdgeSparseVectorParamsBuilder, EdgeVectorParamsBuilder,
    JsonPath, Modifier,
};

use crate::error::{Error, Result};
use crate::schema::{DENSE_VECTOR, SPARSE_VECTOR};

pub(super) fn json_path(field: &str) -> JsonPath {
    field
        .parse()
        .expect("indexed field names are valid JSON paths")
}

pub(super) fn edge_config(dimension: usize, wal_segment_bytes: usize) -> qdrant_edge::EdgeConfig {
    EdgeConfigBuilder::new()
        .wal_options(qdrant_edge::WalOptions {
            segment_capacity: wal_segment_bytes,
            ..qdrant_edge::WalOptions::default()
        })
        .vector(
            DENSE_VECTOR,
            EdgeVectorParamsBuilder::new(dimension, Distance::Cosine).build(),
        )
        .sparse_vector(
            SPARSE_VECTOR,
            EdgeSparseVectorParamsBuilder::new()
                .modifier(Modifier::Idf)
                .build(),
        )
        .build()
}

pub(super) fn check_schema(shard: &EdgeShard, path: &Path, dimension: usize) -> Result<()> {
    let config = shard.config();
    let mismatch = |message: String| Error::SchemaMismatch {
        location: path.display().to_string(),
        message,
    };
    let dense = config
        .vectors
        .get(DENSE_VECTOR)
        .ok_or_else(|| mismatch(format!("it has no dense vector named {DENSE_VECTOR:?}")))?;
    if dense.size != dimension {
        return Err(mismatch(format!(
            "its dense vectors have dimension {}, the embedding model gives {dimension}",
            dense.size
        )));
    }
    if dense.distance != Distance::Cosine {
        return Err(mismatch(format!(
            "its dense distance is {:?}, not cosine",
            dense.distance
        )));
    }
    let sparse = config
        .sparse_vectors
        .get(SPARSE_VECTOR)
        .ok_or_else(|| mismatch(format!("it has no sparse vector named {SPARSE_VECTOR:?}")))?;
    if sparse.modifier != Some(Modifier::Idf) {
        return Err(mismatch(
            "its BM25 sparse vector lacks the IDF modifier".into(),
        ));
    }
    Ok(())
}
