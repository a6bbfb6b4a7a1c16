//! The mass-deletion guard through the binary (issue 36): a mistyped watched folder fails
//! the start; a folder that empties itself keeps every document, reports the hold and
//! deletes them once an operator releases it; a normal delete of one file is immediate.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Casement, Client, OPERATOR_KEY, OPERATOR_KEYS, eventually, write_config};

#[test]
fn a_mistyped_watched_folder_fails_the_start_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("dosc");
    let output = Command::new(crate::support::casement_bin())
        .env_remove("CASEMENT_CONFIG")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["run", "--listen", "127.0.0.1:0", "--watch"])
        .arg(&typo)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&typo.display().to_string()) && stderr.contains("must exist"),
        "{stderr}"
    );
}

async fn state(client: &Client, doc_id: &str) -> (u16, Value) {
    let (status, body) = client.get(&format!("/v1/documents/{doc_id}")).await;
    (status, serde_json::from_str(&body).unwrap_or_default())
}

async fn live(client: &Client, doc_id: &str) -> bool {
    let (status, body) = state(client, doc_id).await;
    status == 200 && body["deleted"] == false
}

/// `n` pages in `<docs>/pages/`.
fn write_pages(docs: &Path, n: usize) {
    let pages = docs.join("pages");
    std::fs::create_dir_all(&pages).unwrap();
    for i in 0..n {
        std::fs::write(
            pages.join(format!("page-{i:02}.md")),
            format!("# Page {i}\n\nPage {i} explains how to reset badge number {i}.\n"),
        )
        .unwrap();
    }
}

/// The folder empties at once, as an unmount does: `pages/` renamed out of it in one step.
/// Removing the files one by one instead lets a scan see the folder half empty, and the
/// guard rightly applies deletes of documents indexed within its window.
fn empty_at_once(docs: &Path) {
    std::fs::rename(docs.join("pages"), docs.with_file_name("unmounted")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_folder_keeps_its_documents_until_an_operator_releases_them() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    write_pages(&docs, 20);
    let config = write_config(
        dir.path(),
        &format!("[sources.watch]\npoll_ms = 100\ndoc_id_prefix = \"kb:\"\n{OPERATOR_KEYS}"),
    );
    let mut casement = Casement::start(dir.path(), &config, &["--watch", docs.to_str().unwrap()]);
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let client = Client::with_key(&casement.base, OPERATOR_KEY);
    let pages: Vec<String> = (0..20).map(|i| format!("kb:pages/page-{i:02}")).collect();
    eventually(Duration::from_secs(60), "20 pages indexed", || async {
        for page in &pages {
            if !live(&client, page).await {
                return false;
            }
        }
        true
    })
    .await;

    // One file removed: its document goes at once.
    std::fs::remove_file(docs.join("pages/page-00.md")).unwrap();
    eventually(Duration::from_secs(30), "page 0 deleted", || async {
        !live(&client, &pages[0]).await
    })
    .await;

    // The folder empties itself (a volume unmounted, a ConfigMap not synced): the watcher
    // holds every document still live in it, the 19.
    empty_at_once(&docs);
    let held = "casement_source_deletes_held{source=\"watch\"}";
    eventually(Duration::from_secs(30), "the hold reported", || async {
        client.metric(held).await >= 19.0
    })
    .await;
    // Several scans later: every document not let through is still there.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let count = client.metric(held).await as usize;
    let mut gone = 0;
    for page in &pages[1..] {
        if !live(&client, page).await {
            gone += 1;
        }
    }
    assert!(count == 19 && gone == 0, "{count} held, {gone} deleted");
    let (status, body) = client.get("/v1/admin/deletes").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["held"], count);

    // Without the operator's key the release is refused; with it (`casement
    // release-deletes`), they are deleted.
    let (status, _) = Client::new(&casement.base)
        .post_raw("/v1/admin/deletes/release", Vec::new())
        .await;
    assert_eq!(status, 401);
    let release = Command::new(crate::support::casement_bin())
        .env_remove("CASEMENT_CONFIG")
        .env("CASEMENT_API_KEY", OPERATOR_KEY)
        .args(["release-deletes", "--url", &casement.base])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&release.stdout);
    assert!(
        release.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&release.stderr)
    );
    assert!(said.contains(&format!("released: {count}")), "{said}");
    eventually(Duration::from_secs(60), "the 19 pages deleted", || async {
        for page in &pages[1..] {
            if live(&client, page).await {
                return false;
            }
        }
        true
    })
    .await;
    assert_eq!(client.metric(held).await, 0.0);
    let stderr = casement.stop();
    assert_eq!(
        stderr.matches("taken as not mounted").count(),
        1,
        "the hold is logged once:\n{stderr}"
    );
}
