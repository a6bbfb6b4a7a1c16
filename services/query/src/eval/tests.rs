#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use super::Error;
use super::golden::{GoldenCase, GoldenSet, NumberedCase};
use super::score::{Report, judge, normalise};
use crate::api::{Scores, WindowAnswer};

fn parse(text: &str) -> Result<GoldenSet, Error> {
    GoldenSet::parse(Path::new("golden.jsonl"), text)
}

fn line_error(text: &str) -> (usize, String) {
    match parse(text) {
        Err(Error::Line { line, reason, .. }) => (line, reason),
        other => panic!("expected a line error, got {other:?}"),
    }
}

#[test]
fn cases_are_read_with_their_line_numbers_blank_lines_skipped() {
    let set = parse(concat!(
        r#"{"query": "How long?", "doc_id": "a"}"#,
        "\n\n",
        r#"{"id": "leave", "query": "Leave?", "doc_id": "b", "text": "ten days", "tenant": "acme"}"#,
        "\n",
    ))
    .unwrap();
    assert_eq!(set.cases.len(), 2);
    assert_eq!(set.cases[0].line, 1);
    assert_eq!(set.cases[0].name(), "line 1");
    assert_eq!(set.cases[1].line, 3);
    assert_eq!(set.cases[1].name(), "leave");
    assert_eq!(set.cases[1].case.tenant.as_deref(), Some("acme"));
    assert_eq!(set.cases[1].case.text.as_deref(), Some("ten days"));
}

#[test]
fn a_bad_line_fails_the_file_with_its_number() {
    let good = r#"{"query": "q", "doc_id": "a"}"#;
    let (line, reason) = line_error(&format!("{good}\n{{\"query\": \"q\", \"doc\": \"a\"}}\n"));
    assert_eq!(line, 2);
    assert!(reason.contains("unknown field `doc`"), "{reason}");
    let (line, reason) = line_error(&format!("{good}\n\nnot json\n"));
    assert_eq!(line, 3);
    assert!(reason.contains("expected"), "{reason}");
    let (line, reason) = line_error(r#"{"query": "q"}"#);
    assert_eq!(line, 1);
    assert!(reason.contains("missing field `doc_id`"), "{reason}");
    for (case, needle) in [
        (r#"{"query": "  ", "doc_id": "a"}"#, "`query`"),
        (r#"{"query": "q", "doc_id": ""}"#, "`doc_id`"),
        (r#"{"query": "q", "doc_id": "a", "text": " "}"#, "`text`"),
        (r#"{"query": "q", "doc_id": "a", "tenant": ""}"#, "`tenant`"),
    ] {
        let (line, reason) = line_error(case);
        assert_eq!(line, 1);
        assert!(reason.contains(needle), "{case}: {reason}");
    }
    let (line, reason) = line_error(&format!(
        "{}\n{}\n",
        r#"{"id": "x", "query": "q", "doc_id": "a"}"#,
        r#"{"id": "x", "query": "r", "doc_id": "b"}"#
    ));
    assert_eq!(line, 2);
    assert!(reason.contains("already used on line 1"), "{reason}");
}

#[test]
fn errors_name_the_path_and_line() {
    let error = parse("{}\n").unwrap_err().to_string();
    assert!(
        error.starts_with("golden set golden.jsonl, line 1: "),
        "{error}"
    );
    assert!(matches!(parse("\n \n"), Err(Error::Empty { .. })));
    let missing = GoldenSet::load(Path::new("/no/such/golden.jsonl")).unwrap_err();
    assert!(
        missing.to_string().contains("/no/such/golden.jsonl"),
        "{missing}"
    );
}

fn case(doc_id: &str, text: Option<&str>, tenant: Option<&str>) -> NumberedCase {
    NumberedCase {
        line: 7,
        case: GoldenCase {
            id: None,
            query: "q".into(),
            doc_id: doc_id.into(),
            text: text.map(str::to_owned),
            tenant: tenant.map(str::to_owned),
        },
    }
}

fn window(doc_id: &str, text: &str) -> WindowAnswer {
    WindowAnswer {
        doc_id: doc_id.into(),
        title: String::new(),
        url: None,
        revision_url: None,
        tenant: None,
        metadata: Default::default(),
        section_path: vec!["Section".into()],
        revision: 1,
        text: text.into(),
        char_start: 0,
        char_end: text.chars().count(),
        source_start: None,
        source_end: None,
        links: Vec::new(),
        matches: Vec::new(),
        scores: Scores {
            fused: 0.5,
            rerank: None,
            similarity: 0.0,
            relevance: 0.0,
        },
        tokens: 1,
    }
}

#[test]
fn text_is_compared_whitespace_collapsed_and_case_insensitive() {
    assert_eq!(
        normalise("  Wait up\n to 5\tBusiness  days "),
        "wait up to 5 business days"
    );
    let windows = [
        window("other", "Wait up to 5 business days."),
        window("a", "Something else."),
        window(
            "a",
            "Step 3.\nWait  up to 5\n   BUSINESS days for the change.",
        ),
    ];
    let result = judge(
        &case("a", Some("wait up to 5 business days"), None),
        &windows,
        5,
    );
    assert_eq!(result.rank, Some(3));
    assert_eq!(result.document_rank, Some(2));
    assert_eq!(result.first.as_ref().unwrap().doc_id, "other");
    // Without text, the document's first window counts.
    assert_eq!(judge(&case("a", None, None), &windows, 5).rank, Some(2));
}

#[test]
fn only_the_first_k_windows_count() {
    let windows = [window("x", "one"), window("y", "two"), window("a", "three")];
    assert_eq!(judge(&case("a", None, None), &windows, 3).rank, Some(3));
    let result = judge(&case("a", None, None), &windows, 2);
    assert_eq!(result.rank, None);
    assert_eq!(result.document_rank, None);
    let text_missing = judge(&case("a", Some("four"), None), &windows, 3);
    assert!(!text_missing.passed());
    assert_eq!(text_missing.document_rank, Some(3));
}

#[test]
fn a_document_is_its_id_within_its_tenant() {
    let mut theirs = window("a", "text");
    theirs.tenant = Some("other".into());
    let mut ours = window("a", "text");
    ours.tenant = Some("acme".into());
    assert_eq!(
        judge(&case("a", None, Some("acme")), &[theirs.clone()], 5).rank,
        None
    );
    assert_eq!(
        judge(&case("a", None, None), &[theirs.clone()], 5).rank,
        None
    );
    assert_eq!(
        judge(&case("a", None, Some("acme")), &[theirs, ours], 5).rank,
        Some(2)
    );
}

#[test]
fn recall_and_mrr_over_the_set() {
    let hit_at = |rank: usize| {
        let mut windows: Vec<WindowAnswer> = (1..rank).map(|_| window("x", "no")).collect();
        windows.push(window("a", "yes"));
        judge(&case("a", None, None), &windows, 5)
    };
    let miss = judge(&case("a", None, None), &[window("x", "no")], 5);
    let report = Report::new(5, vec![hit_at(1), hit_at(2), hit_at(4), miss]);
    assert_eq!((report.queries, report.passed, report.failures), (4, 3, 1));
    assert!((report.recall - 0.75).abs() < 1e-12);
    assert!((report.mrr - (1.0 + 0.5 + 0.25) / 4.0).abs() < 1e-12);
    assert_eq!(report.summary(), "3/4 passed (recall@5 0.75, MRR@5 0.44)");
    let text = report.render();
    assert!(text.starts_with("golden set: 3/4 passed"), "{text}");
    assert!(text.contains("FAIL line 7: \"q\""), "{text}");
    assert!(text.contains("expected a\n  not in the first 5"), "{text}");
    assert!(text.contains("first: x › Section: no"), "{text}");
    assert_eq!(text.matches("FAIL").count(), 1);
    let empty = Report::new(5, Vec::new());
    assert_eq!((empty.recall, empty.mrr), (0.0, 0.0));
}

#[test]
fn the_report_serialises_each_case_flat() {
    let report = Report::new(5, vec![judge(&case("a", Some("t"), None), &[], 5)]);
    let json = serde_json::to_value(&report).unwrap();
    let first = &json["cases"][0];
    assert_eq!(first["name"], "line 7");
    assert_eq!(first["line"], 7);
    assert_eq!(first["doc_id"], "a");
    assert_eq!(first["text"], "t");
    assert!(first["rank"].is_null());
    assert_eq!(json["failures"], 1);
}
