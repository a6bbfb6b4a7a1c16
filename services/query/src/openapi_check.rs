//! The OpenAPI document (`openapi.json`) against the types of `api.rs`: the same fields,
//! JSON types, nesting and nullability, so the two cannot drift (a field added to a type
//! and not to the document, or the other way round, fails here).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use schemars::JsonSchema;
use serde_json::Value;

use crate::api::{DocumentAnswer, DocumentText, ErrorBody, SearchRequest, SearchResponse};

struct Sides<'a> {
    rust: &'a Value,
    doc: &'a Value,
    errors: Vec<String>,
}

/// Follows `$ref` (and a lone `allOf: [$ref]`) in `root`'s definitions or components;
/// returns the schema and whether it admits null.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> (&'a Value, bool) {
    let nullable = schema["nullable"] == true;
    let target = schema["$ref"].as_str().or_else(|| {
        let all = schema["allOf"].as_array()?;
        (all.len() == 1).then(|| all[0]["$ref"].as_str()).flatten()
    });
    match target {
        Some(target) => {
            let name = target.rsplit('/').next().unwrap();
            let found = if root["definitions"].is_object() {
                &root["definitions"][name]
            } else {
                &root["components"]["schemas"][name]
            };
            let (inner, inner_nullable) = resolve(root, found);
            (inner, nullable || inner_nullable)
        }
        None => (schema, nullable),
    }
}

impl Sides<'_> {
    fn compare(&mut self, rust: &Value, doc: &Value, at: &str) {
        let (rust, _) = resolve(self.rust, rust);
        let (doc, _) = resolve(self.doc, doc);
        let kind = |s: &Value| s["type"].as_str().map(str::to_owned);
        if kind(rust) != kind(doc) {
            self.errors.push(format!(
                "{at}: the code has type {:?}, the document {:?}",
                kind(rust),
                kind(doc)
            ));
            return;
        }
        if let (Some(rust_props), Some(doc_props)) = (
            rust["properties"].as_object(),
            doc["properties"].as_object(),
        ) {
            let doc_required: Vec<&str> = doc["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let rust_required: Vec<&str> = rust["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for name in rust_props.keys().filter(|k| !doc_props.contains_key(*k)) {
                self.errors
                    .push(format!("{at}.{name}: in the code, not in the document"));
            }
            for name in doc_props.keys().filter(|k| !rust_props.contains_key(*k)) {
                self.errors
                    .push(format!("{at}.{name}: in the document, not in the code"));
            }
            for (name, rust_prop) in rust_props {
                let Some(doc_prop) = doc_props.get(name) else {
                    continue;
                };
                let path = format!("{at}.{name}");
                let (_, rust_null) = resolve(self.rust, rust_prop);
                let (_, doc_null) = resolve(self.doc, doc_prop);
                if doc_null && !rust_null {
                    self.errors
                        .push(format!("{path}: nullable in the document, not in the code"));
                }
                // Option in the code: null or absent; the document must allow one.
                if rust_null && !doc_null && doc_required.contains(&name.as_str()) {
                    self.errors.push(format!(
                        "{path}: may be null in the code, required and not nullable in the document"
                    ));
                }
                if rust_required.contains(&name.as_str())
                    && !doc_required.contains(&name.as_str())
                    && !rust_null
                {
                    self.errors.push(format!(
                        "{path}: always there in the code, optional in the document"
                    ));
                }
                self.compare(rust_prop, doc_prop, &path);
            }
        }
        if rust["items"].is_object() || doc["items"].is_object() {
            self.compare(&rust["items"], &doc["items"], &format!("{at}[]"));
        }
        if rust["additionalProperties"].is_object() || doc["additionalProperties"].is_object() {
            self.compare(
                &rust["additionalProperties"],
                &doc["additionalProperties"],
                &format!("{at}{{}}"),
            );
        }
    }
}

fn check<T: JsonSchema>(doc: &Value, component: &str) -> Vec<String> {
    let generator = schemars::r#gen::SchemaSettings::openapi3().into_generator();
    let rust = serde_json::to_value(generator.into_root_schema_for::<T>()).unwrap();
    let mut sides = Sides {
        rust: &rust,
        doc,
        errors: Vec::new(),
    };
    let doc_schema = &doc["components"]["schemas"][component];
    assert!(doc_schema.is_object(), "{component} in the document");
    sides.compare(&rust, doc_schema, component);
    sides.errors
}

#[test]
fn every_request_and_answer_type_is_described_as_it_is() {
    let doc: Value = serde_json::from_str(crate::http::OPENAPI).unwrap();
    let mut errors = Vec::new();
    errors.extend(check::<SearchRequest>(&doc, "SearchRequest"));
    errors.extend(check::<SearchResponse>(&doc, "SearchResponse"));
    errors.extend(check::<DocumentAnswer>(&doc, "Document"));
    errors.extend(check::<DocumentText>(&doc, "DocumentText"));
    errors.extend(check::<ErrorBody>(&doc, "Error"));
    assert!(
        errors.is_empty(),
        "openapi.json and api.rs differ:\n{}",
        errors.join("\n")
    );
}

#[test]
fn a_drift_is_caught() {
    let mut doc: Value = serde_json::from_str(crate::http::OPENAPI).unwrap();
    doc["components"]["schemas"]["SearchRequest"]["properties"]["colour"] =
        serde_json::json!({"type": "string"});
    doc["components"]["schemas"]["Window"]["properties"]
        .as_object_mut()
        .unwrap()
        .remove("tokens");
    doc["components"]["schemas"]["Timings"]["properties"]["total"]["type"] = "string".into();
    let errors = check::<SearchRequest>(&doc, "SearchRequest")
        .into_iter()
        .chain(check::<SearchResponse>(&doc, "SearchResponse"))
        .collect::<Vec<_>>()
        .join("\n");
    for expected in [
        "SearchRequest.colour: in the document, not in the code",
        "tokens: in the code, not in the document",
        "total: the code has type Some(\"number\"), the document Some(\"string\")",
    ] {
        assert!(errors.contains(expected), "{expected}:\n{errors}");
    }
}
