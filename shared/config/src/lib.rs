//! Layered configuration: built-in defaults, then a TOML file, then environment variables,
//! validated once at start. Unknown keys are rejected at every layer, so a typo fails loudly
//! instead of silently keeping a default.
//!
//! Environment variables are `<PREFIX>__<SECTION>__<KEY>` (double underscores separate
//! levels), e.g. `CASEMENT_INDEXER__TEXT__WINDOW_RADIUS=2`; values are parsed as TOML
//! scalars (`2`, `true`, `"x"`), falling back to a plain string.

pub mod listen;
pub mod logging;

mod secret;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use secret::{REDACTED, Secret};
use serde::Serialize;
use serde::de::DeserializeOwned;
use toml::{Table, Value};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    /// A value of the wrong type, or a key no section has: named with where it was set.
    #[error("invalid configuration: `{key}` ({origin}): {message}")]
    Key {
        key: String,
        origin: String,
        message: String,
    },
    #[error("invalid configuration ({origin}): {message}")]
    Invalid { origin: String, message: String },
}

pub type Result<T> = std::result::Result<T, Error>;

/// A configuration type: serde with `deny_unknown_fields`, defaults, and a check.
pub trait Config: Serialize + DeserializeOwned + Default {
    /// Checks values that types alone cannot (ranges, combinations).
    fn validate(&self) -> std::result::Result<(), String>;

    /// Fills settings whose default is another setting's value (run after loading, before
    /// [`Config::validate`]).
    fn resolve_defaults(&mut self) {}
}

/// `CASEMENT_LISTEN` or `CASEMENT_TEXT__WINDOW_RADIUS` for prefix `CASEMENT`: a variable
/// that names one of the configuration's sections or keys after a single underscore; the
/// name it should have.
fn misspelt_setting(key: &str, prefix: &str, top_keys: &[String]) -> Option<String> {
    let rest = key.strip_prefix(prefix)?.strip_prefix('_')?;
    if rest.starts_with('_') {
        return None;
    }
    let first = rest.split("__").next()?.to_ascii_lowercase();
    top_keys
        .contains(&first)
        .then(|| format!("{prefix}__{rest}"))
}

/// Loads `T`: defaults, then `file` (if any), then `env` pairs whose key starts with
/// `prefix`. Pass `std::env::vars()` for `env`. A variable that looks like a setting with
/// one underscore too few (`CASEMENT_LISTEN`) is named in a warning on stderr.
pub fn load<T: Config>(
    file: Option<&Path>,
    prefix: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<T> {
    let mut merged = Table::try_from(T::default()).map_err(|e| Error::Invalid {
        origin: "defaults".into(),
        message: e.to_string(),
    })?;
    // Where each key was last set: the file (with its line) or an environment variable.
    let mut origins = BTreeMap::new();
    let mut layers = Vec::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        let table: Table = text.parse().map_err(|e: toml::de::Error| Error::Syntax {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if let Ok(spanned) = toml::de::DeTable::parse(&text) {
            let file_origin = |line: usize| format!("file {}, line {line}", path.display());
            record_lines(spanned.get_ref(), "", &text, &file_origin, &mut origins);
        }
        merge(&mut merged, table);
        layers.push(format!("file {}", path.display()));
    }
    let env_prefix = format!("{prefix}__");
    let top_keys: Vec<String> = merged.keys().cloned().collect();
    for (key, raw) in env {
        let Some(rest) = key.strip_prefix(&env_prefix) else {
            if let Some(correct) = misspelt_setting(&key, prefix, &top_keys) {
                // Not an error (the variable may be another program's), but never silent.
                eprintln!(
                    "warning: environment variable {key} is not read: a setting takes two underscores after {prefix}, as in {correct}"
                );
            }
            continue;
        };
        let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        set_path(&mut merged, &path, parse_scalar(&raw));
        origins.insert(path.join("."), format!("environment variable {key}"));
        layers.push(format!("environment ({key})"));
    }
    let config: T = serde_path_to_error::deserialize(Value::Table(merged)).map_err(
        |e: serde_path_to_error::Error<toml::de::Error>| {
            let message = e.inner().message().to_owned();
            let mut key = e.path().to_string();
            if let Some(field) = unknown_field(&message) {
                key = if key == "." || key.is_empty() {
                    field.to_owned()
                } else if key.ends_with(field) {
                    key
                } else {
                    format!("{key}.{field}")
                };
            }
            let origin = origin_of(&key, &origins).unwrap_or_else(|| "defaults".to_owned());
            Error::Key {
                key,
                origin,
                message,
            }
        },
    )?;
    let mut config = config;
    config.resolve_defaults();
    config.validate().map_err(|message| {
        // A check's message starts with the key it is about when it can name one.
        let origin = origins
            .iter()
            .filter(|(key, _)| message.starts_with(key.as_str()))
            .max_by_key(|(key, _)| key.len())
            .map(|(_, origin)| origin.clone())
            .unwrap_or_else(|| {
                std::iter::once("defaults".to_owned())
                    .chain(layers)
                    .collect::<Vec<_>>()
                    .join(" + ")
            });
        Error::Invalid { origin, message }
    })?;
    Ok(config)
}

/// Records `path → "file …, line N"` for every key of a parsed file, tables and array
/// elements included (`auth.keys[0].token`, as serde_path_to_error names them).
fn record_lines(
    table: &toml::de::DeTable<'_>,
    prefix: &str,
    text: &str,
    origin: &dyn Fn(usize) -> String,
    origins: &mut BTreeMap<String, String>,
) {
    let line = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        origins.insert(path.clone(), origin(line(key.span().start)));
        record_value(value, &path, text, origin, origins, &line);
    }
}

fn record_value(
    value: &toml::Spanned<toml::de::DeValue<'_>>,
    path: &str,
    text: &str,
    origin: &dyn Fn(usize) -> String,
    origins: &mut BTreeMap<String, String>,
    line: &dyn Fn(usize) -> usize,
) {
    match value.get_ref() {
        toml::de::DeValue::Table(inner) => record_lines(inner, path, text, origin, origins),
        toml::de::DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let item_path = format!("{path}[{i}]");
                origins.insert(item_path.clone(), origin(line(item.span().start)));
                record_value(item, &item_path, text, origin, origins, line);
            }
        }
        _ => {}
    }
}

/// Where `key` (or the nearest table above it) was set, if not by the defaults.
fn origin_of(key: &str, origins: &BTreeMap<String, String>) -> Option<String> {
    let mut key = key;
    loop {
        if let Some(origin) = origins.get(key) {
            return Some(origin.clone());
        }
        key = &key[..key.rfind(['.', '['])?];
    }
}

/// The field of serde's "unknown field `x`, expected …" message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

fn merge(base: &mut Table, overlay: Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(base_table)), Value::Table(overlay_table)) => {
                merge(base_table, overlay_table)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn set_path(table: &mut Table, path: &[String], value: Value) {
    match path {
        [] => {}
        [key] => {
            table.insert(key.clone(), value);
        }
        [key, rest @ ..] => {
            let entry = table
                .entry(key.clone())
                .or_insert_with(|| Value::Table(Table::new()));
            if !entry.is_table() {
                *entry = Value::Table(Table::new());
            }
            if let Value::Table(inner) = entry {
                set_path(inner, rest, value);
            }
        }
    }
}

fn parse_scalar(raw: &str) -> Value {
    format!("v = {raw}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}
