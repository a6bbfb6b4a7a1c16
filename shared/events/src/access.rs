//! Who may read a document, as events say it, and the default for those that do not
//! (`[access]`).

use std::collections::BTreeMap;

use casement_text::Access;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Change, Event, Rejection, reject};

/// What a document is when its event says nothing of access.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessDefault {
    /// Readable by every key of its tenant (what every document was before access control).
    #[default]
    Public,
    /// Readable by operator keys only, until an event gives it groups.
    Deny,
}

/// `[access]`: the default, and the MediaWiki namespaces restricted to groups.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessConfig {
    pub default: AccessDefault,
    /// MediaWiki namespace number (as a string key: `"4"`, `"100"`) → the groups that may
    /// read its pages (as Lockdown's `$wgNamespacePermissionLockdown` restricts them).
    /// Pages of namespaces not listed get `default`.
    pub mediawiki_namespaces: BTreeMap<String, Vec<String>>,
}

impl AccessConfig {
    pub fn default_access(&self) -> Access {
        match self.default {
            AccessDefault::Public => Access::public(),
            AccessDefault::Deny => Access::deny(),
        }
    }

    /// The access of a page in MediaWiki namespace `namespace`: the map's groups, or none
    /// (the default applies).
    pub fn namespace(&self, namespace: i64) -> Option<Access> {
        self.mediawiki_namespaces
            .get(&namespace.to_string())
            .map(|groups| Access::groups(groups.iter().cloned()))
    }

    /// Bad config fails at start: namespace keys are integers, group names valid.
    pub fn validate(&self) -> Result<(), String> {
        for (namespace, groups) in &self.mediawiki_namespaces {
            if namespace.parse::<i64>().is_err() {
                return Err(format!(
                    "access.mediawiki_namespaces: {namespace:?} is not a namespace number"
                ));
            }
            Access::groups(groups.iter().cloned())
                .validate()
                .map_err(|e| format!("access.mediawiki_namespaces.{namespace}: {e}"))?;
        }
        Ok(())
    }

    /// Gives an event that says nothing of access the default.
    pub fn resolve(&self, event: &mut Event) {
        let access = match &mut event.change {
            Change::Upsert(revision) | Change::Restore(revision) => &mut revision.access,
            Change::Fetch(reference) => &mut reference.access,
            Change::Delete { .. } => return,
        };
        if access.is_none() {
            *access = Some(self.default_access());
        }
    }
}

/// An event's `access` object (`{"groups": [...]}`, `{"public": true}`), checked.
pub(crate) fn checked(access: Option<Access>) -> Result<Option<Access>, Rejection> {
    let Some(access) = access else {
        return Ok(None);
    };
    let access = access.normalized();
    access
        .validate()
        .map_err(|e| reject("schema", format!("access: {e}")))?;
    Ok(Some(access))
}

/// A column's access: a JSON array of groups, the string `public`, or groups separated by
/// commas; `null` or an empty value: the event does not say.
pub(crate) fn from_column(
    value: Option<&Value>,
    column: &str,
) -> Result<Option<Access>, Rejection> {
    let access = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => {
            let groups: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect();
            Access::groups(groups.ok_or_else(|| {
                reject(
                    "schema",
                    format!("column {column:?}: groups must be strings"),
                )
            })?)
        }
        Some(Value::String(text)) if text.trim().is_empty() => return Ok(None),
        Some(Value::String(text)) if text.trim().eq_ignore_ascii_case("public") => Access::public(),
        Some(Value::String(text)) => {
            // A JSON array kept as text (a `json`/`text` column) or a comma list.
            match serde_json::from_str::<Vec<String>>(text) {
                Ok(groups) => Access::groups(groups),
                Err(_) => Access::groups(
                    text.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_owned),
                ),
            }
        }
        Some(other) => {
            return Err(reject(
                "schema",
                format!("column {column:?}: access must be groups or \"public\", not {other}"),
            ));
        }
    };
    checked(Some(access))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_column_gives_groups_public_or_nothing() {
        let col = |v: Value| from_column(Some(&v), "acl").unwrap();
        assert_eq!(
            col(json!(["hr", "staff"])),
            Some(Access::groups(["hr", "staff"]))
        );
        assert_eq!(
            col(json!("hr, staff")),
            Some(Access::groups(["hr", "staff"]))
        );
        assert_eq!(col(json!("[\"hr\"]")), Some(Access::groups(["hr"])));
        assert_eq!(col(json!("public")), Some(Access::public()));
        assert_eq!(col(json!(null)), None);
        assert_eq!(col(json!("")), None);
        assert!(from_column(Some(&json!(3)), "acl").is_err());
        assert!(from_column(Some(&json!([1])), "acl").is_err());
    }

    #[test]
    fn namespaces_map_to_groups_and_bad_keys_fail() {
        let mut config = AccessConfig::default();
        config
            .mediawiki_namespaces
            .insert("100".into(), vec!["hr".into()]);
        assert_eq!(config.namespace(100), Some(Access::groups(["hr"])));
        assert_eq!(config.namespace(0), None);
        assert!(config.validate().is_ok());
        config.mediawiki_namespaces.insert("Talk".into(), vec![]);
        assert!(config.validate().unwrap_err().contains("\"Talk\""));
    }
}
