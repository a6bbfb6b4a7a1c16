//! Synthetic edits after a real history (the soaks of issue 19): seeded, reproducible
//! revisions of the documents the history leaves live, each one edit an editor makes all
//! day (a sentence added to a paragraph, a paragraph removed, a word changed, two
//! paragraphs swapped, a paragraph added at the end).

use std::io::Write;
use std::path::Path;

use casement_events::revision_log::LogEvent;

use super::final_events;

/// `count` edits of the documents live at the end of `history`, continuing their
/// revisions (and `seq`, when the history has one), chosen by `seed`.
pub fn synthetic_edits(history: &[LogEvent], count: usize, seed: u64) -> Vec<LogEvent> {
    let mut live: Vec<LogEvent> = final_events(history)
        .into_values()
        .filter(|e| !e.is_delete() && !e.content.trim().is_empty())
        .collect();
    assert!(!live.is_empty(), "the history leaves no live document");
    let mut seq = history.iter().filter_map(|e| e.seq).max();
    let mut state = seed.max(1);
    let mut edits = Vec::with_capacity(count);
    for i in 0..count {
        let pick = (next(&mut state) % live.len() as u64) as usize;
        let doc = &mut live[pick];
        let mut paragraphs: Vec<String> = doc.content.split("\n\n").map(str::to_owned).collect();
        let n = paragraphs.len();
        let at = (next(&mut state) % n as u64) as usize;
        match next(&mut state) % 5 {
            0 => paragraphs[at].push_str(&format!(
                " Synthetic edit {i} adds this sentence about review cycle {}.",
                next(&mut state) % 97
            )),
            1 if n > 2 => {
                paragraphs.remove(at);
            }
            2 => {
                let words: Vec<&str> = paragraphs[at].split(' ').collect();
                let w = (next(&mut state) % words.len() as u64) as usize;
                let mut words: Vec<String> = words.into_iter().map(str::to_owned).collect();
                words[w] = format!("revised{i}");
                paragraphs[at] = words.join(" ");
            }
            3 if n > 1 => {
                let other = (next(&mut state) % n as u64) as usize;
                paragraphs.swap(at, other);
            }
            _ => paragraphs.push(format!(
                "Synthetic paragraph {i}. It records decision {} of the team. Ask in the \
                 channel when it changes.",
                next(&mut state) % 1000
            )),
        }
        doc.content = paragraphs.join("\n\n");
        doc.revision += 1;
        doc.change = "update".to_owned();
        seq = seq.map(|s| s + 1);
        doc.seq = seq;
        doc.timestamp = None;
        edits.push(doc.clone());
    }
    edits
}

/// Writes a revision log (JSONL), one event per line.
pub fn write_log(path: &Path, events: &[LogEvent]) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create log"));
    for event in events {
        serde_json::to_writer(&mut out, event).expect("serialise event");
        out.write_all(b"\n").expect("write log");
    }
    out.flush().expect("write log");
}

/// xorshift64*.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}
