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
    /// What a failed call's message names: the settings at fault.
    settings: std::sync::Arc<ServerSettings>,
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
            let text = chain(&e as &dyn std::error::Error);
            match untrusted(settings, &text) {
                Some(message) => Error::Config(message),
                None => Error::Unavailable(format!("connect to {}: {text}", settings.url)),
            }
        })?;
        Ok(Self {
            channel,
            key,
            settings: std::sync::Arc::new(settings.clone()),
        })
    }

    /// Connects at the first call.
    pub(crate) fn lazy(settings: &ServerSettings) -> Result<Self> {
        let (endpoint, key) = endpoint(settings)?;
        Ok(Self {
            channel: endpoint.connect_lazy(),
            key,
            settings: std::sync::Arc::new(settings.clone()),
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
            .map_err(|e| self.status(e))?;
        Ok(reply.into_inner().result.is_some_and(|r| r.exists))
    }

    pub(crate) async fn collection_info(
        &self,
        request: impl Into<GetCollectionInfoRequest>,
    ) -> Reply<GetCollectionInfoResponse> {
        self.reply(self.collections().get(request.into()).await)
    }

    pub(crate) async fn list_collections(&self) -> Reply<ListCollectionsResponse> {
        self.reply(self.collections().list(ListCollectionsRequest {}).await)
    }

    pub(crate) async fn list_aliases(&self) -> Reply<ListAliasesResponse> {
        self.reply(self.collections().list_aliases(ListAliasesRequest {}).await)
    }

    pub(crate) async fn create_collection(
        &self,
        request: impl Into<CreateCollection>,
    ) -> Reply<CollectionOperationResponse> {
        self.reply(self.collections().create(request.into()).await)
    }

    pub(crate) async fn update_collection(
        &self,
        request: impl Into<UpdateCollection>,
    ) -> Reply<CollectionOperationResponse> {
        self.reply(self.collections().update(request.into()).await)
    }

    pub(crate) async fn delete_collection(
        &self,
        request: impl Into<DeleteCollection>,
    ) -> Reply<CollectionOperationResponse> {
        self.reply(self.collections().delete(request.into()).await)
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
        self.reply(self.collections().update_aliases(change).await)
    }

    pub(crate) async fn create_field_index(
        &self,
        request: impl Into<CreateFieldIndexCollection>,
    ) -> Reply<PointsOperationResponse> {
        self.reply(self.points().create_field_index(request.into()).await)
    }

    pub(crate) async fn upsert_points(
        &self,
        request: impl Into<UpsertPoints>,
    ) -> Reply<PointsOperationResponse> {
        self.reply(self.points().upsert(request.into()).await)
    }

    pub(crate) async fn delete_points(
        &self,
        request: impl Into<DeletePoints>,
    ) -> Reply<PointsOperationResponse> {
        self.reply(self.points().delete(request.into()).await)
    }

    pub(crate) async fn set_payload(
        &self,
        request: impl Into<SetPayloadPoints>,
    ) -> Reply<PointsOperationResponse> {
        self.reply(self.points().set_payload(request.into()).await)
    }

    pub(crate) async fn get_points(&self, request: impl Into<GetPoints>) -> Reply<GetResponse> {
        self.reply(self.points().get(request.into()).await)
    }

    pub(crate) async fn scroll(&self, request: impl Into<ScrollPoints>) -> Reply<ScrollResponse> {
        self.reply(self.points().scroll(request.into()).await)
    }

    pub(crate) async fn count(&self, request: impl Into<CountPoints>) -> Reply<CountResponse> {
        self.reply(self.points().count(request.into()).await)
    }

    pub(crate) async fn query_batch(
        &self,
        request: impl Into<QueryBatchPoints>,
    ) -> Reply<QueryBatchResponse> {
        self.reply(self.points().query_batch(request.into()).await)
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

impl Grpc {
    fn reply<T>(&self, reply: std::result::Result<tonic::Response<T>, tonic::Status>) -> Reply<T> {
        reply
            .map(tonic::Response::into_inner)
            .map_err(|e| self.status(e))
    }

    /// A status whose message says what went wrong in terms of the settings: the errors
    /// under a transport failure (its status says only "transport error"; an untrusted
    /// certificate is in its sources), `store.server.url` for a certificate, and
    /// `store.server.api_key` for a refused key. The code is kept, so a refusal while
    /// running is retried like any other server error, and logged naming the setting.
    fn status(&self, status: tonic::Status) -> QdrantError {
        use std::error::Error as _;
        let mut message = status.message().to_owned();
        if let Some(source) = status.source() {
            message = format!("{message}: {}", chain(source));
        }
        if let Some(named) = untrusted(&self.settings, &message) {
            message = named;
        } else if matches!(
            status.code(),
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied
        ) {
            message = refused(&self.settings, status.code(), &message);
        }
        QdrantError::from(tonic::Status::with_metadata(
            status.code(),
            message,
            status.metadata().clone(),
        ))
    }
}

/// A failed TLS connection (`text`, its error chain) in terms of the setting at fault: a
/// server certificate not signed by the CA trusted (`store.server.ca_file`, else the
/// system's roots). `None` when it is not about the certificate.
pub(super) fn untrusted(settings: &ServerSettings, text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let about_tls = ["certificate", "unknownissuer", "handshake", "tls"]
        .iter()
        .any(|word| lower.contains(word));
    if !settings.url.starts_with("https://") || !about_tls {
        return None;
    }
    let trusted = match &settings.ca_file {
        Some(path) => format!("the CA in store.server.ca_file ({})", path.display()),
        None => "a CA this machine trusts (the system's roots, or the PEM file the \
                 SSL_CERT_FILE environment variable names); set store.server.ca_file for a \
                 private CA"
            .to_owned(),
    };
    Some(format!(
        "store.server.url = {:?}: the TLS connection failed ({text}); the server's \
         certificate must be signed by {trusted}",
        settings.url
    ))
}

/// A call the server refused for its credentials, in terms of `store.server.api_key` (the
/// key itself never printed).
fn refused(settings: &ServerSettings, code: tonic::Code, message: &str) -> String {
    let advice = if settings.api_key.is_some() {
        "set the key the server expects"
    } else {
        "the server expects a key: set it (prefer the environment, ..._STORE__SERVER__API_KEY)"
    };
    format!("store.server.api_key: the server refused the request ({code:?}: {message}); {advice}")
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
