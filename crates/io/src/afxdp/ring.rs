//! The AF_XDP rings: single-producer single-consumer queues in memory mapped from a socket.
//!
//! Each socket has four: fill and tx (we produce, the kernel consumes), rx and completion
//! (the kernel produces, we consume). A ring is a power-of-two array of entries — UMEM
//! addresses (`u64`) for fill/completion, [`xdp_desc`] for rx/tx — plus a producer index, a
//! consumer index and a flags word, each at an offset the kernel reports
//! (`XDP_MMAP_OFFSETS`). Indexes are free-running `u32`s; an entry lives at `index & mask`.
//!
//! As in xdpilone's `xsk/ring.rs` and libxdp's `xsk.h`, each side keeps a cached copy of
//! the other side's index and rereads the shared one only when the cache says there is not
//! enough room or data, so a burst costs one shared load and one shared store, not one per
//! entry. The API is reserve → write → submit for [`Producer`] and peek → read → release
//! for [`Consumer`]; the memory ordering is documented on each method.
//!
//! Why two types over one mapping: a fill ring must never be read as if it were a
//! completion ring; the type says which end of the ring this process holds.

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering, fence};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

pub(crate) use libc::xdp_desc as Desc;

/// One mapped ring, without a direction.
struct Mapping<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    size: u32,
    mask: u32,
    base: NonNull<libc::c_void>,
    len: usize,
    _t: PhantomData<T>,
}

// SAFETY: the mapping is plain shared memory owned by this value (unmapped on drop); the
// indexes are atomics. Moving the owner to another thread is fine; it is not `Sync`, so
// one thread at a time drives our end, which is what the SPSC protocol needs.
unsafe impl<T: Send> Send for Mapping<T> {}

impl<T: Copy> Mapping<T> {
    /// Map the ring of `size` entries found at page offset `pgoff` of socket `fd`, laid out
    /// as `off` says.
    fn new(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        off: &libc::xdp_ring_offset,
        size: u32,
    ) -> io::Result<Mapping<T>> {
        debug_assert!(size.is_power_of_two());
        let len = off.desc as usize + size as usize * size_of::<T>();
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel checks the offset
        // names a ring that exists and that `len` does not exceed it.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let at = |o: u64| {
            // SAFETY: the kernel's offsets lie inside the `len` bytes just mapped.
            unsafe { NonNull::new_unchecked(base.cast::<u8>().add(o as usize)) }
        };
        Ok(Mapping {
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            descs: at(off.desc).cast(),
            size,
            mask: size - 1,
            // SAFETY: mmap succeeded, so `base` is not null.
            base: unsafe { NonNull::new_unchecked(base) },
            len,
            _t: PhantomData,
        })
    }

    #[inline(always)]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: a u32 index the kernel keeps 4-byte aligned in the live mapping.
        unsafe { self.producer.as_ref() }
    }

    #[inline(always)]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    #[inline(always)]
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.flags.as_ref() }
    }

    #[inline(always)]
    fn slot(&self, index: u32) -> *mut T {
        // SAFETY: `index & mask < size`, inside the mapped descriptor array.
        unsafe { self.descs.as_ptr().add((index & self.mask) as usize) }
    }
}

impl<T> Drop for Mapping<T> {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped; no reference into it outlives self.
        unsafe { libc::munmap(self.base.as_ptr(), self.len) };
    }
}

/// Our producing end of a ring (fill, tx).
pub(crate) struct Producer<T> {
    map: Mapping<T>,
    /// Next index we will write (equal to the shared producer after `submit`).
    prod: u32,
    /// Last consumer index seen.
    cons: u32,
}

impl<T: Copy> Producer<T> {
    /// Map the producing end; see [`Mapping::new`].
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        off: &libc::xdp_ring_offset,
        size: u32,
    ) -> io::Result<Producer<T>> {
        let map = Mapping::new(fd, pgoff, off, size)?;
        let prod = map.producer().load(Ordering::Relaxed);
        let cons = map.consumer().load(Ordering::Acquire);
        Ok(Producer { map, prod, cons })
    }

    /// Entries in the ring.
    pub(crate) fn size(&self) -> u32 {
        self.map.size
    }

    /// How many of `want` entries may be written now (from index `self.prod` on).
    ///
    /// Rereads the consumer index only if the cached one leaves too little room; that load
    /// is `Acquire`, pairing with the kernel's release of the consumer, so the kernel has
    /// finished reading every entry it released before we overwrite it.
    #[inline]
    pub(crate) fn reserve(&mut self, want: u32) -> u32 {
        let free = self.map.size - self.prod.wrapping_sub(self.cons);
        if free >= want {
            return want;
        }
        self.cons = self.map.consumer().load(Ordering::Acquire);
        want.min(self.map.size - self.prod.wrapping_sub(self.cons))
    }

    /// Write entry `i` of the reserved run. `i` must be below what `reserve` granted.
    #[inline(always)]
    pub(crate) fn write(&mut self, i: u32, v: T) {
        // SAFETY: a reserved entry is ours until submitted; plain memory of type T.
        unsafe { self.map.slot(self.prod.wrapping_add(i)).write(v) };
    }

    /// Publish the first `n` reserved entries.
    ///
    /// The producer store is `Release`: the kernel's acquire of it sees the entries written.
    #[inline]
    pub(crate) fn submit(&mut self, n: u32) {
        self.prod = self.prod.wrapping_add(n);
        self.map.producer().store(self.prod, Ordering::Release);
    }

    /// Entries submitted that the kernel has not consumed yet (rereads its index).
    #[inline]
    pub(crate) fn pending(&mut self) -> u32 {
        self.cons = self.map.consumer().load(Ordering::Acquire);
        self.prod.wrapping_sub(self.cons)
    }

    /// Whether the kernel asked to be woken up (`XDP_RING_NEED_WAKEUP`) to process this ring.
    ///
    /// A `SeqCst` fence first orders our producer store before the flag load: the kernel
    /// sets the flag and then rechecks the ring, so one of the two sides sees the other's
    /// write and no entry is left unnoticed. One fence per burst, not per entry.
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        fence(Ordering::SeqCst);
        self.map.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// Our consuming end of a ring (rx, completion).
pub(crate) struct Consumer<T> {
    map: Mapping<T>,
    /// Next index we will read (equal to the shared consumer after `release`).
    cons: u32,
    /// Last producer index seen.
    prod: u32,
}

impl<T: Copy> Consumer<T> {
    /// Map the consuming end; see [`Mapping::new`].
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        pgoff: u64,
        off: &libc::xdp_ring_offset,
        size: u32,
    ) -> io::Result<Consumer<T>> {
        let map = Mapping::new(fd, pgoff, off, size)?;
        let cons = map.consumer().load(Ordering::Relaxed);
        let prod = map.producer().load(Ordering::Acquire);
        Ok(Consumer { map, cons, prod })
    }

    /// Entries in the ring.
    pub(crate) fn size(&self) -> u32 {
        self.map.size
    }

    /// How many of `want` entries may be read now (from index `self.cons` on).
    ///
    /// Rereads the producer index only if the cached one shows too few entries; that load
    /// is `Acquire`, pairing with the kernel's release of the producer, so the entries it
    /// published are visible.
    #[inline]
    pub(crate) fn peek(&mut self, want: u32) -> u32 {
        let avail = self.prod.wrapping_sub(self.cons);
        if avail >= want {
            return want;
        }
        self.prod = self.map.producer().load(Ordering::Acquire);
        want.min(self.prod.wrapping_sub(self.cons))
    }

    /// Read entry `i` of the peeked run. `i` must be below what `peek` granted.
    #[inline(always)]
    pub(crate) fn read(&self, i: u32) -> T {
        // SAFETY: a peeked entry was published by the kernel and is not reused before we
        // release it; plain memory of type T.
        unsafe { self.map.slot(self.cons.wrapping_add(i)).read() }
    }

    /// Hand the first `n` peeked entries back to the kernel.
    ///
    /// The consumer store is `Release`: our reads of the entries happen before the kernel
    /// may overwrite them.
    #[inline]
    pub(crate) fn release(&mut self, n: u32) {
        self.cons = self.cons.wrapping_add(n);
        self.map.consumer().store(self.cons, Ordering::Release);
    }
}
