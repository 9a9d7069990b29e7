//! The in-memory port backend: rings that a test or generator fills and drains.
//!
//! A mem port with `n` queues is `n` pairs of SPSC rings. The data plane side gets one
//! [`MemRx`] per queue and one [`MemTx`] per transmitting worker; the peer side (a test, the
//! in-process generator and sink) gets a [`MemPeer`] with the matching ends. Frames are pool
//! slots moved by handle, never copied, just as an AF_XDP UMEM would hand them over.

use crate::pool::{Pkt, Pool};
use crate::ring::{Consumer, Producer, ring};
use crate::vector::PktVec;

use super::{Fence, RxQueue, TxQueue};

/// The data plane's receive end of one queue.
#[derive(Debug)]
pub struct MemRx(Consumer);

/// The data plane's transmit end (one per worker).
#[derive(Debug)]
pub struct MemTx(Producer);

/// The peer's ends of a mem port: inject frames toward the data plane, collect what it sent.
#[derive(Debug)]
pub struct MemPeer {
    /// Producers feeding each rx queue.
    pub rx: Vec<Producer>,
    /// Consumers of each worker's tx ring.
    pub tx: Vec<Consumer>,
}

/// The data-plane side of a mem port.
#[derive(Debug)]
pub struct MemPort {
    /// One per rx queue; give each to one worker.
    pub rx: Vec<MemRx>,
    /// One per worker that may transmit.
    pub tx: Vec<MemTx>,
}

/// A mem port with `rx_queues` receive queues, `tx_queues` transmit queues (one per worker),
/// each ring holding `ring_size` frames.
pub fn port(rx_queues: usize, tx_queues: usize, ring_size: usize) -> (MemPort, MemPeer) {
    let (rx_p, rx_c): (Vec<_>, Vec<_>) = (0..rx_queues).map(|_| ring(ring_size)).unzip();
    let (tx_p, tx_c): (Vec<_>, Vec<_>) = (0..tx_queues).map(|_| ring(ring_size)).unzip();
    (
        MemPort {
            rx: rx_c.into_iter().map(MemRx).collect(),
            tx: tx_p.into_iter().map(MemTx).collect(),
        },
        MemPeer { rx: rx_p, tx: tx_c },
    )
}

impl RxQueue for MemRx {
    #[inline]
    fn rx_burst(&mut self, _pool: &Pool, out: &mut PktVec, max: usize) -> usize {
        self.0.pop_burst(out, max)
    }
}

impl TxQueue for MemTx {
    #[inline]
    fn tx_burst(&mut self, _pool: &Pool, pkts: &mut PktVec) -> usize {
        self.0.push_burst(pkts)
    }

    fn fence(&mut self) -> Option<Box<dyn Fence>> {
        Some(Box::new(self.0.mark()))
    }
}

impl Fence for crate::ring::Mark {
    fn passed(&self) -> bool {
        crate::ring::Mark::passed(self)
    }
}

impl MemPeer {
    /// Copy `frame` into a new slot and queue it on rx queue `q`. Returns false (and frees
    /// the slot) if the pool is empty or the ring is full.
    pub fn send(&mut self, pool: &Pool, q: usize, frame: &[u8]) -> bool {
        let Some(p) = pool.alloc_frame(frame) else {
            return false;
        };
        match self.rx[q].push(p) {
            Ok(()) => true,
            Err(p) => {
                pool.free(p);
                false
            }
        }
    }

    /// Queue an already filled packet on rx queue `q`; gives it back if the ring is full.
    pub fn send_pkt(&mut self, q: usize, p: Pkt) -> Result<(), Pkt> {
        self.rx[q].push(p)
    }

    /// Everything transmitted so far on all tx queues, as owned frames; the slots are freed.
    pub fn recv_all(&mut self, pool: &Pool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for c in &mut self.tx {
            while let Some(p) = c.pop() {
                out.push(pool.frame(&p).to_vec());
                pool.free(p);
            }
        }
        out
    }
}
