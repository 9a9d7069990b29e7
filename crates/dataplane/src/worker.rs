//! A worker: one thread's poll loop over its receive queues and its VRs.
//!
//! One poll: receive a burst from each rx queue, demux it into the VRs' ingress rings (the
//! only place an admitted packet may wait), then give each VR this worker owns one vector:
//! injected frames first, then up to [`VECTOR`] packets from its ingress rings, run to
//! completion through the forwarding path and out to the ports' tx rings.
//!
//! A VR is run by one worker only (its owner), so per-VR state that changes per packet —
//! rate-limit buckets, caches — is worker-local, with no sharing. Packets for a VR received by
//! another worker cross over in that VR's ingress ring fed by that worker (SPSC).
//!
//! The worker follows topology changes by comparing one version number per poll; when it
//! moved, it reloads the snapshot and reconciles: takes the ring ends of new VRs, and for
//! removed VRs returns what is still queued to the pool (waiting until the other workers
//! have let go of their producer ends, so nothing is pushed after the last drain).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::counters::{Drop, Node};
use crate::dataplane::{Shared, Snapshot, VrSnap};
use crate::demux::{Verdict, VifRef, mac_key, parse_l2_packed, unpack};
use crate::node::adjcache::AdjCache;
use crate::node::flowcache::FlowCache;
use crate::node::{Bucket, Ctx, cycles};
use crate::pool::Pkt;
use crate::port::{PortId, RxQueue, TxQueue};
use crate::ring::{Consumer, Producer};
use crate::tx::TxStage;
use crate::vector::{PktVec, VECTOR};
use crate::vr::VrId;

/// Under pressure, run a VR once this many packets wait for it…
const COALESCE: usize = VECTOR / 4;
/// …or once it has been passed over this many polls.
const MAX_DEFER: u32 = 32;

/// Per-VR state kept by the VR's owner worker.
#[derive(Debug)]
pub(crate) struct VrState {
    pub(crate) icmp_bucket: Bucket,
    pub(crate) punt_bucket: Bucket,
    pub(crate) fc4: FlowCache<u32>,
    pub(crate) fc6: FlowCache<u128>,
    pub(crate) adj4: AdjCache,
    pub(crate) adj6: AdjCache,
}

struct LocalVr {
    snap: VrSnap,
    producer: Option<Producer>,
    /// Non-empty only on the owner.
    consumers: Vec<Consumer>,
    next_consumer: usize,
    /// Polls this VR was passed over to let its backlog grow.
    deferred: u32,
    staged: PktVec,
    staged_bytes: u64,
    state: VrState,
}

/// Record demux's findings in a packet's metadata.
#[inline(always)]
fn tag(m: &mut crate::Meta, port: PortId, r: VifRef, l2: &crate::L2Info) {
    m.port = port;
    m.vr = r.vr;
    m.vif = r.vif;
    m.l3 = l2.l3 as u8;
    m.class = l2.class as u8;
}

/// One forwarding thread's state. Create with [`crate::Dataplane::worker`]; drive with
/// [`Worker::run`] on a thread of its own, or [`Worker::poll`] step by step (tests).
pub struct Worker {
    sh: Arc<Shared>,
    id: usize,
    rx: Vec<(PortId, Box<dyn RxQueue>)>,
    tx: TxStage,
    snap: Arc<Snapshot>,
    version: u64,
    vrs: Vec<Option<LocalVr>>,
    owned: Vec<VrId>,
    touched: Vec<VrId>,
    retiring: Vec<Consumer>,
    epoch: Instant,
}

impl core::fmt::Debug for Worker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Worker")
            .field("id", &self.id)
            .field("rx_queues", &self.rx.len())
            .field("owned_vrs", &self.owned)
            .finish_non_exhaustive()
    }
}

impl Worker {
    pub(crate) fn new(
        sh: Arc<Shared>,
        id: usize,
        rx: Vec<(PortId, Box<dyn RxQueue>)>,
        tx: Vec<Box<dyn TxQueue>>,
    ) -> Worker {
        let mut w = Worker {
            snap: Arc::new(Snapshot::default()),
            version: u64::MAX,
            sh,
            id,
            rx,
            tx: TxStage::new(tx),
            vrs: Vec::new(),
            owned: Vec::new(),
            touched: Vec::new(),
            retiring: Vec::new(),
            epoch: Instant::now(),
        };
        w.refresh();
        w
    }

    /// The worker's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Poll until `stop` is set. Idle polls back off: spin briefly, then yield, then sleep
    /// up to 1 ms, so an idle router does not burn its core; any work resets the back-off.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut idle = 0u32;
        while !stop.load(Ordering::Relaxed) {
            if self.poll() > 0 {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            match idle {
                0..=64 => std::hint::spin_loop(),
                65..=256 => std::thread::yield_now(),
                _ => {
                    let us = u64::from((idle - 256).min(1000));
                    std::thread::sleep(Duration::from_micros(us.max(10)));
                }
            }
        }
        // Leave nothing behind: hand every staged packet to its ring.
        self.poll();
    }

    /// One round: receive, demux, run each owned VR (a vector per receive queue at most).
    /// Returns packets handled.
    pub fn poll(&mut self) -> usize {
        self.refresh();
        let mut work = 0;
        let mut pressure = false;
        for q in 0..self.rx.len() {
            let n = self.rx_one(q);
            pressure |= n == VECTOR;
            work += n;
        }
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        // A VR may get up to one vector per receive queue per poll: what one poll can feed
        // it. With a single vector per poll, a VR fed full bursts by two ports would fill
        // its ingress ring and drop there while the worker still had time to forward them.
        let rounds = self.rx.len().max(1);
        for i in 0..self.owned.len() {
            let vr = self.owned[i];
            for round in 0..rounds {
                let n = self.run_vr(vr, now_ns, pressure && round == 0);
                work += n;
                if n < VECTOR {
                    break;
                }
            }
        }
        let wc = &self.sh.worker_counters[self.id];
        wc.polls.add(1);
        if work == 0 {
            wc.idle_polls.add(1);
        }
        self.drain_retiring();
        work
    }

    fn refresh(&mut self) {
        let v = self.sh.version.load(Ordering::Acquire);
        if v == self.version {
            return;
        }
        let snap = self.sh.snap.load_full();
        self.version = snap.version;
        // Drop VRs that are gone (or replaced by a new VR with the same id).
        for (i, slot) in self.vrs.iter_mut().enumerate() {
            let keep = match (slot.as_ref(), snap.vrs.get(i).and_then(Option::as_ref)) {
                (Some(l), Some(s)) => Arc::ptr_eq(&l.snap.vr, &s.vr),
                _ => false,
            };
            if !keep && let Some(mut l) = slot.take() {
                l.producer = None;
                for p in l.staged.drain(..) {
                    self.sh.pool.free(p);
                }
                self.retiring.append(&mut l.consumers);
            }
        }
        if self.vrs.len() < snap.vrs.len() {
            self.vrs.resize_with(snap.vrs.len(), || None);
        }
        self.owned.clear();
        for (i, s) in snap.vrs.iter().enumerate() {
            let Some(s) = s else { continue };
            let l = self.vrs[i].get_or_insert_with(|| {
                let cfg = &s.vr.config;
                let producer = s.vr.ingress_tx[self.id]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                let consumers = if s.vr.owner == self.id {
                    s.vr.ingress_rx
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take()
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                LocalVr {
                    snap: s.clone(),
                    producer,
                    consumers,
                    next_consumer: 0,
                    deferred: 0,
                    staged: PktVec::new(),
                    staged_bytes: 0,
                    state: VrState {
                        icmp_bucket: Bucket::new(cfg.icmp_rate, cfg.icmp_burst),
                        punt_bucket: Bucket::new(cfg.punt_rate, cfg.punt_burst),
                        fc4: FlowCache::new(cfg.flow_cache),
                        fc6: FlowCache::new(cfg.flow_cache),
                        adj4: AdjCache::default(),
                        adj6: AdjCache::default(),
                    },
                }
            });
            // Same VR, maybe new VIFs.
            l.snap = s.clone();
            if s.vr.owner == self.id {
                self.owned.push(i as VrId);
            }
        }
        self.snap = snap;
    }

    /// Return queued packets of removed VRs to the pool; forget a ring once no producer can
    /// push to it any more.
    fn drain_retiring(&mut self) {
        if self.retiring.is_empty() {
            return;
        }
        let pool = &self.sh.pool;
        self.retiring.retain_mut(|c| {
            let alive = c.producer_alive();
            c.drain(|p| pool.free(p));
            alive
        });
    }

    fn rx_one(&mut self, q: usize) -> usize {
        let t0 = cycles();
        let Worker {
            sh,
            id,
            rx,
            vrs,
            touched,
            snap,
            ..
        } = self;
        let (sh, id) = (&**sh, *id);
        let pool = &*sh.pool;
        let (port, ref mut rxq) = rx[q];
        let mut v = PktVec::new();
        let n = rxq.rx_burst(pool, &mut v, VECTOR);
        if n == 0 {
            return 0;
        }
        let wc = &sh.worker_counters[id];
        let pc = &sh.port_counters[usize::from(port)][id];
        let t1 = cycles();
        let rxn = &wc.nodes[Node::Rx as usize];
        rxn.packets.add(n as u64);
        rxn.vectors.add(1);
        rxn.sampled_packets.add(n as u64);
        rxn.cycles.add(t1.wrapping_sub(t0));
        pc.rx_packets.add(n as u64);

        let demux = &snap.ports[usize::from(port)];
        let mut bytes = 0u64;
        let mut dropped = 0u64;
        // Consecutive frames mostly go to the same VIF: remember the last (VLAN, MAC) →
        // VIF decision.
        let mut memo: Option<(u64, VifRef)> = None;
        for mut p in v.drain(..) {
            let m = *pool.meta(&p);
            bytes += u64::from(m.len);
            let frame = pool.frame(&p);
            let packed = parse_l2_packed(frame);
            if packed >> 40 != 0 {
                wc.drops[Drop::L2Truncated as usize].add(1);
                dropped += 1;
                pool.free(p);
                continue;
            }
            let l2 = unpack(packed);
            let key = mac_key(l2.vid, frame);
            let verdict = match memo {
                Some((k, r)) if k == key => Verdict::One(r),
                _ => demux.lookup_key(key, frame, &l2),
            };
            match verdict {
                Verdict::One(r) | Verdict::Rule(r) => {
                    if let Verdict::One(r) = verdict {
                        memo = Some((key, r));
                    }
                    tag(pool.meta_mut(&mut p), port, r, &l2);
                    dropped += Self::stage(sh, id, vrs, touched, r.vr, p, m.len);
                }
                Verdict::Flood(members) if !members.is_empty() => {
                    // Copies for all but the last member; the last takes the original.
                    let last = members.len() - 1;
                    let mut orig = Some(p);
                    for (i, r) in members.iter().enumerate() {
                        let q = match orig.as_ref() {
                            Some(o) if i < last => pool.alloc_frame(pool.frame(o)),
                            _ => orig.take(),
                        };
                        let Some(mut q) = q else {
                            wc.drops[Drop::ReplicateNoBuffer as usize].add(1);
                            dropped += 1;
                            continue;
                        };
                        tag(pool.meta_mut(&mut q), port, *r, &l2);
                        dropped += Self::stage(sh, id, vrs, touched, r.vr, q, m.len);
                    }
                }
                Verdict::Flood(_) => {
                    wc.drops[Drop::NoVr as usize].add(1);
                    dropped += 1;
                    pool.free(p);
                }
                Verdict::Drop(d) => {
                    wc.drops[d as usize].add(1);
                    dropped += 1;
                    pool.free(p);
                }
            }
        }
        pc.rx_bytes.add(bytes);
        dropped += Self::flush_staged(sh, id, vrs, touched);
        pc.rx_dropped.add(dropped);
        let dn = &wc.nodes[Node::Demux as usize];
        dn.packets.add(n as u64);
        dn.vectors.add(1);
        dn.sampled_packets.add(n as u64);
        dn.cycles.add(cycles().wrapping_sub(t1));
        n
    }

    /// Stage a packet for VR `vr`'s ingress ring; returns packets dropped (ring full) if
    /// the stage had to be flushed.
    #[inline]
    fn stage(
        sh: &Shared,
        id: usize,
        vrs: &mut [Option<LocalVr>],
        touched: &mut Vec<VrId>,
        vr: VrId,
        p: Pkt,
        len: u16,
    ) -> u64 {
        let Some(l) = vrs.get_mut(usize::from(vr)).and_then(Option::as_mut) else {
            // Cannot happen: demux and the VR list come from the same snapshot.
            sh.pool.free(p);
            return 1;
        };
        if l.staged.is_empty() {
            touched.push(vr);
        }
        l.staged_bytes += u64::from(len);
        l.staged.push(p);
        if l.staged.is_full() {
            // The VR stays in `touched`; its second flush finds nothing.
            return Self::admit(sh, id, l);
        }
        0
    }

    /// Push a VR's staged packets onto its ingress ring; returns how many were dropped.
    fn admit(sh: &Shared, worker: usize, l: &mut LocalVr) -> u64 {
        let pool = &*sh.pool;
        let c = &l.snap.vr.counters[worker];
        let n = l.staged.len();
        let mut bytes = core::mem::take(&mut l.staged_bytes);
        let pushed = match l.producer.as_mut() {
            Some(prod) => prod.push_burst(&mut l.staged),
            None => 0,
        };
        let refused = (n - pushed) as u64;
        if refused > 0 {
            for p in l.staged.drain(..) {
                bytes -= u64::from(pool.meta(&p).len);
                pool.free(p);
            }
            c.drops[Drop::VrIngressFull as usize].add(refused);
        }
        c.rx_packets.add(pushed as u64);
        c.rx_bytes.add(bytes);
        refused
    }

    fn flush_staged(
        sh: &Shared,
        id: usize,
        vrs: &mut [Option<LocalVr>],
        touched: &mut Vec<VrId>,
    ) -> u64 {
        let mut dropped = 0;
        while let Some(vr) = touched.pop() {
            if let Some(l) = vrs.get_mut(usize::from(vr)).and_then(Option::as_mut) {
                dropped += Self::admit(sh, id, l);
            }
        }
        dropped
    }

    /// Run one vector of an owned VR. Returns packets handled.
    ///
    /// Under pressure (a receive queue gave a full burst this poll) a VR with a short
    /// backlog waits for up to [`MAX_DEFER`] polls or until [`COALESCE`] packets are queued:
    /// with many VRs sharing a port, a burst of 256 split over 100 VRs would otherwise run
    /// vectors of 2–3 packets, and every per-vector cost (FIB batch setup, tx bursts) would
    /// be paid per packet — measured at 0.16× the one-VR rate. Without pressure every VR
    /// runs at once, so a lightly loaded router adds no latency.
    fn run_vr(&mut self, vr: VrId, now_ns: u64, pressure: bool) -> usize {
        let Some(l) = self.vrs.get_mut(usize::from(vr)).and_then(Option::as_mut) else {
            return 0;
        };
        if pressure && l.snap.vr.inject.is_empty() && l.deferred < MAX_DEFER {
            let backlog: usize = l.consumers.iter().map(Consumer::len).sum();
            if backlog < COALESCE {
                l.deferred += 1;
                return 0;
            }
        }
        let waited = l.deferred > 0;
        l.deferred = 0;
        let pool = &*self.sh.pool;
        let mut v = PktVec::new();
        // Injected frames first: they are few and carry the control plane's protocols.
        while !v.is_full() {
            let Some(p) = l.snap.vr.inject.pop() else {
                break;
            };
            v.push(p);
        }
        let injected = v.len();
        let mut input = PktVec::new();
        let nc = l.consumers.len();
        for k in 0..nc {
            let i = (l.next_consumer + k) % nc;
            l.consumers[i].pop_burst(&mut input, VECTOR);
            if input.is_full() {
                break;
            }
        }
        if nc > 0 {
            l.next_consumer = (l.next_consumer + 1) % nc;
        }
        if injected == 0 && input.is_empty() {
            return 0;
        }
        let LocalVr { snap, state, .. } = l;
        let mut cx = Ctx {
            pool,
            worker: self.id,
            vr: &snap.vr,
            vifs: &snap.vifs,
            c: &snap.vr.counters[self.id],
            nodes: &self.sh.worker_counters[self.id].nodes,
            ports: &self.sh.port_counters,
            tx: &mut self.tx,
            st: state,
            now_ns,
            waited,
        };
        let n = injected + input.len();
        crate::node::input::inject(&mut cx, &mut v);
        crate::node::input::vr_input(&mut cx, &mut input);
        let t = cycles();
        cx.flush();
        cx.count(Node::Tx, n, cycles().wrapping_sub(t));
        n
    }
}
