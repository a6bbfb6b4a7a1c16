//! Every input a fuzz target ever failed on (`fuzz/regressions/<target>/`, kept when
//! `make fuzz` finds one and the bug is fixed), replayed through the same bodies
//! (`casement_testkit::fuzz`), plus the seeds each target starts from.

use std::path::{Path, PathBuf};

use casement_testkit::fuzz::{decode_event, diff_pair, extract_and_segment};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = casement_testkit::repo_root()
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.is_file() && !path.ends_with("README.md"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("read");
            (path, bytes)
        })
        .collect()
}

fn replay(target: &str, body: fn(&[u8])) -> usize {
    let inputs = inputs(target);
    for (path, bytes) in &inputs {
        let outcome = std::panic::catch_unwind(|| body(bytes));
        assert!(
            outcome.is_ok(),
            "{target} fails again on {}",
            path.display()
        );
    }
    inputs.len()
}

fn seed(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_fuzz_targets_pass_on_every_input_they_ever_failed_on() {
    let counts = [
        replay("extract_and_segment", extract_and_segment),
        replay("decode_event", decode_event),
        replay("diff_pair", diff_pair),
    ];
    println!("regression inputs: {counts:?}");
}

#[test]
fn the_fuzz_bodies_accept_real_documents_and_events() {
    let log = std::fs::read_to_string(
        casement_testkit::repo_root().join("sample/18f-handbook/revisions.jsonl"),
    )
    .expect("sample");
    for line in log.lines().take(20) {
        let event: serde_json::Value = serde_json::from_str(line).expect("json");
        let page = event["content"].as_str().unwrap_or_default().as_bytes();
        for format in 0..4u8 {
            let mut input = vec![format | 0x30];
            input.extend_from_slice(page);
            extract_and_segment(&input);
            let mut pair = input.clone();
            pair.push(0xFF);
            pair.push(format);
            pair.extend_from_slice(&page[..page.len() / 2]);
            diff_pair(&pair);
        }
        decode_event(line.as_bytes());
    }
    // The real payloads of ../shared/data/events (Wikimedia, Debezium, CloudEvents).
    let mut stack = vec![casement_testkit::data("events")];
    let mut decoded = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("events dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                decode_event(&seed(&path));
                decoded += 1;
            }
        }
    }
    assert!(decoded > 5, "{decoded} event payloads");
}
