//! RocksStore specifics: data survives close and reopen; the builder's options.

use slate_core::{begin_write, Direction, KeyRange, RocksStore, Store};

#[test]
fn reopen_after_close_keeps_committed_data_and_column_families() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = RocksStore::open(dir.path()).expect("open");
        assert!(store.is_sync(), "sync is the default");
        store.create_cf("docs").expect("create");
        store.create_cf("other").expect("create");
        let mut txn = store.begin_write().expect("txn");
        for i in 0..1000u32 {
            txn.put("docs", i.to_be_bytes().to_vec(), vec![7; 100])
                .expect("put");
        }
        txn.put("other", b"k".to_vec(), b"v".to_vec()).expect("put");
        txn.commit().expect("commit");
        let mut lost = store.begin_write().expect("txn");
        lost.put("docs", b"uncommitted".to_vec(), b"x".to_vec())
            .expect("put");
        drop(lost);
    }
    let store = RocksStore::open(dir.path()).expect("reopen");
    assert_eq!(store.list_cfs(), vec!["docs".to_owned(), "other".to_owned()]);
    let snap = store.snapshot();
    let n = snap
        .range("docs", &KeyRange::all(), Direction::Forward)
        .expect("range")
        .count();
    assert_eq!(n, 1000);
    assert_eq!(snap.get("other", b"k").expect("get").as_deref(), Some(&b"v"[..]));
    assert!(snap.get("docs", b"uncommitted").expect("get").is_none());
}

#[test]
fn open_without_create_if_missing_fails_on_an_empty_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let result = RocksStore::builder(dir.path().join("absent"))
        .create_if_missing(false)
        .open();
    assert!(result.is_err(), "opened a database that does not exist");
    assert!(
        !dir.path().join("absent").exists(),
        "wrote where there was no database"
    );
}

#[test]
fn flush_then_reads_come_from_sst_files() {
    // A small cache, and none at all (0 bytes turns it off).
    for cache in [1 << 20, 0] {
        flushed_reads(cache);
    }
}

fn flushed_reads(cache: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RocksStore::builder(dir.path())
        .sync(false)
        .block_cache_bytes(cache)
        .open()
        .expect("open");
    store.create_cf("c").expect("create");
    let mut txn = begin_write(&store).expect("txn");
    for i in 0..500u32 {
        txn.put("c", i.to_be_bytes().to_vec(), i.to_le_bytes().to_vec())
            .expect("put");
    }
    txn.commit().expect("commit");
    check_walks(&*store.snapshot(), "write buffer");
    store.flush().expect("flush");
    let snap = store.snapshot();
    let keys: Vec<&[u8]> = vec![&[0, 0, 1, 0], &[0, 0, 0, 5], &[9, 9, 9, 9]];
    let got = snap.multi_get("c", &keys).expect("multi_get");
    assert_eq!(got[0].as_deref(), Some(&256u32.to_le_bytes()[..]));
    assert_eq!(got[1].as_deref(), Some(&5u32.to_le_bytes()[..]));
    assert!(got[2].is_none());
    // Ascending keys (what an index scan hands over, read with RocksDB's
    // sorted-input path), a missing one among them: each answer at its place.
    let wanted: Vec<[u8; 4]> = (0..520u32).step_by(3).map(u32::to_be_bytes).collect();
    let keys: Vec<&[u8]> = wanted.iter().map(|k| &k[..]).collect();
    let got = snap.multi_get("c", &keys).expect("multi_get ascending");
    for (k, v) in wanted.iter().zip(&got) {
        let i = u32::from_be_bytes(*k);
        let want = (i < 500).then(|| i.to_le_bytes());
        assert_eq!(v.as_deref(), want.as_ref().map(|w| &w[..]), "key {i}");
    }
    check_walks(&*snap, "files");
    // Writes after a snapshot are not seen through it; a newer snapshot sees
    // the write buffer's deletes and overwrites over the files' values.
    let mut txn = begin_write(&store).expect("txn");
    for i in (0..60u32).step_by(2) {
        txn.delete("c", i.to_be_bytes().to_vec()).expect("delete");
    }
    for i in 100..140u32 {
        txn.put("c", i.to_be_bytes().to_vec(), vec![1, 2, 3])
            .expect("put");
    }
    // A run of deletes longer than a walk steps over in one step.
    for i in 200..300u32 {
        txn.delete("c", i.to_be_bytes().to_vec()).expect("delete");
    }
    txn.commit().expect("commit");
    check_walks(&*snap, "files, older snapshot");
    check_walks(&*store.snapshot(), "files and write buffer");
}

/// Ascending keys are walked to with one iterator while they lie close, and
/// looked up once they spread out: keys far apart from the start, close then
/// far, close with absent keys between stored ones, close across the last
/// stored key, one before the first, and (once deleted) across a hundred
/// deleted keys, more than a walk passes in one step. Each answer at its place, as a
/// lookup of each key alone gives it at the same snapshot.
fn check_walks(snap: &dyn slate_core::store::Snapshot, what: &str) {
    let sets: [Vec<u32>; 6] = [
        (0..1000).step_by(40).collect(),
        (0..40).chain((40..520).step_by(37)).collect(),
        (0..40).filter(|i| i % 7 != 3).chain(600..620).collect(),
        (100..140).chain(140..160).map(|i| i * 3).collect(),
        (480..530).collect(),
        (190..310).collect(),
    ];
    for (n, ids) in sets.into_iter().enumerate() {
        // In the third set every fifth key is absent: it sorts between two
        // stored keys (a stored key and a byte more), where the iterator
        // stands on the next stored one. The fourth starts with a key that
        // sorts before every stored key.
        let mut wanted: Vec<Vec<u8>> = ids
            .iter()
            .map(|i| {
                let mut k = i.to_be_bytes().to_vec();
                if n == 2 && i % 5 == 0 {
                    k.push(1);
                }
                k
            })
            .collect();
        if n == 3 {
            wanted.insert(0, vec![0, 0, 0]);
        }
        let keys: Vec<&[u8]> = wanted.iter().map(Vec::as_slice).collect();
        let got = snap.multi_get("c", &keys).expect("multi_get");
        assert_eq!(got.len(), keys.len());
        for (k, v) in keys.iter().zip(&got) {
            let one = snap.get("c", k).expect("get");
            assert_eq!(v.as_deref(), one.as_deref(), "{what}: key {k:?} of {ids:?}");
        }
        assert!(got.iter().any(Option::is_some), "{what}: {ids:?}");
    }
}

/// Another program's RocksDB (column families, no Slate catalog) is refused
/// and left as it was.
#[test]
fn a_database_that_is_not_slates_is_refused_untouched() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = RocksStore::open(dir.path()).expect("open");
        store.create_cf("someone_elses").expect("create");
        let err = slate_core::Database::open(Arc::new(store)).expect_err("not Slate's");
        assert!(matches!(err, slate_core::Error::NotSlate { .. }), "{err}");
        assert!(err.to_string().contains("someone_elses"), "{err}");
    }
    let store = RocksStore::open(dir.path()).expect("reopen");
    assert_eq!(
        store.list_cfs(),
        vec!["someone_elses".to_owned()],
        "no catalog written"
    );
}

/// Another program's RocksDB that keeps its keys in the default column
/// family (a plain `DB::open`) is refused too, and still opens as it did.
#[test]
fn a_plain_rocksdb_with_keys_in_its_default_column_family_is_refused_untouched() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let raw = rocksdb::DB::open_default(dir.path()).expect("plain rocksdb");
        raw.put(b"k", b"v").expect("put");
    }
    let store = RocksStore::open(dir.path()).expect("open");
    let err = slate_core::Database::open(Arc::new(store)).expect_err("not Slate's");
    assert!(matches!(err, slate_core::Error::NotSlate { .. }), "{err}");
    let raw = rocksdb::DB::open_default(dir.path()).expect("still opens without Slate's column families");
    assert_eq!(raw.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
}

/// A collection whose column family is gone while the catalog still names it
/// (a drop cut short by a crash of a store that does not sync its log): the
/// database opens, with the drop completed.
#[test]
fn a_drop_cut_short_is_completed_at_open() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = Arc::new(RocksStore::builder(dir.path()).sync(false).open().expect("open"));
        let db = slate_core::Database::open(store.clone() as Arc<dyn Store>).expect("db");
        db.create_collection(slate_core::CollectionConfig::new("x").vector("v", 2, slate_core::Metric::L2))
            .expect("create");
        db.create_collection(slate_core::CollectionConfig::new("kept"))
            .expect("create");
        drop(db);
        // The column family's drop reached the disk; the catalog's did not.
        store.drop_cf("c.x").expect("drop the column family alone");
    }
    let store = RocksStore::open(dir.path()).expect("reopen");
    let db = slate_core::Database::open(Arc::new(store)).expect("opens");
    assert_eq!(db.list_collections().expect("list"), vec!["kept".to_owned()]);
    db.create_collection(slate_core::CollectionConfig::new("x"))
        .expect("the name is free again");
}

/// A commit whose publication step panics still publishes its version: later
/// snapshots do not wait forever (RocksStore), the data is at least as new
/// as any cache the step updated (MemoryStore), and the store refuses
/// further commits and column family changes.
#[test]
fn a_panic_while_publishing_poisons_the_store_without_hanging_readers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rocks = RocksStore::open(dir.path()).expect("open");
    let memory = slate_core::MemoryStore::new();
    for store in [&rocks as &dyn Store, &memory] {
        store.create_cf("docs").expect("create");
        let mut txn = begin_write(store).expect("txn");
        txn.put("docs", b"k".to_vec(), b"v".to_vec()).expect("put");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            txn.commit_with(|_| panic!("publication failed")).ok();
        }));
        assert!(panicked.is_err());
        let snap = store.snapshot();
        assert_eq!(snap.get("docs", b"k").expect("get").as_deref(), Some(&b"v"[..]));
        assert_eq!(snap.version(), 1, "the commit's version is published");
        let mut txn = begin_write(store).expect("txn");
        txn.put("docs", b"k2".to_vec(), b"v".to_vec()).expect("put");
        assert!(
            matches!(txn.commit(), Err(slate_core::Error::Poisoned { .. })),
            "a poisoned store refuses commits"
        );
        // Nor does it create or drop column families (on disk at once).
        let before = store.list_cfs();
        assert!(matches!(
            store.create_cf("more"),
            Err(slate_core::Error::Poisoned { .. })
        ));
        assert!(matches!(
            store.drop_cf("docs"),
            Err(slate_core::Error::Poisoned { .. })
        ));
        assert_eq!(store.list_cfs(), before);
    }
}

/// A database records its format; one written by a newer Slate (a higher
/// format) is refused, left as it was.
#[test]
fn a_database_from_a_newer_format_is_refused() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = Arc::new(RocksStore::open(dir.path()).expect("open"));
        slate_core::Database::open(store.clone() as Arc<dyn Store>).expect("new database");
        let snap = store.snapshot();
        let format = snap.get("__meta", b"format").expect("get").expect("recorded");
        assert_eq!(&*format, &1u32.to_le_bytes()[..]);
        drop(snap);
        let mut txn = store.begin_write().expect("txn");
        txn.put("__meta", b"format".to_vec(), 2u32.to_le_bytes().to_vec())
            .expect("put");
        txn.commit().expect("commit");
    }
    let store = RocksStore::open(dir.path()).expect("reopen");
    let err = slate_core::Database::open(Arc::new(store)).expect_err("newer format");
    assert!(
        matches!(
            err,
            slate_core::Error::UnsupportedFormat {
                found: 2,
                supported: 1
            }
        ),
        "{err}"
    );
}

/// `any_in` answers with one seek, and gives up (`None`) rather than step
/// over a long run of deleted keys; a transaction's own writes answer
/// first, and its deletes leave the answer open.
#[test]
fn any_in_gives_up_past_many_deleted_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RocksStore::open(dir.path()).expect("open");
    store.create_cf("c").expect("create");
    let key = |i: u32| i.to_be_bytes().to_vec();
    let mut txn = store.begin_write().expect("txn");
    for i in 0..300u32 {
        txn.put("c", key(i), b"v".to_vec()).expect("put");
    }
    txn.commit().expect("commit");
    let mut txn = store.begin_write().expect("txn");
    for i in 0..200u32 {
        txn.delete("c", key(i)).expect("delete");
    }
    txn.commit().expect("commit");
    let snap = store.snapshot();
    let any = |lo: u32, hi: u32| {
        snap.any_in("c", &KeyRange::new(key(lo), key(hi)))
            .expect("any_in")
    };
    assert_eq!(any(250, 260), Some(true), "live keys");
    assert_eq!(any(300, 400), Some(false), "past the last key");
    assert_eq!(any(0, 10), Some(false), "a few deleted keys are stepped over");
    assert_eq!(any(0, 200), None, "200 deleted keys: gave up");
    assert_eq!(any(0, 250), None, "gave up before the live keys after them");

    let mut txn = store.begin_write().expect("txn");
    txn.put("c", key(5), b"v".to_vec()).expect("put");
    txn.delete("c", key(260)).expect("delete");
    assert_eq!(
        txn.any_in("c", &KeyRange::new(key(0), key(10))).expect("own"),
        Some(true)
    );
    assert_eq!(
        txn.any_in("c", &KeyRange::new(key(255), key(265))).expect("own"),
        None
    );
    assert_eq!(
        txn.any_in("c", &KeyRange::new(key(270), key(280))).expect("base"),
        Some(true)
    );
}
