//! Kafka over TLS (issue 41), on loopback: the indexer's own client settings
//! (`kafka::client_config` over `[kafka.properties]`) with `security.protocol = "SSL"` and
//! `"SASL_SSL"` (SCRAM-SHA-512) complete a TLS handshake with an endpoint whose certificate
//! a test CA signed, and refuse one that another CA signed; with a client certificate
//! (mTLS) too. The endpoint is `openssl s_server` (no Kafka behind it: what proves the
//! handshake is the client's first Kafka request arriving decrypted, its client id in it).
//! Certificates are made at test time with the `openssl` CLI.
//!
//! OAUTHBEARER with OIDC (`sasl.oauthbearer.method = "oidc"`): librdkafka fetches a token
//! from a loopback token endpoint with the client-credentials grant (libcurl), then speaks
//! to the TLS endpoint.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use casement_testkit::tls::{TlsEndpoint, pki};

use casement_indexer::config::KafkaConfig;
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;

/// librdkafka's errors, as the client reports them.
#[derive(Default, Clone)]
struct Errors(Arc<Mutex<Vec<String>>>);

impl ClientContext for Errors {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.lock().unwrap().push(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Errors {}

const CLIENT_ID: &str = "casement-tls-probe";

/// Connects with the indexer's client settings and `properties`; returns what the
/// endpoint decrypted and the client's errors.
fn connect(endpoint: &TlsEndpoint, properties: &[(&str, &str)]) -> (Vec<u8>, Vec<String>) {
    let mut config = KafkaConfig {
        bootstrap_servers: format!("127.0.0.1:{}", endpoint.port),
        properties: BTreeMap::new(),
        ..KafkaConfig::default()
    };
    for (key, value) in properties {
        config
            .properties
            .insert((*key).to_owned(), toml::Value::String((*value).to_owned()));
    }
    config.properties.insert(
        "client.id".into(),
        toml::Value::String(CLIENT_ID.to_owned()),
    );
    let errors = Errors::default();
    let consumer: BaseConsumer<Errors> =
        casement_indexer::kafka::client_config(&config, &[("group.id", "tls-probe")])
            .create_with_context(errors.clone())
            .expect("a client with these settings");
    // No Kafka behind the endpoint: the metadata request fails either way; what matters is
    // whether it got through TLS.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let _ = consumer.fetch_metadata(None, Duration::from_millis(500));
        // The client's errors reach its context's callback through the consumer's poll.
        let _ = consumer.poll(Duration::from_millis(100));
        if !endpoint.received().is_empty() || !errors.0.lock().unwrap().is_empty() {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    drop(consumer);
    let errors = errors.0.lock().unwrap().clone();
    (endpoint.received(), errors)
}

fn spoke_kafka(received: &[u8]) -> bool {
    received
        .windows(CLIENT_ID.len())
        .any(|w| w == CLIENT_ID.as_bytes())
}

fn path(dir: &Path, file: &str) -> String {
    let path: PathBuf = dir.join(file);
    path.display().to_string()
}

#[test]
fn ssl_and_sasl_ssl_complete_the_handshake_with_the_configured_ca_only() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    pki(dir, "ours");
    pki(dir, "theirs");
    let ours = path(dir, "ours-ca.pem");

    // SSL, the endpoint's CA configured: the first Kafka request arrives decrypted.
    let endpoint = TlsEndpoint::start(dir, "ours", None);
    let (received, errors) = connect(
        &endpoint,
        &[("security.protocol", "SSL"), ("ssl.ca.location", &ours)],
    );
    assert!(
        spoke_kafka(&received),
        "no request through TLS; errors: {errors:?}"
    );
    drop(endpoint);

    // SASL_SSL with SCRAM-SHA-512: TLS first, the same.
    let endpoint = TlsEndpoint::start(dir, "ours", None);
    let (received, errors) = connect(
        &endpoint,
        &[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "casement"),
            ("sasl.password", "a-scram-secret"),
            ("ssl.ca.location", &ours),
        ],
    );
    assert!(
        spoke_kafka(&received),
        "no request through TLS; errors: {errors:?}"
    );
    drop(endpoint);

    // An endpoint signed by another CA: refused, nothing sent, and the error says why.
    for protocol in ["SSL", "SASL_SSL"] {
        let endpoint = TlsEndpoint::start(dir, "theirs", None);
        let mut properties = vec![
            ("security.protocol", protocol),
            ("ssl.ca.location", ours.as_str()),
        ];
        if protocol == "SASL_SSL" {
            properties.extend([
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "casement"),
                ("sasl.password", "a-scram-secret"),
            ]);
        }
        let (received, errors) = connect(&endpoint, &properties);
        assert!(
            !spoke_kafka(&received),
            "{protocol}: a request went to an endpoint another CA signed"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("certificate verify failed")),
            "{protocol}: {errors:?}"
        );
    }

    // mTLS: the endpoint asks for a client certificate signed by our CA.
    let endpoint = TlsEndpoint::start(dir, "ours", Some("ours-ca.pem"));
    let (received, errors) = connect(
        &endpoint,
        &[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", &ours),
            ("ssl.certificate.location", &path(dir, "ours-leaf.pem")),
            ("ssl.key.location", &path(dir, "ours-leaf.key")),
        ],
    );
    assert!(
        spoke_kafka(&received),
        "mTLS: no request; errors: {errors:?}"
    );
}

/// A token endpoint on loopback: records each request (head and body) and answers with an
/// access token (a JWT whose `sub` and `exp` librdkafka reads; its signature is the
/// broker's business, not the client's).
fn token_endpoint() -> (u16, Arc<Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    // {"alg":"RS256","typ":"JWT"} . {"sub":"casement-indexer","iss":"https://idp.test",
    // "exp":4102444800,"iat":1767225600} . "signature", base64url.
    const TOKEN: &str = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjYXNlbWVudC1pbmRleGVyIiwiaXNzIjoiaHR0cHM6Ly9pZHAudGVzdCIsImV4cCI6NDEwMjQ0NDgwMCwiaWF0IjoxNzY3MjI1NjAwfQ.c2lnbmF0dXJl";
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            log.lock()
                .unwrap()
                .push(format!("{head}\r\n{}", String::from_utf8_lossy(&body)));
            let reply =
                format!(r#"{{"access_token":"{TOKEN}","token_type":"Bearer","expires_in":3600}}"#);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (port, requests)
}

#[test]
fn oauthbearer_oidc_fetches_a_token_with_the_client_credentials_then_speaks_tls() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    pki(dir, "ours");
    let ours = path(dir, "ours-ca.pem");
    let (token_port, token_requests) = token_endpoint();
    let endpoint = TlsEndpoint::start(dir, "ours", None);
    let token_url = format!("http://127.0.0.1:{token_port}/oauth2/token");
    let (received, errors) = connect(
        &endpoint,
        &[
            ("security.protocol", "SASL_SSL"),
            ("ssl.ca.location", &ours),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.client.id", "casement-indexer"),
            ("sasl.oauthbearer.client.secret", "an-oidc-client-secret"),
            ("sasl.oauthbearer.token.endpoint.url", &token_url),
            ("sasl.oauthbearer.scope", "kafka"),
        ],
    );
    let requests = token_requests.lock().unwrap().clone();
    let request = requests
        .first()
        .unwrap_or_else(|| panic!("no token request; errors: {errors:?}"));
    assert!(request.starts_with("POST /oauth2/token "), "{request}");
    // base64("casement-indexer:an-oidc-client-secret")
    assert!(
        request.contains("Basic Y2FzZW1lbnQtaW5kZXhlcjphbi1vaWRjLWNsaWVudC1zZWNyZXQ="),
        "{request}"
    );
    assert!(
        request.contains("grant_type=client_credentials") && request.contains("scope=kafka"),
        "{request}"
    );
    assert!(
        spoke_kafka(&received),
        "no request through TLS after the token; errors: {errors:?}"
    );
}
