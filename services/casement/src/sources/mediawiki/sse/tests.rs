use proptest::prelude::*;

use super::*;

fn events(parsed: Vec<Parsed>) -> Vec<SseEvent> {
    parsed
        .into_iter()
        .map(|p| match p {
            Parsed::Event(event) => event,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn the_parser_reads_events_across_chunks() {
    let mut parser = SseParser::new(1 << 20);
    let mut parsed = parser.push(b": ok\n\nevent: message\nid: [{\"offset\":1}]\ndata: {\"a\":");
    assert!(parsed.is_empty());
    parsed.extend(parser.push(b"1}\r\n\r\ndata: x\ndata: y\nretry: 2500\n\n"));
    assert_eq!(
        events(parsed),
        vec![
            SseEvent {
                id: Some("[{\"offset\":1}]".into()),
                event: Some("message".into()),
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                id: None,
                event: None,
                data: "x\ny".into(),
            },
        ]
    );
    assert_eq!(parser.retry_ms, Some(2500));
}

/// Lines ending in a lone CR are lines (the standard allows CRLF, LF and CR), also when
/// the CR of a CRLF ends one chunk and its LF starts the next.
#[test]
fn a_lone_cr_ends_a_line() {
    let mut parser = SseParser::new(1 << 20);
    let parsed = parser.push(b"data: one\r\rdata: two\r\r");
    assert_eq!(
        events(parsed)
            .into_iter()
            .map(|e| e.data)
            .collect::<Vec<_>>(),
        ["one", "two"]
    );
    let mut parsed = parser.push(b"data: three\r");
    parsed.extend(parser.push(b"\n\r"));
    parsed.extend(parser.push(b"\ndata: four\n\n"));
    assert_eq!(
        events(parsed)
            .into_iter()
            .map(|e| e.data)
            .collect::<Vec<_>>(),
        ["three", "four"]
    );
}

/// A line or an event over the cap is discarded as it arrives (memory stays within the
/// cap), reported with its length, and the next event is read as usual.
#[test]
fn an_event_over_the_cap_is_reported_and_the_next_one_is_read() {
    let mut parser = SseParser::new(1000);
    let mut parsed = parser.push(b"id: 1\ndata: ");
    for _ in 0..100 {
        parsed.extend(parser.push(&[b'x'; 10_000]));
        assert!(parser.line.len() <= 1000);
    }
    parsed.extend(parser.push(b"\n\ndata: good\nid: 2\n\n"));
    assert_eq!(
        parsed,
        vec![
            Parsed::TooLarge {
                bytes: 1_000_000 + "id: 1\n".len() + "data: \n".len()
            },
            Parsed::Event(SseEvent {
                id: Some("2".into()),
                event: None,
                data: "good".into(),
            }),
        ]
    );
    // Many short data lines without a blank line: one event over the cap, not 300 MB.
    let mut parser = SseParser::new(1000);
    let mut parsed = Vec::new();
    for _ in 0..10_000 {
        parsed.extend(parser.push(b"data: 0123456789\n"));
        assert!(parser.current.data.len() <= 1000);
    }
    parsed.extend(parser.push(b"\ndata: next\n\n"));
    assert_eq!(parsed.len(), 2);
    assert_eq!(parsed[0], Parsed::TooLarge { bytes: 170_000 });
    assert!(matches!(&parsed[1], Parsed::Event(e) if e.data == "next"));
}

/// A 60 MB line costs linear time: fed in 16 KiB chunks it is parsed in well under a
/// second (the quadratic search took over a minute).
#[test]
fn a_huge_line_is_read_in_linear_time() {
    let mut parser = SseParser::new(4 << 20);
    let chunk = vec![b'x'; 16 * 1024];
    parser.push(b"data: ");
    let mut ops = 0usize;
    for _ in 0..(60 << 20) / chunk.len() {
        ops += parser.push(&chunk).len();
    }
    parser.push(b"\n\n");
    assert_eq!(ops, 0);
    // Counting, not timing: the line kept is the cap, not the 60 MB.
    assert!(parser.line.capacity() <= 8 << 20);
}

/// Ids that could not be sent back as a header (a control character, non-ASCII) are
/// ignored: never saved, never sent.
#[test]
fn ids_that_are_not_header_values_are_ignored() {
    let mut parser = SseParser::new(1 << 20);
    let parsed = parser.push(
        "id: poison\u{1}id\ndata: a\n\nid: caf\u{e9}\ndata: b\n\nid: ok-1\ndata: c\n\n".as_bytes(),
    );
    let ids: Vec<_> = events(parsed).into_iter().map(|e| e.id).collect();
    assert_eq!(ids, [None, None, Some("ok-1".to_owned())]);
    assert!(!is_header_value("a\nb") && is_header_value("[{\"topic\":\"x\",\"partition\":0}]"));
}

/// The standard's parse of a whole stream, line by line (the reference the chunked parser
/// must agree with).
fn reference(stream: &[u8]) -> Vec<SseEvent> {
    let text = String::from_utf8_lossy(stream)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut out = Vec::new();
    let mut current = SseEvent::default();
    let mut has_data = false;
    for line in text.split('\n') {
        if line.is_empty() {
            if has_data {
                out.push(std::mem::take(&mut current));
            } else {
                current = SseEvent::default();
            }
            has_data = false;
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if has_data {
                    current.data.push('\n');
                }
                current.data.push_str(value);
                has_data = true;
            }
            "id" if is_header_value(value) => current.id = Some(value.to_owned()),
            "event" => current.event = Some(value.to_owned()),
            _ => {}
        }
    }
    out
}

fn line_ending() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("\n"), Just("\r"), Just("\r\n")]
}

prop_compose! {
    /// A field line's text: printable, no line ends.
    fn value()(text in "[ -~é]{0,40}") -> String { text }
}

prop_compose! {
    fn event()(
        id in proptest::option::of(value()),
        name in proptest::option::of(value()),
        data in proptest::collection::vec(value(), 0..4),
        comment in proptest::option::of(value()),
    ) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(comment) = comment { lines.push(format!(":{comment}")); }
        if let Some(id) = id { lines.push(format!("id: {id}")); }
        if let Some(name) = name { lines.push(format!("event:{name}")); }
        lines.extend(data.into_iter().map(|d| format!("data: {d}")));
        lines
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any stream, any line endings, cut into chunks anywhere: the same events as the
    /// reference parse of the whole stream.
    #[test]
    fn chunking_and_line_endings_do_not_change_the_events(
        events in proptest::collection::vec(event(), 0..8),
        endings in proptest::collection::vec(line_ending(), 64),
        cuts in proptest::collection::vec(0usize..2000, 0..12),
    ) {
        let mut stream = Vec::new();
        let mut n = 0;
        for lines in &events {
            for line in lines.iter().chain(std::iter::once(&String::new())) {
                stream.extend_from_slice(line.as_bytes());
                stream.extend_from_slice(endings[n % endings.len()].as_bytes());
                n += 1;
            }
        }
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.sort_unstable();
        let mut parser = SseParser::new(1 << 20);
        let mut parsed = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain(std::iter::once(stream.len())) {
            parsed.extend(parser.push(&stream[from..cut]));
            from = cut;
        }
        // One more line end settles a stream that stops mid-line (or after a CR that a
        // LF may still follow), in both.
        parsed.extend(parser.push(b"\n"));
        let expected = reference(&[stream.as_slice(), b"\n"].concat());
        prop_assert_eq!(events_of(parsed), expected);
    }

    /// Whatever the bytes, the parser keeps at most the cap in memory and reports every
    /// event over it with a length above the cap.
    #[test]
    fn memory_stays_within_the_cap(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..600), 0..20),
    ) {
        let mut parser = SseParser::new(256);
        for chunk in &chunks {
            for parsed in parser.push(chunk) {
                match parsed {
                    Parsed::TooLarge { bytes } => prop_assert!(bytes > 256),
                    Parsed::Event(event) => prop_assert!(event.data.len() <= 256 * 3),
                }
            }
            prop_assert!(parser.line.len() <= 256);
            prop_assert!(parser.current.data.len() <= 256 * 3);
        }
    }
}

fn events_of(parsed: Vec<Parsed>) -> Vec<SseEvent> {
    events(parsed)
}
