//! CloudEvents 1.0, structured JSON mode: the envelope's `data` is a native event. The
//! envelope's optional attributes (`time`, `subject`, ...) are not used.

use serde_json::Value;

use crate::native::NativeEvent;
use crate::{Event, EventFormat, Rejection, reject};

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
    let data = json
        .get("data")
        .cloned()
        .ok_or_else(|| reject("schema", "CloudEvent without data"))?;
    let native: NativeEvent = crate::native::from_json(data).map_err(|e| {
        reject(
            "schema",
            format!("CloudEvent data is not a native event: {e}"),
        )
    })?;
    native.into_event(EventFormat::Cloudevents)
}
