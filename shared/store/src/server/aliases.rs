//! What `casement migrate` does on a Qdrant server: where the alias points, the numbered
//! collections beside it, Casement's record in each collection's metadata (a migration
//! under way, the collection kept for a rollback, a pending catch-up), and the move itself.

use std::sync::Arc;

use super::grpc::Grpc;
use qdrant_client::qdrant::{CreateAliasBuilder, UpdateCollectionBuilder};

use super::alias::{number_of, numbered, resolve};
use super::grpc;
use crate::config::StoreConfig;
use crate::error::{Error, Result};
use crate::settings::IndexSettings;

/// The metadata key of Casement's record in a collection (a JSON string).
const RECORD_KEY: &str = "casement";

/// What `casement migrate` needs of the server: the alias, the collections beside it and
/// the records it keeps in their metadata.
#[derive(Clone)]
pub struct Aliases {
    client: Arc<Grpc>,
    alias: String,
}

impl std::fmt::Debug for Aliases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aliases")
            .field("alias", &self.alias)
            .finish_non_exhaustive()
    }
}

impl Aliases {
    /// Connects to the server of `config`, for the alias `store.collection`.
    pub fn connect(config: &StoreConfig) -> Result<Self> {
        config.validate().map_err(Error::Config)?;
        Ok(Self {
            client: Arc::new(Grpc::lazy(&config.server)?),
            alias: config.collection.clone(),
        })
    }

    pub fn alias(&self) -> &str {
        &self.alias
    }

    /// The `n`th collection behind the alias.
    pub fn numbered_name(&self, n: u64) -> String {
        numbered(&self.alias, n)
    }

    /// The collection the alias names; `None` when it names none.
    pub async fn target(&self) -> Result<Option<String>> {
        resolve(&self.client, &self.alias).await
    }

    pub async fn exists(&self, collection: &str) -> Result<bool> {
        self.client
            .collection_exists(collection)
            .await
            .map_err(grpc("collection exists"))
    }

    /// The collections `<alias>.<n>`, by `n`.
    pub async fn numbered(&self) -> Result<Vec<(u64, String)>> {
        let mut found: Vec<(u64, String)> = self
            .client
            .list_collections()
            .await
            .map_err(grpc("list collections"))?
            .collections
            .into_iter()
            .filter_map(|c| number_of(&self.alias, &c.name).map(|n| (n, c.name)))
            .collect();
        found.sort();
        Ok(found)
    }

    /// The settings recorded in `collection` (its settings point), if any.
    pub async fn settings(&self, collection: &str) -> Result<Option<IndexSettings>> {
        super::read::settings_of(&self.client, collection).await
    }

    /// Casement's record in `collection`'s metadata (a JSON text), if any.
    pub async fn record(&self, collection: &str) -> Result<Option<String>> {
        let info = self
            .client
            .collection_info(collection)
            .await
            .map_err(grpc("collection info"))?;
        Ok(info
            .result
            .and_then(|r| r.config)
            .and_then(|c| c.metadata.get(RECORD_KEY).cloned())
            .and_then(|v| v.as_str().cloned())
            .filter(|text| !text.is_empty()))
    }

    /// Replaces Casement's record in `collection`'s metadata (empty: none).
    pub async fn set_record(&self, collection: &str, record: &str) -> Result<()> {
        let metadata = std::collections::HashMap::from([(
            RECORD_KEY.to_owned(),
            serde_json::Value::String(record.to_owned()),
        )]);
        self.client
            .update_collection(UpdateCollectionBuilder::new(collection).metadata(metadata))
            .await
            .map(drop)
            .map_err(grpc("update collection metadata"))
    }

    /// Points the alias at `collection`: one alias operation, which the server applies
    /// atomically for every reader (an existing alias of that name is replaced).
    pub async fn point_at(&self, collection: &str) -> Result<()> {
        self.client
            .create_alias(CreateAliasBuilder::new(collection, &self.alias))
            .await
            .map(drop)
            .map_err(grpc("create alias"))
    }

    /// Deletes `collection`, never the one the alias names (deleting it would delete the
    /// alias with it).
    pub async fn drop_collection(&self, collection: &str) -> Result<()> {
        if self.target().await?.as_deref() == Some(collection) {
            return Err(Error::Config(format!(
                "refusing to delete {collection}: the alias {} names it",
                self.alias
            )));
        }
        self.client
            .delete_collection(collection)
            .await
            .map(drop)
            .map_err(grpc("delete collection"))
    }

    /// Deletes the alias and every collection behind it (tests and tear-down).
    pub async fn drop_all(&self) -> Result<()> {
        if self.target().await?.is_some() {
            self.client
                .delete_alias(self.alias.as_str())
                .await
                .map_err(grpc("delete alias"))?;
        }
        for (_, collection) in self.numbered().await? {
            self.client
                .delete_collection(collection)
                .await
                .map_err(grpc("delete collection"))?;
        }
        if self.exists(&self.alias).await? {
            self.client
                .delete_collection(&self.alias)
                .await
                .map_err(grpc("delete collection"))?;
        }
        Ok(())
    }
}
