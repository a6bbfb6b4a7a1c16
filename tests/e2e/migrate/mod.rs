//! `casement migrate` (issue 21, model migration): the bundled sample's index rebuilt under
//! another model configuration (int8, one sentence per batch so its vectors do not depend
//! on the batch) from its stored records. Offline ([`offline`]): a migration killed
//! (SIGKILL) halfway resumes, ends equal to a fresh backfill under the new configuration,
//! is swapped in; a worse configuration (every embedding input cut to 8 tokens) is refused
//! by the golden-set gate; a rollback serves the old index again, with what was indexed
//! after the swap; another window radius with the same model embeds nothing and equals a
//! fresh backfill with that radius. Online, in `casement run` ([`online`]): the same while
//! webhook edits arrive and searches run, none failing or empty; each index then equals a
//! fresh backfill of what it holds; a migration killed with the service resumes. Real
//! model, real Qdrant Edge. Against a Qdrant server when `QDRANT_URL` is set ([`server`]):
//! the collection alias swapped under a running service.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

mod offline;
mod online;
mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use casement_inference::cosine;
use casement_store::{EdgeStore, Store, StoreConfig};
use casement_testkit::{assert_equals_rebuild, read_log, sample_log};
use serde_json::{Value, json};

/// The new configuration: int8 weights, batch-independent vectors.
const INT8: [&str; 2] = ["embedder.precision=int8", "embedder.batch_size=1"];
const INT8_ENV: [(&str, &str); 2] = [
    ("CASEMENT__EMBEDDER__PRECISION", "int8"),
    ("CASEMENT__EMBEDDER__BATCH_SIZE", "1"),
];

fn golden() -> String {
    sample_log()
        .with_file_name("golden.jsonl")
        .display()
        .to_string()
}

fn command(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(crate::support::casement_bin());
    command
        .env_remove("CASEMENT_CONFIG")
        .env("CASEMENT__EVAL__GOLDEN", golden())
        .envs(env.iter().copied())
        .arg("--data-dir")
        .arg(data_dir)
        .args(args);
    command
}

fn casement(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    command(data_dir, args, env).output().expect("runs")
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Searches every 20 ms until aborted, while `base` names a running service (not while
/// it restarts); counts those failed or empty.
fn keep_searching(
    base: Arc<tokio::sync::Mutex<Option<String>>>,
) -> (
    tokio::task::JoinHandle<()>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
) {
    let (searches, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let task = {
        let (searches, failures) = (searches.clone(), failures.clone());
        tokio::spawn(async move {
            loop {
                // Held for the search: a restart waits for the one under way.
                let serving = base.lock().await;
                if let Some(url) = serving.as_deref() {
                    let (status, body) = support::Client::with_key(url, support::OPERATOR_KEY)
                        .post_raw(
                            "/v1/search",
                            serde_json::to_vec(
                                &json!({"query": "How long does a name change take?"}),
                            )
                            .unwrap(),
                        )
                        .await;
                    let windows = body["windows"].as_array().map_or(0, Vec::len);
                    if status != 200 || windows == 0 {
                        eprintln!("search failed: {status} {body}");
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                    searches.fetch_add(1, Ordering::Relaxed);
                }
                drop(serving);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    (task, searches, failures)
}

/// Runs `command` until its stderr says `needle` (a test's kill point), then SIGKILLs it.
fn kill_at(mut command: Command, needle: &str) {
    let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let needle = needle.to_owned();
    let (reached, seen) = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut seen = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(&needle) {
                return (true, seen);
            }
        }
        (false, seen)
    })
    .join()
    .unwrap();
    assert!(
        reached,
        "the migration did not reach its kill point:\n{seen}"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

fn migrate_args(set: &[&str]) -> Vec<String> {
    let mut args = vec!["migrate".to_owned()];
    for pair in set {
        args.push("--set".to_owned());
        args.push((*pair).to_owned());
    }
    args
}

fn serving(data_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(data_dir.join("serving.json")).unwrap()).unwrap()
}

fn open(dir: PathBuf) -> EdgeStore {
    let mut config = StoreConfig::default();
    config.edge.path = dir;
    EdgeStore::open(&config, 384).expect("store")
}

/// Both indexes hold the same documents (states), the same points (ids and payloads) and
/// vectors of cosine at least 0.9999 point by point.
async fn assert_same_index(migrated: &impl Store, fresh: &impl Store) {
    let listing = |docs: Vec<casement_store::IndexedDocument>| {
        docs.into_iter()
            .map(|d| (d.doc_id.clone(), (d.state, d.points)))
            .collect::<BTreeMap<_, _>>()
    };
    let (ours, theirs) = (
        listing(migrated.documents().await.unwrap()),
        listing(fresh.documents().await.unwrap()),
    );
    assert_eq!(ours, theirs, "document states and point counts");
    let mut vectors = 0;
    for doc_id in ours.keys() {
        let mut a = migrated.records(doc_id.as_str()).await.unwrap();
        let mut b = fresh.records(doc_id.as_str()).await.unwrap();
        a.sort_by_key(|r| r.id);
        b.sort_by_key(|r| r.id);
        assert_eq!(a, b, "the records of {doc_id}");
        let ids: Vec<_> = a.iter().map(|r| r.id).collect();
        let (va, vb) = (
            migrated.dense_vectors(&ids).await.unwrap(),
            fresh.dense_vectors(&ids).await.unwrap(),
        );
        for id in &ids {
            let similarity = cosine(&va[id], &vb[id]);
            assert!(
                similarity >= 0.9999,
                "{doc_id}: point {id}: cosine {similarity}"
            );
            vectors += 1;
        }
    }
    assert!(vectors > 0);
}

/// A fresh backfill of `log` under `env` into `<dir>`; its index.
fn backfill(dir: &Path, log: &Path, env: &[(&str, &str)]) -> EdgeStore {
    let output = casement(dir, &["backfill", log.to_str().unwrap()], env);
    assert!(output.status.success(), "{}", text(&output));
    open(dir.join("index"))
}

/// Edit `n`: a new page (one per edit, so an edit lost at a swap is a page missing, not
/// hidden by the next revision), as a webhook event and as a line of a revision log.
fn edit(n: usize) -> (Value, Value) {
    let doc_id = format!("kb:migration-note-{n:03}");
    let content = format!(
        "# Migration note {n}\n\nThis page was written during a migration, note number {n}. \
         Searches keep working while the index is rebuilt.\n\n## Details\n\n{}",
        (0..=n % 5)
            .map(|i| format!("Detail {i} explains step {i} of the procedure."))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let event = json!({"type": "upsert", "doc_id": doc_id, "revision": 1,
                       "title": format!("Migration note {n}"), "format": "markdown", "content": content});
    let line = json!({"doc_id": doc_id, "revision": 1, "title": format!("Migration note {n}"),
                      "format": "markdown", "content": content, "change": "create"});
    (event, line)
}

/// The log of the sample and the first `edits` edits.
fn log_with(dir: &Path, name: &str, lines: &[Value]) -> PathBuf {
    let path = dir.join(name);
    let mut text = std::fs::read_to_string(sample_log()).unwrap();
    for line in lines {
        text.push_str(&format!("{line}\n"));
    }
    std::fs::write(&path, text).unwrap();
    path
}
