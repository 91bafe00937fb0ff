//! Random operation sequences against a `BTreeMap` model of the store.

use std::collections::BTreeMap;

use proptest::prelude::*;
use slate_core::{begin_write, Direction, KeyRange, Snapshot, Store, StoreTxn as WriteTxn};

use crate::conformance::Check;

const CFS: [&str; 2] = ["x", "y"];

#[derive(Debug, Clone)]
pub enum ModelOp {
    Put(usize, Vec<u8>, u8),
    /// One `put_many` of these entries (keys repeat; long runs take its
    /// sorted, merged path).
    PutMany(usize, Vec<(Vec<u8>, u8)>),
    Delete(usize, Vec<u8>),
    DeleteRange(usize, Vec<u8>, Vec<u8>),
    Commit,
    Rollback,
    /// Compare a range scan (inside the open transaction) with the model.
    Scan(usize, Vec<u8>, Vec<u8>, bool),
    /// Compare `count_range` (capped) of the open transaction and of the
    /// committed state with the models; `true`: the range is `prefix(a)`.
    Count(usize, Vec<u8>, Vec<u8>, usize, bool),
    /// Compare `visit` (stopping after the given number of entries) of the
    /// open transaction and of the committed state with the models.
    Visit(usize, Vec<u8>, Vec<u8>, usize),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(0x7f), Just(0xff)], 0..4)
}

pub fn ops() -> impl Strategy<Value = Vec<ModelOp>> {
    let op = prop_oneof![
        6 => (0..2usize, key(), any::<u8>()).prop_map(|(c, k, v)| ModelOp::Put(c, k, v)),
        2 => (0..2usize, key()).prop_map(|(c, k)| ModelOp::Delete(c, k)),
        1 => (0..2usize, proptest::collection::vec((key(), any::<u8>()), 0..150))
            .prop_map(|(c, entries)| ModelOp::PutMany(c, entries)),
        1 => (0..2usize, key(), key()).prop_map(|(c, a, b)| ModelOp::DeleteRange(c, a, b)),
        2 => Just(ModelOp::Commit),
        1 => Just(ModelOp::Rollback),
        2 => (0..2usize, key(), key(), any::<bool>()).prop_map(|(c, a, b, r)| ModelOp::Scan(c, a, b, r)),
        1 => (0..2usize, key(), key(), 0..20usize, any::<bool>())
            .prop_map(|(c, a, b, cap, p)| ModelOp::Count(c, a, b, cap, p)),
        1 => (0..2usize, key(), key(), 0..20usize).prop_map(|(c, a, b, stop)| ModelOp::Visit(c, a, b, stop)),
    ];
    proptest::collection::vec(op, 1..60)
}

type Model = [BTreeMap<Vec<u8>, Vec<u8>>; 2];
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn scan_txn(txn: &WriteTxn<'_>, cf: &str, range: &KeyRange, dir: Direction) -> Result<Pairs, String> {
    txn.range(cf, range, dir)
        .map_err(|e| e.to_string())?
        .map(|e| {
            e.map(|(k, v)| (k.into_owned(), v.into_owned()))
                .map_err(|e| e.to_string())
        })
        .collect()
}

fn scan_model(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    range: &KeyRange,
    dir: Direction,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<_> = model
        .iter()
        .filter(|(k, _)| range.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if dir == Direction::Reverse {
        out.reverse();
    }
    out
}

/// Replays `ops`, checking every scan and, at the end, the committed state.
pub fn run(store: &dyn Store, ops: &[ModelOp]) -> Check {
    for cf in CFS {
        store.create_cf(cf).map_err(|e| e.to_string())?;
    }
    let mut committed: Model = Default::default();
    let mut pending = committed.clone();
    let mut txn = Some(begin_write(store).map_err(|e| e.to_string())?);
    for op in ops {
        let t = txn.as_mut().ok_or("no transaction")?;
        match op {
            ModelOp::Put(c, k, v) => {
                t.put(CFS[*c], k.clone(), vec![*v]).map_err(|e| e.to_string())?;
                pending[*c].insert(k.clone(), vec![*v]);
            }
            ModelOp::PutMany(c, entries) => {
                let run = entries
                    .iter()
                    .map(|(k, v)| (k.clone(), vec![*v].into()))
                    .collect();
                t.put_many(CFS[*c], run).map_err(|e| e.to_string())?;
                for (k, v) in entries {
                    pending[*c].insert(k.clone(), vec![*v]);
                }
            }
            ModelOp::Delete(c, k) => {
                t.delete(CFS[*c], k.clone()).map_err(|e| e.to_string())?;
                pending[*c].remove(k);
            }
            ModelOp::DeleteRange(c, a, b) => {
                let r = KeyRange::new(a.clone(), b.clone());
                t.delete_range(CFS[*c], r.clone()).map_err(|e| e.to_string())?;
                pending[*c].retain(|k, _| !r.contains(k));
            }
            ModelOp::Scan(c, a, b, rev) => {
                let r = KeyRange::new(a.clone(), b.clone());
                let dir = if *rev {
                    Direction::Reverse
                } else {
                    Direction::Forward
                };
                let got = scan_txn(t, CFS[*c], &r, dir)?;
                let want = scan_model(&pending[*c], &r, dir);
                if got != want {
                    return Err(format!("scan {op:?}: got {got:?}, want {want:?}"));
                }
            }
            ModelOp::Count(c, a, b, cap, prefix) => {
                let r = if *prefix {
                    KeyRange::prefix(a)
                } else {
                    KeyRange::new(a.clone(), b.clone())
                };
                let count = |model: &BTreeMap<Vec<u8>, Vec<u8>>| {
                    model.keys().filter(|k| r.contains(k)).count().min(*cap)
                };
                let got = Snapshot::count_range(t, CFS[*c], &r, *cap).map_err(|e| e.to_string())?;
                let want = count(&pending[*c]);
                if got != want {
                    return Err(format!("count in the transaction {op:?}: got {got}, want {want}"));
                }
                let got = store
                    .snapshot()
                    .count_range(CFS[*c], &r, *cap)
                    .map_err(|e| e.to_string())?;
                let want = count(&committed[*c]);
                if got != want {
                    return Err(format!("committed count {op:?}: got {got}, want {want}"));
                }
            }
            ModelOp::Visit(c, a, b, stop) => {
                let r = KeyRange::new(a.clone(), b.clone());
                let visit = |snap: &dyn Snapshot| -> Result<Pairs, String> {
                    let mut got = Vec::new();
                    snap.visit(CFS[*c], &r, &mut |k, v| {
                        got.push((k.to_vec(), v.to_vec()));
                        match got.len() >= *stop {
                            true => std::ops::ControlFlow::Break(()),
                            false => std::ops::ControlFlow::Continue(()),
                        }
                    })
                    .map_err(|e| e.to_string())?;
                    Ok(got)
                };
                let want = |model: &BTreeMap<Vec<u8>, Vec<u8>>| -> Pairs {
                    let all = scan_model(model, &r, Direction::Forward);
                    all.into_iter().take((*stop).max(1)).collect()
                };
                let got = visit(t)?;
                if got != want(&pending[*c]) {
                    return Err(format!("visit in the transaction {op:?}: got {got:?}"));
                }
                let got = visit(store.snapshot().as_ref())?;
                if got != want(&committed[*c]) {
                    return Err(format!("committed visit {op:?}: got {got:?}"));
                }
            }
            ModelOp::Commit => {
                txn.take()
                    .ok_or("no transaction")?
                    .commit()
                    .map_err(|e| e.to_string())?;
                committed = pending.clone();
                txn = Some(begin_write(store).map_err(|e| e.to_string())?);
            }
            ModelOp::Rollback => {
                txn.take().ok_or("no transaction")?.rollback();
                pending = committed.clone();
                txn = Some(begin_write(store).map_err(|e| e.to_string())?);
            }
        }
    }
    drop(txn);
    let snap = store.snapshot();
    for (c, cf) in CFS.iter().enumerate() {
        let got: Vec<(Vec<u8>, Vec<u8>)> = snap
            .range(cf, &KeyRange::all(), Direction::Forward)
            .map_err(|e| e.to_string())?
            .map(|e| {
                e.map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        let want = scan_model(&committed[c], &KeyRange::all(), Direction::Forward);
        if got != want {
            return Err(format!("committed state of {cf}: got {got:?}, want {want:?}"));
        }
        for (k, v) in &committed[c] {
            if snap.get(cf, k).map_err(|e| e.to_string())?.as_deref() != Some(v.as_slice()) {
                return Err(format!("get {k:?} in {cf} disagrees with the model"));
            }
        }
    }
    Ok(())
}
