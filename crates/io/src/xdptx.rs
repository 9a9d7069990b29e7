//! Transmit through the device's XDP transmit path: a batch of frames per `bpf(2)` call,
//! each handed to the driver's `ndo_xdp_xmit` with no socket buffer built.
//!
//! # Why
//!
//! On devices without AF_XDP zero-copy (veth and most virtual devices), an AF_XDP socket's
//! transmit runs in `sendto`: the kernel builds a socket buffer per frame and sends it
//! through the stack's device transmit. AF_PACKET does the same. `perf` on the vrbench
//! forwarding lab put 65 % of a worker's time there (`docs/perf.md`, "Real ports"): the
//! worker's core was spent building skbs, and vrhost forwarded less than the kernel's own
//! IP forwarder. The XDP transmit path (`ndo_xdp_xmit`, what an XDP redirect uses) takes
//! frames in bulk with no skb at all.
//!
//! # How
//!
//! User space cannot call `ndo_xdp_xmit`, but an XDP program run with `BPF_PROG_RUN` in
//! live-frames mode (`BPF_F_TEST_XDP_LIVE_FRAMES`, Linux ≥ 5.18; what xdp-trafficgen builds
//! on) can: every frame it returns `XDP_TX` for is redirected out of the interface the run
//! pretends it arrived on, in bulk, flushed per batch. Live mode starts every frame from one
//! template, so the frames themselves come through maps:
//!
//! - per queue, a map of [`CAP`] + 1 entries that this process maps ([`MmapArray`]):
//!   entry 0 is the queue's control word (the index of the next frame, `u32`, and how many
//!   the program refused, `u32` — a bad length; stays 0), entries 1.. are frames (`u32`
//!   length, 4 bytes padding, the bytes), filled in `tx_burst` — one copy of the frame's
//!   bytes, after which its pool slot is free again;
//! - one program and an array of the queues' maps; the template's XDP metadata says which
//!   queue a run is for (a random cookie, then the queue's index). Metadata, not frame
//!   bytes: live mode initialises a page from the template only the first time a run uses
//!   it, and a page the receiving side has freed again comes back within the same run with
//!   the last frame's bytes in it — but the metadata in front of them untouched;
//! - the program: check the cookie, find the queue's map, take the next index, grow or
//!   shrink the live frame to that entry's length (`bpf_xdp_adjust_tail`), copy the bytes
//!   in (`bpf_xdp_store_bytes`), return `XDP_TX`.
//!
//! `flush` (once per worker poll) runs the program once per queued frame in one call
//! (`repeat` = frames, flushed every 64: [`BATCH`]). The slots go back to the pool in `tx_burst`, so
//! nothing is in flight afterwards: no completion ring, no fences.
//!
//! **Why one program, attached to a loopback nobody uses.** A test run puts its program
//! into the kernel's XDP dispatcher for the run and takes it out afterwards, and each
//! change of the dispatcher waits for an RCU grace period: measured 23–33 ms per
//! `BPF_PROG_RUN` on Linux 6.18 (`bpf_dispatcher_change_prog` → `synchronize_rcu`),
//! whatever the frame count. A program attached somewhere stays in the dispatcher and a run
//! changes nothing: 150 µs for 256 frames instead. So the process has one program, shared
//! by all its queues, attached (generic mode) to the loopback device of a private network
//! namespace made for it — no traffic anywhere passes through it, and it goes with the
//! process. (So the program runs only for this process's test runs: a frame without the
//! cookie is dropped, and the run goes on from the next frame's index.)
//!
//! # When it works
//!
//! The device must advertise `NETDEV_XDP_ACT_NDO_XMIT` ([`crate::netdev`]): a frame
//! redirected to a device that cannot take it is dropped with no counter anywhere.
//! Physical NICs with native XDP have it. **A veth has it only while its peer has an XDP
//! program attached or GRO on** (the peer must run a NAPI that takes the frames); `ethtool
//! -K PEER gro on` gives it. [`XdpTx::open`] checks and refuses with the reason; a peer that
//! loses it later makes the frames vanish, which [`usable`] re-checks for callers that poll
//! it ([`crate::txpath`] does).

use std::io;
use std::sync::{Arc, Mutex, Weak};

use vrhost_dataplane::counters::Counter;
use vrhost_dataplane::port::TxQueue;
use vrhost_dataplane::{MAX_FRAME, PktVec, Pool};

use crate::bpf::{
    self, Alu, Cond, Insn, Link, LoadError, Map, MmapArray, Op, Program, Size, assemble,
};
use crate::netdev;

/// Frames one run sends at most (the kernel's largest live-frames batch is 256).
pub const CAP: u32 = 256;
/// Frames per flush inside a run. The kernel runs pending softirqs between batches, so the
/// receiving side's NAPI (a veth peer's, 256 frames of ring) drains in between: with one
/// flush of 256 a ring that was not empty overflowed and the tail of the batch was lost
/// (found by `tests/xdptx.rs`: 15 of 256 frames). 64 is the kernel's own default.
const BATCH: u32 = 64;
/// Queues (of all interfaces) one program serves.
pub const MAX_QUEUES: u32 = 256;
/// Bytes before a frame in its entry (the `u32` length and padding).
const ENTRY_HDR: usize = 8;
/// Smallest frame the program sends (an Ethernet header).
const MIN_FRAME: i32 = 14;
/// Bytes of XDP metadata in front of the template frame: the cookie (8), the queue's
/// index (4), and 4 spare, so a 4-byte push in front of the frame (a VLAN tag on the
/// receiving side) cannot reach the two.
const META_LEN: usize = 16;
/// Bytes of the template: the metadata, then a frame the program resizes and overwrites.
const TEMPLATE_LEN: usize = META_LEN + 64;

/// Counters of one [`XdpTx`] (the owning worker writes, anyone reads).
#[derive(Debug, Default)]
pub struct XdpTxCounters {
    /// Frames handed to the device's XDP transmit.
    pub frames: Counter,
    /// `BPF_PROG_RUN` calls.
    pub runs: Counter,
    /// Frames the program refused (a length outside 14..=`MAX_FRAME`; should stay 0).
    pub refused: Counter,
    /// Frames lost because a run failed or kept ending early (shown by `ctl status`).
    pub failed: Counter,
}

/// Why XDP transmit cannot be used on an interface.
#[derive(Debug, thiserror::Error)]
pub enum XdpTxError {
    /// The device does not take redirected frames.
    #[error(
        "{ifname} does not advertise XDP transmit (ndo_xdp_xmit; xdp-features {features:#x}): \
         a native-XDP driver has it; a veth has it only while its peer has an XDP program or \
         GRO on (`ethtool -K PEER gro on`)"
    )]
    NoXmit {
        /// Interface.
        ifname: String,
        /// What it advertises.
        features: u64,
    },
    /// A kernel call failed.
    #[error("{ifname}: {what}: {source}")]
    Io {
        /// Interface.
        ifname: String,
        /// The step.
        what: &'static str,
        /// The kernel's answer.
        source: io::Error,
    },
    /// The verifier refused the program.
    #[error("{0}")]
    Load(#[from] LoadError),
}

/// A transmit queue that sends through the device's XDP transmit path (see the module doc).
pub struct XdpTx {
    ifname: String,
    ifindex: u32,
    shared: Arc<Shared>,
    slot: u32,
    map: MmapArray,
    template: [u8; TEMPLATE_LEN],
    queued: u32,
    counters: Arc<XdpTxCounters>,
}

impl core::fmt::Debug for XdpTx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XdpTx")
            .field("ifname", &self.ifname)
            .field("queued", &self.queued)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// Whether interface `ifindex` (in the calling thread's namespace) takes redirected frames,
/// and the features it advertises.
pub fn usable(ifindex: u32) -> io::Result<(bool, u64)> {
    let f = netdev::xdp_features(ifindex)?;
    Ok((f & netdev::XDP_ACT_NDO_XMIT != 0, f))
}

impl XdpTx {
    /// A transmit queue on `ifname` (resolved in the calling thread's namespace; the queue
    /// must be used from a thread in that namespace too). Refused, with the reason, when
    /// the device does not advertise XDP transmit.
    pub fn open(ifname: &str) -> Result<XdpTx, XdpTxError> {
        let io = |what| io_error(ifname, what);
        let ifindex = bpf::ifindex(ifname).map_err(io("interface"))?;
        let (ok, features) = usable(ifindex).map_err(io("xdp-features"))?;
        if !ok {
            return Err(XdpTxError::NoXmit {
                ifname: ifname.into(),
                features,
            });
        }
        XdpTx::open_unchecked(ifname)
    }

    /// [`XdpTx::open`] without asking whether the device takes XDP transmit (for callers
    /// that check it themselves, as [`crate::txpath`] does): frames sent while it does
    /// not are lost without a trace.
    pub fn open_unchecked(ifname: &str) -> Result<XdpTx, XdpTxError> {
        let io = |what| io_error(ifname, what);
        let ifindex = bpf::ifindex(ifname).map_err(io("interface"))?;
        let map = queue_map().map_err(io("queue map"))?;
        let shared = Shared::get(&map).map_err(|e| match e {
            SharedError::Io(what, source) => XdpTxError::Io {
                ifname: ifname.into(),
                what,
                source,
            },
            SharedError::Load(e) => XdpTxError::Load(e),
        })?;
        let slot = shared.claim(&map).map_err(io("queue slot"))?;
        let mut template = [0u8; TEMPLATE_LEN];
        template[..8].copy_from_slice(&shared.cookie.to_ne_bytes());
        template[8..12].copy_from_slice(&slot.to_ne_bytes());
        // The frame part: a broadcast header of the local experimental EtherType (never
        // sent: every frame is overwritten before it leaves).
        template[META_LEN..META_LEN + 6].fill(0xff);
        template[META_LEN + 12..META_LEN + 14].copy_from_slice(&[0x88, 0xb5]);
        Ok(XdpTx {
            ifname: ifname.into(),
            ifindex,
            shared,
            slot,
            map,
            template,
            queued: 0,
            counters: Arc::default(),
        })
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Frames waiting for the next run.
    pub fn queued(&self) -> u32 {
        self.queued
    }

    /// The counters, shared.
    pub fn counters(&self) -> Arc<XdpTxCounters> {
        self.counters.clone()
    }

    /// Send what is queued: one `BPF_PROG_RUN` for all of it.
    fn run(&mut self) {
        let n = self.queued;
        if n == 0 {
            return;
        }
        // The control word (next index, refused); the rest of entry 0 is unused.
        self.map.entry(0)[..8].fill(0);
        let c = &self.counters;
        // A signal may end the call early: the program's index says how far it got, and
        // the rest goes in another call from there.
        let mut done = 0;
        let mut tries = 0;
        while done < n {
            c.runs.add(1);
            let r = self.shared.prog.run_live_meta(
                &self.template,
                META_LEN as u32,
                self.ifindex,
                0,
                n - done,
                BATCH.min(n - done),
            );
            done = read_u32(self.map.entry(0), 0).min(n);
            // A run that ended early (a signal; or frames that lost their cookie, which
            // should not happen) is taken up again a few times, then the rest is counted
            // as failed.
            tries += 1;
            match r {
                Ok(()) if tries < 4 => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) && tries < 4 => {}
                _ => break,
            }
        }
        let refused = u64::from(read_u32(self.map.entry(0), 4));
        c.failed.add(u64::from(n - done));
        c.refused.add(refused);
        c.frames.add(u64::from(done) - refused.min(u64::from(done)));
        self.queued = 0;
    }
}

/// An [`XdpTxError::Io`] for step `what` on `ifname`, from the kernel's answer.
fn io_error(ifname: &str, what: &'static str) -> impl FnOnce(io::Error) -> XdpTxError {
    let ifname = ifname.to_string();
    move |source| XdpTxError::Io {
        ifname,
        what,
        source,
    }
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl TxQueue for XdpTx {
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        let taken = pkts.len();
        for p in pkts.drain(..) {
            if self.queued == CAP {
                self.run();
            }
            let f = pool.frame(&p);
            let e = self.map.entry(self.queued + 1);
            e[..4].copy_from_slice(&(f.len() as u32).to_ne_bytes());
            e[ENTRY_HDR..ENTRY_HDR + f.len()].copy_from_slice(f);
            pool.free(p);
            self.queued += 1;
        }
        taken
    }

    fn flush(&mut self, _pool: &Pool) {
        self.run();
    }

    fn fence(&mut self) -> Option<Box<dyn vrhost_dataplane::port::Fence>> {
        // Send what is queued now: afterwards nothing is held.
        self.run();
        None
    }
}

impl Drop for XdpTx {
    fn drop(&mut self) {
        self.run();
        self.shared.release(self.slot);
    }
}

/// A queue's map: control word and [`CAP`] frames.
fn queue_map() -> io::Result<MmapArray> {
    MmapArray::new((ENTRY_HDR + MAX_FRAME) as u32, CAP + 1, "vrhost_txq")
}

/// The process's program, its array of queue maps, and what keeps it in the dispatcher: a
/// link to the loopback device of a private, empty network namespace that exists only for
/// this (its descriptor keeps it alive; it goes with the process).
struct Shared {
    prog: Program,
    queues: Map,
    cookie: u64,
    used: Mutex<Vec<bool>>,
    _link: Link,
    _netns: std::os::fd::OwnedFd,
}

enum SharedError {
    Io(&'static str, io::Error),
    Load(LoadError),
}

/// The process's program while any queue uses it.
static SHARED: Mutex<Weak<Shared>> = Mutex::new(Weak::new());

impl Shared {
    /// The program, made and attached if there is none. `shape` is a queue map (the array
    /// of maps takes its shape).
    fn get(shape: &MmapArray) -> Result<Arc<Shared>, SharedError> {
        let mut held = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = held.upgrade() {
            return Ok(s);
        }
        let queues = Map::array_of_maps(shape.map(), MAX_QUEUES, "vrhost_txqs")
            .map_err(|e| SharedError::Io("queue array", e))?;
        let mut c = [0u8; 8];
        // SAFETY: getrandom writes at most `c.len()` bytes into `c`.
        let n = unsafe { libc::getrandom(c.as_mut_ptr().cast(), c.len(), 0) };
        if n != 8 {
            return Err(SharedError::Io("getrandom", io::Error::last_os_error()));
        }
        let cookie = u64::from_ne_bytes(c);
        let prog = Program::load_xdp(&program(&queues, cookie), "vrhost_xdptx")
            .map_err(SharedError::Load)?;
        let (link, netns) = std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: unshare(2) moves only this short-lived thread into a new network
                // namespace; the thread ends with the scope.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    return Err(SharedError::Io(
                        "private namespace",
                        io::Error::last_os_error(),
                    ));
                }
                let netns = std::fs::File::open("/proc/thread-self/ns/net")
                    .map_err(|e| SharedError::Io("private namespace", e))?;
                // The new namespace's loopback is ifindex 1, down, and carries nothing.
                let link = Link::attach_xdp(&prog, 1, true)
                    .map_err(|e| SharedError::Io("attach to a private lo", e))?;
                Ok((link, std::os::fd::OwnedFd::from(netns)))
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })?;
        let s = Arc::new(Shared {
            prog,
            queues,
            cookie,
            used: Mutex::new(vec![false; MAX_QUEUES as usize]),
            _link: link,
            _netns: netns,
        });
        *held = Arc::downgrade(&s);
        Ok(s)
    }

    /// A free queue index, with `map` entered there.
    fn claim(&self, map: &MmapArray) -> io::Result<u32> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = used.iter().position(|u| !u) else {
            return Err(io::Error::other(format!(
                "more than {MAX_QUEUES} XDP transmit queues in one namespace"
            )));
        };
        self.queues
            .set(i as u32, &(map.map().raw_fd() as u32).to_ne_bytes())?;
        used[i] = true;
        Ok(i as u32)
    }

    fn release(&self, slot: u32) {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.queues.delete(slot);
        used[slot as usize] = false;
    }
}

/// The program: `queues` is the array of queue maps, `cookie` what a template's metadata
/// starts with.
fn program(queues: &Map, cookie: u64) -> Vec<Insn> {
    use Cond::{Eq, Gt, Lt, Ne};
    use Op::{I, Jump, JumpReg, Label};
    let mut ops = vec![
        I(Insn::alu_reg(Alu::Mov, 6, 1)), // r6 = ctx
        // The metadata: 8 bytes of cookie, then the queue's index. A frame without them
        // is dropped.
        I(Insn::load(Size::W, 2, 6, 8)), // r2 = data_meta
        I(Insn::load(Size::W, 3, 6, 0)), // r3 = data
        I(Insn::alu_reg(Alu::Mov, 4, 2)),
        I(Insn::alu_imm(Alu::Add, 4, 12)),
        JumpReg(Gt, 4, 3, "foreign"),
        I(Insn::load(Size::Dw, 4, 2, 0)),
    ];
    ops.extend(Insn::load_imm64(5, cookie).map(I));
    ops.extend([
        JumpReg(Ne, 4, 5, "foreign"),
        I(Insn::load(Size::W, 8, 2, 8)), // r8 = queue index
        I(Insn::store(Size::W, 10, -4, 8)),
        I(Insn::alu_reg(Alu::Mov, 2, 10)),
        I(Insn::alu_imm(Alu::Add, 2, -4)),
    ]);
    ops.extend(Insn::load_map(1, queues).map(I));
    ops.extend([
        I(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)), // r0 = the queue's map
        Jump(Eq, 0, 0, "abort"),
        I(Insn::alu_reg(Alu::Mov, 7, 0)), // r7 = it
        I(Insn::store_imm(Size::W, 10, -8, 0)),
        I(Insn::alu_reg(Alu::Mov, 2, 10)),
        I(Insn::alu_imm(Alu::Add, 2, -8)),
        I(Insn::alu_reg(Alu::Mov, 1, 7)),
        I(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)), // r0 = control word
        Jump(Eq, 0, 0, "abort"),
        I(Insn::alu_reg(Alu::Mov, 9, 0)), // r9 = it
        I(Insn::load(Size::W, 8, 9, 0)),  // r8 = next
        I(Insn::alu_reg(Alu::Mov, 1, 8)),
        I(Insn::alu_imm(Alu::Add, 1, 1)),
        I(Insn::store(Size::W, 9, 0, 1)), // next += 1
        I(Insn::alu_imm(Alu::And, 8, CAP as i32 - 1)),
        I(Insn::alu_imm(Alu::Add, 8, 1)), // r8 = entry
        I(Insn::store(Size::W, 10, -12, 8)),
        I(Insn::alu_reg(Alu::Mov, 2, 10)),
        I(Insn::alu_imm(Alu::Add, 2, -12)),
        I(Insn::alu_reg(Alu::Mov, 1, 7)),
        I(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)), // r0 = the frame's entry
        Jump(Eq, 0, 0, "abort"),
        I(Insn::alu_reg(Alu::Mov, 7, 0)), // r7 = it
        I(Insn::load(Size::W, 8, 7, 0)),  // r8 = its length
        Jump(Gt, 8, MAX_FRAME as i32, "drop"),
        Jump(Lt, 8, MIN_FRAME, "drop"),
        I(Insn::alu_reg(Alu::Mov, 1, 6)),
        I(Insn::call(bpf::FUNC_XDP_GET_BUFF_LEN)), // r0 = the live frame's length
        I(Insn::alu_reg(Alu::Mov, 2, 8)),
        I(Insn::alu_reg(Alu::Sub, 2, 0)), // r2 = wanted − current
        I(Insn::alu_reg(Alu::Mov, 1, 6)),
        I(Insn::call(bpf::FUNC_XDP_ADJUST_TAIL)),
        Jump(Ne, 0, 0, "drop"),
        I(Insn::alu_reg(Alu::Mov, 1, 6)),
        I(Insn::alu_imm(Alu::Mov, 2, 0)), // at offset 0
        I(Insn::alu_reg(Alu::Mov, 3, 7)),
        I(Insn::alu_imm(Alu::Add, 3, ENTRY_HDR as i32)), // the bytes
        I(Insn::alu_reg(Alu::Mov, 4, 8)),                // the length
        I(Insn::call(bpf::FUNC_XDP_STORE_BYTES)),
        Jump(Ne, 0, 0, "drop"),
        I(Insn::alu_imm(Alu::Mov, 0, bpf::XDP_TX)),
        I(Insn::exit()),
        Label("drop"), // refused += 1
        I(Insn::load(Size::W, 1, 9, 4)),
        I(Insn::alu_imm(Alu::Add, 1, 1)),
        I(Insn::store(Size::W, 9, 4, 1)),
        I(Insn::alu_imm(Alu::Mov, 0, bpf::XDP_DROP)),
        I(Insn::exit()),
        Label("abort"),
        I(Insn::alu_imm(Alu::Mov, 0, bpf::XDP_ABORTED)),
        I(Insn::exit()),
        Label("foreign"),
        I(Insn::alu_imm(Alu::Mov, 0, bpf::XDP_DROP)),
        I(Insn::exit()),
    ]);
    assemble(ops)
}
