//! The packet pool: fixed-size slots addressed by index, owned through a [`Pkt`] handle.
//!
//! Why slots and indexes: every packet the data plane touches lives in one preallocated
//! region, so receiving, queueing, forwarding and transmitting never allocate; rings and
//! vectors carry 8-byte handles, not buffers (Europa, VPP frames). The same region can later
//! be registered as an AF_XDP UMEM so the kernel writes frames straight into slots.
//!
//! Ownership is what makes the raw slots safe to hand out: a [`Pkt`] is not `Clone`, only the
//! pool creates one (from its free list), and the pool gives `&mut` access to a slot only
//! through `&mut Pkt`. So at most one `&mut` to a slot exists at a time, on whichever thread
//! holds the handle. A handle carries its pool's id, checked on every access, so a handle can
//! never reach into another pool's memory. Dropping a `Pkt` without [`Pool::free`] leaks its
//! slot (safe, and counted: [`Pool::available`] shrinks); the data plane frees every packet it
//! drops, and the tests check that no slot is lost.
//!
//! Slot layout: `HEADROOM` bytes in front of the frame so a VLAN tag (or more) can be pushed
//! without moving the payload, then up to [`MAX_FRAME`] bytes of frame. Per-packet metadata
//! ([`Meta`]) is kept in a parallel array, out of the frame's cache lines.
//!
//! **Where a frame lies in its slot.** Frames the pool places ([`Pool::place`]: copies into
//! a slot by [`Pool::alloc_frame`], the AF_PACKET backend, the benchmark's generator) start
//! [`HEADROOM`] plus 0–15 cache lines in, by the slot's index (its *colour*). Why: slots are
//! 2 KiB apart, so a frame at the same offset in every slot has its first line in one of only
//! two of the L1 cache's 64 sets (and 64 of the L2's 2,048): 24 lines of L1 for all the
//! headers in flight, where a vector alone has 256. Each stage that read a vector's headers
//! (demux, input, forward) then missed L1 on every one (callgrind's cache simulation: about
//! one miss per packet per stage), and with 100 VRs the headers that waited in a ring missed
//! L2 too. Sixteen colours spread the first lines over 32 L1 sets and 1,024 L2 sets. A frame
//! too long for its colour (over 960 bytes) starts at [`HEADROOM`]; frames the kernel writes
//! (AF_XDP) lie where the kernel puts them.
//!
//! The slot region is one page-aligned allocation of `capacity × SLOT_SIZE` bytes, because
//! an AF_XDP UMEM must start on a page and be cut into equal chunks: registered as is, slot
//! `i` is chunk `i` at UMEM offset `i × SLOT_SIZE`, and the kernel writes received frames
//! straight into slots. It comes from `calloc` (through `std::alloc` with a small alignment,
//! over-allocated by a page and aligned by hand) rather than an aligned allocation, which
//! the standard allocator would zero with a `memset`: large pools get fresh zeroed pages
//! from the OS. Every page is then backed at once (`MADV_POPULATE_WRITE`), so that a
//! slot's first use never takes a page fault on the hot path. A region of 2 MiB or more
//! starts on a 2 MiB boundary and is advised as transparent huge pages (`MADV_HUGEPAGE`)
//! before it is backed: with 100 VRs about 11,500 slots (23 MiB) circulate through the
//! rings, 5,800 small pages against 12 huge ones, and a frame whose page is not in the TLB
//! costs a page walk on top of its cache miss.
//!
//! # Lending slots to a backend
//!
//! A backend that hands slots to someone outside Rust's type system (the kernel's AF_XDP
//! rings) converts the handle with [`Pool::into_raw`]: the slot stays allocated (not in
//! the free list) and is owned by whoever holds the index. Nothing in the pool touches a
//! slot held raw, so the holder may let the kernel write it through [`Pool::region`]. The
//! holder turns the index back into a handle with the `unsafe` [`Pool::from_raw`] exactly
//! once — when the kernel gives the slot back — and sets where the frame lies with
//! [`Pool::set_received`]. A raw index that is never turned back is a leaked slot, as for
//! a dropped `Pkt`.

use core::cell::UnsafeCell;
use core::ptr::NonNull;
use std::alloc::Layout;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crossbeam_queue::ArrayQueue;

/// Bytes per slot.
pub const SLOT_SIZE: usize = 2048;
/// Bytes kept free in front of a received frame (room to push VLAN tags).
pub const HEADROOM: usize = 128;
/// Largest frame a slot holds (a 1518-byte frame with two tags fits with room to spare).
pub const MAX_FRAME: usize = SLOT_SIZE - HEADROOM;
/// Shortest frame the data plane transmits: IEEE 802.3's 64 bytes less the FCS. Shorter
/// ones are padded with zeros as they are staged for a port.
pub const MIN_FRAME: u16 = 60;
/// Colours a placed frame may take (see the module docs): 0 to `COLOURS - 1` cache lines
/// after [`HEADROOM`].
const COLOURS: u32 = 16;
/// A cache line.
const LINE: usize = 64;
/// Longest frame placed at its slot's colour; longer ones start at [`HEADROOM`].
pub const COLOURED_FRAME: usize = MAX_FRAME - (COLOURS as usize - 1) * LINE;
/// Alignment of the slot region (a page: what an AF_XDP UMEM needs).
const REGION_ALIGN: usize = 4096;
/// A transparent huge page (x86-64, arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

static NEXT_POOL_ID: AtomicU32 = AtomicU32::new(1);

/// Ownership of one pool slot. Not `Clone`: whoever holds it may read and write the slot.
#[derive(Debug, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct Pkt {
    idx: u32,
    pool: u32,
}

impl Pkt {
    /// The slot index (for logs and tests).
    #[inline]
    pub fn index(&self) -> u32 {
        self.idx
    }

    /// Pool id and index in one word (see [`Pool::check`]).
    #[inline(always)]
    fn key(&self) -> u64 {
        u64::from(self.idx) | u64::from(self.pool) << 32
    }
}

/// What the data plane knows about a packet besides its bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// Offset of the frame's first byte in the slot.
    pub off: u16,
    /// Frame length in bytes.
    pub len: u16,
    /// Port the frame arrived on; after forwarding, the port it leaves by.
    pub port: u16,
    /// VIF (index within its VR) the frame arrived on; after forwarding, the egress VIF.
    pub vif: u16,
    /// Virtual router the frame was demultiplexed to.
    pub vr: u16,
    /// Offset of the L3 header from the frame start (after any VLAN tags).
    pub l3: u8,
    /// L3 class found by demux (see `demux::Class`), with [`crate::flow::L2_GROUP`] set if
    /// the frame was sent to a link-layer broadcast or multicast address.
    pub class: u8,
}

#[repr(C, align(64))]
struct Slot(UnsafeCell<[u8; SLOT_SIZE]>);

const _: () = assert!(core::mem::size_of::<Slot>() == SLOT_SIZE);

/// The slot region: `len` slots starting on a page boundary inside a zeroed allocation.
struct Region {
    slots: NonNull<Slot>,
    len: usize,
    /// What was allocated (the region lies inside, `REGION_ALIGN`-aligned).
    alloc: NonNull<u8>,
    layout: Layout,
}

impl Region {
    fn new(len: usize) -> Region {
        let slot_bytes = len.checked_mul(SLOT_SIZE).expect("pool size overflows");
        // A region of a huge page or more starts on one, so that it can be backed by huge
        // pages (see the module doc); a smaller one on a page.
        let align = if slot_bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            REGION_ALIGN
        };
        let bytes = slot_bytes
            .checked_next_multiple_of(align)
            .and_then(|b| b.checked_add(align))
            .expect("pool size overflows");
        // Alignment 16 keeps `alloc_zeroed` on `calloc`; the extra `align` bytes leave room
        // to align by hand, and the rounding up makes every page the region touches (and
        // that the kernel pins when it is registered) part of the allocation.
        let layout = Layout::from_size_align(bytes, 16).expect("pool layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(alloc) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout);
        };
        let pad = raw.align_offset(align);
        // SAFETY: `pad < align`, and the allocation has `align` bytes beyond the region's
        // rounded-up size, so the region stays inside it.
        let start = unsafe { raw.add(pad) };
        // The rounded-up slots, without the room to align.
        let backed = bytes - align;
        if align == HUGE_PAGE {
            advise_huge(start, backed);
        }
        populate(start, backed);
        Region {
            // SAFETY: inside a non-null allocation; page alignment is above Slot's 64.
            slots: unsafe { NonNull::new_unchecked(start.cast::<Slot>()) },
            len,
            alloc,
            layout,
        }
    }

    #[inline(always)]
    fn slots(&self) -> &[Slot] {
        // SAFETY: `len` initialised (zeroed) slots live at `slots` for as long as `self`;
        // a slot is bytes in an UnsafeCell, for which all-zero is a valid value and shared
        // references permit writes through the cell.
        unsafe { core::slice::from_raw_parts(self.slots.as_ptr(), self.len) }
    }
}

/// Ask the kernel to back `[start, start + bytes)` (huge-page aligned, whole huge pages)
/// with transparent huge pages. Why: the slots in circulation span tens of MiB with many
/// VRs (every ring's waiting packets), and with 4 KiB pages each frame the worker touches
/// may need a page walk; 2 MiB pages cut the TLB entries needed by 512. Refusal (THP off,
/// not built in) is harmless: the pages stay 4 KiB.
fn advise_huge(start: *mut u8, bytes: usize) {
    // SAFETY: the range lies inside the allocation `Region::new` just made; the advice
    // changes only how it is backed, never its contents.
    unsafe { libc::madvise(start.cast(), bytes, libc::MADV_HUGEPAGE) };
}

/// Back every page of `[start, start + bytes)` now (`start` page-aligned, `bytes` whole
/// pages), so that no slot's first use — on a worker's or a generator's hot path — takes a
/// page fault. Why: a fault costs about 2 µs per 4 KiB page in the VMs we test on, and the
/// in-process tester, drawing fresh slots while its DUT was stalled, lost 17 ms of sending
/// to them (up to 40,000 frames at 2 Mpps counted as missed).
fn populate(start: *mut u8, bytes: usize) {
    // SAFETY: the range lies inside the allocation `Region::new` just made, read-write.
    let rc = unsafe { libc::madvise(start.cast(), bytes, libc::MADV_POPULATE_WRITE) };
    if rc == 0 {
        return;
    }
    let e = std::io::Error::last_os_error();
    // EINVAL: a kernel before 5.14 does not know the advice; write to every page instead
    // (zeros over zeros: only the backing changes).
    assert!(
        e.raw_os_error() == Some(libc::EINVAL),
        "backing a {} MiB packet pool with memory: {e}",
        bytes >> 20
    );
    for off in (0..bytes).step_by(REGION_ALIGN) {
        // SAFETY: `off < bytes`, inside the allocation.
        unsafe { start.add(off).write_volatile(0) };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, freed once.
        unsafe { std::alloc::dealloc(self.alloc.as_ptr(), self.layout) };
    }
}

/// A fixed set of packet slots shared by ports, workers and the control plane.
pub struct Pool {
    id: u32,
    /// `id << 32`: a handle of this pool has `key() - tag` = its index.
    tag: u64,
    slots: Region,
    meta: Box<[UnsafeCell<Meta>]>,
    free: ArrayQueue<u32>,
}

// SAFETY: slot and metadata contents are only reached through a `Pkt`, which is unique per
// slot (not Clone, created only from the free queue); `&Pkt` gives shared access and
// `&mut Pkt` exclusive access, so the usual borrow rules hold per slot across threads.
unsafe impl Sync for Pool {}
// SAFETY: as above; the pool owns plain bytes (its region is an allocation it alone frees).
unsafe impl Send for Pool {}

impl core::fmt::Debug for Pool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pool")
            .field("id", &self.id)
            .field("capacity", &self.capacity())
            .field("available", &self.available())
            .finish()
    }
}

impl Pool {
    /// A pool of `capacity` slots, all free, in one page-aligned region (see the module
    /// docs), zeroed and backed by memory before it returns (1–4 ms per 2 MiB in a VM
    /// whose host backs pages on first touch).
    ///
    /// Panics if `capacity` is 0 or above 2³¹.
    pub fn new(capacity: usize) -> Arc<Pool> {
        assert!(
            capacity > 0 && capacity <= 1 << 31,
            "pool capacity {capacity} out of range"
        );
        let slots = Region::new(capacity);
        let meta = (0..capacity)
            .map(|_| UnsafeCell::new(Meta::default()))
            .collect();
        let free = ArrayQueue::new(capacity);
        for i in 0..capacity as u32 {
            // Cannot fail: the queue has room for every slot.
            let _ = free.push(i);
        }
        let id = NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed);
        Arc::new(Pool {
            id,
            tag: u64::from(id) << 32,
            slots,
            meta,
            free,
        })
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len
    }

    /// Slots currently free.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Take a free slot. Its metadata is reset to an empty frame at [`HEADROOM`].
    #[inline]
    pub fn alloc(&self) -> Option<Pkt> {
        let idx = self.free.pop()?;
        let mut p = Pkt { idx, pool: self.id };
        *self.meta_mut(&mut p) = Meta {
            off: HEADROOM as u16,
            ..Meta::default()
        };
        Some(p)
    }

    /// Where [`Pool::alloc_frame`] and the backends that copy frames put a frame of `len`
    /// bytes in `p`'s slot: [`HEADROOM`] plus the slot's colour in cache lines if the frame
    /// is at most [`COLOURED_FRAME`] bytes long, else [`HEADROOM`] (see the module docs).
    /// Depends only on the slot and `len`, so a frame rewritten in its slot stays put.
    #[inline(always)]
    pub fn place(&self, p: &Pkt, len: usize) -> usize {
        if len <= COLOURED_FRAME {
            colour_offset(p.idx)
        } else {
            HEADROOM
        }
    }

    /// Take a free slot and copy `frame` into it (at [`Pool::place`]).
    ///
    /// `None` if the pool is empty or the frame is longer than [`MAX_FRAME`].
    pub fn alloc_frame(&self, frame: &[u8]) -> Option<Pkt> {
        if frame.len() > MAX_FRAME {
            return None;
        }
        let mut p = self.alloc()?;
        self.set_frame(&mut p, frame);
        Some(p)
    }

    /// Return a slot to the pool.
    #[inline]
    pub fn free(&self, p: Pkt) {
        self.check(&p);
        // Cannot fail: there are never more handles than slots.
        let _ = self.free.push(p.idx);
    }

    /// Return every packet in `v` to the pool.
    pub fn free_all(&self, v: &mut crate::PktVec) {
        for p in v.drain(..) {
            self.free(p);
        }
    }

    /// Whether `p` is a handle of this pool (every other method panics on another pool's).
    #[inline]
    pub fn owns(&self, p: &Pkt) -> bool {
        p.key().wrapping_sub(self.tag) < self.slots.len as u64
    }

    /// Panics unless `p` is a handle of this pool. One subtraction and compare (this runs
    /// on every access, a dozen times per forwarded packet): for another pool's handle
    /// `key - tag` is at least 2³², above any capacity.
    #[inline(always)]
    fn check(&self, p: &Pkt) {
        assert!(self.owns(p), "packet handle from another pool");
    }
    /// Give up the handle and keep the slot allocated: the caller now owns slot `index`
    /// through the returned index alone (see "Lending slots to a backend" in the module
    /// docs). Until [`Pool::from_raw`] turns it back, the pool never touches the slot, and
    /// whoever holds the index may let others (the kernel) read or write its bytes through
    /// [`Pool::region`].
    ///
    /// Panics if `p` comes from another pool.
    #[inline]
    pub fn into_raw(&self, p: Pkt) -> u32 {
        self.check(&p);
        p.idx
    }

    /// Turn a slot index obtained from [`Pool::into_raw`] back into its handle. The frame
    /// metadata is left as it was; set it with [`Pool::set_received`] when the bytes are new.
    ///
    /// Panics if `idx` is not a slot of this pool.
    ///
    /// # Safety
    ///
    /// The caller must own slot `idx` as a raw index: it came from `into_raw` on this pool
    /// and has not been turned back since, so no other [`Pkt`] for it exists. Whoever
    /// wrote the slot meanwhile (the kernel) must be done with it.
    #[inline]
    pub unsafe fn from_raw(&self, idx: u32) -> Pkt {
        assert!((idx as usize) < self.slots.len, "slot {idx} out of range");
        Pkt { idx, pool: self.id }
    }

    /// The slot region: its first byte and its length (`capacity × SLOT_SIZE`). Slot `i`
    /// starts `i × SLOT_SIZE` bytes in; the start is page-aligned (4096). For
    /// registering the region with the kernel (an AF_XDP UMEM); write only slots held raw.
    pub fn region(&self) -> (*mut u8, usize) {
        (
            self.slots.slots.as_ptr().cast::<u8>(),
            self.slots.len * SLOT_SIZE,
        )
    }

    /// Record that the slot holds a freshly received frame of `len` bytes starting `off`
    /// bytes into the slot (where the kernel put it). The other metadata fields are reset.
    ///
    /// Panics if the frame does not fit in the slot.
    #[inline]
    pub fn set_received(&self, p: &mut Pkt, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= SLOT_SIZE),
            "frame of {len} bytes at offset {off} overruns the slot"
        );
        *self.meta_mut(p) = Meta {
            off: off as u16,
            len: len as u16,
            ..Meta::default()
        };
    }

    /// The packet's metadata.
    #[inline]
    pub fn meta<'a>(&'a self, p: &'a Pkt) -> &'a Meta {
        self.check(p);
        // SAFETY: `check` bounds the index; `&Pkt` means no `&mut` to this slot exists.
        unsafe { &*self.meta.get_unchecked(p.idx as usize).get() }
    }

    /// The packet's metadata, writable.
    #[inline]
    pub fn meta_mut<'a>(&'a self, p: &'a mut Pkt) -> &'a mut Meta {
        self.check(p);
        // SAFETY: `check` bounds the index; `&mut Pkt` is the only handle to this slot.
        unsafe { &mut *self.meta.get_unchecked(p.idx as usize).get() }
    }

    /// The frame's bytes, for as long as the handle is held (so not past
    /// [`Pool::free`], after which the slot's next owner may write it):
    ///
    /// ```
    /// let pool = vrhost_dataplane::Pool::new(1);
    /// let p = pool.alloc_frame(&[1, 2, 3]).unwrap();
    /// let f = pool.frame(&p);
    /// assert_eq!(f, [1, 2, 3]);
    /// pool.free(p);
    /// ```
    ///
    /// ```compile_fail,E0505
    /// let pool = vrhost_dataplane::Pool::new(1);
    /// let p = pool.alloc_frame(&[1, 2, 3]).unwrap();
    /// let f = pool.frame(&p);
    /// pool.free(p);
    /// assert_eq!(f, [1, 2, 3]);
    /// ```
    ///
    /// The same holds for [`Pool::meta`] and [`Pool::slot`].
    #[inline]
    pub fn frame<'a>(&'a self, p: &'a Pkt) -> &'a [u8] {
        let m = *self.meta(p);
        // SAFETY: bounded by `meta`'s check; shared access as for `meta`.
        let slot = unsafe { &*self.slots.slots().get_unchecked(p.idx as usize).0.get() };
        &slot[m.off as usize..m.off as usize + m.len as usize]
    }

    /// The frame's bytes, writable.
    #[inline]
    pub fn frame_mut<'a>(&'a self, p: &'a mut Pkt) -> &'a mut [u8] {
        let (m, slot) = self.slot_mut(p);
        &mut slot[m.off as usize..m.off as usize + m.len as usize]
    }

    /// Metadata and the whole slot (headroom included), for operations that move the frame's
    /// start, such as pushing or popping a VLAN tag.
    #[inline]
    pub fn slot_mut<'a>(&'a self, p: &'a mut Pkt) -> (&'a mut Meta, &'a mut [u8; SLOT_SIZE]) {
        self.check(p);
        let i = p.idx as usize;
        // SAFETY: bounded by `check`; `&mut Pkt` is the only handle to this slot, and the
        // metadata and bytes are separate allocations, so the two `&mut` do not overlap.
        unsafe {
            (
                &mut *self.meta.get_unchecked(i).get(),
                &mut *self.slots.slots().get_unchecked(i).0.get(),
            )
        }
    }

    /// Metadata and the whole slot, read-only (one check for both).
    #[inline(always)]
    pub fn slot<'a>(&'a self, p: &'a Pkt) -> (&'a Meta, &'a [u8; SLOT_SIZE]) {
        self.check(p);
        let i = p.idx as usize;
        // SAFETY: bounded by `check`; `&Pkt` means no `&mut` to this slot exists.
        unsafe {
            (
                &*self.meta.get_unchecked(i).get(),
                &*self.slots.slots().get_unchecked(i).0.get(),
            )
        }
    }

    /// Replace the frame with `frame`, placed at [`Pool::place`].
    ///
    /// Panics if `frame` is longer than [`MAX_FRAME`].
    #[inline]
    pub fn set_frame(&self, p: &mut Pkt, frame: &[u8]) {
        assert!(frame.len() <= MAX_FRAME, "frame of {} bytes", frame.len());
        let at = self.place(p, frame.len());
        let (m, slot) = self.slot_mut(p);
        m.off = at as u16;
        m.len = frame.len() as u16;
        slot[at..at + frame.len()].copy_from_slice(frame);
    }

    /// Hint the CPU to start loading the packet's first cache line, at `Meta::off`: for a
    /// packet whose metadata is in the cache (read or written lately).
    #[inline(always)]
    pub fn prefetch(&self, p: &Pkt) {
        let i = p.idx as usize;
        if let (Some(s), Some(m)) = (self.slots.slots().get(i), self.meta.get(i)) {
            // SAFETY: `&Pkt` means no `&mut` to this slot's metadata exists.
            let off = usize::from(unsafe { (*m.get()).off });
            prefetch(s.0.get().cast::<u8>().wrapping_add(off));
        }
    }

    /// Hint the CPU to start loading the packet's metadata and first cache line: for a
    /// vector that waited in a ring long enough to leave the cache. The frame's line is
    /// taken to be where the pool places a frame of up to [`COLOURED_FRAME`] bytes (reading
    /// `Meta::off` would wait for the very miss this is meant to hide); for a longer frame,
    /// or one the kernel placed, the hint loads a line that may not be used.
    #[inline(always)]
    pub fn prefetch_all(&self, p: &Pkt) {
        let i = p.idx as usize;
        if let (Some(s), Some(m)) = (self.slots.slots().get(i), self.meta.get(i)) {
            prefetch(m.get().cast::<u8>());
            prefetch(s.0.get().cast::<u8>().wrapping_add(colour_offset(p.idx)));
        }
    }
}

/// [`HEADROOM`] plus slot `idx`'s colour in cache lines. The colour mixes the index's low
/// bits (neighbouring slots differ) with bits 6 and up (slots 64 apart, which share their
/// L2 sets' other address bits on a huge page, differ too).
#[inline(always)]
fn colour_offset(idx: u32) -> usize {
    // `((idx >> 1) ^ (idx >> 6)) % COLOURS * LINE`, with the shifts folded into the mask.
    const MASK: u32 = (COLOURS - 1) * LINE as u32;
    const _: () = assert!(COLOURS.is_power_of_two() && LINE == 64);
    HEADROOM + (((idx << 5) ^ idx) & MASK) as usize
}

use crate::prefetch::read as prefetch;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_write_free_roundtrip() {
        let pool = Pool::new(4);
        let mut a = pool.alloc_frame(&[1, 2, 3]).unwrap();
        assert_eq!(pool.frame(&a), &[1, 2, 3]);
        pool.frame_mut(&mut a)[0] = 9;
        assert_eq!(pool.frame(&a), &[9, 2, 3]);
        assert_eq!(pool.meta(&a).off as usize, pool.place(&a, 3));
        assert_eq!(pool.available(), 3);
        pool.free(a);
        assert_eq!(pool.available(), 4);
    }

    /// Small frames' first lines spread over 32 of L1's 64 sets and 1,024 of a 2 MiB L2's
    /// 2,048 (at [`HEADROOM`] in every slot they would take 2 and 64); longer frames start
    /// at [`HEADROOM`]; every placed frame fits its slot and reads back intact.
    #[test]
    fn placed_frames_spread_over_the_cache_sets() {
        // 8 MiB of slots: the region starts on a huge page, as an L2 set index assumes.
        let pool = Pool::new(4096);
        let (base, _) = pool.region();
        let (mut l1, mut l2) = (
            std::collections::HashSet::new(),
            std::collections::HashSet::new(),
        );
        let small = [0x5a; 60];
        let mut held = Vec::new();
        while let Some(p) = pool.alloc_frame(&small) {
            assert_eq!(pool.frame(&p), &small);
            let at = pool.frame(&p).as_ptr() as usize - base as usize;
            assert_eq!(at % LINE, 0, "slot {} frame at {at}", p.index());
            l1.insert(at / LINE % 64);
            l2.insert(at / LINE % 2048);
            held.push(p);
        }
        assert_eq!((l1.len(), l2.len()), (32, 1024));
        for p in held.iter_mut() {
            let fits = vec![0xa5; COLOURED_FRAME];
            pool.set_frame(p, &fits);
            assert_eq!(pool.frame(p), &fits[..]);
            let m = *pool.meta(p);
            assert_eq!(usize::from(m.off), pool.place(p, COLOURED_FRAME));
            assert!(usize::from(m.off) + usize::from(m.len) <= SLOT_SIZE);
            let long = vec![0x3c; COLOURED_FRAME + 1];
            pool.set_frame(p, &long);
            assert_eq!(pool.frame(p), &long[..]);
            assert_eq!(usize::from(pool.meta(p).off), HEADROOM);
        }
        for p in held {
            pool.free(p);
        }
        // The masked form of the colour is the one the module docs describe.
        for idx in 0..1 << 16 {
            let plain = HEADROOM + LINE * (((idx >> 1) ^ (idx >> 6)) % COLOURS) as usize;
            assert_eq!(colour_offset(idx), plain, "slot {idx}");
        }
    }

    #[test]
    fn exhaustion_is_none_not_panic() {
        let pool = Pool::new(2);
        let a = pool.alloc().unwrap();
        let b = pool.alloc().unwrap();
        assert!(pool.alloc().is_none());
        assert!(pool.alloc_frame(&[0; MAX_FRAME + 1]).is_none());
        pool.free(a);
        pool.free(b);
    }

    #[test]
    #[should_panic(expected = "another pool")]
    fn foreign_handle_is_refused() {
        let p1 = Pool::new(1);
        let p2 = Pool::new(1);
        let a = p1.alloc().unwrap();
        let _ = p2.frame(&a);
    }

    /// Every page of the region is in memory as soon as the pool exists (`mincore`), so
    /// that no slot's first use takes a page fault.
    #[test]
    fn every_page_is_backed_before_first_use() {
        let pool = Pool::new(5000);
        let (base, len) = pool.region();
        let pages = len.div_ceil(REGION_ALIGN);
        let mut resident = vec![0u8; pages];
        // SAFETY: `base` is page-aligned and the region's pages lie in one allocation;
        // mincore writes one byte per page into `resident`, which has room for them.
        let rc = unsafe { libc::mincore(base.cast(), len, resident.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        let missing = resident.iter().filter(|r| *r & 1 == 0).count();
        assert_eq!(missing, 0, "{missing} of {pages} pages not backed");
    }

    /// The `AnonHugePages` of the mapping (in `/proc/self/smaps`) that holds `addr`, in KiB.
    fn anon_huge_kib(addr: usize) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = range.split_once('-')
                && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                inside = (a..b).contains(&addr);
            } else if inside && let Some(v) = line.strip_prefix("AnonHugePages:") {
                return v.trim().trim_end_matches("kB").trim().parse().ok();
            }
        }
        None
    }

    #[test]
    fn a_large_region_starts_on_a_huge_page_and_is_backed_by_them() {
        // 8 MiB of slots: four huge pages.
        let pool = Pool::new(4096);
        let (base, len) = pool.region();
        assert_eq!(base as usize % HUGE_PAGE, 0, "region at {base:p}");
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if thp.is_empty() || thp.contains("[never]") {
            eprintln!("transparent huge pages are off here ({thp:?}): only the alignment checked");
            return;
        }
        let huge = anon_huge_kib(base as usize).expect("the region's mapping in /proc/self/smaps");
        // The kernel may fall back to small pages when it has no free 2 MiB block; it must
        // not do so for all of them on a machine that has memory to spare.
        assert!(
            huge >= (HUGE_PAGE >> 10) as u64,
            "{huge} KiB of the {} KiB region on huge pages",
            len >> 10
        );
    }

    #[test]
    fn region_is_page_aligned_zeroed_and_covers_every_slot() {
        for cap in [1, 3, 64] {
            let pool = Pool::new(cap);
            let (base, len) = pool.region();
            assert_eq!(base as usize % REGION_ALIGN, 0);
            assert_eq!(len, cap * SLOT_SIZE);
            // SAFETY: the region is `len` initialised bytes; no slot is written meanwhile.
            let bytes = unsafe { core::slice::from_raw_parts(base, len) };
            assert!(bytes.iter().all(|b| *b == 0));
            // Slot i is at i × SLOT_SIZE: what `frame_mut` writes shows up there.
            let mut ps: Vec<_> = (0..cap).map(|_| pool.alloc().unwrap()).collect();
            for p in &mut ps {
                pool.set_frame(p, &[p.index() as u8 + 1; 4]);
            }
            for p in &ps {
                let at = p.index() as usize * SLOT_SIZE + pool.place(p, 4);
                // SAFETY: reading bytes no `&mut` covers right now.
                let b = unsafe { core::slice::from_raw_parts(base.add(at), 4) };
                assert_eq!(b, &[p.index() as u8 + 1; 4]);
            }
            for p in ps {
                pool.free(p);
            }
        }
    }

    #[test]
    fn raw_roundtrip_keeps_the_slot_allocated_and_sees_outside_writes() {
        let pool = Pool::new(4);
        let p = pool.alloc().unwrap();
        let idx = pool.into_raw(p);
        // Held raw: not free, not handed out again.
        assert_eq!(pool.available(), 3);
        let others: Vec<_> = (0..3).map(|_| pool.alloc().unwrap()).collect();
        assert!(others.iter().all(|o| o.index() != idx));
        assert!(pool.alloc().is_none());
        // "The kernel" writes a frame 256 bytes into the slot, through the region.
        let (base, _) = pool.region();
        let frame: Vec<u8> = (0..60u8).collect();
        // SAFETY: slot `idx` is held raw by this test; nothing else references it.
        unsafe {
            core::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                base.add(idx as usize * SLOT_SIZE + 256),
                frame.len(),
            )
        };
        // SAFETY: `idx` came from `into_raw` above and was not turned back since.
        let mut p = unsafe { pool.from_raw(idx) };
        assert_eq!(p.index(), idx);
        pool.meta_mut(&mut p).vr = 7;
        pool.set_received(&mut p, 256, frame.len());
        assert_eq!(pool.frame(&p), &frame[..]);
        assert_eq!(
            *pool.meta(&p),
            Meta {
                off: 256,
                len: 60,
                ..Meta::default()
            }
        );
        pool.free(p);
        for o in others {
            pool.free(o);
        }
        assert_eq!(pool.available(), 4);
    }

    #[test]
    fn set_received_accepts_a_frame_ending_at_the_slot_end() {
        let pool = Pool::new(1);
        let mut p = pool.alloc().unwrap();
        pool.set_received(&mut p, 256, SLOT_SIZE - 256);
        assert_eq!(pool.frame(&p).len(), SLOT_SIZE - 256);
        pool.free(p);
    }

    #[test]
    #[should_panic(expected = "overruns the slot")]
    fn set_received_refuses_a_frame_past_the_slot() {
        let pool = Pool::new(1);
        let mut p = pool.alloc().unwrap();
        pool.set_received(&mut p, 256, SLOT_SIZE - 255);
    }

    #[test]
    #[should_panic(expected = "another pool")]
    fn into_raw_refuses_a_foreign_handle() {
        let p1 = Pool::new(1);
        let p2 = Pool::new(1);
        let a = p1.alloc().unwrap();
        let _ = p2.into_raw(a);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn from_raw_refuses_an_index_past_the_pool() {
        let pool = Pool::new(2);
        // SAFETY: never reached; the index is checked first.
        let _ = unsafe { pool.from_raw(2) };
    }
}
