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
use super::txring::TxRing;

#[derive(Debug)]
enum Path {
    Ring(TxRing),
    Mmsg(Box<MmsgBatch>),
}

/// The transmit half of one queue of a [`super::PacketPort`]. Use it from one thread.
#[derive(Debug)]
pub struct PacketTx {
    path: Path,
    // Declared after `path`: the ring is unmapped before its socket closes.
    fd: OwnedFd,
    queue: u32,
    counters: Arc<QueueCounters>,
}

impl PacketTx {
    pub(super) fn ring(fd: OwnedFd, ring: TxRing, queue: u32, c: Arc<QueueCounters>) -> Self {
        PacketTx {
            path: Path::Ring(ring),
            fd,
            queue,
            counters: c,
        }
    }

    pub(super) fn mmsg(fd: OwnedFd, queue: u32, c: Arc<QueueCounters>) -> Self {
        PacketTx {
            path: Path::Mmsg(MmsgBatch::new()),
            fd,
            queue,
            counters: c,
        }
    }

    /// How this queue transmits.
    pub fn mode(&self) -> TxMode {
        match self.path {
            Path::Ring(_) => TxMode::Ring,
            Path::Mmsg(_) => TxMode::Sendmmsg,
        }
    }

    /// The queue's index in its port.
    pub fn queue(&self) -> u32 {
        self.queue
    }
}

impl TxQueue for PacketTx {
    /// One system call per burst. Packets are freed once the kernel has their bytes (copied
    /// into the tx ring, or into an `sk_buff` by `sendmmsg`); those left in `pkts` did not
    /// fit (ring full, driver queue full) and are the caller's to count and free.
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        if pkts.is_empty() {
            return 0;
        }
        let fd = self.fd.as_fd();
        let s = match &mut self.path {
            Path::Ring(r) => r.send(fd, pool, pkts),
            Path::Mmsg(m) => m.send(fd, pool, pkts),
        };
        if s.errors != 0 {
            self.counters.tx.errors.add(s.errors);
        }
        s.taken
    }
}
