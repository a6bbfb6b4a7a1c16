//! The bodies of the coverage-guided fuzz targets (`fuzz/`, `make fuzz`), shared with the
//! test that replays every input they ever failed on (`fuzz/regressions/<target>/`) in
//! `make test`. Each takes arbitrary bytes and panics only on a broken invariant.

use casement_events::{DecodeConfig, EventFormat};
use casement_text::{
    Format, MemoryIndex, Revision, TextConfig, build_records, plan_upsert, segment,
};

/// libFuzzer aborts on any panic, also one the code catches and handles. The wikitext
/// extractor catches the panics of its parser (a bug of parse-wiki-text-2; `make fuzz`
/// found one: a slice inside a character) and falls back to plain text, as it does in
/// production. This hook lets those unwind to that handler and leaves every other panic to
/// libFuzzer's hook, which aborts. Called once, from each target's `init`.
pub fn tolerate_handled_parser_panics() {
    let libfuzzer = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_parser = info
            .location()
            .is_some_and(|location| location.file().contains("parse-wiki-text-2"));
        if !in_parser {
            libfuzzer(info);
        }
    }));
}

const FORMATS: [Format; 4] = [
    Format::Markdown,
    Format::Html,
    Format::Text,
    Format::Wikitext,
];

/// A revision from fuzz bytes: the first byte picks the format and the window radius, the
/// rest (lossily UTF-8) is the content.
fn revision(data: &[u8], number: u64) -> Option<(Revision, TextConfig)> {
    let (&first, rest) = data.split_first()?;
    let config = TextConfig {
        window_radius: usize::from(first >> 4) % 6,
        ..TextConfig::default()
    };
    let revision = Revision {
        access: None,
        doc_id: "fuzz".into(),
        revision: number,
        title: None,
        url: None,
        tenant: None,
        format: FORMATS[usize::from(first) % FORMATS.len()],
        content: String::from_utf8_lossy(rest).into_owned(),
        metadata: Default::default(),
        revision_url: None,
    };
    Some((revision, config))
}

/// Any bytes as any of the four formats: extraction and segmentation either refuse with
/// an error or give sections and sentences inside the text, in order, and records whose
/// offsets, windows and sentences agree.
pub fn extract_and_segment(data: &[u8]) {
    let Some((revision, config)) = revision(data, 1) else {
        return;
    };
    let Ok(segmented) = segment(&revision, &config) else {
        return;
    };
    let text = &segmented.text;
    let mut previous_end = 0;
    for section in &segmented.sections {
        assert!(section.range.start <= section.range.end && section.range.end <= text.len());
        for sentence in &section.sentences {
            assert!(
                sentence.start < sentence.end,
                "an empty sentence {sentence:?} in {:?}",
                section.range
            );
            assert!(
                section.range.start <= sentence.start && sentence.end <= section.range.end,
                "sentence {sentence:?} outside its section {:?}",
                section.range
            );
            assert!(sentence.start >= previous_end, "sentences out of order");
            assert!(
                text.get(sentence.clone()).is_some(),
                "not on char boundaries"
            );
            previous_end = sentence.end;
        }
    }
    let records = build_records(&segmented, &config);
    assert_eq!(records.len(), segmented.sentence_count());
    let chars: Vec<char> = text.chars().collect();
    for record in &records {
        let slice = |start: usize, end: usize| -> String { chars[start..end].iter().collect() };
        assert!(record.char_start < record.char_end && record.char_end <= chars.len());
        assert_eq!(slice(record.char_start, record.char_end), record.sentence);
        assert!(
            record.window_char_start <= record.char_start
                && record.char_end <= record.window_char_end
        );
        assert_eq!(
            slice(record.window_char_start, record.window_char_end),
            record.window
        );
    }
    let ids: std::collections::HashSet<_> = records.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), records.len(), "two points with one id");
}

/// Any bytes as an event body in every format setting (and as a Kafka key): decoded or
/// rejected with a reason the dead letters know; never a panic.
pub fn decode_event(data: &[u8]) {
    for format in [
        EventFormat::Auto,
        EventFormat::Native,
        EventFormat::Cloudevents,
        EventFormat::Debezium,
        EventFormat::Mediawiki,
    ] {
        let config = DecodeConfig {
            format,
            ..DecodeConfig::default()
        };
        match casement_events::decode(Some(data), Some(data), &config) {
            Ok(event) => {
                assert!(!event.doc_id().is_empty(), "an event without a document id");
            }
            Err(rejection) => {
                assert!(
                    casement_events::REASONS.contains(&rejection.reason),
                    "unknown reason {:?}",
                    rejection.reason
                );
            }
        }
        let _ = casement_events::decode(None, Some(data), &config);
    }
}

/// Two revisions from the bytes (split at the first 0xFF): indexing the first, then the
/// second over it through the differ's plan, gives exactly the index a rebuild of the
/// second gives (ids, payloads, vectors kept or made, document state); planning again
/// finds nothing to do.
pub fn diff_pair(data: &[u8]) {
    let split = data
        .iter()
        .position(|&b| b == 0xFF)
        .unwrap_or(data.len() / 2);
    let (first, second) = (&data[..split], &data[(split + 1).min(data.len())..]);
    let (Some((old, config)), Some((mut new, _))) = (revision(first, 1), revision(second, 2))
    else {
        return;
    };
    // Same document: the second takes the first's format half the time.
    if second.first().is_some_and(|b| b & 1 == 0) {
        new.format = old.format;
    }
    let mut index = MemoryIndex::new();
    let Ok((plan, _)) = plan_upsert(&[], &old, &config) else {
        return;
    };
    index.apply(&plan);
    let Ok((plan, _)) = plan_upsert(&index.records("fuzz"), &new, &config) else {
        return;
    };
    index.apply(&plan);
    let mut rebuilt = MemoryIndex::new();
    let (from_scratch, _) = plan_upsert(&[], &new, &config).expect("planned once already");
    rebuilt.apply(&from_scratch);
    assert_eq!(
        index.document("fuzz"),
        rebuilt.document("fuzz"),
        "document state"
    );
    let records = |index: &MemoryIndex| {
        index
            .points("fuzz")
            .map(|points| {
                points
                    .iter()
                    .map(|(id, p)| (*id, p.record.clone()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert_eq!(records(&index), records(&rebuilt), "points after the plan");
    let (again, _) = plan_upsert(&index.records("fuzz"), &new, &config).expect("plans");
    assert!(
        again.is_noop(),
        "a second plan of the same revision: {again:?}"
    );
}
