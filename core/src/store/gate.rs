//! The writers' turn-taking lock. Unlike a `MutexGuard`, its guard may move
//! between threads, so a write transaction is `Send` (a server can hand one to
//! a worker) and can be read through as a [`Snapshot`](super::Snapshot).

use std::sync::{Condvar, Mutex};

/// A lock without data: one holder at a time, the others wait.
#[derive(Debug, Default)]
pub struct WriterGate {
    locked: Mutex<bool>,
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

    /// Waits until the gate is free and takes it.
    pub fn acquire(&self) -> WriteGuard<'_> {
        let mut locked = self.locked.lock().unwrap_or_else(|e| e.into_inner());
        while *locked {
            locked = self.released.wait(locked).unwrap_or_else(|e| e.into_inner());
        }
        *locked = true;
        WriteGuard { gate: self }
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        *self.gate.locked.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.gate.released.notify_one();
    }
}
