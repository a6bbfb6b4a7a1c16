//! A private MediaWiki with only its Action API (issue 40), through the real binary:
//! `casement run` polls the stand-in wiki's recent changes (`casement_testkit::wiki`, on
//! loopback, serving real Wikipedia wikitext) behind a bot-password login, and fetches
//! each revision through the same login. Through creations and edits, a move, a delete and
//! a restore, a protection, a move into a namespace restricted to a group, an expired
//! session, a restart with a change in the same second as the last one indexed, and a gap
//! past the wiki's recentchanges retention (reported, then repaired by `casement audit
//! --wiki --fix`), the index ends equal to a rebuild of the pages' current revisions after
//! each step.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use casement_inference::Embed;
use casement_store::Store;
use casement_testkit::open_store;
use casement_testkit::wiki::{WikiRevision, WikiStandIn};

use casement_text::{Access, Format, Revision, TextConfig, plan_upsert};
use serde_json::Value;

use crate::support::{Casement, Client, eventually, write_config};

const WIKI: &str = "standinwiki";
const STAFF: i64 = 100;

fn doc_id(page_id: u64) -> String {
    format!("{WIKI}:{page_id}")
}

/// Each page as the wiki has it now: its revision, namespace (none: deleted).
#[derive(Default)]
struct Pages(BTreeMap<u64, Option<(WikiRevision, i64)>>);

impl Pages {
    fn set(&mut self, revision: &WikiRevision, namespace: i64) {
        self.0
            .insert(revision.page_id, Some((revision.clone(), namespace)));
    }
}

/// Real wikitext: the shortest pages of the repository's Wikipedia fixtures.
fn real_pages(n: usize) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/text/tests/fixtures/wikitext/pages.jsonl.gz");
    let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(
        std::fs::File::open(path).expect("wikitext fixtures"),
    ));
    let mut pages: Vec<(String, String)> = reader
        .lines()
        .map(|line| serde_json::from_str::<Value>(&line.expect("line")).expect("json"))
        .filter(|page| page["lang"] == "en")
        .map(|page| {
            (
                page["title"].as_str().unwrap_or("").to_owned(),
                page["wikitext"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    pages.sort_by_key(|(_, text)| text.len());
    pages.into_iter().take(n).collect()
}

/// Opens the index of a stopped service and compares every page with a fresh plan of
/// its current revision (ids, payloads, windows, title, url, revision url and access).
async fn assert_equals_rebuild(data: &Path, pages: &Pages, step: &str) {
    let store = open_store(data, casement_testkit::model().dimension());
    for (page_id, current) in &pages.0 {
        let mut stored = store.records(doc_id(*page_id).as_str()).await.unwrap();
        stored.sort_by_key(|r| r.id);
        let Some((revision, namespace)) = current else {
            assert!(stored.is_empty(), "{step}: page {page_id} deleted");
            continue;
        };
        let rebuilt = Revision {
            access: (*namespace == STAFF).then(|| Access::groups(["staff".to_owned()])),
            metadata: Default::default(),
            doc_id: doc_id(*page_id),
            revision: revision.rev_id,
            title: Some(revision.title.clone()),
            url: Some(format!(
                "https://wiki.example/wiki/{}",
                revision.title.replace(' ', "_")
            )),
            tenant: None,
            format: Format::Wikitext,
            content: revision.content.clone(),
            revision_url: Some(format!(
                "https://wiki.example/w/index.php?oldid={}",
                revision.rev_id
            )),
        };
        let (plan, _) = plan_upsert(&[], &rebuilt, &TextConfig::default()).unwrap();
        let mut expected = plan.embed;
        expected.sort_by_key(|r| r.id);
        assert!(!expected.is_empty(), "{step}: page {page_id} has sentences");
        assert_eq!(stored, expected, "{step}: page {page_id}");
    }
}

/// Waits until the service holds every page at its current revision (or deleted), and
/// answers that revision's address.
async fn wait_indexed(client: &Client, pages: &Pages, what: &str) {
    eventually(Duration::from_secs(300), what, || async {
        for (page_id, current) in &pages.0 {
            let (status, body) = client
                .get(&format!("/v1/documents/{}", doc_id(*page_id)))
                .await;
            let answer: Value = serde_json::from_str(&body).unwrap_or_default();
            let ok = match current {
                Some((revision, _)) => {
                    status == 200
                        && answer["revision"] == revision.rev_id
                        && answer["deleted"] == false
                        // The API cites the exact revision the answer was read from.
                        && answer["revision_url"]
                            == format!(
                                "https://wiki.example/w/index.php?oldid={}",
                                revision.rev_id
                            )
                            .as_str()
                }
                None => status == 404 || answer["deleted"] == true,
            };
            if !ok {
                return false;
            }
        }
        true
    })
    .await;
}

fn start(dir: &Path, config: &Path) -> (Casement, Client) {
    let mut run = Casement::start(dir, config, &[]);
    run.wait_for_line("polling the recent changes", Duration::from_secs(300));
    let client = Client::new(&run.base);
    (run, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_a_private_wiki_through_moves_deletes_logins_restarts_and_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let wiki = WikiStandIn::start().await;
    wiki.require_bot_password("Casement@indexer", "bot-password-0123");
    let config = write_config(
        dir.path(),
        &format!(
            r#"[sources.mediawiki]
api_url = "{}"
poll_interval_ms = 200
namespaces = [0, {STAFF}]
[fetch]
user_agent = "CasementE2E/1.0 (https://casement.example; ops@casement.example)"
requests_per_second = 100
[fetch.auth]
username = "Casement@indexer"
password = "bot-password-0123"
[access.mediawiki_namespaces]
"{STAFF}" = ["staff"]
"#,
            wiki.api_url
        ),
    );
    let texts = real_pages(12);
    let mut pages = Pages::default();
    let edited = |text: &str, n: usize| {
        format!("{text}\n\n== Review ==\nThis page was reviewed {n} times by the support team.")
    };

    // 1. Creations and edits of real pages, polled after the login.
    let (run, client) = start(dir.path(), &config);
    assert!(wiki.login_attempts() >= 1, "logged in");
    for (i, (title, text)) in texts.iter().enumerate() {
        let revision = wiki.edit(i as u64 + 1, 0, title, text);
        pages.set(&revision, 0);
    }
    for page in [1, 2] {
        let (title, text) = &texts[page as usize - 1];
        pages.set(&wiki.edit(page, 0, title, &edited(text, 1)), 0);
    }
    wait_indexed(&client, &pages, "creations and edits").await;
    assert_eq!(wiki.refused(), 0, "every request logged in");

    // 2. The session expires; then a move, a delete and a restore, a delete, a
    // protection, and a move into the namespace only staff may read.
    wiki.expire_sessions();
    let logins = wiki.login_attempts();
    // A move and a protection add a null revision (the same text), as MediaWiki does.
    let renamed = format!("{} (archived)", texts[0].0);
    pages.set(&wiki.rename(1, 0, &renamed), 0);
    wiki.delete(2);
    wiki.restore(2);
    // A deletion that stays: its recent change names no page (pageid 0, as MediaWiki's
    // do); the poller reads the page from the log.
    wiki.delete(7);
    pages.0.insert(7, None);
    pages.set(&wiki.protect(3), 0);
    let staff_title = format!("Staff:{}", texts[3].0);
    pages.set(&wiki.rename(4, STAFF, &staff_title), STAFF);
    eventually(
        Duration::from_secs(60),
        "a login after the expiry",
        || async { wiki.login_attempts() > logins },
    )
    .await;
    wait_indexed(&client, &pages, "the move, delete, restore and protect").await;
    // The staff page's access (its namespace's groups) is in the rebuild's comparison.
    run.stop();
    assert_equals_rebuild(&data, &pages, "after the log events").await;

    // 3. A restart with a change in the same second as the last one indexed: that one is
    // not fetched again, the new one is.
    let second = wiki.now();
    wiki.freeze_clock(Some(second));
    let (run, client) = start(dir.path(), &config);
    let (title, text) = &texts[2];
    let a = wiki.edit(3, 0, title, &edited(text, 2));
    pages.set(&a, 0);
    wait_indexed(&client, &pages, "the change before the restart").await;
    run.stop();
    let (title, text) = &texts[4];
    let b = wiki.edit(5, 0, title, &edited(text, 2));
    pages.set(&b, 0);
    let fetched = wiki.requests().len();
    let (run, client) = start(dir.path(), &config);
    wait_indexed(&client, &pages, "the change in the same second").await;
    let after: Vec<Vec<u64>> = wiki.requests()[fetched..].to_vec();
    assert_eq!(
        after.concat(),
        vec![b.rev_id],
        "only the new change fetched"
    );
    wiki.freeze_clock(None);
    run.stop();
    assert_equals_rebuild(&data, &pages, "after the restart").await;

    // 4. While the service is stopped, changes older than the wiki keeps: the gap is
    // reported, polling goes on from what the wiki holds, and the audit against the
    // wiki's own listing repairs what was missed.
    let (title, text) = &texts[0];
    let missed = wiki.edit(1, 0, &format!("{title} (archived)"), &edited(text, 3));
    pages.set(&missed, 0);
    wiki.delete(6);
    pages.0.insert(6, None);
    wiki.forget_changes_through(wiki.last_rcid());
    let (title, text) = &texts[1];
    let kept = wiki.edit(2, 0, title, &edited(text, 3));
    pages.set(&kept, 0);
    let (run, client) = start(dir.path(), &config);
    eventually(Duration::from_secs(60), "the gap reported", || async {
        run.stderr_text().contains("no longer holds the changes")
    })
    .await;
    eventually(
        Duration::from_secs(120),
        "the change after the gap",
        || async {
            let (_, body) = client.get(&format!("/v1/documents/{}", doc_id(2))).await;
            serde_json::from_str::<Value>(&body).unwrap_or_default()["revision"] == kept.rev_id
        },
    )
    .await;
    assert_eq!(
        client.metric("casement_mediawiki_poll_gaps_total").await,
        1.0
    );
    run.stop();
    let audit = Command::new(crate::support::casement_bin())
        .env_remove("CASEMENT_CONFIG")
        .args([
            "--config",
            config.to_str().unwrap(),
            "audit",
            "--wiki",
            "--fix",
        ])
        .output()
        .expect("casement audit");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&audit.stdout),
        String::from_utf8_lossy(&audit.stderr)
    );
    assert_eq!(audit.status.code(), Some(0), "{said}");
    assert!(
        said.contains("behind") && said.contains("orphaned"),
        "{said}"
    );
    assert_equals_rebuild(&data, &pages, "after the audit").await;
    assert!(
        !said.contains("bot-password-0123"),
        "the password was printed"
    );
}
