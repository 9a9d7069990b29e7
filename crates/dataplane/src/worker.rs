//! A worker: one thread's poll loop over its receive queues and its VRs.
//!
//! One poll: receive from each rx queue and demux the frames into the VRs' ingress rings
//! (the only place an admitted packet may wait; policers and quarantine drop here), then
//! let the scheduler ([`crate::sched`]) spend a budget of one vector per receive queue on
//! the VRs this worker owns: the backlogged VR with the smallest stride pass runs one
//! vector — injected frames first, then up to [`VECTOR`] packets from its ingress rings —
//! to completion through the forwarding path and out to the ports' tx rings; it is timed,
//! charged and checked by the watchdog; the next pick follows.
//!
//! **Receive back-pressure.** For the scheduler, not the arrival pattern, to decide whose
//! packets are forwarded under overload (Egi §3.1), the VRs must have packets waiting when
//! it picks; and for overload to cost nothing, the excess must stay in the NIC rather than
//! be received and shed. So each receive queue remembers which VRs took a large part of its
//! last burst. While one of them is *hungry* — fewer packets queued by this worker than a
//! poll's budget — a queue that gave a full burst is polled again in the same poll (up to
//! one burst per receive queue), so that a VR whose weight entitles it to more than a burst
//! per poll gets it; when all of them are *full* (a budget's worth queued), the queue is not
//! polled at all this poll: its
//! frames wait in (and, if it fills, overflow) the NIC's ring, at no cost to the worker. A
//! queue whose last burst was not full is polled once, as before. With a receive queue per
//! VR (a port per tenant, as in Rathore's setup, or NIC filters by MAC) this isolates VRs
//! completely; VRs that share a queue share its ring as a drop point once the worker cannot
//! keep up with the queue (the price of one queue, documented in `docs/fair.md`).
//!
//! **A queue per VR is read at the pick.** A queue whose last few bursts were full and all
//! one VR's is not read in the receive phase: the stride scheduler reads a vector from it when
//! it picks that VR and forwards it at once ([`crate::feeder`]). The back-pressure is then
//! per vector: the queue is read as often as the VR's weight earns it turns.
//!
//! With [`RunVrs::OnOwner`] a VR is run by one worker only (its owner), so per-VR state that
//! changes per packet — rate-limit buckets, caches, the scheduler's pass and cost — is
//! worker-local, with no sharing. Packets for a VR received by another worker cross over in
//! that VR's ingress ring fed by that worker (SPSC). With [`RunVrs::WhereReceived`] every
//! worker runs every VR on the packets it received itself: it consumes the ring it feeds,
//! with per-VR state of its own, so nothing crosses cores; the owner's part shrinks to the
//! injected frames and the fast generations (a move hands over just those, see below).
//!
//! **Moving a VR.** The control side publishes a snapshot naming a new owner. The old owner
//! notices at the start of a poll — between vectors, never inside one — and puts the ring
//! ends and the VR's state in the VR's hand-off slot, with a fence on each of its transmit
//! queues. The new owner takes them at its next poll and runs the VR only once those fences
//! have passed, so the VR never runs on two cores at once, its ingress rings stay FIFO, and
//! its frames cannot overtake each other between the two workers' transmit queues.
//!
//! **Moving a receive queue** (folding a worker, placement): the holder lets go at the start
//! of a poll and marks its ingress rings; the next holder polls the queue once the owners
//! have taken what was received before the marks. Where received, the holder first forwards
//! its own backlog and hands over its transmit fences too, so the next holder's frames
//! cannot overtake them on the wire.
//!
//! The worker follows topology changes by comparing one version number per poll; when it
//! moved, it reloads the snapshot and reconciles: takes the ring ends of new VRs, and for
//! removed VRs returns what is still queued to the pool (waiting until the other workers
//! have let go of their producer ends, so nothing is pushed after the last drain).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arrayvec::ArrayVec;

use crate::counters::{Drop, Node, VrCounters};
use crate::dataplane::{RunVrs, Shared, Snapshot, VrSnap};
use crate::deferral::Deferral;
use crate::demux::{Copies, Verdict, VifRef, mac_key, parse_l2_packed, unpack};
use crate::feeder::Feeders;
use crate::flow::Tuple6;
use crate::node::adjcache::AdjCache;
use crate::node::flowcache::{FlowCache, Tuple4Key};
use crate::node::{Bucket, Ctx, Scratch, cycles};
use crate::pool::Pkt;
use crate::port::{Fence, PortId, RxQueue, TxQueue};
use crate::ring::{Consumer, Producer};
use crate::sched::{Fairness, PathTime, Scheduler, VrSched, Watchdog, before};
use crate::tx::TxStage;
use crate::vector::{PktVec, VECTOR};
use crate::vr::{FlowCacheKey, Vr, VrConfig, VrId};
use crate::wake::{Arrivals, Sleep};

/// How long a worker keeps polling after its last packet before it starts to sleep.
pub(crate) const SPIN_FOR: Duration = Duration::from_micros(200);

/// With receive coalescing on ([`Dataplane::set_rx_coalesce`](crate::Dataplane::set_rx_coalesce)),
/// a poll that received fewer packets than this is light: the worker naps before the next.
pub(crate) const COALESCE_BELOW: usize = VECTOR / 2;

/// Under pressure, run a VR once this many packets wait for it, or once it has been passed
/// over for the worker's deferral (`crate::deferral`).
pub(crate) const COALESCE: usize = VECTOR / 4;
/// How long an idle VR sleeps without pressure unless demux wakes it (see `crate::wake`):
/// a safety net, as only an arrival announced during a move can be lost. At a deferral
/// (32 polls) the net alone looked at 31 of 1,000 idle VRs in every light poll, a cold ring
/// each: 42 % of `poll`'s samples at 100 kpps (perf.md, session 36).
const IDLE_RECHECK: u64 = 8 * crate::deferral::BASE;
/// `Owned::defer_start` of a VR that is not being passed over.
const NOT_DEFERRED: u64 = u64::MAX;
/// A VR that took at least this many packets of a receive burst steers that queue's
/// back-pressure.
const SIGNIFICANT: u32 = (VECTOR / 8) as u32;
/// VRs remembered per receive queue for back-pressure.
const FED: usize = 8;

/// How often a worker looks for VR generations to publish to the fast path (see
/// `crate::fastpath`): the most a changed decision stays in use is this or, on an idle
/// worker, its nap (up to 1 ms). When every poll read every VR's generations, an idle
/// worker with 64 VRs spent 3.4 % of its core in `Worker::poll` (`perf -C 0`, 1q-pinned lab,
/// all traffic on the quickpath), and 64 ÷ 1 VR there was 0.78; 0.98 after.
const FAST_SCAN_NS: u64 = 50_000;

/// A test hook standing in for the TSC: the cycles a vector of `n` packets of `vr` took.
pub type CostModel = Box<dyn FnMut(&Vr, usize) -> u64 + Send>;

/// Per-VR state kept by the VR's owner worker.
#[derive(Debug)]
pub(crate) struct VrState {
    pub(crate) icmp_bucket: Bucket,
    pub(crate) punt_bucket: Bucket,
    /// Flow caches keyed by destination, or (`fc4t`, `fc6t`) by 5-tuple: only the pair the
    /// VR's `flow_cache_key` names has entries, the other is empty (disabled).
    pub(crate) fc4: FlowCache<u32>,
    pub(crate) fc6: FlowCache<u128>,
    pub(crate) fc4t: FlowCache<Tuple4Key>,
    pub(crate) fc6t: FlowCache<Tuple6>,
    pub(crate) adj4: AdjCache,
    pub(crate) adj6: AdjCache,
}

impl VrState {
    fn new(cfg: &VrConfig) -> VrState {
        let (dst, tuple) = match cfg.flow_cache_key {
            FlowCacheKey::Destination => (cfg.flow_cache, 0),
            FlowCacheKey::FiveTuple => (0, cfg.flow_cache),
        };
        VrState {
            icmp_bucket: Bucket::new(cfg.icmp_rate, cfg.icmp_burst),
            punt_bucket: Bucket::new(cfg.punt_rate, cfg.punt_burst),
            fc4: FlowCache::new(dst),
            fc6: FlowCache::new(dst),
            fc4t: FlowCache::new(tuple),
            fc6t: FlowCache::new(tuple),
            adj4: AdjCache::default(),
            adj6: AdjCache::default(),
        }
    }
}

/// What passes from one owner of a VR to the next (through [`Vr::handoff`]).
#[derive(Debug)]
pub(crate) struct Handoff {
    /// Consumer ends of the VR's ingress rings, one per receiving worker.
    pub(crate) consumers: Vec<Consumer>,
    /// The VR's worker-local state (`None` for a new VR).
    pub(crate) state: Option<VrState>,
    /// Cost estimate and watchdog history.
    pub(crate) sched: VrSched,
    /// The previous owner's transmit fences: the VR runs again once all have passed.
    pub(crate) fences: Vec<Box<dyn Fence>>,
}

impl Handoff {
    /// The VR was removed while its rings waited here for an owner that will never take
    /// them: close them (a receive queue that moved waits on marks in them) and return
    /// their packets to the pool. The rings stay; what a producer still pushes before it
    /// sees the removal is freed when the VR is dropped.
    pub(crate) fn retire(&mut self, pool: &crate::pool::Pool) {
        for c in &mut self.consumers {
            c.close();
            c.drain(|p| pool.free(p));
        }
    }

    /// What a new VR starts with.
    pub(crate) fn new(consumers: Vec<Consumer>) -> Handoff {
        Handoff {
            consumers,
            state: None,
            sched: VrSched::default(),
            fences: Vec::new(),
        }
    }
}

/// What a worker that runs a VR holds: its owner, or with [`RunVrs::WhereReceived`] every
/// worker (then the owner is the one that also sends injected frames).
///
/// `repr(C)`, the fields the scheduler's per-poll scan reads first: with them on one cache
/// line (the second of [`LocalVr`]) the scan reads two lines of a VR's state, where it read
/// five when they were spread behind `state`. The price: settling a burst reads one line
/// more, since the burst tallies now sit after `own`. Simulated with this host's caches and
/// 100 VRs (perf.md, session 33): the scan −1.24 L1 misses per packet, demux +0.38 (most of
/// which was `Option<LocalVr>`'s tag, then in `consumers`; [`Live`] keeps it on the first
/// line since session 41).
#[repr(C)]
struct Owned {
    consumers: Vec<Consumer>,
    /// The previous owner's transmit fences: on the owner, nothing of the VR runs until
    /// they have passed; where received, only its injected frames wait for them.
    fences: Vec<Box<dyn Fence>>,
    /// The poll since which this VR has been passed over to let its backlog grow
    /// ([`NOT_DEFERRED`] if it is not).
    defer_start: u64,
    /// Last seen value of the VR's quarantine flag.
    quarantined: bool,
    /// Its inject queue may hold frames (see `Shared::inject_bell`).
    inject_pending: bool,
    /// This worker sends the VR's injected frames (it is the owner and has taken over).
    injects: bool,
    next_consumer: usize,
    state: VrState,
    sched: VrSched,
}

impl Owned {
    /// A VR's state on a worker that runs it where received, before (or without) its
    /// owner's duties.
    fn local(c: Consumer, cfg: &VrConfig) -> Owned {
        Owned {
            consumers: vec![c],
            next_consumer: 0,
            defer_start: NOT_DEFERRED,
            state: VrState::new(cfg),
            sched: VrSched::default(),
            fences: Vec::new(),
            quarantined: false,
            inject_pending: false,
            injects: false,
        }
    }

    /// Packets waiting in this VR's ingress rings here.
    #[inline(always)]
    fn backlog(&self) -> usize {
        self.consumers.iter().map(Consumer::len).sum()
    }

    /// Whether injected frames may be waiting and this worker may send them now.
    ///
    /// Inlined: the coalescing check asks it of every owned VR on every poll (100 VRs: 8
    /// instructions per packet as a call), and nearly always the first two flags answer.
    #[inline(always)]
    fn may_inject(&mut self) -> bool {
        if !self.injects || !self.inject_pending {
            return false;
        }
        self.fences_passed()
    }

    /// Pass this VR over in poll `poll` to let its backlog grow: its deferral (of `polls`)
    /// starts now unless one is running. Returns the poll at which the deferral runs out, or
    /// `None` if it has (the VR runs now).
    #[inline(always)]
    fn defer(&mut self, poll: u64, polls: u64) -> Option<u64> {
        if self.defer_start == NOT_DEFERRED {
            self.defer_start = poll;
        }
        let until = self.defer_start + polls;
        (poll < until).then_some(until)
    }

    /// This VR has nothing queued (and no injected frame it may send) in poll `poll`: let it
    /// sleep as long as nothing comes for it (see `crate::wake`). Under pressure (`pressure`
    /// holds the worker's deferral, in polls) whatever comes from now on waits at most a
    /// deferral. Without, what comes later starts a deferral of its own, and the VR sleeps
    /// idle if whatever comes for it is announced: on the owner (`on_owner`) by each
    /// worker's demux; where received, when its one ring is the one this worker's demux
    /// feeds (a ring handed over with the owner's duties is fed by a worker that announces
    /// to itself). Not while injected frames wait for a previous owner's fences, whose
    /// passing wakes nobody.
    #[inline(always)]
    fn rest(
        &mut self,
        sleep: &mut Sleep,
        vr: VrId,
        poll: u64,
        pressure: Option<u64>,
        on_owner: bool,
    ) {
        let idle = (on_owner || self.consumers.len() == 1) && !self.inject_pending;
        if let Some(defer) = pressure {
            self.defer_start = poll;
            if idle {
                sleep.rest_deferred(vr, poll + defer);
            } else {
                sleep.until(vr, poll + defer);
            }
        } else {
            self.defer_start = NOT_DEFERRED;
            if idle {
                sleep.idle_until(vr, poll + IDLE_RECHECK);
            }
        }
    }

    /// The fences of this VR's previous owner have all passed (forgetting those that have).
    #[inline(never)]
    fn fences_passed(&mut self) -> bool {
        if !self.fences.is_empty() {
            self.fences.retain(|f| !f.passed());
        }
        self.fences.is_empty()
    }
}

/// A VR as a worker sees it. Demux's per-packet state comes first and fills the first cache
/// line (the struct is line-aligned): with many VRs sharing a burst, each packet's VR is a
/// different one, and the fields demux touches used to lie on several lines. The second
/// line starts with what the scheduler's scan reads of an owned VR (see [`Owned`]).
#[repr(C, align(64))]
struct LocalVr {
    /// The producer end of this worker's ingress ring into the VR.
    producer: Option<Producer>,
    /// Packets of the current receive burst demultiplexed to it.
    burst: u32,
    /// The current receive burst reached this VR (it is in `Worker::touched`).
    in_burst: bool,
    /// The VR's quarantine flag as of the last change this worker saw (see
    /// `Shared::flags_gen`).
    quarantined: bool,
    /// Its policer is on (`Policer::active`), as of the last change this worker saw.
    policed: bool,
    /// Bytes staged in its ingress ring in the current burst.
    burst_bytes: u64,
    /// Where `Option<LocalVr>` keeps its tag (see [`Live`]).
    live: Live,
    /// On the owner only.
    own: Option<Owned>,
    /// Packets of the current burst dropped for a full ring, and for quarantine (16 bits
    /// are enough: a burst is at most a vector).
    burst_full: u16,
    burst_quar: u16,
    /// Packets demux gave it since it last woke its runner (see [`crate::wake`]).
    since_wake: u16,
    /// The worker that runs what this worker demultiplexes to it: itself where received,
    /// else the owner.
    wake_to: u16,
    /// This worker's counters of `snap.vr`, beside the burst tallies: settling a burst
    /// writes them for every VR it reached, and going through `snap.vr` for their address
    /// read the `Vr`'s line as well (with 100 VRs, a third of an L1 miss per packet).
    counters: CountersRef,
    snap: VrSnap,
}

// The scan's fields of an owned VR on the second line (see `Owned`), and demux's on the
// first, with the tag of `Option<LocalVr>` (see `Live`).
const _: () = assert!(core::mem::offset_of!(LocalVr, own) == 64);
const _: () = assert!(core::mem::offset_of!(LocalVr, live) < 64);
// The layout is the compiler's choice, so where the tag went is checked: a `None` written
// into fresh memory leaves `live`'s bytes initialised only if they hold the tag, and a
// value there that `Live` cannot hold. (Were the tag elsewhere, reading those bytes would
// read uninitialised memory, which stops the build here.)
const _: () = {
    let mut m = core::mem::MaybeUninit::<Option<LocalVr>>::uninit();
    // SAFETY: a valid value written into memory of its type; then 8 bytes inside it read
    // as bytes, which const evaluation refuses unless they were written.
    let word = unsafe {
        m.as_mut_ptr().write(None);
        m.as_ptr()
            .cast::<u8>()
            .add(core::mem::offset_of!(LocalVr, live))
            .cast::<[u8; 8]>()
            .read()
    };
    assert!(u64::from_ne_bytes(word) != Live::Yes as u64);
};
const _: () = assert!(core::mem::size_of::<Option<Owned>>() == core::mem::size_of::<Owned>());
const _: () = assert!(core::mem::offset_of!(Owned, injects) < 64);
// Settling a burst reads the tallies and the counters' address on one line.
const _: () = assert!(
    core::mem::offset_of!(LocalVr, burst_full) / 64
        == core::mem::offset_of!(LocalVr, counters) / 64
);

/// A field of [`LocalVr`]'s first line with one valid value, there for its niche: every
/// other 64-bit value. The tag of `Option<LocalVr>` goes into the field with the most spare
/// values, and without this one that was `Owned::consumers`' capacity (2^63 spare values),
/// on the second line: demux and the end of a burst read that line for every VR they
/// reached only to see that the VR is there (100 VRs, simulated: 0.7 L1 misses a packet).
#[repr(u64)]
enum Live {
    Yes = 0,
}

/// `&vr.counters[worker]`, for a `Vr` that whoever holds it keeps alive (`LocalVr` holds
/// it in `snap.vr`, which `Worker::refresh` only ever replaces with the same `Vr`).
struct CountersRef(core::ptr::NonNull<VrCounters>);

// SAFETY: it stands for a `&VrCounters`, and `VrCounters` (atomic cells) is `Sync`.
unsafe impl Send for CountersRef {}

impl CountersRef {
    fn new(vr: &Vr, worker: usize) -> Self {
        CountersRef(core::ptr::NonNull::from(&*vr.counters[worker]))
    }

    #[inline(always)]
    fn get(&self) -> &VrCounters {
        // SAFETY: the `Vr` it points into outlives `self` (see the type).
        unsafe { self.0.as_ref() }
    }
}

/// The VRs the current receive burst reached, each once, in the order reached.
///
/// Why not a `Vec` pushed on a VR's first packet: with many VRs a burst's packets are a
/// random mix, so "first packet of this VR in the burst" is a coin toss per packet (92 of
/// 100 VRs reached by 256 packets: taken about one time in three) and the branch
/// mispredicted. [`Touched::note`] writes the VR every time and counts it only if new, with
/// no branch. The array has a slot for every VR id and one spare for the writes not
/// counted, so no index can fall outside it and there is no bounds check either; it is
/// allocated zeroed, and only the pages a burst reaches are ever backed (one for 2,048 VRs).
struct Touched {
    ids: Box<[VrId; TOUCHED_SLOTS]>,
    len: usize,
    /// Those of them other workers run, to be announced to their runners when the burst is
    /// settled (see [`crate::wake`]).
    arrivals: Arrivals,
}

/// Every VR id, and a spare slot.
const TOUCHED_SLOTS: usize = VrId::MAX as usize + 2;

impl Touched {
    /// For worker `me`.
    fn new(me: usize) -> Self {
        let ids = vec![0; TOUCHED_SLOTS].into_boxed_slice();
        Touched {
            ids: ids.try_into().expect("the length is TOUCHED_SLOTS"),
            len: 0,
            arrivals: Arrivals::new(me),
        }
    }

    /// Note that the burst reached `vr`; `first` says this is its first packet of it.
    #[inline(always)]
    fn note(&mut self, vr: VrId, first: bool) {
        // `len` counts distinct VRs, so it is at most `VrId::MAX + 1`; the `min` only tells
        // the compiler so.
        self.ids[self.len.min(TOUCHED_SLOTS - 1)] = vr;
        self.len += usize::from(first);
    }

    fn pop(&mut self) -> Option<VrId> {
        self.len = self.len.checked_sub(1)?;
        Some(self.ids[self.len])
    }
}

/// What a receive queue's last burst was like.
#[derive(Debug, Default)]
pub(crate) struct RxTrack {
    /// The burst was full.
    full: bool,
    /// VRs that took at least [`SIGNIFICANT`] packets of it.
    fed: ArrayVec<VrId, FED>,
    /// Packets of it the VR with the most took.
    top: u32,
    /// The VR that took all of the last burst that brought packets, if it was full.
    sole: Option<VrId>,
    /// Such bursts in a row that went wholly to `sole` (saturating): from [`SOLE_STREAK`] on,
    /// the scheduler reads the queue when it picks that VR (see [`crate::feeder`]).
    streak: u8,
}

/// Full bursts in a row all one VR's before a receive queue counts as that VR's alone
/// ([`crate::feeder`]). More than one, so that traffic that changes VR burst by burst (trains
/// of a vector, `vrbench inproc --train 256`) is not read at picks of the VR its last burst
/// went to, where the next burst would find another VR (one poll's delay each time: half the
/// rate, measured); four, so that a queue whose traffic moves between VRs in longer trains
/// pays that at most once per four bursts.
const SOLE_STREAK: u8 = 4;

/// A receive queue as a worker holds it (and as it passes between workers).
pub(crate) struct RxHeld {
    /// Index in the data plane's list of receive queues.
    pub(crate) id: usize,
    pub(crate) port: PortId,
    pub(crate) q: Box<dyn RxQueue>,
    pub(crate) track: RxTrack,
    /// Marks on the previous holder's ingress rings, taken when it let go: the queue is
    /// polled again once the VRs' owners have taken everything it received before (so a
    /// frame it receives now cannot overtake one received earlier by the other worker).
    pub(crate) marks: Vec<crate::ring::Mark>,
    /// With [`RunVrs::WhereReceived`], the previous holder forwarded what it had received
    /// before letting go: the queue is polled again once its transmit queues have sent it.
    pub(crate) fences: Vec<Box<dyn Fence>>,
}

impl RxHeld {
    /// Whether the previous holder's marks and fences have all passed.
    fn ready(&mut self) -> bool {
        if !self.marks.is_empty() {
            self.marks.retain(|m| !m.passed());
        }
        if !self.fences.is_empty() {
            self.fences.retain(|f| !f.passed());
        }
        self.marks.is_empty() && self.fences.is_empty()
    }
}

impl core::fmt::Debug for RxHeld {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RxHeld")
            .field("id", &self.id)
            .field("port", &self.port)
            .field("waiting_marks", &self.marks.len())
            .field("waiting_fences", &self.fences.len())
            .finish_non_exhaustive()
    }
}

/// The monotonic and this thread's CPU clock at the start of a span (see `sched`'s docs on
/// the watchdog: read only while a VR is armed).
struct CpuSpan {
    wall: std::time::Instant,
    cpu_ns: u64,
}

impl CpuSpan {
    fn start() -> CpuSpan {
        CpuSpan {
            cpu_ns: thread_cpu_ns(),
            wall: std::time::Instant::now(),
        }
    }

    /// Nanoseconds passed and spent on the CPU since the start (`None` if the CPU clock
    /// could not be read).
    fn end(self) -> Option<(u64, u64)> {
        let wall = self.wall.elapsed().as_nanos() as u64;
        let cpu = thread_cpu_ns().checked_sub(self.cpu_ns)?;
        (self.cpu_ns != 0).then_some((wall, cpu))
    }
}

/// This thread's CPU time in ns (`CLOCK_THREAD_CPUTIME_ID`; 0 if it cannot be read).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is, and keeps no pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Spin for `c` TSC cycles (the measurement element of [`crate::Dataplane::set_extra_cost`]).
#[cold]
fn burn(c: u64) {
    let until = cycles().wrapping_add(c);
    while before_tsc(cycles(), until) {
        std::hint::spin_loop();
    }
}

fn before_tsc(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) < 0
}

/// Record demux's findings in a packet's metadata; `key` is the frame's (VLAN, MAC) key
/// (`demux::mac_key`), whose bit 40 is the destination MAC's group bit.
#[inline(always)]
fn tag(m: &mut crate::Meta, port: PortId, r: VifRef, l2: &crate::L2Info, key: u64) {
    m.port = port;
    m.vr = r.vr;
    m.vif = r.vif;
    m.l3 = l2.l3 as u8;
    m.class = l2.class as u8 | ((key >> 40) as u8 & 1) << 7;
}
const _: () = assert!(crate::flow::L2_GROUP == 1 << 7);

/// What [`Worker::replicate`] needs of the frame being copied and the worker.
struct Fanout<'a> {
    wc: &'a crate::dataplane::WorkerCounters,
    port: PortId,
    l2: &'a crate::L2Info,
    key: u64,
    len: u16,
}

/// One forwarding thread's state. Create with [`crate::Dataplane::worker`]; drive with
/// [`Worker::run`] on a thread of its own, or [`Worker::poll`] step by step (tests).
pub struct Worker {
    sh: Arc<Shared>,
    id: usize,
    /// The data plane runs VRs where received ([`RunVrs::WhereReceived`]).
    local: bool,
    /// Receive queues this worker polls.
    rx: Vec<RxHeld>,
    /// Receive queues assigned to this worker whose hand-over it waits for.
    adopting_rx: Vec<usize>,
    tx: TxStage,
    snap: Arc<Snapshot>,
    version: u64,
    vrs: Vec<Option<LocalVr>>,
    /// VRs this worker runs, in id order.
    owned: Vec<VrId>,
    /// VRs assigned to this worker whose hand-off it waits for.
    adopting: Vec<VrId>,
    /// This poll's scheduling candidates with their stride pass, kept beside them so that
    /// each pick scans one small array (with 64 VRs a poll makes 64 picks over up to 64
    /// candidates; reading each pass from its VR's state cost a cache line per look).
    cands: Vec<(u64, VrId)>,
    /// The scheduler's virtual time: the pass of the last VR picked.
    vtime: u64,
    /// Which owned VRs the scheduler need not look at under pressure (see [`crate::wake`]).
    sleep: Sleep,
    /// How long a short backlog waits under pressure (`crate::deferral`).
    deferral: Deferral,
    touched: Touched,
    retiring: Vec<Consumer>,
    now_ns: u64,
    /// The last poll left a receive queue unpolled (back-pressure): not idle.
    held_back: bool,
    /// Packets received by the last poll (receive coalescing looks at it).
    rx_last: usize,
    cost_model: Option<CostModel>,
    /// The forwarding nodes' arrays, reused by every vector.
    scratch: Box<Scratch>,
    /// `Shared::flags_gen` when the VRs' quarantine flags and policer states were last copied.
    flags_seen: u64,
    /// This worker's `Shared::inject_bell` when its VRs' inject queues were last looked at.
    inject_seen: u64,
    /// The fast generation this worker last published for each VR (by id).
    fast_published: Vec<u64>,
    /// When the worker last looked for generations to publish (`now_ns`).
    fast_scan_ns: u64,
    /// Receive queues the scheduler reads this poll, by the VR they feed (`crate::feeder`).
    feeders: Feeders,
    /// Packets the scheduler received this poll from `feeders`.
    picked_rx: usize,
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
        rx: Vec<RxHeld>,
        tx: Vec<Box<dyn TxQueue>>,
    ) -> Worker {
        let mut w = Worker {
            local: sh.run_vrs == RunVrs::WhereReceived,
            snap: Arc::new(Snapshot::default()),
            version: u64::MAX,
            sh,
            id,
            rx,
            adopting_rx: Vec::new(),
            tx: TxStage::new(tx),
            vrs: Vec::new(),
            owned: Vec::new(),
            adopting: Vec::new(),
            cands: Vec::new(),
            vtime: 0,
            sleep: Sleep::default(),
            deferral: Deferral::new(),
            touched: Touched::new(id),
            retiring: Vec::new(),
            now_ns: 0,
            held_back: false,
            rx_last: 0,
            feeders: Feeders::default(),
            picked_rx: 0,
            cost_model: None,
            scratch: Scratch::new(),
            flags_seen: 0,
            inject_seen: 0,
            fast_published: Vec::new(),
            fast_scan_ns: 0,
        };
        w.refresh();
        w.adopt();
        w
    }

    /// The worker's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Test hook: take the cycles each vector cost from `model` instead of the TSC (for the
    /// scheduler's cost-aware mode, the watchdog and the per-VR cycle counters), so tests of
    /// cost-aware fairness and of the watchdog are exact and do not depend on the machine.
    #[doc(hidden)]
    pub fn set_cost_model(&mut self, model: Option<CostModel>) {
        self.cost_model = model;
    }

    /// Poll until `stop` is set. A worker keeps polling for [`SPIN_FOR`] after its last
    /// packet, then sleeps, longer the longer it has been idle (an eighth of the quiet time,
    /// 10 µs to 1 ms), so an idle router does not burn its core; any work resets it. With
    /// receive coalescing on, a light poll (under [`COALESCE_BELOW`] packets received) is
    /// followed by a nap of the coalescing delay.
    ///
    /// Why by time and without `yield`: a worker that backed off after a few dozen empty
    /// polls slept or yielded between the frames of a moderate load (a frame every 10 µs is
    /// 100 kpps), and on a host where other tasks share the core a yield or a sleep costs a
    /// time slice — milliseconds of latency at 10 % load (measured with `vrbench measure`:
    /// p99 2.7 ms over AF_XDP at 137 kpps). Spinning 200 µs past the last packet keeps such a
    /// load on the core; a router with nothing to do still sleeps within a millisecond.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut idle = 0u32;
        // Quiet for longer than `SPIN_FOR`: nap after every empty poll.
        let mut napping = false;
        let mut last_work = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if self.poll() > 0 || self.held_back {
                idle = 0;
                napping = false;
                let nap = self.sh.rx_coalesce();
                if !nap.is_zero() && self.rx_last < COALESCE_BELOW && !self.held_back {
                    std::thread::sleep(nap);
                }
                continue;
            }
            idle = idle.wrapping_add(1);
            // While spinning the clock is read once per 64 empty polls; once napping, after
            // every poll. (Napping once per 64 polls, an idle worker with 64 VRs looked at
            // them 4,096 times a millisecond: with all traffic on the quickpath, `perf -p`
            // put both workers together at 0.07 of a core, 0.04 after.)
            if idle == 1 {
                last_work = Instant::now();
            }
            if !napping && !idle.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            let quiet = last_work.elapsed();
            if quiet >= SPIN_FOR {
                let nap = (quiet / 8).clamp(Duration::from_micros(10), Duration::from_millis(1));
                std::thread::sleep(nap);
                napping = true;
            }
        }
        // Leave nothing behind: hand every staged packet to its ring.
        self.poll();
    }

    /// One round: receive, demux, schedule the owned VRs for a vector per receive queue.
    /// Returns packets handled (received plus forwarded).
    pub fn poll(&mut self) -> usize {
        self.sleep.tick();
        self.refresh();
        let fg = self.sh.flags_gen.load(Ordering::Acquire);
        if fg != self.flags_seen {
            self.flags_seen = fg;
            self.sleep.wake_all();
            for l in self.vrs.iter_mut().flatten() {
                l.quarantined = l.snap.vr.quarantined.load(Ordering::Relaxed);
                l.policed = l.snap.vr.policer.active();
            }
        }
        let bell = self.sh.inject_bell[self.id].load(Ordering::Acquire);
        if bell != self.inject_seen {
            self.inject_seen = bell;
            for (i, l) in self.vrs.iter_mut().enumerate() {
                if let Some(o) = l.as_mut().and_then(|l| l.own.as_mut())
                    && o.injects
                {
                    o.inject_pending = true;
                    self.sleep.wake(i as VrId);
                }
            }
        }
        if !self.adopting.is_empty() {
            self.adopt();
        }
        if !self.adopting_rx.is_empty() {
            self.adopt_rx();
        }
        let now_ns = self.sh.now_ns();
        self.now_ns = now_ns;
        if let Some(fp) = self.sh.fast.get()
            && now_ns.wrapping_sub(self.fast_scan_ns) >= FAST_SCAN_NS
        {
            self.fast_scan_ns = now_ns;
            fp.tick();
            // The fast path forwards by a VR's old decisions until this tells it they are.
            for &id in &self.owned {
                let i = usize::from(id);
                let Some(l) = self.vrs.get(i).and_then(Option::as_ref) else {
                    continue;
                };
                if l.snap.owner != self.id {
                    continue;
                }
                let g = l.snap.vr.fast_generation(l.snap.vif_epoch);
                if self.fast_published.len() <= i {
                    self.fast_published.resize(i + 1, 0);
                }
                if self.fast_published[i] != g {
                    self.fast_published[i] = g;
                    fp.publish(id, g);
                }
            }
        }
        let rounds = self.rx.len().max(1);
        let mut work = 0;
        let mut received = 0;
        let mut pressure = false;
        self.held_back = false;
        match self.sh.scheduler() {
            Scheduler::Stride => {
                let budget = VECTOR * rounds;
                for q in 0..self.rx.len() {
                    if !self.rx[q].ready() {
                        continue;
                    }
                    // A queue that feeds one VR alone is read when the scheduler picks
                    // that VR, a vector at a time (see `crate::feeder`); beyond a VR's
                    // `feeder::PER_VR` such queues, here as before. Its last burst was
                    // full: pressure.
                    if let Some(vr) = self.sole_feeder(q)
                        && self.feeders.assign(vr, q)
                    {
                        self.sleep.wake(vr);
                        pressure = true;
                        continue;
                    }
                    for k in 0..rounds {
                        if !self.want_rx(q, budget) {
                            if k == 0 {
                                self.held_back = true;
                                self.sh.worker_counters[self.id].rx_held.add(1);
                            }
                            break;
                        }
                        let n = self.rx_one(q);
                        work += n;
                        received += n;
                        if n < VECTOR {
                            break;
                        }
                        pressure = true;
                    }
                }
                work += self.schedule(now_ns, pressure, budget);
                if !self.feeders.is_empty() {
                    self.feeders.clear();
                    let n = core::mem::take(&mut self.picked_rx);
                    work += n;
                    received += n;
                }
            }
            Scheduler::RoundRobin => {
                for q in 0..self.rx.len() {
                    if !self.rx[q].ready() {
                        continue;
                    }
                    let n = self.rx_one(q);
                    pressure |= n == VECTOR;
                    work += n;
                    received += n;
                }
                // A VR may get up to one vector per receive queue per poll: what one poll
                // can feed it.
                let (fairness, watchdog) = (self.sh.fairness(), self.sh.watchdog());
                for i in 0..self.owned.len() {
                    let vr = self.owned[i];
                    if !self.runnable(vr) {
                        continue;
                    }
                    for round in 0..rounds {
                        let n = self.run_vr(vr, now_ns, pressure && round == 0, fairness, watchdog);
                        if pressure {
                            self.deferral.ran(n);
                        }
                        work += n;
                        if n < VECTOR {
                            break;
                        }
                    }
                }
            }
        }
        // One push per transmit queue per poll, however many vectors went out.
        self.tx.kick(&self.sh.pool);
        let pool = &self.sh.pool;
        let max_wait = self.sh.max_deferral_ns.load(Ordering::Relaxed);
        let defer = self.deferral.tick(self.sleep.now(), now_ns, max_wait, || {
            (pool.available(), pool.capacity())
        });
        let wc = &self.sh.worker_counters[self.id];
        wc.deferral.store(defer, Ordering::Relaxed);
        wc.polls.add(1);
        if work == 0 {
            wc.idle_polls.add(1);
        }
        self.drain_retiring();
        self.rx_last = received;
        work
    }

    /// Whether receive queue `q` should be polled (again) now (see the module doc).
    fn want_rx(&mut self, q: usize, budget: usize) -> bool {
        let t = &self.rx[q].track;
        if !t.full || t.fed.is_empty() {
            return true;
        }
        let vrs = &mut self.vrs;
        // A VR that cannot take packets any more — removed, quarantined, unreachable from
        // here — holds nothing back: the queue is polled, and what it holds for that VR is
        // dropped and counted at demux. (Were it to count as full, the queue would never be
        // polled again: only polling it resets `fed`, and the other VRs it feeds would starve.)
        t.fed.iter().any(|&vr| {
            let Some(l) = vrs.get_mut(usize::from(vr)).and_then(Option::as_mut) else {
                return true;
            };
            if l.snap.vr.quarantined.load(Ordering::Relaxed) {
                return true;
            }
            let Some(p) = l.producer.as_mut() else {
                return true;
            };
            let level = budget.min(p.capacity().saturating_sub(VECTOR)).max(1);
            p.queued(level) < level
        })
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
                // Nothing is staged between bursts: each burst publishes what it staged.
                l.producer = None;
                if let Some(mut o) = l.own.take() {
                    self.retiring.append(&mut o.consumers);
                }
            }
        }
        if self.vrs.len() < snap.vrs.len() {
            self.vrs.resize_with(snap.vrs.len(), || None);
        }
        self.sleep.fit(self.vrs.len());
        self.owned.clear();
        self.adopting.clear();
        for (i, s) in snap.vrs.iter().enumerate() {
            let Some(s) = s else { continue };
            let l = self.vrs[i].get_or_insert_with(|| {
                let producer = s.vr.ingress_tx[self.id]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                let own = s.vr.ingress_local[self.id]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .map(|c| Owned::local(c, &s.vr.config));
                LocalVr {
                    producer,
                    burst: 0,
                    in_burst: false,
                    quarantined: s.vr.quarantined.load(Ordering::Relaxed),
                    policed: s.vr.policer.active(),
                    burst_bytes: 0,
                    live: Live::Yes,
                    burst_full: 0,
                    burst_quar: 0,
                    since_wake: 0,
                    wake_to: 0,
                    counters: CountersRef::new(&s.vr, self.id),
                    snap: s.clone(),
                    own,
                }
            });
            // Same VR, maybe new VIFs or a new owner (`counters` stays valid: see above).
            debug_assert!(Arc::ptr_eq(&l.snap.vr, &s.vr));
            l.snap = s.clone();
            l.wake_to = if self.local { self.id } else { s.owner } as u16;
            let duty = l.own.as_ref().is_some_and(|o| o.injects);
            if s.owner == self.id {
                if !duty {
                    self.adopting.push(i as VrId);
                }
            } else if duty {
                // Moved away: hand over to the next owner, between vectors. Where received
                // only the owner's duties go (its injected frames wait for this worker's
                // transmit queues; the VR keeps running here), otherwise everything.
                let mut h = if self.local {
                    let o = l.own.as_mut().expect("a duty is held by a runner");
                    o.injects = false;
                    o.inject_pending = false;
                    Handoff {
                        fences: core::mem::take(&mut o.fences),
                        ..Handoff::new(Vec::new())
                    }
                } else {
                    let o = l.own.take().expect("a duty is held by a runner");
                    Handoff {
                        consumers: o.consumers,
                        state: Some(o.state),
                        sched: o.sched,
                        fences: o.fences,
                    }
                };
                h.fences.extend(self.tx.fences(&self.sh.pool));
                let mut slot = s.vr.handoff.lock().unwrap_or_else(|e| e.into_inner());
                debug_assert!(slot.is_none(), "only the holder fills the hand-off slot");
                // Removed since this snapshot (`remove_vr` sets the flag under this lock,
                // after publishing, so one of the two retires the rings).
                if s.vr.removed.load(Ordering::Relaxed) {
                    h.retire(&self.sh.pool);
                }
                *slot = Some(h);
            }
            if l.own.is_some() {
                self.owned.push(i as VrId);
            }
        }
        // Receive queues: let go of those assigned elsewhere, wait for those assigned here.
        let letting_go = self
            .rx
            .iter()
            .any(|h| snap.rx_owner.get(h.id).is_some_and(|&o| o != self.id));
        if self.local && letting_go {
            // What this worker received it forwards itself: finish it now, so that the next
            // holder need only wait for it to leave this worker's transmit queues.
            self.run_backlog();
        }
        let mut k = 0;
        while k < self.rx.len() {
            let qid = self.rx[k].id;
            if snap.rx_owner.get(qid).is_some_and(|&o| o != self.id) {
                let mut h = self.rx.swap_remove(k);
                // Everything received so far sits in this worker's producer rings: the next
                // holder waits until the owners have taken it.
                h.marks.extend(
                    self.vrs
                        .iter_mut()
                        .flatten()
                        .filter_map(|l| l.producer.as_mut())
                        .filter_map(|p| (p.queued(0) > 0).then(|| p.mark())),
                );
                h.track = RxTrack::default();
                if self.local {
                    h.fences.extend(self.tx.fences(&self.sh.pool));
                }
                let mut slots = self.sh.rx_slots.lock().unwrap_or_else(|e| e.into_inner());
                slots[qid] = Some(h);
            } else {
                k += 1;
            }
        }
        self.adopting_rx = snap
            .rx_owner
            .iter()
            .enumerate()
            .filter(|&(q, &o)| o == self.id && !self.rx.iter().any(|h| h.id == q))
            .map(|(q, _)| q)
            .collect();
        self.snap = snap;
    }

    /// Take over the receive queues assigned to this worker that their holder let go.
    fn adopt_rx(&mut self) {
        let Ok(mut slots) = self.sh.rx_slots.try_lock() else {
            return;
        };
        let rx = &mut self.rx;
        self.adopting_rx
            .retain(|&q| match slots.get_mut(q).and_then(Option::take) {
                Some(h) => {
                    rx.push(h);
                    false
                }
                None => true,
            });
        // Poll in a stable order (the queues' ids).
        rx.sort_by_key(|h| h.id);
    }

    /// Take over the VRs assigned to this worker whose previous owner has let go.
    fn adopt(&mut self) {
        let Worker {
            adopting,
            vrs,
            owned,
            vtime,
            sleep,
            ..
        } = self;
        adopting.retain(|&vr| {
            let Some(l) = vrs.get_mut(usize::from(vr)).and_then(Option::as_mut) else {
                return false;
            };
            let h = match l.snap.vr.handoff.try_lock() {
                Ok(mut g) => g.take(),
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().take(),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            let Some(h) = h else { return true };
            sleep.wake(vr);
            if let Some(o) = l.own.as_mut() {
                // Where received the VR runs here already: the owner's duties come over.
                o.consumers.extend(h.consumers);
                o.fences.extend(h.fences);
                o.injects = true;
                o.inject_pending = true;
                return false;
            }
            let mut sched = h.sched;
            sched.pass = *vtime;
            l.own = Some(Owned {
                consumers: h.consumers,
                next_consumer: 0,
                defer_start: NOT_DEFERRED,
                state: h.state.unwrap_or_else(|| VrState::new(&l.snap.vr.config)),
                sched,
                fences: h.fences,
                quarantined: false,
                // Frames may have been queued while the VR moved.
                inject_pending: true,
                injects: true,
            });
            // Keep `owned` in id order (the round-robin baseline runs VRs in that order).
            let at = owned.partition_point(|&o| o < vr);
            owned.insert(at, vr);
            false
        });
        // Pairs with the fence in `Dataplane::inject`: this worker's first look at an
        // adopted VR's inject queue comes after it, so it sees a frame queued by an
        // `inject` that did not see this worker as the owner (and rang only the old one).
        std::sync::atomic::fence(Ordering::SeqCst);
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
            now_ns,
            sleep,
            ..
        } = self;
        let (sh, id, now) = (&**sh, *id, *now_ns);
        let pool = &*sh.pool;
        let RxHeld {
            id: qid,
            port,
            q: rxq,
            track,
            ..
        } = &mut rx[q];
        let (port, qid) = (*port, *qid);
        track.fed.clear();
        track.top = 0;
        let mut v = PktVec::new();
        let n = rxq.rx_burst(pool, &mut v, VECTOR);
        track.full = n == VECTOR;
        if n == 0 {
            // `sole` and `streak` are about the bursts that brought packets: a poll re-reads
            // a queue that gave a full burst, and finding it empty then says nothing of
            // whose its traffic is.
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
        // VIF decision, and the VR's state, so that such a frame needs neither the demux
        // table nor a look up of its VR by id.
        let mut memo: Option<(u64, VifRef, &mut LocalVr)> = None;
        for mut p in v.drain(..) {
            // One handle check for the metadata, the frame and the tag written below.
            let (m, slot) = pool.slot_mut(&mut p);
            let len = m.len;
            bytes += u64::from(len);
            let frame: &[u8] = slot
                .get(usize::from(m.off)..usize::from(m.off) + usize::from(len))
                .unwrap_or(&[]);
            let packed = parse_l2_packed(frame);
            if packed >> 40 != 0 {
                wc.drops[Drop::L2Truncated as usize].add(1);
                dropped += 1;
                pool.free(p);
                continue;
            }
            let l2 = unpack(packed);
            let key = mac_key(l2.vid, frame);
            // The same VIF as the frame before: straight into its VR's ring, which is
            // already noted as reached.
            if let Some((k, r, l)) = memo.as_mut()
                && *k == key
            {
                tag(m, port, *r, &l2, key);
                dropped += Self::stage_in(sh, now, l, p, len);
                continue;
            }
            // Let go of the memo's VR: the lookups below borrow the VR list.
            memo = None;
            match demux.lookup_key(key, frame, &l2) {
                Verdict::One(r) => {
                    tag(m, port, r, &l2, key);
                    let Some(l) = Self::reach(vrs, touched, r.vr) else {
                        pool.free(p);
                        dropped += 1;
                        continue;
                    };
                    dropped += Self::stage_in(sh, now, l, p, len);
                    memo = Some((key, r, l));
                }
                Verdict::Rule(r) => {
                    tag(m, port, r, &l2, key);
                    dropped += Self::stage(sh, now, vrs, touched, r.vr, p, len);
                }
                group @ (Verdict::Flood(_) | Verdict::Arp(_)) => {
                    let members = group.copies(frame, &l2);
                    let to = Fanout {
                        wc,
                        port,
                        l2: &l2,
                        key,
                        len,
                    };
                    dropped += Self::replicate(sh, now, vrs, touched, p, members, to);
                }
                Verdict::Drop(d) => {
                    wc.drops[d as usize].add(1);
                    dropped += 1;
                    pool.free(p);
                }
            }
        }
        pc.rx_bytes.add(bytes);
        dropped += Self::flush_staged(sh, now, vrs, touched, track, sleep);
        let last_sole = track.sole;
        track.sole = match track.fed.as_slice() {
            [only] if n == VECTOR && track.top == VECTOR as u32 => Some(*only),
            _ => None,
        };
        track.streak = match track.sole {
            Some(_) if track.sole == last_sole => track.streak.saturating_add(1),
            Some(_) => 1,
            None => 0,
        };
        // Which VR this queue mostly feeds (placement moves a queue to that VR's owner):
        // judged on bursts big enough to tell, kept between them.
        if n >= SIGNIFICANT as usize {
            let dom = match track.fed.as_slice() {
                [only] if u32::try_from(n).is_ok_and(|n| track.top * 4 >= n * 3) => {
                    u32::from(*only) + 1
                }
                _ => 0,
            };
            if let Some(d) = sh.rx_dominant.get(qid)
                && d.load(Ordering::Relaxed) != dom
            {
                d.store(dom, Ordering::Relaxed);
            }
        }
        pc.rx_dropped.add(dropped);
        let dn = &wc.nodes[Node::Demux as usize];
        dn.packets.add(n as u64);
        dn.vectors.add(1);
        dn.sampled_packets.add(n as u64);
        let t2 = cycles();
        dn.cycles.add(t2.wrapping_sub(t1));
        wc.busy_cycles.add(t2.wrapping_sub(t0));
        wc.rx_packets.add(n as u64);
        if n == VECTOR {
            wc.full_rx_cycles.add(t2.wrapping_sub(t0));
            wc.full_rx_packets.add(n as u64);
        }
        n
    }

    /// Stage `p` in the VR of each of `members`: copies for all but the last, which takes
    /// the original. Returns the packets dropped. (Cold: group frames and ARP to a MAC that
    /// rules share are rare.)
    #[cold]
    #[inline(never)]
    fn replicate(
        sh: &Shared,
        now: u64,
        vrs: &mut [Option<LocalVr>],
        touched: &mut Touched,
        p: Pkt,
        members: Copies<'_>,
        to: Fanout<'_>,
    ) -> u64 {
        let pool = &*sh.pool;
        let Some(last) = members.clone().count().checked_sub(1) else {
            to.wc.drops[Drop::NoVr as usize].add(1);
            pool.free(p);
            return 1;
        };
        let mut dropped = 0;
        let mut orig = Some(p);
        for (i, r) in members.enumerate() {
            let q = match orig.as_ref() {
                Some(o) if i < last => pool.alloc_frame(pool.frame(o)),
                _ => orig.take(),
            };
            let Some(mut q) = q else {
                to.wc.drops[Drop::ReplicateNoBuffer as usize].add(1);
                dropped += 1;
                continue;
            };
            tag(pool.meta_mut(&mut q), to.port, r, to.l2, to.key);
            dropped += Self::stage(sh, now, vrs, touched, r.vr, q, to.len);
        }
        dropped
    }

    /// Note VR `vr` as reached by this burst and stage a packet in it
    /// ([`Worker::stage_in`]); returns 1 if it was dropped.
    #[inline(always)]
    fn stage(
        sh: &Shared,
        now: u64,
        vrs: &mut [Option<LocalVr>],
        touched: &mut Touched,
        vr: VrId,
        p: Pkt,
        len: u16,
    ) -> u64 {
        let Some(l) = Self::reach(vrs, touched, vr) else {
            sh.pool.free(p);
            return 1;
        };
        Self::stage_in(sh, now, l, p, len)
    }

    /// VR `vr`'s state, noted in `touched` as reached by this burst. `None` cannot happen
    /// (demux and the VR list come from the same snapshot); the caller drops the packet.
    #[inline(always)]
    fn reach<'v>(
        vrs: &'v mut [Option<LocalVr>],
        touched: &mut Touched,
        vr: VrId,
    ) -> Option<&'v mut LocalVr> {
        let l = vrs.get_mut(usize::from(vr)).and_then(Option::as_mut)?;
        touched.note(vr, !l.in_burst);
        l.in_burst = true;
        Some(l)
    }

    /// Stage a packet in a VR's ingress ring (published at the end of the burst, see
    /// [`Worker::flush_staged`]); returns 1 if it was dropped (ring full, VR quarantined).
    /// The VR must be noted in `touched` already.
    ///
    /// Why straight into the ring: a per-VR staging vector cost a copy per packet, and
    /// with many VRs its 2 KiB per VR was memory every burst walked through.
    #[inline(always)]
    fn stage_in(sh: &Shared, now: u64, l: &mut LocalVr, p: Pkt, len: u16) -> u64 {
        l.burst += 1;
        if l.quarantined {
            sh.pool.free(p);
            l.burst_quar += 1;
            return 1;
        }
        let Some(prod) = l.producer.as_mut() else {
            sh.pool.free(p);
            l.burst_full += 1;
            return 1;
        };
        match prod.stage(p) {
            Ok(()) => {
                l.burst_bytes += u64::from(len);
                if prod.staged() == VECTOR {
                    // The policer decides at most a vector at once.
                    return Self::admit_here(sh, now, l);
                }
                0
            }
            Err(p) => {
                sh.pool.free(p);
                l.burst_full += 1;
                1
            }
        }
    }

    /// Police a VR's staged packets (unless it has no policer) and publish the rest to its
    /// owner; returns how many were policed. Small enough to inline into
    /// [`Worker::flush_staged`] (the policer is out of line): with many VRs a receive burst
    /// admits nearly every one of them, and without a policer this is a publish and two
    /// counters.
    fn admit(sh: &Shared, now: u64, l: &mut LocalVr) -> u64 {
        let c = l.counters.get();
        let Some(prod) = l.producer.as_mut() else {
            return 0;
        };
        let policed = if prod.staged() > 0 && l.policed {
            Self::police(sh, now, prod, &l.snap.vr.policer, &mut l.burst_bytes, c)
        } else {
            0
        };
        let pushed = prod.staged();
        prod.publish_stamped(now);
        c.rx_packets.add(pushed as u64);
        c.rx_bytes.add(core::mem::take(&mut l.burst_bytes));
        policed
    }

    /// [`Worker::admit`] out of line, for the demux loop's per-frame path, where it runs at
    /// most once per burst (a VR's 256th staged packet).
    #[inline(never)]
    fn admit_here(sh: &Shared, now: u64, l: &mut LocalVr) -> u64 {
        Self::admit(sh, now, l)
    }

    /// The policer's verdict on the staged packets: those it refuses are freed and counted
    /// (their bytes taken off `burst_bytes`); returns how many.
    #[inline(never)]
    fn police(
        sh: &Shared,
        now: u64,
        prod: &mut Producer,
        policer: &crate::policer::Policer,
        burst_bytes: &mut u64,
        c: &VrCounters,
    ) -> u64 {
        let pool = &*sh.pool;
        let refused = policer.police(now, prod.staged(), |i| {
            usize::from(pool.meta(prod.staged_at(i)).len)
        });
        if refused == [0; 4] {
            return 0;
        }
        let (mut policed, mut bytes) = (0, 0);
        prod.retain_staged(
            |i, _| refused[i / 64] >> (i % 64) & 1 == 0,
            |p| {
                policed += 1;
                bytes += u64::from(pool.meta(&p).len);
                pool.free(p);
            },
        );
        *burst_bytes -= bytes;
        c.drops[Drop::VrPoliced as usize].add(policed);
        policed
    }

    /// End of a receive burst: publish every touched VR's staged packets and settle its
    /// counters; returns packets dropped.
    fn flush_staged(
        sh: &Shared,
        now: u64,
        vrs: &mut [Option<LocalVr>],
        touched: &mut Touched,
        track: &mut RxTrack,
        sleep: &mut Sleep,
    ) -> u64 {
        let mut dropped = 0;
        while let Some(vr) = touched.pop() {
            if let Some(l) = vrs.get_mut(usize::from(vr)).and_then(Option::as_mut) {
                dropped += Self::admit(sh, now, l);
                let c = l.counters.get();
                if l.burst_full > 0 {
                    let n = core::mem::take(&mut l.burst_full);
                    c.drops[Drop::VrIngressFull as usize].add(u64::from(n));
                }
                if l.burst_quar > 0 {
                    let n = core::mem::take(&mut l.burst_quar);
                    c.drops[Drop::VrQuarantined as usize].add(u64::from(n));
                }
                if l.burst >= SIGNIFICANT {
                    let _ = track.fed.try_push(vr);
                }
                // `burst` is at most a vector, and `since_wake` below `COALESCE` before.
                l.since_wake += l.burst as u16;
                if usize::from(l.since_wake) >= COALESCE {
                    l.since_wake = 0;
                    sh.wake[l.wake_to as usize].set(vr);
                }
                // Only a VR this worker runs can be in an idle sleep here (one left
                // by a VR that moved away is cleared when it comes back). Another
                // worker's VR: its runner ends the sleep when it takes the arrival.
                sleep.wake_idle(vr);
                touched.arrivals.note(usize::from(l.wake_to), vr);
                track.top = track.top.max(l.burst);
                l.burst = 0;
                l.in_burst = false;
            }
        }
        touched.arrivals.post(&sh.arrive);
        dropped
    }

    /// Whether an owned VR may run now: not quarantined (a quarantined VR's queued packets
    /// are dropped here) and not waiting for its previous owner's fences. Inlined: the
    /// scheduler asks it of every owned VR in every poll, and nearly always the answer is yes
    /// at once; the rest is [`Worker::runnable_slow`].
    #[inline]
    fn runnable(&mut self, vr: VrId) -> bool {
        let local = self.local;
        let Some(l) = self.vrs.get(usize::from(vr)).and_then(Option::as_ref) else {
            return false;
        };
        match &l.own {
            Some(o) if !l.quarantined && !o.quarantined && (local || o.fences.is_empty()) => true,
            Some(_) => self.runnable_slow(vr),
            None => false,
        }
    }

    /// [`Worker::runnable`] for a VR that is or was quarantined, or waits for fences.
    #[inline(never)]
    fn runnable_slow(&mut self, vr: VrId) -> bool {
        let Some(l) = self.vrs.get_mut(usize::from(vr)).and_then(Option::as_mut) else {
            return false;
        };
        let Some(o) = l.own.as_mut() else {
            return false;
        };
        if l.quarantined {
            o.quarantined = true;
            let pool = &*self.sh.pool;
            let c = &l.snap.vr.counters[self.id];
            let mut n = 0;
            for cons in &mut o.consumers {
                cons.drain(|p| {
                    n += 1;
                    pool.free(p);
                });
            }
            while o.injects
                && let Some(p) = l.snap.vr.inject.pop()
            {
                n += 1;
                pool.free(p);
            }
            c.drops[Drop::VrQuarantined as usize].add(n);
            return false;
        }
        if o.quarantined {
            // Released: a clean slate.
            o.quarantined = false;
            o.sched.history = 0;
        }
        if !self.local && !o.fences.is_empty() {
            o.fences.retain(|f| !f.passed());
            if !o.fences.is_empty() {
                return false;
            }
        }
        true
    }

    /// Forward everything waiting in this worker's rings (where received, before it lets
    /// go of a receive queue) and push it to the transmit queues.
    fn run_backlog(&mut self) {
        let now_ns = self.sh.now_ns();
        let (fairness, watchdog) = (self.sh.fairness(), self.sh.watchdog());
        for i in 0..self.owned.len() {
            let vr = self.owned[i];
            if !self.runnable(vr) {
                continue;
            }
            while self.run_vr(vr, now_ns, false, fairness, watchdog) == VECTOR {}
        }
        self.tx.kick(&self.sh.pool);
    }

    /// Spend up to `budget` packets of forwarding on the owned VRs, by stride pass.
    ///
    /// Under `pressure` a VR with fewer than [`COALESCE`] packets waiting is passed over
    /// until its deferral (the worker's, `crate::deferral`) runs out, and one with none is
    /// left for as long: both sleep ([`crate::wake`]), so that the scan reads only VRs that
    /// may run, and demux wakes them sooner when their packets come. Without pressure a VR
    /// with none sleeps idle if only this worker's demux feeds it, which wakes it with its
    /// first packet.
    fn schedule(&mut self, now_ns: u64, pressure: bool, budget: usize) -> usize {
        let (fairness, watchdog) = (self.sh.fairness(), self.sh.watchdog());
        let poll = self.sleep.now();
        // On the owner, every packet queued for an owned VR is announced: by this worker's
        // demux (`Sleep::wake_idle`) or, from another worker's, by an arrival bit. Where
        // received, only the ring this worker's demux feeds is (see `Owned::rest`).
        let on_owner = !self.local;
        // A deferral of none (the operator turned deferring off) is no pressure to a VR: its
        // short backlog runs at once, and with nothing queued it rests as in a light poll,
        // asleep until its demux wakes it, rather than being looked at in every poll.
        let defer = pressure.then(|| self.deferral.polls()).filter(|&d| d > 0);
        let mut scanned = 0u64;
        self.cands.clear();
        if let Some(&last) = self.owned.last() {
            let sleep = &mut self.sleep;
            if on_owner && self.sh.workers > 1 {
                self.sh.arrive[self.id].take(last, |vr| sleep.wake_idle(vr));
            }
            if pressure {
                self.sh.wake[self.id].take(last, |vr| sleep.wake(vr));
            }
        }
        for i in 0..self.owned.len() {
            let vr = self.owned[i];
            // Only the VRs that may run are looked at (see `crate::wake`).
            if self.sleep.asleep(vr, pressure) {
                continue;
            }
            scanned += 1;
            if !self.runnable(vr) {
                continue;
            }
            let Some(l) = self.vrs[usize::from(vr)].as_mut() else {
                continue;
            };
            let Some(o) = l.own.as_mut() else { continue };
            if o.inject_pending && l.snap.vr.inject.is_empty() {
                o.inject_pending = false;
            }
            let inject = o.may_inject();
            let backlog = o.backlog();
            // A VR with a queue of its own to read is a candidate: its packets wait there.
            let fed = self.feeders.has(vr);
            if backlog == 0 && !inject && !fed {
                o.rest(&mut self.sleep, vr, poll, defer, on_owner);
                continue;
            }
            // Under pressure a VR with a short backlog waits (see `run_vr`), asleep until
            // its deferral runs out or demux has queued enough for it.
            if let Some(polls) = defer
                && !inject
                && !fed
                && backlog < COALESCE
                && let Some(until) = o.defer(poll, polls)
            {
                self.sleep.until(vr, until);
                continue;
            }
            o.sched.rejoin(self.vtime);
            self.cands.push((o.sched.pass, vr));
        }
        self.sh.worker_counters[self.id].vrs_scanned.add(scanned);
        let mut spent = 0;
        while spent < budget && !self.cands.is_empty() {
            let mut best = 0;
            let mut best_pass = self.cands[0].0;
            for (j, &(p, _)) in self.cands.iter().enumerate().skip(1) {
                if before(p, best_pass) {
                    (best, best_pass) = (j, p);
                }
            }
            self.vtime = best_pass;
            let vr = self.cands[best].1;
            if self.feeders.has(vr) {
                self.pick_rx(vr);
            }
            let n = self.run_vr(vr, now_ns, false, fairness, watchdog);
            if pressure {
                self.deferral.ran(n);
            }
            spent += n;
            let own = self.vrs[usize::from(vr)]
                .as_mut()
                .and_then(|l| l.own.as_mut());
            match own {
                Some(o) if n == VECTOR && !o.quarantined => self.cands[best].0 = o.sched.pass,
                own => {
                    // Short of a vector (unless quarantined): its rings ran dry (and its
                    // inject queue, or that waits for fences). It rests now as the next
                    // poll's scan would find it, so the scan need not look at it just to
                    // learn that: with many VRs under light load, half its looks were these.
                    if let Some(o) = own.filter(|o| !o.quarantined) {
                        o.rest(&mut self.sleep, vr, poll, defer, on_owner);
                    }
                    self.feeders.done(vr);
                    self.cands.swap_remove(best);
                }
            }
        }
        spent
    }

    /// The VR that receive queue `q` feeds alone, if the scheduler may read the queue for
    /// it this poll (see [`crate::feeder`]): its last [`SOLE_STREAK`] bursts were full and
    /// went wholly to a VR this worker may run now.
    fn sole_feeder(&mut self, q: usize) -> Option<VrId> {
        let t = &self.rx[q].track;
        let vr = t.sole.filter(|_| t.streak >= SOLE_STREAK)?;
        // A VR this worker cannot stage packets for is read in the receive phase (where its
        // frames are dropped and counted); `runnable` turns down a quarantined one.
        self.vrs.get(usize::from(vr))?.as_ref()?.producer.as_ref()?;
        self.runnable(vr).then_some(vr)
    }

    /// The scheduler picked `vr`, which receive queues feed alone: unless a vector waits
    /// already, read a burst from the next of them that has packets (see [`crate::feeder`]).
    /// A queue found empty at its first read this poll has gone quiet and qualifies again
    /// only after as many full bursts; one whose burst was not all the VR's is done for this
    /// poll, and the VRs that burst went to run in this poll, as if it had been read in the
    /// receive phase.
    fn pick_rx(&mut self, vr: VrId) {
        let backlog: usize = self
            .vrs
            .get(usize::from(vr))
            .and_then(Option::as_ref)
            .and_then(|l| l.own.as_ref())
            .map_or(0, Owned::backlog);
        if backlog >= VECTOR {
            return;
        }
        while let Some((q, first)) = self.feeders.next(vr) {
            let n = self.rx_one(q);
            self.picked_rx += n;
            self.sh.worker_counters[self.id].rx_at_pick.add(n as u64);
            if n == 0 {
                if first {
                    let t = &mut self.rx[q].track;
                    (t.sole, t.streak) = (None, 0);
                }
                self.feeders.done_queue(vr, q);
                continue;
            }
            let t = &self.rx[q].track;
            if t.sole == Some(vr) {
                return;
            }
            self.feeders.done_queue(vr, q);
            let moved = t.fed.clone();
            for other in moved {
                if other == vr
                    || self.cands.iter().any(|&(_, c)| c == other)
                    || !self.runnable(other)
                {
                    continue;
                }
                if let Some(o) = self.vrs[usize::from(other)]
                    .as_mut()
                    .and_then(|l| l.own.as_mut())
                {
                    o.sched.rejoin(self.vtime);
                    self.cands.push((o.sched.pass, other));
                }
            }
            return;
        }
    }

    /// Start loading what a run of a VR (`snap`, this worker's `counters` of it, `o` its
    /// owner's state) reads first, all at once: with many VRs each is cold when the VR's
    /// turn comes (its counters, its `Vr`'s fields, its FIB's snapshot, its rings' first
    /// handles, its adjacency cache, its VIFs), and the path reached them one after another,
    /// a miss each. Only once the run is decided: a VR deferred here loads nothing.
    #[inline(always)]
    fn prefetch_run(snap: &VrSnap, counters: &CountersRef, o: &Owned, worker: usize) {
        use crate::prefetch::read;
        let vr = &*snap.vr;
        let c: *const VrCounters = counters.get();
        read(c);
        read(c.cast::<u8>().wrapping_add(64));
        read(&vr.weight);
        read(&vr.policer);
        read(&vr.fast_epoch);
        vr.fib4.prefetch();
        for r in &o.consumers {
            r.prefetch_head();
        }
        o.state.adj4.prefetch();
        read(&o.state.fc4);
        for v in snap.vifs.iter().take(4).flatten() {
            read(&**v);
            read(&*v.counters[worker]);
        }
    }

    /// Run one vector of an owned VR; time it, charge it, let the watchdog judge it.
    /// Returns packets handled.
    ///
    /// `coalesce` (the round-robin baseline only; the stride scheduler decides before it
    /// calls): under pressure (a receive queue gave a full burst this poll) a VR with a
    /// short backlog waits for up to the worker's deferral (`crate::deferral`) or until
    /// [`COALESCE`] packets are queued: with many VRs sharing a port, a burst of 256 split
    /// over 100 VRs would otherwise run vectors of 2–3 packets, and every per-vector cost
    /// (FIB batch setup, tx bursts) would be paid per packet — measured at 0.16× the one-VR
    /// rate. Without pressure every VR runs at once, so a lightly loaded router adds no
    /// latency.
    fn run_vr(
        &mut self,
        vr: VrId,
        now_ns: u64,
        coalesce: bool,
        fairness: Fairness,
        watchdog: Option<Watchdog>,
    ) -> usize {
        let poll = self.sleep.now();
        let Some(l) = self.vrs.get_mut(usize::from(vr)).and_then(Option::as_mut) else {
            return 0;
        };
        let Some(o) = l.own.as_mut() else { return 0 };
        if coalesce && !o.may_inject() {
            let backlog = o.backlog();
            if backlog < COALESCE && o.defer(poll, self.deferral.polls()).is_some() {
                return 0;
            }
        }
        Self::prefetch_run(&l.snap, &l.counters, o, self.id);
        // Armed by an earlier vector over budget: time the path on the CPU clock too.
        let on_cpu = (o.sched.armed > 0 && watchdog.is_some() && self.cost_model.is_none())
            .then(CpuSpan::start);
        let t0 = cycles();
        let waited = o.defer_start != NOT_DEFERRED;
        o.defer_start = NOT_DEFERRED;
        let pool = &*self.sh.pool;
        let mut v = PktVec::new();
        // Injected frames first: they are few and carry the control plane's protocols.
        if o.may_inject() {
            while !v.is_full() {
                let Some(p) = l.snap.vr.inject.pop() else {
                    // Drained: a frame queued from now on rings the bell again.
                    o.inject_pending = false;
                    break;
                };
                v.push(p);
            }
        }
        let injected = v.len();
        let mut input = PktVec::new();
        let nc = o.consumers.len();
        for k in 0..nc {
            let i = (o.next_consumer + k) % nc;
            let ring = &mut o.consumers[i];
            ring.pop_burst(&mut input, VECTOR - injected);
            if let Some(at) = ring.take_probe() {
                let waited = now_ns.saturating_sub(at);
                l.snap.vr.counters[self.id].ingress_wait.record(waited);
            }
            if input.len() + injected == VECTOR {
                break;
            }
        }
        if nc > 0 {
            o.next_consumer = (o.next_consumer + 1) % nc;
        }
        if injected == 0 && input.is_empty() {
            return 0;
        }
        let LocalVr { snap, .. } = l;
        // The fast generation is read before the vector's lookups (see `crate::fastpath`).
        // The policer itself, not demux's copy (`LocalVr::policed`): `set_policer` moves the
        // fast generation before the copy is refreshed, so a stale copy could offer flows
        // under the new generation that the fast path would then forward unpoliced.
        let fast = self
            .sh
            .fast
            .get()
            .filter(|_| !snap.vr.policer.active())
            .map(|f| &**f);
        let mut cx = Ctx {
            pool,
            worker: self.id,
            vr: &snap.vr,
            vifs: &snap.vifs,
            c: &snap.vr.counters[self.id],
            nodes: &self.sh.worker_counters[self.id].nodes,
            ports: &self.sh.port_counters,
            tx: &mut self.tx,
            st: &mut o.state,
            now_ns,
            waited,
            fast: fast.map(|f| (f, snap.vr.fast_generation(snap.vif_epoch))),
        };
        let n = injected + input.len();
        crate::node::input::inject(&mut cx, &mut v);
        crate::node::input::vr_input(&mut cx, &mut input, &mut self.scratch);
        let extra = snap.vr.extra_cost.load(Ordering::Relaxed);
        if extra != 0 {
            burn(u64::from(extra) * n as u64);
        }
        let wait = snap.vr.extra_wait_us.load(Ordering::Relaxed);
        if wait != 0 {
            std::thread::sleep(std::time::Duration::from_micros(u64::from(wait)));
        }
        let t = cycles();
        let on_cpu = on_cpu.and_then(CpuSpan::end);
        cx.flush();
        let t1 = cycles();
        cx.count(Node::Tx, n, t1.wrapping_sub(t));
        let (cyc, path) = match &mut self.cost_model {
            Some(f) => {
                let c = f(&snap.vr, n);
                (c, PathTime::Exact(c))
            }
            None => {
                let path = t.wrapping_sub(t0);
                let path = match on_cpu {
                    Some((wall_ns, cpu_ns)) => PathTime::OnCpu {
                        cycles: path,
                        wall_ns,
                        cpu_ns,
                    },
                    None => PathTime::Wall(path),
                };
                (t1.wrapping_sub(t0), path)
            }
        };
        let c = &snap.vr.counters[self.id];
        c.vectors.add(1);
        c.scheduled.add(n as u64);
        let accounted = o.sched.account(n, cyc);
        c.cycles.add(accounted);
        let wc = &self.sh.worker_counters[self.id];
        wc.busy_cycles.add(accounted);
        wc.fwd_packets.add(n as u64);
        if n == VECTOR {
            wc.full_fwd_cycles.add(accounted);
            wc.full_fwd_packets.add(n as u64);
        }
        let weight = snap.vr.weight.load(Ordering::Relaxed);
        match o.sched.charge(n, cyc, path, weight, fairness, watchdog) {
            crate::sched::Verdict::Ok => {}
            crate::sched::Verdict::Offence => c.watchdog_offences.add(1),
            crate::sched::Verdict::Excused => c.watchdog_excused.add(1),
            crate::sched::Verdict::Quarantine => {
                c.watchdog_offences.add(1);
                snap.vr.quarantined.store(true, Ordering::Relaxed);
                snap.vr.bump_fast();
                self.sh.flags_gen.fetch_add(1, Ordering::Release);
                o.quarantined = true;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each VR reached is listed once however many of the burst's packets it took, the
    /// "first packet" flag being what `stage` derives from `in_burst`.
    fn note_all(t: &mut Touched, seq: impl IntoIterator<Item = VrId>) -> Vec<VrId> {
        let mut seen = std::collections::HashSet::new();
        for vr in seq {
            t.note(vr, seen.insert(vr));
        }
        let mut out = Vec::new();
        while let Some(vr) = t.pop() {
            out.push(vr);
        }
        out.reverse();
        out
    }

    #[test]
    fn touched_lists_each_vr_once_in_the_order_reached() {
        let mut t = Touched::new(0);
        assert_eq!(note_all(&mut t, [7, 7, 3, 7, 0, 3, 9, 0]), vec![7, 3, 0, 9]);
        // Emptied by popping, ready for the next burst.
        assert_eq!(t.pop(), None);
        assert_eq!(note_all(&mut t, [5]), vec![5]);
    }

    #[test]
    fn touched_holds_every_vr_id_and_writes_past_the_last_stay_inside() {
        let mut t = Touched::new(0);
        let every = (0..=VrId::MAX).rev();
        let repeats = [VrId::MAX, 0, 12345];
        let got = note_all(&mut t, every.clone().chain(repeats));
        assert_eq!(got, every.collect::<Vec<_>>());
    }
}
