//! Write stage: the plan and its vectors into the store, in the order that makes a cut-off
//! write heal on redelivery (`casement_store::Store::apply`), under the same revision fence.

use casement_store::{Applied, Store};
use casement_text::ChangePlan;

use crate::outcome::RetryStage;
use crate::processor::ProcessError;

pub async fn run<S: Store>(
    store: &S,
    plan: &ChangePlan,
    vectors: &[Vec<f32>],
) -> Result<Applied, ProcessError> {
    store
        .apply(plan, vectors)
        .await
        .map_err(ProcessError::store(RetryStage::Write))
}
