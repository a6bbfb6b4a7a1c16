//! Segment stage: the revision's text into sections and sentences, re-segmenting only the
//! sections whose content changed against the indexed records
//! (`casement_text::segment_against`).

use casement_text::{Revision, SegmentedRevision, SentenceRecord, TextConfig};

use crate::processor::ProcessError;

pub fn run(
    current: &[SentenceRecord],
    revision: &Revision,
    config: &TextConfig,
) -> Result<SegmentedRevision, ProcessError> {
    Ok(casement_text::segment_against(current, revision, config)?)
}
