#!/usr/bin/env python3
"""Checks that every relative link in the repository's Markdown resolves (`make test`).

Scans the Markdown files git knows (`git ls-files '*.md'`, plus new files git does not
ignore, so a page not yet committed is checked too) for links and images,
`[text](target)` and `[label]: target` definitions, outside code blocks and inline code.
A target with a scheme (`https:`, `mailto:`) is left alone. Any other target must name a
file or folder of the repository: one that exists, is not ignored by git, and does not lie
outside the repository (a clone has nothing there). A `#anchor` into a Markdown file (or
into the same file) must match one of its headings, slugged as GitHub does: lowercase,
punctuation dropped except `-` and `_`, spaces to `-`, `-1`, `-2` for repeats.

Test fixtures (`*/tests/fixtures/*`) are left out: they are pages written for other sites,
kept as data.

Exit code 0 when every link resolves; 1 otherwise, with one `file:line: target: reason`
line each; 2 when git cannot list the files. Python standard library only.
"""

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import PurePosixPath
from urllib.parse import unquote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPED = re.compile(r"(^|/)tests/fixtures/")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# `[text](target "title")`, one level of brackets allowed inside the text.
INLINE = re.compile(
    r"(?<!\\)!?\[(?:[^\[\]\\]|\\.|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s()]+(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)", re.MULTILINE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)


def git_files():
    """Markdown and every other path git tracks or would add (not ignored), relative."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8")
    return {path for path in out.split("\0") if path}


def blocks_outside_code(text):
    """The file's lines with fenced code blanked, then inline code spans blanked (newlines
    kept, so positions still give line numbers)."""
    lines = text.split("\n")
    fence = None
    for i, line in enumerate(lines):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                lines[i] = ""
        else:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                    and not line.strip()[len(match.group(1)):].strip():
                fence = None
            lines[i] = ""
    # Code spans end at a blank line (a paragraph), so blank them paragraph by paragraph.
    out = []
    paragraph = []
    for line in lines + [""]:
        if line.strip():
            paragraph.append(line)
            continue
        if paragraph:
            out.append(blank_code_spans("\n".join(paragraph)))
            paragraph = []
        out.append(line)
    return "\n".join(out[:-1])


def blank_code_spans(text):
    """Replaces each inline code span (a run of n backticks to the next run of exactly n)
    with spaces, keeping newlines."""
    result = []
    i = 0
    while i < len(text):
        if text[i] != "`" or (i > 0 and text[i - 1] == "\\"):
            result.append(text[i])
            i += 1
            continue
        run = len(text[i:]) - len(text[i:].lstrip("`"))
        closing = re.compile(r"(?<!`)" + "`" * run + r"(?!`)")
        end = closing.search(text, i + run)
        if end is None:
            result.append(text[i:i + run])
            i += run
            continue
        span = text[i:end.end()]
        result.append("".join("\n" if c == "\n" else " " for c in span))
        i = end.end()
    return "".join(result)


def heading_text(raw):
    """What GitHub renders of a heading: link targets, code ticks and emphasis marks gone."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").replace("*", "")


def slug(text):
    kept = []
    for c in text.strip().lower():
        if c in " -_" or unicodedata.category(c)[0] in "LN" or unicodedata.category(c) in ("Mn", "Mc"):
            kept.append(c)
    return "".join(kept).replace(" ", "-")


def anchors(path, cache={}):
    """The anchors a Markdown file's headings (and HTML anchors) give, as GitHub makes them."""
    if path in cache:
        return cache[path]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    found = set()
    seen = {}
    fence = None
    previous = ""
    for line in lines:
        match = FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            previous = ""
            continue
        if match:
            fence = match.group(1)
            previous = ""
            continue
        heading = None
        atx = ATX.match(line)
        if atx:
            heading = atx.group(2)
        elif SETEXT.match(line) and previous.strip() and not previous.lstrip().startswith(("|", "-", "*", ">")):
            heading = previous.strip()
        if heading is not None:
            base = slug(heading_text(heading))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(HTML_ANCHOR.findall(line))
        previous = line
    cache[path] = found
    return found


def check_target(source, target, files, directories):
    """None when `target` (as written in `source`, a path relative to the root) resolves,
    else why not."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if SCHEME.match(target):
        return None
    path_part, _, anchor = target.partition("#")
    path_part = unquote(path_part.split("?", 1)[0])
    if path_part:
        if path_part.startswith("/"):
            joined = os.path.join(ROOT, path_part.lstrip("/"))
        else:
            joined = os.path.join(ROOT, os.path.dirname(source), path_part)
        resolved = os.path.normpath(joined)
        if os.path.commonpath([ROOT, resolved]) != ROOT:
            return "leaves the repository"
        relative = os.path.relpath(resolved, ROOT).replace(os.sep, "/")
        if relative == ".":
            relative = ""
        if not os.path.exists(resolved):
            return "no such file"
        if relative and relative not in files and relative not in directories:
            return "not in the repository (ignored by git or untracked)"
    else:
        relative = source
    if anchor and relative.endswith(".md"):
        if unquote(anchor).lower() not in anchors(os.path.join(ROOT, relative)):
            return f"no heading `#{anchor}` in {relative}"
    return None


def main():
    try:
        files = git_files()
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"check-doc-links: cannot list the repository's files: {error}", file=sys.stderr)
        return 2
    directories = {str(parent) for path in files for parent in PurePosixPath(path).parents}
    documents = sorted(
        path for path in files
        if path.endswith(".md") and not SKIPPED.search(path) and os.path.isfile(os.path.join(ROOT, path))
    )
    problems = []
    links = 0
    for document in documents:
        with open(os.path.join(ROOT, document), encoding="utf-8") as f:
            text = blocks_outside_code(f.read())
        found = [(m.start(), m.group(1)) for m in INLINE.finditer(text)]
        found += [(m.start(1), m.group(1)) for m in DEFINITION.finditer(text)]
        for position, target in sorted(found):
            links += 1
            reason = check_target(document, target, files, directories)
            if reason:
                line = text.count("\n", 0, position) + 1
                problems.append(f"{document}:{line}: {target}: {reason}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-doc-links: {len(problems)} broken of {links} links in {len(documents)} files",
              file=sys.stderr)
        return 1
    print(f"check-doc-links: {links} links in {len(documents)} Markdown files, all resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
