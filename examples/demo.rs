//! Writes and reads documents through both storage backends.
//!
//! `cargo run --release --example demo`

use std::time::Instant;

use slate::core::{begin_write, Direction, MemoryStore, RocksStore, Store};

fn exercise(name: &str, store: &dyn Store, n: u32) -> Result<(), slate::core::Error> {
    store.create_cf("demo")?;
    let start = Instant::now();
    let mut txn = begin_write(store)?;
    for i in 0..n {
        txn.put("demo", format!("d:{i:08}"), format!("{{\"n\": {i}}}"))?;
    }
    let version = txn.commit()?;
    let wrote = start.elapsed();
    let start = Instant::now();
    let snap = store.snapshot();
    let mut sum = 0u64;
    for entry in snap.prefix("demo", b"d:", Direction::Forward)? {
        let (_, value) = entry?;
        sum += value.len() as u64;
    }
    let hit = snap.get("demo", b"d:00000042")?;
    println!(
        "{name:>6}: wrote {n} values in {wrote:.2?} (commit version {version}), scanned {sum} bytes in {:.2?}, d:00000042 = {}",
        start.elapsed(),
        String::from_utf8_lossy(hit.as_deref().unwrap_or_default()),
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 100_000;
    exercise("memory", &MemoryStore::new(), n)?;
    let dir = std::env::temp_dir().join(format!("slate-demo-{}", std::process::id()));
    {
        let rocks = RocksStore::open(&dir)?;
        exercise("rocks", &rocks, n)?;
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
