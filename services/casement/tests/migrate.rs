//! `casement migrate` (issue 21, model migration): the bundled sample's index rebuilt under
//! another model configuration (int8, one sentence per batch so its vectors do not depend
//! on the batch) from its stored records. Offline: a migration killed (SIGKILL) halfway
//! resumes, ends equal to a fresh backfill under the new configuration, is swapped in; a
//! worse configuration (every embedding input cut to 8 tokens) is refused by the golden-set gate; a
//! rollback serves the old index again, with what was indexed after the swap; another window radius with the same model embeds
//! nothing and equals a fresh backfill with that radius. Online, in `casement run`: the same while webhook
//! edits arrive and searches run, none failing or empty; the new index then equals a fresh
//! backfill of every revision under the new configuration, and after a rollback (with more
//! edits) the old index equals one under the old. Real model, real Qdrant Edge.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

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
    let mut command = Command::new(env!("CARGO_BIN_EXE_casement"));
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
async fn assert_same_index(migrated: &EdgeStore, fresh: &EdgeStore) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_migration_resumes_is_gated_swapped_and_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = sample_log();
    let output = casement(&data, &["backfill", log.to_str().unwrap()], &[]);
    assert!(output.status.success(), "{}", text(&output));

    // Killed halfway: two documents copied (and synced), then SIGKILL.
    let mut child = command(
        &data,
        &migrate_args(&INT8)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[],
    )
    .env("CASEMENT_MIGRATE_STALL_AFTER", "2")
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let stderr = child.stderr.take().unwrap();
    let stalled = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut seen = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("stalled after 2 documents") {
                return (true, seen);
            }
        }
        (false, seen)
    });
    let (reached, seen) = stalled.join().unwrap();
    assert!(
        reached,
        "the migration did not reach its kill point:\n{seen}"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(
        serving(&data)["index"],
        "index",
        "nothing is swapped by a killed migration"
    );
    assert_eq!(serving(&data)["migration"]["target"], "index.2");

    // The same command resumes it: the two documents copied are not copied again.
    let args = migrate_args(&INT8);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let resumed = casement(&data, &args, &[]);
    let said = text(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{said}");
    assert!(
        said.contains("resuming the migration into index.2"),
        "{said}"
    );
    let documents = read_log(&log)
        .iter()
        .map(|e| e.doc_id.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert!(
        said.contains(&format!(
            "pass 1: {documents} documents, {} copied",
            documents - 2
        )),
        "{said}"
    );
    assert!(
        said.contains("recall@5") && said.contains("swapped"),
        "{said}"
    );
    assert_eq!(serving(&data)["index"], "index.2");
    assert_eq!(serving(&data)["previous"]["index"], "index");

    // The new index equals a fresh backfill under the new configuration.
    {
        let fresh = backfill(&dir.path().join("fresh-int8"), &log, &INT8_ENV);
        let migrated = open(data.join("index.2"));
        assert_same_index(&migrated, &fresh).await;
        drop(migrated);
        // A snapshot holds the served index alone; restored, it is served as `index`.
        let snapshot = dir.path().join("snapshot");
        let taken = casement(&data, &["snapshot", snapshot.to_str().unwrap()], &INT8_ENV);
        assert!(taken.status.success(), "{}", text(&taken));
        assert!(!snapshot.join("index.2").exists() && !snapshot.join("serving.json").exists());
        let restored = dir.path().join("restored");
        let back = casement(
            &restored,
            &["restore", snapshot.to_str().unwrap()],
            &INT8_ENV,
        );
        assert!(back.status.success(), "{}", text(&back));
        assert_same_index(&open(restored.join("index")), &fresh).await;
    }

    // A worse configuration (every input cut to 8 tokens) is refused: nothing is swapped.
    let worse = migrate_args(&["embedder.max_tokens=8"]);
    let worse: Vec<&str> = worse.iter().map(String::as_str).collect();
    let refused = casement(&data, &worse, &INT8_ENV);
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("worse than the margin allows"), "{said}");
    assert_eq!(serving(&data)["index"], "index.2");

    // An edit indexed after the swap (into the new index)...
    let extra = log_with(dir.path(), "extra.jsonl", &[edit(1).1]);
    let added = casement(&data, &["backfill", extra.to_str().unwrap()], &INT8_ENV);
    assert!(added.status.success(), "{}", text(&added));
    // ...is in the old index once the rollback serves it again, equal to a rebuild.
    let back = casement(&data, &["migrate", "--rollback"], &INT8_ENV);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back));
    assert!(
        text(&back).contains("(1 documents brought up to date)"),
        "{}",
        text(&back)
    );
    assert_eq!(serving(&data)["index"], "index");
    assert_eq!(serving(&data)["previous"]["index"], "index.2");
    {
        let old = open(data.join("index"));
        assert_equals_rebuild(&old, &read_log(&extra), 1).await;
    }

    // Another window radius with the same model embeds nothing: every vector is kept.
    let radius = casement(&data, &["migrate", "--set", "text.window_radius=2"], &[]);
    let said = text(&radius);
    assert_eq!(radius.status.code(), Some(0), "{said}");
    assert!(said.contains(", 0 sentences embedded in"), "{said}");
    let name = serving(&data)["index"].as_str().unwrap().to_owned();
    let fresh = backfill(
        &dir.path().join("fresh-radius-2"),
        &extra,
        &[
            ("CASEMENT__TEXT__WINDOW_RADIUS", "2"),
            ("CASEMENT__SEARCH__INDEXED_WINDOW_RADIUS", "2"),
        ],
    );
    assert_same_index(&open(data.join(name)), &fresh).await;
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

/// Posts the next edit, keeping its log line.
async fn send_edit(client: &support::Client, lines: &mut Vec<Value>) {
    let (event, line) = edit(lines.len() + 1);
    let (status, answer) = client.event(&event).await;
    assert!(status == 200 || status == 202, "{status} {answer}");
    lines.push(line);
}

/// Starts a migration (or a rollback) and sends edits until it ends; its final status.
async fn while_editing(
    client: &support::Client,
    path: &str,
    body: Value,
    lines: &mut Vec<Value>,
) -> Value {
    let (status, answer) = client
        .post_raw(path, serde_json::to_vec(&body).unwrap())
        .await;
    assert_eq!(status, 202, "{answer}");
    for _ in 0..600 {
        send_edit(client, lines).await;
        let (_, status) = client.get("/v1/admin/migrations").await;
        let status: Value = serde_json::from_str(&status).unwrap();
        let phase = status["phase"].as_str().unwrap();
        if !["building", "gating", "swapping", "rolling_back"].contains(&phase) {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path} did not end in a minute");
}

/// The last edit sent is found by a search.
async fn last_edit_found(client: &support::Client, lines: &[Value]) {
    let n = lines.len();
    let doc_id = format!("kb:migration-note-{n:03}");
    let needle = format!("note number {n}");
    support::eventually(
        Duration::from_secs(30),
        "the last edit is found",
        || async {
            support::contains(
                &client
                    .search("written during a migration", &[&doc_id])
                    .await,
                &needle,
            )
        },
    )
    .await;
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

/// The edits an index holds: 1..=m, with none missing.
async fn edits_held(store: &EdgeStore) -> usize {
    let held: Vec<usize> = store
        .documents()
        .await
        .unwrap()
        .iter()
        .filter_map(|d| d.doc_id.strip_prefix("kb:migration-note-")?.parse().ok())
        .collect();
    let mut sorted = held.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (1..=held.len()).collect::<Vec<_>>(),
        "edits held, in order, none missing"
    );
    held.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_online_migration_swaps_while_edits_arrive_and_searches_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = support::write_config(dir.path(), &format!("[eval]\ngolden = \"{}\"\n", golden()));
    let log = sample_log();
    let mut casement =
        support::Casement::start(dir.path(), &config, &["--replay", log.to_str().unwrap()]);
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = Arc::new(support::Client::new(&casement.base));

    // Searches all along: none may fail or come back empty.
    let (searches, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let searching = {
        let (client, searches, failures) = (client.clone(), searches.clone(), failures.clone());
        tokio::spawn(async move {
            loop {
                let (status, body) = client
                    .post_raw(
                        "/v1/search",
                        serde_json::to_vec(&json!({"query": "How long does a name change take?"}))
                            .unwrap(),
                    )
                    .await;
                let windows = body["windows"].as_array().map_or(0, Vec::len);
                if status != 200 || windows == 0 {
                    eprintln!("search failed: {status} {body}");
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                searches.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut lines = Vec::new();

    // 1. fp32 -> int8, while edits arrive; a second request meanwhile is refused.
    let (status, answer) = client
        .post_raw(
            "/v1/admin/migrations",
            serde_json::to_vec(&json!({"set": INT8})).unwrap(),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    let (status, _) = client
        .post_raw(
            "/v1/admin/migrations",
            serde_json::to_vec(&json!({"set": ["text.window_radius=2"]})).unwrap(),
        )
        .await;
    assert_eq!(status, 409);
    let mut status = Value::Null;
    for _ in 0..600 {
        send_edit(&client, &mut lines).await;
        let (_, answer) = client.get("/v1/admin/migrations").await;
        status = serde_json::from_str(&answer).unwrap();
        if !["building", "gating", "swapping"].contains(&status["phase"].as_str().unwrap()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status["phase"], "swapped", "{status}");
    assert_eq!(status["serving"], "index.2", "{status}");
    for _ in 0..3 {
        send_edit(&client, &mut lines).await;
    }
    last_edit_found(&client, &lines).await;

    // 2. Another radius on top: the int8 model is kept (its vectors too), not reset to the
    // configuration file's fp32.
    let status = while_editing(
        &client,
        "/v1/admin/migrations",
        json!({"set": ["text.window_radius=2"]}),
        &mut lines,
    )
    .await;
    assert_eq!(status["phase"], "swapped", "{status}");
    assert_eq!(status["serving"], "index.3", "{status}");
    let embedded: u64 = status["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["embedded"].as_u64().unwrap())
        .sum();
    let copied: u64 = status["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["copied"].as_u64().unwrap())
        .sum();
    assert!(
        embedded < copied * 3,
        "kept vectors: {embedded} sentences embedded for {copied} documents"
    );
    send_edit(&client, &mut lines).await;
    last_edit_found(&client, &lines).await;

    // 3. Rollback to index.2, brought up to date first, with edits arriving meanwhile.
    let status = while_editing(
        &client,
        "/v1/admin/migrations/rollback",
        json!({}),
        &mut lines,
    )
    .await;
    assert_eq!(status["phase"], "rolled_back", "{status}");
    assert_eq!(status["serving"], "index.2", "{status}");
    send_edit(&client, &mut lines).await;
    last_edit_found(&client, &lines).await;

    searching.abort();
    let (_, metrics) = client.get("/metrics").await;
    for series in [
        "casement_migrations_total{outcome=\"swapped\"} 2",
        "casement_migrations_total{outcome=\"rolled_back\"} 1",
        "casement_migrations_total{outcome=\"failed\"} 0",
        "casement_migration_in_progress 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == series),
            "{series} in:\n{metrics}"
        );
    }
    assert!(
        client
            .metric("casement_migration_sentences_embedded_total")
            .await
            > 0.0
    );
    casement_testkit::metrics_doc::assert_served_as_documented(
        &metrics,
        &["casement_migration"],
        &[],
    );
    let (_, openapi) = client.get("/openapi.json").await;
    let openapi: Value = serde_json::from_str(&openapi).unwrap();
    assert!(openapi["paths"]["/v1/admin/migrations"]["post"].is_object());
    assert!(openapi["components"]["schemas"]["MigrationStatus"].is_object());
    let (searches, failures) = (
        searches.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
    );
    assert!(searches > 20, "{searches} searches");
    assert_eq!(
        failures, 0,
        "{failures} of {searches} searches failed or came back empty"
    );
    casement.stop();
    eprintln!("{} edits; {searches} searches", lines.len());

    // index.2 (int8, radius 3) is served again and holds every edit: a fresh int8 backfill.
    let data = dir.path().join("data");
    let served = open(data.join("index.2"));
    assert_eq!(edits_held(&served).await, lines.len());
    let all = log_with(dir.path(), "all.jsonl", &lines);
    assert_same_index(
        &served,
        &backfill(&dir.path().join("fresh-int8"), &all, &INT8_ENV),
    )
    .await;
    // index.3 (int8, radius 2) holds the edits up to the rollback's pause, none missing.
    let replaced = open(data.join("index.3"));
    let held = edits_held(&replaced).await;
    assert!(held > 4, "{held} edits");
    let upto = log_with(dir.path(), "upto.jsonl", &lines[..held]);
    let radius_2 = [
        INT8_ENV[0],
        INT8_ENV[1],
        ("CASEMENT__TEXT__WINDOW_RADIUS", "2"),
        ("CASEMENT__SEARCH__INDEXED_WINDOW_RADIUS", "2"),
    ];
    assert_same_index(
        &replaced,
        &backfill(&dir.path().join("fresh-radius-2"), &upto, &radius_2),
    )
    .await;
}

/// `casement run` killed (SIGKILL) in the middle of an online migration: the same request
/// to the restarted service resumes it, copying only what the first did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_online_migration_killed_with_the_service_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let config = support::write_config(dir.path(), &format!("[eval]\ngolden = \"{}\"\n", golden()));
    let log = sample_log();
    let args = ["--replay", log.to_str().unwrap()];
    let request = serde_json::to_vec(&json!({"set": INT8})).unwrap();
    let mut first = support::Casement::start_with(
        dir.path(),
        &config,
        &args,
        &[("CASEMENT_MIGRATE_STALL_AFTER", "2")],
    );
    first.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = support::Client::new(&first.base);
    let (status, answer) = client
        .post_raw("/v1/admin/migrations", request.clone())
        .await;
    assert_eq!(status, 202, "{answer}");
    support::eventually(
        Duration::from_secs(60),
        "the migration reaches its kill point",
        || async { first.stderr_text().contains("stalled after 2 documents") },
    )
    .await;
    drop(first); // SIGKILL
    let data = dir.path().join("data");
    assert_eq!(serving(&data)["index"], "index");
    assert_eq!(serving(&data)["migration"]["target"], "index.2");

    let mut second = support::Casement::start(dir.path(), &config, &args);
    second.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = support::Client::new(&second.base);
    let (status, answer) = client.post_raw("/v1/admin/migrations", request).await;
    assert_eq!(status, 202, "{answer}");
    let mut status = Value::Null;
    for _ in 0..600 {
        let (_, answer) = client.get("/v1/admin/migrations").await;
        status = serde_json::from_str(&answer).unwrap();
        if !["building", "gating", "swapping"].contains(&status["phase"].as_str().unwrap()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status["phase"], "swapped", "{status}");
    assert_eq!(status["serving"], "index.2", "{status}");
    let first_pass = &status["passes"][0];
    assert_eq!(
        first_pass["copied"].as_u64().unwrap() + 2,
        first_pass["documents"].as_u64().unwrap(),
        "the two documents copied before the kill are not copied again: {status}"
    );
    let stderr = second.stop();
    assert!(
        stderr.contains("resuming the migration into index.2"),
        "{stderr}"
    );
    assert_same_index(
        &open(data.join("index.2")),
        &backfill(&dir.path().join("fresh-int8"), &log, &INT8_ENV),
    )
    .await;
}
