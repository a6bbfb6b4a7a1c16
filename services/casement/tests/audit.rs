//! `casement audit` (issue 21, reconcile and audit): an index damaged four ways (a page
//! one revision behind, a page missing, a deleted page's points left behind, a point with
//! a wrong window) is reported finding by finding; a listing that omits half the documents
//! is refused by the mass-deletion guard and changes nothing; `--fix` repairs the index
//! through the pipeline until it equals a rebuild from the log, and the metrics file says
//! so. Real model, real Qdrant Edge, the bundled sample.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use casement_store::Store;
use casement_testkit::{assert_equals_rebuild, open_store, read_log, sample_log};
use casement_text::ChangePlan;
use serde_json::Value;

fn casement(data_dir: &Path, args: &[&str]) -> Output {
    casement_with(data_dir, args, &[])
}

fn casement_with(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_casement"))
        .env_remove("CASEMENT_CONFIG")
        .envs(env.iter().copied())
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .expect("runs")
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The JSON report's findings as {doc_id: (kind, detail)}.
fn findings(output: &Output) -> BTreeMap<String, (String, String)> {
    let report: Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(output)));
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["doc_id"].as_str().unwrap().to_owned(),
                (
                    f["kind"].as_str().unwrap().to_owned(),
                    f["detail"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect()
}

#[test]
fn a_damaged_index_is_reported_refused_when_the_listing_is_short_and_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log_path = sample_log();
    let events = read_log(&log_path);
    // The documents by their last event: live ones, and deleted ones.
    let mut last = BTreeMap::new();
    for event in &events {
        last.insert(event.doc_id.clone(), event.clone());
    }
    let live: Vec<&String> = last
        .iter()
        .filter(|(_, e)| !e.is_delete())
        .map(|(d, _)| d)
        .collect();
    let deleted: Vec<&String> = last
        .iter()
        .filter(|(_, e)| e.is_delete())
        .map(|(d, _)| d)
        .collect();
    assert!(live.len() >= 4 && !deleted.is_empty(), "{last:?}");
    // One revision behind: a live page with an earlier revision in the log.
    let behind = live
        .iter()
        .copied()
        .find(|d| events.iter().filter(|e| &&e.doc_id == d).count() > 1)
        .expect("a page with two revisions");
    let others: Vec<&String> = live.iter().copied().filter(|d| *d != behind).collect();
    let (missing, wrong_window) = (others[0], others[1]);
    let left_behind = deleted[0];

    // The damaged history: the behind page's last event, every event of the missing page
    // and the left-behind page's deletion are not indexed.
    let damaged: Vec<String> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .filter(|line| {
            let event: Value = serde_json::from_str(line).unwrap();
            let (doc, revision) = (
                event["doc_id"].as_str().unwrap(),
                event["revision"].as_u64().unwrap(),
            );
            let final_event = &last[doc];
            !(doc == behind.as_str() && revision == final_event.revision
                || doc == missing.as_str()
                || doc == left_behind.as_str() && event["change"] == "delete")
        })
        .map(str::to_owned)
        .collect();
    let damaged_log = dir.path().join("damaged.jsonl");
    std::fs::write(&damaged_log, damaged.join("\n") + "\n").unwrap();
    let backfill = casement(&data, &["backfill", damaged_log.to_str().unwrap()]);
    assert!(backfill.status.success(), "{}", text(&backfill));

    // A point with a wrong window, written as a payload update at the indexed revision.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = open_store(&data, 384);
        let state = store
            .document(wrong_window.as_str())
            .await
            .unwrap()
            .unwrap();
        let mut record = store
            .records(wrong_window.as_str())
            .await
            .unwrap()
            .remove(0);
        record.window = format!("{} (and a sentence that is not there)", record.window);
        let plan = ChangePlan {
            doc_id: state.doc_id.clone(),
            revision: state.revision,
            embed: Vec::new(),
            update_payload: vec![record],
            delete: Vec::new(),
            unchanged: 0,
            document: state,
            reused_sections: 0,
            restore: false,
        };
        store.apply(&plan, &[]).await.unwrap();
        store.sync().await.unwrap();
    });

    // The audit reports each, and exits 1.
    let log_arg = log_path.to_str().unwrap();
    let report = casement(&data, &["audit", log_arg, "--json"]);
    assert_eq!(report.status.code(), Some(1), "{}", text(&report));
    let found = findings(&report);
    let kinds: BTreeMap<&str, &str> = found
        .iter()
        .map(|(doc, (kind, _))| (doc.as_str(), kind.as_str()))
        .collect();
    let expected: BTreeMap<&str, &str> = [
        (behind.as_str(), "behind"),
        (missing.as_str(), "missing"),
        (left_behind.as_str(), "orphaned"),
        (wrong_window.as_str(), "mismatched"),
    ]
    .into();
    assert_eq!(kinds, expected, "{}", text(&report));
    assert!(
        found[wrong_window.as_str()]
            .1
            .contains("1 payloads to update"),
        "{:?}",
        found[wrong_window.as_str()]
    );

    // A listing of half the live documents (at their final revisions): fixing from it
    // would delete the other half, which the guard refuses; nothing changes.
    let listing = dir.path().join("listing.jsonl");
    let half: Vec<String> = live
        .iter()
        .take(live.len() / 2)
        .map(|d| serde_json::json!({"doc_id": d, "revision": last[*d].revision}).to_string())
        .collect();
    std::fs::write(&listing, half.join("\n") + "\n").unwrap();
    let refused = casement(&data, &["audit", listing.to_str().unwrap(), "--fix"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("refusing to fix"),
        "{}",
        text(&refused)
    );
    let again = casement(&data, &["audit", log_arg, "--json"]);
    assert_eq!(findings(&again).len(), 4, "{}", text(&again));

    // --fix repairs all four through the pipeline and audits again: consistent. The
    // sample is small: its one deletion is a quarter of the index, over the default guard
    // (10%), so this run allows 25%.
    let metrics = dir.path().join("audit.prom");
    let fix_args = [
        "audit",
        log_arg,
        "--fix",
        "--metrics-file",
        metrics.to_str().unwrap(),
    ];
    let guarded = casement(&data, &fix_args);
    assert_eq!(guarded.status.code(), Some(2), "{}", text(&guarded));
    let fixed = casement_with(
        &data,
        &fix_args,
        &[("CASEMENT__AUDIT__MAX_DELETE_SHARE", "0.25")],
    );
    assert_eq!(fixed.status.code(), Some(0), "{}", text(&fixed));
    let stdout = String::from_utf8_lossy(&fixed.stdout);
    assert!(stdout.contains("after the fix:"), "{}", text(&fixed));
    assert!(
        stdout
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("consistent"),
        "{}",
        text(&fixed)
    );
    let prom = std::fs::read_to_string(&metrics).unwrap();
    for series in [
        "casement_audit_documents{finding=\"mismatched\"} 0",
        "casement_audit_fixes_total{outcome=\"sent\"} 4",
        "casement_audit_runs_total{outcome=\"inconsistent\"} 1",
        "casement_audit_fixes_total{outcome=\"refused\"} 0",
        "casement_audit_runs_total{outcome=\"consistent\"} 1",
    ] {
        assert!(prom.lines().any(|l| l == series), "{series} in:\n{prom}");
    }
    casement_testkit::metrics_doc::assert_served_as_documented(&prom, &["casement_audit_"], &[]);
    runtime.block_on(async {
        let store = open_store(&data, 384);
        assert_equals_rebuild(&store, &events, 1).await;
    });
}
