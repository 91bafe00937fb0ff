//! The writers' turn-taking lock. Unlike a `MutexGuard`, its guard may move
//! between threads, so a write transaction is `Send` (a server can hand one to
//! a worker) and can be read through as a [`Snapshot`](super::Snapshot).

use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;

use crate::error::{Error, Result};

/// A lock without data: one holder at a time, the others wait.
#[derive(Debug, Default)]
pub struct WriterGate {
    /// The thread that took the gate, while it is held.
    holder: Mutex<Option<ThreadId>>,
    released: Condvar,
}

/// Holding the gate; dropping it lets the next writer in.
#[derive(Debug)]
pub struct WriteGuard<'a> {
    gate: &'a WriterGate,
}

impl WriterGate {
    /// A free gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits until the gate is free and takes it. [`Error::NestedWrite`]
    /// when the calling thread took it and holds it still: it would wait
    /// on itself. (A guard handed to another thread still counts as its
    /// taker's: that thread too gets the error rather than a wait.)
    pub fn acquire(&self) -> Result<WriteGuard<'_>> {
        let me = std::thread::current().id();
        let mut holder = self.holder.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(h) = *holder {
            if h == me {
                return Err(Error::NestedWrite);
            }
            holder = self.released.wait(holder).unwrap_or_else(|e| e.into_inner());
        }
        *holder = Some(me);
        Ok(WriteGuard { gate: self })
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        *self.gate.holder.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.gate.released.notify_one();
    }
}
