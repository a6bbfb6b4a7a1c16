//! BM25 sparse vectors, computed in Casement for both backends with Qdrant's own BM25
//! embedder (`qdrant_edge::bm25_embed`), which runs the server's tokenizer pipeline
//! (word tokenizer, lowercasing, language stopwords and Snowball stemmer, hashed token
//! ids). The same text therefore gives the same sparse vector on Edge and on a server, and
//! the same vector Qdrant's server-side `qdrant/bm25` inference would give.
//!
//! Document vectors carry only the term-frequency part of BM25; the collection's sparse
//! vector has Qdrant's IDF modifier, so corpus statistics live in the engine.

use qdrant_edge::bm25_embed::{EdgeBm25, EdgeBm25Config};
use qdrant_edge::external::ordered_float::NotNan;

use crate::config::Bm25Settings;

/// A sparse vector: token ids (hashes) and weights, ids unique.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseVector {
    pub indices: Vec<u32>,
    pub values: Vec<f32>,
}

impl SparseVector {
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
}

#[derive(Debug)]
pub struct Bm25 {
    model: EdgeBm25,
}

impl Bm25 {
    pub fn new(settings: &Bm25Settings) -> Result<Self, String> {
        let number = |name: &str, value: f64| {
            NotNan::new(value)
                .ok()
                .filter(|v| v.into_inner() > 0.0 || name == "b")
                .ok_or_else(|| format!("store.bm25.{name} = {value} is not a valid number"))
        };
        if !(0.0..=1.0).contains(&settings.b) {
            return Err(format!(
                "store.bm25.b = {} must be within 0..=1",
                settings.b
            ));
        }
        let config = EdgeBm25Config {
            k: number("k1", settings.k1)?,
            b: number("b", settings.b)?,
            avg_len: number("avg_len", settings.avg_len)?,
            language: Some(settings.language.clone()),
            ..EdgeBm25Config::default()
        };
        let model = EdgeBm25::new(config).map_err(|e| format!("store.bm25: {e}"))?;
        Ok(Self { model })
    }

    /// The vector stored with an indexed text (term frequencies, length-normalised).
    pub fn document(&self, text: &str) -> SparseVector {
        let v = self.model.embed_document(text);
        SparseVector {
            indices: v.indices,
            values: v.values,
        }
    }

    /// The vector of a query (each distinct term weighs 1; IDF comes from the engine).
    pub fn query(&self, text: &str) -> SparseVector {
        let v = self.model.embed_query(text);
        SparseVector {
            indices: v.indices,
            values: v.values,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_and_stemming_follow_qdrant() {
        let bm25 = Bm25::new(&Bm25Settings::default()).expect("default settings");
        assert_eq!(bm25.query("the indexing"), bm25.query("indexed"));
        let doc = bm25.document("Error ERR-4412 means the token expired");
        assert!(!doc.is_empty());
        assert!(doc.values.iter().all(|v| *v > 0.0));
    }

    #[test]
    fn bad_settings_are_rejected() {
        let bad = |s: Bm25Settings| Bm25::new(&s).expect_err("must fail");
        assert!(
            bad(Bm25Settings {
                language: "klingon".into(),
                ..Default::default()
            })
            .contains("klingon")
        );
        assert!(
            bad(Bm25Settings {
                avg_len: 0.0,
                ..Default::default()
            })
            .contains("avg_len")
        );
        assert!(
            bad(Bm25Settings {
                b: 1.5,
                ..Default::default()
            })
            .contains("store.bm25.b")
        );
    }
}
