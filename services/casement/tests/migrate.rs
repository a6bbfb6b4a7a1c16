//! `casement migrate` (issue 21, model migration): the bundled sample's index rebuilt under
//! another model configuration (int8, one sentence per batch so its vectors do not depend
//! on the batch) from its stored records. Offline: a migration killed (SIGKILL) halfway
//! resumes, ends equal to a fresh backfill under the new configuration, is swapped in; a
//! worse configuration (every embedding input cut to 8 tokens) is refused by the golden-set gate; a
//! rollback serves the old index again; another window radius with the same model embeds
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

    // The rollback serves the old index again, equal to a rebuild under the old one.
    let back = casement(&data, &["migrate", "--rollback"], &INT8_ENV);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back));
    assert_eq!(serving(&data)["index"], "index");
    assert_eq!(serving(&data)["previous"]["index"], "index.2");
    {
        let old = open(data.join("index"));
        assert_equals_rebuild(&old, &read_log(&log), 1).await;
    }

    // Another window radius with the same model embeds nothing: every vector is kept.
    let radius = casement(&data, &["migrate", "--set", "text.window_radius=2"], &[]);
    let said = text(&radius);
    assert_eq!(radius.status.code(), Some(0), "{said}");
    assert!(said.contains(", 0 sentences embedded in"), "{said}");
    let name = serving(&data)["index"].as_str().unwrap().to_owned();
    let fresh = backfill(
        &dir.path().join("fresh-radius-2"),
        &log,
        &[
            ("CASEMENT__TEXT__WINDOW_RADIUS", "2"),
            ("CASEMENT__SEARCH__INDEXED_WINDOW_RADIUS", "2"),
        ],
    );
    assert_same_index(&open(data.join(name)), &fresh).await;
}

/// A new revision of `doc_id` with `n` in its text, as a webhook event and as a line of a
/// revision log.
fn edit(doc_id: &str, revision: u64, n: usize) -> (Value, Value) {
    let content = format!(
        "# Migration notes\n\nThis page was edited during a migration, edit number {n}. \
         Searches keep working while the index is rebuilt. Each edit adds a sentence.\n\n\
         ## Details\n\n{}",
        (0..=n)
            .map(|i| format!("Detail {i} explains step {i} of the procedure."))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let event = json!({"type": "upsert", "doc_id": doc_id, "revision": revision,
                       "title": "Migration notes", "format": "markdown", "content": content});
    let change = if revision == 1 { "create" } else { "update" };
    let line = json!({"doc_id": doc_id, "revision": revision, "title": "Migration notes",
                      "format": "markdown", "content": content, "change": change});
    (event, line)
}

/// Posts the next edit of the page, keeping its log line.
async fn send_edit(client: &support::Client, revision: &mut u64, lines: &mut Vec<Value>) {
    *revision += 1;
    let (event, line) = edit("kb:migration-notes", *revision, *revision as usize);
    let (status, answer) = client.event(&event).await;
    assert!(status == 200 || status == 202, "{status} {answer}");
    lines.push(line);
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
    let mut revision = 0;

    let (status, answer) = client
        .post_raw(
            "/v1/admin/migrations",
            serde_json::to_vec(&json!({"set": INT8})).unwrap(),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    // A second one while the first runs is refused.
    let (status, _) = client
        .post_raw(
            "/v1/admin/migrations",
            serde_json::to_vec(&json!({"set": ["text.window_radius=2"]})).unwrap(),
        )
        .await;
    assert_eq!(status, 409);
    let mut phase = String::new();
    for _ in 0..600 {
        send_edit(&client, &mut revision, &mut lines).await;
        let (_, status) = client.get("/v1/admin/migrations").await;
        let status: Value = serde_json::from_str(&status).unwrap();
        phase = status["phase"].as_str().unwrap().to_owned();
        if !["building", "gating", "swapping"].contains(&phase.as_str()) {
            assert_eq!(phase, "swapped", "{status}");
            assert_eq!(status["serving"], "index.2", "{status}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(phase, "swapped");
    let during = lines.len();
    for _ in 0..3 {
        send_edit(&client, &mut revision, &mut lines).await;
    }
    // The last edit is searchable on the new index.
    let last = format!("edit number {revision}");
    support::eventually(
        Duration::from_secs(30),
        "the last edit is found",
        || async {
            support::contains(
                &client
                    .search("edit during a migration", &["kb:migration-notes"])
                    .await,
                &last,
            )
        },
    )
    .await;

    // Rollback, with edits arriving meanwhile and after.
    let (status, answer) = client
        .post_raw("/v1/admin/migrations/rollback", b"{}".to_vec())
        .await;
    assert_eq!(status, 202, "{answer}");
    for _ in 0..600 {
        send_edit(&client, &mut revision, &mut lines).await;
        let (_, status) = client.get("/v1/admin/migrations").await;
        let status: Value = serde_json::from_str(&status).unwrap();
        phase = status["phase"].as_str().unwrap().to_owned();
        if phase != "rolling_back" && phase != "swapping" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(phase, "rolled_back");
    send_edit(&client, &mut revision, &mut lines).await;
    let last = format!("edit number {revision}");
    support::eventually(
        Duration::from_secs(30),
        "the last edit is found",
        || async {
            support::contains(
                &client
                    .search("edit during a migration", &["kb:migration-notes"])
                    .await,
                &last,
            )
        },
    )
    .await;
    searching.abort();
    let (_, metrics) = client.get("/metrics").await;
    for series in [
        "casement_migrations_total{outcome=\"swapped\"} 1",
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
    eprintln!(
        "{during} edits during the migration, {} in all; {searches} searches",
        lines.len()
    );

    // Every revision, as a log: the sample, then the edits.
    let all = dir.path().join("all.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    for line in &lines {
        text.push_str(&format!("{line}\n"));
    }
    std::fs::write(&all, text).unwrap();
    let events = read_log(&all);
    let edited_to = |store_revision: u64| {
        events
            .iter()
            .filter(|e| e.doc_id == "kb:migration-notes" && e.revision <= store_revision)
            .count()
    };
    // The old index, served again, holds every revision (it was brought up to date before
    // the rollback and took the edits after).
    let data = dir.path().join("data");
    let old = open(data.join("index"));
    assert_equals_rebuild(&old, &events, 1).await;
    // The new one holds every revision up to the rollback: a fresh int8 backfill of them.
    let new = open(data.join("index.2"));
    let at_swap_back = new
        .document("kb:migration-notes")
        .await
        .unwrap()
        .expect("the edited page")
        .revision;
    assert!(
        edited_to(at_swap_back) > during,
        "edits after the swap reached the new index"
    );
    let upto = dir.path().join("upto.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    for line in lines
        .iter()
        .filter(|l| l["revision"].as_u64().unwrap() <= at_swap_back)
    {
        text.push_str(&format!("{line}\n"));
    }
    std::fs::write(&upto, text).unwrap();
    let fresh = backfill(&dir.path().join("fresh-int8"), &upto, &INT8_ENV);
    assert_same_index(&new, &fresh).await;
}
