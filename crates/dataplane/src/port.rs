//! The port abstraction: queues that receive frames into the pool and transmit them out.
//!
//! A port is split into queues because every worker must be able to transmit on every port
//! without sharing a queue (no lock, no atomic per packet): each worker gets its own
//! [`TxQueue`] per port, and each [`RxQueue`] is polled by exactly one worker (as with NIC
//! or AF_XDP queues). Backends (`mem` here; AF_XDP, AF_PACKET, tap in `vrhost-io`) implement
//! these two traits; the data plane never learns which one it drives.
//!
//! Calls are per burst, not per packet, so a `dyn` call's cost is spread over a vector.

pub mod mem;

use crate::pool::Pool;
use crate::vector::PktVec;

/// Index of a port in the data plane.
pub type PortId = u16;

/// Receives frames.
pub trait RxQueue: Send {
    /// Append up to `max` received frames to `out` (never more than its free room); returns
    /// how many. Each packet's [`Meta`](crate::Meta) has `off` and `len` set.
    fn rx_burst(&mut self, pool: &Pool, out: &mut PktVec, max: usize) -> usize;
}

/// Transmits frames.
pub trait TxQueue: Send {
    /// Take packets from the front of `pkts` for transmission, as many as the queue has room
    /// for; returns how many were taken. Packets left in `pkts` were not sent: the caller
    /// drops them and counts them ("tx-full"). The queue frees sent packets itself when the
    /// hardware (or peer) is done with them.
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize;

    /// Push out what earlier `tx_burst` calls queued. A worker runs many small vectors per
    /// poll when many VRs share a port (each VR's vector is its own `tx_burst`), so a
    /// backend whose transmit costs a system call per call (AF_XDP copy mode's `sendto`,
    /// AF_PACKET's `sendmmsg`) queues in `tx_burst` and sends here: the worker calls this
    /// once per poll, after the poll's last vector, on every queue it gave packets to in
    /// that poll. So a frame waits at most for the rest of the poll it was forwarded in.
    /// The default does nothing (for backends that send inside `tx_burst`).
    fn flush(&mut self, pool: &Pool) {
        let _ = pool;
    }

    /// A fence after everything handed to this queue so far, for backends whose queue holds
    /// frames after `tx_burst` returns (a ring another thread or a device drains). When a
    /// VR moves to another worker, the new worker sends the VR's packets only once the old
    /// worker's fences have passed, so two transmit queues never carry the VR's frames out
    /// of order. `None` (the default) means frames are gone when `tx_burst` returns.
    fn fence(&mut self) -> Option<Box<dyn Fence>> {
        None
    }
}

/// See [`TxQueue::fence`].
pub trait Fence: Send + core::fmt::Debug {
    /// Whether everything queued before the fence has left the queue.
    fn passed(&self) -> bool;
}
