//! The collection schema both backends create, and the mapping between Casement's records
//! and point payloads (DESIGN.md, "Point model").
//!
//! One collection holds two kinds of points, told apart by the `kind` payload field:
//! - `sentence`: one per indexed sentence, with a dense vector (`dense`, cosine) and a
//!   BM25 sparse vector (`bm25`, IDF modifier) and the `SentenceRecord` as payload;
//! - `document`: one per document, without vectors, holding its `DocumentState` (indexed
//!   revision, or the tombstone of a delete). It is written after the document's sentences,
//!   so it never claims a revision whose points are not all in place;
//! - `settings`: one per index, without vectors: what its vectors and windows were made
//!   with ([`crate::IndexSettings`]).

use casement_text::{DocRef, DocumentState, SentenceRecord};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};

pub const DENSE_VECTOR: &str = "dense";
pub const SPARSE_VECTOR: &str = "bm25";

pub const KIND: &str = "kind";
pub const KIND_SENTENCE: &str = "sentence";
pub const KIND_DOCUMENT: &str = "document";
pub const KIND_SETTINGS: &str = "settings";

/// The id of the index's settings point.
pub fn settings_point_id() -> Uuid {
    Uuid::new_v5(&DOCUMENT_ID_NAMESPACE, b"\0casement index settings")
}

pub fn settings_payload(settings: &crate::IndexSettings) -> Result<Map<String, Value>> {
    let mut map = match serde_json::to_value(settings) {
        Ok(Value::Object(map)) => map,
        other => {
            return Err(Error::Payload {
                doc_id: "(index settings)".into(),
                message: format!("not an object: {other:?}"),
            });
        }
    };
    map.insert(KIND.to_owned(), Value::from(KIND_SETTINGS));
    Ok(map)
}

pub fn settings_from_payload(mut payload: Map<String, Value>) -> Result<crate::IndexSettings> {
    payload.remove(KIND);
    serde_json::from_value(Value::Object(payload)).map_err(|e| Error::Payload {
        doc_id: "(index settings)".into(),
        message: e.to_string(),
    })
}

/// Payload indexes: what filters and scrolls select on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Keyword,
    Integer,
    Bool,
}

pub const INDEXED_FIELDS: [(&str, FieldType); 7] = [
    ("doc_id", FieldType::Keyword),
    ("tenant", FieldType::Keyword),
    ("section_id", FieldType::Keyword),
    ("revision", FieldType::Integer),
    (KIND, FieldType::Keyword),
    // Who may read a point's document (`SentenceRecord::public`, `access_groups`): every
    // reader's query filters on them inside the engine.
    (ACCESS_GROUPS, FieldType::Keyword),
    (PUBLIC, FieldType::Bool),
];

/// The payload field of a point's readers' groups.
pub const ACCESS_GROUPS: &str = "access_groups";
/// The payload field that makes a point's document readable by every reader.
pub const PUBLIC: &str = "public";

/// The payload field of a metadata key (`metadata.<key>`).
pub fn metadata_field(key: &str) -> String {
    format!("metadata.{key}")
}

/// Every payload index of a store: [`INDEXED_FIELDS`] and one keyword index per key of
/// `store.indexed_metadata`.
pub fn indexed_fields(indexed_metadata: &[String]) -> Vec<(String, FieldType)> {
    INDEXED_FIELDS
        .iter()
        .map(|(field, kind)| ((*field).to_owned(), *kind))
        .chain(
            indexed_metadata
                .iter()
                .map(|key| (metadata_field(key), FieldType::Keyword)),
        )
        .collect()
}

/// Namespace of document-state point ids (distinct from sentence ids').
const DOCUMENT_ID_NAMESPACE: Uuid = Uuid::from_u128(0x2f0b_94c1_5d6e_4a37_8c1f_7e59_b3a0_64d2);

/// Namespace of the state point ids of a tenant's documents.
const TENANT_DOCUMENT_ID_NAMESPACE: Uuid =
    Uuid::from_u128(0x58c4_0e7b_d219_4a6f_a3d0_91b6_2e7c_f045);

/// The id of a document's state point: from its id within its tenant (the tenant first,
/// with its length, in a namespace of its own), so two tenants' documents never share one.
pub fn document_point_id(doc: DocRef<'_>) -> Uuid {
    match doc.tenant {
        None => Uuid::new_v5(&DOCUMENT_ID_NAMESPACE, doc.doc_id.as_bytes()),
        Some(tenant) => {
            let key = format!("{}:{tenant}\0{}", tenant.len(), doc.doc_id);
            Uuid::new_v5(&TENANT_DOCUMENT_ID_NAMESPACE, key.as_bytes())
        }
    }
}

pub(crate) fn check_revision(revision: u64) -> Result<i64> {
    i64::try_from(revision).map_err(|_| Error::RevisionRange(revision))
}

/// A struct as a JSON object (the payload of a point of `doc_id`).
fn object<T: serde::Serialize>(value: &T, doc_id: &str) -> Result<Map<String, Value>> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => unreachable!("a struct serialises to a JSON object"),
        Err(e) => Err(Error::Payload {
            doc_id: doc_id.to_owned(),
            message: e.to_string(),
        }),
    }
}

/// A sentence record as a payload: every field but `id` (the point id), plus `kind`.
pub fn sentence_payload(record: &SentenceRecord) -> Result<Map<String, Value>> {
    check_revision(record.revision)?;
    let mut map = object(record, &record.doc_id)?;
    map.remove("id");
    map.insert(KIND.to_owned(), Value::from(KIND_SENTENCE));
    Ok(map)
}

/// A payload back into its struct; `what` names it in the error.
fn from_object<T: serde::de::DeserializeOwned>(
    mut payload: Map<String, Value>,
    what: &str,
) -> Result<T> {
    payload.remove(KIND);
    let doc_id = payload
        .get("doc_id")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    serde_json::from_value(Value::Object(payload)).map_err(|e| Error::Payload {
        doc_id,
        message: format!("{what}: {e}"),
    })
}

pub fn sentence_from_payload(id: Uuid, mut payload: Map<String, Value>) -> Result<SentenceRecord> {
    payload.insert("id".to_owned(), Value::from(id.to_string()));
    from_object(payload, &format!("point {id}"))
}

pub fn document_payload(state: &DocumentState) -> Result<Map<String, Value>> {
    check_revision(state.revision)?;
    let mut map = object(state, &state.doc_id)?;
    map.insert(KIND.to_owned(), Value::from(KIND_DOCUMENT));
    Ok(map)
}

pub fn document_from_payload(payload: Map<String, Value>) -> Result<DocumentState> {
    from_object(payload, "document state")
}

#[cfg(test)]
mod tests {
    use casement_text::{Format, Revision, TextConfig, plan_upsert};

    use super::*;

    #[test]
    fn records_and_states_round_trip_through_payloads() {
        let revision = Revision {
            access: None,
            metadata: Default::default(),
            doc_id: "d".into(),
            revision: 3,
            title: Some("T".into()),
            format: Format::Markdown,
            content: "# A\n\nOne sentence. Two sentences.\n".into(),
            tenant: Some("acme".into()),
            url: Some("https://x/d".into()),
            revision_url: None,
        };
        let (plan, _) = plan_upsert(&[], &revision, &TextConfig::default()).expect("plan");
        for record in &plan.embed {
            let payload = sentence_payload(record).expect("payload");
            assert!(!payload.contains_key("id"));
            assert_eq!(payload[KIND], KIND_SENTENCE);
            assert_eq!(
                &sentence_from_payload(record.id, payload).expect("back"),
                record
            );
        }
        let payload = document_payload(&plan.document).expect("payload");
        assert_eq!(document_from_payload(payload).expect("back"), plan.document);
    }

    #[test]
    fn a_revision_beyond_i64_is_an_error() {
        assert!(matches!(
            check_revision(u64::MAX),
            Err(Error::RevisionRange(_))
        ));
    }
}
