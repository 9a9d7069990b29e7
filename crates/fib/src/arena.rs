//! Where the compiled trie lives: one [`Snapshot`] (top-level array + one word arena) that
//! readers index with 32-bit offsets, and the writer's [`Arena`] that allocates in it.
//!
//! Why an arena and not one heap allocation per node: per-node boxes need 8-byte pointers in
//! every parent and scatter the nodes; a lookup that must stay in the 4 MiB L2 cannot afford
//! either. In one arena a node is a variable-size *blob* of 64-bit words (see
//! [`poptrie`](crate::poptrie)) named by its word offset, so a reference is 4 bytes and a
//! node's children references and leaves sit in the node's own cache line.
//!
//! Why words are `AtomicU64`: the writer fills fresh blobs in the same allocation readers are
//! reading. With atomics (relaxed loads and stores compile to plain moves on x86-64) that is
//! never a data race, whatever a reader computes. Readers only follow references they loaded
//! with `Acquire` from a top-level entry whose `Release` store came after the blob was
//! written, so they always see complete blobs.
//!
//! Invariants the writer keeps:
//!
//! * **Published blobs are immutable.** An update writes new blobs (path copying) and then
//!   switches one top-level entry; the replaced blobs are *retired*: their offsets go to a free
//!   list only after an epoch grace period (crossbeam-epoch `defer`), so no reader that could
//!   have reached them is still running when they are overwritten.
//! * **Readers never see an arena move.** When the arena is full the writer makes a bigger
//!   copy of the whole snapshot (top level and words, same offsets) and keeps writing into the
//!   copy, which is published with one pointer swap at the end of the change; the old snapshot
//!   is frozen from then on and destroyed through the epoch. A reader loads the snapshot pointer
//!   once per lookup or batch and sees one consistent generation.
//! * **Offsets are stable across growth**, so retired offsets stay meaningful after a copy. A
//!   full reload starts a new arena with its own recycle queue: late grace-period callbacks of
//!   the old arena push into the old, orphaned queue.
//!
//! Large arenas are aligned to 2 MiB and advised as huge pages where the kernel honours it, so
//! random lookups take fewer TLB misses.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crossbeam_epoch::{Atomic, Guard, Owned};
use crossbeam_queue::SegQueue;

/// A zero-initialised, fixed-size array of atomics, aligned for huge pages when large.
pub(crate) struct Buf<T> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: `Buf` owns its memory like a `Box<[T]>`; `T` is an atomic integer (Send + Sync).
unsafe impl<T: Send + Sync> Send for Buf<T> {}
// SAFETY: as above; shared access is through `&T` of atomics only.
unsafe impl<T: Send + Sync> Sync for Buf<T> {}

const HUGE: usize = 2 << 20;

impl<T> Buf<T> {
    fn layout(len: usize) -> Layout {
        let bytes = (len.max(1)) * size_of::<T>();
        let align = if bytes >= HUGE { HUGE } else { 64 };
        Layout::from_size_align(bytes.next_multiple_of(align), align).expect("arena layout")
    }

    /// `len` zeroed elements. `T` must be an atomic integer (all-zero is a valid value).
    pub(crate) fn zeroed(len: usize) -> Self {
        let layout = Self::layout(len);
        // SAFETY: the layout has non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p as *mut T) else {
            std::alloc::handle_alloc_error(layout)
        };
        if layout.align() == HUGE {
            advise_huge(p, layout.size());
        }
        Buf { ptr, len }
    }

    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(crate) fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }
}

impl<T> core::ops::Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised (zeroed atomic) elements, owned by `self`.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for Buf<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with exactly this layout; atomics need no drop.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, Self::layout(self.len)) };
    }
}

#[cfg(target_os = "linux")]
fn advise_huge(p: *mut u8, len: usize) {
    // SAFETY: `p..p+len` is one allocation we own; MADV_HUGEPAGE only changes how the kernel
    // backs it, never its contents (fresh, zero pages either way). Failure is harmless.
    unsafe { libc::madvise(p as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_p: *mut u8, _len: usize) {}

/// A new buffer of `len` elements starting with a copy of `from` (the writer's, when it grows
/// an arena: this is on the update path, so it copies whole pages, not atomic by atomic).
fn copy<A>(from: &[A], len: usize) -> Buf<A> {
    assert!(from.len() <= len && size_of_val(from).is_multiple_of(8));
    let to = Buf::<A>::zeroed(len);
    let n = size_of_val(from) / 8;
    // SAFETY: `from` is `n` whole words of plain atomic integers, 8-byte aligned (every `Buf`
    // is 64-byte aligned and the slices start at 0). Only the writer thread — this one — ever
    // stores to them, so reading them non-atomically races with nothing (concurrent readers
    // only read).
    let src = unsafe { core::slice::from_raw_parts(from.as_ptr() as *const u64, n) };
    let dst = to.as_ptr() as *mut u64;
    // Page by page, leaving all-zero pages unwritten: untouched pages of a sparse top level
    // cost no memory.
    for (i, page) in src.chunks(512).enumerate() {
        if page.iter().fold(0, |a, &w| a | w) != 0 {
            // SAFETY: `to` is fresh (nobody else can see it), at least as long as `from`, and
            // this page lies within both.
            unsafe { core::ptr::copy_nonoverlapping(page.as_ptr(), dst.add(i * 512), page.len()) };
        }
    }
    to
}

/// One generation of the lookup structure, as readers see it.
pub(crate) struct Snapshot {
    /// Top-level entries: the low half a leaf `id << 1` or a node reference (odd), the high
    /// half the id of the best route no longer than the top level covering the slot (see
    /// [`poptrie::top_entry`](crate::poptrie::top_entry)).
    pub(crate) top: Buf<AtomicU64>,
    /// The blobs.
    pub(crate) words: Buf<AtomicU64>,
    /// log2 of the leaf width in bytes (0: u8, 1: u16, 2: u32).
    pub(crate) lw: u32,
    /// Next-hop id of the default route (0: none). Kept out of the trie, whose leaves hold 0
    /// where only the default covers them; lookups substitute this for a 0 result. Stored in
    /// place (`Release`) by a default-route change, and set before a new build is published,
    /// so a reload switches trie and default together with the snapshot pointer.
    ///
    /// Boxed, not inline, on purpose: an atomic (an `UnsafeCell`) directly in `Snapshot` makes
    /// `&Snapshot` no longer "immutable memory" to the compiler, which then reloads `top` and
    /// `words` from the snapshot after every store in the lookup loops — measured −12 % on
    /// IPv6 batch lookups (`examples/lookup_rate.rs`). Behind a pointer it costs one more L1
    /// load, once per lookup or batch.
    pub(crate) default: Box<AtomicU32>,
}

impl core::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Snapshot")
            .field("top", &self.top.len())
            .field("words", &self.words.len())
            .field("lw", &self.lw)
            .field("default", &self.default)
            .finish()
    }
}

impl Snapshot {
    pub(crate) fn new(top_bits: u8, words: usize, lw: u32, empty: u64) -> Self {
        let top = Buf::<AtomicU64>::zeroed(1 << top_bits);
        if empty != 0 {
            for e in top.iter() {
                e.store(empty, Ordering::Relaxed);
            }
        }
        Snapshot {
            top,
            words: Buf::zeroed(words),
            lw,
            default: Box::new(AtomicU32::new(0)),
        }
    }

    /// Word `i` (relaxed: see the module docs for why that suffices).
    ///
    /// # Safety
    /// `i < self.words.len()`.
    #[inline(always)]
    pub(crate) unsafe fn word(&self, i: usize) -> u64 {
        debug_assert!(i < self.words.len());
        // SAFETY: in bounds (caller).
        unsafe { (*self.words.as_ptr().add(i)).load(Ordering::Relaxed) }
    }
}

/// Largest blob in words (2 skip words + leafvec + vector + 64 refs + 64 u32 leaves).
pub(crate) const MAX_BLOB: usize = 2 + 2 + 32 + 32;

/// The writer's side of one arena: the snapshot being written, bump pointer, free lists.
pub(crate) struct Arena {
    /// What `Table::snap` holds (null until the first publish).
    published: *const Snapshot,
    /// A private snapshot being written: a new build, or a grown copy of `published`.
    fresh: Option<Box<Snapshot>>,
    /// Words `[0, bump)` have been handed out at least once.
    bump: usize,
    /// Free blobs by size in words, ready for reuse (grace period passed).
    free: Vec<Vec<u32>>,
    /// Words sitting in `free` lists.
    free_words: usize,
    /// Retired during the current change; deferred at its end.
    retired: Vec<(u32, u8)>,
    /// Offsets whose grace period passed, pushed by epoch callbacks, drained on allocation.
    recycled: Arc<SegQueue<(u32, u8)>>,
}

// SAFETY: `published` points to the snapshot the owning table holds; it is only dereferenced by
// the writer under the table's writer lock, and the snapshot it points to is destroyed only
// after the arena has stopped pointing to it (see `finish`).
unsafe impl Send for Arena {}

impl core::fmt::Debug for Arena {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Arena")
            .field("bump", &self.bump)
            .field("free_words", &self.free_words)
            .finish()
    }
}

impl Arena {
    /// A new arena writing into a fresh, unpublished snapshot.
    pub(crate) fn new(top_bits: u8, words: usize, lw: u32, empty: u64) -> Self {
        Arena {
            published: core::ptr::null(),
            fresh: Some(Box::new(Snapshot::new(top_bits, words.max(64), lw, empty))),
            bump: 0,
            free: vec![Vec::new(); MAX_BLOB + 1],
            free_words: 0,
            retired: Vec::new(),
            recycled: Arc::default(),
        }
    }

    /// The snapshot being written.
    #[inline]
    pub(crate) fn cur(&self) -> &Snapshot {
        match &self.fresh {
            Some(f) => f,
            // SAFETY: `published` is the live published snapshot (see the `Send` impl).
            None => unsafe { &*self.published },
        }
    }

    /// Words handed out (live, free-listed or retired), and capacity.
    pub(crate) fn used(&self) -> (usize, usize, usize) {
        (self.bump, self.free_words, self.cur().words.len())
    }

    /// Write `blob` somewhere free; returns its word offset.
    pub(crate) fn alloc(&mut self, blob: &[u64]) -> usize {
        let n = blob.len();
        debug_assert!((2..=MAX_BLOB).contains(&n));
        let off = self.take(n);
        let words = &self.cur().words;
        for (i, &w) in blob.iter().enumerate() {
            words[off + i].store(w, Ordering::Relaxed);
        }
        off
    }

    /// Offset of `n` free words.
    fn take(&mut self, n: usize) -> usize {
        while let Some((o, s)) = self.recycled.pop() {
            self.free[usize::from(s)].push(o);
            self.free_words += usize::from(s);
        }
        if let Some(o) = self.free[n].pop() {
            self.free_words -= n;
            return o as usize;
        }
        // Split a bigger free blob (leaving at least 2 words, the smallest blob).
        for s in n + 2..=MAX_BLOB {
            if let Some(o) = self.free[s].pop() {
                self.free[s - n].push(o + n as u32);
                self.free_words -= n;
                return o as usize;
            }
        }
        // A blob that fits a cache line never straddles two (a straddling node costs two
        // misses); the skipped words become a free blob for a smaller node.
        let pad = if n <= 8 && self.bump % 8 + n > 8 {
            8 - self.bump % 8
        } else {
            0
        };
        if self.bump + pad + n > self.cur().words.len() {
            self.grow(pad + n);
        }
        if pad >= 2 {
            self.free_now(self.bump, pad);
        }
        self.bump += pad + n;
        self.bump - n
    }

    /// Replace the snapshot being written by a bigger copy (same offsets).
    fn grow(&mut self, n: usize) {
        let cur = self.cur();
        let cap = (cur.words.len() + cur.words.len() / 2).max(self.bump + n + 1024);
        assert!(cap < 1 << 29, "FIB arena over 4 GiB");
        let next = Snapshot {
            top: copy(&cur.top, cur.top.len()),
            words: copy(&cur.words[..self.bump], cap),
            lw: cur.lw,
            default: Box::new(AtomicU32::new(cur.default.load(Ordering::Relaxed))),
        };
        // A private copy replaced by a bigger one is simply dropped; a published one stays
        // where readers find it until `finish` swaps it out.
        self.fresh = Some(Box::new(next));
    }

    /// Free a blob that was never published (no reader can have seen it).
    pub(crate) fn free_now(&mut self, off: usize, n: usize) {
        self.free[n].push(off as u32);
        self.free_words += n;
    }

    /// Free a blob readers may still be reading: reusable after a grace period.
    pub(crate) fn retire(&mut self, off: usize, n: usize) {
        self.retired.push((off as u32, n as u8));
    }

    /// Give an unpublished arena headroom for updates (`extra` words) or trim a build's
    /// over-allocation; a no-op for a published arena.
    pub(crate) fn fit(&mut self, extra: usize) {
        if self.fresh.is_some() && self.published.is_null() {
            let want = self.bump + extra;
            let have = self.cur().words.len();
            if have > want + want / 4 || have < want {
                let cur = self.fresh.take().expect("checked");
                let mut next = *cur;
                next.words = copy(&next.words[..self.bump], want);
                self.fresh = Some(Box::new(next));
            }
        }
    }

    /// End of a change: publish a private snapshot if there is one (destroying the one it
    /// replaces through the epoch), and send this change's retired blobs to the epoch.
    pub(crate) fn finish(&mut self, slot: &Atomic<Snapshot>, guard: &Guard) {
        if let Some(f) = self.fresh.take() {
            let new = Owned::<Snapshot>::from(f).into_shared(guard);
            let old = slot.swap(new, Ordering::AcqRel, guard);
            self.published = new.as_raw();
            if !old.is_null() {
                // SAFETY: `old` is unlinked now; readers that loaded it are pinned, and the
                // epoch destroys it only after they unpin. Nobody writes to it any more.
                unsafe { guard.defer_destroy(old) };
            }
        }
        if !self.retired.is_empty() {
            let list = core::mem::take(&mut self.retired);
            let q = Arc::clone(&self.recycled);
            guard.defer(move || {
                for x in list {
                    q.push(x);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(n: usize, v: u64) -> Vec<u64> {
        vec![v; n]
    }

    #[test]
    fn growth_keeps_offsets_and_contents() {
        let slot = Atomic::null();
        let g = crossbeam_epoch::pin();
        let mut a = Arena::new(8, 64, 0, 1);
        a.finish(&slot, &g);
        let first = slot.load(Ordering::Acquire, &g).as_raw();
        a.cur().top[3].store(42, Ordering::Release);
        let mut offs = Vec::new();
        for i in 0..200u64 {
            offs.push((a.alloc(&blob(3, i)), i));
        }
        // The published snapshot is untouched by growth until `finish`.
        // SAFETY: `first` is still published and we hold a guard.
        let old = unsafe { &*first };
        assert_eq!(old.words.len(), 64);
        a.finish(&slot, &g);
        let now = slot.load(Ordering::Acquire, &g);
        assert_ne!(now.as_raw(), first, "a grown arena is a new snapshot");
        // SAFETY: published, guard held.
        let s = unsafe { now.deref() };
        assert_eq!(s.top[3].load(Ordering::Relaxed), 42);
        for (o, i) in offs {
            // SAFETY: within the allocation made above.
            assert_eq!(unsafe { s.word(o + 2) }, i);
        }
        drop(g);
        // SAFETY: test owns the table-less slot; no readers.
        unsafe { drop(slot.into_owned()) };
    }

    #[test]
    fn retired_blobs_are_reused_only_after_the_grace_period() {
        let slot = Atomic::null();
        let mut a = Arena::new(8, 4096, 0, 1);
        let w = crossbeam_epoch::pin();
        a.finish(&slot, &w);
        let x = a.alloc(&blob(4, 7));
        a.finish(&slot, &w);
        drop(w);
        // A reader pinned before the retirement holds the epoch back.
        let reader = crossbeam_epoch::pin();
        let w = crossbeam_epoch::pin();
        a.retire(x, 4);
        a.finish(&slot, &w);
        drop(w);
        for _ in 0..1000 {
            crossbeam_epoch::pin().flush();
            let y = a.alloc(&blob(4, 8));
            assert_ne!(x, y, "reused while a reader that could see it is pinned");
        }
        drop(reader);
        let mut reused = false;
        for _ in 0..100_000 {
            crossbeam_epoch::pin().flush();
            if a.alloc(&blob(4, 9)) == x {
                reused = true;
                break;
            }
        }
        assert!(
            reused,
            "retired blob never came back after the reader unpinned"
        );
        // SAFETY: no readers left.
        unsafe { drop(slot.into_owned()) };
    }
}
