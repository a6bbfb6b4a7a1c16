//! Who may read a document ([`Access`], carried by its revisions and stored on each of its
//! points) and who is reading ([`Reader`]). The one rule between them is
//! [`Access::readable_by`]; the store's payload filter is the same rule inside the engine
//! (`casement_store`, `sentence_filter`).

use serde::{Deserialize, Serialize};

/// The longest group name taken, in bytes.
pub const MAX_GROUP_BYTES: usize = 256;
/// The most groups one document may name.
pub const MAX_GROUPS: usize = 64;

/// Who may read a document: anyone (`public`), or a reader in any of `groups`. Public with
/// groups is public. Neither (`Access::deny()`) is readable by operators only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    #[serde(default)]
    pub public: bool,
    #[serde(default)]
    pub groups: Vec<String>,
}

impl Default for Access {
    /// Public: what a document written before access existed, or without any rule, is.
    fn default() -> Self {
        Self::public()
    }
}

impl Access {
    pub fn public() -> Self {
        Self {
            public: true,
            groups: Vec::new(),
        }
    }

    /// Readable by operators only.
    pub fn deny() -> Self {
        Self {
            public: false,
            groups: Vec::new(),
        }
    }

    /// Readable by members of any of `groups` (normalised: sorted, without repeats).
    pub fn groups<I, G>(groups: I) -> Self
    where
        I: IntoIterator<Item = G>,
        G: Into<String>,
    {
        Self {
            public: false,
            groups: groups.into_iter().map(Into::into).collect(),
        }
        .normalized()
    }

    /// One form per meaning, so that equal access compares equal (a payload is rewritten
    /// only when access really changed): groups sorted and deduplicated, and none kept
    /// beside `public`.
    pub fn normalized(mut self) -> Self {
        if self.public {
            self.groups.clear();
        } else {
            self.groups.sort_unstable();
            self.groups.dedup();
        }
        self
    }

    /// A group name is 1 to [`MAX_GROUP_BYTES`] bytes without control characters, and a
    /// document names at most [`MAX_GROUPS`].
    pub fn validate(&self) -> Result<(), String> {
        if self.groups.len() > MAX_GROUPS {
            return Err(format!(
                "access names {} groups, over {MAX_GROUPS}",
                self.groups.len()
            ));
        }
        for group in &self.groups {
            check_group(group)?;
        }
        Ok(())
    }

    pub fn readable_by(&self, reader: &Reader) -> bool {
        match reader {
            Reader::Operator => true,
            Reader::Groups(groups) => {
                self.public || self.groups.iter().any(|g| groups.binary_search(g).is_ok())
            }
        }
    }
}

/// The rule for one group name (documents' and readers' alike).
pub fn check_group(group: &str) -> Result<(), String> {
    if group.trim().is_empty() {
        return Err("an access group name is empty".into());
    }
    if group.len() > MAX_GROUP_BYTES {
        return Err(format!(
            "access group {:?}… is {} bytes, over {MAX_GROUP_BYTES}",
            group.chars().take(32).collect::<String>(),
            group.len()
        ));
    }
    if group.chars().any(char::is_control) {
        return Err(format!("access group {group:?} holds a control character"));
    }
    Ok(())
}

/// Who is reading: an operator (every document), or a reader in `groups` (public
/// documents and those naming any of its groups; none: public documents only).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reader {
    Operator,
    /// Sorted, without repeats (made by [`Reader::groups`]).
    Groups(Vec<String>),
}

impl Default for Reader {
    /// An operator: what a store read means when it names no reader (tools, audits). The
    /// query service always names its caller's.
    fn default() -> Self {
        Self::Operator
    }
}

impl Reader {
    pub fn groups<I, G>(groups: I) -> Self
    where
        I: IntoIterator<Item = G>,
        G: Into<String>,
    {
        let mut groups: Vec<String> = groups.into_iter().map(Into::into).collect();
        groups.sort_unstable();
        groups.dedup();
        Self::Groups(groups)
    }

    /// A reader of public documents only.
    pub fn public() -> Self {
        Self::Groups(Vec::new())
    }

    /// The reader in both: what `self` may read that `other` may read too (a bot's key
    /// narrowed to the person it acts for).
    pub fn intersect(&self, other: &Self) -> Self {
        match (self, other) {
            (Self::Operator, other) | (other, Self::Operator) => other.clone(),
            (Self::Groups(ours), Self::Groups(theirs)) => Self::Groups(
                ours.iter()
                    .filter(|g| theirs.binary_search(g).is_ok())
                    .cloned()
                    .collect(),
            ),
        }
    }

    pub fn is_operator(&self) -> bool {
        matches!(self, Self::Operator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_is_readable_by_everyone_and_groups_by_members_only() {
        let hr = Access::groups(["hr", "staff", "hr"]);
        assert_eq!(hr.groups, ["hr", "staff"]);
        assert!(hr.readable_by(&Reader::groups(["staff"])));
        assert!(!hr.readable_by(&Reader::groups(["support"])));
        assert!(!hr.readable_by(&Reader::public()));
        assert!(hr.readable_by(&Reader::Operator));
        assert!(Access::public().readable_by(&Reader::public()));
        assert!(!Access::deny().readable_by(&Reader::groups(["hr"])));
        assert!(Access::deny().readable_by(&Reader::Operator));
        let both = Access {
            public: true,
            groups: vec!["hr".into()],
        }
        .normalized();
        assert_eq!(both, Access::public());
    }

    #[test]
    fn a_key_narrowed_by_a_person_reads_only_what_both_may() {
        let bot = Reader::groups(["staff", "hr", "support"]);
        let person = Reader::groups(["hr", "finance"]);
        assert_eq!(bot.intersect(&person), Reader::groups(["hr"]));
        assert_eq!(Reader::Operator.intersect(&person), person);
        assert_eq!(Reader::public().intersect(&person), Reader::public());
    }

    #[test]
    fn group_names_are_checked() {
        assert!(Access::groups([""]).validate().is_err());
        assert!(Access::groups(["a\u{0}"]).validate().is_err());
        assert!(
            Access::groups(["x".repeat(MAX_GROUP_BYTES + 1)])
                .validate()
                .is_err()
        );
        assert!(
            Access::groups((0..=MAX_GROUPS).map(|i| i.to_string()))
                .validate()
                .is_err()
        );
        assert!(Access::groups(["support-tier2"]).validate().is_ok());
    }
}
