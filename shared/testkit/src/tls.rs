//! TLS endpoints on loopback for the client tests (Kafka, Qdrant): certificates made at
//! test time with the `openssl` CLI, served by `openssl s_server`, which shows what it
//! decrypted (what proves a client completed the handshake and spoke).

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the openssl CLI");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`<dir>/<name>-ca.pem`) and a certificate it signs for 127.0.0.1 and localhost
/// (`<name>-leaf.pem`, `<name>-leaf.key`).
pub fn pki(dir: &Path, name: &str) {
    let ca = format!("{name}-ca");
    let leaf = format!("{name}-leaf");
    let subject = format!("/CN={name} test CA");
    let (ca_key, ca_pem) = (format!("{ca}.key"), format!("{ca}.pem"));
    let (leaf_key, leaf_csr, leaf_pem) = (
        format!("{leaf}.key"),
        format!("{leaf}.csr"),
        format!("{leaf}.pem"),
    );
    openssl(
        dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", &subject,
            "-keyout", &ca_key, "-out", &ca_pem,
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &leaf_key,
            "-out",
            &leaf_csr,
        ],
    );
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n",
    )
    .expect("san.ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            &leaf_csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-extfile",
            "san.ext",
            "-out",
            &leaf_pem,
        ],
    );
}

/// `openssl s_server` on a free loopback port with `<name>-leaf.pem`; what it decrypts is
/// collected. With `client_ca`, a client certificate signed by it is required (mTLS).
#[derive(Debug)]
pub struct TlsEndpoint {
    child: Child,
    pub port: u16,
    received: Arc<Mutex<Vec<u8>>>,
}

impl TlsEndpoint {
    pub fn start(dir: &Path, name: &str, client_ca: Option<&str>) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("port")
            .local_addr()
            .expect("address")
            .port();
        let (accept, cert, key) = (
            format!("127.0.0.1:{port}"),
            format!("{name}-leaf.pem"),
            format!("{name}-leaf.key"),
        );
        let mut command = Command::new("openssl");
        // ALPN h2 for gRPC clients (tonic requires it); a Kafka client offers none.
        command.current_dir(dir).args([
            "s_server", "-accept", &accept, "-cert", &cert, "-key", &key, "-alpn", "h2", "-quiet",
        ]);
        if let Some(ca) = client_ca {
            command.args(["-Verify", "1", "-CAfile", ca]);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server");
        let received = Arc::new(Mutex::new(Vec::new()));
        let mut stdout = child.stdout.take().expect("stdout");
        let sink = received.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("received")
                    .extend_from_slice(&buffer[..n]);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "s_server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            port,
            received,
        }
    }

    /// Everything a client sent after the handshake, decrypted.
    pub fn received(&self) -> Vec<u8> {
        self.received.lock().expect("received").clone()
    }
}

impl Drop for TlsEndpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TLS-terminating proxy on a free loopback port, in front of a plain TCP service at
/// `upstream` (a Qdrant server's gRPC port, a stand-in): `<name>-leaf.pem` is its
/// certificate, h2 its ALPN protocol. It runs on a thread of its own, with its own
/// runtime, until dropped.
#[cfg(feature = "tls-proxy")]
#[derive(Debug)]
pub struct TlsProxy {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

#[cfg(feature = "tls-proxy")]
impl TlsProxy {
    pub fn start(dir: &Path, name: &str, upstream: std::net::SocketAddr) -> Self {
        use tokio_rustls::rustls;
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

        let certs = CertificateDer::pem_file_iter(dir.join(format!("{name}-leaf.pem")))
            .expect("leaf certificate")
            .collect::<Result<Vec<_>, _>>()
            .expect("leaf certificate");
        let key =
            PrivateKeyDer::from_pem_file(dir.join(format!("{name}-leaf.key"))).expect("leaf key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("certificate and key");
        config.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("address").port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let serve = async {
                    while let Ok((client, _)) = listener.accept().await {
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            // A failed handshake (an untrusting client) just closes.
                            let Ok(mut client) = acceptor.accept(client).await else {
                                return;
                            };
                            if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                                let _ =
                                    tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            }
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
        });
        Self {
            port,
            stop: Some(stop),
        }
    }
}

#[cfg(feature = "tls-proxy")]
impl Drop for TlsProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
