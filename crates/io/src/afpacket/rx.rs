//! The receive half of a queue: a TPACKET_V3 block ring, copied into pool slots.
//!
//! The kernel fills blocks in order, packing variable-size frames into each, and hands a
//! block to user space (`block_status |= TP_STATUS_USER`) when it is full or when the block
//! timeout expires with at least one frame in it. [`PacketRx::rx_burst`] walks ready blocks
//! in the same order: peek the status (acquire), read the frames, copy each into a fresh
//! pool slot where the pool places it ([`Pool::place`]), and give the block back
//! (`TP_STATUS_KERNEL`, release) once its last frame is read. A call that stops early — `max` reached, the vector full, the pool
//! empty — remembers where it was inside the block (`left`, `off`) and the next call goes
//! on from there, so a block larger than a burst is never lost or read twice.
//!
//! Why copy instead of lending ring memory to the data plane: blocks must go back to the
//! kernel in order and whole, but the data plane keeps packets for as long as they wait in
//! VR ingress rings and tx stages, so one slow packet would pin its block and freeze the
//! ring. One `memcpy` per frame frees the block at once; the zero-copy path is AF_XDP.
//!
//! Nothing here makes a system call: when no block is ready, a poll costs one load of a
//! status word that stays in this core's cache until the kernel writes it.
//!
//! What the copy also undoes:
//! - *VLAN tags.* The kernel strips the outer 802.1Q/802.1ad tag of every received frame
//!   into metadata before packet sockets see it (`skb_vlan_untag` runs before the taps,
//!   whether or not the NIC offloads VLANs), and the ring reports it in `tp_vlan_tci` /
//!   `tp_vlan_tpid` with `TP_STATUS_VLAN_VALID`. The copy puts it back in the frame bytes,
//!   where the data plane's demux expects it (the slot's headroom makes room for it).
//! - *Unfinished checksums* (`TP_STATUS_CSUMNOTREADY`): completed by [`super::csum`].
//!
//! Frames that do not fit a slot ([`MAX_FRAME`], tag included) or were truncated by the
//! ring are dropped and counted ([`super::PacketStats::oversize`]).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use vrhost_dataplane::port::RxQueue;
use vrhost_dataplane::{MAX_FRAME, PktVec, Pool};

use super::csum;
use super::stats::QueueCounters;
use super::sys::Mmap;

/// Offset of `block_status` in a block descriptor.
const BLOCK_STATUS: usize = core::mem::offset_of!(libc::tpacket_block_desc, hdr)
    + core::mem::offset_of!(libc::tpacket_hdr_v1, block_status);
/// Offset of `num_pkts` in a block descriptor.
const BLOCK_NUM_PKTS: usize = core::mem::offset_of!(libc::tpacket_block_desc, hdr)
    + core::mem::offset_of!(libc::tpacket_hdr_v1, num_pkts);
/// Offset of `offset_to_first_pkt` in a block descriptor.
const BLOCK_FIRST: usize = core::mem::offset_of!(libc::tpacket_block_desc, hdr)
    + core::mem::offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
/// Size of a frame header.
const HDR: usize = size_of::<libc::tpacket3_hdr>();
/// Bytes of an 802.1Q tag.
const TAG: usize = 4;

const _: () = assert!(BLOCK_STATUS.is_multiple_of(4) && BLOCK_FIRST + 4 <= 64);

/// The receive socket, shared with the port (weakly) so the port can read its counters.
#[derive(Debug)]
pub(super) struct RxSocket {
    pub(super) fd: OwnedFd,
}

/// The receive half of one queue of a [`super::PacketPort`]. Poll it from one thread.
#[derive(Debug)]
pub struct PacketRx {
    ring: Mmap,
    block_size: usize,
    blocks: usize,
    /// Block being read, or waited for.
    cur: usize,
    /// Frames of `cur` not read yet; 0 when `cur` is not open.
    left: u32,
    /// Offset in `cur` of the next frame's header.
    off: usize,
    complete_csum: bool,
    queue: u32,
    sock: Arc<RxSocket>,
    counters: Arc<QueueCounters>,
}

impl PacketRx {
    /// `ring` is the mapped rx ring of `sock`: `blocks` blocks of `block_size` bytes.
    pub(super) fn new(
        ring: Mmap,
        block_size: usize,
        blocks: usize,
        complete_csum: bool,
        queue: u32,
        sock: Arc<RxSocket>,
        counters: Arc<QueueCounters>,
    ) -> PacketRx {
        assert!(block_size >= 64 && blocks > 0 && ring.len() >= block_size * blocks);
        PacketRx {
            ring,
            block_size,
            blocks,
            cur: 0,
            left: 0,
            off: 0,
            complete_csum,
            queue,
            sock,
            counters,
        }
    }

    /// The queue's index in its port.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Start of block `i`.
    #[inline(always)]
    fn block(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.blocks);
        self.ring.ptr().wrapping_add(i * self.block_size)
    }

    /// The status word of block `i`, shared with the kernel.
    #[inline(always)]
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: `i < blocks`, so the word lies inside the mapping (a block is at least 64
        // bytes); blocks start on page boundaries and the offset is a multiple of 4, so it
        // is aligned. The kernel writes it concurrently, which is why it is only accessed
        // atomically; the reference lives no longer than `&self`, which owns the mapping.
        unsafe { &*self.block(i).add(BLOCK_STATUS).cast::<AtomicU32>() }
    }

    /// Make the next ready block current. `false` if the kernel has none for us yet.
    #[inline]
    fn open_block(&mut self) -> bool {
        loop {
            // Acquire: pairs with the kernel's write barrier before it sets TP_STATUS_USER,
            // so the block's frames and header are visible below.
            if self.status(self.cur).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                return false;
            }
            let b = self.block(self.cur);
            // SAFETY: both words lie in the descriptor at the start of block `cur` (inside
            // the mapping, 4-aligned), and the block is ours until we hand it back, so the
            // kernel does not write them now.
            let (num, first) = unsafe {
                (
                    b.add(BLOCK_NUM_PKTS).cast::<u32>().read(),
                    b.add(BLOCK_FIRST).cast::<u32>().read(),
                )
            };
            if num > 0 && (first as usize) < self.block_size {
                self.left = num;
                self.off = first as usize;
                return true;
            }
            // An empty block (the kernel does not close those, but be safe): give it back.
            self.release_block();
        }
    }

    /// Hand block `cur` back to the kernel and move to the next.
    #[inline]
    fn release_block(&mut self) {
        // Release: our reads of the block happen before the kernel may refill it.
        self.status(self.cur)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.left = 0;
        self.cur = if self.cur + 1 == self.blocks {
            0
        } else {
            self.cur + 1
        };
    }
}

impl RxQueue for PacketRx {
    fn rx_burst(&mut self, pool: &Pool, out: &mut PktVec, max: usize) -> usize {
        let want = max.min(out.capacity() - out.len());
        let mut n = 0;
        while n < want {
            if self.left == 0 && !self.open_block() {
                break;
            }
            let base = self.block(self.cur);
            let off = self.off;
            if off + HDR > self.block_size {
                // A header past the block's end: not something the kernel writes. Skip the
                // rest of the block rather than read outside it.
                debug_assert!(false, "tpacket3 header at {off} past block end");
                self.release_block();
                continue;
            }
            // SAFETY: `off + HDR <= block_size`, so the header lies inside block `cur` of the
            // mapping; the block is ours (TP_STATUS_USER seen with acquire), so the kernel
            // does not write it; `read_unaligned` needs no alignment.
            let h = unsafe { base.add(off).cast::<libc::tpacket3_hdr>().read_unaligned() };
            let (mac, snap) = (usize::from(h.tp_mac), h.tp_snaplen as usize);
            if off + mac + snap > self.block_size {
                debug_assert!(false, "tpacket3 frame past block end");
                self.release_block();
                continue;
            }
            let tagged = h.tp_status & libc::TP_STATUS_VLAN_VALID != 0 && snap >= 12;
            let len = snap + if tagged { TAG } else { 0 };
            if snap != h.tp_len as usize || len > MAX_FRAME {
                self.counters.rx.oversize.add(1);
            } else {
                let Some(mut p) = pool.alloc() else {
                    // Leave the frame in the ring: the ring is the buffer, and when it
                    // fills the kernel drops and counts (tp_drops).
                    break;
                };
                // SAFETY: `off + mac + snap <= block_size` (checked above): the bytes lie
                // inside block `cur`, which the kernel does not write while it is ours, and
                // no `&mut` to the mapping exists.
                let src = unsafe { core::slice::from_raw_parts(base.add(off + mac), snap) };
                let at = pool.place(&p, len);
                let (m, slot) = pool.slot_mut(&mut p);
                let dst = &mut slot[at..at + len];
                if tagged {
                    let tpid = if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                        h.hv1.tp_vlan_tpid
                    } else {
                        0x8100
                    };
                    dst[..12].copy_from_slice(&src[..12]);
                    dst[12..14].copy_from_slice(&tpid.to_be_bytes());
                    dst[14..16].copy_from_slice(&(h.hv1.tp_vlan_tci as u16).to_be_bytes());
                    dst[16..].copy_from_slice(&src[12..]);
                } else {
                    dst.copy_from_slice(src);
                }
                m.off = at as u16;
                m.len = len as u16;
                if h.tp_status & libc::TP_STATUS_CSUMNOTREADY != 0
                    && self.complete_csum
                    && csum::complete(dst)
                {
                    self.counters.rx.csum_completed.add(1);
                }
                out.push(p);
                n += 1;
            }
            self.left -= 1;
            self.off = off + h.tp_next_offset as usize;
            if self.left == 0 {
                self.release_block();
            }
        }
        n
    }
}

impl Drop for PacketRx {
    fn drop(&mut self) {
        // The kernel's counters are cleared on read: keep what this socket counted.
        let _ = self.counters.absorb(self.sock.fd.as_fd());
    }
}
