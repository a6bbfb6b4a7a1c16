//! A Qdrant server over TLS with an API key (issue 41), without a server: certificates are
//! made at test time; `openssl s_server` on loopback stands where Qdrant's gRPC port would
//! be and shows what it decrypted.
//!
//! - A certificate signed by a CA not trusted fails `ServerStore::open` naming the setting
//!   at fault, nothing sent; `store.server.ca_file`, or `SSL_CERT_FILE` (in a child process:
//!   the variable is read when the client connects), trusts a private CA, and the client's
//!   HTTP/2 preface arrives decrypted.
//! - Behind the test kit's TLS-terminating proxy, a gRPC stand-in that checks `api-key` the
//!   way Qdrant does: a wrong key fails the open naming `store.server.api_key` (and never
//!   printing the key); the right one is sent on every call and gets past the first.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use casement_store::{Aliases, Backend, ServerStore, StoreConfig};
use casement_testkit::tls::{TlsEndpoint, TlsProxy, pki};

const PROBE_PORT: &str = "CASEMENT_TLS_PROBE_PORT";
const PROBE: &str = "tls::a_private_ca_named_by_ssl_cert_file_completes_the_handshake";

fn config(port: u16) -> StoreConfig {
    let mut config = StoreConfig {
        backend: Backend::Server,
        ..StoreConfig::default()
    };
    config.server.url = format!("https://127.0.0.1:{port}");
    config.server.timeout_secs = 2;
    config.server.connect_timeout_secs = 5;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_server_certificate_fails_the_open_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path(), "private");
    let endpoint = TlsEndpoint::start(dir.path(), "private", None);
    let error = ServerStore::open(&config(endpoint.port), 384)
        .await
        .expect_err("an untrusted certificate is refused")
        .to_string();
    eprintln!("{error}");
    assert!(
        error.contains("store.server.url")
            && error.contains("certificate")
            && error.contains("store.server.ca_file"),
        "{error}"
    );
    // `casement migrate` and `audit` on a server connect through `Aliases`, lazily: the
    // first call's error names the setting too.
    let error = Aliases::connect(&config(endpoint.port))
        .unwrap()
        .target()
        .await
        .expect_err("an untrusted certificate is refused")
        .to_string();
    assert!(error.contains("store.server.url = "), "{error}");
    assert!(endpoint.received().is_empty(), "a request went out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_file_trusts_a_private_ca_and_only_it() {
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path(), "private");
    pki(dir.path(), "other");
    let endpoint = TlsEndpoint::start(dir.path(), "private", None);
    // Another CA's file: refused, naming the file.
    let mut wrong = config(endpoint.port);
    wrong.server.ca_file = Some(dir.path().join("other-ca.pem"));
    let error = ServerStore::open(&wrong, 384)
        .await
        .expect_err("a certificate of another CA is refused")
        .to_string();
    assert!(
        error.contains("store.server.url") && error.contains("other-ca.pem"),
        "{error}"
    );
    assert!(endpoint.received().is_empty(), "a request went out");
    // The right one: the handshake completes and the client speaks (s_server answers no
    // gRPC, so the open fails after it).
    let mut right = config(endpoint.port);
    right.server.ca_file = Some(dir.path().join("private-ca.pem"));
    let error = ServerStore::open(&right, 384).await.err();
    assert!(
        !error
            .as_ref()
            .is_some_and(|e| e.to_string().contains("ca_file")),
        "{error:?}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let received = endpoint.received();
    assert!(
        received.starts_with(b"PRI * HTTP/2.0"),
        "no HTTP/2 preface through TLS: {:?}",
        String::from_utf8_lossy(&received)
    );
}

#[tokio::test]
async fn a_ca_file_that_is_missing_not_pem_or_without_tls_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("key.pem"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
    for (file, url, says) in [
        ("missing.pem", "https://127.0.0.1:1", "cannot be read"),
        ("key.pem", "https://127.0.0.1:1", "no PEM certificate"),
        ("key.pem", "http://127.0.0.1:1", "not https://"),
    ] {
        let mut config = config(1);
        config.server.url = url.to_owned();
        config.server.ca_file = Some(dir.path().join(file));
        let error = ServerStore::open(&config, 384)
            .await
            .expect_err("refused at open")
            .to_string();
        assert!(
            error.contains("store.server.ca_file") && error.contains(says),
            "{file} {url}: {error}"
        );
    }
}

const KEY: &str = "s3cret-test-key-9f2c";

/// Each call's gRPC path and `api-key`.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A gRPC stand-in on loopback (h2 without TLS, as a Qdrant server behind a terminating
/// proxy): a call without `KEY` is refused UNAUTHENTICATED as Qdrant refuses it;
/// `CollectionExists` with it is answered (no such collection); anything else is
/// UNIMPLEMENTED.
async fn grpc_stand_in() -> (std::net::SocketAddr, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Seen::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((request, respond))) = connection.accept().await {
                    tokio::spawn(answer(request, respond, log.clone()));
                }
            });
        }
    });
    (address, seen)
}

async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<bytes::Bytes>,
    log: Seen,
) {
    let path = request.uri().path().to_owned();
    let key = request
        .headers()
        .get("api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    log.lock().unwrap().push((path.clone(), key.clone()));
    let mut body = request.into_body();
    while let Some(chunk) = body.data().await {
        if chunk.is_err() {
            return;
        }
    }
    let headers = |status: Option<(&str, &str)>| {
        let mut response = http::Response::builder().header("content-type", "application/grpc");
        if let Some((code, message)) = status {
            response = response
                .header("grpc-status", code)
                .header("grpc-message", message);
        }
        response.body(()).unwrap()
    };
    if key.as_deref() != Some(KEY) {
        let _ = respond.send_response(headers(Some(("16", "Invalid api-key"))), true);
    } else if path == "/qdrant.Collections/CollectionExists" {
        use prost::Message;
        let reply = qdrant_client::qdrant::CollectionExistsResponse {
            result: Some(qdrant_client::qdrant::CollectionExists { exists: false }),
            time: 0.0,
        }
        .encode_to_vec();
        let mut frame = vec![0u8];
        frame.extend(u32::try_from(reply.len()).unwrap().to_be_bytes());
        frame.extend(reply);
        let Ok(mut stream) = respond.send_response(headers(None), false) else {
            return;
        };
        let _ = stream.send_data(frame.into(), false);
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let _ = stream.send_trailers(trailers);
    } else {
        let _ = respond.send_response(headers(Some(("12", "not in the stand-in"))), true);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_goes_with_every_call_and_a_refused_one_names_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path(), "private");
    let (upstream, seen) = grpc_stand_in().await;
    let proxy = TlsProxy::start(dir.path(), "private", upstream);
    let mut config = config(proxy.port);
    config.server.ca_file = Some(dir.path().join("private-ca.pem"));

    config.server.api_key = Some("wrong-key".to_owned().into());
    let error = ServerStore::open(&config, 384)
        .await
        .expect_err("a wrong key is refused")
        .to_string();
    eprintln!("{error}");
    assert!(
        error.contains("store.server.api_key") && !error.contains("wrong-key"),
        "{error}"
    );
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [(
            "/qdrant.Collections/CollectionExists".to_owned(),
            Some("wrong-key".to_owned())
        )]
    );
    seen.lock().unwrap().clear();

    let error = Aliases::connect(&config)
        .unwrap()
        .target()
        .await
        .expect_err("a wrong key is refused")
        .to_string();
    assert!(
        error.contains("store.server.api_key") && !error.contains("wrong-key"),
        "{error}"
    );

    config.server.api_key = None;
    let error = ServerStore::open(&config, 384)
        .await
        .expect_err("no key is refused")
        .to_string();
    assert!(
        error.contains("store.server.api_key") && error.contains("expects a key"),
        "{error}"
    );

    seen.lock().unwrap().clear();
    config.server.api_key = Some(KEY.to_owned().into());
    let error = ServerStore::open(&config, 384)
        .await
        .expect_err("the stand-in serves only the first call")
        .to_string();
    assert!(
        !error.contains("api_key") && error.contains("list aliases"),
        "{error}"
    );
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(
        seen.iter().all(|(_, key)| key.as_deref() == Some(KEY)),
        "{seen:?}"
    );
    assert_eq!(seen[1].0, "/qdrant.Collections/ListAliases");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_named_by_ssl_cert_file_completes_the_handshake() {
    if let Some(port) = std::env::var(PROBE_PORT).ok().and_then(|p| p.parse().ok()) {
        // The child: connect once (s_server answers no gRPC, so this fails after the
        // handshake; what the parent checks is what arrived).
        let error = ServerStore::open(&config(port), 384).await.err();
        eprintln!("probe: {error:?}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path(), "private");
    let endpoint = TlsEndpoint::start(dir.path(), "private", None);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([PROBE, "--exact", "--nocapture"])
        .env(PROBE_PORT, endpoint.port.to_string())
        .env("SSL_CERT_FILE", dir.path().join("private-ca.pem"));
    let status = tokio::task::spawn_blocking(move || child.status())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let received = endpoint.received();
    assert!(
        received.starts_with(b"PRI * HTTP/2.0"),
        "no HTTP/2 preface through TLS: {:?}",
        String::from_utf8_lossy(&received)
    );
}
