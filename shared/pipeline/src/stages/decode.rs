//! Decode stage: a message's bytes into an [`Event`] (`casement_events::decode`), or a
//! rejection with its reason. An event a local source built is not decoded again, but its
//! content is held to the same size limit (`events.max_event_bytes`).

use std::time::Instant;

use casement_events::{Change, DecodeConfig, Event, decode, native_json};

use crate::metrics::Metrics;
use crate::outcome::{Reason, Stage};
use crate::source::Body;

/// What a dead letter keeps of a message: the bytes it came as, or, for an event a local
/// source built, the event's native JSON (made only if it is dead-lettered).
#[derive(Debug)]
pub enum Original {
    /// `None`: a Kafka tombstone.
    Bytes(Option<Vec<u8>>),
    Built,
}

impl Original {
    /// The dead letter's payload for `event`.
    pub fn payload(self, event: &Event) -> Option<Vec<u8>> {
        match self {
            Self::Bytes(bytes) => bytes,
            Self::Built => native_json(event),
        }
    }
}

/// A decoded event and what its dead letter would keep.
#[derive(Debug)]
pub struct Decoded {
    pub event: Box<Event>,
    pub original: Original,
}

/// Why a message is not an event: the dead letter's reason, detail and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub reason: Reason,
    pub detail: String,
    pub payload: Option<Vec<u8>>,
}

pub fn run(
    body: Body,
    key: Option<&[u8]>,
    config: &DecodeConfig,
    metrics: &Metrics,
) -> Result<Decoded, Rejected> {
    let started = Instant::now();
    let decoded = match body {
        Body::Bytes(bytes) => match decode(bytes.as_deref(), key, config) {
            Ok(event) => Ok(Decoded {
                event: Box::new(event),
                original: Original::Bytes(bytes),
            }),
            Err(rejection) => Err(Rejected {
                reason: Reason::of_rejection(rejection.reason),
                detail: rejection.message,
                payload: bytes,
            }),
        },
        Body::Event(mut event) => {
            // A local source's event (a watched file, the webhook's) that does not say
            // who may read it gets the default, as a decoded one does.
            config.access.resolve(&mut event);
            within_limit(event, config)
        }
    };
    metrics.stage(Stage::Decode, started.elapsed());
    decoded
}

fn within_limit(event: Box<Event>, config: &DecodeConfig) -> Result<Decoded, Rejected> {
    match &event.change {
        Change::Upsert(revision) | Change::Restore(revision)
            if revision.content.len() > config.max_event_bytes =>
        {
            Err(Rejected {
                reason: Reason::TooLarge,
                detail: format!(
                    "{} bytes of content, over max_event_bytes = {}",
                    revision.content.len(),
                    config.max_event_bytes
                ),
                payload: native_json(&event),
            })
        }
        _ => match event.check_limits() {
            // The limits every decoded event meets (id length, revision range).
            Err(rejection) => Err(Rejected {
                reason: Reason::of_rejection(rejection.reason),
                detail: rejection.message,
                payload: native_json(&event),
            }),
            Ok(()) => Ok(Decoded {
                event,
                original: Original::Built,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use casement_text::{Format, Revision};

    use super::*;

    fn built(content: &str) -> Body {
        Body::Event(Box::new(Event {
            change: Change::Upsert(Revision {
                access: None,
                metadata: Default::default(),
                doc_id: "kb/a".into(),
                revision: 3,
                title: Some("A".into()),
                url: None,
                tenant: None,
                format: Format::Markdown,
                content: content.into(),
                revision_url: None,
            }),
            format: casement_events::EventFormat::Native,
        }))
    }

    #[test]
    fn a_built_event_over_the_limit_is_rejected_with_its_native_json() {
        let config = DecodeConfig {
            max_event_bytes: 8,
            ..DecodeConfig::default()
        };
        let Err(rejected) = run(
            built("# A\n\nlonger than eight"),
            None,
            &config,
            &Metrics::new(),
        ) else {
            panic!("over the limit");
        };
        assert_eq!(rejected.reason, Reason::TooLarge);
        let payload = rejected.payload.expect("the event as native JSON");
        let json: serde_json::Value = serde_json::from_slice(&payload).expect("JSON");
        assert_eq!(
            (json["doc_id"].as_str(), json["revision"].as_u64()),
            (Some("kb/a"), Some(3))
        );
        assert_eq!(json["content"], "# A\n\nlonger than eight");
    }

    #[test]
    fn bytes_keep_their_original_and_a_built_event_is_not_decoded_again() {
        let config = DecodeConfig::default();
        let bytes = br#"{"type":"delete","doc_id":"kb/a","revision":2}"#.to_vec();
        let decoded = run(
            Body::Bytes(Some(bytes.clone())),
            None,
            &config,
            &Metrics::new(),
        )
        .expect("a native delete");
        assert!(matches!(decoded.original, Original::Bytes(Some(ref b)) if *b == bytes));
        let decoded = run(built("# A\n\nText."), None, &config, &Metrics::new()).expect("built");
        assert!(matches!(decoded.original, Original::Built));
        let Err(rejected) = run(
            Body::Bytes(Some(b"{oops".to_vec())),
            None,
            &config,
            &Metrics::new(),
        ) else {
            panic!("not JSON");
        };
        assert_eq!(rejected.reason, Reason::NotJson);
        assert_eq!(rejected.payload.as_deref(), Some(&b"{oops"[..]));
    }
}
