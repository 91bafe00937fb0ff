//! Slate's benchmark workloads, shared by the `slate-bench` report and the
//! criterion benches of this crate.

pub mod sweep;
