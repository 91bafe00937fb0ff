//! The row arena: rows of `dim` f32 in fixed-size chunks that are allocated
//! once and never move or reallocate.
//!
//! # Concurrency protocol (why the `unsafe` in this module is sound)
//!
//! Row memory (vector components, their codes and id bytes) lives in
//! `UnsafeCell`s.
//!
//! 1. It is written only through the arena's one [`ArenaCursor`] (created
//!    with the arena, not cloneable), whose writing methods take `&mut self`
//!    (or, for the parallel fill, hand each worker a distinct row).
//! 2. The cursor writes only rows at index `>= published`: it hands out rows
//!    from `next >= published`, and rollback moves `next` back to
//!    `published`, never below. `published` only grows.
//! 3. The cursor publishes rows with a `Release` store of `published` after
//!    writing them. A reader ([`ArenaSnapshot`]) loads `published` once with
//!    `Acquire` and afterwards reads only rows below the value it loaded.
//!
//! Hence every read of a row's memory happens-after the row's last write, and
//! no write to it can follow: there is no data race. `born` and `died` are
//! atomics and may be read and written at any time. Chunks are
//! reference-counted: a snapshot keeps alive the chunks it saw.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::mem;
use std::ops::Range;
use std::ptr::{self, NonNull};
use std::slice;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use rayon::prelude::*;

use crate::code::{encode, CodeMeta};
use crate::error::{Error, Result};

/// `born`/`died` value meaning "not yet" (uncommitted / still live).
pub(crate) const UNSET: u64 = u64::MAX;

/// Rows per arena: row ids are `u32`.
pub(crate) const MAX_ROWS: usize = u32::MAX as usize;

struct Chunk {
    data: Box<[UnsafeCell<f32>]>,
    /// Each row's code (`dim` bytes) and its metadata (see `code.rs`),
    /// written with the row; both empty when the arena keeps no codes.
    codes: Box<[UnsafeCell<i8>]>,
    metas: Box<[UnsafeCell<CodeMeta>]>,
    ids: Box<[UnsafeCell<Box<[u8]>>]>,
    born: Box<[AtomicU64]>,
    died: Box<[AtomicU64]>,
}

// SAFETY: the only non-`Sync` fields are the `UnsafeCell`s. Per the module
// protocol their contents are mutated only by the unique cursor, only for rows
// no snapshot reads, and published with Release/Acquire before any read.
unsafe impl Sync for Chunk {}

impl Chunk {
    fn new(rows: usize, dim: usize, codes: bool) -> Self {
        let coded = if codes { rows } else { 0 };
        Chunk {
            data: (0..rows * dim).map(|_| UnsafeCell::new(0.0)).collect(),
            codes: (0..coded * dim).map(|_| UnsafeCell::new(0)).collect(),
            metas: (0..coded).map(|_| UnsafeCell::new(CodeMeta::default())).collect(),
            ids: (0..rows).map(|_| UnsafeCell::new(Box::default())).collect(),
            born: (0..rows).map(|_| AtomicU64::new(UNSET)).collect(),
            died: (0..rows).map(|_| AtomicU64::new(UNSET)).collect(),
        }
    }

    fn bytes(rows: usize, dim: usize, codes: bool) -> usize {
        let code = if codes {
            dim * mem::size_of::<i8>() + mem::size_of::<CodeMeta>()
        } else {
            0
        };
        mem::size_of::<Chunk>()
            + 2 * mem::size_of::<usize>() // Arc counts
            + rows
                * (dim * mem::size_of::<f32>()
                    + code
                    + mem::size_of::<Box<[u8]>>()
                    + 2 * mem::size_of::<AtomicU64>())
    }
}

/// Rows in fixed-size chunks, plus the published row count.
pub(crate) struct Arena {
    dim: usize,
    chunk_rows: ChunkRows,
    /// Whether rows keep codes.
    codes: bool,
    /// Shared as one `Arc`, so that a snapshot costs one reference count,
    /// not one per chunk; a new chunk copies the list (rare).
    chunks: RwLock<Arc<ChunkList>>,
    published: AtomicUsize,
    /// Heap bytes of the ids held in all slots (published or not).
    id_bytes: AtomicUsize,
}

impl Arena {
    /// A new empty arena and its one cursor.
    pub(crate) fn new(dim: usize, chunk_rows: usize, codes: bool) -> (Arc<Arena>, ArenaCursor) {
        let arena = Arc::new(Arena {
            dim,
            chunk_rows: ChunkRows::new(chunk_rows),
            codes,
            chunks: RwLock::new(Arc::new(ChunkList::default())),
            published: AtomicUsize::new(0),
            id_bytes: AtomicUsize::new(0),
        });
        let cursor = ArenaCursor {
            arena: Arc::clone(&arena),
            chunks: Vec::new(),
            next: 0,
        };
        (arena, cursor)
    }

    /// Rows published so far.
    pub(crate) fn published(&self) -> usize {
        self.published.load(Ordering::Acquire)
    }

    /// The published rows as of now. Takes the chunk-list lock briefly.
    pub(crate) fn snapshot(&self) -> ArenaSnapshot {
        let rows = self.published.load(Ordering::Acquire);
        // Every chunk holding a row below `rows` was pushed before that row was
        // published, so the list read after the Acquire load contains it.
        let chunks = self.chunks.read().unwrap_or_else(PoisonError::into_inner);
        ArenaSnapshot {
            list: Arc::clone(&chunks),
            rows,
            dim: self.dim,
            chunk_rows: self.chunk_rows,
            codes: self.codes,
        }
    }

    /// Bytes allocated for chunks, ids and the chunk list.
    pub(crate) fn memory_bytes(&self) -> usize {
        let chunks = self.chunks.read().unwrap_or_else(PoisonError::into_inner);
        chunks.chunks.len() * Chunk::bytes(self.chunk_rows.rows, self.dim, self.codes)
            + chunks.chunks.capacity() * (mem::size_of::<Arc<Chunk>>() + mem::size_of::<VectorBase>())
            + self.id_bytes.load(Ordering::Relaxed)
    }
}

/// The first vector cell of a chunk: a row's vector is one load (this
/// pointer, from a short dense list) and an offset away, where going through
/// the chunk costs two dependent loads more; a gather over scattered rows
/// waits on them before each row's first read.
#[derive(Debug, Clone, Copy)]
struct VectorBase(NonNull<f32>);

// SAFETY: the pointer is only read through, for published rows (module
// protocol), while the `ChunkList` holding it also holds its chunk alive.
unsafe impl Send for VectorBase {}
unsafe impl Sync for VectorBase {}

/// The chunks, and each one's [`VectorBase`] at the same index.
#[derive(Clone, Default)]
struct ChunkList {
    chunks: Vec<Arc<Chunk>>,
    vectors: Vec<VectorBase>,
}

impl ChunkList {
    fn push(&mut self, chunk: Arc<Chunk>) {
        self.vectors
            .push(VectorBase(NonNull::from(&chunk.data[..]).cast::<f32>()));
        self.chunks.push(chunk);
    }
}

/// The arena's one writer. See the module docs for the protocol it keeps.
pub(crate) struct ArenaCursor {
    arena: Arc<Arena>,
    /// The writer's copy of the chunk list (the shared one is for readers).
    chunks: Vec<Arc<Chunk>>,
    /// Rows `published..next` are staged: written, not yet published.
    next: usize,
}

impl ArenaCursor {
    /// Rows published (only this cursor stores it, so Relaxed sees our own writes).
    pub(crate) fn published(&self) -> usize {
        self.arena.published.load(Ordering::Relaxed)
    }

    /// End of the staged rows.
    pub(crate) fn next(&self) -> usize {
        self.next
    }

    fn locate(&self, row: usize) -> Option<(&Chunk, usize)> {
        let (c, i) = self.arena.chunk_rows.split(row);
        Some((self.chunks.get(c)?, i))
    }

    /// Hands out rows `next..next + n` (allocating chunks) and returns `next`.
    fn reserve(&mut self, n: usize) -> Result<usize> {
        let start = self.next;
        let end = start
            .checked_add(n)
            .filter(|&end| end <= MAX_ROWS)
            .ok_or(Error::TooManyRows { limit: MAX_ROWS })?;
        let (chunk_rows, dim) = (self.arena.chunk_rows.rows, self.arena.dim);
        while self.chunks.len() * chunk_rows < end {
            let chunk = Arc::new(Chunk::new(chunk_rows, dim, self.arena.codes));
            let mut shared = self.arena.chunks.write().unwrap_or_else(PoisonError::into_inner);
            Arc::make_mut(&mut shared).push(Arc::clone(&chunk));
            drop(shared);
            self.chunks.push(chunk);
        }
        self.next = end;
        Ok(start)
    }

    /// Writes a row's vector, its code and, if given, its id; resets its
    /// versions.
    ///
    /// # Safety
    /// `published <= row < next`, and no other thread accesses row `row`
    /// during the call (the caller holds `&mut self`, or gives each parallel
    /// worker its own row).
    unsafe fn write_row(&self, row: usize, id: Option<&[u8]>, vector: &[f32]) {
        let Some((chunk, i)) = self.locate(row) else {
            return;
        };
        let dim = self.arena.dim;
        let cells = &chunk.data[i * dim..(i + 1) * dim];
        // SAFETY: by the caller's contract this row is unpublished (no
        // snapshot reads it) and nobody else writes it; `cells` covers exactly
        // its `dim` components and at most `dim` floats are copied.
        unsafe {
            ptr::copy_nonoverlapping(
                vector.as_ptr(),
                UnsafeCell::raw_get(cells.as_ptr()),
                dim.min(vector.len()),
            );
        }
        if let (Some(codes), Some(meta)) = (chunk.codes.get(i * dim..(i + 1) * dim), chunk.metas.get(i)) {
            // SAFETY: as above, for the row's code and its metadata: the
            // same exclusive, unpublished row.
            unsafe {
                let codes = slice::from_raw_parts_mut(UnsafeCell::raw_get(codes.as_ptr()), codes.len());
                *meta.get() = encode(vector, codes);
            }
        }
        if let Some(id) = id {
            // SAFETY: same contract: exclusive access to this unpublished slot.
            let old = unsafe { mem::replace(&mut *chunk.ids[i].get(), Box::from(id)) };
            self.arena.id_bytes.fetch_add(id.len(), Ordering::Relaxed);
            self.arena.id_bytes.fetch_sub(old.len(), Ordering::Relaxed);
        }
        chunk.born[i].store(UNSET, Ordering::Relaxed);
        chunk.died[i].store(UNSET, Ordering::Relaxed);
    }

    /// Stages a new row; returns its index.
    pub(crate) fn append(&mut self, id: &[u8], vector: &[f32]) -> Result<u32> {
        let row = self.reserve(1)?;
        // SAFETY: `row` was just reserved, so `published <= row < next`, and
        // `&mut self` excludes every other writer.
        unsafe { self.write_row(row, Some(id), vector) };
        Ok(row as u32)
    }

    /// Stages one new row per item, filled in parallel; returns the first
    /// row's index (the rest follow in order).
    pub(crate) fn append_many<K, V>(&mut self, items: &[(K, V)]) -> Result<usize>
    where
        K: AsRef<[u8]> + Sync,
        V: AsRef<[f32]> + Sync,
    {
        let start = self.reserve(items.len())?;
        let this = &*self;
        items.par_iter().enumerate().for_each(|(j, (id, v))| {
            // SAFETY: rows `start..start + len` were just reserved (so are at or
            // beyond `published`), we hold `&mut self` for the duration, and
            // each worker writes its own row `start + j`.
            unsafe { this.write_row(start + j, Some(id.as_ref()), v.as_ref()) };
        });
        Ok(start)
    }

    /// Replaces the vector of a staged row; false (and nothing written) if
    /// `row` is not staged.
    pub(crate) fn overwrite(&mut self, row: u32, vector: &[f32]) -> bool {
        let row = row as usize;
        if row < self.published() || row >= self.next {
            return false;
        }
        // SAFETY: just checked `published <= row < next`; `&mut self` excludes
        // other writers.
        unsafe { self.write_row(row, None, vector) };
        true
    }

    /// Id of a published or staged row.
    pub(crate) fn id(&self, row: u32) -> Option<&[u8]> {
        let row = row as usize;
        if row >= self.next {
            return None;
        }
        let (chunk, i) = self.locate(row)?;
        // SAFETY: published rows are never written again; staged rows are
        // written only through `&mut self`, which cannot coexist with the
        // `&self` this borrow is tied to.
        Some(unsafe { &*chunk.ids[i].get() })
    }

    pub(crate) fn died(&self, row: u32) -> u64 {
        self.locate(row as usize)
            .map_or(UNSET, |(c, i)| c.died[i].load(Ordering::Relaxed))
    }

    pub(crate) fn set_born(&self, row: u32, version: u64) {
        if let Some((c, i)) = self.locate(row as usize) {
            c.born[i].store(version, Ordering::Relaxed);
        }
    }

    pub(crate) fn set_died(&self, row: u32, version: u64) {
        if let Some((c, i)) = self.locate(row as usize) {
            c.died[i].store(version, Ordering::Relaxed);
        }
    }

    /// Publishes every staged row (and orders all earlier stores, `born` and
    /// `died` included, before any snapshot that sees the new count).
    pub(crate) fn publish(&mut self) {
        self.arena.published.store(self.next, Ordering::Release);
    }

    /// Drops every staged row; their slots are reused by later appends.
    pub(crate) fn rollback(&mut self) {
        self.next = self.published();
    }
}

/// The rows published when the snapshot was taken; holds their chunks alive.
pub(crate) struct ArenaSnapshot {
    /// The arena's chunk list when the snapshot was taken (it may hold
    /// chunks past `rows`, which the snapshot never reads).
    list: Arc<ChunkList>,
    rows: usize,
    dim: usize,
    chunk_rows: ChunkRows,
    codes: bool,
}

/// Rows per chunk, and the split of a row number into its chunk and its
/// index there: a shift and a mask when the count is a power of two (the
/// default), as a 64-bit division costs tens of cycles per row, which a
/// gather over scattered rows pays twice a row (its look-ahead and its read).
#[derive(Debug, Clone, Copy)]
struct ChunkRows {
    rows: usize,
    /// `log2(rows)` when `rows` is a power of two.
    shift: Option<u32>,
}

impl ChunkRows {
    fn new(rows: usize) -> Self {
        ChunkRows {
            rows,
            shift: rows.is_power_of_two().then(|| rows.trailing_zeros()),
        }
    }

    /// `(row / rows, row % rows)`.
    #[inline]
    fn split(self, row: usize) -> (usize, usize) {
        match self.shift {
            Some(shift) => (row >> shift, row & (self.rows - 1)),
            None => (row / self.rows, row % self.rows),
        }
    }
}

impl ArenaSnapshot {
    /// Whether its rows keep codes.
    pub(crate) fn has_codes(&self) -> bool {
        self.codes
    }

    /// Rows covered (visible or not); row indices are below this.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Splits `0..rows` into ranges of at most `max_rows` that never cross a
    /// chunk boundary.
    pub(crate) fn ranges(&self, max_rows: usize) -> Vec<Range<usize>> {
        let chunk_rows = self.chunk_rows.rows;
        let step = max_rows.clamp(1, chunk_rows);
        let mut out = Vec::with_capacity(self.rows.div_ceil(step) + self.list.chunks.len());
        let mut base = 0;
        while base < self.rows {
            let chunk_end = (base + chunk_rows).min(self.rows);
            let mut start = base;
            while start < chunk_end {
                let end = (start + step).min(chunk_end);
                out.push(start..end);
                start = end;
            }
            base = chunk_end;
        }
        out
    }

    /// Rows `range` as slices, if the range lies within one chunk and below
    /// `rows`.
    pub(crate) fn segment(&self, range: Range<usize>) -> Option<Segment<'_>> {
        if range.start > range.end || range.end > self.rows {
            return None;
        }
        let (c, i0) = self.chunk_rows.split(range.start);
        let i1 = i0 + (range.end - range.start);
        if i1 > self.chunk_rows.rows {
            return None;
        }
        let chunk = self.list.chunks.get(c)?;
        let cells = &chunk.data[i0 * self.dim..i1 * self.dim];
        let code_cells = chunk.codes.get(i0 * self.dim..i1 * self.dim).unwrap_or_default();
        let meta_cells = chunk.metas.get(i0..i1).unwrap_or_default();
        let id_cells = &chunk.ids[i0..i1];
        // SAFETY: rows below `self.rows` were published before this snapshot
        // loaded the count (Acquire) and are never written again (module
        // docs), so shared references to them stay valid while `&self` keeps
        // the chunk alive. `UnsafeCell<T>` has the same layout as `T`.
        let (data, codes, metas, ids) = unsafe {
            (
                slice::from_raw_parts(cells.as_ptr().cast::<f32>(), cells.len()),
                slice::from_raw_parts(code_cells.as_ptr().cast::<i8>(), code_cells.len()),
                slice::from_raw_parts(meta_cells.as_ptr().cast::<CodeMeta>(), meta_cells.len()),
                slice::from_raw_parts(id_cells.as_ptr().cast::<Box<[u8]>>(), id_cells.len()),
            )
        };
        Some(Segment {
            base: range.start,
            dim: self.dim,
            data,
            codes,
            metas,
            ids,
            born: &chunk.born[i0..i1],
            died: &chunk.died[i0..i1],
        })
    }

    fn one(&self, row: usize) -> Option<Segment<'_>> {
        self.segment(row..row.checked_add(1)?)
    }

    pub(crate) fn id(&self, row: usize) -> Option<&[u8]> {
        Some(self.one(row)?.id(0))
    }

    pub(crate) fn vector(&self, row: usize) -> Option<&[f32]> {
        Some(self.one(row)?.vector(0))
    }

    /// Row `row`'s vector, through the chunk's [`VectorBase`]: for reads
    /// of scattered rows, where [`vector`](Self::vector)'s way through the
    /// chunk costs two dependent loads more.
    #[inline]
    pub(crate) fn vector_at(&self, row: usize) -> Option<&[f32]> {
        if row >= self.rows {
            return None;
        }
        let (c, i) = self.chunk_rows.split(row);
        let base = self.list.vectors.get(c)?;
        // SAFETY: `base` points at chunk `c`'s `chunk_rows × dim` cells, held
        // alive by `self.list`, and `i < chunk_rows`, so the range lies in
        // them; row `row` is below `self.rows`, published before this
        // snapshot loaded the count and never written again (module docs).
        // `UnsafeCell<f32>` has the same layout as `f32`.
        Some(unsafe { slice::from_raw_parts(base.0.as_ptr().add(i * self.dim), self.dim) })
    }

    pub(crate) fn born(&self, row: usize) -> u64 {
        self.one(row).map_or(UNSET, |s| s.born(0))
    }

    pub(crate) fn died(&self, row: usize) -> u64 {
        self.one(row).map_or(UNSET, |s| s.died(0))
    }

    /// Asks the CPU to start loading the first `lines` cache lines of
    /// `row`'s vector, and its versions if `versions`, into cache (a hint:
    /// never faults, changes nothing); a no-op past the rows or off x86-64.
    #[inline]
    pub(crate) fn prefetch(&self, row: usize, versions: bool, lines: usize) {
        if !versions {
            if let Some(vector) = self.vector_at(row) {
                prefetch_row(vector, &[], lines);
            }
            return;
        }
        self.prefetch_with(row, versions, |chunk, i, versions| {
            let start = i * self.dim;
            prefetch_row(&chunk.data[start..start + self.dim], versions, lines);
        });
    }

    /// As [`prefetch`](Self::prefetch), for the whole of `row`'s code and
    /// its metadata.
    #[inline]
    pub(crate) fn prefetch_code(&self, row: usize, versions: bool) {
        self.prefetch_with(row, versions, |chunk, i, versions| {
            let start = i * self.dim;
            prefetch_row(
                chunk.codes.get(start..start + self.dim).unwrap_or_default(),
                versions,
                usize::MAX,
            );
            prefetch_row(chunk.metas.get(i..i + 1).unwrap_or_default(), &[], 1);
        });
    }

    /// Runs `f` on `row`'s chunk, the row's index in it and, if
    /// `versions`, its version cells; nothing past the rows.
    #[inline]
    fn prefetch_with(&self, row: usize, versions: bool, f: impl FnOnce(&Chunk, usize, &[&AtomicU64])) {
        if row >= self.rows {
            return;
        }
        let (c, i) = self.chunk_rows.split(row);
        let Some(chunk) = self.list.chunks.get(c) else {
            return;
        };
        let cells: &[&AtomicU64] = if versions {
            &[&chunk.born[i], &chunk.died[i]]
        } else {
            &[]
        };
        f(chunk, i, cells);
    }

    /// Whether `row` (below [`rows`](Self::rows)) is visible at `version`:
    /// two atomic loads, no slices built.
    #[inline]
    pub(crate) fn visible(&self, row: usize, version: u64) -> bool {
        if row >= self.rows {
            return false;
        }
        let (c, i) = self.chunk_rows.split(row);
        let Some(chunk) = self.list.chunks.get(c) else {
            return false;
        };
        visible_at(&chunk.born[i], &chunk.died[i], version)
    }
}

/// Asks the CPU to start loading a row's vector cells and its versions (a
/// hint: reads nothing the program sees, never faults); a no-op off x86-64.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn prefetch_row<T>(_: &[T], _: &[&AtomicU64], _: usize) {}

/// Asks the CPU to start loading a row's vector cells and its versions (a
/// hint: reads nothing the program sees, never faults).
#[cfg(target_arch = "x86_64")]
#[inline]
fn prefetch_row<T>(cells: &[T], versions: &[&AtomicU64], lines: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let data = cells.as_ptr().cast::<i8>();
    for offset in (0..mem::size_of_val(cells)).step_by(64).take(lines) {
        // SAFETY: a prefetch never faults and changes nothing the program
        // sees; the address lies inside `cells`.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(data.wrapping_add(offset)) };
    }
    for &v in versions {
        // SAFETY: as above, the address of a live atomic.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(v).cast::<i8>()) };
    }
}

/// Consecutive published rows of one chunk, as plain slices.
pub(crate) struct Segment<'a> {
    base: usize,
    dim: usize,
    data: &'a [f32],
    codes: &'a [i8],
    metas: &'a [CodeMeta],
    ids: &'a [Box<[u8]>],
    born: &'a [AtomicU64],
    died: &'a [AtomicU64],
}

impl<'a> Segment<'a> {
    /// Index of the segment's first row.
    pub(crate) fn base(&self) -> usize {
        self.base
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Components of the `i`-th row of the segment.
    pub(crate) fn vector(&self, i: usize) -> &'a [f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    pub(crate) fn id(&self, i: usize) -> &'a [u8] {
        &self.ids[i]
    }

    /// The `i`-th row's code and its metadata, if rows keep codes.
    pub(crate) fn code(&self, i: usize) -> Option<(&'a [i8], &'a CodeMeta)> {
        Some((
            self.codes.get(i * self.dim..(i + 1) * self.dim)?,
            self.metas.get(i)?,
        ))
    }

    pub(crate) fn born(&self, i: usize) -> u64 {
        self.born[i].load(Ordering::Relaxed)
    }

    pub(crate) fn died(&self, i: usize) -> u64 {
        self.died[i].load(Ordering::Relaxed)
    }

    /// Asks the CPU to start loading the first `lines` cache lines of the
    /// `i`-th row's vector, and its versions if `versions` (a hint; a no-op
    /// past the segment or off x86-64).
    #[inline]
    pub(crate) fn prefetch(&self, i: usize, versions: bool, lines: usize) {
        #[cfg(target_arch = "x86_64")]
        if i < self.born.len() {
            let versions: &[&AtomicU64] = if versions {
                &[&self.born[i], &self.died[i]]
            } else {
                &[]
            };
            prefetch_row(self.vector(i), versions, lines);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (i, versions, lines);
    }

    /// Visible at `version` iff `born <= version < died`.
    ///
    /// Relaxed loads suffice: a commit that is concurrent with the scan has a
    /// version above the view's, and either value it writes (`UNSET` or that
    /// version) gives the same answer for the view's version.
    #[inline]
    pub(crate) fn visible(&self, i: usize, version: u64) -> bool {
        visible_at(&self.born[i], &self.died[i], version)
    }
}

/// The MVCC rule: a row is visible at `version` iff `born <= version < died`.
#[inline]
fn visible_at(born: &AtomicU64, died: &AtomicU64, version: u64) -> bool {
    born.load(Ordering::Relaxed) <= version && version < died.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_chunk_by_shift_is_its_chunk_by_division() {
        for rows in [1usize, 2, 3, 7, 16, 100, 1024] {
            let c = ChunkRows::new(rows);
            assert_eq!(c.shift.is_some(), rows.is_power_of_two(), "{rows} rows");
            for row in [0, 1, rows - 1, rows, rows + 1, 5 * rows + 3, MAX_ROWS] {
                assert_eq!(c.split(row), (row / rows, row % rows), "{rows} rows, row {row}");
            }
        }
    }

    #[test]
    fn vector_at_reads_the_rows_segments_read_and_nothing_past_them() {
        let dim = 3;
        for chunk_rows in [1usize, 3, 4, 16] {
            let (arena, mut cursor) = Arena::new(dim, chunk_rows, false);
            for i in 0..37u8 {
                let v = [f32::from(i), -f32::from(i), 0.5];
                cursor.append(&[i], &v).expect("append");
            }
            cursor.publish();
            let snap = arena.snapshot();
            for row in 0..37 {
                assert_eq!(
                    snap.vector_at(row),
                    snap.vector(row),
                    "{chunk_rows} rows a chunk, row {row}"
                );
                assert_eq!(snap.vector_at(row).map(|v| v[0]), Some(row as f32));
            }
            assert_eq!(snap.vector_at(37), None);
            assert_eq!(snap.vector_at(usize::MAX), None);
        }
    }
}
