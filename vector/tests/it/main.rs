//! Integration tests of slate-vector: every fast path against a slow
//! reference.
#![allow(clippy::unwrap_used)]

mod batch;
mod codes;
mod common;
mod concurrency;
mod distance;
mod errors;
mod memory;
mod mvcc;
mod parallel;
mod tags;
mod topk;
