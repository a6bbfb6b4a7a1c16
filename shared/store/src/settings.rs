//! What an index was made with, recorded in the index (DESIGN.md, invariant 8: one
//! collection, one model), and the check every process makes at start.

use crate::Store;
use crate::error::{Error, Result};

/// What an index's vectors and windows are made with, recorded in the index itself (a
/// point of its own): a process configured otherwise would search it with query vectors
/// from another model, or write a mix of two models' vectors, windows or contexts.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct IndexSettings {
    /// The embedding model's name (`Embed::model_id`: name and precision, or the hosted
    /// model), for people.
    pub model: String,
    pub dimension: usize,
    /// The model's vector of [`SETTINGS_PROBE`]: what identifies it. Two processes use
    /// the same model when their probe vectors agree (cosine ≥ [`SAME_MODEL_COSINE`]),
    /// wherever the files are and whatever the directory is called; the same name at
    /// another precision does not. Empty: compared by name.
    pub probe: Vec<f32>,
    /// Sentences on each side of a sentence in its window (`text.window_radius`).
    pub window_radius: usize,
    /// How each sentence's embedding input is situated: `structural`, `none`, or
    /// `llm:<model>:<prompt version>`.
    pub context: String,
}

/// The text whose embedding identifies a model ([`IndexSettings::probe`]).
pub const SETTINGS_PROBE: &str = "Casement records which model embedded this index.";

/// Probe vectors at least this close come from the same model (the same model on other
/// threads or machines agrees to about 1e-6; its int8 quantisation is near 0.99).
pub const SAME_MODEL_COSINE: f32 = 0.9999;

impl IndexSettings {
    /// The same model: by probe vector when both have one, else by name; and the same
    /// dimension. The cosine of the probes, when compared.
    pub fn same_model(&self, other: &Self) -> (bool, Option<f32>) {
        if self.dimension != other.dimension {
            return (false, None);
        }
        if self.probe.is_empty() || other.probe.len() != self.probe.len() {
            return (self.model == other.model, None);
        }
        let cosine: f32 = self
            .probe
            .iter()
            .zip(&other.probe)
            .map(|(a, b)| a * b)
            .sum();
        (cosine >= SAME_MODEL_COSINE, Some(cosine))
    }
}

/// Who checks the settings: a writer (an indexer) must match in full and records them on
/// an index that has none; a reader (a query service) must match the model, dimension and
/// window radius, and records nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Write,
    Read,
}

/// What [`check_settings`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingsCheck {
    /// The index's recorded settings are this process's.
    Match,
    /// None were recorded (a new index, or one made before they were kept): now they are.
    Recorded { documents: u64 },
    /// None are recorded, and a reader records nothing.
    Unrecorded,
}

/// Compares this process's settings with the index's, at start: a mismatch is an error
/// that says both, so a service with another model or radius refuses to start instead of
/// answering nonsense or mixing vectors.
pub async fn check_settings<S: Store>(
    store: &S,
    ours: &IndexSettings,
    access: Access,
) -> Result<SettingsCheck> {
    let Some(theirs) = store.settings().await? else {
        store.bind_settings(ours, access);
        if access == Access::Read {
            return Ok(SettingsCheck::Unrecorded);
        }
        let documents = store.stats().await?.documents;
        store.record_settings(ours).await?;
        return Ok(SettingsCheck::Recorded { documents });
    };
    let differences = differences(&theirs, ours, access);
    if differences.is_empty() {
        store.bind_settings(ours, access);
        return Ok(SettingsCheck::Match);
    }
    Err(Error::Settings {
        differences: differences.join("; "),
        access,
    })
}

/// What keeps a process with settings `ours` from using an index made with `theirs`, as
/// `access` needs them (empty: nothing).
pub fn differences(theirs: &IndexSettings, ours: &IndexSettings, access: Access) -> Vec<String> {
    let mut differences = Vec::new();
    let (same_model, cosine) = theirs.same_model(ours);
    if !same_model {
        differences.push(format!(
            "it was embedded with {} ({} dimensions), this process embeds with {} ({} dimensions){}",
            theirs.model,
            theirs.dimension,
            ours.model,
            ours.dimension,
            cosine
                .map(|c| format!("; their vectors of one probe text have a cosine of {c:.4}"))
                .unwrap_or_default()
        ));
    }
    if theirs.window_radius != ours.window_radius {
        differences.push(format!(
            "its windows have a radius of {} sentences, this process's {}",
            theirs.window_radius, ours.window_radius
        ));
    }
    if access == Access::Write && theirs.context != ours.context {
        differences.push(format!(
            "its sentences are situated by `{}`, this process's by `{}`",
            theirs.context, ours.context
        ));
    }
    differences
}
