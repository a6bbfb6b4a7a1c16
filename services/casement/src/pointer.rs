//! Which index is served, for either store, and how a migration moves it:
//! - the embedded store: `<data_dir>/serving.json` names an index directory of the data
//!   directory ([`crate::serving`]);
//! - a Qdrant server: the collection alias `store.collection` names a collection
//!   `<alias>.<n>` ([`casement_store::Aliases`]), and Casement's record in each
//!   collection's metadata says what the file says for a directory: the collection kept
//!   for a rollback (in the served one's record) and a migration under way (in the record
//!   of the collection it builds).
//!
//! Either way the swap is one atomic step for readers: a rename of the file, or one alias
//! operation on the server.

use std::path::{Path, PathBuf};

use anyhow::Context;
use casement_store::{Aliases, Backend, StoreConfig};
use serde::{Deserialize, Serialize};

use crate::config::CasementConfig;
use crate::serving::{Previous, Serving, Underway, now};

#[derive(Debug, Clone)]
pub enum Pointer {
    /// The data directory whose `serving.json` names the served index.
    Dir(PathBuf),
    /// The alias on a Qdrant server.
    Alias(Aliases),
}

/// Casement's record in a server collection's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    /// In the served collection: the one it replaced, kept for a rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous: Option<Previous>,
    /// In a collection a migration builds: its `--set` pairs (until it is swapped in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    migration: Option<Vec<String>>,
    /// In the served collection, from just before the alias moved to it until the
    /// catch-up pass finished: the collection it replaced, which writers may have written
    /// after the last copy (`migrate::catch_up::settle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    catch_up: Option<String>,
}

impl Record {
    fn parse(collection: &str, text: Option<String>) -> anyhow::Result<Self> {
        match text {
            None => Ok(Self::default()),
            Some(text) => serde_json::from_str(&text).with_context(|| {
                format!("the metadata of collection {collection} holds no record Casement can read")
            }),
        }
    }

    fn text(&self) -> anyhow::Result<String> {
        if *self == Self::default() {
            return Ok(String::new());
        }
        Ok(serde_json::to_string(self)?)
    }
}

impl Pointer {
    /// The pointer of `config`'s store: its data directory's file, or the server's alias.
    pub fn of(config: &CasementConfig) -> anyhow::Result<Self> {
        match config.store.backend {
            Backend::Edge => {
                anyhow::ensure!(
                    config.store.edge.path.as_os_str().is_empty(),
                    "store.edge.path is set: casement migrate manages the index directories of \
                     data_dir (index, index.2, ...); leave store.edge.path unset"
                );
                Ok(Self::Dir(config.data_dir.clone()))
            }
            Backend::Server => Ok(Self::Alias(Aliases::connect(&config.store())?)),
        }
    }

    /// What to say when the serving index cannot be opened.
    pub fn busy_hint(&self) -> String {
        match self {
            Self::Dir(_) => "opening the serving index (is a service running on this data \
                directory? `casement migrate --url` asks it)"
                .to_owned(),
            Self::Alias(aliases) => {
                format!("opening the collection the alias {} names", aliases.alias())
            }
        }
    }

    /// Where `serving.json` is, or which alias: for messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Dir(data_dir) => Serving::path(data_dir).display().to_string(),
            Self::Alias(aliases) => format!("the collection alias {}", aliases.alias()),
        }
    }

    /// The served index, the one kept for a rollback and a migration under way.
    pub async fn load(&self) -> anyhow::Result<Serving> {
        let aliases = match self {
            Self::Dir(data_dir) => return Serving::load(data_dir),
            Self::Alias(aliases) => aliases,
        };
        let alias = aliases.alias();
        let Some(index) = aliases.target().await? else {
            if aliases.exists(alias).await? {
                anyhow::bail!(
                    "the collection {alias} is not behind an alias (it was created before Casement \
                     put its collections behind one), so no migration can swap another in: \
                     backfill the new configuration into a new store.collection and point the \
                     services at it"
                );
            }
            anyhow::bail!(
                "the alias {alias} names no collection on the server: nothing to migrate"
            );
        };
        let record = Record::parse(&index, aliases.record(&index).await?)?;
        let previous = record.previous;
        let mut migration = None;
        for (_, collection) in aliases.numbered().await? {
            if collection == index || previous.as_ref().is_some_and(|p| p.index == collection) {
                continue;
            }
            if let Some(set) =
                Record::parse(&collection, aliases.record(&collection).await?)?.migration
            {
                migration = Some(Underway {
                    target: collection,
                    set,
                });
            }
        }
        Ok(Serving {
            index,
            previous,
            migration,
        })
    }

    /// The store configuration of index `name` itself (a directory, or a collection opened
    /// as it is rather than through the alias).
    pub fn store_config(&self, config: &CasementConfig, name: &str) -> StoreConfig {
        let mut store = config.store();
        match self {
            Self::Dir(data_dir) => store.edge.path = Serving::dir(data_dir, name),
            Self::Alias(_) => {
                store.collection = name.to_owned();
                store.exact_collection = true;
            }
        }
        store
    }

    pub async fn exists(&self, name: &str) -> anyhow::Result<bool> {
        match self {
            Self::Dir(data_dir) => Ok(Serving::dir(data_dir, name).exists()),
            Self::Alias(aliases) => Ok(aliases.exists(name).await?),
        }
    }

    /// The index a migration with `set` builds: the one a killed migration with the same
    /// pairs was building (resumed), else a new one. A directory is recorded before it is
    /// created; a collection once created ([`Pointer::opened`]).
    pub async fn begin(&self, serving: &mut Serving, set: &[String]) -> anyhow::Result<String> {
        if let Some(underway) = &serving.migration
            && underway.set == set
        {
            eprintln!("resuming the migration into {}", underway.target);
            return Ok(underway.target.clone());
        }
        if let Some(stale) = serving.migration.take() {
            eprintln!(
                "discarding the unfinished migration into {} ({}): another was asked",
                stale.target,
                stale.set.join(" ")
            );
            self.remove(&stale.target).await?;
        }
        match self {
            Self::Dir(data_dir) => {
                let name = serving.next_name(data_dir);
                serving.migration = Some(Underway {
                    target: name.clone(),
                    set: set.to_vec(),
                });
                serving.save(data_dir)?;
                Ok(name)
            }
            Self::Alias(aliases) => {
                let mut highest = 1;
                for (n, collection) in aliases.numbered().await? {
                    let kept = serving
                        .previous
                        .as_ref()
                        .is_some_and(|p| p.index == collection);
                    if collection != serving.index && !kept {
                        // Nothing serves it, nothing keeps it, and no migration with these
                        // pairs builds it (one killed before its record was written).
                        eprintln!("deleting {collection}: neither served, kept nor being built");
                        self.remove(&collection).await?;
                    }
                    highest = highest.max(n);
                }
                Ok(aliases.numbered_name(highest + 1))
            }
        }
    }

    /// The new index `name` exists: on a server, its record says which migration builds it.
    pub async fn opened(&self, name: &str, set: &[String]) -> anyhow::Result<()> {
        if let Self::Alias(aliases) = self {
            let mut record = Record::parse(name, aliases.record(name).await?)?;
            if record.migration.as_deref() != Some(set) {
                record.migration = Some(set.to_vec());
                aliases.set_record(name, &record.text()?).await?;
            }
        }
        Ok(())
    }

    /// Serves `name`, keeping the index it replaces for `keep_hours` with the pairs that
    /// rebuild that one's configuration (`restore`) and those that built `name` over it
    /// (`applied`); an older kept index is deleted. Returns the index replaced.
    pub async fn swap(
        &self,
        serving: &mut Serving,
        name: &str,
        restore: Vec<String>,
        applied: &[String],
        keep_hours: u64,
    ) -> anyhow::Result<String> {
        let old = std::mem::replace(&mut serving.index, name.to_owned());
        let kept = Previous {
            index: old.clone(),
            keep_until: now().saturating_add(keep_hours.saturating_mul(3600)),
            restore,
            applied: applied.to_vec(),
        };
        let replaced = serving.previous.replace(kept.clone());
        if serving.migration.as_ref().is_some_and(|m| m.target == name) {
            serving.migration = None;
        }
        match self {
            Self::Dir(data_dir) => serving.save(data_dir)?,
            Self::Alias(aliases) => {
                // Another migration may have swapped since this one began: serving what
                // was copied from a collection no longer served would lose its writes.
                let now = aliases.target().await?;
                anyhow::ensure!(
                    now.as_deref() == Some(old.as_str()),
                    "nothing swapped: the alias {} names {} now, not {old}, which this \
                     migration copied from (another migration swapped meanwhile)",
                    aliases.alias(),
                    now.as_deref().unwrap_or("no collection")
                );
                // The record first, keeping the migration's: killed before the alias moves,
                // the same command resumes it; killed after, the catch-up is pending.
                let mut record = Record::parse(name, aliases.record(name).await?)?;
                record.previous = Some(kept);
                record.catch_up = Some(old.clone());
                aliases.set_record(name, &record.text()?).await?;
                aliases.point_at(name).await?;
                // The alias moved: the swap happened. What follows is tidying, which may
                // fail without undoing it (a migration record left in the served
                // collection is ignored, a kept one's record is replaced at its next swap).
                record.migration = None;
                if let Err(error) = aliases.set_record(name, &record.text()?).await {
                    tracing::warn!(%error, collection = %name, "could not drop the migration from the served collection's record");
                }
                if let Err(error) = aliases.set_record(&old, "").await {
                    tracing::warn!(%error, collection = %old, "could not clear the record of the replaced collection");
                }
            }
        }
        // The pointer is moved: the swap happened, whatever becomes of the older index.
        if let Some(replaced) = replaced.filter(|r| r.index != name && r.index != old)
            && let Err(error) = self.remove(&replaced.index).await
        {
            tracing::warn!(error = format!("{error:#}"), index = %replaced.index, "the index kept before could not be deleted; delete it by hand");
        }
        Ok(old)
    }

    /// On a server: the collection a stopped migration swapped out of the served one
    /// before copying what writers wrote there last (see `migrate::catch_up::settle`).
    pub async fn pending_catch_up(&self, serving: &Serving) -> anyhow::Result<Option<String>> {
        match self {
            Self::Dir(_) => Ok(None),
            Self::Alias(aliases) => {
                Ok(Record::parse(&serving.index, aliases.record(&serving.index).await?)?.catch_up)
            }
        }
    }

    /// The catch-up into `name` is done.
    pub async fn caught_up(&self, name: &str) -> anyhow::Result<()> {
        if let Self::Alias(aliases) = self {
            let mut record = Record::parse(name, aliases.record(name).await?)?;
            if record.catch_up.take().is_some() {
                aliases.set_record(name, &record.text()?).await?;
            }
        }
        Ok(())
    }

    /// The dense dimension recorded in index `name` (to open it with), if any.
    pub async fn dimension(&self, name: &str) -> anyhow::Result<Option<usize>> {
        match self {
            Self::Dir(_) => Ok(None),
            Self::Alias(aliases) => Ok(aliases.settings(name).await?.map(|s| s.dimension)),
        }
    }

    /// Deletes the index kept for a rollback once its time is up.
    pub async fn forget_expired(&self, serving: &mut Serving) -> anyhow::Result<()> {
        let Some(previous) = serving.previous.clone() else {
            return Ok(());
        };
        if previous.keep_until > now() {
            return Ok(());
        }
        eprintln!(
            "deleting {}: kept for a rollback until its time ran out",
            previous.index
        );
        self.remove(&previous.index).await?;
        serving.previous = None;
        match self {
            Self::Dir(data_dir) => serving.save(data_dir)?,
            Self::Alias(aliases) => {
                let mut record =
                    Record::parse(&serving.index, aliases.record(&serving.index).await?)?;
                record.previous = None;
                aliases.set_record(&serving.index, &record.text()?).await?;
            }
        }
        Ok(())
    }

    async fn remove(&self, name: &str) -> anyhow::Result<()> {
        match self {
            Self::Dir(data_dir) => remove_dir(data_dir, name),
            Self::Alias(aliases) => {
                if aliases.exists(name).await? {
                    aliases
                        .drop_collection(name)
                        .await
                        .with_context(|| format!("deleting collection {name}"))?;
                }
                Ok(())
            }
        }
    }
}

fn remove_dir(data_dir: &Path, name: &str) -> anyhow::Result<()> {
    let dir = Serving::dir(data_dir, name);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting {}", dir.display())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_empty_is_none() {
        assert_eq!(Record::default().text().unwrap(), "");
        assert_eq!(Record::parse("c.1", None).unwrap(), Record::default());
        let record = Record {
            previous: Some(Previous {
                index: "casement.1".into(),
                keep_until: 7,
                restore: vec!["embedder.precision=fp32".into()],
                applied: Vec::new(),
            }),
            migration: Some(vec!["embedder.precision=int8".into()]),
            catch_up: Some("casement.1".into()),
        };
        let text = record.text().unwrap();
        assert_eq!(Record::parse("c.2", Some(text)).unwrap(), record);
        let error = Record::parse("c.2", Some("{\"other\": 1}".into()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("c.2"), "{error}");
    }
}
