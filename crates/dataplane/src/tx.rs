//! Per-worker transmit staging: packets bound for each port wait here until the VR's vector
//! is done, then go out in one burst per port.
//!
//! Staging keeps the egress VIF and length of each packet beside it, because after
//! `tx_burst` the packets belong to the port: the counters for the ones it took (VR, VIF,
//! port) and the `tx-full` drops for the ones it refused are settled from these arrays.
//!
//! A VR's vector ends with a `tx_burst` per port it sent to, so that each VR's counters
//! are settled with that VR; the queues then push out once per poll ([`TxStage::kick`],
//! [`TxQueue::flush`]), so that a poll that ran 64 VRs' small vectors costs one system call
//! per port, not 64.

use crate::counters::{Drop, PortCounters, VrCounters};
use crate::pool::{Pkt, Pool};
use crate::port::{Fence, TxQueue};
use crate::vector::{PktVec, VECTOR};
use crate::vr::Vif;

use std::sync::Arc;

use crossbeam_utils::CachePadded;

struct Stage {
    pkts: PktVec,
    vif: [u16; VECTOR],
    len: [u16; VECTOR],
}

/// One worker's transmit side: one queue and one stage per port.
pub(crate) struct TxStage {
    queues: Vec<Box<dyn TxQueue>>,
    stages: Vec<Stage>,
    /// Ports with something staged.
    dirty: Vec<u16>,
    /// Ports whose queue was given packets since the last [`TxStage::kick`].
    unkicked: Vec<u16>,
}

impl TxStage {
    pub(crate) fn new(queues: Vec<Box<dyn TxQueue>>) -> TxStage {
        let stages = (0..queues.len())
            .map(|_| Stage {
                pkts: PktVec::new(),
                vif: [0; VECTOR],
                len: [0; VECTOR],
            })
            .collect();
        TxStage {
            queues,
            stages,
            dirty: Vec::new(),
            unkicked: Vec::new(),
        }
    }

    /// Stage `p` (its `Meta::port`, `vif` and `len` already set) for transmission, or hand
    /// it back if port `port`'s stage is full (flush it, then push again).
    ///
    /// One call does both the full check and the push, so the port is looked up once and
    /// the checked length bounds the three array writes.
    #[inline(always)]
    pub(crate) fn try_push(&mut self, p: Pkt, port: u16, vif: u16, len: u16) -> Result<(), Pkt> {
        let s = &mut self.stages[usize::from(port)];
        let k = s.pkts.len();
        if k >= VECTOR {
            return Err(p);
        }
        if k == 0 {
            self.dirty.push(port);
        }
        s.vif[k] = vif;
        s.len[k] = len;
        // SAFETY: `k < VECTOR`, the vector's capacity, was checked above.
        unsafe { s.pkts.push_unchecked(p) };
        Ok(())
    }

    /// A fence on every transmit queue that has one (see [`TxQueue::fence`]), after what
    /// the queues hold unsent has been pushed out.
    pub(crate) fn fences(&mut self, pool: &Pool) -> Vec<Box<dyn Fence>> {
        self.kick(pool);
        self.queues.iter_mut().filter_map(|q| q.fence()).collect()
    }

    /// Let every queue given packets since the last kick push them out
    /// ([`TxQueue::flush`]). The worker calls it once at the end of each poll.
    pub(crate) fn kick(&mut self, pool: &Pool) {
        while let Some(port) = self.unkicked.pop() {
            self.queues[usize::from(port)].flush(pool);
        }
    }

    /// Send everything staged.
    pub(crate) fn flush(&mut self, f: &mut Flush<'_>) {
        while let Some(port) = self.dirty.pop() {
            self.flush_port(usize::from(port), f);
        }
    }

    pub(crate) fn flush_port(&mut self, i: usize, f: &mut Flush<'_>) {
        let s = &mut self.stages[i];
        let n = s.pkts.len();
        if n == 0 {
            return;
        }
        let sent = self.queues[i].tx_burst(f.pool, &mut s.pkts);
        if !self.unkicked.contains(&(i as u16)) {
            self.unkicked.push(i as u16);
        }
        let pc = &f.ports[i][f.worker];
        let (vifs, lens) = (&s.vif[..sent], &s.len[..sent]);
        // Summed as u32 (256 × 65,535 fits), so that the loop vectorises.
        let bytes = u64::from(lens.iter().map(|&l| u32::from(l)).sum::<u32>());
        let vif_counters = |vif: u16, pkts: u64, vbytes: u64| {
            if let Some(Some(v)) = f.vifs.get(usize::from(vif)) {
                let c = &v.counters[f.worker];
                c.tx_packets.add(pkts);
                c.tx_bytes.add(vbytes);
            }
        };
        // Nearly every burst leaves by one VIF: found without a branch per packet (the
        // OR of differences vectorises), then counted at once.
        if let Some(&first) = vifs.first()
            && vifs.iter().fold(0, |d, &v| d | (v ^ first)) == 0
        {
            vif_counters(first, sent as u64, bytes);
        } else {
            // Else per run of packets to the same VIF.
            let mut k = 0;
            while k < sent {
                let vif = vifs[k];
                let (mut pkts, mut vbytes) = (0u64, 0u64);
                while k < sent && vifs[k] == vif {
                    pkts += 1;
                    vbytes += u64::from(lens[k]);
                    k += 1;
                }
                vif_counters(vif, pkts, vbytes);
            }
        }
        pc.tx_packets.add(sent as u64);
        pc.tx_bytes.add(bytes);
        f.vr.tx_packets.add(sent as u64);
        f.vr.tx_bytes.add(bytes);
        let refused = n - sent;
        if refused > 0 {
            pc.tx_full.add(refused as u64);
            f.vr.drops[Drop::TxFull as usize].add(refused as u64);
            f.pool.free_all(&mut s.pkts);
        }
        // Anything the queue took from the front is gone; keep the arrays aligned.
        debug_assert!(s.pkts.is_empty());
    }
}

/// What a flush needs to settle counters.
pub(crate) struct Flush<'a> {
    pub(crate) pool: &'a Pool,
    pub(crate) worker: usize,
    pub(crate) ports: &'a [Box<[CachePadded<PortCounters>]>],
    pub(crate) vr: &'a VrCounters,
    pub(crate) vifs: &'a [Option<Arc<Vif>>],
}
