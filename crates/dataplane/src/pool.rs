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

use core::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crossbeam_queue::ArrayQueue;

/// Bytes per slot.
pub const SLOT_SIZE: usize = 2048;
/// Bytes kept free in front of a received frame (room to push VLAN tags).
pub const HEADROOM: usize = 128;
/// Largest frame a slot holds (a 1518-byte frame with two tags fits with room to spare).
pub const MAX_FRAME: usize = SLOT_SIZE - HEADROOM;

static NEXT_POOL_ID: AtomicU32 = AtomicU32::new(1);

/// Ownership of one pool slot. Not `Clone`: whoever holds it may read and write the slot.
#[derive(Debug, PartialEq, Eq)]
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
    /// L3 class found by demux (see `demux::Class`).
    pub class: u8,
}

#[repr(C, align(64))]
struct Slot(UnsafeCell<[u8; SLOT_SIZE]>);

/// A fixed set of packet slots shared by ports, workers and the control plane.
pub struct Pool {
    id: u32,
    slots: Box<[Slot]>,
    meta: Box<[UnsafeCell<Meta>]>,
    free: ArrayQueue<u32>,
}

// SAFETY: slot and metadata contents are only reached through a `Pkt`, which is unique per
// slot (not Clone, created only from the free queue); `&Pkt` gives shared access and
// `&mut Pkt` exclusive access, so the usual borrow rules hold per slot across threads.
unsafe impl Sync for Pool {}
// SAFETY: as above; the pool owns plain bytes.
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
    /// A pool of `capacity` slots, all free. Memory is zeroed lazily by the OS.
    ///
    /// Panics if `capacity` is 0 or above 2³¹.
    pub fn new(capacity: usize) -> Arc<Pool> {
        assert!(
            capacity > 0 && capacity <= 1 << 31,
            "pool capacity {capacity} out of range"
        );
        let slots = Box::<[Slot]>::new_zeroed_slice(capacity);
        // SAFETY: a slot is a byte array in an UnsafeCell; all-zero bytes are a valid value.
        let slots = unsafe { slots.assume_init() };
        let meta = (0..capacity)
            .map(|_| UnsafeCell::new(Meta::default()))
            .collect();
        let free = ArrayQueue::new(capacity);
        for i in 0..capacity as u32 {
            // Cannot fail: the queue has room for every slot.
            let _ = free.push(i);
        }
        Arc::new(Pool {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            slots,
            meta,
            free,
        })
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
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

    /// Take a free slot and copy `frame` into it (at [`HEADROOM`]).
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

    #[inline(always)]
    fn check(&self, p: &Pkt) {
        assert!(
            p.pool == self.id && (p.idx as usize) < self.slots.len(),
            "packet handle from another pool"
        );
    }

    /// The packet's metadata.
    #[inline]
    pub fn meta(&self, p: &Pkt) -> &Meta {
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

    /// The frame's bytes.
    #[inline]
    pub fn frame(&self, p: &Pkt) -> &[u8] {
        let m = *self.meta(p);
        // SAFETY: bounded by `meta`'s check; shared access as for `meta`.
        let slot = unsafe { &*self.slots.get_unchecked(p.idx as usize).0.get() };
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
                &mut *self.slots.get_unchecked(i).0.get(),
            )
        }
    }

    /// Replace the frame with `frame`, placed at [`HEADROOM`].
    ///
    /// Panics if `frame` is longer than [`MAX_FRAME`].
    #[inline]
    pub fn set_frame(&self, p: &mut Pkt, frame: &[u8]) {
        assert!(frame.len() <= MAX_FRAME, "frame of {} bytes", frame.len());
        let (m, slot) = self.slot_mut(p);
        m.off = HEADROOM as u16;
        m.len = frame.len() as u16;
        slot[HEADROOM..HEADROOM + frame.len()].copy_from_slice(frame);
    }

    /// Hint the CPU to start loading the packet's first cache line (at [`HEADROOM`]).
    #[inline(always)]
    pub fn prefetch(&self, p: &Pkt) {
        if let Some(s) = self.slots.get(p.idx as usize) {
            prefetch(s.0.get().cast::<u8>().wrapping_add(HEADROOM));
        }
    }

    /// Hint the CPU to start loading the packet's metadata and first cache line: for a
    /// vector that waited in a ring long enough to leave the cache.
    #[inline(always)]
    pub fn prefetch_all(&self, p: &Pkt) {
        if let Some(m) = self.meta.get(p.idx as usize) {
            prefetch(m.get().cast::<u8>());
        }
        self.prefetch(p);
    }
}

#[inline(always)]
fn prefetch(addr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults and reads nothing observable.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(addr.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

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
        assert_eq!(pool.meta(&a).off as usize, HEADROOM);
        assert_eq!(pool.available(), 3);
        pool.free(a);
        assert_eq!(pool.available(), 4);
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
}
