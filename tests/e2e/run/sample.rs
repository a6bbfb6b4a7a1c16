//! `make run`'s path, end to end.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Casement, Client, contains, eventually, write_config};

/// `make run`'s path: no source configured runs the bundled sample, passes its golden set
/// (in the banner), prints the sample question's answer with its citation, starts quietly
/// (the checked-out pages are not "saved" files), and follows an edit of a checked-out
/// page; then a deleted page fails `casement eval` and the periodic golden-set metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundled_sample_answers_and_follows_an_edit() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = write_config(
        dir.path(),
        "[sources.watch]\npoll_ms = 200\n[eval]\ninterval_secs = 1\n",
    );
    let mut casement = Casement::start(dir.path(), &config, &[]);
    let golden = casement.wait_for_line("golden set", Duration::from_secs(600));
    assert!(
        golden.contains("golden set  10/10 passed (recall@5 1.00, MRR@5"),
        "{golden}"
    );
    // The answer is the whole list with the sentence that introduces it, numbered.
    let answer = casement.wait_for_line("A: ", Duration::from_secs(600));
    assert!(
        answer.contains("Follow these steps if your name in GSA systems"),
        "{answer}"
    );
    for step in [
        "1. Log in to HR Links",
        "2. Follow these steps.",
        "3. Wait up to 5 business days",
        "4. Once your name has been updated",
    ] {
        let line = casement.wait_for_line(step, Duration::from_secs(10));
        assert!(line.starts_with("   "), "{line}");
    }
    let citation = casement.wait_for_line("— ", Duration::from_secs(10));
    assert!(
        citation.contains("Changing your name › Changing your name across GSA"),
        "{citation}"
    );
    let client = Client::new(&casement.base);
    let doc = "18f-handbook:_pages/how-we-work/changing-your-name";
    let page = data_dir.join("docs/_pages/how-we-work/changing-your-name.md");
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("Wait up to 5 business days"));
    std::fs::write(
        &page,
        text.replace("Wait up to 5 business days", "Wait up to 10 business days"),
    )
    .unwrap();
    eventually(Duration::from_secs(60), "the edit is answered", || async {
        let windows = client
            .search("How long does a name change take?", &[doc])
            .await;
        contains(&windows, "Wait up to 10 business days")
            && !contains(&windows, "Wait up to 5 business days")
    })
    .await;
    let log = casement.stderr_text();
    assert_eq!(
        log.matches("file saved").count(),
        1,
        "only the edit is a saved file:\n{log}"
    );

    // A deleted page: `casement eval` reports its golden query as failing, the other one
    // (the edited text) passes.
    let slack = "18f-handbook:tools/slack";
    std::fs::remove_file(data_dir.join("docs/tools/slack.md")).unwrap();
    eventually(
        Duration::from_secs(60),
        "the deleted page leaves the answers",
        || async {
            client
                .search("What does TTS use Slack for?", &[slack])
                .await
                .is_empty()
        },
    )
    .await;
    let golden = dir.path().join("golden.jsonl");
    std::fs::write(
        &golden,
        format!(
            "{}\n{}\n",
            serde_json::json!({"id": "name-change", "query": "How long does a name change take in GSA systems?", "doc_id": doc, "text": "Wait up to 10 business days"}),
            serde_json::json!({"id": "slack-deleted", "query": "What does TTS use Slack for?", "doc_id": slack}),
        ),
    )
    .unwrap();
    let (code, stdout) = eval(&golden, &casement.base, &[]).await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.starts_with("golden set: 1/2 passed (recall@5 0.50, MRR@5 0.50)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL slack-deleted (line 2): \"What does TTS use Slack for?\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("expected 18f-handbook:tools/slack\n  not in the first 5"),
        "{stdout}"
    );
    assert!(!stdout.contains("FAIL name-change"), "{stdout}");
    let (code, json) = eval(&golden, &casement.base, &["--json", "--k", "3"]).await;
    assert_eq!(code, Some(1), "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (report["k"].as_u64(), report["failures"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(report["cases"][0]["rank"], 1, "{json}");
    assert!(report["cases"][1]["rank"].is_null(), "{json}");

    // The periodic run (every second here) over the sample's golden set: the two Slack
    // questions fail now; the metrics are the ones docs/metrics.md lists.
    eventually(
        Duration::from_secs(60),
        "the periodic run sees the deletion",
        || async { client.metric("casement_eval_failures").await == 2.0 },
    )
    .await;
    let (_, text) = client.get("/metrics").await;
    casement_testkit::metrics_doc::assert_served_as_documented(&text, &["casement_eval_"], &[]);
    assert_eq!(client.metric("casement_eval_queries").await, 10.0);
    assert!((client.metric("casement_eval_recall").await - 0.8).abs() < 1e-9);
    let mrr = client.metric("casement_eval_mrr").await;
    assert!(mrr > 0.0 && mrr <= 0.8, "{mrr}");
    assert!(
        client
            .metric("casement_eval_runs_total{outcome=\"failed\"}")
            .await
            >= 1.0
    );
    assert!(
        client
            .metric("casement_eval_runs_total{outcome=\"passed\"}")
            .await
            >= 1.0
    );
    assert!(
        client
            .metric("casement_eval_last_run_timestamp_seconds")
            .await
            > 1.7e9
    );
    casement.stop();
}

/// `casement eval GOLDEN --url BASE ARGS…`: its exit code and stdout.
async fn eval(golden: &Path, base: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut command = std::process::Command::new(crate::support::casement_bin());
    command
        .env_remove("CASEMENT_CONFIG")
        .arg("eval")
        .arg(golden)
        .args(["--url", base])
        .args(args);
    let output = tokio::task::spawn_blocking(move || command.output().expect("casement eval"))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "casement eval wrote to stderr: {stderr}");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}
