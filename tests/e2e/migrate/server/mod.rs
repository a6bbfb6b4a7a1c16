//! `casement migrate` against a Qdrant server (when `QDRANT_URL` is set; skipped
//! otherwise, as no Qdrant server binary comes from the package registries here): the
//! collection alias is swapped under a running service that writes and searches through
//! it. A killed migration resumes; edits made during the migration reach the new
//! collection; searches are answered throughout; after the swap the old service keeps
//! searching its collection and writes nothing, and restarted with the printed pairs it
//! serves the new collection and applies what waited; the new collection equals a fresh
//! backfill under the new configuration. Then a rollback, the same way back. And the
//! online migration of `casement run` on the server (`POST /v1/admin/migrations`), swapped
//! and rolled back while edits arrive and searches run.

mod cli;
mod online;

use super::*;
use casement_store::{Aliases, Backend, ServerStore};

pub(super) struct Server {
    url: String,
    pub(super) alias: String,
}

impl Server {
    pub(super) fn from_env() -> Option<Self> {
        let Ok(url) = std::env::var("QDRANT_URL") else {
            eprintln!("QDRANT_URL is not set: skipping the Qdrant server migration");
            return None;
        };
        Some(Self {
            url,
            alias: format!("casement_migrate_{}", std::process::id()),
        })
    }

    pub(super) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CASEMENT__STORE__BACKEND", "server".to_owned()),
            ("CASEMENT__STORE__COLLECTION", self.alias.clone()),
            ("CASEMENT__STORE__SERVER__URL", self.url.clone()),
            ("CASEMENT__STORE__SERVER__FOLLOW_SECS", "1".to_owned()),
            ("CASEMENT__STORE__SERVER__TIMEOUT_SECS", "5".to_owned()),
        ]
    }

    pub(super) fn config(&self) -> StoreConfig {
        let mut config = StoreConfig {
            backend: Backend::Server,
            collection: self.alias.clone(),
            ..StoreConfig::default()
        };
        config.server.url = self.url.clone();
        config
    }

    pub(super) fn aliases(&self) -> Aliases {
        Aliases::connect(&self.config()).unwrap()
    }

    /// Collection `<alias>.<n>` itself.
    pub(super) async fn collection(&self, n: u64) -> ServerStore {
        let mut config = self.config();
        config.collection = format!("{}.{n}", self.alias);
        config.exact_collection = true;
        ServerStore::open(&config, 384).await.unwrap()
    }
}

pub(super) fn with<'a>(
    server: &'a [(&'static str, String)],
    more: &'a [(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    server
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(more.iter().copied())
        .collect()
}

/// Waits until `store` holds edit `n` (each edit is a page of its own).
pub(super) async fn wait_for_edit(store: &ServerStore, n: usize) {
    let doc_id = edit(n).1["doc_id"].as_str().unwrap().to_owned();
    support::eventually(
        Duration::from_secs(60),
        &format!("edit {n} is applied"),
        || async { store.document(doc_id.as_str()).await.unwrap().is_some() },
    )
    .await;
}

pub(super) async fn send_edit(base: &str, lines: &mut Vec<Value>) -> u16 {
    let (event, line) = edit(lines.len() + 1);
    let (status, answer) = support::Client::with_key(base, support::OPERATOR_KEY)
        .event(&event)
        .await;
    assert!(status == 200 || status == 202, "{status} {answer}");
    lines.push(line);
    status
}

/// Runs `casement migrate` (or `--rollback`) to its end while sending edits to `base`.
pub(super) async fn migrate_while_editing(
    data: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    base: &str,
    lines: &mut Vec<Value>,
) -> String {
    let mut child = command(data, args, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).unwrap();
            text
        })
    };
    let (out, err) = (read(Box::new(stdout)), read(Box::new(stderr)));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        send_edit(base, lines).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let said = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        status.code(),
        out.join().unwrap(),
        err.join().unwrap()
    );
    assert_eq!(status.code(), Some(0), "{said}");
    eprintln!("{said}");
    said
}
