//! The server backend's gRPC client: qdrant-client's generated service clients on a tonic
//! channel this module builds, so that a private CA (`store.server.ca_file`) can be
//! trusted. qdrant-client's own builder trusts only the system's roots and takes no
//! channel; its request and reply types, builders and errors are used as they are, and the
//! methods below keep its names and signatures.

use std::time::Duration;

use qdrant_client::QdrantError;
use qdrant_client::qdrant::collections_client::CollectionsClient;
use qdrant_client::qdrant::points_client::PointsClient;
use qdrant_client::qdrant::{
    AliasOperations, ChangeAliases, CollectionExistsRequest, CollectionOperationResponse,
    CountPoints, CountResponse, CreateAlias, CreateCollection, CreateFieldIndexCollection,
    DeleteAlias, DeleteCollection, DeletePoints, GetCollectionInfoRequest,
    GetCollectionInfoResponse, GetPoints, GetResponse, ListAliasesRequest, ListAliasesResponse,
    ListCollectionsRequest, ListCollectionsResponse, PointsOperationResponse, QueryBatchPoints,
    QueryBatchResponse, ScrollPoints, ScrollResponse, SetPayloadPoints, UpdateCollection,
    UpsertPoints, alias_operations,
};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::config::ServerSettings;
use crate::error::{Error, Result};

type Service = InterceptedService<Channel, ApiKey>;
type Reply<T> = std::result::Result<T, QdrantError>;

/// A connection to a Qdrant server (cheap to clone: the channel is shared).
#[derive(Clone)]
pub(crate) struct Grpc {
    channel: Channel,
    key: ApiKey,
}

/// Adds `api-key` to every request, marked sensitive (never printed by tonic's `Debug`).
#[derive(Clone)]
struct ApiKey(Option<MetadataValue<Ascii>>);

impl Interceptor for ApiKey {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> std::result::Result<tonic::Request<()>, tonic::Status> {
        if let Some(key) = &self.0 {
            request.metadata_mut().insert("api-key", key.clone());
        }
        Ok(request)
    }
}

impl Grpc {
    /// Connects now, so that a wrong URL, an untrusted certificate or an unreadable CA
    /// file is an error at start.
    pub(crate) async fn connect(settings: &ServerSettings) -> Result<Self> {
        let (endpoint, key) = endpoint(settings)?;
        let channel = endpoint.connect().await.map_err(|e| {
            Error::Unavailable(format!(
                "connect to {}: {}",
                settings.url,
                chain(&e as &dyn std::error::Error)
            ))
        })?;
        Ok(Self { channel, key })
    }

    /// Connects at the first call.
    pub(crate) fn lazy(settings: &ServerSettings) -> Result<Self> {
        let (endpoint, key) = endpoint(settings)?;
        Ok(Self {
            channel: endpoint.connect_lazy(),
            key,
        })
    }

    fn points(&self) -> PointsClient<Service> {
        PointsClient::new(InterceptedService::new(
            self.channel.clone(),
            self.key.clone(),
        ))
        .max_decoding_message_size(usize::MAX)
    }

    fn collections(&self) -> CollectionsClient<Service> {
        CollectionsClient::new(InterceptedService::new(
            self.channel.clone(),
            self.key.clone(),
        ))
        .max_decoding_message_size(usize::MAX)
    }

    pub(crate) async fn collection_exists(
        &self,
        request: impl Into<CollectionExistsRequest>,
    ) -> Reply<bool> {
        let reply = self
            .collections()
            .collection_exists(request.into())
            .await
            .map_err(status)?;
        Ok(reply.into_inner().result.is_some_and(|r| r.exists))
    }

    pub(crate) async fn collection_info(
        &self,
        request: impl Into<GetCollectionInfoRequest>,
    ) -> Reply<GetCollectionInfoResponse> {
        inner(self.collections().get(request.into()).await)
    }

    pub(crate) async fn list_collections(&self) -> Reply<ListCollectionsResponse> {
        inner(self.collections().list(ListCollectionsRequest {}).await)
    }

    pub(crate) async fn list_aliases(&self) -> Reply<ListAliasesResponse> {
        inner(self.collections().list_aliases(ListAliasesRequest {}).await)
    }

    pub(crate) async fn create_collection(
        &self,
        request: impl Into<CreateCollection>,
    ) -> Reply<CollectionOperationResponse> {
        inner(self.collections().create(request.into()).await)
    }

    pub(crate) async fn update_collection(
        &self,
        request: impl Into<UpdateCollection>,
    ) -> Reply<CollectionOperationResponse> {
        inner(self.collections().update(request.into()).await)
    }

    pub(crate) async fn delete_collection(
        &self,
        request: impl Into<DeleteCollection>,
    ) -> Reply<CollectionOperationResponse> {
        inner(self.collections().delete(request.into()).await)
    }

    pub(crate) async fn create_alias(
        &self,
        request: impl Into<CreateAlias>,
    ) -> Reply<CollectionOperationResponse> {
        self.change_alias(alias_operations::Action::CreateAlias(request.into()))
            .await
    }

    pub(crate) async fn delete_alias(
        &self,
        request: impl Into<DeleteAlias>,
    ) -> Reply<CollectionOperationResponse> {
        self.change_alias(alias_operations::Action::DeleteAlias(request.into()))
            .await
    }

    async fn change_alias(
        &self,
        action: alias_operations::Action,
    ) -> Reply<CollectionOperationResponse> {
        let change = ChangeAliases {
            actions: vec![AliasOperations {
                action: Some(action),
            }],
            timeout: None,
        };
        inner(self.collections().update_aliases(change).await)
    }

    pub(crate) async fn create_field_index(
        &self,
        request: impl Into<CreateFieldIndexCollection>,
    ) -> Reply<PointsOperationResponse> {
        inner(self.points().create_field_index(request.into()).await)
    }

    pub(crate) async fn upsert_points(
        &self,
        request: impl Into<UpsertPoints>,
    ) -> Reply<PointsOperationResponse> {
        inner(self.points().upsert(request.into()).await)
    }

    pub(crate) async fn delete_points(
        &self,
        request: impl Into<DeletePoints>,
    ) -> Reply<PointsOperationResponse> {
        inner(self.points().delete(request.into()).await)
    }

    pub(crate) async fn set_payload(
        &self,
        request: impl Into<SetPayloadPoints>,
    ) -> Reply<PointsOperationResponse> {
        inner(self.points().set_payload(request.into()).await)
    }

    pub(crate) async fn get_points(&self, request: impl Into<GetPoints>) -> Reply<GetResponse> {
        inner(self.points().get(request.into()).await)
    }

    pub(crate) async fn scroll(&self, request: impl Into<ScrollPoints>) -> Reply<ScrollResponse> {
        inner(self.points().scroll(request.into()).await)
    }

    pub(crate) async fn count(&self, request: impl Into<CountPoints>) -> Reply<CountResponse> {
        inner(self.points().count(request.into()).await)
    }

    pub(crate) async fn query_batch(
        &self,
        request: impl Into<QueryBatchPoints>,
    ) -> Reply<QueryBatchResponse> {
        inner(self.points().query_batch(request.into()).await)
    }
}

/// The endpoint `settings` describe, TLS configured, and the key interceptor.
fn endpoint(settings: &ServerSettings) -> Result<(Endpoint, ApiKey)> {
    let config = |message: String| Error::Config(message);
    let mut endpoint = Endpoint::from_shared(settings.url.clone())
        .map_err(|e| config(format!("store.server.url = {:?}: {e}", settings.url)))?
        .timeout(Duration::from_secs(settings.timeout_secs))
        .connect_timeout(Duration::from_secs(settings.connect_timeout_secs))
        .user_agent(concat!("casement/", env!("CARGO_PKG_VERSION")))
        .map_err(|e| config(format!("store.server: {e}")))?;
    if settings.url.starts_with("https://") {
        let tls = match &settings.ca_file {
            Some(path) => ClientTlsConfig::new().ca_certificate(read_ca(path)?),
            None => ClientTlsConfig::new().with_native_roots(),
        };
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| config(format!("store.server: TLS: {e}")))?;
    }
    let key = match &settings.api_key {
        Some(key) => {
            let mut value = MetadataValue::try_from(key.expose()).map_err(|_| {
                config(
                    "store.server.api_key: not a valid header value (printable ASCII only)".into(),
                )
            })?;
            value.set_sensitive(true);
            Some(value)
        }
        None => None,
    };
    Ok((endpoint, ApiKey(key)))
}

/// `store.server.ca_file`: PEM certificates, checked here so that a wrong path or a file
/// of another kind is an error naming the setting, not a failed handshake.
fn read_ca(path: &std::path::Path) -> Result<Certificate> {
    let pem = std::fs::read(path).map_err(|e| {
        Error::Config(format!(
            "store.server.ca_file = {}: cannot be read: {e}",
            path.display()
        ))
    })?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(Error::Config(format!(
            "store.server.ca_file = {}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(Certificate::from_pem(pem))
}

fn inner<T>(reply: std::result::Result<tonic::Response<T>, tonic::Status>) -> Reply<T> {
    reply.map(tonic::Response::into_inner).map_err(status)
}

/// A status with the errors under it in its message: a transport failure's status says
/// only "transport error", and the cause (a refused connection, an untrusted certificate)
/// is in its sources.
fn status(status: tonic::Status) -> QdrantError {
    use std::error::Error as _;
    let status = match status.source() {
        Some(source) => {
            let message = format!("{}: {}", status.message(), chain(source));
            tonic::Status::with_metadata(status.code(), message, status.metadata().clone())
        }
        None => status,
    };
    QdrantError::from(status)
}

/// An error and its sources, `: `-joined.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let part = source.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = source.source();
    }
    text
}
