use casement_text::{
    ChangePlan, Format, Operation, Revision, SentenceRecord, TextConfig, plan_delete, plan_upsert,
};

use super::{UPSERT_BATCH, WriteStep, write_steps};
use crate::error::Error;

const DIMENSION: usize = 3;

/// A plan that upserts `sentences` new sentences into an empty document.
fn new_document(sentences: usize) -> ChangePlan {
    let content = (0..sentences)
        .map(|i| format!("Sentence number {i} is here."))
        .collect::<Vec<_>>()
        .join(" ");
    let revision = Revision {
        access: None,
        metadata: Default::default(),
        doc_id: "doc".to_owned(),
        revision: 3,
        title: Some("Doc".to_owned()),
        url: None,
        tenant: None,
        format: Format::Markdown,
        content,
        revision_url: None,
    };
    let (plan, _) = plan_upsert(&[], &revision, &TextConfig::default()).expect("plan");
    assert_eq!(plan.embed.len(), sentences);
    plan
}

/// A plan with `upserts` upserts, `payloads` payload updates and `deletes` deletes.
fn mixed(upserts: usize, payloads: usize, deletes: usize) -> ChangePlan {
    let mut plan = new_document(upserts + payloads + deletes);
    let mut records = std::mem::take(&mut plan.embed);
    plan.delete = records.drain(upserts + payloads..).map(|r| r.id).collect();
    plan.update_payload = records.split_off(upserts);
    plan.embed = records;
    plan
}

/// A distinct vector per record, in `plan.embed` order.
fn vectors(plan: &ChangePlan) -> Vec<Vec<f32>> {
    (0..plan.embed.len())
        .map(|i| vec![i as f32; DIMENSION])
        .collect()
}

/// The operations the steps write, ungrouped.
fn operations<'a>(steps: &[WriteStep<'a>]) -> Vec<Operation<'a>> {
    steps
        .iter()
        .flat_map(|step| match step {
            WriteStep::Upsert(batch) => batch
                .iter()
                .map(|(record, _)| Operation::Upsert(record))
                .collect(),
            WriteStep::SetPayload(record) => vec![Operation::SetPayload(record)],
            WriteStep::Delete(ids) => ids.iter().copied().map(Operation::Delete).collect(),
            WriteStep::StampRevision {
                doc,
                revision,
                revision_url,
            } => vec![Operation::StampRevision {
                doc_id: doc.doc_id,
                revision: *revision,
                revision_url: *revision_url,
            }],
            WriteStep::PutDocument(state) => vec![Operation::PutDocument(state)],
        })
        .collect()
}

fn upsert<'a>(
    records: &'a [SentenceRecord],
    vectors: &'a [Vec<f32>],
) -> Vec<(&'a SentenceRecord, &'a [f32])> {
    records
        .iter()
        .zip(vectors)
        .map(|(record, vector)| (record, vector.as_slice()))
        .collect()
}

#[test]
fn steps_follow_the_operation_order() {
    let plan = mixed(3, 2, 2);
    let vectors = vectors(&plan);
    let steps = write_steps(&plan, &vectors, DIMENSION, usize::MAX).expect("steps");
    assert_eq!(
        steps,
        vec![
            WriteStep::Upsert(upsert(&plan.embed, &vectors)),
            WriteStep::SetPayload(&plan.update_payload[0]),
            WriteStep::SetPayload(&plan.update_payload[1]),
            WriteStep::Delete(plan.delete.clone()),
            WriteStep::StampRevision {
                doc: "doc".into(),
                revision: 3,
                revision_url: None,
            },
            WriteStep::PutDocument(&plan.document),
        ]
    );
}

#[test]
fn upserts_are_batched_by_256() {
    let plan = new_document(600);
    let vectors = vectors(&plan);
    let steps = write_steps(&plan, &vectors, DIMENSION, usize::MAX).expect("steps");
    assert_eq!(UPSERT_BATCH, 256);
    assert_eq!(
        steps[..3],
        [
            WriteStep::Upsert(upsert(&plan.embed[..256], &vectors[..256])),
            WriteStep::Upsert(upsert(&plan.embed[256..512], &vectors[256..512])),
            WriteStep::Upsert(upsert(&plan.embed[512..], &vectors[512..])),
        ]
    );
    assert!(matches!(
        steps[3..],
        [WriteStep::StampRevision { .. }, WriteStep::PutDocument(_)]
    ));
}

#[test]
fn deletes_are_one_step() {
    let current = new_document(600).embed;
    let plan = plan_delete(&current, None, "doc".into(), 4);
    let steps = write_steps(&plan, &[], DIMENSION, usize::MAX).expect("steps");
    let ids: Vec<_> = current.iter().map(|r| r.id).collect();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0], WriteStep::Delete(ids));
}

#[test]
fn a_cut_off_write_is_a_prefix_of_the_operations() {
    let plan = mixed(UPSERT_BATCH + 10, 3, 4);
    let vectors = vectors(&plan);
    let all: Vec<Operation> = plan.operations().collect();
    for count in 0..=all.len() + 1 {
        let steps = write_steps(&plan, &vectors, DIMENSION, count).expect("steps");
        let prefix = &all[..count.min(all.len())];
        assert_eq!(operations(&steps), prefix, "count {count}");
        for pair in steps.windows(2) {
            match pair {
                [WriteStep::Upsert(first), WriteStep::Upsert(_)] => {
                    assert_eq!(first.len(), UPSERT_BATCH, "count {count}");
                }
                [WriteStep::Delete(_), WriteStep::Delete(_)] => panic!("count {count}: split"),
                _ => {}
            }
        }
    }
}

#[test]
fn a_plan_without_changes_writes_the_stamp_and_the_document() {
    let plan = mixed(0, 0, 0);
    assert!(plan.is_noop());
    let steps = write_steps(&plan, &[], DIMENSION, usize::MAX).expect("steps");
    assert_eq!(
        steps,
        vec![
            WriteStep::StampRevision {
                doc: "doc".into(),
                revision: 3,
                revision_url: None,
            },
            WriteStep::PutDocument(&plan.document),
        ]
    );
    let none = write_steps(&plan, &[], DIMENSION, 0).expect("steps");
    assert_eq!(none, vec![]);
}

#[test]
fn vectors_are_checked_before_any_step() {
    let plan = mixed(2, 0, 0);
    let one_short = vec![vec![0.0; DIMENSION]];
    assert!(matches!(
        write_steps(&plan, &one_short, DIMENSION, usize::MAX),
        Err(Error::VectorCount {
            records: 2,
            vectors: 1,
            ..
        })
    ));
    let too_long = vec![vec![0.0; DIMENSION], vec![0.0; DIMENSION + 1]];
    assert!(matches!(
        write_steps(&plan, &too_long, DIMENSION, 0),
        Err(Error::Dimension {
            expected: DIMENSION,
            got: 4
        })
    ));
}
