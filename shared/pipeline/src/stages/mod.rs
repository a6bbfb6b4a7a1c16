//! The pipeline's stages, one per module, in the order an event meets them:
//!
//! | stage | module | runs in |
//! |---|---|---|
//! | decode bytes to an event, or reject | [`decode`] | the router task |
//! | route to the document's lane | [`route`] | the router task |
//! | fence against the indexed revision | [`fence`] | a lane ([`lane`] → `Processor`) |
//! | read the document's records | [`read`] | a lane |
//! | segment the changed sections | [`segment`] | a lane |
//! | enrich (situating context) | [`enrich`] | a lane |
//! | plan the operations | [`plan`] | a lane |
//! | embed only what the plan says | [`embed`] | a lane; the model calls in the [`batch`] task |
//! | batch sentences across events for the model | [`batch`] | the batcher task, the model on its blocking pool |
//! | write | [`write`] | a lane |
//! | make a group of writes durable: one flush | [`commit`] | the commit task |
//! | store dead letters | [`dead_letter`] | the dead-letter task |
//! | acknowledge: record, reply, commit | [`ack`] | the ack task |

pub mod ack;
pub mod batch;
pub mod commit;
pub mod dead_letter;
pub mod decode;
pub mod embed;
pub mod enrich;
pub mod fence;
pub mod lane;
pub mod plan;
pub mod read;
pub mod route;
pub mod segment;
pub mod write;
