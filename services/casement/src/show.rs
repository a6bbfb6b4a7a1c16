//! `casement show FILE`: what a page becomes, as a bot will read it: its citation text
//! (template tags and page furniture gone, lists numbered), its links, and with
//! `--windows` every window with its offsets into the file as given. Nothing is indexed.

use std::io::Write;
use std::path::Path;

use casement_text::{Format, Revision, TextConfig, build_records, segment};

pub fn command(
    text: &TextConfig,
    path: &Path,
    format: Option<&str>,
    url: Option<&str>,
    windows: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let content = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let format: Format = match format.or_else(|| crate::sources::watch::files::format_of(path)) {
        Some(name) => name.parse()?,
        None => anyhow::bail!(
            "{}: cannot tell the format from the extension; pass --format markdown|html|text|wikitext",
            path.display()
        ),
    };
    let doc_id = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("document")
        .to_owned();
    let revision = Revision {
        access: None,
        doc_id,
        revision: 1,
        title: None,
        url: url.map(str::to_owned),
        tenant: None,
        format,
        content: content.clone(),
        metadata: serde_json::Map::new(),
        revision_url: None,
    };
    let segmented = segment(&revision, text)?;
    writeln!(
        out,
        "# {} ({format}, {} sections, {} sentences)",
        segmented.title,
        segmented.sections.len(),
        segmented.sentence_count()
    )?;
    writeln!(out)?;
    writeln!(out, "{}", segmented.text)?;
    if !segmented.links.is_empty() {
        writeln!(out)?;
        writeln!(out, "## Links")?;
        for link in &segmented.links {
            writeln!(
                out,
                "- {} -> {}",
                &segmented.text[link.range.clone()],
                link.url
            )?;
        }
    }
    if windows {
        let chars: Vec<char> = content.chars().collect();
        writeln!(out)?;
        writeln!(out, "## Windows (source: characters of {})", path.display())?;
        let mut last = None;
        for record in build_records(&segmented, text) {
            let span = (record.window_char_start, record.window_char_end);
            if last == Some(span) {
                continue;
            }
            last = Some(span);
            let source = match (
                record.cite.window_source_start,
                record.cite.window_source_end,
            ) {
                (Some(s), Some(e)) => {
                    let slice: String = chars[s.min(chars.len())..e.min(chars.len())]
                        .iter()
                        .collect();
                    format!("{s}..{e} {:?}", truncate(&slice, 60))
                }
                _ => "unknown".to_owned(),
            };
            writeln!(out)?;
            writeln!(
                out,
                "[{} > {}] source {source}",
                record.title,
                record.section_path.join(" > ")
            )?;
            writeln!(out, "{}", record.window)?;
        }
    }
    Ok(())
}

fn truncate(text: &str, chars: usize) -> String {
    let mut short: String = text.chars().take(chars).collect();
    if text.chars().count() > chars {
        short.push('…');
    }
    short
}
