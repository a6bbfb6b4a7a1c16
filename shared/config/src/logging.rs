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
/// start with the setting named. Text lines go through [`escape_line`], so a value that
/// holds a newline or an escape (a document id, a title, a wiki's answer) cannot forge a
/// line or colour a terminal; JSON lines are escaped by JSON itself.
pub fn init(config: &LogConfig) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.filter)
        .map_err(|e| format!("log.filter {:?}: {e}", config.filter))?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    let result = match config.format {
        LogFormat::Json => builder.json().with_writer(std::io::stderr).try_init(),
        LogFormat::Text => builder.with_writer(EscapedStderr { ansi }).try_init(),
    };
    result.map_err(|e| format!("installing the logger: {e}"))
}

/// Stderr, one formatted event per write, control characters escaped.
#[derive(Debug, Clone, Copy)]
struct EscapedStderr {
    /// The formatter colours its own output: escape sequences are kept (the formatter
    /// escapes those inside values).
    ansi: bool,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for EscapedStderr {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

impl std::io::Write for EscapedStderr {
    /// The formatter writes each event as one buffer: all of it is taken, escaped.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stderr()
            .lock()
            .write_all(escape_line(buf, self.ansi).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// One formatted log line with every control character but its final newline (and tabs,
/// and escapes when `keep_escapes`) written as `\n`, `\r`, `\0` or `\u{…}`: a value cannot
/// start a line of its own, and a NUL does not make the log a binary file.
pub fn escape_line(line: &[u8], keep_escapes: bool) -> String {
    let text = String::from_utf8_lossy(line);
    let (body, end) = match text.strip_suffix('\n') {
        Some(body) => (body, "\n"),
        None => (text.as_ref(), ""),
    };
    let mut out = String::with_capacity(text.len());
    for c in body.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            '\t' => out.push('\t'),
            '\u{1b}' if keep_escapes => out.push(c),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push_str(end);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_cannot_forge_a_line_or_colour_the_terminal() {
        let forged = b"2026-11-28T04:19:59Z  WARN doc_id=kb:a\n2026-11-28T04:20:00Z ERROR migration failed \x1b[31m\0 done\n";
        let line = escape_line(forged, false);
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        assert!(line.ends_with("done\n"), "{line}");
        assert!(
            line.contains(r"kb:a\n2026-11-28T04:20:00Z ERROR") && line.contains(r"\u{1b}[31m\0"),
            "{line}"
        );
        assert!(!line.contains('\0') && !line.contains('\u{1b}'));
        // The formatter's own colours stay when it colours.
        assert!(escape_line(b"\x1b[2mtime\x1b[0m x\r\n", true).starts_with("\u{1b}[2mtime"));
        assert_eq!(escape_line(b"a\tb\xc2\x85c", false), "a\tb\\u{85}c");
    }
}
