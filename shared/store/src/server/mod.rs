//! Qdrant server backend through `qdrant-client` (gRPC): for users who run Qdrant or a
//! Qdrant cluster. The collection is created when missing, with the same schema as on
//! Edge, as `<store.collection>.1` behind an alias named `store.collection` (so that
//! `casement migrate` can swap another in: [`alias`]); every write waits until applied
//! (`wait=true`).

mod alias;
mod aliases;
mod grpc;
mod read;
mod write;

pub use aliases::Aliases;

use std::collections::HashMap;
use std::time::Duration;

use casement_text::{ChangePlan, DocRef, DocumentState, SentenceRecord};
use qdrant_client::QdrantError;
use qdrant_client::qdrant::{
    CollectionStatus, CreateAliasBuilder, CreateCollectionBuilder,
    CreateFieldIndexCollectionBuilder, Distance, FieldType as QdrantFieldType, Modifier,
    SparseVectorParamsBuilder, SparseVectorsConfigBuilder, VectorParamsBuilder,
    VectorsConfigBuilder, vectors_config::Config as VectorsConfigKind,
};

use grpc::Grpc;
use uuid::Uuid;

use crate::bm25::Bm25;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::schema::{DENSE_VECTOR, FieldType, SPARSE_VECTOR, indexed_fields};
use crate::{Applied, Hit, HybridQuery, Store, StoreStats};

/// A Qdrant server collection.
#[derive(Clone)]
pub struct ServerStore {
    client: std::sync::Arc<Grpc>,
    /// The collection read and written: `alias`'s, resolved at open and again when a
    /// migration moves the alias ([`alias`]).
    collection: std::sync::Arc<std::sync::RwLock<String>>,
    /// `store.collection` when it names an alias (collections Casement creates are behind
    /// one); `None` for a collection made before that, or opened exactly.
    alias: Option<String>,
    follow: std::sync::Arc<alias::Follow>,
    bm25: std::sync::Arc<Bm25>,
    dimension: usize,
    rrf_k: usize,
}

impl std::fmt::Debug for ServerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerStore")
            .field("collection", &self.collection())
            .field("alias", &self.alias)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

fn grpc(operation: &'static str) -> impl FnOnce(QdrantError) -> Error {
    move |e| match e {
        QdrantError::ResponseError { status }
            if matches!(
                status.code() as i32,
                GRPC_UNAVAILABLE | GRPC_DEADLINE_EXCEEDED
            ) =>
        {
            Error::Unavailable(format!("{operation}: {}", status.message()))
        }
        other => Error::backend(operation, other),
    }
}

/// A refused first call stops the start: the message of a refused key names
/// `store.server.api_key` ([`grpc`]'s statuses).
fn refused_key(error: QdrantError) -> Error {
    if let QdrantError::ResponseError { status } = &error
        && matches!(
            status.code(),
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
        )
    {
        return Error::Config(status.message().to_owned());
    }
    grpc("collection exists")(error)
}

/// gRPC status codes worth a retry (numbering of the gRPC specification).
const GRPC_DEADLINE_EXCEEDED: i32 = 4;
const GRPC_UNAVAILABLE: i32 = 14;

impl ServerStore {
    /// Connects and creates the collection (with its payload indexes) when missing; fails
    /// when an existing collection has another dense dimension.
    pub async fn open(config: &StoreConfig, dimension: usize) -> Result<Self> {
        config.validate().map_err(Error::Config)?;
        let settings = &config.server;
        let client = Grpc::connect(settings).await?;
        let name = config.collection.clone();
        // The first call says whether the server can be reached as configured: an error
        // about its certificate or the API key is put in terms of the setting.
        let exists = client.collection_exists(&name).await.map_err(refused_key)?;
        let (alias, collection, create_alias) = if config.exact_collection {
            (None, name, false)
        } else if let Some(target) = alias::resolve(&client, &name).await? {
            (Some(name), target, false)
        } else if exists {
            // Made before Casement put its collections behind an alias.
            (None, name, false)
        } else {
            let numbered: Vec<String> = client
                .list_collections()
                .await
                .map_err(grpc("list collections"))?
                .collections
                .into_iter()
                .filter(|c| alias::number_of(&name, &c.name).is_some())
                .map(|c| c.name)
                .collect();
            if !numbered.is_empty() {
                // Pointing a new alias at `<name>.1` could serve an old collection again.
                return Err(Error::Config(format!(
                    "store.collection = {name:?}: no alias of that name, but its collections {} \
                     exist; point the alias at the one to serve (Qdrant's alias API) or delete \
                     them",
                    numbered.join(", ")
                )));
            }
            (Some(name.clone()), alias::numbered(&name, 1), true)
        };
        let store = Self {
            client: std::sync::Arc::new(client),
            collection: std::sync::Arc::new(std::sync::RwLock::new(collection)),
            alias,
            follow: std::sync::Arc::new(alias::Follow::new(Duration::from_secs(
                settings.follow_secs,
            ))),
            bm25: std::sync::Arc::new(Bm25::new(&config.bm25).map_err(Error::Config)?),
            dimension,
            rrf_k: config.rrf_k,
        };
        store.ensure_collection(&config.indexed_metadata).await?;
        if let Some(alias) = &store.alias {
            if create_alias {
                store
                    .client
                    .create_alias(CreateAliasBuilder::new(store.collection(), alias))
                    .await
                    .map_err(grpc("create alias"))?;
            }
            alias::spawn_follower(
                store.client.clone(),
                alias.clone(),
                store.collection.clone(),
                &store.follow,
            );
        }
        Ok(store)
    }

    /// The collection read and written now.
    pub fn collection(&self) -> String {
        alias::read_name(&self.collection)
    }

    /// The alias this store was opened through (`store.collection`), if any.
    pub fn alias(&self) -> Option<&str> {
        self.alias.as_deref()
    }

    /// `Err(Moved)` while the alias names a collection this process may not write to.
    pub(super) fn writable(&self) -> Result<()> {
        self.follow
            .writable(self.alias.as_deref(), &self.collection())
    }

    /// Waits until the server's optimizer has nothing left to do for the collection
    /// (status green: segments merged and the vector index built) and returns whether it
    /// had to wait. A server optimises on its own; this is for a backfill's end and for
    /// benchmarks, which measure searches over a built index.
    pub async fn optimize(&self) -> Result<bool> {
        let mut waited = false;
        loop {
            let info = self
                .client
                .collection_info(self.collection())
                .await
                .map_err(grpc("collection info"))?
                .result;
            let status = info.map_or(0, |info| info.status);
            match CollectionStatus::try_from(status) {
                Ok(CollectionStatus::Green | CollectionStatus::Grey) => return Ok(waited),
                Ok(CollectionStatus::Red) => {
                    return Err(Error::backend(
                        "collection info",
                        format!("collection {:?} is red on the server", self.collection()),
                    ));
                }
                _ => {
                    waited = true;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
    }

    /// Drops the whole collection, and the alias naming it (tests and tear-down; the
    /// indexer never calls it).
    pub async fn delete_collection(&self) -> Result<()> {
        if let Some(alias) = &self.alias {
            self.client
                .delete_alias(alias.as_str())
                .await
                .map_err(grpc("delete alias"))?;
        }
        self.client
            .delete_collection(self.collection())
            .await
            .map(drop)
            .map_err(grpc("delete collection"))
    }

    async fn ensure_collection(&self, indexed_metadata: &[String]) -> Result<()> {
        let collection = self.collection();
        let exists = self
            .client
            .collection_exists(&collection)
            .await
            .map_err(grpc("collection exists"))?;
        if exists {
            self.check_schema().await?;
        } else {
            let mut dense = VectorsConfigBuilder::default();
            dense.add_named_vector_params(
                DENSE_VECTOR,
                VectorParamsBuilder::new(self.dimension as u64, Distance::Cosine),
            );
            let mut sparse = SparseVectorsConfigBuilder::default();
            sparse.add_named_vector_params(
                SPARSE_VECTOR,
                SparseVectorParamsBuilder::default().modifier(Modifier::Idf),
            );
            self.client
                .create_collection(
                    CreateCollectionBuilder::new(&collection)
                        .vectors_config(dense)
                        .sparse_vectors_config(sparse),
                )
                .await
                .map_err(grpc("create collection"))?;
        }
        for (field, kind) in indexed_fields(indexed_metadata) {
            let kind = match kind {
                FieldType::Keyword => QdrantFieldType::Keyword,
                FieldType::Integer => QdrantFieldType::Integer,
                FieldType::Bool => QdrantFieldType::Bool,
            };
            self.client
                .create_field_index(
                    CreateFieldIndexCollectionBuilder::new(&collection, &field, kind).wait(true),
                )
                .await
                .map_err(grpc("create payload index"))?;
        }
        Ok(())
    }

    async fn check_schema(&self) -> Result<()> {
        let info = self
            .client
            .collection_info(self.collection())
            .await
            .map_err(grpc("collection info"))?;
        let mismatch = |message: String| Error::SchemaMismatch {
            location: format!("collection {}", self.collection()),
            message,
        };
        let params = info
            .result
            .and_then(|r| r.config)
            .and_then(|c| c.params)
            .ok_or_else(|| mismatch("the server returned no collection parameters".into()))?;
        let dense = match params.vectors_config.and_then(|v| v.config) {
            Some(VectorsConfigKind::ParamsMap(map)) => map.map.get(DENSE_VECTOR).cloned(),
            _ => None,
        }
        .ok_or_else(|| mismatch(format!("it has no dense vector named {DENSE_VECTOR:?}")))?;
        if dense.size != self.dimension as u64 {
            return Err(mismatch(format!(
                "its dense vectors have dimension {}, the embedding model gives {}",
                dense.size, self.dimension
            )));
        }
        let sparse = params
            .sparse_vectors_config
            .and_then(|s| s.map.get(SPARSE_VECTOR).cloned())
            .ok_or_else(|| mismatch(format!("it has no sparse vector named {SPARSE_VECTOR:?}")))?;
        if sparse.modifier != Some(Modifier::Idf as i32) {
            return Err(mismatch(
                "its BM25 sparse vector lacks the IDF modifier".into(),
            ));
        }
        Ok(())
    }
}

impl Store for ServerStore {
    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn document<'a>(
        &self,
        doc: impl Into<DocRef<'a>> + Send,
    ) -> Result<Option<DocumentState>> {
        self.read_document(doc.into()).await
    }

    async fn records<'a>(&self, doc: impl Into<DocRef<'a>> + Send) -> Result<Vec<SentenceRecord>> {
        self.read_records(doc.into()).await
    }

    async fn apply_first(
        &self,
        plan: &ChangePlan,
        vectors: &[Vec<f32>],
        count: usize,
    ) -> Result<Applied> {
        self.write_apply_first(plan, vectors, count).await
    }

    async fn query(&self, query: &HybridQuery) -> Result<Vec<Hit>> {
        self.read_query(query).await
    }

    async fn dense_vectors(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<f32>>> {
        self.read_dense_vectors(ids).await
    }

    async fn stats(&self) -> Result<StoreStats> {
        self.read_stats().await
    }

    async fn documents(&self) -> Result<Vec<crate::IndexedDocument>> {
        self.read_documents().await
    }

    async fn settings(&self) -> Result<Option<crate::IndexSettings>> {
        self.read_settings().await
    }

    async fn record_settings(&self, settings: &crate::IndexSettings) -> Result<()> {
        self.write_settings(settings).await
    }

    fn bind_settings(&self, ours: &crate::IndexSettings, access: crate::Access) {
        self.follow.bind(ours, access);
    }

    /// Writes are durable when they return (`wait=true`). What a flush checks here is that
    /// the alias still names this collection: the pipeline acknowledges (commits) events
    /// only after it, so no event written to a collection a migration replaced is committed
    /// (see [`alias`]).
    async fn sync(&self) -> Result<()> {
        if let Some(alias) = &self.alias
            && let Some(moved) =
                alias::look(&self.client, alias, &self.collection, &self.follow).await?
        {
            return Err(moved.error(alias, &self.collection()));
        }
        Ok(())
    }
}
