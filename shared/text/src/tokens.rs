//! A tokenizer-free estimate of how many WordPiece tokens a text costs.
//!
//! The text core must not depend on a model's tokenizer (it stays light), yet it must keep
//! every unit under the embedding model's input limit and report embedding work in tokens.
//! The estimate: each run of letters or digits of `n` characters costs `1 + n / 8` (common
//! words are one piece, long and rare ones several), every other visible character costs
//! one (punctuation is its own piece in BERT-style vocabularies), whitespace is free.
//! Measured against the MiniLM tokenizer on English prose it over-counts slightly, which is
//! the safe side for a cap.

pub fn estimate_tokens(text: &str) -> usize {
    let mut tokens = 0;
    let mut run = 0usize;
    for c in text.chars() {
        if c.is_alphanumeric() && !is_cjk(c) {
            run += 1;
            continue;
        }
        if run > 0 {
            tokens += 1 + run / 8;
            run = 0;
        }
        if !c.is_whitespace() {
            tokens += 1;
        }
    }
    if run > 0 {
        tokens += 1 + run / 8;
    }
    tokens
}

/// CJK ideographs and kana are one piece each in multilingual vocabularies.
fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

#[cfg(test)]
mod tests {
    use super::estimate_tokens;

    #[test]
    fn counts_words_punctuation_and_long_runs() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("   \n"), 0);
        assert_eq!(estimate_tokens("The cat sat."), 4);
        assert_eq!(estimate_tokens("v1.2.3"), 5);
        assert_eq!(estimate_tokens("internationalization"), 3);
        assert_eq!(estimate_tokens("日本語"), 3);
    }
}
