//! The conformance suite: checks every `Store` backend must pass.
//!
//! Each check returns `Err(description)` instead of panicking so that the
//! suite can also be shown to *fail* on a deliberately broken backend
//! (`broken.rs`).

use std::sync::atomic::{AtomicBool, Ordering};

use slate_core::{begin_write, Direction, Error, KeyRange, Store};

pub type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn get(store: &dyn Store, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
    Ok(store
        .snapshot()
        .get(cf, key)
        .map_err(err)?
        .map(|v| v.into_owned()))
}

fn keys(store: &dyn Store, cf: &str, range: &KeyRange, dir: Direction) -> Result<Vec<Vec<u8>>, String> {
    let snap = store.snapshot();
    let out = snap
        .range(cf, range, dir)
        .map_err(err)?
        .map(|r| r.map(|(k, _)| k.into_owned()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    Ok(out)
}

/// Put, get, delete, multi_get and column family management.
pub fn basic_ops(store: &dyn Store) -> Check {
    store.create_cf("a").map_err(err)?;
    store.create_cf("b").map_err(err)?;
    ensure!(
        matches!(store.create_cf("a"), Err(Error::ColumnFamilyExists { .. })),
        "creating an existing column family must fail"
    );
    ensure!(
        store.list_cfs() == vec!["a".to_owned(), "b".to_owned()],
        "list_cfs: {:?}",
        store.list_cfs()
    );
    let mut txn = begin_write(store).map_err(err)?;
    txn.put("a", b"k1".to_vec(), b"v1".to_vec()).map_err(err)?;
    txn.put("a", b"k2".to_vec(), b"v2".to_vec()).map_err(err)?;
    txn.put("b", b"k1".to_vec(), b"other".to_vec()).map_err(err)?;
    ensure!(
        matches!(
            txn.put("nope", b"k".to_vec(), b"v".to_vec()),
            Err(Error::UnknownColumnFamily { .. })
        ),
        "put into an unknown column family must fail"
    );
    ensure!(
        txn.get("a", b"k1").map_err(err)?.as_deref() == Some(&b"v1"[..]),
        "read-your-writes"
    );
    let v1 = txn.commit().map_err(err)?;
    ensure!(
        get(store, "a", b"k1")? == Some(b"v1".to_vec()),
        "get after commit"
    );
    ensure!(
        get(store, "b", b"k1")? == Some(b"other".to_vec()),
        "column families are separate"
    );
    ensure!(get(store, "a", b"zz")?.is_none(), "missing key");
    let snap = store.snapshot();
    ensure!(
        snap.version() == v1,
        "snapshot version {} != commit version {v1}",
        snap.version()
    );
    let got = snap.multi_get("a", &[b"k2", b"missing", b"k1"]).map_err(err)?;
    let got: Vec<Option<Vec<u8>>> = got.into_iter().map(|v| v.map(|c| c.into_owned())).collect();
    ensure!(
        got == vec![Some(b"v2".to_vec()), None, Some(b"v1".to_vec())],
        "multi_get: {got:?}"
    );
    drop(snap);
    let mut txn = begin_write(store).map_err(err)?;
    txn.delete("a", b"k1".to_vec()).map_err(err)?;
    ensure!(
        txn.get("a", b"k1").map_err(err)?.is_none(),
        "own delete visible in txn"
    );
    let v2 = txn.commit().map_err(err)?;
    ensure!(
        v2 == v1 + 1,
        "versions increase by one per commit: {v1} then {v2}"
    );
    ensure!(get(store, "a", b"k1")?.is_none(), "deleted key still there");
    store.drop_cf("b").map_err(err)?;
    ensure!(store.list_cfs() == vec!["a".to_owned()], "drop_cf");
    ensure!(
        matches!(
            store.snapshot().get("b", b"k1"),
            Err(Error::UnknownColumnFamily { .. })
        ),
        "reading a dropped column family must fail"
    );
    ensure!(
        matches!(store.drop_cf("b"), Err(Error::UnknownColumnFamily { .. })),
        "double drop"
    );
    store.create_cf("b").map_err(err)?;
    ensure!(
        get(store, "b", b"k1")?.is_none(),
        "a re-created column family starts empty"
    );
    Ok(())
}

/// Range and prefix iteration in both directions, committed and in a transaction.
pub fn iteration_order(store: &dyn Store) -> Check {
    store.create_cf("it").map_err(err)?;
    let mut all: Vec<Vec<u8>> = Vec::new();
    let mut txn = begin_write(store).map_err(err)?;
    for i in (0u32..200).rev() {
        let key = format!("k{:03}", i * 7 % 200).into_bytes();
        txn.put("it", key.clone(), i.to_be_bytes().to_vec())
            .map_err(err)?;
        all.push(key);
    }
    txn.put("it", b"k\xff".to_vec(), b"x".to_vec()).map_err(err)?;
    txn.put("it", b"j".to_vec(), b"x".to_vec()).map_err(err)?;
    txn.commit().map_err(err)?;
    all.sort();
    let fwd = keys(store, "it", &KeyRange::prefix(b"k0"), Direction::Forward)?;
    let want: Vec<Vec<u8>> = all.iter().filter(|k| k.starts_with(b"k0")).cloned().collect();
    ensure!(
        fwd == want,
        "prefix forward: {} keys, want {}",
        fwd.len(),
        want.len()
    );
    let mut rev = keys(store, "it", &KeyRange::prefix(b"k0"), Direction::Reverse)?;
    rev.reverse();
    ensure!(rev == want, "prefix reverse is not the forward order reversed");
    let r = KeyRange::new(b"k050".to_vec(), b"k060".to_vec());
    let got = keys(store, "it", &r, Direction::Forward)?;
    ensure!(
        got.len() == 10 && got[0] == b"k050" && got[9] == b"k059",
        "half-open range: {got:?}"
    );
    let everything = keys(store, "it", &KeyRange::all(), Direction::Reverse)?;
    ensure!(
        everything.first().map(Vec::as_slice) == Some(&b"k\xff"[..]),
        "reverse starts at the last key"
    );
    ensure!(
        everything.last().map(Vec::as_slice) == Some(&b"j"[..]),
        "reverse ends at the first key"
    );
    ensure!(
        keys(
            store,
            "it",
            &KeyRange::new(b"z".to_vec(), b"a".to_vec()),
            Direction::Forward
        )?
        .is_empty(),
        "inverted range"
    );

    // Inside a transaction: own writes merge into the base in both directions.
    let mut txn = begin_write(store).map_err(err)?;
    txn.put("it", b"k0505".to_vec(), b"new".to_vec()).map_err(err)?;
    txn.delete("it", b"k052".to_vec()).map_err(err)?;
    txn.put("it", b"k053".to_vec(), b"changed".to_vec())
        .map_err(err)?;
    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
    let collect = |dir| -> Result<Pairs, String> {
        txn.range("it", &r, dir)
            .map_err(err)?
            .map(|e| e.map(|(k, v)| (k.into_owned(), v.into_owned())).map_err(err))
            .collect()
    };
    let fwd = collect(Direction::Forward)?;
    let names: Vec<&[u8]> = fwd.iter().map(|(k, _)| k.as_slice()).collect();
    ensure!(
        names
            == [
                &b"k050"[..],
                b"k0505",
                b"k051",
                b"k053",
                b"k054",
                b"k055",
                b"k056",
                b"k057",
                b"k058",
                b"k059"
            ],
        "merged forward order: {names:?}"
    );
    ensure!(fwd[3].1 == b"changed", "own write shadows the base value");
    let mut rev = collect(Direction::Reverse)?;
    rev.reverse();
    ensure!(rev == fwd, "merged reverse order differs");
    Ok(())
}

/// A dropped or rolled-back transaction leaves no trace.
pub fn rollback_leaves_nothing(store: &dyn Store) -> Check {
    store.create_cf("rb").map_err(err)?;
    let mut txn = begin_write(store).map_err(err)?;
    txn.put("rb", b"keep".to_vec(), b"1".to_vec()).map_err(err)?;
    let v = txn.commit().map_err(err)?;
    {
        let mut txn = begin_write(store).map_err(err)?;
        txn.put("rb", b"ghost".to_vec(), b"1".to_vec()).map_err(err)?;
        txn.delete("rb", b"keep".to_vec()).map_err(err)?;
        // dropped here
    }
    let mut txn = begin_write(store).map_err(err)?;
    txn.delete_range("rb", KeyRange::all()).map_err(err)?;
    txn.rollback();
    ensure!(
        get(store, "rb", b"ghost")?.is_none(),
        "a dropped transaction's put is visible"
    );
    ensure!(
        get(store, "rb", b"keep")? == Some(b"1".to_vec()),
        "a rolled-back delete took effect"
    );
    ensure!(store.snapshot().version() == v, "rollback changed the version");
    // A commit that fails validation (a column family dropped meanwhile) writes nothing.
    store.create_cf("doomed").map_err(err)?;
    let mut txn = begin_write(store).map_err(err)?;
    txn.put("rb", b"half".to_vec(), b"1".to_vec()).map_err(err)?;
    txn.put("doomed", b"k".to_vec(), b"1".to_vec()).map_err(err)?;
    store.drop_cf("doomed").map_err(err)?;
    ensure!(
        txn.commit().is_err(),
        "commit into a dropped column family must fail"
    );
    ensure!(
        get(store, "rb", b"half")?.is_none(),
        "a failed commit left part of its batch"
    );
    Ok(())
}

/// A snapshot keeps seeing the state it was taken at.
pub fn snapshot_isolation(store: &dyn Store) -> Check {
    store.create_cf("si").map_err(err)?;
    let mut txn = begin_write(store).map_err(err)?;
    for i in 0..10u8 {
        txn.put("si", vec![b'k', i], vec![1]).map_err(err)?;
    }
    txn.commit().map_err(err)?;
    let old = store.snapshot();
    let old_version = old.version();
    let mut txn = begin_write(store).map_err(err)?;
    txn.put("si", vec![b'k', 3], vec![2]).map_err(err)?;
    txn.delete("si", vec![b'k', 4]).map_err(err)?;
    txn.put("si", vec![b'k', 99], vec![2]).map_err(err)?;
    txn.delete_range("si", KeyRange::new(vec![b'k', 7], vec![b'k', 9]))
        .map_err(err)?;
    txn.commit().map_err(err)?;
    ensure!(old.version() == old_version, "a snapshot's version moved");
    ensure!(
        old.get("si", &[b'k', 3]).map_err(err)?.as_deref() == Some(&[1u8][..]),
        "old snapshot sees a later put"
    );
    ensure!(
        old.get("si", &[b'k', 4]).map_err(err)?.is_some(),
        "old snapshot sees a later delete"
    );
    ensure!(
        old.get("si", &[b'k', 99]).map_err(err)?.is_none(),
        "old snapshot sees a later insert"
    );
    let n = old
        .range("si", &KeyRange::all(), Direction::Forward)
        .map_err(err)?
        .count();
    ensure!(n == 10, "old snapshot's scan sees {n} keys, want 10");
    let new = store.snapshot();
    ensure!(
        new.version() > old_version,
        "new snapshot's version did not advance"
    );
    let n = new
        .range("si", &KeyRange::all(), Direction::Forward)
        .map_err(err)?
        .count();
    ensure!(n == 8, "new snapshot's scan sees {n} keys, want 8");
    Ok(())
}

/// `delete_range` removes exactly `[start, end)`, and a later put in the same
/// transaction survives it.
pub fn delete_range(store: &dyn Store) -> Check {
    store.create_cf("dr").map_err(err)?;
    let mut txn = begin_write(store).map_err(err)?;
    for i in 0..50u8 {
        txn.put("dr", vec![i], vec![i]).map_err(err)?;
    }
    txn.commit().map_err(err)?;
    let mut txn = begin_write(store).map_err(err)?;
    txn.put("dr", vec![12, 1], vec![0]).map_err(err)?; // removed by the range below
    txn.delete_range("dr", KeyRange::new(vec![10], vec![20]))
        .map_err(err)?;
    txn.put("dr", vec![15], vec![15]).map_err(err)?; // put after the range: survives
    ensure!(
        txn.get("dr", &[12]).map_err(err)?.is_none(),
        "range delete not visible in txn"
    );
    ensure!(
        txn.get("dr", &[15]).map_err(err)?.is_some(),
        "put after range delete lost in txn"
    );
    txn.commit().map_err(err)?;
    let got = keys(store, "dr", &KeyRange::all(), Direction::Forward)?;
    let want: Vec<Vec<u8>> = (0..50u8)
        .filter(|i| !(10..20).contains(i) || *i == 15)
        .map(|i| vec![i])
        .collect();
    ensure!(got == want, "after delete_range: {got:?}");
    let mut txn = begin_write(store).map_err(err)?;
    txn.delete_range(
        "dr",
        KeyRange {
            start: Some(vec![40]),
            end: None,
        },
    )
    .map_err(err)?;
    txn.commit().map_err(err)?;
    let got = keys(store, "dr", &KeyRange::all(), Direction::Forward)?;
    ensure!(
        got.last() == Some(&vec![39]),
        "unbounded delete_range left {:?}",
        got.last()
    );
    Ok(())
}

/// One writer moves value between keys of two column families; four readers
/// check every snapshot is whole: all keys carry the same commit stamp and the
/// totals add up. Catches torn or half-committed reads.
pub fn concurrent_stress(store: &dyn Store, commits: u32) -> Check {
    const KEYS: u8 = 16;
    store.create_cf("s1").map_err(err)?;
    store.create_cf("s2").map_err(err)?;
    let encode = |stamp: u32, amount: i64| -> Vec<u8> {
        let mut v = stamp.to_be_bytes().to_vec();
        v.extend_from_slice(&amount.to_be_bytes());
        v
    };
    let mut txn = begin_write(store).map_err(err)?;
    for k in 0..KEYS {
        txn.put("s1", vec![k], encode(0, 100)).map_err(err)?;
        txn.put("s2", vec![k], encode(0, 100)).map_err(err)?;
    }
    txn.commit().map_err(err)?;
    let done = AtomicBool::new(false);
    std::thread::scope(|s| -> Check {
        let readers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| -> Result<u32, String> {
                    let mut seen = 0u32;
                    let mut last_version = 0;
                    while !done.load(Ordering::Acquire) || seen == 0 {
                        let snap = store.snapshot();
                        ensure!(snap.version() >= last_version, "versions went backwards");
                        last_version = snap.version();
                        let mut stamps = Vec::new();
                        let mut total = 0i64;
                        for cf in ["s1", "s2"] {
                            for item in snap
                                .range(cf, &KeyRange::all(), Direction::Forward)
                                .map_err(err)?
                            {
                                let (_, v) = item.map_err(err)?;
                                ensure!(v.len() == 12, "torn value of {} bytes", v.len());
                                stamps.push(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
                                total += i64::from_be_bytes(v[4..12].try_into().map_err(err)?);
                            }
                        }
                        ensure!(stamps.len() == 2 * KEYS as usize, "saw {} keys", stamps.len());
                        ensure!(
                            stamps.iter().all(|s| *s == stamps[0]),
                            "torn snapshot: stamps {stamps:?}"
                        );
                        ensure!(
                            total == 200 * KEYS as i64,
                            "half-committed transfer: total {total}"
                        );
                        seen += 1;
                    }
                    Ok(seen)
                })
            })
            .collect();
        let writer = (|| -> Check {
            for stamp in 1..=commits {
                let from = (stamp % KEYS as u32) as u8;
                let to = ((stamp * 7 + 3) % KEYS as u32) as u8;
                let mut txn = begin_write(store).map_err(err)?;
                // Every key gets the new stamp; 5 units move from s1[from] to s2[to].
                for (cf, key) in ["s1", "s2"]
                    .iter()
                    .flat_map(|cf| (0..KEYS).map(move |k| (*cf, k)))
                {
                    let v = txn
                        .get(cf, &[key])
                        .map_err(err)?
                        .ok_or("key vanished")?
                        .into_owned();
                    let mut amount = i64::from_be_bytes(v[4..12].try_into().map_err(err)?);
                    if cf == "s1" && key == from {
                        amount -= 5;
                    }
                    if cf == "s2" && key == to {
                        amount += 5;
                    }
                    txn.put(cf, vec![key], encode(stamp, amount)).map_err(err)?;
                }
                txn.commit().map_err(err)?;
            }
            Ok(())
        })();
        done.store(true, Ordering::Release);
        writer?;
        for r in readers {
            let seen = r.join().map_err(|_| "reader panicked".to_owned())??;
            ensure!(seen > 0, "a reader saw no snapshot");
        }
        Ok(())
    })
}
