//! Events back to Casement's native JSON: what a dead letter keeps of an event that a local
//! source built itself (a revision log line, a watched file), which has no original bytes.

use crate::{Change, Event, NativeEvent, NativeType};

/// The native event of `event`, as JSON bytes (`None` for a revision to fetch, which only
/// comes from bytes of its own format, kept as they came).
pub fn native_json(event: &Event) -> Option<Vec<u8>> {
    let native = match &event.change {
        Change::Fetch(_) => return None,
        Change::Upsert(revision) | Change::Restore(revision) => NativeEvent {
            kind: NativeType::Upsert,
            doc_id: revision.doc_id.clone(),
            revision: revision.revision,
            title: revision.title.clone(),
            format: Some(revision.format.to_string()),
            content: Some(revision.content.clone()),
            tenant: revision.tenant.clone(),
            url: revision.url.clone(),
            revision_url: revision.revision_url.clone(),
            metadata: revision.metadata.clone(),
            access: revision.access.clone(),
            event_time: None,
        },
        Change::Delete {
            doc_id,
            tenant,
            revision,
        } => NativeEvent {
            tenant: tenant.clone(),
            ..NativeEvent::delete(doc_id, revision.unwrap_or_default())
        },
    };
    serde_json::to_vec(&native).ok()
}
