//! The control handle: creates VRs and VIFs, publishes what workers read, sums counters.
//!
//! Workers must never wait for the control side, and a change must never be seen half
//! done. So everything a worker reads about the topology — port demux tables, the VR list,
//! each VR's VIFs — is one immutable [`Snapshot`], replaced whole (`arc-swap`) under the
//! control side's mutex. A worker checks one version number per poll and reloads the
//! snapshot only when it moved. FIB and neighbour changes don't go through the snapshot:
//! those tables are lock-free for readers on their own.
//!
//! Removing a VR takes it out of the snapshot; workers drop their references as they notice,
//! the owner returns the packets still queued for it to the pool, and the `Vr` is freed when
//! the last reference goes. Other VRs see nothing of it.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use vrhost_fib::{Config as FibConfig, Fib4, Fib6, NextHop, Prefix4, Prefix6};

use crate::counters::{
    Counter, Drop, N_DROPS, N_NODES, Node, NodeCounters, NodeStats, PortCounters, PortStats,
};
use crate::demux::{PortDemux, VifRef};
use crate::error::DpError;
use crate::fastpath::FastPath;
use crate::neigh::NeighTable;
use crate::policer::Policer;
use crate::pool::{MAX_FRAME, Pkt, Pool};
use crate::port::{PortId, RxQueue, TxQueue};
use crate::ring::{Consumer, ring};
use crate::sched::{Fairness, Scheduler, WATCH_WINDOW, Watchdog};
use crate::vr::{DemuxKey, IfAddr, Vif, VifConfig, VifId, Vr, VrConfig, VrId};
use crate::worker::{Handoff, RxHeld, Worker};

/// Receive queues a data plane can track (ports × queues over all workers).
pub(crate) const MAX_RX_QUEUES: usize = 4096;

/// Largest VR weight.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// Most flow-cache entries a VR may have per address family and worker.
pub const MAX_FLOW_CACHE: usize = 1 << 24;

/// Flow-cache entries a VR has per address family and worker unless configured otherwise.
pub const DEFAULT_FLOW_CACHE: usize = 1024;

/// Largest MTU a VIF may have: a slot's frame room less Ethernet and two VLAN tags.
pub const MAX_MTU: u16 = (MAX_FRAME - 22) as u16;

/// The longest [`Dataplane::set_max_deferral`] takes.
pub const MAX_DEFERRAL: Duration = Duration::from_millis(100);

/// What [`Dataplane::max_deferral`] is until set.
pub const DEFAULT_MAX_DEFERRAL: Duration =
    Duration::from_nanos(crate::deferral::DEFAULT_MAX_WAIT_NS);

/// How to build a data plane.
#[derive(Debug, Clone, Default)]
pub struct DataplaneConfig {
    /// Number of workers (each gets one [`Worker`]).
    pub workers: usize,
    /// Port names, in `PortId` order.
    pub ports: Vec<String>,
    /// Which workers forward a VR's packets.
    pub run_vrs: RunVrs,
}

/// Which workers forward a VR's packets (fixed for the data plane's life). The library's
/// default is [`RunVrs::OnOwner`]; the daemon's (`[dataplane] run_vrs`) is
/// [`RunVrs::WhereReceived`], since it gives every worker a queue of every port.
///
/// Why two ways: DESIGN.md's "keep a packet on one core". With one receive queue per
/// worker (a multi-queue NIC or veth, RSS spreading the flows), a VR whose frames arrive
/// on every queue is best forwarded by each receiving worker itself: handing frames from
/// one CPU to the other caps forwarding near 1 Mpps on these machines, and a VR forwarded
/// by one owner is limited to that owner's core. With fewer receive queues than workers,
/// or VRs each fed by a queue of their own, owners let placement spread the VRs' work over
/// cores the queues alone would not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunVrs {
    /// A VR is forwarded by one worker, its owner; the other workers demultiplex its frames
    /// into rings the owner takes them from. Placement moves VRs between workers by load.
    #[default]
    OnOwner,
    /// Every worker forwards the frames it received itself, for every VR (its own ingress
    /// ring, flow and adjacency caches, ICMP and punt rate limits, scheduler pass and
    /// watchdog history per VR). The owner only sends the control plane's injected
    /// frames and publishes the VR's fast generations; placement moves receive queues only
    /// to fold or unfold workers, and per-flow order holds because a flow's frames arrive on
    /// one queue. The per-VR rate limits are per worker: up to one each per receiving worker.
    WhereReceived,
}

impl RunVrs {
    /// Both ways.
    pub const ALL: [RunVrs; 2] = [RunVrs::OnOwner, RunVrs::WhereReceived];

    /// `on-owner` or `where-received` (the config file's words).
    pub const fn name(self) -> &'static str {
        match self {
            RunVrs::OnOwner => "on-owner",
            RunVrs::WhereReceived => "where-received",
        }
    }
}

/// A VR and its VIFs as workers see them.
#[derive(Debug, Clone)]
pub(crate) struct VrSnap {
    pub(crate) vr: Arc<Vr>,
    pub(crate) vifs: Arc<[Option<Arc<Vif>>]>,
    /// The worker that runs it.
    pub(crate) owner: usize,
    /// Changes to its VIFs so far: part of its fast generation, read with the VIFs it
    /// describes (see [`crate::fastpath`]).
    pub(crate) vif_epoch: u64,
}

impl VrSnap {
    /// This VR with VIF slot `id` set to `vif` (added, replaced or, with `None`, removed):
    /// a new VIF table and the next VIF epoch, so workers' fast paths see the change.
    fn with_vif(&self, id: VifId, vif: Option<Arc<Vif>>) -> VrSnap {
        let mut vifs: Vec<_> = self.vifs.to_vec();
        if vifs.len() <= usize::from(id) {
            vifs.resize(usize::from(id) + 1, None);
        }
        vifs[usize::from(id)] = vif;
        VrSnap {
            vr: self.vr.clone(),
            vifs: vifs.into(),
            owner: self.owner,
            vif_epoch: self.vif_epoch + 1,
        }
    }
}

/// Everything about the topology a worker reads, replaced whole on change.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) version: u64,
    pub(crate) ports: Vec<PortDemux>,
    pub(crate) vrs: Vec<Option<VrSnap>>,
    /// The worker that polls each receive queue (by the queue's index).
    pub(crate) rx_owner: Vec<usize>,
}

/// Per-worker counters not tied to a VR or port.
#[derive(Debug)]
pub(crate) struct WorkerCounters {
    pub(crate) nodes: [NodeCounters; N_NODES],
    /// Drops with no VR (demux).
    pub(crate) drops: [Counter; N_DROPS],
    /// Polls that found no work.
    pub(crate) idle_polls: Counter,
    /// Polls in total.
    pub(crate) polls: Counter,
    /// TSC cycles spent on packets: receive bursts that brought some, and VR vectors (as
    /// accounted to the VRs). Its growth over elapsed TSC is the worker's load.
    pub(crate) busy_cycles: Counter,
    /// Receive queues left unpolled for a poll because every VR they feed had a poll's
    /// worth queued (back-pressure: the excess waits in the NIC).
    pub(crate) rx_held: Counter,
    /// Owned VRs the stride scheduler's scan looked at (their state, not just their sleep).
    pub(crate) vrs_scanned: Counter,
    /// The worker's deferral now, in polls (`crate::deferral`): a gauge.
    pub(crate) deferral: AtomicU64,
    /// Packets received and packets run through VR vectors.
    pub(crate) rx_packets: Counter,
    pub(crate) fwd_packets: Counter,
    /// Cycles and packets of *full* receive bursts and full VR vectors: the cost per packet
    /// when batches are full, which is what a saturated worker pays.
    pub(crate) full_rx_cycles: Counter,
    pub(crate) full_rx_packets: Counter,
    pub(crate) full_fwd_cycles: Counter,
    pub(crate) full_fwd_packets: Counter,
    /// Packets received at the scheduler's picks (`crate::feeder`).
    pub(crate) rx_at_pick: Counter,
}

impl Default for WorkerCounters {
    fn default() -> Self {
        WorkerCounters {
            nodes: Default::default(),
            drops: core::array::from_fn(|_| Counter::default()),
            idle_polls: Counter::default(),
            polls: Counter::default(),
            busy_cycles: Counter::default(),
            rx_held: Counter::default(),
            vrs_scanned: Counter::default(),
            deferral: AtomicU64::new(crate::deferral::BASE),
            rx_packets: Counter::default(),
            fwd_packets: Counter::default(),
            full_rx_cycles: Counter::default(),
            full_rx_packets: Counter::default(),
            full_fwd_cycles: Counter::default(),
            full_fwd_packets: Counter::default(),
            rx_at_pick: Counter::default(),
        }
    }
}

pub(crate) struct Shared {
    pub(crate) pool: Arc<Pool>,
    pub(crate) workers: usize,
    pub(crate) port_names: Vec<String>,
    /// `[port][worker]`.
    pub(crate) port_counters: Vec<Box<[CachePadded<PortCounters>]>>,
    pub(crate) worker_counters: Box<[CachePadded<WorkerCounters>]>,
    pub(crate) snap: ArcSwap<Snapshot>,
    pub(crate) version: AtomicU64,
    ctl: Mutex<Vec<bool>>,
    /// Receive queues between two workers (filled by the one letting go, emptied by the
    /// one taking over), by index.
    pub(crate) rx_slots: Mutex<Vec<Option<RxHeld>>>,
    /// Each receive queue's worker of origin (the one it was given to).
    rx_home: Mutex<Vec<usize>>,
    /// The VR each receive queue mostly feeds (its id + 1; 0: none), as its poller last saw.
    pub(crate) rx_dominant: Box<[AtomicU32]>,
    /// Workers in use for forwarding: `0..active`.
    active: AtomicUsize,
    /// What placement measured last: each VR's cycle counter (by VR, to tell a new VR
    /// with a reused id apart).
    placed: Mutex<Vec<(Arc<Vr>, u64)>>,
    /// The clock every worker reads (policers compare times across workers).
    epoch: Instant,
    /// Test hook: when nonzero, the time in ns instead of the clock.
    test_now: AtomicU64,
    fairness: AtomicU8,
    scheduler: AtomicU8,
    /// Watchdog budget in cycles (0 = off) and strikes.
    watchdog_budget: AtomicU64,
    watchdog_strikes: AtomicU32,
    /// Receive coalescing: how long a worker naps after a light poll, in ns (0 = off).
    rx_coalesce_ns: AtomicU64,
    /// The longest a short backlog may wait under pressure, in ns (0 = never; see
    /// `crate::deferral`).
    pub(crate) max_deferral_ns: AtomicU64,
    /// Bumped after any VR's quarantine flag or policer changes: workers re-read them then,
    /// and demux consults copies in its own per-VR state instead of each VR's shared state
    /// (a cache line per VR per burst with many VRs; the policer's two meters, two more).
    pub(crate) flags_gen: AtomicU64,
    /// Per worker: bumped after a frame is queued for injection into one of its VRs, so a
    /// worker looks at its VRs' inject queues only when there may be something in them
    /// (two cache lines per VR per poll otherwise).
    pub(crate) inject_bell: Box<[CachePadded<AtomicU64>]>,
    /// Per worker: the VRs it runs that packets were queued for (see [`crate::wake`]).
    pub(crate) wake: Box<[crate::wake::WakeBits]>,
    /// Per worker: the VRs it runs that other workers' demux queued packets for in a burst,
    /// whatever the count; they end the VRs' idle sleeps (see [`crate::wake`]).
    pub(crate) arrive: Box<[crate::wake::WakeBits]>,
    /// The fast path in front of the data plane, if any (see [`crate::fastpath`]).
    pub(crate) fast: std::sync::OnceLock<Arc<dyn FastPath>>,
    /// VRs created so far: each new VR's fast generations start above every earlier one's.
    fast_seq: AtomicU64,
    pub(crate) run_vrs: RunVrs,
}

impl Shared {
    #[inline]
    pub(crate) fn rx_coalesce(&self) -> Duration {
        Duration::from_nanos(self.rx_coalesce_ns.load(Ordering::Relaxed))
    }

    /// Nanoseconds since the data plane was made (or the test clock).
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        match self.test_now.load(Ordering::Relaxed) {
            0 => self.epoch.elapsed().as_nanos() as u64,
            t => t,
        }
    }

    #[inline]
    pub(crate) fn fairness(&self) -> Fairness {
        match self.fairness.load(Ordering::Relaxed) {
            0 => Fairness::Packets,
            _ => Fairness::Cycles,
        }
    }

    #[inline]
    pub(crate) fn scheduler(&self) -> Scheduler {
        match self.scheduler.load(Ordering::Relaxed) {
            0 => Scheduler::Stride,
            _ => Scheduler::RoundRobin,
        }
    }

    #[inline]
    pub(crate) fn watchdog(&self) -> Option<Watchdog> {
        match self.watchdog_budget.load(Ordering::Relaxed) {
            0 => None,
            b => Some(Watchdog {
                budget_cycles: b,
                strikes: self.watchdog_strikes.load(Ordering::Relaxed),
            }),
        }
    }
}

/// One worker's load, as [`Dataplane::worker_stats`] reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WorkerStats {
    /// Polls in total.
    pub polls: u64,
    /// Polls that found no work.
    pub idle_polls: u64,
    /// TSC cycles spent on packets (receive bursts that brought some, VR vectors); its growth
    /// ÷ elapsed TSC is the worker's load — a poll-mode worker spins all the time, so how
    /// much of that time went to packets is what tells a saturated core from an idle one.
    pub busy_cycles: u64,
    /// Receive queues left unpolled under back-pressure (per poll and queue).
    pub rx_held: u64,
    /// Packets received when the scheduler picked their VR: from a receive queue that feeds
    /// one VR alone, read a vector at a time as that VR's turn comes, so that each vector
    /// is forwarded while still in the caches (counted in `rx_packets` too).
    pub rx_at_pick: u64,
    /// Owned VRs the scheduler looked at, summed over polls: VRs asleep (deferred, or idle
    /// and fed only by this worker) are skipped, so with many idle VRs this grows with the
    /// traffic, not with the VR count (`crate::wake`).
    pub vrs_scanned: u64,
    /// How many polls a VR with a short backlog may be passed over under pressure, now: 32,
    /// more while most of the worker's packets run in small vectors (traffic spread over
    /// many VRs), which trades their latency for fewer, fuller runs; fewer if
    /// [`Dataplane::set_max_deferral`]'s bound allows fewer, 0 with deferring off.
    pub deferral_polls: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Packets run through its VRs' vectors.
    pub fwd_packets: u64,
    /// Cycles per packet of full receive bursts (0 if none seen yet): what receiving costs
    /// the worker per packet when it is saturated.
    pub full_rx_cost: f64,
    /// Cycles per packet of full VR vectors (0 if none seen yet).
    pub full_fwd_cost: f64,
    /// VRs assigned to the worker.
    pub vrs: usize,
    /// Receive queues it polls.
    pub rx_queues: usize,
    /// Whether it is in use for forwarding.
    pub active: bool,
}

/// The data plane's control handle. Cheap to clone; every method may be called from any
/// thread while workers run.
#[derive(Clone)]
pub struct Dataplane(pub(crate) Arc<Shared>);

impl core::fmt::Debug for Dataplane {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Dataplane")
            .field("workers", &self.0.workers)
            .field("ports", &self.0.port_names)
            .finish_non_exhaustive()
    }
}

fn bad(what: &str, field: &'static str, reason: impl Into<String>) -> DpError {
    DpError::BadField {
        what: what.to_string(),
        field,
        reason: reason.into(),
    }
}

fn per_worker<T: Default>(n: usize) -> Box<[CachePadded<T>]> {
    (0..n).map(|_| CachePadded::new(T::default())).collect()
}

impl Dataplane {
    /// A data plane over `pool` with the given workers and ports, and no VRs yet.
    pub fn new(pool: Arc<Pool>, config: DataplaneConfig) -> Result<Dataplane, DpError> {
        if config.workers == 0 || config.workers > 256 {
            return Err(bad("data plane", "workers", "must be 1..=256"));
        }
        if config.ports.len() > usize::from(u16::MAX) {
            return Err(DpError::TooMany("ports"));
        }
        let snap = Snapshot {
            version: 0,
            ports: vec![PortDemux::default(); config.ports.len()],
            vrs: Vec::new(),
            rx_owner: Vec::new(),
        };
        Ok(Dataplane(Arc::new(Shared {
            pool,
            workers: config.workers,
            port_counters: (0..config.ports.len())
                .map(|_| per_worker(config.workers))
                .collect(),
            port_names: config.ports,
            worker_counters: per_worker(config.workers),
            snap: ArcSwap::from_pointee(snap),
            version: AtomicU64::new(0),
            ctl: Mutex::new(vec![false; config.workers]),
            rx_slots: Mutex::new(Vec::new()),
            rx_home: Mutex::new(Vec::new()),
            rx_dominant: (0..MAX_RX_QUEUES).map(|_| AtomicU32::new(0)).collect(),
            active: AtomicUsize::new(config.workers),
            placed: Mutex::new(Vec::new()),
            epoch: Instant::now(),
            test_now: AtomicU64::new(0),
            fairness: AtomicU8::new(0),
            rx_coalesce_ns: AtomicU64::new(0),
            max_deferral_ns: AtomicU64::new(crate::deferral::DEFAULT_MAX_WAIT_NS),
            flags_gen: AtomicU64::new(0),
            inject_bell: (0..config.workers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            wake: (0..config.workers).map(|_| Default::default()).collect(),
            arrive: (0..config.workers).map(|_| Default::default()).collect(),
            scheduler: AtomicU8::new(0),
            watchdog_budget: AtomicU64::new(0),
            watchdog_strikes: AtomicU32::new(3),
            fast: std::sync::OnceLock::new(),
            fast_seq: AtomicU64::new(0),
            run_vrs: config.run_vrs,
        })))
    }

    /// Which workers forward a VR's packets.
    pub fn run_vrs(&self) -> RunVrs {
        self.0.run_vrs
    }

    /// The packet pool.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.0.pool
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.0.workers
    }

    /// Port names in `PortId` order.
    pub fn ports(&self) -> &[String] {
        &self.0.port_names
    }

    /// The worker with index `index`, driving the given queues: `rx` lists the receive queues
    /// it polls (with their port); `tx` has one transmit queue per port, in `PortId` order.
    /// Each index can be taken once.
    pub fn worker(
        &self,
        index: usize,
        rx: Vec<(PortId, Box<dyn RxQueue>)>,
        tx: Vec<Box<dyn TxQueue>>,
    ) -> Result<Worker, DpError> {
        let err = |reason| DpError::Worker { index, reason };
        if index >= self.0.workers {
            return Err(err("out of range"));
        }
        if tx.len() != self.0.port_names.len() {
            return Err(err("needs exactly one tx queue per port"));
        }
        if let Some((p, _)) = rx
            .iter()
            .find(|(p, _)| usize::from(*p) >= self.0.port_names.len())
        {
            return Err(DpError::NoPort(*p));
        }
        let mut taken = self.ctl();
        if taken[index] {
            return Err(err("already taken"));
        }
        let mut home = self.0.rx_home.lock().unwrap_or_else(|e| e.into_inner());
        if home.len() + rx.len() > MAX_RX_QUEUES {
            return Err(DpError::TooMany("receive queues"));
        }
        taken[index] = true;
        let first = home.len();
        home.extend(std::iter::repeat_n(index, rx.len()));
        self.0
            .rx_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .resize_with(home.len(), || None);
        // Given to an inactive worker, the queues start with worker 0.
        let at = if index < self.active_workers() {
            index
        } else {
            0
        };
        let held: Vec<RxHeld> = rx
            .into_iter()
            .enumerate()
            .map(|(i, (port, q))| RxHeld {
                id: first + i,
                port,
                q,
                track: Default::default(),
                marks: Vec::new(),
                fences: Vec::new(),
            })
            .collect();
        let mut parked = Vec::new();
        let mut mine = Vec::new();
        for h in held {
            if at == index {
                mine.push(h);
            } else {
                parked.push(h);
            }
        }
        {
            let mut slots = self.0.rx_slots.lock().unwrap_or_else(|e| e.into_inner());
            for h in parked {
                let id = h.id;
                slots[id] = Some(h);
            }
        }
        let n = home.len();
        drop(home);
        self.publish(|s| s.rx_owner.resize(n, at));
        Ok(Worker::new(self.0.clone(), index, mine, tx))
    }

    fn ctl(&self) -> std::sync::MutexGuard<'_, Vec<bool>> {
        self.0.ctl.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, f: impl FnOnce(&mut Snapshot)) {
        let cur = self.0.snap.load();
        let mut next = Snapshot {
            version: cur.version + 1,
            ports: cur.ports.clone(),
            vrs: cur.vrs.clone(),
            rx_owner: cur.rx_owner.clone(),
        };
        f(&mut next);
        let v = next.version;
        self.0.snap.store(Arc::new(next));
        self.0.version.store(v, Ordering::Release);
    }

    fn find(&self, name: &str) -> Option<VrSnap> {
        self.0
            .snap
            .load()
            .vrs
            .iter()
            .flatten()
            .find(|s| s.vr.config.name == name)
            .cloned()
    }

    /// Create a VR.
    pub fn add_vr(&self, config: VrConfig) -> Result<Arc<Vr>, DpError> {
        let what = format!("virtual router {:?}", config.name);
        if config.name.is_empty() {
            return Err(bad(&what, "name", "must not be empty"));
        }
        check_weight(&what, config.weight)?;
        check_policer(&what, config.policer_pps, config.policer_bps)?;
        if config.ingress_ring < 2 || config.ingress_ring > 1 << 20 {
            return Err(bad(&what, "ingress_ring", "must be 2..=1048576"));
        }
        if config.punt_queue == 0 || config.punt_queue > 1 << 20 {
            return Err(bad(&what, "punt_queue", "must be 1..=1048576"));
        }
        if config.flow_cache > MAX_FLOW_CACHE {
            return Err(bad(
                &what,
                "flow_cache",
                format!("must be at most {MAX_FLOW_CACHE} entries"),
            ));
        }
        if !(8..=24).contains(&config.fib4_top_bits) {
            return Err(bad(&what, "fib4_top_bits", "must be 8..=24"));
        }
        if !(8..=24).contains(&config.fib6_top_bits) {
            return Err(bad(&what, "fib6_top_bits", "must be 8..=24"));
        }
        if let Some(w) = config.worker
            && w >= self.0.workers
        {
            return Err(bad(
                &what,
                "worker",
                format!("{w} but there are {} workers", self.0.workers),
            ));
        }
        let _g = self.ctl();
        let snap = self.0.snap.load();
        if snap
            .vrs
            .iter()
            .flatten()
            .any(|s| s.vr.config.name == config.name)
        {
            return Err(DpError::VrExists(config.name));
        }
        let id = match snap.vrs.iter().position(Option::is_none) {
            Some(i) => i,
            None if snap.vrs.len() < usize::from(VrId::MAX) => snap.vrs.len(),
            None => return Err(DpError::TooMany("virtual routers")),
        } as VrId;
        // The worker in use (see `set_active_workers`) with the fewest VRs.
        let owner = config.worker.unwrap_or_else(|| {
            let mut load = vec![0usize; self.0.workers];
            for s in snap.vrs.iter().flatten() {
                load[s.owner] += 1;
            }
            (0..self.active_workers())
                .min_by_key(|w| load[*w])
                .unwrap_or(0)
        });
        let (tx, mut rx): (Vec<_>, Vec<_>) = (0..self.0.workers)
            .map(|_| ring(config.ingress_ring))
            .unzip();
        // Where received, each worker consumes the ring it feeds; the owner takes none.
        let local: Box<[Mutex<Option<Consumer>>]> = match self.0.run_vrs {
            RunVrs::OnOwner => (0..self.0.workers).map(|_| Mutex::new(None)).collect(),
            RunVrs::WhereReceived => rx.drain(..).map(|c| Mutex::new(Some(c))).collect(),
        };
        let policer = Policer::default();
        policer.set(config.policer_pps, config.policer_bps);
        let vr = Arc::new(Vr {
            id,
            owner: AtomicUsize::new(owner),
            pinned: AtomicUsize::new(config.worker.unwrap_or(usize::MAX)),
            extra_cost: AtomicU32::new(0),
            extra_wait_us: AtomicU32::new(0),
            weight: AtomicU32::new(config.weight),
            quarantined: AtomicBool::new(false),
            policer,
            fast_base: (self.0.fast_seq.fetch_add(1, Ordering::Relaxed) + 1)
                << crate::fastpath::BASE_SHIFT,
            fast_epoch: AtomicU64::new(0),
            fib4: Fib4::with_config(FibConfig {
                top_bits: config.fib4_top_bits,
            }),
            fib6: Fib6::with_config(FibConfig {
                top_bits: config.fib6_top_bits,
            }),
            neigh: NeighTable::default(),
            pool: self.0.pool.clone(),
            ingress_tx: tx.into_iter().map(|p| Mutex::new(Some(p))).collect(),
            ingress_local: local,
            handoff: Mutex::new(Some(Handoff::new(rx))),
            removed: AtomicBool::new(false),
            punt: ArrayQueue::new(config.punt_queue),
            inject: ArrayQueue::new(1024),
            counters: per_worker(self.0.workers),
            config,
        });
        drop(snap);
        self.publish(|s| {
            let i = usize::from(id);
            if s.vrs.len() <= i {
                s.vrs.resize(i + 1, None);
            }
            s.vrs[i] = Some(VrSnap {
                vr: vr.clone(),
                vifs: Arc::from(Vec::new()),
                owner,
                vif_epoch: 0,
            });
        });
        Ok(vr)
    }

    /// Remove a VR and all its VIFs. Packets queued for it are dropped; other VRs are not
    /// touched.
    pub fn remove_vr(&self, name: &str) -> Result<(), DpError> {
        let _g = self.ctl();
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        self.publish(|snap| {
            for vif in s.vifs.iter().flatten() {
                let r = VifRef {
                    vr: s.vr.id,
                    vif: vif.id,
                };
                snap.ports[usize::from(vif.config.port)].remove(&vif.config, r);
            }
            snap.vrs[usize::from(s.vr.id)] = None;
        });
        // Rings waiting in the hand-off slot (a VR created or moving, not yet taken over)
        // have no owner to drain them now.
        {
            let mut slot = s.vr.handoff.lock().unwrap_or_else(|e| e.into_inner());
            s.vr.removed.store(true, Ordering::Relaxed);
            if let Some(h) = slot.as_mut() {
                h.retire(&self.0.pool);
            }
        }
        if let Some(fp) = self.0.fast.get() {
            fp.publish(s.vr.id, crate::fastpath::retired(s.vr.fast_base));
        }
        Ok(())
    }

    /// Change VR `name`'s scheduling weight (1..=[`MAX_WEIGHT`]); its worker charges the
    /// next vector with it.
    pub fn set_weight(&self, name: &str, weight: u32) -> Result<(), DpError> {
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        check_weight(&format!("virtual router {name:?}"), weight)?;
        s.vr.weight.store(weight, Ordering::Relaxed);
        Ok(())
    }

    /// Set or clear VR `name`'s ingress policer (packets/s, bits/s; `None` = no limit, 0 is
    /// refused). Applies from each worker's next poll.
    pub fn set_policer(
        &self,
        name: &str,
        pps: Option<u64>,
        bps: Option<u64>,
    ) -> Result<(), DpError> {
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        check_policer(&format!("virtual router {name:?}"), pps, bps)?;
        s.vr.policer.set(pps, bps);
        s.vr.bump_fast();
        self.0.flags_gen.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Put a fast path in front of the data plane (see [`crate::fastpath`]): workers offer it
    /// their plain IPv4 and IPv6 forwarding decisions and publish each VR's generation to it. Once per
    /// data plane, before traffic: a second call is refused.
    pub fn set_fast_path(&self, fp: Arc<dyn FastPath>) -> Result<(), DpError> {
        self.0
            .fast
            .set(fp)
            .map_err(|_| bad("data plane", "fast_path", "already set"))
    }

    /// Packets and bytes the fast path forwarded for VR `name` (zeros without one).
    pub fn fast_counts(&self, name: &str) -> Result<(u64, u64), DpError> {
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        Ok(self.0.fast.get().map_or((0, 0), |fp| fp.counts(s.vr.id)))
    }

    /// Share workers by packets or by CPU cycles (takes effect at the next vector).
    pub fn set_fairness(&self, f: Fairness) {
        self.0.fairness.store(f as u8, Ordering::Relaxed);
    }

    /// What workers share out.
    pub fn fairness(&self) -> Fairness {
        self.0.fairness()
    }

    /// Receive coalescing (off, `Duration::ZERO`, by default): after a poll that received
    /// fewer than half a vector (128 packets), a worker sleeps
    /// this long before polling again, so that frames gather into fuller vectors — what a
    /// NIC's interrupt moderation (`rx-usecs`) does for the kernel. Why: every vector pays
    /// fixed costs (the FIB batch set-up, scheduling, tx bursts); at a light load a polling
    /// worker runs vectors of one or two packets and pays them per packet (measured with
    /// `vrbench inproc`: ~1,370 cycles per packet at 1.1 packets per vector against ~140 at
    /// 256), so a core forwarding a tenth of its capacity is nearly fully busy — CPU the
    /// host's own applications could have had (Tanyingyong). The price is up to this much
    /// latency on light traffic; full vectors never wait. At most 1 ms.
    pub fn set_rx_coalesce(&self, d: Duration) -> Result<(), DpError> {
        if d > Duration::from_millis(1) {
            return Err(bad(
                "data plane",
                "rx_coalesce",
                format!("{d:?} is above 1 ms"),
            ));
        }
        self.0
            .rx_coalesce_ns
            .store(d.as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The receive coalescing delay (zero: off).
    pub fn rx_coalesce(&self) -> Duration {
        self.0.rx_coalesce()
    }

    /// The longest a VR's short backlog may wait for a fuller vector while the worker is
    /// under pressure (a receive queue gave a full burst): the bound on the worker's
    /// deferral, which grows while its vectors are small (see `crate::deferral`). Why it is
    /// a setting: each vector pays fixed costs, so with traffic spread over many VRs longer
    /// waits carry more (1,000 VRs at full load: 1.4–1.6× with deferrals of about 64 polls
    /// against 32, perf.md session 42), at the price of that much queueing delay for every
    /// VR with a short backlog. Zero turns deferring off: under pressure every VR runs
    /// whatever it has. Light traffic is never deferred, whatever this is. Default 10 ms,
    /// at most 100 ms; takes effect from the workers' next poll.
    ///
    /// The bound is turned into polls at the poll length the worker measured over its last
    /// 64 polls, so it holds the fixed base of 32 polls too. Shorter deferrals run smaller
    /// vectors and so longer polls: a bound below what the worker's VRs need to gather a
    /// few packets each cannot be met, and the deferral falls to one poll. 1,000 VRs at
    /// full load carried 0.12–0.18× as much with deferring off as with the default, and
    /// about as little with a bound of 1–2 ms (perf.md, session 43). What packets really
    /// waited: each VR's [`crate::VrStats::ingress_wait`] (see `crate::wait`).
    pub fn set_max_deferral(&self, d: Duration) -> Result<(), DpError> {
        if d > MAX_DEFERRAL {
            return Err(bad(
                "data plane",
                "max_deferral",
                format!("{d:?} is above {MAX_DEFERRAL:?}"),
            ));
        }
        self.0
            .max_deferral_ns
            .store(d.as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The bound on how long a short backlog waits under pressure (zero: it does not).
    pub fn max_deferral(&self) -> Duration {
        Duration::from_nanos(self.0.max_deferral_ns.load(Ordering::Relaxed))
    }

    /// Pick the scheduler (the round-robin baseline exists for same-run comparisons).
    pub fn set_scheduler(&self, s: Scheduler) {
        self.0.scheduler.store(s as u8, Ordering::Relaxed);
    }

    /// The scheduler in use.
    pub fn scheduler(&self) -> Scheduler {
        self.0.scheduler()
    }

    /// Turn the watchdog on (or off with `None`). Off by default: the budget is in TSC
    /// cycles, so its user converts from time (see [`crate::tsc_hz`]).
    pub fn set_watchdog(&self, w: Option<Watchdog>) -> Result<(), DpError> {
        match w {
            None => self.0.watchdog_budget.store(0, Ordering::Relaxed),
            Some(w) => {
                if w.budget_cycles == 0 {
                    return Err(bad("watchdog", "budget", "must be above 0"));
                }
                if !(1..=WATCH_WINDOW).contains(&w.strikes) {
                    return Err(bad(
                        "watchdog",
                        "strikes",
                        format!("{} not in 1..={WATCH_WINDOW}", w.strikes),
                    ));
                }
                self.0.watchdog_strikes.store(w.strikes, Ordering::Relaxed);
                self.0
                    .watchdog_budget
                    .store(w.budget_cycles, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// The watchdog's rule, if on.
    pub fn watchdog(&self) -> Option<Watchdog> {
        self.0.watchdog()
    }

    /// Let a quarantined VR run again (its watchdog history starts afresh). Returns whether
    /// it was quarantined.
    pub fn release_vr(&self, name: &str) -> Result<bool, DpError> {
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        let was = s.vr.quarantined.swap(false, Ordering::Relaxed);
        s.vr.bump_fast();
        self.0.flags_gen.fetch_add(1, Ordering::Release);
        Ok(was)
    }

    /// Move VR `name` to worker `to`. The old owner lets go between two vectors, the new
    /// one starts once the old one's transmit queues have sent what the VR gave them: no
    /// packet of the VR runs on two cores at once or is reordered. Pinned VRs may be moved
    /// by this call (placement never moves them on its own).
    pub fn move_vr(&self, name: &str, to: usize) -> Result<(), DpError> {
        self.check_worker(name, to)?;
        let _g = self.ctl();
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        self.moved(&s, to);
        Ok(())
    }

    fn check_worker(&self, name: &str, to: usize) -> Result<(), DpError> {
        if to >= self.0.workers {
            return Err(bad(
                &format!("virtual router {name:?}"),
                "worker",
                format!("{to} but there are {} workers", self.0.workers),
            ));
        }
        Ok(())
    }

    /// Publish `s`'s new owner (under the control lock).
    fn moved(&self, s: &VrSnap, to: usize) {
        if s.owner == to {
            return;
        }
        s.vr.owner.store(to, Ordering::Relaxed);
        self.publish(|snap| {
            if let Some(v) = snap.vrs[usize::from(s.vr.id)].as_mut() {
                v.owner = to;
            }
        });
    }

    /// Pin VR `name` to worker `to` (and move it there), or unpin it (`None`: it stays
    /// where it is until placement moves it).
    pub fn pin_vr(&self, name: &str, to: Option<usize>) -> Result<(), DpError> {
        if let Some(w) = to {
            self.check_worker(name, w)?;
        }
        let _g = self.ctl();
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        s.vr.pinned
            .store(to.unwrap_or(usize::MAX), Ordering::Relaxed);
        if let Some(w) = to {
            self.moved(&s, w);
        }
        Ok(())
    }

    /// Balance VRs over the workers in use by the CPU they used since the last call (see
    /// [`crate::placement`]), and give each receive queue that mostly feeds one VR to that
    /// VR's worker (so its packets stay on one core): returns the VR moves made, `(VR, from,
    /// to)`. Pinned VRs stay. `margin` is the hysteresis (0.1: a move must cut the busiest
    /// worker's load by more than 10 %), `max_moves` the most VRs moved per call. Call it
    /// periodically (the daemon: every second). With [`RunVrs::WhereReceived`] a VR's load
    /// lies where its frames arrive, so nothing is moved for load: owners (injected frames)
    /// leave workers out of use and go back to their pins, and receive queues stay home.
    /// A margin that is negative or not a number is refused, and nothing moves.
    pub fn rebalance(
        &self,
        margin: f64,
        max_moves: usize,
    ) -> Result<Vec<(String, usize, usize)>, DpError> {
        if !(margin.is_finite() && margin >= 0.0) {
            return Err(bad(
                "data plane",
                "rebalance margin",
                format!("{margin} is not a finite fraction of 0 or more"),
            ));
        }
        let _g = self.ctl();
        Ok(self.replan(self.active_workers(), margin, max_moves))
    }

    /// Workers in use for forwarding (`0..n`; all of them unless
    /// [`Dataplane::set_active_workers`] said otherwise).
    pub fn active_workers(&self) -> usize {
        self.0.active.load(Ordering::Relaxed)
    }

    /// Forward on workers `0..n` only (1 ≤ n ≤ workers): VRs and receive queues of the
    /// others move onto them, and VRs are spread over them by measured load. A worker with
    /// nothing to do backs off to sleeping (1 ms), leaving its core to other work. Nothing
    /// is lost or reordered by the moves (see [`Dataplane::move_vr`]; a receive queue moves
    /// the same way: its new poller starts once the VRs' owners have taken what the old
    /// one received). Returns the VR moves made.
    pub fn set_active_workers(&self, n: usize) -> Result<Vec<(String, usize, usize)>, DpError> {
        if !(1..=self.0.workers).contains(&n) {
            return Err(bad(
                "data plane",
                "active workers",
                format!("{n} not in 1..={}", self.0.workers),
            ));
        }
        let _g = self.ctl();
        self.0.active.store(n, Ordering::Relaxed);
        Ok(self.replan(n, 0.05, usize::MAX))
    }

    /// Place VRs on workers `0..active` (see [`crate::placement`]) and receive queues after
    /// them, in one published snapshot. Under the control lock.
    fn replan(&self, active: usize, margin: f64, max_moves: usize) -> Vec<(String, usize, usize)> {
        let usable: Vec<usize> = (0..active).collect();
        let snap = self.0.snap.load_full();
        let mut placed = self.0.placed.lock().unwrap_or_else(|e| e.into_inner());
        let home = self
            .0
            .rx_home
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // The home worker of the queue each VR dominates, if any.
        let mut prefer: Vec<Option<usize>> = vec![None; snap.vrs.len()];
        for (q, &h) in home.iter().enumerate() {
            if let Some(v) = self.0.rx_dominant[q].load(Ordering::Relaxed).checked_sub(1)
                && let Some(p) = prefer.get_mut(v as usize)
                && h < active
            {
                *p = Some(h);
            }
        }
        let mut vrs = Vec::new();
        let mut loads = Vec::new();
        let mut next = Vec::new();
        // A pinned VR goes back to its worker when that is in use again, and stays there.
        let mut moves = Vec::new();
        for s in snap.vrs.iter().flatten() {
            let cycles = s.vr.stats().cycles;
            let before = placed
                .iter()
                .find(|(v, _)| Arc::ptr_eq(v, &s.vr))
                .map_or(cycles, |(_, c)| *c);
            next.push((s.vr.clone(), cycles));
            let pin = s.vr.pinned().filter(|&w| w < active);
            if let Some(w) = pin
                && w != s.owner
            {
                moves.push((loads.len(), w));
            }
            loads.push(crate::placement::VrLoad {
                worker: pin.unwrap_or(s.owner),
                pinned: pin.is_some(),
                load: cycles.saturating_sub(before) as f64,
                prefer: prefer[usize::from(s.vr.id)],
            });
            vrs.push(s.clone());
        }
        *placed = next;
        // Where received, a VR's load is where its frames arrive: moving its owner would
        // move only the injected frames, so owners move off unused workers, and no more.
        let local = self.0.run_vrs == RunVrs::WhereReceived;
        let balance = if local { 0 } else { max_moves };
        moves.extend(crate::placement::plan(&loads, &usable, margin, balance));
        let mut owner: Vec<Option<usize>> = snap
            .vrs
            .iter()
            .map(|s| s.as_ref().map(|s| s.owner))
            .collect();
        let mut out = Vec::new();
        for &(i, to) in &moves {
            let s = &vrs[i];
            owner[usize::from(s.vr.id)] = Some(to);
            out.push((s.vr.name().to_string(), s.owner, to));
        }
        let home = self
            .0
            .rx_home
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let rx_owner: Vec<usize> = snap
            .rx_owner
            .iter()
            .enumerate()
            .map(|(q, &cur)| {
                let dom = self.0.rx_dominant[q].load(Ordering::Relaxed);
                let follow = dom
                    .checked_sub(1)
                    .filter(|_| !local)
                    .and_then(|v| owner.get(v as usize).copied().flatten())
                    .filter(|&w| w < active);
                match follow {
                    Some(w) => w,
                    None if home[q] < active => home[q],
                    None if cur < active => cur,
                    None => q % active,
                }
            })
            .collect();
        if out.is_empty() && rx_owner == snap.rx_owner {
            return out;
        }
        for (name, _, to) in &out {
            if let Some(s) = vrs.iter().find(|s| s.vr.name() == name) {
                s.vr.owner.store(*to, Ordering::Relaxed);
            }
        }
        self.publish(|s| {
            for v in s.vrs.iter_mut().flatten() {
                if let Some(Some(w)) = owner.get(usize::from(v.vr.id)) {
                    v.owner = *w;
                }
            }
            s.rx_owner = rx_owner;
        });
        out
    }

    /// Measurement element: make VR `name`'s forwarding path burn `cycles_per_packet` more
    /// TSC cycles per packet (0: off) — what Egi et al. did with "a few expensive Click
    /// elements" to get a path that costs more (Fig. 7), and a way to make a path hold its
    /// core past the watchdog's budget. For benchmarks and tests; routers never need it.
    #[doc(hidden)]
    pub fn set_extra_cost(&self, name: &str, cycles_per_packet: u32) -> Result<(), DpError> {
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        s.vr.extra_cost.store(cycles_per_packet, Ordering::Relaxed);
        Ok(())
    }

    /// Make VR `name`'s path sleep `us` microseconds per vector: the worker's thread off its
    /// CPU as when the OS preempts it, which the watchdog must excuse. For tests; routers
    /// never need it.
    #[doc(hidden)]
    pub fn set_extra_wait(&self, name: &str, us: u32) -> Result<(), DpError> {
        let s = self.find(name).ok_or_else(|| DpError::NoVr(name.into()))?;
        s.vr.extra_wait_us.store(us, Ordering::Relaxed);
        Ok(())
    }

    /// Test hook: freeze the data plane's clock at `ns` (`None`: the real clock again).
    #[doc(hidden)]
    pub fn set_test_time(&self, ns: Option<u64>) {
        self.0
            .test_now
            .store(ns.map_or(0, |t| t.max(1)), Ordering::Relaxed);
    }

    /// Each worker's load and VRs.
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        let snap = self.0.snap.load();
        self.0
            .worker_counters
            .iter()
            .enumerate()
            .map(|(i, w)| WorkerStats {
                polls: w.polls.get(),
                idle_polls: w.idle_polls.get(),
                busy_cycles: w.busy_cycles.get(),
                rx_held: w.rx_held.get(),
                rx_at_pick: w.rx_at_pick.get(),
                vrs_scanned: w.vrs_scanned.get(),
                deferral_polls: w.deferral.load(Ordering::Relaxed),
                rx_packets: w.rx_packets.get(),
                fwd_packets: w.fwd_packets.get(),
                full_rx_cost: w.full_rx_cycles.get() as f64 / w.full_rx_packets.get().max(1) as f64,
                full_fwd_cost: w.full_fwd_cycles.get() as f64
                    / w.full_fwd_packets.get().max(1) as f64,
                vrs: snap.vrs.iter().flatten().filter(|s| s.owner == i).count(),
                rx_queues: snap.rx_owner.iter().filter(|&&o| o == i).count(),
                active: i < self.active_workers(),
            })
            .collect()
    }

    /// The VR called `name`.
    pub fn vr(&self, name: &str) -> Option<Arc<Vr>> {
        self.find(name).map(|s| s.vr)
    }

    /// All VRs, by id.
    pub fn vrs(&self) -> Vec<Arc<Vr>> {
        self.0
            .snap
            .load()
            .vrs
            .iter()
            .flatten()
            .map(|s| s.vr.clone())
            .collect()
    }

    /// The VIFs of VR `vr`.
    pub fn vifs(&self, vr: &str) -> Result<Vec<Arc<Vif>>, DpError> {
        let s = self.find(vr).ok_or_else(|| DpError::NoVr(vr.into()))?;
        Ok(s.vifs.iter().flatten().cloned().collect())
    }

    /// The VIF `vif` of VR `vr`.
    pub fn vif(&self, vr: &str, vif: &str) -> Option<Arc<Vif>> {
        let s = self.find(vr)?;
        s.vifs
            .iter()
            .flatten()
            .find(|v| v.config.name == vif)
            .cloned()
    }

    /// Add a VIF to VR `vr`. Its addresses become local routes (punted) and its subnets
    /// attached routes in the VR's FIBs, as `ip addr add` does in Linux.
    pub fn add_vif(&self, vr: &str, config: VifConfig) -> Result<VifId, DpError> {
        let what = format!("interface {:?} of {:?}", config.name, vr);
        if config.name.is_empty() {
            return Err(bad(&what, "name", "must not be empty"));
        }
        if usize::from(config.port) >= self.0.port_names.len() {
            return Err(bad(
                &what,
                "port",
                format!(
                    "{} but there are {} ports",
                    config.port,
                    self.0.port_names.len()
                ),
            ));
        }
        if !(68..=MAX_MTU).contains(&config.mtu) {
            return Err(bad(
                &what,
                "mtu",
                format!("{} not in 68..={MAX_MTU}", config.mtu),
            ));
        }
        if let Some(v) = config.vlan
            && !(1..=4094).contains(&v)
        {
            return Err(bad(&what, "vlan", format!("{v} not in 1..=4094")));
        }
        if config.key == DemuxKey::Vlan && config.vlan.is_none() {
            return Err(bad(&what, "key", "demux by VLAN needs a vlan id"));
        }
        if !config.mac.is_unicast() {
            return Err(bad(&what, "mac", format!("{} is not unicast", config.mac)));
        }
        for a in &config.addrs {
            match *a {
                IfAddr::V4(ip, len) => {
                    if len > 32 || ip.is_multicast() || ip.is_broadcast() || ip.is_unspecified() {
                        return Err(bad(&what, "addrs", format!("{ip}/{len} is not usable")));
                    }
                }
                IfAddr::V6(ip, len) => {
                    if len > 128 || ip.is_multicast() || ip.is_unspecified() {
                        return Err(bad(&what, "addrs", format!("{ip}/{len} is not usable")));
                    }
                }
            }
        }
        let _g = self.ctl();
        let s = self.find(vr).ok_or_else(|| DpError::NoVr(vr.into()))?;
        if s.vifs
            .iter()
            .flatten()
            .any(|v| v.config.name == config.name)
        {
            return Err(DpError::VifExists {
                vr: vr.into(),
                vif: config.name,
            });
        }
        let id = match s.vifs.iter().position(Option::is_none) {
            Some(i) => i,
            None if s.vifs.len() < usize::from(VifId::MAX) => s.vifs.len(),
            None => return Err(DpError::TooMany("interfaces")),
        } as VifId;
        let r = VifRef {
            vr: s.vr.id,
            vif: id,
        };
        let mut demux = self.0.snap.load().ports[usize::from(config.port)].clone();
        demux.add(&config, r).map_err(|reason| DpError::Demux {
            vr: vr.into(),
            vif: config.name.clone(),
            reason,
        })?;
        install_addr_routes(&s.vr, id, &config.addrs)?;
        let vif = Arc::new(Vif {
            id,
            config,
            counters: per_worker(self.0.workers).into(),
        });
        self.publish(|snap| {
            snap.ports[usize::from(vif.config.port)] = demux;
            snap.vrs[usize::from(s.vr.id)] = Some(s.with_vif(id, Some(vif.clone())));
        });
        Ok(id)
    }

    /// Remove a VIF: its demux entry, address routes and neighbours go; routes through it
    /// stay in the FIB (as in Linux until the routing daemon withdraws them) and drop as
    /// `no-vif`.
    pub fn remove_vif(&self, vr: &str, vif: &str) -> Result<(), DpError> {
        let _g = self.ctl();
        let s = self.find(vr).ok_or_else(|| DpError::NoVr(vr.into()))?;
        let v = s
            .vifs
            .iter()
            .flatten()
            .find(|v| v.config.name == vif)
            .cloned()
            .ok_or_else(|| DpError::NoVif {
                vr: vr.into(),
                vif: vif.into(),
            })?;
        remove_addr_routes(&s.vr, v.id, &v.config.addrs);
        s.vr.neigh.remove_vif(v.id);
        self.publish(|snap| {
            let r = VifRef {
                vr: s.vr.id,
                vif: v.id,
            };
            snap.ports[usize::from(v.config.port)].remove(&v.config, r);
            snap.vrs[usize::from(s.vr.id)] = Some(s.with_vif(v.id, None));
        });
        Ok(())
    }

    /// Change the IP MTU of VIF `vif` of VR `vr` (the control plane mirrors `ip link set dev
    /// VIF mtu N` done in the VR's namespace). The VIF is replaced in the published snapshot by
    /// one with the new MTU and the same counters; workers pick it up at their next poll.
    pub fn set_vif_mtu(&self, vr: &str, vif: VifId, mtu: u16) -> Result<(), DpError> {
        let what = format!("interface {vif} of {vr:?}");
        if !(68..=MAX_MTU).contains(&mtu) {
            return Err(bad(&what, "mtu", format!("{mtu} not in 68..={MAX_MTU}")));
        }
        let _g = self.ctl();
        let s = self.find(vr).ok_or_else(|| DpError::NoVr(vr.into()))?;
        let old = s
            .vifs
            .get(usize::from(vif))
            .and_then(Option::as_ref)
            .ok_or_else(|| DpError::NoVif {
                vr: vr.into(),
                vif: vif.to_string(),
            })?;
        if old.config.mtu == mtu {
            return Ok(());
        }
        let mut config = old.config.clone();
        config.mtu = mtu;
        let new = Arc::new(Vif {
            id: old.id,
            config,
            counters: old.counters.clone(),
        });
        self.publish(|snap| {
            snap.vrs[usize::from(s.vr.id)] = Some(s.with_vif(vif, Some(new)));
        });
        Ok(())
    }

    /// Queue a frame the control plane built to leave by VIF `vif` of VR `vr`, as it is (the
    /// frame carries its own L2 header). The VR's owner worker sends it. On error the packet
    /// is given back.
    pub fn inject(&self, vr: &str, vif: VifId, p: Pkt) -> Result<(), (DpError, Pkt)> {
        if !self.0.pool.owns(&p) {
            let why = "the packet is not from the data plane's pool";
            return Err((bad(&format!("virtual router {vr:?}"), "inject", why), p));
        }
        let Some(s) = self.find(vr) else {
            return Err((DpError::NoVr(vr.into()), p));
        };
        self.inject_as(&s, vr, vif, p)
    }

    /// [`Dataplane::inject`] once `s`, the VR's entry in the snapshot, is found; `s` may be
    /// out of date by the time the frame is queued.
    fn inject_as(
        &self,
        s: &VrSnap,
        vr: &str,
        vif: VifId,
        mut p: Pkt,
    ) -> Result<(), (DpError, Pkt)> {
        if s.vifs.get(usize::from(vif)).is_none_or(Option::is_none) {
            return Err((
                DpError::NoVif {
                    vr: vr.into(),
                    vif: vif.to_string(),
                },
                p,
            ));
        }
        self.0.pool.meta_mut(&mut p).vif = vif;
        s.vr.inject.push(p).map_err(|p| {
            (
                bad(&format!("virtual router {vr:?}"), "inject", "queue full"),
                p,
            )
        })?;
        // After the push (Release): a worker that sees the bell sees the frame. If the VR
        // is moving, its new owner looks at the queue when it takes the VR over.
        self.ring_inject_bell(s.owner);
        // But a move published after `s` was read may have let the new owner take the VR
        // over, and look at the queue, before the push: then only its bell tells it, and
        // the frame would wait for the VR's next one. The fence pairs with the one in
        // `Worker::adopt`: either the new owner's look comes after the push and sees the
        // frame, or this load sees the new owner (stored before the move was published).
        std::sync::atomic::fence(Ordering::SeqCst);
        let owner = s.vr.owner.load(Ordering::Relaxed);
        if owner != s.owner {
            self.ring_inject_bell(owner);
        }
        Ok(())
    }

    fn ring_inject_bell(&self, worker: usize) {
        if let Some(b) = self.0.inject_bell.get(worker) {
            b.fetch_add(1, Ordering::Release);
        }
    }

    /// Counters of port `port`, summed over workers.
    pub fn port_stats(&self, port: PortId) -> Option<PortStats> {
        self.0
            .port_counters
            .get(usize::from(port))
            .map(|b| PortStats::sum(b.iter().map(|c| &**c)))
    }

    /// Per-node counters summed over workers, with each node's drops (over all VRs).
    pub fn node_stats(&self) -> Vec<NodeStats> {
        let mut drops = [0u64; N_DROPS];
        for w in self.0.worker_counters.iter() {
            for (a, b) in drops.iter_mut().zip(&w.drops) {
                *a += b.get();
            }
        }
        for s in self.0.snap.load().vrs.iter().flatten() {
            for (a, b) in drops.iter_mut().zip(s.vr.stats().drops) {
                *a += b;
            }
        }
        Node::ALL
            .iter()
            .enumerate()
            .map(|(i, &node)| {
                let (mut packets, mut vectors, mut sp, mut cyc) = (0, 0, 0, 0);
                for w in self.0.worker_counters.iter() {
                    let n = &w.nodes[i];
                    packets += n.packets.get();
                    vectors += n.vectors.get();
                    sp += n.sampled_packets.get();
                    cyc += n.cycles.get();
                }
                NodeStats {
                    node,
                    packets,
                    vectors,
                    cycles_per_packet: if sp == 0 { 0.0 } else { cyc as f64 / sp as f64 },
                    drops: Drop::ALL
                        .iter()
                        .filter(|d| d.node() == node && drops[**d as usize] != 0)
                        .map(|d| (*d, drops[*d as usize]))
                        .collect(),
                }
            })
            .collect()
    }

    /// Drops counted outside any VR (at demux), summed over workers, indexed like
    /// [`Drop::ALL`].
    pub fn demux_drops(&self) -> [u64; N_DROPS] {
        let mut drops = [0u64; N_DROPS];
        for w in self.0.worker_counters.iter() {
            for (a, b) in drops.iter_mut().zip(&w.drops) {
                *a += b.get();
            }
        }
        drops
    }

    /// (polls, idle polls) summed over workers.
    pub fn polls(&self) -> (u64, u64) {
        self.0.worker_counters.iter().fold((0, 0), |(p, i), w| {
            (p + w.polls.get(), i + w.idle_polls.get())
        })
    }
}

fn check_weight(what: &str, w: u32) -> Result<(), DpError> {
    if !(1..=MAX_WEIGHT).contains(&w) {
        return Err(bad(what, "weight", format!("{w} not in 1..={MAX_WEIGHT}")));
    }
    Ok(())
}

fn check_policer(what: &str, pps: Option<u64>, bps: Option<u64>) -> Result<(), DpError> {
    if pps == Some(0) {
        return Err(bad(
            what,
            "policer_pps",
            "a rate of 0 would drop everything; leave it out for no limit",
        ));
    }
    if bps == Some(0) {
        return Err(bad(
            what,
            "policer_bps",
            "a rate of 0 would drop everything; leave it out for no limit",
        ));
    }
    Ok(())
}

/// The routes an interface address implies: its local ones ([`IfAddr::local_prefixes`]);
/// the subnet attached.
fn addr_routes(a: &IfAddr) -> (Vec<Prefix4>, Vec<Prefix6>, Option<IpPrefixRoute>) {
    let (l4, l6) = a.local_prefixes();
    let attached = match *a {
        IfAddr::V4(ip, len) => (len < 32).then(|| IpPrefixRoute::V4(Prefix4::new_masked(ip, len))),
        IfAddr::V6(ip, len) => (len < 128 && !ip.is_unicast_link_local())
            .then(|| IpPrefixRoute::V6(Prefix6::new_masked(ip, len))),
    };
    (l4, l6, attached)
}

enum IpPrefixRoute {
    V4(Prefix4),
    V6(Prefix6),
}

fn install_addr_routes(vr: &Vr, vif: VifId, addrs: &[IfAddr]) -> Result<(), DpError> {
    for a in addrs {
        let (l4, l6, att) = addr_routes(a);
        for p in l4 {
            vr.fib4.insert(p, NextHop::Local)?;
        }
        for p in l6 {
            vr.fib6.insert(p, NextHop::Local)?;
        }
        let ifindex = u32::from(vif);
        match att {
            Some(IpPrefixRoute::V4(p)) => {
                vr.fib4.insert(p, NextHop::Attached { ifindex })?;
            }
            Some(IpPrefixRoute::V6(p)) => {
                vr.fib6.insert(p, NextHop::Attached { ifindex })?;
            }
            None => {}
        }
    }
    Ok(())
}

fn remove_addr_routes(vr: &Vr, vif: VifId, addrs: &[IfAddr]) {
    let ifindex = u32::from(vif);
    let attached = vrhost_fib::NextHopSet::one(NextHop::Attached { ifindex });
    let local = vrhost_fib::NextHopSet::one(NextHop::Local);
    for a in addrs {
        let (l4, l6, att) = addr_routes(a);
        for p in l4 {
            if vr.fib4.get(&p) == Some(local.clone()) {
                let _ = vr.fib4.remove(&p);
            }
        }
        for p in l6 {
            if vr.fib6.get(&p) == Some(local.clone()) {
                let _ = vr.fib6.remove(&p);
            }
        }
        match att {
            Some(IpPrefixRoute::V4(p)) if vr.fib4.get(&p) == Some(attached.clone()) => {
                let _ = vr.fib4.remove(&p);
            }
            Some(IpPrefixRoute::V6(p)) if vr.fib6.get(&p) == Some(attached.clone()) => {
                let _ = vr.fib6.remove(&p);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "inject_race_test.rs"]
mod inject_race_test;
