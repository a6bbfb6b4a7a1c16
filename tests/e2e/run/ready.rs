//! Ready means caught up (issue 36): after edits made while `casement run` was stopped,
//! `/readyz` answers 503 until they are searchable, and the banner waits for them too.

use std::time::Duration;

use crate::support::{Casement, Client, contains, eventually, write_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_offline_edits_is_ready_only_once_they_are_searchable() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let page =
        |code: u32| format!("# Door codes\n\nThe storage room door code is {code} this week.\n");
    std::fs::write(docs.join("codes.md"), page(1111)).unwrap();
    std::fs::write(
        docs.join("parking.md"),
        "# Parking\n\nVisitor permits come from the front desk.\n",
    )
    .unwrap();
    let config = write_config(dir.path(), "[sources.watch]\ndoc_id_prefix = \"kb:\"\n");
    let args = ["--watch", docs.to_str().unwrap()];
    let mut first = Casement::start(dir.path(), &config, &args);
    first.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = Client::new(&first.base);
    eventually(
        Duration::from_secs(30),
        "the first code indexed",
        || async {
            contains(
                &client.search("storage room door code", &["kb:codes"]).await,
                "1111",
            )
        },
    )
    .await;
    first.stop();

    // Edited while stopped.
    std::fs::write(docs.join("codes.md"), page(2222)).unwrap();
    let mut second = Casement::start(dir.path(), &config, &args);
    let client = Client::new(&second.base);
    // Poll readiness from the first moment the port answers.
    let ready = reqwest::Client::new();
    let started = std::time::Instant::now();
    let mut saw_not_ready = false;
    loop {
        match ready.get(format!("{}/readyz", second.base)).send().await {
            Ok(answer) if answer.status().is_success() => break,
            Ok(answer) => {
                let body = answer.text().await.unwrap_or_default();
                if body.contains("catching up") {
                    saw_not_ready = true;
                }
            }
            Err(_) => {}
        }
        assert!(started.elapsed() < Duration::from_secs(120), "never ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Ready: the edit made while stopped is what a search returns, at once.
    let windows = client.search("storage room door code", &["kb:codes"]).await;
    assert!(
        contains(&windows, "2222") && !contains(&windows, "1111"),
        "ready before the offline edit was applied: {windows:?}"
    );
    let banner = second.wait_for_line("Ctrl-C stops", Duration::from_secs(60));
    assert!(!banner.is_empty());
    let stderr = second.stop();
    assert!(
        saw_not_ready || stderr.contains("catching up"),
        "the catch-up was never reported:\n{stderr}"
    );
}
