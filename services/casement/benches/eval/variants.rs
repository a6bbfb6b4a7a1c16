//! The Casement rows: which index each reads and which service setting it changes.

use crate::data::Half;

/// The indexes Casement rows read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Index {
    /// Default config.
    Shipped,
    /// `text.window_radius = 5`.
    Radius5,
    /// `enrich.mode = "none"`: sentences embedded and indexed without title or headings.
    NoContext,
}

impl Index {
    pub fn name(self) -> &'static str {
        match self {
            Index::Shipped => "shipped",
            Index::Radius5 => "radius5",
            Index::NoContext => "nocontext",
        }
    }

    pub fn backfill_env(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Index::Shipped => vec![],
            Index::Radius5 => vec![
                ("CASEMENT__TEXT__WINDOW_RADIUS", "5"),
                ("CASEMENT__SEARCH__INDEXED_WINDOW_RADIUS", "5"),
            ],
            Index::NoContext => vec![("CASEMENT__ENRICH__MODE", "none")],
        }
    }

    pub fn radius(self) -> usize {
        if self == Index::Radius5 { 5 } else { 3 }
    }
}

/// One Casement row: an index, service settings and a request radius.
pub struct Variant {
    pub name: &'static str,
    pub what: &'static str,
    pub index: Index,
    pub env: Vec<(&'static str, &'static str)>,
    pub radius: Option<usize>,
    /// The defaults are reported on both halves; ablations on the tune half.
    pub halves: &'static [Half],
    /// Also ask each SQuAD question with `token_budget` 512 and 1,024.
    pub budgets: bool,
}

pub fn variants() -> Vec<Variant> {
    let ablation = |name, what, index, env, radius| Variant {
        name,
        what,
        index,
        env,
        radius,
        halves: &[Half::Tune],
        budgets: false,
    };
    vec![
        Variant {
            name: "defaults",
            what: "Casement as shipped",
            index: Index::Shipped,
            env: vec![],
            radius: None,
            halves: &[Half::Tune, Half::Report],
            budgets: true,
        },
        Variant {
            name: "retrieval",
            what: "retrieval order (rerank off)",
            index: Index::Shipped,
            env: vec![("CASEMENT_QUERY__RERANK__BY_DEFAULT", "false")],
            radius: None,
            halves: &[Half::Tune, Half::Report],
            budgets: false,
        },
        ablation(
            "dense",
            "dense only",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CHANNELS", "dense")],
            None,
        ),
        ablation(
            "bm25",
            "BM25 only",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CHANNELS", "bm25")],
            None,
        ),
        ablation(
            "nocontext",
            "no title/heading context",
            Index::NoContext,
            vec![],
            None,
        ),
        ablation(
            "radius1",
            "window radius 1",
            Index::Shipped,
            vec![],
            Some(1),
        ),
        ablation(
            "radius2",
            "window radius 2",
            Index::Shipped,
            vec![],
            Some(2),
        ),
        ablation(
            "radius5",
            "window radius 5",
            Index::Radius5,
            vec![],
            Some(5),
        ),
        ablation(
            "hits1",
            "1 sentence hit per window asked",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__HITS_PER_WINDOW", "1")],
            None,
        ),
        ablation(
            "hits2",
            "2 sentence hits per window asked",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__HITS_PER_WINDOW", "2")],
            None,
        ),
        ablation(
            "sum",
            "windows ranked by the sum of their matches",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__WINDOW_SCORE", "sum")],
            None,
        ),
        ablation(
            "candidates20",
            "20 candidates per channel",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CANDIDATES", "20")],
            None,
        ),
        ablation(
            "candidates50",
            "50 candidates per channel",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CANDIDATES", "50")],
            None,
        ),
        ablation(
            "candidates200",
            "200 candidates per channel",
            Index::Shipped,
            vec![("CASEMENT_QUERY__SEARCH__CANDIDATES", "200")],
            None,
        ),
        ablation(
            "rrf60",
            "RRF k 60 (the RRF paper's)",
            Index::Shipped,
            vec![("CASEMENT_QUERY__STORE__RRF_K", "60")],
            None,
        ),
        ablation(
            "rrf30",
            "RRF k 30",
            Index::Shipped,
            vec![("CASEMENT_QUERY__STORE__RRF_K", "30")],
            None,
        ),
        ablation(
            "rrf120",
            "RRF k 120",
            Index::Shipped,
            vec![("CASEMENT_QUERY__STORE__RRF_K", "120")],
            None,
        ),
    ]
}
