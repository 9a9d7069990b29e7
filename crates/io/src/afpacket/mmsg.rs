//! Transmit with one `sendmmsg(2)` per burst, each message one iovec pointing straight at
//! the frame in its pool slot.
//!
//! The kernel copies every frame into a new `sk_buff` before the call returns, so the pool
//! slots of the messages it accepted are freed right after it. `sendmmsg` stops at the
//! first message that fails; those from there on stay in the caller's vector (the trait's
//! "tx-full"), and no second call is made for them, to keep to one system call per burst.
//! The message and iovec arrays are allocated once per queue, sized for a whole vector.

use std::os::fd::BorrowedFd;

use vrhost_dataplane::{PktVec, Pool, VECTOR};

use super::sys;
use super::txring::{Sent, is_full};

/// Message headers and iovecs for one burst.
pub(super) struct MmsgBatch {
    msgs: [libc::mmsghdr; VECTOR],
    iov: [libc::iovec; VECTOR],
}

// SAFETY: the raw pointers inside the arrays are scratch values written by `send` just
// before the system call and never dereferenced by Rust; they own nothing, so the batch may
// move between threads like plain integers.
unsafe impl Send for MmsgBatch {}

impl core::fmt::Debug for MmsgBatch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MmsgBatch").finish_non_exhaustive()
    }
}

impl MmsgBatch {
    pub(super) fn new() -> Box<MmsgBatch> {
        let b = Box::<MmsgBatch>::new_zeroed();
        // SAFETY: `mmsghdr` and `iovec` are C structs of integers and raw pointers, for
        // which all-zero bytes (null pointers, zero lengths) are valid values.
        unsafe { b.assume_init() }
    }

    /// Send the packets of `pkts` in one `sendmmsg`; free and remove those the kernel took.
    pub(super) fn send(&mut self, fd: BorrowedFd<'_>, pool: &Pool, pkts: &mut PktVec) -> Sent {
        let n = pkts.len().min(VECTOR);
        if n == 0 {
            return Sent {
                taken: 0,
                errors: 0,
            };
        }
        for (v, p) in self.iov.iter_mut().zip(pkts.iter()) {
            let f = pool.frame(p);
            *v = libc::iovec {
                iov_base: f.as_ptr().cast_mut().cast(),
                iov_len: f.len(),
            };
        }
        let iov = self.iov.as_mut_ptr();
        for (i, m) in self.msgs[..n].iter_mut().enumerate() {
            m.msg_hdr.msg_iov = iov.wrapping_add(i);
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: the first `n` messages were just initialised (the rest of each header is
        // still zero: no address, no control data), each with one iovec pointing at a pool
        // frame that `pkts` keeps alive and unmodified for the call; the kernel only reads
        // the frames.
        let r = unsafe { sys::sendmmsg(fd, self.msgs.as_mut_ptr(), n) };
        let (taken, errors) = match r {
            Ok(k) => (k.min(n), 0),
            Err(e) => (0, u64::from(!is_full(e))),
        };
        for p in pkts.drain(..taken) {
            pool.free(p);
        }
        Sent { taken, errors }
    }
}
