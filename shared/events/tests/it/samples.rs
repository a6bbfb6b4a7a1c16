//! Decoding the real samples in `../shared/data/events` (and the native schema's example).

use std::path::PathBuf;

use casement_events::{
    Change, DebeziumColumns, DecodeConfig, EventFormat, RevisionRef, decode, detect,
};
use casement_text::Format;
use serde_json::{Value, json};

fn events_dir() -> PathBuf {
    casement_testkit::data("events")
}

fn read(path: &str) -> String {
    let file = events_dir().join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn auto() -> DecodeConfig {
    DecodeConfig::default()
}

#[test]
fn debezium_products_decode_with_mapped_columns() {
    let config = DecodeConfig {
        debezium: DebeziumColumns {
            doc_id_prefix: "products/".into(),
            title: Some("name".into()),
            content: "description".into(),
            format: "text".into(),
            ..DebeziumColumns::default()
        },
        ..auto()
    };
    let lines: Vec<String> = read("debezium/mysql-inventory-products.jsonl")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 16);
    let mut upserts = 0;
    let mut deletes = Vec::new();
    for line in &lines {
        assert_eq!(
            detect(&serde_json::from_str(line).expect("json")),
            EventFormat::Debezium
        );
        let event = decode(Some(line.as_bytes()), None, &config).expect("decodes");
        assert_eq!(event.format, EventFormat::Debezium);
        match event.change {
            Change::Upsert(revision) => {
                upserts += 1;
                assert!(revision.doc_id.starts_with("products/1"));
                assert_eq!(revision.format, Format::Text);
                assert!(!revision.content.is_empty());
                assert!(revision.title.is_some());
            }
            Change::Delete {
                doc_id, revision, ..
            } => deletes.push((doc_id, revision)),
            Change::Fetch(_) | Change::Restore(_) => panic!("Debezium rows are plain upserts"),
        }
    }
    assert_eq!(upserts, 15);
    assert_eq!(
        deletes,
        vec![("products/111".to_owned(), Some(1_589_362_344_000))]
    );
    // The update of 106 carries the new description and the commit time as revision.
    let update = decode(Some(lines[9].as_bytes()), None, &config).expect("update");
    let Change::Upsert(revision) = update.change else {
        panic!("an update upserts")
    };
    assert_eq!(revision.doc_id, "products/106");
    assert_eq!(revision.content, "18oz carpenter hammer");
    assert_eq!(revision.revision, 1_589_361_987_000);
    // A Kafka tombstone (no value) deletes the document named by the key.
    let key = br#"{"schema":{"type":"struct"},"payload":{"id":111}}"#;
    let tombstone = decode(None, Some(key), &config).expect("tombstone");
    assert_eq!(
        tombstone.change,
        Change::Delete {
            tenant: None,
            doc_id: "products/111".into(),
            revision: None
        }
    );
}

/// A `page_change` without its content (what EventBus and EventStreams publish) names a
/// revision to fetch; with the content slot filled it upserts directly.
#[test]
fn mediawiki_page_change_upserts_or_names_the_revision_to_fetch() {
    let example = read("wikimedia/examples/mediawiki-page-change-1.2.0.example1.json");
    let mut json: Value = serde_json::from_str(&example).expect("json");
    assert_eq!(detect(&json), EventFormat::Mediawiki);
    let decoded = |json: &Value| {
        let bytes = serde_json::to_vec(json).expect("json");
        decode(Some(&bytes), None, &auto())
    };
    // The published example is a redirect: nothing to answer with, so it deletes.
    assert_eq!(
        decode(Some(example.as_bytes()), None, &auto())
            .expect("decodes")
            .change,
        Change::Delete {
            tenant: None,
            doc_id: "example:1".into(),
            revision: Some(2)
        }
    );
    json["page"]["is_redirect"] = json!(false);
    // No content body: a revision to fetch from the wiki named by meta.domain.
    let event = decoded(&json).expect("decodes");
    assert_eq!(
        event.change,
        Change::Fetch(RevisionRef {
            // No namespace map: the default (public).
            access: Some(casement_text::Access::public()),
            doc_id: "example:1".into(),
            tenant: None,
            revision: 2,
            domain: "examplewiki".into(),
            title: Some("example".into()),
            url: None,
            restore: false,
        })
    );
    assert!(!event.restores());
    // An undelete may bring back the document deleted at its revision.
    json["page_change_kind"] = json!("undelete");
    assert!(decoded(&json).expect("decodes").restores());
    json["page_change_kind"] = json!("edit");
    // With the content slot filled (a stream configured to carry content), it upserts.
    json["revision"]["content_slots"]["main"]["content_body"] =
        json!("'''Example''' is a page.\n\n== History ==\nIt was edited.");
    let event = decoded(&json).expect("decodes");
    let Change::Upsert(revision) = &event.change else {
        panic!("an edit with content upserts")
    };
    assert_eq!(revision.doc_id, "example:1");
    assert_eq!(revision.revision, 2);
    assert_eq!(revision.format, Format::Wikitext);
    assert_eq!(revision.title.as_deref(), Some("example"));
    assert!(!event.restores());
    // An undelete with its content restores: the same revision, possibly over a tombstone.
    json["page_change_kind"] = json!("undelete");
    let event = decoded(&json).expect("decodes");
    assert!(matches!(&event.change, Change::Restore(r) if r.revision == 2) && event.restores());
    // A delete needs no content.
    let delete = Change::Delete {
        tenant: None,
        doc_id: "example:1".into(),
        revision: Some(2),
    };
    json["page_change_kind"] = json!("delete");
    assert_eq!(decoded(&json).expect("delete").change, delete);
    // Hiding the current revision's content removes the page from answers; showing it
    // again fetches it back.
    json["page_change_kind"] = json!("visibility_change");
    json["revision"]["is_content_visible"] = json!(false);
    assert_eq!(decoded(&json).expect("hidden").change, delete);
    json["revision"]["is_content_visible"] = json!(true);
    let event = decoded(&json).expect("visible");
    assert!(matches!(event.change, Change::Fetch(_)) && event.restores());
    // A kind the schema does not have is rejected, saying which.
    json["page_change_kind"] = json!("merge");
    let rejection = decoded(&json).expect_err("unknown kind");
    assert_eq!(rejection.reason, "unsupported");
    assert!(rejection.message.contains("merge"), "{rejection}");
}

/// `recentchange` events carry no text (only sizes and ids): each is rejected, saying so,
/// rather than indexed as an empty page.
#[test]
fn mediawiki_recentchange_events_are_rejected_as_not_page_change() {
    let sample = read("wikimedia/recentchange.sample.jsonl");
    let mut count = 0;
    for line in sample.lines() {
        let rejection = decode(Some(line.as_bytes()), None, &auto()).expect_err("no text");
        assert_eq!(rejection.reason, "schema");
        assert!(rejection.message.contains("page_change"), "{rejection}");
        count += 1;
    }
    assert_eq!(count, 100);
}

#[test]
fn cloudevents_carry_native_events_and_reject_other_data() {
    // The spec's example envelope, with a native event as its data.
    let mut envelope: Value =
        serde_json::from_str(&read("cloudevents/examples/json-object-data.json")).expect("json");
    assert_eq!(detect(&envelope), EventFormat::Cloudevents);
    // Its own data (appinfoA...) is not a native event.
    let bytes = serde_json::to_vec(&envelope).expect("json");
    assert_eq!(
        decode(Some(&bytes), None, &auto())
            .expect_err("foreign data")
            .reason,
        "schema"
    );
    envelope["data"] = json!({
        "type": "upsert", "doc_id": "kb/42", "revision": 7, "format": "markdown",
        "content": "# Reset\n\nHold the button for ten seconds.", "tenant": "acme"
    });
    let bytes = serde_json::to_vec(&envelope).expect("json");
    let event = decode(Some(&bytes), None, &auto()).expect("decodes");
    assert_eq!(event.format, EventFormat::Cloudevents);
    assert_eq!(event.doc_id(), "kb/42");
    for (file, reason) in [
        ("xml-string-data.json", "unsupported"),
        ("binary-data_base64.json", "unsupported"),
        ("json-number-data.json", "schema"),
    ] {
        let text = read(&format!("cloudevents/examples/{file}"));
        let rejection = decode(Some(text.as_bytes()), None, &auto()).expect_err(file);
        assert_eq!(rejection.reason, reason, "{file}: {rejection}");
    }
}

#[test]
fn bad_bytes_are_rejected_with_their_reason() {
    let config = DecodeConfig {
        max_event_bytes: 64,
        ..auto()
    };
    let reason = |bytes: &[u8]| {
        decode(Some(bytes), Some(b"k"), &config)
            .expect_err("bad")
            .reason
    };
    assert_eq!(reason(&[b'x'; 65]), "too_large");
    assert_eq!(reason(&[0xff, 0xfe, b'{']), "not_utf8");
    assert_eq!(reason(b"{\"type\": "), "not_json");
    assert_eq!(reason(br#"{"type":"upsert","doc_id":"d"}"#), "schema");
    assert_eq!(
        reason(br#"{"type":"upsert","doc_id":"d","revision":1,"format":"md"}"#),
        "no_content"
    );
    assert_eq!(
        reason(br#"{"type":"upsert","doc_id":" ","revision":1}"#),
        "schema"
    );
    assert_eq!(
        reason(br#"{"type":"move","doc_id":"d","revision":1}"#),
        "schema"
    );
    assert_eq!(
        reason(br#"{"type":"delete","doc_id":"d","revision":1,"x":1}"#),
        "schema"
    );
    let delete = decode(
        Some(br#"{"type":"delete","doc_id":"d","revision":3}"#),
        None,
        &config,
    )
    .expect("delete");
    assert_eq!(
        delete.change,
        Change::Delete {
            tenant: None,
            doc_id: "d".into(),
            revision: Some(3)
        }
    );
}

/// The JSON Schema file lists exactly the fields the decoder accepts.
#[test]
fn the_schema_file_is_valid_json_and_names_every_field() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/native-event.schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("schema")).expect("json");
    let properties: Vec<&str> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    let full = json!({
        "type": "upsert", "doc_id": "d", "revision": 1, "title": "T", "format": "html",
        "content": "<p>x</p>", "tenant": "t", "url": "https://x", "metadata": {"a": 1},
        "access": {"groups": ["hr"]}, "event_time": "2026-11-22T10:00:00Z",
        "revision_url": "https://x/index.php?oldid=1"
    });
    for key in full.as_object().expect("object").keys() {
        assert!(properties.contains(&key.as_str()), "{key} is in the schema");
    }
    assert_eq!(properties.len(), full.as_object().expect("object").len());
    let bytes = serde_json::to_vec(&full).expect("json");
    let decoded = decode(Some(&bytes), Some(b"d"), &auto()).expect("the full example decodes");
    let Change::Upsert(revision) = decoded.change else {
        panic!("an upsert: {:?}", decoded.change)
    };
    assert_eq!(
        revision.revision_url.as_deref(),
        Some("https://x/index.php?oldid=1"),
        "the revision's own address travels with it"
    );
}

/// Who may read a document travels in every format: the native event's (and a CloudEvent's)
/// `access`, a Debezium column, a MediaWiki namespace mapped to groups; an event that says
/// nothing gets `[access] default`; a bad group is rejected (`schema`).
#[test]
fn access_travels_in_every_format_and_defaults_from_config() {
    use casement_events::{AccessConfig, AccessDefault};
    use casement_text::Access;
    let access_of = |bytes: &[u8], config: &DecodeConfig| match decode(Some(bytes), None, config)
        .expect("decodes")
        .change
    {
        Change::Upsert(revision) | Change::Restore(revision) => revision.access,
        Change::Fetch(reference) => reference.access,
        Change::Delete { .. } => panic!("a delete"),
    };
    let native = |access: Value| {
        let mut event = json!({"type": "upsert", "doc_id": "hr/leave", "revision": 3,
            "format": "markdown", "content": "# Leave\n\nSixteen weeks.\n"});
        if !access.is_null() {
            event["access"] = access;
        }
        serde_json::to_vec(&event).expect("json")
    };
    let deny = auto().with_access(AccessConfig {
        default: AccessDefault::Deny,
        ..AccessConfig::default()
    });
    assert_eq!(
        access_of(&native(json!({"groups": ["staff", "hr", "hr"]})), &auto()),
        Some(Access::groups(["hr", "staff"]))
    );
    assert_eq!(
        access_of(&native(json!({"public": true, "groups": ["hr"]})), &deny),
        Some(Access::public())
    );
    assert_eq!(
        access_of(&native(Value::Null), &auto()),
        Some(Access::public())
    );
    assert_eq!(access_of(&native(Value::Null), &deny), Some(Access::deny()));
    let bad = decode(Some(&native(json!({"groups": [""]}))), None, &auto()).expect_err("bad");
    assert_eq!(bad.reason, "schema");
    assert!(
        decode(Some(&native(json!({"everyone": true}))), None, &auto()).is_err(),
        "unknown keys in access are refused"
    );
    // A CloudEvent's data is a native event.
    let cloud = json!({"specversion": "1.0", "id": "1", "source": "/cms", "type": "page",
        "data": serde_json::from_slice::<Value>(&native(json!({"groups": ["hr"]}))).expect("json")});
    assert_eq!(
        access_of(&serde_json::to_vec(&cloud).expect("json"), &auto()),
        Some(Access::groups(["hr"]))
    );
    // A Debezium column.
    let line = read("debezium/mysql-inventory-products.jsonl")
        .lines()
        .next()
        .expect("line")
        .to_owned();
    let mut row: Value = serde_json::from_str(&line).expect("json");
    let payload = if row.get("payload").is_some() {
        &mut row["payload"]
    } else {
        &mut row
    };
    payload["after"]["acl"] = json!("hr, finance");
    let columns = DecodeConfig {
        debezium: DebeziumColumns {
            content: "description".into(),
            format: "text".into(),
            access: Some("acl".into()),
            ..DebeziumColumns::default()
        },
        ..auto()
    };
    assert_eq!(
        access_of(&serde_json::to_vec(&row).expect("json"), &columns),
        Some(Access::groups(["finance", "hr"]))
    );
    // A MediaWiki namespace mapped to groups (the example's page, moved into namespace 100).
    let mut page: Value = serde_json::from_str(&read(
        "wikimedia/examples/mediawiki-page-change-1.2.0.example1.json",
    ))
    .expect("json");
    page["page"]["is_redirect"] = json!(false);
    let wiki = auto().with_access(AccessConfig {
        mediawiki_namespaces: [("100".to_owned(), vec!["hr".to_owned()])].into(),
        ..AccessConfig::default()
    });
    page["page"]["namespace_id"] = json!(100);
    let bytes = serde_json::to_vec(&page).expect("json");
    assert_eq!(access_of(&bytes, &wiki), Some(Access::groups(["hr"])));
    page["page"]["namespace_id"] = json!(0);
    let bytes = serde_json::to_vec(&page).expect("json");
    assert_eq!(access_of(&bytes, &wiki), Some(Access::public()));
}
