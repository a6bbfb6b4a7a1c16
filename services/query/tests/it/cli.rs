//! The query binary: help, configuration defaults and errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use casement_query::QueryConfig;

fn query() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_casement-query"));
    command.env_remove("CASEMENT_QUERY_CONFIG");
    command
}

#[test]
fn help_works_and_bad_config_fails_at_start() {
    let output = query().arg("--help").output().expect("runs");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(
        help.contains("check-config") && help.contains("run"),
        "{help}"
    );

    let output = query()
        .env("CASEMENT_QUERY__LISTEN", "not-an-address")
        .arg("check-config")
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("expected host:port"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_example_config_is_the_defaults() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/query.example.toml");
    let example: QueryConfig =
        casement_config::load(Some(&path), "UNUSED", []).expect("example loads");
    assert_eq!(example, QueryConfig::default());
}

#[test]
fn run_fails_at_start_on_bad_config() {
    for (key, value, message) in [
        (
            "CASEMENT_QUERY__LIMITS__MAX_TOP_K",
            "0",
            "limits.max_top_k = 0",
        ),
        (
            "CASEMENT_QUERY__SEARCH__CONTAINMENT",
            "1.5",
            "search.containment",
        ),
        ("CASEMENT_QUERY__SEARCH__NO_SUCH_KEY", "1", "no_such_key"),
    ] {
        let output = query().env(key, value).arg("run").output().expect("runs");
        assert!(!output.status.success(), "{key}={value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{key}={value}: {stderr}");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("query.toml");
    std::fs::write(&config, "[[auth.keys]]\ntoken = \"short\"\n").expect("write");
    let output = query()
        .arg("--config")
        .arg(&config)
        .arg("run")
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 16 characters"));
}

/// An index recorded as made with another model (same dimension) is refused at start,
/// naming both models, instead of being searched with vectors from another space.
#[test]
fn run_refuses_an_index_made_with_another_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = casement_store::StoreConfig::default();
    store.edge.path = dir.path().join("index");
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let edge = casement_store::EdgeStore::open(&store, 384).unwrap();
        // The int8 model's own probe vector, as its indexer would have recorded it.
        let int8 = casement_inference::load_embedder(&casement_inference::EmbedderConfig {
            precision: casement_inference::Precision::Int8,
            ..Default::default()
        })
        .unwrap();
        let theirs = casement_store::IndexSettings {
            model: int8.model_id().to_owned(),
            dimension: 384,
            probe: int8
                .embed(&[casement_store::SETTINGS_PROBE])
                .unwrap()
                .remove(0),
            window_radius: 3,
            context: "structural".into(),
        };
        casement_store::check_settings(&edge, &theirs, casement_store::Access::Write)
            .await
            .unwrap();
    });
    let output = query()
        .env("CASEMENT_QUERY__STORE__EDGE__PATH", &store.edge.path)
        .env("CASEMENT_QUERY__LISTEN", "127.0.0.1:0")
        .arg("run")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "it was embedded with all-minilm-l6-v2:int8 (384 dimensions), this process embeds with all-minilm-l6-v2:fp32 (384 dimensions); their vectors of one probe text have a cosine of 0.9"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("search.indexed_window_radius"), "{stderr}");
    println!("{stderr}");
}
