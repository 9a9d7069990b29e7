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
//! * **Published blobs are immutable**, but for the entries of IPv6's blocks ([`BLOCK`]),
//!   which like top-level entries are switched with one whole-word `Release` store each. An
//!   update writes new blobs (path copying) and then switches one top-level entry or block
//!   entry; the replaced blobs are *retired*: their offsets go to a free list only after an
//!   epoch grace period (crossbeam-epoch `defer`), so no reader that could have reached them
//!   is still running when they are overwritten.
//! * **Readers never see an arena move.** The words live in a range of address space reserved
//!   up front ([`Words`]); when the arena is full the writer commits more of it in place
//!   (one `mprotect`, no copy). Only a table that outgrows its reservation is copied: the
//!   writer makes a bigger copy of the whole snapshot (top level and words, same offsets) and
//!   keeps writing into the copy, which is published with one pointer swap at the end of the
//!   change; the old snapshot is frozen from then on and destroyed through the epoch. A reader
//!   loads the snapshot pointer once per lookup or batch and sees one consistent generation.
//! * **Offsets are stable across growth**, so retired offsets stay meaningful after a copy. A
//!   full reload starts a new arena with its own recycle queue: late grace-period callbacks of
//!   the old arena push into the old, orphaned queue.
//!
//! Large arenas are aligned to 2 MiB and what a build fills is advised as huge pages where the
//! kernel honours it, so random lookups take fewer TLB misses (later growth gets ordinary
//! pages: see [`Words::settle`]).

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

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

fn advise_huge(p: *mut u8, len: usize) {
    advise(p, len, true);
}

/// Ask for huge pages (or, `huge == false`, ordinary ones) for `p..p+len` (page aligned).
#[cfg(target_os = "linux")]
fn advise(p: *mut u8, len: usize, huge: bool) {
    let advice = if huge {
        libc::MADV_HUGEPAGE
    } else {
        libc::MADV_NOHUGEPAGE
    };
    // SAFETY: `p..p+len` is memory (or reserved address space) we own; the advice only
    // changes how the kernel backs it, never its contents. Failure is harmless.
    unsafe { libc::madvise(p as *mut libc::c_void, len, advice) };
}

#[cfg(not(target_os = "linux"))]
fn advise(_p: *mut u8, _len: usize, _huge: bool) {}

/// A new buffer of `len` elements starting with a copy of `from` (the writer's, when it grows
/// an arena by copying: this is on the update path, so it copies whole pages, not atomic by
/// atomic).
fn copy<A>(from: &[A], len: usize) -> Buf<A> {
    assert!(from.len() <= len);
    let to = Buf::<A>::zeroed(len);
    // SAFETY: `to` is fresh (nobody else can see it) and at least as long as `from`.
    unsafe { copy_into(from, to.as_ptr() as *mut u64) };
    to
}

/// Copy `from` (whole 64-bit words of plain atomic integers) to `dst`, page by page, leaving
/// all-zero pages unwritten: untouched pages of a sparse top level cost no memory.
///
/// # Safety
/// `dst` must be valid for writes of `size_of_val(from)` bytes, 8-byte aligned, zeroed, and
/// seen by no other thread.
unsafe fn copy_into<A>(from: &[A], dst: *mut u64) {
    assert!(size_of_val(from).is_multiple_of(8));
    let n = size_of_val(from) / 8;
    // SAFETY: `from` is `n` whole words of plain atomic integers, 8-byte aligned (every `Buf`
    // and `Words` is 64-byte aligned and the slices start at 0). Only the writer thread — this
    // one — ever stores to them, so reading them non-atomically races with nothing
    // (concurrent readers only read).
    let src = unsafe { core::slice::from_raw_parts(from.as_ptr() as *const u64, n) };
    for (i, page) in src.chunks(512).enumerate() {
        if page.iter().fold(0, |a, &w| a | w) != 0 {
            // SAFETY: within `dst`'s `n` words (caller), which nobody else sees.
            unsafe { core::ptr::copy_nonoverlapping(page.as_ptr(), dst.add(i * 512), page.len()) };
        }
    }
}

/// Most words an arena holds (references are 29-bit word offsets): 4 GiB.
const MAX_WORDS: usize = 1 << 29;
/// Address space reserved for an arena: 16 times what it starts with, at least 64 MiB (a
/// reservation costs no memory, only address space; x86-64 has 128 TiB of it).
const RESERVE_FACTOR: usize = 16;
const RESERVE_MIN: usize = 8 << 20;

/// The words of an arena: a range of address space reserved up front and made usable
/// (*committed*) as the arena grows, so that growth neither moves nor copies it.
///
/// Why: growth by copying (a bigger buffer, the words copied over, the new snapshot published)
/// cost ~2 ms at 5.6 MiB and more with every table size, in whichever update happened to fill
/// the arena. Committing more of a reserved range is one `mprotect`; the new pages are faulted
/// in by the first writes to them (a 2 MiB huge page once the arena is that large: tens of
/// µs, once per 2 MiB). Readers never touch words past the published blobs, so committing
/// while they read is safe. A table that outgrows its reservation (16× its start) is copied
/// into a new, bigger one as before. Where address space cannot be reserved (not Linux), the
/// words are an ordinary allocation and every growth copies.
pub(crate) struct Words {
    ptr: NonNull<AtomicU64>,
    /// Words reserved: the most [`Words::commit`] can make usable.
    reserved: usize,
    /// Words usable now. Changed by the writer only; readers never need it. Boxed for the
    /// reason `Snapshot::default` is: an atomic inline in the snapshot makes the compiler
    /// reload `top` and `words` after every store in the lookup loops (measured −10 % on
    /// IPv4 batch lookups with every line cached).
    committed: Box<AtomicUsize>,
}

// SAFETY: `Words` owns its mapping like a `Box<[AtomicU64]>`; shared access is through
// `&AtomicU64` only, and `committed` is atomic.
unsafe impl Send for Words {}
// SAFETY: as above.
unsafe impl Sync for Words {}

impl Words {
    /// Reserve room for at least `RESERVE_FACTOR × expect` words and commit some of them
    /// (all of `expect` if it is small; a build commits the rest as it goes, so that what is
    /// committed is what was used, plus headroom).
    pub(crate) fn reserve(expect: usize) -> Self {
        let want = (expect * RESERVE_FACTOR)
            .clamp(RESERVE_MIN, MAX_WORDS)
            .max(expect);
        let w = Self::reserve_exact(expect.min(1 << 16), want);
        // Huge pages for what a build will fill (not known yet: the whole reservation, cut
        // back by `settle` when the build is done), so that lookups take fewer TLB misses.
        advise(w.ptr.as_ptr() as *mut u8, w.reserved * 8, true);
        w
    }

    /// After a build that used `used` words (0 for an arena that starts empty): the words past
    /// the huge page it ends in get ordinary pages. Why: the first write to a fresh huge page makes the kernel clear
    /// (here, in a KVM guest, also fault in) 2 MiB at once — measured 0.3–4.4 ms in the
    /// update that happens to allocate there, against 20–30 µs with 4 KiB pages, whose faults
    /// spread over the updates. The grown part of a table is small next to what was loaded; a
    /// reload packs everything onto huge pages again.
    pub(crate) fn settle(&self, used: usize) {
        let from = (used * 8).next_multiple_of(HUGE);
        if from < self.reserved * 8 {
            let p = (self.ptr.as_ptr() as *mut u8).wrapping_add(from);
            advise(p, self.reserved * 8 - from, false);
        }
    }

    /// Reserve `reserved` words (rounded up) and commit `initial` of them.
    #[cfg(target_os = "linux")]
    pub(crate) fn reserve_exact(initial: usize, reserved: usize) -> Self {
        let bytes = (reserved.max(initial).max(1) * 8).next_multiple_of(4096);
        // Over-reserve by one huge page to start on a 2 MiB boundary (for huge pages).
        // SAFETY: a fresh anonymous mapping, inaccessible until committed; no memory of ours
        // is touched.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                bytes + HUGE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert!(
            p != libc::MAP_FAILED,
            "FIB arena: cannot reserve {bytes} bytes of address space"
        );
        let base = p as usize;
        let start = base.next_multiple_of(HUGE);
        // Give back the slack on both sides, so that the mapping is exactly the reservation.
        // SAFETY: both ranges lie inside the mapping just made and are page aligned.
        unsafe {
            if start > base {
                libc::munmap(p, start - base);
            }
            let end = start + bytes;
            if base + bytes + HUGE > end {
                libc::munmap(end as *mut libc::c_void, base + bytes + HUGE - end);
            }
        }
        let w = Words {
            ptr: NonNull::new(start as *mut AtomicU64).expect("mmap never returns 0 here"),
            reserved: bytes / 8,
            committed: Box::new(AtomicUsize::new(0)),
        };
        assert!(w.commit(initial), "initial commit within the reservation");
        w
    }

    /// Not Linux: an ordinary zeroed allocation of `initial` words; growth copies.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn reserve_exact(initial: usize, _reserved: usize) -> Self {
        let b = core::mem::ManuallyDrop::new(Buf::<AtomicU64>::zeroed(initial.max(1)));
        Words {
            ptr: b.ptr,
            reserved: b.len,
            committed: Box::new(AtomicUsize::new(b.len)),
        }
    }

    /// Make the first `want` words usable, if the reservation allows (`false`: it does not;
    /// nothing changed). Writer only.
    pub(crate) fn commit(&self, want: usize) -> bool {
        let have = self.committed.load(Ordering::Relaxed);
        if want <= have {
            return true;
        }
        if want > self.reserved {
            return false;
        }
        #[cfg(target_os = "linux")]
        {
            // Pages while small, whole huge pages once past the first 2 MiB.
            let step = if want * 8 >= HUGE { HUGE } else { 4096 };
            let to = (want * 8).next_multiple_of(step).min(self.reserved * 8);
            let from = have * 8; // a multiple of the page size: see above
            // SAFETY: `from..to` lies inside our reservation (`to ≤ reserved`), page aligned;
            // making inaccessible pages accessible changes no memory anyone uses.
            let r = unsafe {
                libc::mprotect(
                    (self.ptr.as_ptr() as *mut u8).add(from) as *mut libc::c_void,
                    to - from,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if r != 0 {
                return false;
            }
            self.committed.store(to / 8, Ordering::Relaxed);
            true
        }
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Words usable now.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.committed.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(crate) fn as_ptr(&self) -> *const AtomicU64 {
        self.ptr.as_ptr()
    }

    /// Fresh words (at least `len`, reserved as by [`Words::reserve`]) holding a copy of `from`.
    fn copy_of(from: &[AtomicU64], len: usize) -> Self {
        assert!(from.len() <= len);
        let w = Words::reserve(len);
        assert!(w.commit(len), "within the reservation");
        // SAFETY: `w` is fresh (nobody else sees it), zeroed, with at least `len` words usable.
        unsafe { copy_into(from, w.as_ptr() as *mut u64) };
        w.settle(from.len());
        w
    }
}

impl core::ops::Deref for Words {
    type Target = [AtomicU64];
    fn deref(&self) -> &[AtomicU64] {
        // SAFETY: the committed words are mapped, zero-initialised atomics owned by `self`.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: exactly the mapping made in `reserve_exact`; nobody uses it any more.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.reserved * 8);
        }
        #[cfg(not(target_os = "linux"))]
        drop(Buf::<AtomicU64> {
            ptr: self.ptr,
            len: self.reserved,
        });
    }
}

/// One generation of the lookup structure, as readers see it.
pub(crate) struct Snapshot {
    /// Top-level entries of 64 bits (IPv6): the low half a leaf `id << 1` or a node reference
    /// (odd), the high half the id of the best route no longer than the top level covering the
    /// slot (see [`poptrie::top_entry`](crate::poptrie::top_entry)). Empty for a table with
    /// 32-bit entries (IPv4), whose entries are `top32`.
    pub(crate) top: Buf<AtomicU64>,
    /// Top-level entries of 32 bits (IPv4): a leaf `id << 1` or a node reference, with the
    /// slot's cover in the top byte if `packed`. Empty for a table with 64-bit entries.
    pub(crate) top32: Buf<AtomicU32>,
    /// The blobs.
    pub(crate) words: Words,
    /// log2 of the leaf width in bytes (0: u8, 1: u16, 2: u32).
    pub(crate) lw: u32,
    /// 32-bit top-level entries with the slot's cover in their top byte ([`PACKED_REF`]
    /// bits of trie reference below it): IPv4 while every id but the default's fits a byte
    /// and the arena 16 MiB (see [`Table`](crate::Table)). Fixed for a snapshot's life.
    pub(crate) packed: bool,
    /// The reference bits of a 32-bit top-level entry: `(1 << PACKED_REF) - 1` if `packed`,
    /// else all (a field rather than computed from `packed`: one load instead of three
    /// instructions in every lookup).
    pub(crate) rmask: u32,
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
            .field("top", &self.top.len().max(self.top32.len()))
            .field("words", &self.words.len())
            .field("lw", &self.lw)
            .field("default", &self.default)
            .finish()
    }
}

impl Snapshot {
    /// `wide`: 64-bit top-level entries (with covers), else 32-bit ones, `packed` with the
    /// covers in their top byte. All entries start as 0 (a leaf "no route", no cover).
    pub(crate) fn new(top_bits: u8, words: usize, lw: u32, wide: bool, packed: bool) -> Self {
        let n = 1usize << top_bits;
        Snapshot {
            top: Buf::zeroed(if wide { n } else { 0 }),
            top32: Buf::zeroed(if wide { 0 } else { n }),
            words: Words::reserve(words),
            lw,
            packed,
            rmask: if packed {
                (1 << PACKED_REF) - 1
            } else {
                u32::MAX
            },
            default: Box::new(AtomicU32::new(0)),
        }
    }

    /// Word `i` of a block (`Acquire`: block entries are stored in place, `Release`, after
    /// the subtree they name was written).
    ///
    /// # Safety
    /// `i < self.words.len()`.
    #[inline(always)]
    pub(crate) unsafe fn block_word(&self, i: usize) -> u64 {
        debug_assert!(i < self.words.len());
        // SAFETY: in bounds (caller).
        unsafe { (*self.words.as_ptr().add(i)).load(Ordering::Acquire) }
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

/// Bits of trie reference in a packed top-level entry (the cover takes the top 8): a node's
/// word offset must be below `1 << (PACKED_REF - 3)` (16 MiB of arena).
pub(crate) const PACKED_REF: u32 = 24;

/// Words past the end of any blob that the arena keeps committed, so that a reader may load
/// them: the AVX-512 step reads the first four words of every node in one load, and the
/// smallest node has two (see `simd`).
pub(crate) const READ_PAST: usize = 2;

/// Words of a *block* (IPv6): the 64 entries that resolve the six bits after the top level,
/// each a subtree reference and the sub-slot's cover (see `Table`). Blocks are the one blob
/// kind written after publication (one whole-word store per entry, like the top level's), and
/// are allocated on a cache-line boundary (an entry's line is `offset / 8 + v / 8`).
pub(crate) const BLOCK: usize = 64;

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
    /// Words handed out by `alloc` and not retired or freed since (tests: every blob a change
    /// replaces is given back, whatever the epoch is doing).
    #[cfg(test)]
    pub(crate) live_words: usize,
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
    /// A new arena writing into a fresh, unpublished snapshot. With `wide` (64-bit top-level
    /// entries, IPv6) its first [`BLOCK`] words are the *empty block*, all zero and never
    /// handed out: a top-level entry of 0 names it, so an empty slot reads as a block of
    /// empty sub-slots.
    pub(crate) fn new(top_bits: u8, words: usize, lw: u32, wide: bool, packed: bool) -> Self {
        Arena {
            published: core::ptr::null(),
            fresh: Some(Box::new(Snapshot::new(
                top_bits,
                words.max(2 * BLOCK),
                lw,
                wide,
                packed,
            ))),
            bump: if wide { BLOCK } else { 0 },
            free: vec![Vec::new(); MAX_BLOB + 1],
            free_words: 0,
            retired: Vec::new(),
            recycled: Arc::default(),
            #[cfg(test)]
            live_words: 0,
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
        #[cfg(test)]
        {
            self.live_words += n;
        }
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
        if n == BLOCK {
            // Blocks start a cache line: a free one only if it does.
            let f = &mut self.free[n];
            if let Some(i) = f.iter().position(|&o| o.is_multiple_of(8)) {
                self.free_words -= n;
                return f.swap_remove(i) as usize;
            }
        } else {
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
        }
        // A blob that fits a cache line never straddles two (a straddling node costs two
        // misses), and a block starts one; the skipped words become a free blob for a smaller
        // node.
        let pad =
            if (n <= 8 && self.bump % 8 + n > 8) || (n == BLOCK && !self.bump.is_multiple_of(8)) {
                8 - self.bump % 8
            } else {
                0
            };
        if self.bump + pad + n + READ_PAST > self.cur().words.len() {
            self.grow(pad + n + READ_PAST);
        }
        if pad >= 2 {
            // Straight to the free list (not `free_now`: the padding was never handed out).
            self.free[pad].push(self.bump as u32);
            self.free_words += pad;
        }
        self.bump += pad + n;
        self.bump - n
    }

    /// Make room for `n` more words: commit more of the reserved words in place (the usual
    /// case: nothing moves, nothing is copied, nothing new is published), else replace the
    /// snapshot being written by a bigger copy (same offsets).
    fn grow(&mut self, n: usize) {
        let cur = self.cur();
        let want = self.bump + n;
        // Headroom of an eighth, so that commits are rare.
        if cur
            .words
            .commit((want + want / 8).max(want + 1024).min(MAX_WORDS))
            || cur.words.commit(want)
        {
            return;
        }
        let cap = (cur.words.len() + cur.words.len() / 2).max(self.bump + n + 1024);
        assert!(cap < MAX_WORDS, "FIB arena over 4 GiB");
        let next = Snapshot {
            top: copy(&cur.top, cur.top.len()),
            top32: copy(&cur.top32, cur.top32.len()),
            words: Words::copy_of(&cur.words[..self.bump], cap),
            lw: cur.lw,
            packed: cur.packed,
            rmask: cur.rmask,
            default: Box::new(AtomicU32::new(cur.default.load(Ordering::Relaxed))),
        };
        // A private copy replaced by a bigger one is simply dropped; a published one stays
        // where readers find it until `finish` swaps it out.
        self.fresh = Some(Box::new(next));
    }

    /// Free a blob that was never published (no reader can have seen it).
    pub(crate) fn free_now(&mut self, off: usize, n: usize) {
        #[cfg(test)]
        {
            self.live_words -= n;
        }
        self.free[n].push(off as u32);
        self.free_words += n;
    }

    /// Free a blob readers may still be reading: reusable after a grace period.
    pub(crate) fn retire(&mut self, off: usize, n: usize) {
        #[cfg(test)]
        {
            self.live_words -= n;
        }
        self.retired.push((off as u32, n as u8));
    }

    /// Growth from here on gets ordinary pages (see [`Words::settle`]); for an arena that
    /// starts empty and grows by updates.
    pub(crate) fn settle(&mut self) {
        self.cur().words.settle(self.bump);
    }

    /// Give an arena headroom for updates: `extra` words usable past what is allocated.
    /// (Committed words that are never written cost no memory, so nothing is trimmed.)
    pub(crate) fn fit(&mut self, extra: usize) {
        self.cur().words.settle(self.bump);
        if self.bump + extra > self.cur().words.len() {
            self.grow(extra);
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

    /// Allocate 200 three-word blobs into `a` (published in `slot`), publish, and check that
    /// every blob and a top-level entry survived; returns whether the snapshot was replaced.
    fn fill_and_check(mut a: Arena, slot: &Atomic<Snapshot>) -> bool {
        let g = crossbeam_epoch::pin();
        a.finish(slot, &g);
        let first = slot.load(Ordering::Acquire, &g).as_raw();
        // SAFETY: published just now, guard held.
        let old_len = unsafe { &*first }.words.len();
        a.cur().top[3].store(42, Ordering::Release);
        let mut offs = Vec::new();
        for i in 0..200u64 {
            offs.push((a.alloc(&blob(3, i)), i));
        }
        // A published snapshot never shrinks or moves under its readers before `finish`.
        // SAFETY: `first` is still published (or deferred) and we hold a guard.
        assert!(unsafe { &*first }.words.len() >= old_len);
        a.finish(slot, &g);
        let now = slot.load(Ordering::Acquire, &g);
        // SAFETY: published, guard held.
        let s = unsafe { now.deref() };
        assert_eq!(s.top[3].load(Ordering::Relaxed), 42);
        for (o, i) in offs {
            // SAFETY: within the allocation made above.
            assert_eq!(unsafe { s.word(o + 2) }, i);
        }
        now.as_raw() != first
    }

    #[test]
    fn growth_in_place_keeps_the_snapshot_offsets_and_contents() {
        let slot = Atomic::null();
        assert!(
            !fill_and_check(Arena::new(8, 64, 0, true, false), &slot),
            "growth within the reservation publishes nothing new"
        );
        // SAFETY: test owns the table-less slot; no readers.
        unsafe { drop(slot.into_owned()) };
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn growth_past_the_reservation_copies_with_the_same_offsets() {
        let slot = Atomic::null();
        let mut a = Arena::new(8, 64, 0, true, false);
        // One page reserved (512 words): the 200 blobs of 3 words do not fit.
        a.fresh.as_mut().expect("unpublished").words = Words::reserve_exact(64, 512);
        assert!(
            fill_and_check(a, &slot),
            "an arena past its reservation is a new snapshot"
        );
        // SAFETY: test owns the table-less slot; no readers.
        unsafe { drop(slot.into_owned()) };
    }

    #[test]
    fn words_commit_within_the_reservation_only() {
        let w = Words::reserve_exact(100, 1 << 20);
        assert!(w.len() >= 100);
        w[99].store(7, Ordering::Relaxed);
        if cfg!(target_os = "linux") {
            assert!(w.commit(300_000));
            assert!(w.len() >= 300_000);
            w[299_999].store(8, Ordering::Relaxed);
            assert_eq!(
                w[99].load(Ordering::Relaxed),
                7,
                "committing more keeps the contents"
            );
            assert!(!w.commit((1 << 20) + 1), "past the reservation");
        }
    }

    #[test]
    fn retired_blobs_are_reused_only_after_the_grace_period() {
        let slot = Atomic::null();
        let mut a = Arena::new(8, 4096, 0, true, false);
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
