//! `make bench-embed`: throughput and latency of the ONNX embedder (fp32 and int8) on real
//! sentences of the 18F Handbook, side by side with Python onnxruntime + HF tokenizers on the
//! same model files, sentences, threads and batch sizes (`deploy/models/bench_python.py`, run
//! in the same invocation). Prints a table; writes `target/bench/embed.json`.

#[path = "../tests/it/support/plumbing.rs"]
mod plumbing;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use casement_inference::rerank::DEFAULT_RESCORING_WEIGHT;
use casement_inference::{
    Candidate, CrossEncoder, CrossEncoderConfig, Embed, EmbedderConfig, OnnxEmbedder, Precision,
    Rerank, Rescoring, models_dir,
};
use casement_text::{Format, Revision, TextConfig, segment};

const THREADS: usize = 2;
const SENTENCES: usize = 1024;
const BATCH1_SENTENCES: usize = 256;
const REPEATS: usize = 5;

fn main() {
    let sentences = corpus_sentences();
    let target = casement_testkit::bench_dir();
    let sentences_file = target.join("embed-sentences.json");
    std::fs::write(
        &sentences_file,
        serde_json::to_string(&sentences).expect("json"),
    )
    .expect("write sentences");

    let mut report = serde_json::Map::new();
    let mut python = serde_json::Map::new();
    println!(
        "{} real sentences from the 18F Handbook, {THREADS} threads, median of {REPEATS} runs",
        sentences.len()
    );
    println!(
        "{:<26} {:>14} {:>12} {:>16} {:>14} {:>11} {:>11}",
        "embedder",
        "sent/s b32",
        "tokens/s",
        "sent/s b1",
        "vs Python b32",
        "p50 3-sent",
        "p95 3-sent"
    );
    for precision in [Precision::Fp32, Precision::Int8] {
        let name = format!("{precision:?}").to_lowercase();
        let config = EmbedderConfig {
            precision,
            threads: THREADS,
            batch_size: 32,
            ..EmbedderConfig::default()
        };
        let embedder = OnnxEmbedder::load(&config).expect("model loads (run `make models`)");
        let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
        let tokens: usize = texts
            .iter()
            .map(|t| embedder.count_tokens(t).expect("tokenises"))
            .sum();
        embedder.embed(&texts[..64]).expect("warm-up");
        let b32 = median((0..REPEATS).map(|_| rate(&embedder, &texts)).collect());
        let single = OnnxEmbedder::load(&EmbedderConfig {
            batch_size: 1,
            ..config.clone()
        })
        .expect("loads");
        let b1 = median(
            (0..REPEATS)
                .map(|_| rate(&single, &texts[..BATCH1_SENTENCES]))
                .collect(),
        );
        let mut latencies: Vec<f64> = texts
            .chunks(3)
            .take(200)
            .map(|three| {
                let started = Instant::now();
                embedder.embed(three).expect("embeds");
                started.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        latencies.sort_by(f64::total_cmp);
        let (p50, p95) = (percentile(&latencies, 0.5), percentile(&latencies, 0.95));

        let model = config.model_dir.join(precision.file_name());
        let py_b32 = python_baseline(
            &model,
            &config.model_dir.join("tokenizer.json"),
            &sentences_file,
            32,
        );
        let b1_file = target.join("embed-sentences-b1.json");
        std::fs::write(
            &b1_file,
            serde_json::to_string(&sentences[..BATCH1_SENTENCES]).expect("json"),
        )
        .expect("write");
        let py_b1 = python_baseline(
            &model,
            &config.model_dir.join("tokenizer.json"),
            &b1_file,
            1,
        );
        let tokens_per_s = b32 * tokens as f64 / texts.len() as f64;
        println!(
            "{:<26} {:>14.0} {:>12.0} {:>16.0} {:>14} {:>9.1}ms {:>9.1}ms",
            format!("Rust ort {name}"),
            b32,
            tokens_per_s,
            b1,
            format!("{:.2}x", b32 / py_b32.0),
            p50,
            p95
        );
        println!(
            "{:<26} {:>14.0} {:>12.0} {:>16.0}",
            format!("Python onnxruntime {name}"),
            py_b32.0,
            py_b32.1,
            py_b1.0
        );
        report.insert(
            name.clone(),
            serde_json::json!({
                "sentences_per_s": b32, "tokens_per_s": tokens_per_s, "batch1_sentences_per_s": b1,
                "latency_3_sentences_ms": {"p50": p50, "p95": p95},
                "speedup_vs_python_b32": b32 / py_b32.0, "speedup_vs_python_b1": b1 / py_b1.0,
            }),
        );
        python.insert(name, serde_json::json!({"sentences_per_s": py_b32.0, "tokens_per_s": py_b32.1, "batch1_sentences_per_s": py_b1.0}));
    }
    report.insert(
        "python_onnxruntime".into(),
        serde_json::Value::Object(python),
    );
    report.insert("rerank_pairs_per_s".into(), rerank_throughput(&sentences));
    report.insert("threads".into(), THREADS.into());
    report.insert("sentences".into(), sentences.len().into());
    let out = target.join("embed.json");
    std::fs::write(&out, serde_json::to_string_pretty(&report).expect("json"))
        .expect("write report");
    println!("wrote {}", out.display());
}

/// Query-window pairs per second for each local reranker, 10 windows of ~150 words per
/// query (what the query service sends), median of the repeats.
fn rerank_throughput(sentences: &[String]) -> serde_json::Value {
    let mut windows = Vec::new();
    let mut current = String::new();
    for sentence in sentences {
        current.push_str(sentence);
        current.push(' ');
        if current.split_whitespace().count() >= 150 {
            windows.push(std::mem::take(&mut current));
        }
    }
    let windows: Vec<&str> = windows.iter().map(String::as_str).take(40).collect();
    let candidates: Vec<Candidate<'_>> = windows
        .iter()
        .map(|w| Candidate {
            text: w,
            retrieval_score: 0.0,
            ..Default::default()
        })
        .collect();
    let embedder: Arc<dyn Embed> = Arc::new(
        OnnxEmbedder::load(&EmbedderConfig {
            threads: THREADS,
            ..EmbedderConfig::default()
        })
        .expect("model loads"),
    );
    let cross_config = CrossEncoderConfig {
        model_dir: plumbing::plumbing_cross_encoder(),
        threads: THREADS,
        ..CrossEncoderConfig::default()
    };
    let rerankers: Vec<(String, Box<dyn Rerank>)> = vec![
        (
            "rescoring_int8".into(),
            Box::new(Rescoring::new(embedder, DEFAULT_RESCORING_WEIGHT)),
        ),
        (
            "cross_encoder_minilm_l6_fp32_256".into(),
            Box::new(CrossEncoder::load(&cross_config).expect("cross-encoder loads")),
        ),
        (
            "cross_encoder_minilm_l6_fp32_128".into(),
            Box::new(
                CrossEncoder::load(&CrossEncoderConfig {
                    max_tokens: 128,
                    ..cross_config.clone()
                })
                .expect("loads"),
            ),
        ),
    ];
    let mut result = serde_json::Map::new();
    println!(
        "\nrerankers, 10 windows of ~150 words per query ({} pairs per run)",
        candidates.len()
    );
    for (name, reranker) in rerankers {
        let rates: Vec<f64> = (0..REPEATS)
            .map(|_| {
                let started = Instant::now();
                for chunk in candidates.chunks(10) {
                    reranker
                        .score("how do I get reimbursed for travel", chunk)
                        .expect("scores");
                }
                candidates.len() as f64 / started.elapsed().as_secs_f64()
            })
            .collect();
        let rate = median(rates);
        println!(
            "{name:<36} {rate:>8.1} pairs/s  ({:.0} ms per query of 10 windows)",
            10_000.0 / rate
        );
        result.insert(name, rate.into());
    }
    serde_json::Value::Object(result)
}

fn rate(embedder: &OnnxEmbedder, texts: &[&str]) -> f64 {
    let started = Instant::now();
    embedder.embed(texts).expect("embeds");
    texts.len() as f64 / started.elapsed().as_secs_f64()
}

/// (sentences/s, tokens/s) of the Python baseline, from the tools virtualenv of `make models`.
fn python_baseline(
    model: &std::path::Path,
    tokenizer: &std::path::Path,
    sentences: &std::path::Path,
    batch: usize,
) -> (f64, f64) {
    let python = models_dir().join("venv/bin/python");
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/models/bench_python.py");
    let output = Command::new(&python)
        .arg(script)
        .args([model, tokenizer, sentences])
        .args([THREADS.to_string(), batch.to_string(), REPEATS.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (run `make models`)", python.display()));
    assert!(
        output.status.success(),
        "Python baseline failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("baseline prints JSON");
    (
        result["sentences_per_s"].as_f64().unwrap_or(0.0),
        result["tokens_per_s"].as_f64().unwrap_or(0.0),
    )
}

/// Sentences of the last revision of each page of the 18F sample (in the log's publish
/// order), deduplicated.
fn corpus_sentences() -> Vec<String> {
    let path = casement_testkit::data("revisions/18f-handbook/sample.jsonl");
    let (events, _) = casement_events::revision_log::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut last = std::collections::BTreeMap::new();
    for event in events.into_iter().filter(|e| !e.is_delete()) {
        last.insert(event.doc_id.clone(), event);
    }
    let mut seen = std::collections::HashSet::new();
    let mut sentences = Vec::new();
    for (doc_id, event) in last {
        let revision = Revision {
            access: None,
            metadata: Default::default(),
            doc_id,
            revision: 1,
            title: None,
            url: None,
            tenant: None,
            format: Format::Markdown,
            content: event.content,
            revision_url: None,
        };
        let segmented = segment(&revision, &TextConfig::default()).expect("segments");
        for section in &segmented.sections {
            for range in &section.sentences {
                let sentence = segmented.text[range.clone()].to_owned();
                if sentences.len() < SENTENCES && seen.insert(sentence.clone()) {
                    sentences.push(sentence);
                }
            }
        }
    }
    sentences
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}
