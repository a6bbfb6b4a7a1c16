//! Which files of a watched folder are documents, and as what: format by extension,
//! document id from the path, title from the content, and the scan that finds them.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// A file found by a scan.
#[derive(Debug)]
pub(super) struct Found {
    pub doc_id: String,
    pub path: PathBuf,
    pub format: &'static str,
    pub mtime_ns: u128,
    pub len: u64,
}

/// The format of a file by its extension; other files are not documents.
pub fn format_of(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    if name.starts_with('.') || name.ends_with('~') {
        return None;
    }
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "md" | "markdown" => Some("markdown"),
        "html" | "htm" => Some("html"),
        "txt" | "text" => Some("text"),
        "wiki" | "mediawiki" => Some("wikitext"),
        _ => None,
    }
}

/// `prefix` + the path under `root` without its extension, with `/` separators.
pub fn doc_id(prefix: &str, root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?.with_extension("");
    let parts: Vec<&str> = relative
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    Some(format!("{prefix}{}", parts.join("/")))
}

/// The title: a YAML front-matter `title:`, else the first Markdown `# ` heading or HTML
/// `<title>`, else the file name.
pub fn title_of(path: &Path, content: &str) -> String {
    let front_matter = content
        .strip_prefix("---\n")
        .and_then(|rest| rest.split("\n---").next())
        .and_then(|block| block.lines().find_map(|l| l.strip_prefix("title:")));
    let heading = || content.lines().find_map(|l| l.strip_prefix("# "));
    let html = || {
        let start = content.find("<title>")? + "<title>".len();
        let end = content[start..].find("</title>")?;
        Some(&content[start..start + end])
    };
    front_matter
        .or_else(heading)
        .or_else(html)
        .map(|t| t.trim().trim_matches('"').to_owned())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| {
            path.file_stem().map_or_else(String::new, |s| {
                s.to_string_lossy().replace(['-', '_'], " ")
            })
        })
}

/// Every document file under `roots` (recursively, hidden entries skipped).
pub(super) fn scan(roots: &[PathBuf], prefix: &str) -> Vec<Found> {
    let mut found = Vec::new();
    for root in roots {
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let hidden = entry.file_name().to_string_lossy().starts_with('.');
                let Ok(meta) = entry.metadata() else { continue };
                if meta.is_dir() && !hidden {
                    stack.push(path);
                } else if let (true, Some(format), Some(doc_id)) = (
                    meta.is_file(),
                    format_of(&path),
                    doc_id(prefix, root, &path),
                ) {
                    found.push(Found {
                        doc_id,
                        path,
                        format,
                        mtime_ns: mtime_ns(&meta),
                        len: meta.len(),
                    });
                }
            }
        }
    }
    found.sort_by(|a, b| a.doc_id.cmp(&b.doc_id));
    found
}

/// A file's modification time in nanoseconds since the epoch (0 when unknown).
pub(super) fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_ids_formats_and_titles() {
        let root = Path::new("/docs");
        assert_eq!(
            doc_id("kb:", root, Path::new("/docs/a/b-c.md")).as_deref(),
            Some("kb:a/b-c")
        );
        assert_eq!(format_of(Path::new("x.MD")), Some("markdown"));
        assert_eq!(format_of(Path::new("x.htm")), Some("html"));
        assert_eq!(format_of(Path::new(".x.md")), None);
        assert_eq!(format_of(Path::new("x.md~")), None);
        assert_eq!(format_of(Path::new("x.png")), None);
        let p = Path::new("/docs/changing-your-name.md");
        assert_eq!(
            title_of(p, "---\ntitle: Changing your name\n---\nText."),
            "Changing your name"
        );
        assert_eq!(title_of(p, "Intro.\n# Heading\n"), "Heading");
        assert_eq!(title_of(p, "<html><title> Page </title>"), "Page");
        assert_eq!(title_of(p, "no title"), "changing your name");
    }
}
