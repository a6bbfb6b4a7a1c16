//! The migration inside `casement run` on the server.

use super::*;
use crate::migrate::online;

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
    let config = support::write_config(
        dir.path(),
        &format!(
            "[eval]\ngolden = \"{}\"\n{}",
            golden(),
            support::OPERATOR_KEYS
        ),
    );
    let log = sample_log();
    let env = with(&server_env, &[]);
    let mut casement = support::Casement::start_with(
        dir.path(),
        &config,
        &["--replay", log.to_str().unwrap()],
        &env,
    );
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = support::Client::with_key(&casement.base, support::OPERATOR_KEY);
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
