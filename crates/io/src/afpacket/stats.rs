//! Counters of a port: the kernel's per-socket `PACKET_STATISTICS` plus what the backend
//! itself drops or repairs.
//!
//! The kernel's counters are *cleared on read*, so they are read under one lock per queue
//! and added to running totals kept here; a queue that is dropped reads its socket one last
//! time first, so nothing counted is lost. The backend's own counters are single-writer
//! [`Counter`]s (the worker that owns the queue writes, anyone reads): no locked instruction
//! on the hot path, and receive and transmit counters sit on separate cache lines.

use std::io;
use std::ops::AddAssign;
use std::os::fd::BorrowedFd;
use std::sync::Mutex;

use vrhost_dataplane::counters::Counter;

use super::sys;

/// A port's counters, summed over its queues. See [`super::PacketPort::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Frames the kernel offered to the receive rings, *including* the ones it dropped
    /// (`tp_packets`; the kernel adds `tp_drops` into it).
    pub tp_packets: u64,
    /// Frames the kernel dropped because a receive ring was full (`tp_drops`).
    pub tp_drops: u64,
    /// Times a receive ring froze: every block was still held by user space (`tp_freeze_q_cnt`).
    pub tp_freeze_q_cnt: u64,
    /// Received frames dropped by the backend because they do not fit a pool slot
    /// ([`vrhost_dataplane::MAX_FRAME`]), or arrived truncated: jumbo frames, and GSO/GRO
    /// "super-frames" from interfaces that aggregate (see the module docs).
    pub oversize: u64,
    /// Received frames whose TCP/UDP checksum the sending kernel had left to offload
    /// (`TP_STATUS_CSUMNOTREADY`) and the backend filled in.
    pub csum_completed: u64,
    /// Transmit system calls that failed for a reason other than a full queue.
    pub tx_errors: u64,
    /// Frames collected for a deferred `sendmmsg` that the kernel refused when they were
    /// sent (send buffer or device queue full): dropped here, where the data plane's
    /// tx-full counter cannot see them.
    pub tx_full: u64,
}

impl AddAssign for PacketStats {
    fn add_assign(&mut self, o: PacketStats) {
        self.tp_packets += o.tp_packets;
        self.tp_drops += o.tp_drops;
        self.tp_freeze_q_cnt += o.tp_freeze_q_cnt;
        self.oversize += o.oversize;
        self.csum_completed += o.csum_completed;
        self.tx_errors += o.tx_errors;
        self.tx_full += o.tx_full;
    }
}

/// Written by the queue's receive half.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(super) struct RxCounters {
    pub(super) oversize: Counter,
    pub(super) csum_completed: Counter,
}

/// Written by the queue's transmit half.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(super) struct TxCounters {
    pub(super) errors: Counter,
    pub(super) full: Counter,
}

/// Running totals of the kernel's clear-on-read counters.
#[derive(Debug, Default, Clone, Copy)]
struct KernelTotals {
    packets: u64,
    drops: u64,
    freezes: u64,
}

/// One queue's counters, shared by the port and the queue's two halves.
#[derive(Debug, Default)]
pub(super) struct QueueCounters {
    pub(super) rx: RxCounters,
    pub(super) tx: TxCounters,
    kernel: Mutex<KernelTotals>,
}

impl QueueCounters {
    /// Read (and so clear) the receive socket's `PACKET_STATISTICS` into the totals.
    pub(super) fn absorb(&self, rx_fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut k = self.kernel.lock().unwrap_or_else(|e| e.into_inner());
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        sys::getsockopt(rx_fd, libc::SOL_PACKET, libc::PACKET_STATISTICS, &mut st)?;
        k.packets += u64::from(st.tp_packets);
        k.drops += u64::from(st.tp_drops);
        k.freezes += u64::from(st.tp_freeze_q_cnt);
        Ok(())
    }

    /// The totals so far (kernel counters as of the last [`QueueCounters::absorb`]).
    pub(super) fn snapshot(&self) -> PacketStats {
        let k = *self.kernel.lock().unwrap_or_else(|e| e.into_inner());
        PacketStats {
            tp_packets: k.packets,
            tp_drops: k.drops,
            tp_freeze_q_cnt: k.freezes,
            oversize: self.rx.oversize.get(),
            csum_completed: self.rx.csum_completed.get(),
            tx_errors: self.tx.errors.get(),
            tx_full: self.tx.full.get(),
        }
    }
}
