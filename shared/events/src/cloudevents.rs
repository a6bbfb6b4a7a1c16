//! CloudEvents 1.0, structured JSON mode: the envelope's `data` is a native event. The
//! envelope's `time` is the event time when the data has none.

use serde_json::Value;

use crate::native::NativeEvent;
use crate::{Event, EventFormat, Rejection, reject, rfc3339_ms};

pub(crate) fn decode(json: Value) -> Result<Event, Rejection> {
    let version = json.get("specversion").and_then(Value::as_str);
    if version != Some("1.0") {
        return Err(reject(
            "unsupported",
            format!("CloudEvents specversion {version:?}; 1.0 is supported"),
        ));
    }
    for attribute in ["id", "source", "type"] {
        if json
            .get(attribute)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(reject(
                "schema",
                format!("CloudEvents attribute {attribute:?} is missing"),
            ));
        }
    }
    if let Some(content_type) = json.get("datacontenttype").and_then(Value::as_str)
        && !content_type.starts_with("application/json")
        && !content_type.ends_with("+json")
    {
        return Err(reject(
            "unsupported",
            format!("datacontenttype {content_type:?}: the data must be a JSON native event"),
        ));
    }
    if json.get("data_base64").is_some() {
        return Err(reject(
            "unsupported",
            "data_base64: the data must be a JSON native event",
        ));
    }
    let time = json.get("time").and_then(Value::as_str).map(str::to_owned);
    let data = json
        .get("data")
        .cloned()
        .ok_or_else(|| reject("schema", "CloudEvent without data"))?;
    let mut native: NativeEvent = serde_json::from_value(data).map_err(|e| {
        reject(
            "schema",
            format!("CloudEvent data is not a native event: {e}"),
        )
    })?;
    if native.event_time.is_none()
        && let Some(time) = time
    {
        rfc3339_ms(&time)
            .ok_or_else(|| reject("schema", format!("time {time:?} is not RFC 3339")))?;
        native.event_time = Some(time);
    }
    native.into_event(EventFormat::Cloudevents)
}
