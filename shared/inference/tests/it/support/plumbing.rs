//! The cross-encoder used to test and time reranker plumbing: the MiniLM encoder with an
//! untrained (random, seeded) one-logit head, built by `deploy/models/build_bert_onnx.py
//! --classifier-head`. Same architecture and cost as ms-marco-MiniLM-L-6-v2; no ranking skill.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use casement_inference::models_dir;

/// Callers in one process run in parallel threads; the model is built once.
static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn plumbing_cross_encoder() -> PathBuf {
    let _guard = BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cross-encoder-plumbing");
    let model = dir.join("model.onnx");
    if !model.exists() {
        std::fs::create_dir_all(&dir).expect("mkdir");
        let source = models_dir().join("all-MiniLM-L6-v2");
        std::fs::copy(source.join("tokenizer.json"), dir.join("tokenizer.json"))
            .expect("tokenizer (run `make models`)");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/models/build_bert_onnx.py");
        let partial = dir.join("model.part.onnx");
        let status = Command::new(models_dir().join("venv/bin/python"))
            .arg(script)
            .arg(&source)
            .arg(&partial)
            .arg("--classifier-head")
            .status()
            .expect("the tools virtualenv of `make models` runs");
        assert!(status.success());
        std::fs::rename(&partial, &model).expect("rename");
    }
    dir
}
