//! Migrations inside `casement run`, while edits arrive and searches run; killed with the
//! service and resumed.

use super::*;

/// Posts the next edit, keeping its log line.
pub(super) async fn send_edit(client: &support::Client, lines: &mut Vec<Value>) {
    let (event, line) = edit(lines.len() + 1);
    let (status, answer) = client.event(&event).await;
    assert!(status == 200 || status == 202, "{status} {answer}");
    lines.push(line);
}

/// Follows the migration (or rollback) under way until it ends, sending an edit each
/// round when given the edits; its final status.
pub(super) async fn follow(client: &support::Client, mut lines: Option<&mut Vec<Value>>) -> Value {
    for _ in 0..600 {
        if let Some(lines) = lines.as_deref_mut() {
            send_edit(client, lines).await;
        }
        let (_, status) = client.get("/v1/admin/migrations").await;
        let status: Value = serde_json::from_str(&status).unwrap();
        let phase = status["phase"].as_str().unwrap();
        if !["building", "gating", "swapping", "rolling_back"].contains(&phase) {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the migration did not end in a minute");
}

/// Starts a migration (or a rollback) and sends edits until it ends; its final status.
pub(super) async fn while_editing(
    client: &support::Client,
    path: &str,
    body: Value,
    lines: &mut Vec<Value>,
) -> Value {
    // `null` sends no body (the defaults).
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).unwrap()
    };
    let (status, answer) = client.post_raw(path, bytes).await;
    assert_eq!(status, 202, "{answer}");
    follow(client, Some(lines)).await
}

/// The last edit sent is found by a search.
pub(super) async fn last_edit_found(client: &support::Client, lines: &[Value]) {
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

/// The edits an index holds: 1..=m, with none missing.
pub(super) async fn edits_held(store: &impl Store) -> usize {
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
    let config = support::write_config(
        dir.path(),
        &format!(
            "[eval]\ngolden = \"{}\"\n{}",
            golden(),
            support::OPERATOR_KEYS
        ),
    );
    let log = sample_log();
    // One copy pass only: under the edits it is never small, so each swap copies the rest
    // with the pipeline paused (before, a copy that did not get small failed).
    let mut casement = support::Casement::start_with(
        dir.path(),
        &config,
        &["--replay", log.to_str().unwrap()],
        &[("CASEMENT_MIGRATE_MAX_PASSES", "1")],
    );
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = Arc::new(support::Client::with_key(
        &casement.base,
        support::OPERATOR_KEY,
    ));

    // Searches all along: none may fail or come back empty.
    let base = Arc::new(tokio::sync::Mutex::new(Some(casement.base.clone())));
    let (searching, searches, failures) = keep_searching(base);
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
    let status = follow(&client, Some(&mut lines)).await;
    assert_eq!(status["phase"], "swapped", "{status}");
    assert_eq!(status["serving"], "index.2", "{status}");
    let pause = status["pause_seconds"]
        .as_f64()
        .expect("the pause is reported");
    assert!(pause > 0.0 && pause < 30.0, "{status}");
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

    // 3. Rollback to index.2, brought up to date first, with edits arriving meanwhile; no
    // body: the replaced index is kept the documented 168 hours.
    let status = while_editing(
        &client,
        "/v1/admin/migrations/rollback",
        Value::Null,
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
    let pointer = serving(&data);
    assert_eq!(pointer["previous"]["index"], "index.3", "{pointer}");
    let kept_for = pointer["previous"]["keep_until"].as_u64().unwrap() as i64
        - std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
    assert!(
        kept_for > 167 * 3600,
        "a rollback without a body keeps the replaced index 168 h: {pointer}"
    );
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
    let config = support::write_config(
        dir.path(),
        &format!(
            "[eval]\ngolden = \"{}\"\n{}",
            golden(),
            support::OPERATOR_KEYS
        ),
    );
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
    let client = support::Client::with_key(&first.base, support::OPERATOR_KEY);
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
    let client = support::Client::with_key(&second.base, support::OPERATOR_KEY);
    // Not "idle": the pointer records a migration no one runs now.
    let (_, status) = client.get("/v1/admin/migrations").await;
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["phase"], "interrupted", "{status}");
    assert_eq!(status["target"], "index.2", "{status}");
    // An offline migration on the data directory the service holds is refused before it
    // touches anything: the pointer and the migration under way stay as they are.
    let pointer = std::fs::read(data.join("serving.json")).unwrap();
    let offline = casement(&data, &["migrate", "--set", "text.window_radius=2"], &[]);
    assert!(!offline.status.success(), "{}", text(&offline));
    assert!(text(&offline).contains("in use"), "{}", text(&offline));
    assert_eq!(std::fs::read(data.join("serving.json")).unwrap(), pointer);
    assert!(
        data.join("index.2").is_dir(),
        "the migration under way was deleted"
    );
    let (status, answer) = client.post_raw("/v1/admin/migrations", request).await;
    assert_eq!(status, 202, "{answer}");
    let status = follow(&client, None).await;
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
    // The configuration file was never given the int8 pairs: an offline rollback reads
    // the served index's configuration from the swap's record and returns to the file's.
    let back = casement(&data, &["migrate", "--rollback"], &[]);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back));
    assert_eq!(serving(&data)["index"], "index");
    assert_eq!(serving(&data)["previous"]["index"], "index.2");
}
