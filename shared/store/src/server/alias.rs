//! Collections behind an alias. Casement creates a server collection as `<name>.1` behind
//! the alias `<name>` (`store.collection`), so that `casement migrate` can build another
//! (`<name>.2`, ...) beside it and move the alias, which Qdrant does atomically for every
//! reader (one alias operation, applied under its collections lock).
//!
//! A process resolves the alias when it opens the store and keeps that collection. Every
//! `store.server.follow_secs` it looks where the alias points:
//! - at its own collection: nothing to do (also after a rollback brought it back);
//! - at a collection whose recorded settings fit this process, when it only reads (a query
//!   service: same model, dimension and window radius): its reads move there;
//! - otherwise it keeps reading its collection (kept for a rollback, and consistent with
//!   its model) and refuses every write with [`Error::Moved`], which the pipeline retries
//!   without committing past the event: an indexer with the old model never writes old
//!   vectors into the new collection, and restarted with the new settings it opens the new
//!   collection and goes on from its last commit. A writer never follows: the plans it
//!   computed against one collection must not be applied to another.
//!
//! A writer also looks at every `Store::sync`, which the pipeline calls before it
//! acknowledges (commits) any event: an event is committed only if the alias still named
//! this process's collection after its write. So every committed write to a collection
//! happened before the alias moved away from it, and one copy pass after the move (the
//! migration's catch-up) finds them all; an event written there after the move is refused
//! at its flush and delivered again after the restart.
//!
//! [`super::Aliases`] (`aliases.rs`) are the operations `casement migrate` needs.

use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use super::grpc::Grpc;

use super::grpc;
use crate::error::{Error, Result};
use crate::settings::{Access, IndexSettings, differences};

/// The `n`th collection behind `alias`: `<alias>.<n>`.
pub fn numbered(alias: &str, n: u64) -> String {
    format!("{alias}.{n}")
}

/// `n` of a collection `<alias>.<n>`.
pub fn number_of(alias: &str, collection: &str) -> Option<u64> {
    collection
        .strip_prefix(alias)?
        .strip_prefix('.')
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))?
        .parse()
        .ok()
}

/// The collection `alias` names, if it is an alias.
pub(super) async fn resolve(client: &Grpc, alias: &str) -> Result<Option<String>> {
    let aliases = client
        .list_aliases()
        .await
        .map_err(grpc("list aliases"))?
        .aliases;
    Ok(aliases
        .into_iter()
        .find(|a| a.alias_name == alias)
        .map(|a| a.collection_name))
}

/// Where a process stands with respect to the alias it opened.
#[derive(Debug)]
pub(super) struct Follow {
    every: Duration,
    /// This process's settings and access, once checked at start (`Store::bind_settings`).
    ours: RwLock<Option<(IndexSettings, Access)>>,
    /// Set while the alias names another collection than this process's, which it may not
    /// write to.
    moved: RwLock<Option<Moved>>,
    /// The target last warned about (one warning per move).
    warned: std::sync::Mutex<Option<String>>,
    /// Held across a whole look, so that an older answer never overwrites a newer one.
    looking: tokio::sync::Mutex<()>,
}

#[derive(Debug, Clone)]
pub(super) struct Moved {
    target: String,
    reason: String,
}

impl Moved {
    pub(super) fn error(self, alias: &str, collection: &str) -> Error {
        Error::Moved {
            alias: alias.to_owned(),
            collection: collection.to_owned(),
            target: self.target,
            reason: self.reason,
        }
    }
}

impl Follow {
    pub(super) fn new(every: Duration) -> Self {
        Self {
            every,
            ours: RwLock::new(None),
            moved: RwLock::new(None),
            warned: std::sync::Mutex::new(None),
            looking: tokio::sync::Mutex::new(()),
        }
    }

    pub(super) fn bind(&self, ours: &IndexSettings, access: Access) {
        if let Ok(mut slot) = self.ours.write() {
            *slot = Some((ours.clone(), access));
        }
    }

    /// `Err(Moved)` while the alias names a collection this process may not write to.
    pub(super) fn writable(&self, alias: Option<&str>, collection: &str) -> Result<()> {
        let moved = self.moved.read().ok().and_then(|m| m.clone());
        match (alias, moved) {
            (Some(alias), Some(moved)) => Err(moved.error(alias, collection)),
            _ => Ok(()),
        }
    }

    fn access(&self) -> Option<Access> {
        self.ours
            .read()
            .ok()
            .and_then(|o| o.as_ref().map(|(_, a)| *a))
    }

    fn set_moved(&self, moved: Option<Moved>) {
        if let Ok(mut slot) = self.moved.write() {
            *slot = moved;
        }
    }

    /// Whether a warning about `target` is due (the first since it moved there).
    fn first_warning(&self, target: Option<&str>) -> bool {
        let Ok(mut warned) = self.warned.lock() else {
            return false;
        };
        let first = warned.as_deref() != target;
        *warned = target.map(str::to_owned);
        first
    }
}

/// Starts the task that looks where `alias` points every `follow.every` (nothing when that
/// is zero); it ends once the store is dropped.
pub(super) fn spawn_follower(
    client: Arc<Grpc>,
    alias: String,
    collection: Arc<RwLock<String>>,
    follow: &Arc<Follow>,
) {
    if follow.every.is_zero() {
        return;
    }
    let weak = Arc::downgrade(follow);
    let every = follow.every;
    tokio::spawn(async move {
        let mut failures = 0u32;
        loop {
            tokio::time::sleep(every).await;
            let Some(follow) = Weak::upgrade(&weak) else {
                return;
            };
            match look(&client, &alias, &collection, &follow).await {
                Ok(_) => failures = 0,
                Err(error) => {
                    failures += 1;
                    // A server that does not answer shows in every other call too; a
                    // lasting failure to look is worth a warning of its own.
                    if failures == 3 {
                        tracing::warn!(%error, alias = %alias, "cannot look where the collection alias points (3 tries in a row)");
                    }
                }
            }
        }
    });
}

/// Looks where `alias` points and settles what this process does about it:
/// - it names `collection`: carry on, writes allowed;
/// - it names another collection and this process only reads, with settings that fit that
///   collection's: reads move there;
/// - it names nothing (deleted by hand): a reader carries on, a writer refuses;
/// - otherwise writes are refused from now on (whatever the other collection's settings,
///   readable or not: a writer's plans were made against its own collection) and reads stay.
///
/// Returns the refusal this look decided, if any: what a flush goes by (not the shared
/// state, which a concurrent look may be about to change).
pub(super) async fn look(
    client: &Grpc,
    alias: &str,
    collection: &RwLock<String>,
    follow: &Follow,
) -> Result<Option<Moved>> {
    let _in_order = follow.looking.lock().await;
    let current = read_name(collection);
    let reader = follow.access() == Some(Access::Read);
    let target = match resolve(client, alias).await? {
        Some(target) if target != current => target,
        None if !reader => {
            let moved = Moved {
                target: "nothing".to_owned(),
                reason: "the alias was deleted".to_owned(),
            };
            if follow.first_warning(Some("")) {
                tracing::warn!(alias, collection = %current, "the collection alias names no collection: this process writes nothing until it names this process's collection again");
            }
            follow.set_moved(Some(moved.clone()));
            return Ok(Some(moved));
        }
        _ => {
            let was_moved = follow.moved.read().is_ok_and(|m| m.is_some());
            follow.set_moved(None);
            if follow.first_warning(None) && was_moved {
                tracing::info!(alias, collection = %current, "the collection alias names this process's collection again: writes resume");
            }
            return Ok(None);
        }
    };
    let theirs = super::read::settings_of(client, &target).await;
    let ours = follow.ours.read().ok().and_then(|o| o.clone());
    let reason = match (&theirs, &ours) {
        (Ok(Some(theirs)), Some((ours, access))) => {
            let found = differences(theirs, ours, *access);
            if found.is_empty() && *access == Access::Read {
                if let Ok(mut name) = collection.write() {
                    *name = target.clone();
                }
                follow.set_moved(None);
                follow.first_warning(None);
                tracing::info!(alias, from = %current, to = %target, "the collection alias moved to a collection of this process's model and radius: searches follow it");
                return Ok(None);
            }
            if found.is_empty() {
                "made with the same settings, but a writer stays on the collection its plans were made against".to_owned()
            } else {
                format!("made with other settings: {}", found.join("; "))
            }
        }
        (Ok(None), _) => "which records no settings".to_owned(),
        (Ok(Some(_)), None) => "this process's settings were not checked against it".to_owned(),
        (Err(error), _) => format!("whose settings could not be read: {error}"),
    };
    if follow.first_warning(Some(&target)) {
        tracing::warn!(alias, collection = %current, target = %target, reason = %reason,
            "the collection alias moved to another collection: this process keeps reading its own and writes nothing until it restarts with the new collection's settings");
    }
    let moved = Moved { target, reason };
    follow.set_moved(Some(moved.clone()));
    Ok(Some(moved))
}

pub(super) fn read_name(collection: &RwLock<String>) -> String {
    collection
        .read()
        .map_or_else(|poisoned| poisoned.into_inner().clone(), |c| c.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names() {
        assert_eq!(numbered("casement", 3), "casement.3");
        assert_eq!(number_of("casement", "casement.12"), Some(12));
        assert_eq!(number_of("casement", "casement"), None);
        assert_eq!(number_of("casement", "casement."), None);
        assert_eq!(number_of("casement", "casement.x"), None);
        assert_eq!(number_of("casement", "casement_other.1"), None);
        assert_eq!(number_of("case", "casement.1"), None);
    }
}
