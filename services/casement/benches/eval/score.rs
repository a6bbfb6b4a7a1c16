//! Scoring: what one query returned (windows or chunks, in order) against its gold.

use std::collections::BTreeSet;

use tiktoken_rs::CoreBPE;

/// One returned passage: a Casement window or a baseline chunk.
#[derive(Debug, Clone)]
pub struct Passage {
    pub doc_id: String,
    pub char_start: usize,
    pub char_end: usize,
    /// cl100k tokens of the passage's text (what a prompt pays for it).
    pub tokens: usize,
}

impl Passage {
    pub fn covers(&self, doc_id: &str, (start, end): (usize, usize)) -> bool {
        self.doc_id == doc_id && self.char_start <= start && end <= self.char_end
    }
}

pub fn cl100k() -> CoreBPE {
    tiktoken_rs::cl100k_base().expect("the cl100k_base tokenizer (bundled in tiktoken-rs)")
}

pub fn tokens(bpe: &CoreBPE, text: &str) -> usize {
    bpe.encode_ordinary(text).len()
}

/// The context budgets of the "at equal context" columns (cl100k tokens).
pub const BUDGETS: [usize; 2] = [512, 1024];

/// Sums over SQuAD questions.
#[derive(Debug, Default, Clone)]
pub struct SquadSums {
    pub questions: usize,
    pub hit_at: [usize; 3],
    pub reciprocal_rank: f64,
    pub top5_tokens: usize,
    /// Answered by the leading passages of the plain answer that fit in the budget.
    pub within_budget: [usize; 2],
    /// Answered when the budget is asked for (`token_budget` in the request): Casement
    /// narrows windows to fit; `None` for systems that cannot be asked.
    pub asked_budget: Option<[usize; 2]>,
}

/// Rank cut-offs of `hit_at`.
pub const RANKS: [usize; 3] = [1, 5, 10];

impl SquadSums {
    /// A question is answered at rank r when a passage of its article among the first r
    /// covers one of its reference answers.
    pub fn add(&mut self, passages: &[Passage], doc_id: &str, answers: &[(usize, usize)]) {
        self.questions += 1;
        let first = passages
            .iter()
            .position(|p| answers.iter().any(|a| p.covers(doc_id, *a)));
        for (i, rank) in RANKS.iter().enumerate() {
            if first.is_some_and(|f| f < *rank) {
                self.hit_at[i] += 1;
            }
        }
        if let Some(f) = first.filter(|f| *f < 10) {
            self.reciprocal_rank += 1.0 / (f + 1) as f64;
        }
        self.top5_tokens += passages.iter().take(5).map(|p| p.tokens).sum::<usize>();
        for (i, budget) in BUDGETS.iter().enumerate() {
            let kept = leading_within(passages, *budget);
            if first.is_some_and(|f| f < kept) {
                self.within_budget[i] += 1;
            }
        }
    }

    /// The answer to the same question asked with a token budget of `BUDGETS[i]`.
    pub fn add_asked(
        &mut self,
        i: usize,
        passages: &[Passage],
        doc_id: &str,
        answers: &[(usize, usize)],
    ) {
        let kept = leading_within(passages, BUDGETS[i]);
        let hit = passages[..kept]
            .iter()
            .any(|p| answers.iter().any(|a| p.covers(doc_id, *a)));
        let counts = self.asked_budget.get_or_insert([0, 0]);
        counts[i] += usize::from(hit);
    }

    /// Recall within each budget: asked for when the system can be, else cut from the
    /// plain answer.
    pub fn recall_within(&self, i: usize) -> f64 {
        let n = self.questions.max(1) as f64;
        self.asked_budget.map_or(self.within_budget[i], |a| a[i]) as f64 / n
    }

    pub fn json(&self) -> serde_json::Value {
        let n = self.questions.max(1) as f64;
        serde_json::json!({
            "recall_within_512_asked": self.asked_budget.map(|a| a[0] as f64 / n),
            "recall_within_1024_asked": self.asked_budget.map(|a| a[1] as f64 / n),
            "questions": self.questions,
            "recall_at_1": self.hit_at[0] as f64 / n,
            "recall_at_5": self.hit_at[1] as f64 / n,
            "recall_at_10": self.hit_at[2] as f64 / n,
            "mrr_at_10": self.reciprocal_rank / n,
            "top5_cl100k_tokens": self.top5_tokens as f64 / n,
            "recall_within_512": self.within_budget[0] as f64 / n,
            "recall_within_1024": self.within_budget[1] as f64 / n,
        })
    }
}

/// How many leading passages fit together in `budget` tokens (stopping at the first that
/// does not fit).
pub fn leading_within(passages: &[Passage], budget: usize) -> usize {
    let mut used = 0;
    for (i, p) in passages.iter().enumerate() {
        used += p.tokens;
        if used > budget {
            return i;
        }
    }
    passages.len()
}

/// Sums over SciFact claims.
#[derive(Debug, Default, Clone)]
pub struct SciFactSums {
    pub claims: usize,
    pub ndcg: f64,
    /// nDCG@10 of each claim, in claim order (for paired comparisons).
    pub per_claim: Vec<f64>,
    pub evidence_claims: usize,
    pub evidence_recall: f64,
}

impl SciFactSums {
    /// nDCG@10 over the distinct documents in passage order (binary relevance), and the
    /// share of the claim's evidence sentences covered by the first 5 passages.
    pub fn add(
        &mut self,
        passages: &[Passage],
        relevant: &BTreeSet<String>,
        evidence: &[(String, (usize, usize))],
    ) {
        self.claims += 1;
        let mut seen = BTreeSet::new();
        let docs: Vec<&str> = passages
            .iter()
            .filter(|p| seen.insert(p.doc_id.as_str()))
            .map(|p| p.doc_id.as_str())
            .take(10)
            .collect();
        let dcg: f64 = docs
            .iter()
            .enumerate()
            .filter(|(_, d)| relevant.contains(**d))
            .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
            .sum();
        let ideal: f64 = (0..relevant.len().min(10))
            .map(|i| 1.0 / ((i + 2) as f64).log2())
            .sum();
        let ndcg = if ideal > 0.0 { dcg / ideal } else { 0.0 };
        self.ndcg += ndcg;
        self.per_claim.push(ndcg);
        if !evidence.is_empty() {
            self.evidence_claims += 1;
            let covered = evidence
                .iter()
                .filter(|(doc, range)| passages.iter().take(5).any(|p| p.covers(doc, *range)))
                .count();
            self.evidence_recall += covered as f64 / evidence.len() as f64;
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "claims": self.claims,
            "ndcg_at_10": self.ndcg / self.claims.max(1) as f64,
            "evidence_claims": self.evidence_claims,
            "evidence_recall_at_5": self.evidence_recall / self.evidence_claims.max(1) as f64,
        })
    }
}

/// The paired bootstrap of the mean difference `b − a` over items (the same items in the
/// same order): `resamples` draws with replacement (xorshift64, seed 1: reproducible), and
/// the mean difference with its 2.5 and 97.5 percentiles.
pub fn paired_bootstrap(a: &[f64], b: &[f64], resamples: usize) -> (f64, f64, f64) {
    let n = a.len().min(b.len());
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let diff: Vec<f64> = (0..n).map(|i| b[i] - a[i]).collect();
    let mean = diff.iter().sum::<f64>() / n as f64;
    let mut rng: u64 = 1;
    let mut means = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let mut sum = 0.0;
        for _ in 0..n {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            sum += diff[(rng % n as u64) as usize];
        }
        means.push(sum / n as f64);
    }
    means.sort_by(f64::total_cmp);
    (mean, percentile(&means, 0.025), percentile(&means, 0.975))
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
