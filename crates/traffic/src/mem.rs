//! The in-memory rings of `vrhost_dataplane::port::mem` as a [`TxQueue`] and an [`RxQueue`],
//! so that the generator and the sink drive an in-process DUT, or each other, exactly as
//! they drive AF_XDP or AF_PACKET queues.
//!
//! Why wrappers: the data plane's `MemPeer` hands out the *peer* ends of a mem port as bare
//! ring ends — a [`Producer`] feeding the DUT's rx queue and a [`Consumer`] draining its tx
//! queue — and those are not queue types. [`RingTx`] and [`RingRx`] make them ones: give
//! `MemPeer::rx[q]` to a generator and `MemPeer::tx[w]` to a sink. A full ring refuses what
//! does not fit, which the generator counts as `tx_full` (for an in-process DUT: its rx
//! ring overflowed, as a NIC's would).

use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::ring::{Consumer, Producer, ring};
use vrhost_dataplane::{PktVec, Pool};

/// A ring's producer end as a transmit queue.
#[derive(Debug)]
pub struct RingTx(pub Producer);

/// A ring's consumer end as a receive queue.
#[derive(Debug)]
pub struct RingRx(pub Consumer);

impl TxQueue for RingTx {
    #[inline]
    fn tx_burst(&mut self, _pool: &Pool, pkts: &mut PktVec) -> usize {
        self.0.push_burst(pkts)
    }
}

impl RxQueue for RingRx {
    #[inline]
    fn rx_burst(&mut self, _pool: &Pool, out: &mut PktVec, max: usize) -> usize {
        self.0.pop_burst(out, max)
    }
}

/// A ring of `capacity` frames (rounded up to a power of two) from a generator straight to
/// a sink: no DUT, for tests and for measuring the generator and the sink themselves.
pub fn loopback(capacity: usize) -> (RingTx, RingRx) {
    let (p, c) = ring(capacity);
    (RingTx(p), RingRx(c))
}
