//! The template stripper's scanning helpers and its tag vocabulary: where tags, fences,
//! blocks and raw sections end, what Liquid and Hugo tags print, Liquid inside code spans.

use std::ops::Range;

use super::super::rewrite::Rewrite;

pub(super) fn find(content: &str, from: usize, needle: &str) -> Option<usize> {
    content.get(from..)?.find(needle).map(|n| from + n)
}

/// A fence line's character and length (```` ``` ```` or `~~~`, at most 3 spaces in).
pub(super) fn fence_marker(line: &str) -> Option<(u8, usize)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let c = *trimmed.as_bytes().first()?;
    if c != b'`' && c != b'~' {
        return None;
    }
    let run = trimmed.bytes().take_while(|&b| b == c).count();
    (run >= 3).then_some((c, run))
}

pub(super) fn is_mdx_import(line: &str) -> bool {
    let line = line.trim_end();
    line.starts_with("import ")
        && (line.contains(" from '") || line.contains(" from \"") || line.ends_with(';'))
}

pub(super) fn blank_line_after(content: &str, from: usize) -> usize {
    content[from..]
        .find("\n\n")
        .map_or(content.len(), |n| from + n + 1)
}

/// The end (after its `%}`) of the `{% end… %}` that closes a block whose opening tag ends
/// at `from`.
pub(super) fn end_of_block(content: &str, from: usize, end_name: &str) -> Option<usize> {
    let mut at = from;
    while let Some(open) = find(content, at, "{%") {
        let close = find(content, open + 2, "%}")?;
        if tag_words(&content[open + 2..close])
            .first()
            .map(String::as_str)
            == Some(end_name)
        {
            return Some(close + 2);
        }
        at = close + 2;
    }
    None
}

/// Liquid in a code span, rendered as Jekyll renders it (Liquid runs before markdown): a
/// `{% raw %}…{% endraw %}` shows its inside, and a quoted string's output (`{{ "{%include%}" }}`)
/// shows the string; anything else in the span is the author's code and stays.
pub(super) fn liquid_in_code_span(
    content: &str,
    span: Range<usize>,
    out: &mut Rewrite,
    copied: &mut usize,
) {
    let mut at = span.start;
    while at < span.end {
        let rest = &content[at..span.end];
        if let Some(body) = rest.strip_prefix("{%")
            && let Some(close) = body.find("%}")
            && matches!(
                tag_words(&body[..close]).first().map(String::as_str),
                Some("raw" | "endraw")
            )
        {
            let end = at + 2 + close + 2;
            out.splice(content, copied, at..end, "");
            at = end;
            continue;
        }
        if let Some((literal, len)) = quoted_output(rest) {
            out.splice(content, copied, at..at + len, literal);
            at += len;
            continue;
        }
        at += rest.chars().next().map_or(1, char::len_utf8);
    }
}

/// `{{ "text" }}` or `{{ 'text' }}` at the start of `s` (a Liquid string output with no
/// filter): the text and the expression's length.
pub(super) fn quoted_output(s: &str) -> Option<(&str, usize)> {
    let body = s.strip_prefix("{{")?;
    let trimmed = body.trim_start_matches([' ', '-']);
    let quote = trimmed.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner_start = s.len() - trimmed.len() + 1;
    let inner_len = s[inner_start..].find(quote)?;
    let after = &s[inner_start + inner_len + 1..];
    let close = after.trim_start_matches([' ', '-']).strip_prefix("}}")?;
    Some((
        &s[inner_start..inner_start + inner_len],
        s.len() - close.len(),
    ))
}

/// Where a `{% raw %}` block's inside ends, and where its `{% endraw %}` ends.
pub(super) fn raw_end(content: &str, from: usize) -> Option<(usize, usize)> {
    let mut at = from;
    while let Some(open) = find(content, at, "{%") {
        let close = find(content, open + 2, "%}")?;
        if tag_words(&content[open + 2..close])
            .first()
            .map(String::as_str)
            == Some("endraw")
        {
            return Some((open, close + 2));
        }
        at = open + 2;
    }
    None
}

/// The words of a tag: whitespace-separated, quotes removed from quoted ones, Liquid's
/// whitespace-control dashes dropped.
pub(super) fn tag_words(body: &str) -> Vec<String> {
    let body = body
        .trim()
        .trim_start_matches('-')
        .trim_end_matches('-')
        .trim();
    let mut words = Vec::new();
    let mut chars = body.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() || c == ',' {
            chars.next();
            continue;
        }
        if c == '"' || c == '\'' {
            chars.next();
            let mut word = String::new();
            for (_, d) in chars.by_ref() {
                if d == c {
                    break;
                }
                word.push(d);
            }
            words.push(word);
            continue;
        }
        let mut end = body.len();
        while let Some(&(at, d)) = chars.peek() {
            if d.is_whitespace() || d == ',' {
                end = at;
                break;
            }
            chars.next();
        }
        words.push(body[start..end].to_owned());
    }
    words
}

/// Whether the tag at `at` stands where a link's target is written: right after `](`, in
/// a reference definition (`[x]: `), or in an `href="` / `src="` attribute.
pub(super) fn in_link_target(content: &str, at: usize) -> bool {
    let before = content[..at].trim_end_matches(' ');
    before.ends_with("](")
        || before.ends_with("href=\"")
        || before.ends_with("href='")
        || before.ends_with("src=\"")
        || (before.ends_with("]:") && before.rsplit('\n').next().is_some_and(|l| l.starts_with('[')))
        // A target that starts with the tag and goes on (`{{ site.baseurl }}/x/`).
        || before.ends_with('(') && before.ends_with("](")
}

pub(super) fn liquid_replacement(name: &str, args: &[String], link_target: bool) -> String {
    match name {
        "page" | "link" | "post_url" | "download" | "asset" if link_target => {
            args.first().cloned().unwrap_or_default()
        }
        "slack_channel" => match args {
            [_, label, ..] => label.clone(),
            [channel] => format!("#{}", channel.trim_start_matches('#')),
            [] => String::new(),
        },
        // `image "src" "alt"`, `image_with_class "src" "class" "alt"`: the alt text.
        "image" | "image_with_class" | "img" if args.len() >= 2 => {
            args.last().cloned().unwrap_or_default()
        }
        "alert" | "callout" | "note" | "warning" => match args.first() {
            Some(title) if !title.is_empty() => {
                if title.ends_with(['.', '!', '?', ':']) {
                    title.clone()
                } else {
                    format!("{title}.")
                }
            }
            _ => String::new(),
        },
        _ => String::new(),
    }
}

pub(super) fn hugo_replacement(inner: &str, link_target: bool) -> String {
    let words = tag_words(inner);
    match words.first().map(String::as_str) {
        Some("ref" | "relref") if link_target => words.get(1).cloned().unwrap_or_default(),
        _ => String::new(),
    }
}
