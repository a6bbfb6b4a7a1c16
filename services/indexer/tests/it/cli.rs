//! The indexer binary: help, the dry run over the bundled sample, and configuration errors.

use std::path::PathBuf;
use std::process::Command;

use casement_indexer::IndexerConfig;

fn indexer() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_casement-indexer"));
    command.env_remove("CASEMENT_INDEXER_CONFIG");
    command
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn help_lists_the_commands() {
    let output = indexer().arg("--help").output().expect("runs");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert!(
        help.contains("dry-run") && help.contains("check-config"),
        "{help}"
    );
}

#[test]
fn dry_run_replays_the_bundled_sample() {
    let output = indexer()
        .args(["dry-run", "--quiet"])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("56 events: 56 applied, 0 stale, 0 rejected, 2 deletes; 4 documents"),
        "{stdout}"
    );
    assert!(
        stdout.contains("sentence:") && stdout.contains("window:"),
        "shows example points: {stdout}"
    );
}

#[test]
fn bad_lines_are_reported_and_the_rest_is_indexed() {
    let log = std::env::temp_dir().join(format!("casement-bad-log-{}.jsonl", std::process::id()));
    let good = r##"{"doc_id":"a","revision":1,"title":"A","format":"markdown","content":"# A\n\nOne. Two.","change":"create"}"##;
    std::fs::write(&log, format!("{good}\nnot json\n{{\"doc_id\":\"b\"}}\n")).expect("write");
    let output = indexer().arg("dry-run").arg(&log).output().expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert!(
        stdout.contains("rejected line 2: expected ident"),
        "{stdout}"
    );
    assert!(
        stdout.contains("rejected line 3: missing field `revision`"),
        "{stdout}"
    );
    assert!(
        stdout.contains("3 events: 1 applied, 0 stale, 2 rejected"),
        "{stdout}"
    );
}

#[test]
fn a_broken_config_fails_at_start_with_its_reason() {
    let config =
        std::env::temp_dir().join(format!("casement-bad-config-{}.toml", std::process::id()));
    std::fs::write(&config, "[text]\nwindow_radios = 2\n").expect("write");
    let output = indexer()
        .arg("--config")
        .arg(&config)
        .arg("check-config")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("unknown field `window_radios`"), "{stderr}");

    let output = indexer()
        .env("CASEMENT_INDEXER__TEXT__MAX_SENTENCE_TOKENS", "2")
        .arg("check-config")
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("max_sentence_tokens = 2 is too small")
    );

    // `run` checks the same way before touching Kafka, the model or the store.
    for (key, value, message) in [
        ("CASEMENT_INDEXER__PIPELINE__LANES", "0", "pipeline.lanes"),
        (
            "CASEMENT_INDEXER__KAFKA__TOPIC",
            " ",
            "kafka.topic must not be empty",
        ),
        (
            "CASEMENT_INDEXER__ENRICH__MODE",
            "llm-ish",
            "unknown variant `llm-ish`",
        ),
        (
            "CASEMENT_INDEXER__ADMIN__LISTEN",
            "nowhere",
            "expected host:port",
        ),
    ] {
        let output = indexer().env(key, value).arg("run").output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{key}={value}");
        assert!(stderr.contains(message), "{key}={value}: {stderr}");
    }
}

#[test]
fn check_config_prints_no_secret() {
    let config = std::env::temp_dir().join(format!(
        "casement-secret-config-{}.toml",
        std::process::id()
    ));
    std::fs::write(
        &config,
        "[kafka.properties]\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"PLAIN\"\n\"sasl.username\" = \"bot\"\n\"sasl.password\" = \"kafka-pass-0123\"\n\"sasl.oauthbearer.client.secret\" = \"oidc-secret-0123\"\n\"ssl.key.password\" = \"tls-key-pass-0123\"\n[store.server]\nurl = \"https://qdrant.example:6334\"\nca_file = \"/etc/casement/qdrant-ca.pem\"\n[fetch.auth]\nusername = \"Casement@indexer\"\npassword = \"wiki-bot-pass-0123\"\n",
    )
    .expect("write");
    let output = indexer()
        .env("CASEMENT_INDEXER__ENRICH__LLM__API_KEY", "sk-llm-key-0123")
        .env(
            "CASEMENT_INDEXER__STORE__SERVER__API_KEY",
            "qdrant-key-0123",
        )
        .arg("--config")
        .arg(&config)
        .arg("check-config")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for secret in [
        "kafka-pass-0123",
        "oidc-secret-0123",
        "tls-key-pass-0123",
        "wiki-bot-pass-0123",
        "sk-llm-key-0123",
        "qdrant-key-0123",
    ] {
        assert!(!stdout.contains(secret), "{secret} printed:\n{stdout}");
    }
    assert_eq!(stdout.matches("\"<redacted>\"").count(), 6, "{stdout}");
    assert!(stdout.contains("\"sasl.username\" = \"bot\""), "{stdout}");
    // A CA file is a path, not a secret.
    assert!(stdout.contains("/etc/casement/qdrant-ca.pem"), "{stdout}");

    // The printed config used as a config is refused: the placeholder is no credential.
    std::fs::write(&config, stdout.as_bytes()).expect("write");
    let output = indexer()
        .arg("--config")
        .arg(&config)
        .arg("check-config")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("what check-config prints"),
        "{stderr}"
    );
}

#[test]
fn a_wrong_type_names_the_key_and_line() {
    let config =
        std::env::temp_dir().join(format!("casement-type-config-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        "[text]\nlanguage = \"en\"\nwindow_radius = \"three\"\n",
    )
    .expect("write");
    let output = indexer()
        .arg("--config")
        .arg(&config)
        .arg("check-config")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("`text.window_radius`") && stderr.contains(", line 3"),
        "{stderr}"
    );
}

#[test]
fn the_example_config_is_the_defaults() {
    let path = repo().join("deploy/indexer.example.toml");
    let example: IndexerConfig =
        casement_config::load(Some(&path), "UNUSED", []).expect("example loads");
    assert_eq!(example, IndexerConfig::default());
}

/// `replay` publishes the bundled revision log to the topic as native events, keyed by
/// `doc_id`, in order per document (against librdkafka's mock cluster).
#[test]
fn replay_publishes_a_revision_log_as_native_events() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{ClientConfig, Message};

    let cluster = rdkafka::mocking::MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("changes", 1, 1).expect("topic");
    let output = indexer()
        .env(
            "CASEMENT_INDEXER__KAFKA__BOOTSTRAP_SERVERS",
            cluster.bootstrap_servers(),
        )
        .env("CASEMENT_INDEXER__KAFKA__TOPIC", "changes")
        .arg("replay")
        .arg(repo().join("sample/18f-handbook/revisions.jsonl"))
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("published 56 events to changes"),
        "{stderr}"
    );

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("group.id", "cli-test")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&["changes"]).expect("subscribe");
    let mut revisions: std::collections::HashMap<String, u64> = Default::default();
    let mut count = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while count < 56 && std::time::Instant::now() < deadline {
        let Some(Ok(message)) = consumer.poll(std::time::Duration::from_millis(200)) else {
            continue;
        };
        count += 1;
        let event: serde_json::Value =
            serde_json::from_slice(message.payload().expect("payload")).expect("json");
        let key = String::from_utf8(message.key().expect("key").to_vec()).expect("utf-8");
        assert_eq!(event["doc_id"], key.as_str(), "key = doc_id");
        assert!(matches!(event["type"].as_str(), Some("upsert" | "delete")));
        let revision = event["revision"].as_u64().expect("revision");
        let previous = revisions.insert(key, revision).unwrap_or(0);
        assert!(revision > previous, "in order per document");
    }
    assert_eq!(count, 56);
}

/// A private wiki behind EventBus on Kafka: the indexer asks it once at start with
/// `[fetch.auth]`'s login. No login, or a refused one, stops `run` with the reason before
/// Kafka is touched (not a stream of failed fetches later); the right password goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiki_that_refuses_to_let_the_indexer_read_stops_the_start() {
    use casement_testkit::wiki::WikiStandIn;
    let wiki = WikiStandIn::start().await;
    wiki.require_bot_password("Casement@indexer", "right-password");
    let dir = tempfile::tempdir().expect("temp dir");
    // Nothing listens on port 9: the check comes first, or the run would wait for Kafka.
    let mut config = crate::support::config("127.0.0.1:9", "pages", "indexer", dir.path());
    config.fetch.api_url = wiki.api_url.clone();
    let file = dir.path().join("indexer.toml");
    std::fs::write(&file, toml::to_string(&config).expect("toml")).expect("write");
    let run = |auth: &[(&str, &str)]| {
        let mut command = indexer();
        command.arg("--config").arg(&file).arg("run");
        for (key, value) in auth {
            command.env(key, value);
        }
        command
    };
    const USER: &str = "CASEMENT_INDEXER__FETCH__AUTH__USERNAME";
    const PASSWORD: &str = "CASEMENT_INDEXER__FETCH__AUTH__PASSWORD";
    for (auth, message) in [
        (
            &[][..],
            "the wiki lets only logged-in users read (readapidenied): set [fetch.auth]",
        ),
        (
            &[(USER, "Casement@indexer"), (PASSWORD, "wrong-password")][..],
            "refused the login of fetch.auth.username = \"Casement@indexer\"",
        ),
    ] {
        // Stopped at start, or still running (waiting for Kafka) after two minutes.
        let log = dir.path().join("stderr.log");
        let mut child = run(auth)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("runs");
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("status") {
                break status;
            }
            if started.elapsed() > std::time::Duration::from_secs(120) {
                let _ = child.kill();
                panic!("still running after 2 minutes: the wiki's refusal did not stop the start");
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let stderr = std::fs::read_to_string(&log).expect("log");
        assert!(!status.success(), "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
        assert!(
            stderr.contains(&wiki.api_url),
            "names fetch.api_url: {stderr}"
        );
        assert!(
            !stderr.contains("wrong-password"),
            "the password is never shown"
        );
    }
    let refused_logins = wiki.login_attempts();
    let mut child = run(&[(USER, "Casement@indexer"), (PASSWORD, "right-password")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("runs");
    let started = std::time::Instant::now();
    while wiki.login_attempts() == refused_logins {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the indexer never logged in"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let exited = child.try_wait().expect("status");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        exited.is_none(),
        "a wiki that lets it read does not stop the start: {exited:?}"
    );
}
