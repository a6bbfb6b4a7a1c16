//! A migration's target configuration: the running one with `--set KEY=VALUE` pairs on
//! top, read by the same loader as `CASEMENT__*` variables, limited to what the stored
//! records can give (the model, the enrichment, the window radius); and the pairs that undo
//! them (a rollback's).

use anyhow::Context;

use crate::config::CasementConfig;

/// The `--set` pairs as environment pairs for the config loader, which then reads them as
/// it reads `CASEMENT__*` variables (types, unknown keys and checks included). A new
/// `text.window_radius` is the query side's `search.indexed_window_radius` too.
pub fn set_as_env(set: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for pair in set {
        let (key, value) = pair
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .with_context(|| {
                format!("--set {pair}: expected KEY=VALUE, e.g. embedder.precision=int8")
            })?;
        let name = key
            .trim()
            .split('.')
            .map(str::to_ascii_uppercase)
            .collect::<Vec<_>>()
            .join("__");
        pairs.push((
            format!("{}__{name}", crate::config::ENV_PREFIX),
            value.to_owned(),
        ));
    }
    let named = |suffix: &str| pairs.iter().find(|(k, _)| k.ends_with(suffix)).cloned();
    if let (Some((_, radius)), None) = (
        named("__TEXT__WINDOW_RADIUS"),
        named("__SEARCH__INDEXED_WINDOW_RADIUS"),
    ) {
        pairs.push((
            format!(
                "{}__SEARCH__INDEXED_WINDOW_RADIUS",
                crate::config::ENV_PREFIX
            ),
            radius,
        ));
    }
    Ok(pairs)
}

/// Where the running configuration came from (defaults, the file, the environment), so
/// that a migration's target is that configuration with the `--set` pairs on top.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    pub file: Option<std::path::PathBuf>,
}

impl ConfigSource {
    fn load(&self, extra: Vec<(String, String)>) -> anyhow::Result<CasementConfig> {
        Ok(casement_config::load(
            self.file.as_deref(),
            crate::config::ENV_PREFIX,
            std::env::vars().chain(extra),
        )?)
    }

    /// `running` with the sections a migration may change taken from the configuration
    /// with the `set` pairs; refused when the pairs touch anything else, or change nothing.
    pub fn target(
        &self,
        running: &CasementConfig,
        set: &[String],
    ) -> anyhow::Result<CasementConfig> {
        let target = self.with_pairs(running, set)?;
        anyhow::ensure!(
            !changed(running, &target).is_empty(),
            "nothing to migrate: the --set pairs leave the serving configuration as it is"
        );
        Ok(target)
    }
}

impl ConfigSource {
    /// `running` with the sections a migration may change taken from the configuration
    /// with the `set` pairs (which may change nothing); refused when they touch anything
    /// else.
    pub fn with_pairs(
        &self,
        running: &CasementConfig,
        set: &[String],
    ) -> anyhow::Result<CasementConfig> {
        let base = self.load(Vec::new())?;
        let with = self.load(set_as_env(set)?).context("the --set pairs")?;
        only_migratable(&base, &with)?;
        let mut target = running.clone();
        target.embedder = with.embedder;
        target.enrich = with.enrich;
        target.text.window_radius = with.text.window_radius;
        target.search.indexed_window_radius = with.search.indexed_window_radius;
        Ok(target)
    }
}

/// What may differ between the serving configuration and the target's: the embedding
/// model, the enrichment, the window radius (and the query side's copy of it). Anything
/// else (segmentation, store, sources) is refused: the stored records cannot give it.
fn only_migratable(current: &CasementConfig, target: &CasementConfig) -> anyhow::Result<()> {
    let mut same = target.clone();
    same.embedder = current.embedder.clone();
    same.enrich = current.enrich.clone();
    same.text.window_radius = current.text.window_radius;
    same.search.indexed_window_radius = current.search.indexed_window_radius;
    let text = |c: &CasementConfig| toml::to_string(c).unwrap_or_default();
    anyhow::ensure!(
        text(&same) == text(current),
        "a migration changes [embedder], [enrich] and text.window_radius only (the stored \
         records give nothing else); the --set pairs change more"
    );
    Ok(())
}

/// The sections `target` changes.
pub fn changed(current: &CasementConfig, target: &CasementConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if toml::to_string(&target.embedder).ok() != toml::to_string(&current.embedder).ok() {
        changed.push("embedder");
    }
    if toml::to_string(&target.enrich).ok() != toml::to_string(&current.enrich).ok() {
        changed.push("enrich");
    }
    if target.text.window_radius != current.text.window_radius {
        changed.push("text.window_radius");
    }
    changed
}

/// The pairs that bring `target` back to `previous`: each key of `set` (and the query
/// side's radius that goes with a radius) at its value in `previous`.
pub fn reverse(set: &[String], previous: &CasementConfig) -> anyhow::Result<Vec<String>> {
    let table = toml::Value::try_from(previous).context("reading the previous configuration")?;
    let prefix = format!("{}__", crate::config::ENV_PREFIX);
    set_as_env(set)?
        .into_iter()
        .map(|(name, _)| {
            let key: Vec<String> = name
                .trim_start_matches(&prefix)
                .split("__")
                .map(str::to_ascii_lowercase)
                .collect();
            let value = key
                .iter()
                .try_fold(&table, |value, part| value.get(part))
                .with_context(|| format!("{} has no value to restore", key.join(".")))?;
            let value = match value {
                toml::Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            Ok(format!("{}={value}", key.join(".")))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pairs_become_variables_and_a_radius_brings_the_query_side() {
        let env = set_as_env(&[
            "text.window_radius=1".into(),
            "embedder.precision=int8".into(),
        ])
        .unwrap();
        assert_eq!(
            env,
            [
                ("CASEMENT__TEXT__WINDOW_RADIUS".to_owned(), "1".to_owned()),
                (
                    "CASEMENT__EMBEDDER__PRECISION".to_owned(),
                    "int8".to_owned()
                ),
                (
                    "CASEMENT__SEARCH__INDEXED_WINDOW_RADIUS".to_owned(),
                    "1".to_owned()
                ),
            ]
        );
        assert!(set_as_env(&["embedder.precision".into()]).is_err());
        let previous = CasementConfig::default();
        assert_eq!(
            reverse(
                &[
                    "text.window_radius=1".into(),
                    "embedder.precision=int8".into()
                ],
                &previous
            )
            .unwrap(),
            [
                "text.window_radius=3",
                "embedder.precision=fp32",
                "search.indexed_window_radius=3"
            ]
        );
    }
}
