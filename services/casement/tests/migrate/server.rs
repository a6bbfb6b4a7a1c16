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

use super::online;
use super::*;
use casement_store::{Aliases, Backend, ServerStore};

struct Server {
    url: String,
    alias: String,
}

impl Server {
    fn from_env() -> Option<Self> {
        let Ok(url) = std::env::var("QDRANT_URL") else {
            eprintln!("QDRANT_URL is not set: skipping the Qdrant server migration");
            return None;
        };
        Some(Self {
            url,
            alias: format!("casement_migrate_{}", std::process::id()),
        })
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CASEMENT__STORE__BACKEND", "server".to_owned()),
            ("CASEMENT__STORE__COLLECTION", self.alias.clone()),
            ("CASEMENT__STORE__SERVER__URL", self.url.clone()),
            ("CASEMENT__STORE__SERVER__FOLLOW_SECS", "1".to_owned()),
            ("CASEMENT__STORE__SERVER__TIMEOUT_SECS", "5".to_owned()),
        ]
    }

    fn config(&self) -> StoreConfig {
        let mut config = StoreConfig {
            backend: Backend::Server,
            collection: self.alias.clone(),
            ..StoreConfig::default()
        };
        config.server.url = self.url.clone();
        config
    }

    fn aliases(&self) -> Aliases {
        Aliases::connect(&self.config()).unwrap()
    }

    /// Collection `<alias>.<n>` itself.
    async fn collection(&self, n: u64) -> ServerStore {
        let mut config = self.config();
        config.collection = format!("{}.{n}", self.alias);
        config.exact_collection = true;
        ServerStore::open(&config, 384).await.unwrap()
    }
}

fn with<'a>(
    server: &'a [(&'static str, String)],
    more: &'a [(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    server
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(more.iter().copied())
        .collect()
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
                    let (status, body) = support::Client::new(url)
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

async fn send_edit(base: &str, lines: &mut Vec<Value>) -> u16 {
    let (event, line) = edit(lines.len() + 1);
    let (status, answer) = support::Client::new(base).event(&event).await;
    assert!(status == 200 || status == 202, "{status} {answer}");
    lines.push(line);
    status
}

/// Runs `casement migrate` (or `--rollback`) to its end while sending edits to `base`.
async fn migrate_while_editing(
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_migration_swaps_the_alias_under_a_running_service() {
    let Some(server) = Server::from_env() else {
        return;
    };
    let aliases = server.aliases();
    let _ = aliases.drop_all().await;
    let server_env = server.env();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = sample_log();
    let fp32 = with(&server_env, &[]);
    let int8 = with(&server_env, &INT8_ENV);

    // The sample, backfilled into the server: `<alias>.1` behind the alias.
    let output = casement(&data, &["backfill", log.to_str().unwrap()], &fp32);
    assert!(output.status.success(), "{}", text(&output));
    let first = format!("{}.1", server.alias);
    let second = format!("{}.2", server.alias);
    assert_eq!(aliases.target().await.unwrap(), Some(first.clone()));

    // A migration killed after two documents: nothing swapped, the new collection recorded.
    let args = migrate_args(&INT8);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = command(&data, &args, &fp32)
        .env("CASEMENT_MIGRATE_STALL_AFTER", "2")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (reached, seen) = std::thread::spawn(move || {
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
    })
    .join()
    .unwrap();
    assert!(
        reached,
        "the migration did not reach its kill point:\n{seen}"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(aliases.target().await.unwrap(), Some(first.clone()));
    let record = aliases.record(&second).await.unwrap().expect("a record");
    assert!(record.contains("embedder.precision=int8"), "{record}");

    // The service, fp32, writing (webhook) and searching through the alias.
    let config = support::write_config(dir.path(), "");
    let service_env = |env: &[(&str, &str)]| -> Vec<(String, String)> {
        env.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .chain([("CASEMENT__EVAL__GOLDEN".to_owned(), golden())])
            .collect()
    };
    let start = |env: &[(&str, &str)]| {
        let env = service_env(env);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        // The sample's log replayed (stale: already indexed), so the bundled sample's folder
        // is not indexed in its place.
        let mut service = support::Casement::start_with(
            dir.path(),
            &config,
            &["--replay", log.to_str().unwrap()],
            &env,
        );
        service.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
        service
    };
    let service = start(&fp32);
    let base = Arc::new(tokio::sync::Mutex::new(Some(service.base.clone())));
    let (searching, searches, failures) = keep_searching(base.clone());
    let mut lines = Vec::new();
    for _ in 0..3 {
        send_edit(&service.base, &mut lines).await;
    }

    // The same command resumes it while edits arrive, and swaps.
    let said = migrate_while_editing(&data, &args, &fp32, &service.base, &mut lines).await;
    assert!(
        said.contains(&format!("resuming the migration into {second}")),
        "{said}"
    );
    assert!(said.contains("swapped"), "{said}");
    assert!(said.contains("caught up:"), "{said}");
    assert_eq!(aliases.target().await.unwrap(), Some(second.clone()));
    let record = aliases.record(&second).await.unwrap().expect("a record");
    assert!(
        record.contains(&format!("\"index\":\"{first}\"")),
        "kept for a rollback: {record}"
    );
    assert!(!record.contains("migration"), "{record}");
    let migrated_edits = lines.len();

    // The fp32 service noticed: it keeps searching its collection and writes nothing.
    let (status, _) = support::Client::new(&service.base)
        .event(&edit(lines.len() + 1).0)
        .await;
    lines.push(edit(lines.len() + 1).1);
    assert_eq!(status, 202, "an edit waits while writes are refused");
    support::eventually(
        Duration::from_secs(30),
        "the refused write is retried",
        || async { service.stderr_text().contains("writes nothing to") },
    )
    .await;
    let old = server.collection(1).await;

    // Restarted with the printed pairs: it serves the new collection and applies the edit
    // that waited (its journal).
    *base.lock().await = None;
    drop(service); // SIGKILL
    let service = start(&int8);
    *base.lock().await = Some(service.base.clone());
    let last = edit(lines.len()).1["doc_id"].as_str().unwrap().to_owned();
    let new = server.collection(2).await;
    support::eventually(
        Duration::from_secs(60),
        "the waiting edit is applied",
        || async { new.document(last.as_str()).await.unwrap().is_some() },
    )
    .await;
    for _ in 0..2 {
        send_edit(&service.base, &mut lines).await;
    }
    let edits_before_rollback = lines.len();
    support::eventually(Duration::from_secs(60), "every edit is applied", || async {
        let edit = edit(edits_before_rollback).1;
        new.document(edit["doc_id"].as_str().unwrap())
            .await
            .unwrap()
            .is_some()
    })
    .await;

    // The new collection equals a fresh int8 backfill of the sample and every edit.
    let fresh = dir.path().join("fresh-int8");
    let fresh = backfill(
        &fresh,
        &log_with(dir.path(), "int8.jsonl", &lines),
        &INT8_ENV,
    );
    assert_same_index(&new, &fresh).await;
    assert!(migrated_edits > 3, "edits arrived during the migration");

    // Rollback, the same way back, while the int8 service runs.
    let said = migrate_while_editing(
        &data,
        &["migrate", "--rollback"],
        &int8,
        &service.base,
        &mut lines,
    )
    .await;
    assert!(said.contains("rolled back"), "{said}");
    assert_eq!(aliases.target().await.unwrap(), Some(first.clone()));
    *base.lock().await = None;
    drop(service);
    let service = start(&fp32);
    *base.lock().await = Some(service.base.clone());
    send_edit(&service.base, &mut lines).await;
    let total = lines.len();
    support::eventually(Duration::from_secs(60), "every edit is applied", || async {
        let edit = edit(total).1;
        old.document(edit["doc_id"].as_str().unwrap())
            .await
            .unwrap()
            .is_some()
    })
    .await;
    let fresh = dir.path().join("fresh-fp32");
    let fresh = backfill(&fresh, &log_with(dir.path(), "fp32.jsonl", &lines), &[]);
    assert_same_index(&old, &fresh).await;

    searching.abort();
    let (searches, failures) = (
        searches.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
    );
    assert!(searches > 50, "{searches} searches");
    assert_eq!(failures, 0, "of {searches} searches");
    drop(service);
    aliases.drop_all().await.unwrap();
}

/// The same inside `casement run` on the server (`POST /v1/admin/migrations`): the new
/// collection built while edits arrive and searches run, the pipeline paused for the last
/// copy, the alias moved and the service's processor and searcher swapped to the new
/// collection; then the rollback. No search fails; the served collection equals a fresh
/// backfill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_online_server_migration_swaps_the_alias_and_rolls_back() {
    let Some(mut server) = Server::from_env() else {
        return;
    };
    server.alias = format!("casement_online_{}", std::process::id());
    let aliases = server.aliases();
    let _ = aliases.drop_all().await;
    let server_env = server.env();
    let dir = tempfile::tempdir().unwrap();
    let config = support::write_config(dir.path(), &format!("[eval]\ngolden = \"{}\"\n", golden()));
    let log = sample_log();
    let env = with(&server_env, &[]);
    let mut casement = support::Casement::start_with(
        dir.path(),
        &config,
        &["--replay", log.to_str().unwrap()],
        &env,
    );
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = support::Client::new(&casement.base);
    let base = Arc::new(tokio::sync::Mutex::new(Some(casement.base.clone())));
    let (searching, searches, failures) = keep_searching(base);
    let mut lines = Vec::new();

    let status = online::while_editing(
        &client,
        "/v1/admin/migrations",
        json!({"set": INT8}),
        &mut lines,
    )
    .await;
    assert_eq!(status["phase"], "swapped", "{status}");
    assert_eq!(status["serving"], format!("{}.2", server.alias), "{status}");
    assert_eq!(
        aliases.target().await.unwrap(),
        Some(format!("{}.2", server.alias))
    );
    online::send_edit(&client, &mut lines).await;
    online::last_edit_found(&client, &lines).await;

    let status = online::while_editing(
        &client,
        "/v1/admin/migrations/rollback",
        json!({}),
        &mut lines,
    )
    .await;
    assert_eq!(status["phase"], "rolled_back", "{status}");
    assert_eq!(status["serving"], format!("{}.1", server.alias), "{status}");
    online::send_edit(&client, &mut lines).await;
    online::last_edit_found(&client, &lines).await;
    searching.abort();
    let (searches, failures) = (
        searches.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
    );
    assert!(searches > 20, "{searches} searches");
    assert_eq!(failures, 0, "of {searches} searches");
    casement.stop();

    let served = server.collection(1).await;
    assert_eq!(online::edits_held(&served).await, lines.len());
    let all = log_with(dir.path(), "all.jsonl", &lines);
    assert_same_index(
        &served,
        &backfill(&dir.path().join("fresh-fp32"), &all, &[]),
    )
    .await;
    let replaced = server.collection(2).await;
    assert!(online::edits_held(&replaced).await > 2);
    aliases.drop_all().await.unwrap();
}

/// `casement migrate` killed after its swap, before the catch-up: a write committed to the
/// old collection before the swap is still copied, by the next run, which says the
/// migration is complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_killed_after_its_swap_catches_up_at_the_next_run() {
    let Some(mut server) = Server::from_env() else {
        return;
    };
    server.alias = format!("casement_stopped_{}", std::process::id());
    let aliases = server.aliases();
    let _ = aliases.drop_all().await;
    let server_env = server.env();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = sample_log();
    let fp32 = with(&server_env, &[]);
    let output = casement(&data, &["backfill", log.to_str().unwrap()], &fp32);
    assert!(output.status.success(), "{}", text(&output));

    let args = migrate_args(&INT8);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = command(&data, &args, &fp32)
        .env("CASEMENT_MIGRATE_STALL_BEFORE_CATCH_UP", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (reached, seen) = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut seen = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("stalled before the catch-up") {
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
    let second = format!("{}.2", server.alias);
    assert_eq!(aliases.target().await.unwrap(), Some(second.clone()));
    let record = aliases.record(&second).await.unwrap().unwrap();
    assert!(record.contains("\"catch_up\":"), "{record}");

    // What an indexer committed to the old collection just before the swap, written there
    // by the same processor an fp32 indexer runs.
    let (event, line) = edit(1);
    let old = server.collection(1).await;
    let processor = casement_testkit::processor(
        old,
        casement_testkit::model(),
        &Default::default(),
        &casement_pipeline::Metrics::new(),
    );
    let logged: casement_events::revision_log::LogEvent =
        serde_json::from_value(line.clone()).unwrap();
    processor
        .process(&logged.to_event().unwrap())
        .await
        .unwrap();
    let doc_id = event["doc_id"].as_str().unwrap().to_owned();
    let new = server.collection(2).await;
    assert!(new.document(doc_id.as_str()).await.unwrap().is_none());

    // The same command finishes it.
    let again = casement(&data, &args, &fp32);
    let said = text(&again);
    assert_eq!(again.status.code(), Some(0), "{said}");
    assert!(
        said.contains("finishing what a stopped migration left"),
        "{said}"
    );
    assert!(
        said.contains(&format!("the migration into {second} is complete")),
        "{said}"
    );
    assert!(new.document(doc_id.as_str()).await.unwrap().is_some());
    let record = aliases.record(&second).await.unwrap().unwrap_or_default();
    assert!(!record.contains("\"catch_up\":"), "{record}");
    let fresh = backfill(
        &dir.path().join("fresh-int8"),
        &log_with(dir.path(), "all.jsonl", &[line]),
        &INT8_ENV,
    );
    assert_same_index(&new, &fresh).await;
    aliases.drop_all().await.unwrap();
}
