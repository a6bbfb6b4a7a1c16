//! The bounds on the all-in-one's local inputs are settings checked at start: a bad value
//! fails with a message naming the key; the resolved settings carry them to the parts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use casement::CasementConfig;

fn load(pairs: &[(&str, &str)]) -> Result<CasementConfig, String> {
    let env = pairs
        .iter()
        .map(|(k, v)| (format!("CASEMENT__{k}"), (*v).to_owned()));
    casement_config::load(None, "CASEMENT", env).map_err(|e| e.to_string())
}

#[test]
fn bad_input_bounds_fail_at_start_with_the_key() {
    for (key, value, message) in [
        (
            "SOURCES__WEBHOOK__DEAD_LETTER_MAX_BYTES",
            "100",
            "sources.webhook.dead_letter_max_bytes = 100 must be at least 4096",
        ),
        (
            "SOURCES__WEBHOOK__DEAD_LETTER_MAX_PAYLOAD_BYTES",
            "999999999",
            "sources.webhook.dead_letter_max_payload_bytes = 999999999 must not exceed",
        ),
        (
            "SOURCES__WEBHOOK__DEAD_LETTER_MAX_BYTES",
            "-1",
            "invalid value: integer `-1`, expected u64",
        ),
        (
            "SOURCES__WATCH__SETTLE_MS",
            "86400000",
            "sources.watch.settle_ms = 86400000 must be at most",
        ),
        ("SOURCES__WATCH__POLL_MS", "0", "sources.watch.poll_ms"),
    ] {
        let error = load(&[(key, value)]).expect_err(key);
        assert!(error.contains(message), "{key}={value}: {error}");
    }
}

#[test]
fn resolved_settings_carry_the_bounds() {
    let config = load(&[
        ("DATA_DIR", "/var/lib/casement"),
        ("EVENTS__MAX_EVENT_BYTES", "65536"),
        ("SOURCES__WEBHOOK__DEAD_LETTER_MAX_BYTES", "1048576"),
        ("SOURCES__WEBHOOK__DEAD_LETTER_MAX_PAYLOAD_BYTES", "1024"),
        ("SOURCES__WATCH__SETTLE_MS", "0"),
    ])
    .unwrap();
    let letters = config.dead_letter_file();
    assert_eq!(
        letters.path,
        std::path::Path::new("/var/lib/casement/dead-letters.jsonl")
    );
    assert_eq!(
        (letters.max_bytes, letters.max_payload_bytes),
        (1 << 20, 1024)
    );
    let watch = config.watch();
    assert_eq!((watch.max_file_bytes, watch.settle_ms), (Some(65536), 0));
    // Not a key: `check-config` does not print it, a file cannot set it.
    assert!(!toml::to_string(&config).unwrap().contains("max_file_bytes"));
    let error = load(&[("SOURCES__WATCH__MAX_FILE_BYTES", "1")]).unwrap_err();
    assert!(error.contains("max_file_bytes"), "{error}");
}
