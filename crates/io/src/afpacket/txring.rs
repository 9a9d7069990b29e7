//! Transmit through a TPACKET_V3 tx ring: copy frames into ring slots, then one `send` per
//! burst.
//!
//! The ring is `frames` fixed-size slots, each a `tpacket3_hdr` then the frame at offset
//! [`DATA`] (the kernel's `tp_hdrlen - sizeof(sockaddr_ll)`, since `PACKET_TX_HAS_OFF` is not
//! used). Both sides walk it in order: user space fills the slot at its head when its
//! status is `TP_STATUS_AVAILABLE` and flips it to `TP_STATUS_SEND_REQUEST` (release); the
//! kick (`send(fd, NULL, 0, MSG_DONTWAIT)`) makes the kernel build an `sk_buff` for each
//! requested slot from its own head — pointing *into the ring* rather than copying the
//! payload — and the slot returns to `AVAILABLE` when that `sk_buff` is freed (by the
//! driver after transmission, or by a veth once the peer is done with it). A slot not yet
//! available means the ring is full: the burst stops there and the rest stays with the
//! caller.
//!
//! The pool slot is freed as soon as its bytes are in the ring. `PACKET_LOSS` is set so the
//! kernel discards a malformed slot (longer than the MTU) instead of stopping the ring on it
//! with `TP_STATUS_WRONG_FORMAT`. If the kick fails (the driver queue is full), the kernel
//! leaves the slot it could not send requested and retries it at the next kick, so nothing
//! is lost, but it waits for the next burst; see the module docs.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use vrhost_dataplane::{MAX_FRAME, PktVec, Pool};

use super::sys::{self, Mmap};

/// Bytes per ring slot.
pub(super) const FRAME: usize = 2048;
/// Offset of the frame in a slot: `TPACKET3_HDRLEN - sizeof(struct sockaddr_ll)`.
pub(super) const DATA: usize = libc::TPACKET3_HDRLEN - size_of::<libc::sockaddr_ll>();
/// Slots per ring block (the kernel allocates the ring block by block; a page holds two).
pub(super) const FRAMES_PER_BLOCK: usize = 2;

const _: () = assert!(DATA == 48 && DATA + MAX_FRAME <= FRAME);
const STATUS: usize = core::mem::offset_of!(libc::tpacket3_hdr, tp_status);
const LEN: usize = core::mem::offset_of!(libc::tpacket3_hdr, tp_len);
const SNAPLEN: usize = core::mem::offset_of!(libc::tpacket3_hdr, tp_snaplen);
const NEXT: usize = core::mem::offset_of!(libc::tpacket3_hdr, tp_next_offset);
/// Status bits meaning "the kernel still owns this slot".
const BUSY: u32 = libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING;

/// What one transmit call did.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sent {
    /// Packets taken from the front of the vector (and freed).
    pub(super) taken: usize,
    /// Failures other than a full queue: a failed system call, or a frame too long for a
    /// ring slot (taken and dropped).
    pub(super) errors: u64,
}

/// Whether an errno from a transmit call only means "full, try later".
#[inline]
pub(super) fn is_full(errno: i32) -> bool {
    errno == libc::EAGAIN || errno == libc::ENOBUFS || errno == libc::EINTR
}

/// A mapped tx ring and its head.
#[derive(Debug)]
pub(super) struct TxRing {
    map: Mmap,
    frames: usize,
    head: usize,
}

impl TxRing {
    /// `map` is the tx ring of a socket set up with `frames` slots of [`FRAME`] bytes.
    pub(super) fn new(map: Mmap, frames: usize) -> TxRing {
        assert!(frames > 0 && map.len() >= frames * FRAME);
        TxRing {
            map,
            frames,
            head: 0,
        }
    }

    /// Start of slot `i`.
    #[inline(always)]
    fn slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.frames);
        // Blocks hold a whole number of slots, so slot `i` is at `i * FRAME`.
        self.map.ptr().wrapping_add(i * FRAME)
    }

    #[inline(always)]
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: slot `i < frames` lies inside the mapping; it starts on a FRAME (2048)
        // boundary and `tp_status` is at a multiple of 4, so the word is aligned. The kernel
        // writes it concurrently, hence atomic access only; the reference lives no longer
        // than `&self`, which owns the mapping.
        unsafe { &*self.slot(i).add(STATUS).cast::<AtomicU32>() }
    }

    /// Copy packets from the front of `pkts` into the ring while slots are free and free
    /// them; [`TxRing::kick`] sends them.
    pub(super) fn queue(&mut self, pool: &Pool, pkts: &mut PktVec) -> Sent {
        let mut taken = 0;
        let mut errors = 0;
        for p in pkts.iter() {
            // Acquire: pairs with the kernel's barrier after it released the slot, so it is
            // done reading the old frame before we overwrite it.
            if self.status(self.head).load(Ordering::Acquire) & BUSY != 0 {
                break;
            }
            let frame = pool.frame(p);
            taken += 1;
            if frame.len() > FRAME - DATA {
                // Cannot happen for frames within MAX_FRAME; dropped (freed below), counted.
                errors += 1;
                continue;
            }
            let s = self.slot(self.head);
            // SAFETY: the slot is AVAILABLE, so the kernel neither reads nor writes it until
            // we request it below; `DATA + frame.len() <= FRAME` (checked above) keeps the
            // copy inside the slot; the header fields are 4-aligned words inside the slot;
            // nothing else references it.
            unsafe {
                core::ptr::copy_nonoverlapping(frame.as_ptr(), s.add(DATA), frame.len());
                s.add(LEN).cast::<u32>().write(frame.len() as u32);
                s.add(SNAPLEN).cast::<u32>().write(frame.len() as u32);
                // Variable-size slots are not supported for tx: must be 0.
                s.add(NEXT).cast::<u32>().write(0);
            }
            // Release: the frame and header are written before the kernel sees the request.
            self.status(self.head)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.head = if self.head + 1 == self.frames {
                0
            } else {
                self.head + 1
            };
        }
        for p in pkts.drain(..taken) {
            pool.free(p);
        }
        Sent { taken, errors }
    }

    /// Ask the kernel to send the slots requested so far (also those a failed kick left
    /// requested); returns 1 if that failed for another reason than a full queue.
    pub(super) fn kick(&mut self, fd: BorrowedFd<'_>) -> u64 {
        match sys::kick(fd) {
            Err(e) if !is_full(e) => 1,
            _ => 0,
        }
    }
}
