//! `casement migrate` with no service running: killed and resumed, gated, swapped, rolled
//! back, another radius.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_migration_resumes_is_gated_swapped_and_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = sample_log();
    let output = casement(&data, &["backfill", log.to_str().unwrap()], &[]);
    assert!(output.status.success(), "{}", text(&output));

    // Killed halfway: two documents copied (and synced), then SIGKILL.
    let mut stalled = command(
        &data,
        &migrate_args(&INT8)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[],
    );
    stalled.env("CASEMENT_MIGRATE_STALL_AFTER", "2");
    kill_at(stalled, "stalled after 2 documents");
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
    // The gate is asked in retrieval order here: on the sample's ten questions the learned
    // ranker's word features make up for embeddings of 8 tokens, which is the ranker
    // working, not the gate failing.
    let worse = migrate_args(&["embedder.max_tokens=8"]);
    let worse: Vec<&str> = worse.iter().map(String::as_str).collect();
    let retrieval_order = [
        INT8_ENV[0],
        INT8_ENV[1],
        ("CASEMENT__RERANK__BY_DEFAULT", "false"),
    ];
    let refused = casement(&data, &worse, &retrieval_order);
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
