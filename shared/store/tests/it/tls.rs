//! A Qdrant server over TLS (issue 41), the handshake without a server: `openssl s_server`
//! on loopback stands where Qdrant's gRPC port would be, with certificates made at test
//! time. A certificate this machine does not trust fails `ServerStore::open` naming
//! `store.server.url`, nothing sent; the same endpoint trusted through `SSL_CERT_FILE` (in
//! a child process: the variable is read when the client connects) receives the client's
//! HTTP/2 preface, decrypted.

use std::time::Duration;

use casement_store::{Backend, ServerStore, StoreConfig};
use casement_testkit::tls::{TlsEndpoint, pki};

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
    assert!(
        error.contains("store.server.url") && error.contains("certificate"),
        "{error}"
    );
    assert!(endpoint.received().is_empty(), "a request went out");
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
