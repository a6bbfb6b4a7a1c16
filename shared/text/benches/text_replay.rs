//! `make bench-text`: replays the 18F Handbook's full history (5,875 revisions) and compares
//! the embedding work of three indexing schemes, per revision:
//! - sentence: Casement's sentence-level diff (embedding inputs = context + sentence);
//! - chunk512: fixed 512-token chunks of the document text, re-embedded when their hash
//!   changes (the chunk-hash scheme of popular indexing libraries);
//! - whole_doc: the whole document text re-embedded on every revision (what a pipeline
//!   that re-indexes a page per change event does);
//! - whole_doc_if_changed: the same, skipped when the document text is unchanged (shown
//!   for fairness: a baseline with a content-hash check).
//!
//! Tokens are counted with the same estimator for all schemes (`casement_text::tokens`).
//! Also measures segment + diff throughput. Writes `target/bench/text.json`.

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use casement_text::{
    Fence, MemoryIndex, TextConfig, estimate_tokens, fence, hash_hex, plan_delete, plan_upsert,
};

const SCHEMES: [&str; 4] = ["sentence", "chunk512", "whole_doc", "whole_doc_if_changed"];

fn main() {
    let path = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| common::shared_data().join("revisions/18f-handbook/all.jsonl.gz"));
    eprintln!("reading {}", path.display());
    let events = common::read_events(&path);
    let config = TextConfig::default();
    let mut index = MemoryIndex::new();
    let mut previous_chunks: HashMap<String, Vec<String>> = HashMap::new();
    let mut previous_text: HashMap<String, String> = HashMap::new();
    let mut per_revision: [Vec<usize>; 4] = Default::default();
    let mut planning = Duration::ZERO;
    let mut bytes = 0usize;
    let (mut renames, mut renames_embedding, mut stale) = (0, 0, 0);
    let started = Instant::now();
    for (n, event) in events.iter().enumerate() {
        if n % 1000 == 0 {
            eprintln!("  {n}/{} revisions", events.len());
        }
        if let Fence::Stale { .. } = fence(index.document(&event.doc_id), event.revision) {
            stale += 1;
            continue;
        }
        let current = index.records(&event.doc_id);
        if event.is_delete() {
            index.apply(&plan_delete(
                &current,
                index.document(&event.doc_id),
                (&event.doc_id).into(),
                event.revision,
            ));
            previous_chunks.remove(&event.doc_id);
            previous_text.remove(&event.doc_id);
            for scheme in &mut per_revision {
                scheme.push(0);
            }
            continue;
        }
        let revision = event.to_revision();
        let timer = Instant::now();
        let (plan, segmented) = plan_upsert(&current, &revision, &config).expect("plans");
        planning += timer.elapsed();
        bytes += revision.content.len();

        let sentence_tokens: usize = plan
            .embed
            .iter()
            .map(|r| estimate_tokens(&r.embedding_input()))
            .sum();
        if event.change == "rename" {
            renames += 1;
            renames_embedding += usize::from(sentence_tokens > 0);
        }
        let chunks = chunk_hashes(&segmented.text, 512);
        let mut old = previous_chunks.remove(&event.doc_id).unwrap_or_default();
        let mut chunk_tokens = 0;
        for (hash, tokens) in &chunks {
            match old.iter().position(|h| h == hash) {
                Some(at) => {
                    old.swap_remove(at);
                }
                None => chunk_tokens += tokens,
            }
        }
        previous_chunks.insert(
            event.doc_id.clone(),
            chunks.into_iter().map(|(h, _)| h).collect(),
        );
        let text_hash = hash_hex(segmented.text.as_bytes());
        let whole_tokens = estimate_tokens(&segmented.text);
        let whole_if_changed = if previous_text.get(&event.doc_id) == Some(&text_hash) {
            0
        } else {
            whole_tokens
        };
        previous_text.insert(event.doc_id.clone(), text_hash);

        per_revision[0].push(sentence_tokens);
        per_revision[1].push(chunk_tokens);
        per_revision[2].push(whole_tokens);
        per_revision[3].push(whole_if_changed);
        index.apply(&plan);
    }
    let elapsed = started.elapsed();
    let throughput = bytes as f64 / 1e6 / planning.as_secs_f64();

    let medians: Vec<f64> = per_revision.iter().map(|v| percentile(v, 0.5)).collect();
    let p90s: Vec<f64> = per_revision.iter().map(|v| percentile(v, 0.9)).collect();
    let totals: Vec<usize> = per_revision.iter().map(|v| v.iter().sum()).collect();
    println!();
    println!(
        "18F Handbook history: {} revisions ({} stale), {} renames ({} embedded anything)",
        events.len(),
        stale,
        renames,
        renames_embedding
    );
    println!(
        "{:<21} {:>14} {:>10} {:>12} {:>16} {:>14}",
        "scheme", "median tokens", "p90", "total", "median ratio", "total ratio"
    );
    for (i, scheme) in SCHEMES.iter().enumerate() {
        println!(
            "{:<21} {:>14.1} {:>10.1} {:>12} {:>16} {:>14}",
            scheme,
            medians[i],
            p90s[i],
            totals[i],
            format!("1 : {:.1}", medians[i] / medians[0].max(1e-9)),
            format!("1 : {:.1}", totals[i] as f64 / totals[0].max(1) as f64),
        );
    }
    println!(
        "segment + diff: {:.1} MB in {:.2} s = {throughput:.1} MB/s on one thread (whole run {:.1} s)",
        bytes as f64 / 1e6,
        planning.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    let targets_met = medians[0] * 10.0 <= medians[1]
        && medians[0] * 25.0 <= medians[2]
        && renames_embedding == 0;
    println!(
        "targets (median ≤ 1/10 chunk512, ≤ 1/25 whole_doc, renames embed nothing): {}",
        if targets_met { "MET" } else { "MISSED" }
    );

    let json = serde_json::json!({
        "revisions": events.len(),
        "stale": stale,
        "median_tokens": { "sentence": medians[0], "chunk512": medians[1], "whole_doc": medians[2], "whole_doc_if_changed": medians[3] },
        "p90_tokens": { "sentence": p90s[0], "chunk512": p90s[1], "whole_doc": p90s[2], "whole_doc_if_changed": p90s[3] },
        "total_tokens": { "sentence": totals[0], "chunk512": totals[1], "whole_doc": totals[2], "whole_doc_if_changed": totals[3] },
        "renames": renames,
        "renames_that_embedded": renames_embedding,
        "throughput_mb_s": throughput,
        "targets_met": targets_met,
    });
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        std::path::PathBuf::from,
    );
    let out = target.join("bench/text.json");
    std::fs::create_dir_all(out.parent().expect("has parent")).expect("create target/bench");
    std::fs::write(&out, serde_json::to_string_pretty(&json).expect("json")).expect("write json");
    println!("wrote {}", out.display());
}

/// Consecutive chunks of at most `max_tokens` estimated tokens, cut between words.
fn chunk_hashes(text: &str, max_tokens: usize) -> Vec<(String, usize)> {
    let mut chunks = Vec::new();
    let (mut start, mut end, mut tokens) = (None::<usize>, 0, 0);
    for word in text.split_whitespace() {
        let offset = word.as_ptr() as usize - text.as_ptr() as usize;
        let cost = estimate_tokens(word);
        if let Some(s) = start
            && tokens + cost > max_tokens
        {
            chunks.push((hash_hex(&text.as_bytes()[s..end]), tokens));
            start = None;
            tokens = 0;
        }
        start.get_or_insert(offset);
        end = offset + word.len();
        tokens += cost;
    }
    if let Some(s) = start {
        chunks.push((hash_hex(&text.as_bytes()[s..end]), tokens));
    }
    chunks
}

fn percentile(values: &[usize], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = q * (sorted.len() - 1) as f64;
    let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[low] as f64 + (sorted[high] as f64 - sorted[low] as f64) * (rank - low as f64)
}
