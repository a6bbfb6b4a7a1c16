//! The pipeline's processor, replaceable while events flow: a model migration's swap puts
//! in a processor over the new index and model. Every event is processed under a read
//! share of a gate; [`ProcessorSlot::pause`] takes it whole, so while a pause is held no
//! event is being processed (those in hand finish first, new ones wait), and the index
//! the processor writes can be brought up to date and replaced without losing a write.

use std::sync::{Arc, RwLock};

use tokio::sync::{RwLockReadGuard, RwLockWriteGuard};

use crate::processor::Processor;

#[derive(Debug)]
pub struct ProcessorSlot<S> {
    current: RwLock<Arc<Processor<S>>>,
    gate: tokio::sync::RwLock<()>,
}

/// Held while one event is processed.
pub type Processing<'a> = RwLockReadGuard<'a, ()>;
/// Held while no event may be processed.
pub type Paused<'a> = RwLockWriteGuard<'a, ()>;

impl<S> ProcessorSlot<S> {
    pub fn new(processor: Processor<S>) -> Self {
        Self {
            current: RwLock::new(Arc::new(processor)),
            gate: tokio::sync::RwLock::new(()),
        }
    }

    /// The processor in place now.
    pub fn current(&self) -> Arc<Processor<S>> {
        match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The processor for one event, with the share of the gate to hold while processing.
    pub async fn processing(&self) -> (Processing<'_>, Arc<Processor<S>>) {
        let share = self.gate.read().await;
        (share, self.current())
    }

    /// Waits for the events in hand to finish and holds every other until dropped.
    pub async fn pause(&self) -> Paused<'_> {
        self.gate.write().await
    }

    /// Replaces the processor while paused; returns the one replaced.
    pub fn replace(&self, _paused: &Paused<'_>, processor: Processor<S>) -> Arc<Processor<S>> {
        let mut current = match self.current.write() {
            Ok(current) => current,
            Err(poisoned) => poisoned.into_inner(),
        };
        std::mem::replace(&mut *current, Arc::new(processor))
    }
}
