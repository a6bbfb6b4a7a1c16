//! `make bench-rerank`: does the default rescoring reranker improve window ranking on real
//! questions? SQuAD v1.1 dev, every other article; the blend weight is chosen on even
//! questions and reported on odd (held-out) ones, against retrieval order. Also measures
//! rescoring throughput (query-window pairs per second, windows of ~150 words).
//! Writes `target/bench/rerank.json`.

#[path = "../tests/it/support/squad.rs"]
mod squad;

use std::sync::Arc;
use std::time::Instant;

use casement_inference::{
    Candidate, Embed, EmbedderConfig, OnnxEmbedder, Precision, Rerank, Rescoring,
};

fn main() {
    let mut report = serde_json::Map::new();
    // The last runs are shorter cuts for the query service's rescoring model
    // (`[rerank.embedder]`, default int8 at 64 tokens), to see what the cut costs against
    // the first. As in the service, the model reads about 3/4 · max_tokens words of each
    // window, centred on the sentence that retrieved it. `BENCH_RERANK_ONLY=int8_64,fp32`
    // runs only those (keys of rerank.json).
    let only = std::env::var("BENCH_RERANK_ONLY").ok();
    for (precision, max_tokens) in [
        (Precision::Int8, 256),
        (Precision::Fp32, 256),
        (Precision::Int8, 128),
        (Precision::Int8, 64),
    ] {
        // The report's key: the precision alone for the full 256 tokens.
        let key = if max_tokens == 256 {
            format!("{precision:?}").to_lowercase()
        } else {
            format!("{precision:?}_{max_tokens}").to_lowercase()
        };
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|k| k == key))
        {
            continue;
        }
        let config = EmbedderConfig {
            precision,
            threads: 2,
            max_tokens,
            ..EmbedderConfig::default()
        };
        let embedder: Arc<dyn Embed> =
            Arc::new(OnnxEmbedder::load(&config).expect("model loads (run `make models`)"));
        let started = Instant::now();
        let (cases, misses) =
            squad::build_cases_read(embedder.as_ref(), 2, 4, 1200, max_tokens * 3 / 4);
        let tune: Vec<&squad::Case> = cases.iter().step_by(2).collect();
        let held_out: Vec<&squad::Case> = cases.iter().skip(1).step_by(2).collect();
        println!(
            "\n{precision:?}, {max_tokens} tokens: {} questions with the answer among the top-10 windows ({misses} without), built in {:.0} s",
            cases.len(),
            started.elapsed().as_secs_f64()
        );
        println!(
            "{:<28} {:>12} {:>10} {:>14} {:>12}",
            "ranking", "tune hit@1", "tune MRR", "held-out hit@1", "held-out MRR"
        );
        let base_tune = squad::evaluate(&tune, squad::retrieval_order);
        let base_held = squad::evaluate(&held_out, squad::retrieval_order);
        println!(
            "{:<28} {:>12.3} {:>10.3} {:>14.3} {:>12.3}",
            "retrieval order (RRF)",
            base_tune.hit_at_1,
            base_tune.mrr,
            base_held.hit_at_1,
            base_held.mrr
        );
        let mut best = (0.0f32, base_tune);
        for step in 1..=10 {
            let weight = step as f32 / 10.0;
            let t = squad::evaluate(&tune, |c| squad::rescored(c, weight));
            let h = squad::evaluate(&held_out, |c| squad::rescored(c, weight));
            println!(
                "{:<28} {:>12.3} {:>10.3} {:>14.3} {:>12.3}",
                format!("rescoring w={weight:.1}"),
                t.hit_at_1,
                t.mrr,
                h.hit_at_1,
                h.mrr
            );
            if t.mrr > best.1.mrr {
                best = (weight, t);
            }
        }
        let chosen = squad::evaluate(&held_out, |c| squad::rescored(c, best.0));
        println!(
            "chosen on the tune half: w={:.1}; held-out MRR {:.3} vs retrieval {:.3} ({:+.3}), hit@1 {:.3} vs {:.3}",
            best.0,
            chosen.mrr,
            base_held.mrr,
            chosen.mrr - base_held.mrr,
            chosen.hit_at_1,
            base_held.hit_at_1
        );

        // Throughput: one query against 10 windows of ~150 words, as the query service does.
        let windows: Vec<String> = cases
            .iter()
            .flat_map(|c| c.windows.iter().cloned())
            .filter(|w| w.split_whitespace().count() >= 120)
            .take(200)
            .collect();
        let reranker = Rescoring::new(embedder.clone(), best.0);
        let started = Instant::now();
        let mut pairs = 0;
        for (chunk, case) in windows.chunks(10).zip(&cases) {
            let candidates: Vec<Candidate<'_>> = chunk
                .iter()
                .map(|w| Candidate {
                    text: w,
                    retrieval_score: 0.0,
                    ..Default::default()
                })
                .collect();
            reranker.score(&case.question, &candidates).expect("scores");
            pairs += candidates.len();
        }
        let pairs_per_s = pairs as f64 / started.elapsed().as_secs_f64();
        println!(
            "rescoring throughput: {pairs_per_s:.1} query-window pairs/s ({pairs} pairs, windows ≥120 words)"
        );
        report.insert(
            key,
            serde_json::json!({
                "questions": cases.len(), "retrieval_misses": misses,
                "retrieval": {"hit_at_1": base_held.hit_at_1, "mrr": base_held.mrr},
                "rescoring": {"weight": best.0, "hit_at_1": chosen.hit_at_1, "mrr": chosen.mrr},
                "rerank_pairs_per_s": pairs_per_s,
            }),
        );
    }
    let target = casement_testkit::bench_dir();
    // Runs left out by BENCH_RERANK_ONLY keep their earlier figures.
    if let Some(serde_json::Value::Object(earlier)) = std::fs::read(target.join("rerank.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
    {
        for (key, value) in earlier {
            report.entry(key).or_insert(value);
        }
    }
    std::fs::write(
        target.join("rerank.json"),
        serde_json::to_string_pretty(&report).expect("json"),
    )
    .expect("write");
    println!("wrote {}", target.join("rerank.json").display());
}
