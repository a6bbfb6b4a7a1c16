//! The query binary: help, configuration defaults and errors.

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
    assert!(String::from_utf8_lossy(&output.stdout).contains("check-config"));

    let output = query()
        .env("CASEMENT_QUERY__LISTEN", "not-an-address")
        .arg("check-config")
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("invalid socket address"),
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
