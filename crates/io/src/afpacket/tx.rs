//! The transmit half of a queue: a socket of its own, with either a tx ring or `sendmmsg`.
//!
//! Transmission uses a second socket rather than the receive socket because that one is a
//! fanout member bound to every EtherType; this one is bound with protocol 0, so the kernel
//! never queues received frames on it, and it carries `PACKET_QDISC_BYPASS`: frames go
//! straight to the driver's queue (picked from the sending CPU), skipping the qdisc and the
//! packet taps. See [`super::TxMode`] for the two ways of handing frames over.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use vrhost_dataplane::port::TxQueue;
use vrhost_dataplane::{PktVec, Pool};

use super::TxMode;
use super::mmsg::MmsgBatch;
use super::stats::QueueCounters;
use super::txring::{Sent, TxRing};

#[derive(Debug)]
enum Path {
    Ring(TxRing),
    Mmsg {
        batch: Box<MmsgBatch>,
        /// Packets taken by `tx_burst` and not sent yet (from `pool`).
        pending: Box<PktVec>,
    },
}

/// The transmit half of one queue of a [`super::PacketPort`]. Use it from one thread.
///
/// Sending is deferred to [`TxQueue::flush`] (the worker calls it once per poll): in ring
/// mode `tx_burst` copies into the ring and `flush` kicks the kernel; in `sendmmsg` mode
/// `tx_burst` collects up to a vector's worth of packets and `flush` (or a `tx_burst` that
/// would overflow the collection) sends them in one call. So many VRs' small vectors in
/// one poll cost one system call, not one each.
#[derive(Debug)]
pub struct PacketTx {
    path: Path,
    // Declared after `path`: the ring is unmapped before its socket closes.
    fd: OwnedFd,
    queue: u32,
    counters: Arc<QueueCounters>,
    /// The pool of the port; packets of another pool are sent at once, not collected.
    pool: Arc<Pool>,
    /// The ring has requests the kernel was not kicked for.
    unkicked: bool,
}

impl PacketTx {
    pub(super) fn ring(
        fd: OwnedFd,
        ring: TxRing,
        queue: u32,
        c: Arc<QueueCounters>,
        pool: Arc<Pool>,
    ) -> Self {
        PacketTx {
            path: Path::Ring(ring),
            fd,
            queue,
            counters: c,
            pool,
            unkicked: false,
        }
    }

    pub(super) fn mmsg(fd: OwnedFd, queue: u32, c: Arc<QueueCounters>, pool: Arc<Pool>) -> Self {
        PacketTx {
            path: Path::Mmsg {
                batch: MmsgBatch::new(),
                pending: Box::new(PktVec::new()),
            },
            fd,
            queue,
            counters: c,
            pool,
            unkicked: false,
        }
    }

    /// How this queue transmits.
    pub fn mode(&self) -> TxMode {
        match self.path {
            Path::Ring(_) => TxMode::Ring,
            Path::Mmsg { .. } => TxMode::Sendmmsg,
        }
    }

    /// The queue's index in its port.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Send the collected packets (`sendmmsg` mode); what the kernel refuses (send buffer
    /// or device queue full) is freed and counted in [`super::PacketStats::tx_full`].
    fn send_pending(&mut self) {
        let Path::Mmsg { batch, pending } = &mut self.path else {
            return;
        };
        if pending.is_empty() {
            return;
        }
        let s = batch.send(self.fd.as_fd(), &self.pool, pending);
        if s.errors != 0 {
            self.counters.tx.errors.add(s.errors);
        }
        if !pending.is_empty() {
            self.counters.tx.full.add(pending.len() as u64);
            self.pool.free_all(pending);
        }
    }
}

impl TxQueue for PacketTx {
    /// Packets are freed once the kernel has their bytes (copied into the tx ring, or into
    /// an `sk_buff` by `sendmmsg` at the flush); in ring mode those left in `pkts` did not
    /// fit (ring full) and are the caller's to count and free.
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        if pkts.is_empty() {
            return 0;
        }
        let own = core::ptr::eq(pool, &*self.pool);
        let s = match &mut self.path {
            Path::Ring(r) => {
                self.unkicked = true;
                r.queue(pool, pkts)
            }
            Path::Mmsg { batch, .. } if !own => batch.send(self.fd.as_fd(), pool, pkts),
            Path::Mmsg { pending, .. } => {
                if pending.len() + pkts.len() > pending.capacity() {
                    self.send_pending();
                }
                let Path::Mmsg { pending, .. } = &mut self.path else {
                    unreachable!("matched above")
                };
                let n = pkts.len().min(pending.remaining_capacity());
                for p in pkts.drain(..n) {
                    pending.push(p);
                }
                Sent {
                    taken: n,
                    errors: 0,
                }
            }
        };
        if s.errors != 0 {
            self.counters.tx.errors.add(s.errors);
        }
        s.taken
    }

    /// One system call: the ring's kick, or the collected packets' `sendmmsg`.
    fn flush(&mut self, _pool: &Pool) {
        match &mut self.path {
            Path::Ring(r) => {
                if core::mem::take(&mut self.unkicked) {
                    let e = r.kick(self.fd.as_fd());
                    if e != 0 {
                        self.counters.tx.errors.add(e);
                    }
                }
            }
            Path::Mmsg { .. } => self.send_pending(),
        }
    }
}

impl Drop for PacketTx {
    fn drop(&mut self) {
        // Send what is still collected (or free it): no slot is left behind.
        self.flush(&Arc::clone(&self.pool));
    }
}
