//! Who may read a watched file's document: its front matter's `access:` key, else the
//! nearest `.access` file in its folder or above it (up to the watched folder), else the
//! source's default (`[access] default`, applied by the pipeline).
//!
//! Both say `public`, or the groups (`hr, staff`; in front matter also `[hr, staff]` or a
//! YAML block list); `deny` or an empty `.access` file: operators only. An access that
//! cannot be read (a `.access` file that cannot be opened, a group name that breaks the
//! rules) is taken as operators only, with a warning: a mistake hides a page, never shows
//! one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use casement_text::Access;

/// The file that says who may read the documents of a folder and the folders below it.
pub const ACCESS_FILE: &str = ".access";

/// `public`, `deny`, or groups separated by commas, spaces or line breaks (`#` starts a
/// comment), optionally in brackets.
pub fn parse(text: &str) -> Result<Access, String> {
    let words: Vec<&str> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.split([',', ' ', '\t', '[', ']']))
        .map(|w| w.trim().trim_matches(['"', '\'']))
        .map(|w| w.strip_prefix("- ").unwrap_or(w))
        .filter(|w| !w.is_empty() && *w != "-")
        .collect();
    let access = match words.as_slice() {
        [] | ["deny"] => Access::deny(),
        ["public"] => Access::public(),
        groups => Access::groups(groups.iter().copied()),
    };
    access.validate()?;
    Ok(access)
}

/// The `access:` of a document's YAML front matter (`---` first line), if it has one:
/// `access: public`, `access: [hr, staff]`, `access: hr, staff`, or a block list below it.
pub fn front_matter(content: &str) -> Option<Result<Access, String>> {
    let rest = content
        .strip_prefix("---\n")
        .or_else(|| content.strip_prefix("---\r\n"))?;
    let block = rest.split("\n---").next()?;
    let mut lines = block.lines();
    while let Some(line) = lines.next() {
        let Some(value) = line.strip_prefix("access:") else {
            continue;
        };
        if !value.trim().is_empty() {
            return Some(parse(value));
        }
        // A block list: the indented `- group` lines that follow.
        let items: Vec<&str> = lines
            .by_ref()
            .take_while(|l| l.starts_with([' ', '\t']) || l.trim().is_empty())
            .filter_map(|l| l.trim().strip_prefix('-'))
            .collect();
        return Some(parse(&items.join(",")));
    }
    None
}

/// What the `.access` files say, per folder, read once per scan: each folder's answer (its
/// own file, else its parent's) is kept, so the files of one folder cost one lookup.
#[derive(Debug, Default)]
pub struct Folders(HashMap<PathBuf, Option<Result<Access, String>>>);

impl Folders {
    /// Forgets every answer: a new scan reads the files again.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The access the nearest `.access` file gives `path` (a file under `root`): `None`
    /// when no folder from the file's up to `root` has one.
    pub fn of(&mut self, root: &Path, path: &Path) -> Option<Result<Access, String>> {
        self.folder(root, path.parent()?)
    }

    fn folder(&mut self, root: &Path, dir: &Path) -> Option<Result<Access, String>> {
        if let Some(known) = self.0.get(dir) {
            return known.clone();
        }
        let file = dir.join(ACCESS_FILE);
        let found = match std::fs::read_to_string(&file) {
            Ok(text) => Some(parse(&text).map_err(|e| format!("{}: {e}", file.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match dir.parent() {
                Some(parent) if dir != root && dir.starts_with(root) => self.folder(root, parent),
                _ => None,
            },
            Err(e) => Some(Err(format!("{}: {e}", file.display()))),
        };
        self.0.insert(dir.to_owned(), found.clone());
        found
    }

    /// The access of a watched file: front matter first, then `.access` files; one that
    /// cannot be read is operators only (logged).
    pub fn access(&mut self, root: Option<&Path>, path: &Path, content: &str) -> Option<Access> {
        let found = front_matter(content).or_else(|| root.and_then(|root| self.of(root, path)))?;
        // The log names the file, not the groups: no log line says who may read a document.
        Some(found.unwrap_or_else(|_| {
            tracing::warn!(path = %path.display(),
                "watch: cannot read who may read this file (a `.access` file that cannot be \
                 read, or a group name that is empty, over 256 bytes or holds a control \
                 character); indexing it for operators only");
            Access::deny()
        }))
    }

    /// What the `.access` files give `path`, as a number to compare between scans (0:
    /// none): a change of a `.access` file sends its folder's documents again.
    pub fn stamp(&mut self, root: &Path, path: &Path) -> u64 {
        match self.of(root, path) {
            None => 0,
            Some(Ok(access)) => xxhash_rust::xxh3::xxh3_64(format!("{access:?}").as_bytes()) | 1,
            Some(Err(error)) => xxhash_rust::xxh3::xxh3_64(error.as_bytes()) | 1,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_says_public_groups_or_nothing() {
        let page = |fm: &str| format!("---\ntitle: Leave\n{fm}\n---\n\n# Leave\n\nText.\n");
        assert_eq!(
            front_matter(&page("access: public")),
            Some(Ok(Access::public()))
        );
        assert_eq!(
            front_matter(&page("access: [hr, staff]")),
            Some(Ok(Access::groups(["hr", "staff"])))
        );
        assert_eq!(
            front_matter(&page("access: hr, staff")),
            Some(Ok(Access::groups(["hr", "staff"])))
        );
        assert_eq!(
            front_matter(&page("access:\n  - hr\n  - \"staff\"\nlayout: page")),
            Some(Ok(Access::groups(["hr", "staff"])))
        );
        assert_eq!(front_matter(&page("layout: page")), None);
        assert_eq!(front_matter("# No front matter\n\naccess: public\n"), None);
        assert!(front_matter(&page("access: [\"\u{7}\"]")).unwrap().is_err());
    }

    #[test]
    fn the_nearest_access_file_applies_below_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("hr/private")).unwrap();
        std::fs::write(root.join(".access"), "public\n").unwrap();
        std::fs::write(root.join("hr/.access"), "# HR only\nhr, staff\n").unwrap();
        let at = |p: &str| {
            Folders::default()
                .of(root, &root.join(p))
                .map(Result::unwrap)
        };
        assert_eq!(at("handbook.md"), Some(Access::public()));
        assert_eq!(at("hr/leave.md"), Some(Access::groups(["hr", "staff"])));
        assert_eq!(
            at("hr/private/pay.md"),
            Some(Access::groups(["hr", "staff"]))
        );
        std::fs::write(root.join("hr/private/.access"), "").unwrap();
        assert_eq!(at("hr/private/pay.md"), Some(Access::deny()));
        // Front matter wins over the folder.
        assert_eq!(
            Folders::default().access(
                Some(root),
                &root.join("hr/x.md"),
                "---\naccess: public\n---\n"
            ),
            Some(Access::public())
        );
        let mut folders = Folders::default();
        assert_ne!(folders.stamp(root, &root.join("hr/leave.md")), 0);
        assert_ne!(
            folders.stamp(root, &root.join("hr/leave.md")),
            folders.stamp(root, &root.join("handbook.md"))
        );
        // Kept for the scan: a change shows after `clear` (the next scan).
        let before = folders.stamp(root, &root.join("hr/leave.md"));
        std::fs::write(root.join("hr/.access"), "finance\n").unwrap();
        assert_eq!(folders.stamp(root, &root.join("hr/leave.md")), before);
        folders.clear();
        assert_ne!(folders.stamp(root, &root.join("hr/leave.md")), before);
    }
}
