//! The `[log]` section every service shares, and the `tracing` subscriber it installs.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A `tracing` filter, e.g. `info` or `casement_indexer=debug,rdkafka=warn`.
    pub filter: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            filter: "info".into(),
        }
    }
}

/// Installs the `tracing` subscriber (text or JSON lines on stderr). A bad filter fails at
/// start with the setting named.
pub fn init(config: &LogConfig) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.filter)
        .map_err(|e| format!("log.filter {:?}: {e}", config.filter))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let result = match config.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    result.map_err(|e| format!("installing the logger: {e}"))
}
