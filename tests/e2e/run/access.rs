//! Who may read what, through the binary (issue 39): one index of a watched wiki, a
//! customer bot's key (public pages only), a staff bot's key, and a person's token for
//! someone in hr. A page moved from public to hr (its front matter, then a folder's
//! `.access` file) leaves the customer's answers within the freshness target and stays
//! findable for hr; `min_revision` and `/v1/documents` leak nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Casement, OPERATOR_KEY, OPERATOR_KEYS, eventually, write_config};

const CUSTOMER: &str = "customer-bot-key-0123456";
const STAFF: &str = "staff-bot-key-0123456789";
const SECRET: &str = "an-hs256-secret-for-the-e2e-test-0123";

fn token(groups: &[&str]) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": "dana", "groups": groups, "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

struct Reader {
    http: reqwest::Client,
    base: String,
    key: &'static str,
    user: Option<String>,
}

impl Reader {
    fn request(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request.bearer_auth(self.key);
        match &self.user {
            Some(user) => request.header("X-Casement-User", user),
            None => request,
        }
    }

    async fn search(&self, body: Value) -> (u16, Value) {
        let response = self
            .request(
                self.http
                    .post(format!("{}/v1/search", self.base))
                    .json(&body),
            )
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The documents a search for `query` answers with.
    async fn finds(&self, query: &str) -> Vec<String> {
        let (status, answer) = self
            .search(json!({"query": query, "top_k": 10, "rerank": false}))
            .await;
        assert_eq!(status, 200, "{answer}");
        let mut docs: Vec<String> = answer["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["doc_id"].as_str().unwrap().to_owned())
            .collect();
        docs.sort();
        docs.dedup();
        docs
    }

    async fn document(&self, path: &str) -> (u16, String) {
        let response = self
            .request(self.http.get(format!("{}{path}", self.base)))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const LEAVE: &str = "Parental leave lasts sixteen weeks at full pay, code LEAVE-5521.";
const PAY: &str = "Salary bands are reviewed every March, code PAY-8830.";
const VPN: &str = "The VPN client is installed from the self-service portal, code VPN-1207.";
const TRAVEL: &str = "Book travel at least two weeks ahead, code TRAVEL-4410.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_moved_to_hr_leaves_the_customers_answers_and_stays_for_hr() {
    let dir = tempfile::tempdir().unwrap();
    let wiki = dir.path().join("wiki");
    write(&wiki.join(".access"), "public\n");
    write(&wiki.join("hr/.access"), "# HR and its staff\nhr\n");
    write(
        &wiki.join("handbook/leave.md"),
        &format!("---\ntitle: Leave\n---\n\n# Leave\n\n{LEAVE}\n"),
    );
    write(&wiki.join("hr/pay.md"), &format!("# Pay\n\n{PAY}\n"));
    write(
        &wiki.join("it/vpn.md"),
        &format!("---\naccess: [it, staff]\n---\n\n# VPN\n\n{VPN}\n"),
    );
    write(
        &wiki.join("handbook/travel.md"),
        &format!("# Travel\n\n{TRAVEL}\n"),
    );
    let config = write_config(
        dir.path(),
        &format!(
            "[sources.watch]\npoll_ms = 100\ndoc_id_prefix = \"wiki:\"\n\
             [auth.jwt]\nsecret = \"{SECRET}\"\n\
             [[auth.keys]]\ntoken = \"{CUSTOMER}\"\nname = \"customer-bot\"\ngroups = []\n\
             [[auth.keys]]\ntoken = \"{STAFF}\"\nname = \"staff-bot\"\ngroups = [\"hr\", \"it\", \"staff\"]\n\
             {OPERATOR_KEYS}"
        ),
    );
    let mut casement = Casement::start(dir.path(), &config, &["--watch", wiki.to_str().unwrap()]);
    casement.wait_for_line("Ctrl-C stops", Duration::from_secs(120));
    let reader = |key: &'static str, user: Option<String>| Reader {
        http: reqwest::Client::new(),
        base: casement.base.clone(),
        key,
        user,
    };
    let customer = reader(CUSTOMER, None);
    let staff = reader(STAFF, None);
    let hr_person = reader(STAFF, Some(token(&["hr"])));
    let operator = reader(OPERATOR_KEY, None);
    eventually(
        Duration::from_secs(60),
        "the four pages indexed",
        || async {
            for (text, doc) in [
                (LEAVE, "wiki:handbook/leave"),
                (PAY, "wiki:hr/pay"),
                (VPN, "wiki:it/vpn"),
                (TRAVEL, "wiki:handbook/travel"),
            ] {
                if !operator.finds(text).await.contains(&doc.to_owned()) {
                    return false;
                }
            }
            true
        },
    )
    .await;

    let (leave, pay, vpn) = ("wiki:handbook/leave", "wiki:hr/pay", "wiki:it/vpn");
    assert!(customer.finds(LEAVE).await.contains(&leave.to_owned()));
    assert!(
        !customer.finds(PAY).await.contains(&pay.to_owned()),
        "hr/.access"
    );
    assert!(
        !customer.finds(VPN).await.contains(&vpn.to_owned()),
        "front matter"
    );
    assert!(staff.finds(PAY).await.contains(&pay.to_owned()));
    assert!(staff.finds(VPN).await.contains(&vpn.to_owned()));
    // The person in hr, through the staff bot: hr's pages, not it's.
    assert!(hr_person.finds(PAY).await.contains(&pay.to_owned()));
    assert!(!hr_person.finds(VPN).await.contains(&vpn.to_owned()));

    // The leave page moves from public to hr (its front matter): gone from the customer's
    // answers within the freshness target, still there for hr.
    let saved = Instant::now();
    write(
        &wiki.join("handbook/leave.md"),
        &format!("---\ntitle: Leave\naccess: [hr]\n---\n\n# Leave\n\n{LEAVE}\n"),
    );
    eventually(
        Duration::from_secs(30),
        "the leave page hidden from the customer",
        || async { !customer.finds(LEAVE).await.contains(&leave.to_owned()) },
    )
    .await;
    let took = saved.elapsed();
    eprintln!("revocation visible after {took:?}");
    assert!(took < Duration::from_secs(5), "revocation took {took:?}");
    assert!(hr_person.finds(LEAVE).await.contains(&leave.to_owned()));

    // A folder's `.access`: the travel page (no front matter) becomes staff only.
    write(&wiki.join("handbook/.access"), "staff\n");
    eventually(
        Duration::from_secs(30),
        "the travel page hidden from the customer",
        || async {
            !customer
                .finds(TRAVEL)
                .await
                .contains(&"wiki:handbook/travel".to_owned())
        },
    )
    .await;
    assert!(
        staff
            .finds(TRAVEL)
            .await
            .contains(&"wiki:handbook/travel".to_owned())
    );

    // `/v1/documents` and `min_revision`: an unreadable page is one never indexed.
    for path in [
        format!("/v1/documents/{pay}"),
        format!("/v1/documents/{pay}/text"),
    ] {
        let (status, body) = customer.document(&path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(
            !body.contains("PAY-8830") && !body.contains("Pay"),
            "{body}"
        );
        let (status, body) = hr_person.document(&path).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, state) = operator.document(&format!("/v1/documents/{pay}")).await;
    assert_eq!(status, 200);
    let revision = serde_json::from_str::<Value>(&state).unwrap()["revision"]
        .as_u64()
        .unwrap();
    let (status, answer) = customer
        .search(json!({"query": "travel", "min_revision": {pay: revision}}))
        .await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["indexed_revision"], 0, "{answer}");
    // Word for word what a document never indexed answers.
    let (status, never) = customer
        .search(json!({"query": "travel", "min_revision": {"wiki:hr/never": revision}}))
        .await;
    assert_eq!(status, 409);
    assert_eq!(
        answer.to_string().replace(pay, "wiki:hr/never"),
        never.to_string(),
        "an unreadable page answers as one never indexed"
    );

    // The admin routes are the operator's: a bot key with groups is refused.
    let (status, _) = staff.document("/v1/admin/deletes").await;
    assert_eq!(status, 403);
    let (status, _) = operator.document("/v1/admin/deletes").await;
    assert_eq!(status, 200);
    // A reader's key writes nothing: the webhook refuses it.
    let posted = staff
        .request(staff.http.post(format!("{}/v1/events", staff.base)))
        .json(
            &json!({"type": "upsert", "doc_id": "wiki:hr/pay", "revision": 99, "format": "markdown",
                      "content": "# Pay\n\nAll public now.\n", "access": {"public": true}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status().as_u16(), 403);
    // A bad token is a 401, not the bot's own groups.
    let forged = reader(STAFF, Some(format!("{}x", token(&["hr"]))));
    let (status, answer) = forged.search(json!({"query": "pay"})).await;
    assert_eq!(status, 401, "{answer}");
    casement.stop();
}
