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
            "invalid socket address",
        ),
    ] {
        let output = indexer().env(key, value).arg("run").output().expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{key}={value}");
        assert!(stderr.contains(message), "{key}={value}: {stderr}");
    }
}

#[test]
fn the_example_config_is_the_defaults() {
    let path = repo().join("deploy/indexer.example.toml");
    let example: IndexerConfig =
        casement_config::load(Some(&path), "UNUSED", []).expect("example loads");
    assert_eq!(example, IndexerConfig::default());
}
