//! Template languages inside Markdown: Liquid/Jekyll/11ty (`{% … %}`, `{{ … }}`), Hugo
//! shortcodes (`{{< … >}}`, `{{% … %}}`) and MDX (`import`/`export` lines, `{/* … */}`
//! comments; JSX components are HTML to the Markdown parser and lose their tags there).
//!
//! Tags are removed before parsing, in a copy that remembers where each byte came from
//! ([`Rewrite`]), so offsets still point into the content as submitted:
//! - link tags (`{% page "x" %}`, `{% link x %}`, `{% post_url x %}`, `{% download "x" %}`,
//!   Hugo `ref`/`relref`) become their target where a link's target is written
//!   (`[text]({% page "x" %})`), and nothing elsewhere;
//! - `{% image "src" "alt" %}`-style tags become their alt text, `{% slack_channel "x" %}`
//!   becomes `#x` (or its label), `{% alert "Title" %}` its title;
//! - `{% comment %}…{% endcomment %}` goes whole; `{% raw %}…{% endraw %}` keeps what is
//!   inside as written; every other tag (includes, control flow, layout) goes.
//!
//! Code spans and fenced code keep their text (a page that documents templates shows
//! them), except for `raw` markers.
//!
//! Operator rules ([`MarkupRule`]) run first, on the whole content.

use std::ops::Range;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::rewrite::Rewrite;
use tags::{
    blank_line_after, end_of_block, fence_marker, find, hugo_replacement, in_link_target,
    is_mdx_import, liquid_in_code_span, liquid_replacement, raw_end, tag_words,
};

mod tags;

/// The built-in template languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TemplateSet {
    Liquid,
    Hugo,
    Mdx,
}

/// An operator's rule: every match of `pattern` (a regular expression, `regex` crate
/// syntax) is replaced by `replace` (`$1`, `$name` for groups) before parsing, in documents
/// whose id starts with `doc_prefix` (all when empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkupRule {
    pub pattern: String,
    #[serde(default)]
    pub replace: String,
    #[serde(default)]
    pub doc_prefix: String,
}

/// What to strip from Markdown, compiled once.
#[derive(Debug, Clone, Default)]
pub struct Markup {
    pub sets: Vec<TemplateSet>,
    pub rules: Vec<(Regex, String, String)>,
}

impl Markup {
    /// The built-in sets and the operator's rules; a rule that does not compile is an error
    /// naming it.
    pub fn new(sets: &[TemplateSet], rules: &[MarkupRule]) -> Result<Self, String> {
        let rules = rules
            .iter()
            .map(|rule| {
                Regex::new(&rule.pattern)
                    .map(|re| (re, rule.replace.clone(), rule.doc_prefix.clone()))
                    .map_err(|e| format!("text.markup_rules: pattern `{}`: {e}", rule.pattern))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            sets: sets.to_vec(),
            rules,
        })
    }

    /// Every built-in set, no rules.
    pub fn builtin() -> Self {
        Self {
            sets: vec![TemplateSet::Liquid, TemplateSet::Hugo, TemplateSet::Mdx],
            rules: Vec::new(),
        }
    }

    fn has(&self, set: TemplateSet) -> bool {
        self.sets.contains(&set)
    }

    /// The operator's rules for `doc_id` applied to `content`; `None` when none matched.
    pub fn apply_rules(&self, doc_id: &str, content: &str) -> Option<Rewrite> {
        let mut matches: Vec<(Range<usize>, String)> = Vec::new();
        for (regex, replace, prefix) in &self.rules {
            if !doc_id.starts_with(prefix.as_str()) {
                continue;
            }
            for captures in regex.captures_iter(content) {
                let Some(whole) = captures.get(0) else {
                    continue;
                };
                if whole.is_empty()
                    || matches
                        .iter()
                        .any(|(r, _)| r.start < whole.end() && whole.start() < r.end)
                {
                    continue;
                }
                let mut text = String::new();
                captures.expand(replace, &mut text);
                matches.push((whole.range(), text));
            }
        }
        if matches.is_empty() {
            return None;
        }
        matches.sort_by_key(|(r, _)| r.start);
        let mut rewrite = Rewrite::default();
        let mut at = 0;
        for (range, text) in matches {
            rewrite.copy(content, at..range.start);
            rewrite.replace(range.clone(), &text);
            at = range.end;
        }
        rewrite.copy(content, at..content.len());
        Some(rewrite)
    }

    /// `content` without the template tags of the configured sets.
    pub fn strip(&self, content: &str) -> Rewrite {
        let liquid = self.has(TemplateSet::Liquid);
        let hugo = self.has(TemplateSet::Hugo);
        let mdx = self.has(TemplateSet::Mdx);
        let mut out = Rewrite::default();
        let bytes = content.as_bytes();
        let mut copied = 0; // content bytes up to here are in `out`
        let mut i = 0;
        let mut fence: Option<(u8, usize)> = None;
        let mut mdx_block: Option<(u8, usize)> = None;
        let mut line_start = true;
        let mut front_matter = content.starts_with("---\n");
        while i < bytes.len() {
            if line_start {
                line_start = false;
                let line_end = content[i..].find('\n').map_or(bytes.len(), |n| i + n);
                let line = &content[i..line_end];
                if front_matter {
                    if i > 0 && line.trim_end() == "---" {
                        front_matter = false;
                    }
                    i = line_end;
                    continue;
                }
                if mdx
                    && fence.is_none()
                    && mdx_block.is_none()
                    && let Some(marker) = fence_marker(line)
                    && line
                        .trim_start()
                        .trim_start_matches(marker.0 as char)
                        .trim()
                        == "mdx-code-block"
                {
                    // Docusaurus renders an `mdx-code-block` fence as MDX, not as code.
                    mdx_block = Some(marker);
                    out.splice(content, &mut copied, i..line_end, "");
                    i = line_end;
                    continue;
                }
                if let (Some((c, n)), None) = (mdx_block, fence)
                    && fence_marker(line).is_some_and(|m| m.0 == c && m.1 >= n)
                    && line
                        .trim_start()
                        .trim_start_matches(c as char)
                        .trim()
                        .is_empty()
                {
                    mdx_block = None;
                    out.splice(content, &mut copied, i..line_end, "");
                    i = line_end;
                    continue;
                }
                if let Some(marker) = fence_marker(line) {
                    fence = match fence {
                        None => Some(marker),
                        Some((c, n))
                            if marker.0 == c
                                && marker.1 >= n
                                && line
                                    .trim_start()
                                    .trim_start_matches(c as char)
                                    .trim()
                                    .is_empty() =>
                        {
                            None
                        }
                        open => open,
                    };
                } else if fence.is_none()
                    && mdx
                    && (is_mdx_import(line) || line.starts_with("export "))
                {
                    // An `export` may run over lines: up to the next blank line.
                    let end = if line.starts_with("export ") {
                        blank_line_after(content, i)
                    } else {
                        line_end
                    };
                    out.splice(content, &mut copied, i..end, "");
                    i = end;
                    continue;
                }
            }
            let b = bytes[i];
            if b >= 0x80 {
                // Not ASCII: nothing here starts a tag; step over the whole character.
                i += content[i..].chars().next().map_or(1, char::len_utf8);
                continue;
            }
            if b == b'\n' {
                line_start = true;
                i += 1;
                continue;
            }
            if fence.is_some() {
                // Inside code only `raw` markers go.
                if liquid
                    && b == b'{'
                    && bytes.get(i + 1) == Some(&b'%')
                    && let Some(end) = find(content, i + 2, "%}")
                {
                    let tag = tag_words(&content[i + 2..end]);
                    if matches!(tag.first().map(String::as_str), Some("raw" | "endraw")) {
                        out.splice(content, &mut copied, i..end + 2, "");
                        i = end + 2;
                        continue;
                    }
                }
                i += 1;
                continue;
            }
            if b == b'`' {
                // A code span: skipped whole when it closes.
                let run = bytes[i..].iter().take_while(|&&c| c == b'`').count();
                let ticks = &content[i..i + run];
                match content[i + run..].find(ticks) {
                    Some(n) if !content[i + run..i + run + n].contains("\n\n") => {
                        let end = i + run + n + run;
                        if liquid {
                            liquid_in_code_span(
                                content,
                                i + run..i + run + n,
                                &mut out,
                                &mut copied,
                            );
                        }
                        line_start = content[i..end].ends_with('\n');
                        i = end;
                    }
                    _ => i += run,
                }
                continue;
            }
            // `\[text](target)`: an escaped bracket before a link the author meant; the
            // page shows the markup, which no reader wants.
            if b == b'\\'
                && bytes.get(i + 1) == Some(&b'[')
                && content[i + 2..]
                    .split("\n\n")
                    .next()
                    .and_then(|paragraph| paragraph.split('[').next())
                    .is_some_and(|text| text.contains("]("))
            {
                out.splice(content, &mut copied, i..i + 1, "");
                i += 1;
                continue;
            }
            if mdx
                && content[i..].starts_with("{/*")
                && let Some(end) = find(content, i + 3, "*/}")
            {
                out.splice(content, &mut copied, i..end + 3, "");
                i = end + 3;
                continue;
            }
            if hugo && (content[i..].starts_with("{{<") || content[i..].starts_with("{{%")) {
                let close = if bytes[i + 2] == b'<' { ">}}" } else { "%}}" };
                if let Some(end) = find(content, i + 3, close) {
                    let inner = content[i + 3..end].trim();
                    let replacement = if inner.starts_with("/*") {
                        String::new()
                    } else {
                        hugo_replacement(inner, in_link_target(content, i))
                    };
                    out.splice(content, &mut copied, i..end + 3, &replacement);
                    i = end + 3;
                    continue;
                }
            }
            if liquid
                && b == b'{'
                && bytes.get(i + 1) == Some(&b'{')
                && let Some(end) = find(content, i + 2, "}}")
                && !content[i..end].contains('\n')
            {
                out.splice(content, &mut copied, i..end + 2, "");
                i = end + 2;
                continue;
            }
            if liquid
                && b == b'{'
                && bytes.get(i + 1) == Some(&b'%')
                && let Some(end) = find(content, i + 2, "%}")
            {
                let words = tag_words(&content[i + 2..end]);
                let name = words.first().map(String::as_str).unwrap_or("");
                let mut tag_end = end + 2;
                let replacement = match name {
                    "comment" => {
                        tag_end = end_of_block(content, tag_end, "endcomment").unwrap_or(tag_end);
                        String::new()
                    }
                    "raw" => {
                        // The inside is kept as written: copy it and drop both markers.
                        out.copy(content, copied..i);
                        out.replace(i..tag_end, "");
                        let (inner_end, after) = match raw_end(content, tag_end) {
                            Some(found) => found,
                            None => (content.len(), content.len()),
                        };
                        out.copy(content, tag_end..inner_end);
                        out.replace(inner_end..after, "");
                        copied = after;
                        line_start = content[..after].ends_with('\n');
                        i = after;
                        continue;
                    }
                    _ => liquid_replacement(
                        name,
                        &words[1.min(words.len())..],
                        in_link_target(content, i),
                    ),
                };
                out.splice(content, &mut copied, i..tag_end, &replacement);
                line_start = content[..tag_end].ends_with('\n');
                i = tag_end;
                continue;
            }
            i += 1;
        }
        out.copy(content, copied..content.len());
        out
    }
}

#[cfg(test)]
mod tests;
