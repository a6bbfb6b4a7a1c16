//! `make run`'s path, end to end.

use std::time::Duration;

use crate::support::{Casement, Client, contains, eventually, write_config};

/// `make run`'s path: no source configured runs the bundled sample, prints the sample
/// question's answer with its citation, starts quietly (the checked-out pages are not
/// "saved" files), and follows an edit of a checked-out page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundled_sample_answers_and_follows_an_edit() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let config = write_config(dir.path(), "[sources.watch]\npoll_ms = 200\n");
    let mut casement = Casement::start(dir.path(), &config, &[]);
    let answer = casement.wait_for_line("A: ", Duration::from_secs(600));
    assert!(answer.contains("Wait up to 5 business days"), "{answer}");
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
    casement.stop();
}
