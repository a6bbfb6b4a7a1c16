//! `casement audit` (issue 21, reconcile and audit): an index damaged four ways (a page
//! one revision behind, a page missing, a deleted page's points left behind, a point with
//! a wrong window) is reported finding by finding; a listing that omits half the documents
//! is refused by the mass-deletion guard and changes nothing; `--fix` repairs the index
//! through the pipeline until it equals a rebuild from the log, and the metrics file says
//! so. `casement run` with `[audit]` does the same periodically, on /metrics. Real model,
//! real Qdrant Edge, the bundled sample.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

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
    Command::new(crate::support::casement_bin())
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

/// The bundled sample's log, and a damaged copy of it: the `behind` page's last event,
/// every event of the `missing` page and the `left_behind` page's deletion are left out.
struct Damaged {
    log_path: std::path::PathBuf,
    events: Vec<casement_events::revision_log::LogEvent>,
    damaged_log: std::path::PathBuf,
    behind: String,
    missing: String,
    left_behind: String,
    /// A page the damage leaves alone (the first test gives one point a wrong window).
    intact: String,
    /// The pages alive at the end of the log.
    live: Vec<String>,
    /// Each document's last event.
    last: BTreeMap<String, casement_events::revision_log::LogEvent>,
}

fn damaged_sample(dir: &Path) -> Damaged {
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
    let damaged_log = dir.join("damaged.jsonl");
    std::fs::write(&damaged_log, damaged.join("\n") + "\n").unwrap();
    Damaged {
        behind: behind.clone(),
        missing: missing.clone(),
        left_behind: left_behind.clone(),
        intact: wrong_window.clone(),
        live: live.iter().map(|d| (*d).clone()).collect(),
        log_path,
        events,
        damaged_log,
        last,
    }
}

#[test]
fn a_damaged_index_is_reported_refused_when_the_listing_is_short_and_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let Damaged {
        log_path,
        events,
        damaged_log,
        behind,
        missing,
        left_behind,
        intact: wrong_window,
        live,
        last,
    } = damaged_sample(dir.path());
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
        .map(|d| {
            serde_json::json!({"doc_id": d, "revision": last[d.as_str()].revision}).to_string()
        })
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

/// `casement run` with `[audit] source` and `fix`: the index a damaged replay leaves is
/// audited once the replay is indexed, the repairs go through the running pipeline, the
/// next audit finds it consistent, and the metrics say so on /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_audits_periodically_and_repairs() {
    let dir = tempfile::tempdir().unwrap();
    let damaged = damaged_sample(dir.path());
    let config = support::write_config(
        dir.path(),
        &format!(
            "[sources.webhook]\nenabled = false\n[audit]\nsource = \"{}\"\ninterval_secs = 1\nfix = true\nmax_delete_share = 0.5\n",
            damaged.log_path.display()
        ),
    );
    let mut casement = support::Casement::start(
        dir.path(),
        &config,
        &["--replay", damaged.damaged_log.to_str().unwrap()],
    );
    casement.wait_for_line("Ctrl-C stops", std::time::Duration::from_secs(120));
    let client = support::Client::new(&casement.base);
    support::eventually(
        std::time::Duration::from_secs(60),
        "an audit after the repairs finds the index consistent",
        || async {
            client
                .metric("casement_audit_runs_total{outcome=\"consistent\"}")
                .await
                >= 1.0
        },
    )
    .await;
    let (_, metrics) = client.get("/metrics").await;
    for series in [
        "casement_audit_fixes_total{outcome=\"sent\"} 3",
        "casement_audit_fixes_total{outcome=\"refused\"} 0",
        "casement_audit_documents{finding=\"missing\"} 0",
        "casement_audit_documents{finding=\"orphaned\"} 0",
        "casement_source_events_total{source=\"audit\"} 3",
    ] {
        assert!(
            metrics.lines().any(|l| l == series),
            "{series} in:\n{metrics}"
        );
    }
    assert!(
        client
            .metric("casement_audit_runs_total{outcome=\"inconsistent\"}")
            .await
            >= 1.0
    );
    casement_testkit::metrics_doc::assert_served_as_documented(&metrics, &["casement_audit_"], &[]);
    let stderr = casement.stop();
    assert!(
        stderr.contains("audit: the index does not match")
            && stderr.contains("1 missing, 1 behind"),
        "{stderr}"
    );
    let store = open_store(&dir.path().join("data"), 384);
    assert_equals_rebuild(&store, &damaged.events, 1).await;
}
