//! Layered configuration: built-in defaults, then a TOML file, then environment variables,
//! validated once at start. Unknown keys are rejected at every layer, so a typo fails loudly
//! instead of silently keeping a default.
//!
//! Environment variables are `<PREFIX>__<SECTION>__<KEY>` (double underscores separate
//! levels), e.g. `CASEMENT_INDEXER__TEXT__WINDOW_RADIUS=2`; values are parsed as TOML
//! scalars (`2`, `true`, `"x"`), falling back to a plain string.

pub mod logging;

use std::path::{Path, PathBuf};

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
    #[error("invalid configuration ({origin}): {message}")]
    Invalid { origin: String, message: String },
}

pub type Result<T> = std::result::Result<T, Error>;

/// A configuration type: serde with `deny_unknown_fields`, defaults, and a check.
pub trait Config: Serialize + DeserializeOwned + Default {
    /// Checks values that types alone cannot (ranges, combinations).
    fn validate(&self) -> std::result::Result<(), String>;
}

/// Loads `T`: defaults, then `file` (if any), then `env` pairs whose key starts with
/// `prefix`. Pass `std::env::vars()` for `env`.
pub fn load<T: Config>(
    file: Option<&Path>,
    prefix: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<T> {
    let mut merged = Table::try_from(T::default()).map_err(|e| Error::Invalid {
        origin: "defaults".into(),
        message: e.to_string(),
    })?;
    let mut origin = "defaults".to_owned();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        let table: Table = text.parse().map_err(|e: toml::de::Error| Error::Syntax {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        merge(&mut merged, table);
        origin = format!("file {}", path.display());
    }
    let env_prefix = format!("{prefix}__");
    for (key, raw) in env {
        let Some(rest) = key.strip_prefix(&env_prefix) else {
            continue;
        };
        let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        set_path(&mut merged, &path, parse_scalar(&raw));
        origin = format!("{origin} + environment ({key})");
    }
    let config: T = Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| Error::Invalid {
            origin: origin.clone(),
            message: e.message().to_owned(),
        })?;
    config
        .validate()
        .map_err(|message| Error::Invalid { origin, message })?;
    Ok(config)
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
