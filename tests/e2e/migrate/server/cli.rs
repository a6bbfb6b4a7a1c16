//! `casement migrate` as a job beside a running service on the server: swapped under it
//! (killed first, then resumed), rolled back; and killed after its swap.

use super::*;

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
    let mut stalled = command(&data, &args, &fp32);
    stalled.env("CASEMENT_MIGRATE_STALL_AFTER", "2");
    kill_at(stalled, "stalled after 2 documents");
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
    let (status, _) = support::Client::with_key(&service.base, support::OPERATOR_KEY)
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
    let new = server.collection(2).await;
    wait_for_edit(&new, lines.len()).await;
    for _ in 0..2 {
        send_edit(&service.base, &mut lines).await;
    }
    wait_for_edit(&new, lines.len()).await;

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
    wait_for_edit(&old, lines.len()).await;
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

/// `casement migrate` killed after its swap, before the catch-up: a write committed to the
/// old collection before the swap is still copied, by the next run, which says the
/// migration is complete. A rollback killed the same way is finished by a run whose pairs
/// are already in the configuration.
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
    let mut stalled = command(&data, &args, &fp32);
    stalled.env("CASEMENT_MIGRATE_STALL_BEFORE_CATCH_UP", "1");
    kill_at(stalled, "stalled before the catch-up");
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

    // A rollback killed the same way, then finished by a command whose pairs are already in
    // the configuration (the operator set the printed ones): they change nothing, so it only
    // finishes the catch-up.
    let int8 = with(&server_env, &INT8_ENV);
    let mut stalled = command(&data, &["migrate", "--rollback"], &int8);
    stalled.env("CASEMENT_MIGRATE_STALL_BEFORE_CATCH_UP", "1");
    kill_at(stalled, "stalled before the catch-up");
    let first = format!("{}.1", server.alias);
    assert_eq!(aliases.target().await.unwrap(), Some(first.clone()));
    let record = aliases.record(&first).await.unwrap().unwrap();
    assert!(record.contains("\"catch_up\":"), "{record}");
    let restore = ["embedder.precision=fp32", "embedder.batch_size=32"];
    let args = migrate_args(&restore);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let finished = casement(&data, &args, &fp32);
    let said = text(&finished);
    assert_eq!(finished.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!("the migration into {first} is complete")),
        "{said}"
    );
    let record = aliases.record(&first).await.unwrap().unwrap_or_default();
    assert!(!record.contains("\"catch_up\":"), "{record}");
    aliases.drop_all().await.unwrap();
}
