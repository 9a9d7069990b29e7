//! The rate-controlled, stamped live-frames generator (`crates/traffic/XDP.md`, built).
//!
//! Like `fwd/generator.rs` it runs an XDP program with `BPF_PROG_RUN` +
//! `BPF_F_TEST_XDP_LIVE_FRAMES` as if frames arrived on `a0`, and what the program returns
//! `XDP_TX` for goes straight into `p0`'s rx ring. Unlike it, every frame is *signed*: per
//! frame the program ([`program`])
//!
//! 1. takes the next slot of the [wheel](super::wheel) → stream `s` (one stream per VR);
//! 2. copies stream `s`'s 48-byte head (headers, magic, stream id) over the frame;
//! 3. stores `seq = seqs[s]++` and `bpf_ktime_get_ns()` (CLOCK_MONOTONIC, the sink's
//!    clock) as 48-bit big-endian, and the UDP checksum (see `frames.rs`);
//! 4. returns `XDP_TX`.
//!
//! **Sequence numbers and counts.** One generator thread issues every run, so the runs —
//! and the program's updates of `seqs` — never overlap: `seqs` is a plain array (not
//! per-CPU), each stream's sequence is contiguous from 0, and after the run `seqs[s]` *is*
//! the number of frames stream `s` sent, exactly. (Several generator threads would need a
//! stream id per thread, as XDP.md describes; one CPU already makes several Mpps here, more
//! than any DUT of the lab forwards on this 2-core host.) `XDP_TX` is not delivery: veth
//! drops a frame that finds `p0`'s ring full, and the sink counts it lost — the DUT's loss.
//!
//! **Pacing.** User space runs a `vrhost_traffic::Pacer` (token bucket over CLOCK_MONOTONIC,
//! exact in the long run) for the *aggregate* rate and issues one run per granted burst,
//! `repeat` = the grant, and the wheel splits each burst among the streams by weight.
//! Bursts are sized to the rate over an interval ([`auto_interval`]): 40 µs at low rates
//! (2 frames per burst at 50 kpps), longer where the runs' cost needs it — a run costs about
//! 6–8 µs plus 0.1–0.2 µs per frame here (each builds a fresh page pool), so at 4 Mpps only
//! 256-frame runs every 64 µs keep up — and never more than 256 frames (the DUT's rx ring
//! is 256 deep, so the generator never overflows it by itself). Between bursts the thread
//! sleeps (timer slack 1 ns) until 4 µs before the next is due and spins the rest; it runs
//! `SCHED_FIFO` (see [`realtime`]) so a compiler on the same core cannot hold it off the
//! CPU for a time slice. The bucket holds at least one vector (256 frames): a delay of a
//! few hundred µs is caught up by one full run, which the DUT's ring takes. If the
//! generator still falls behind (asked for more than it makes, or held off longer) the
//! bucket's overflow is counted as `missed`, and the trial reports the shortfall rather
//! than a rate it did not offer.
//!
//! **Why the program stays attached to a spare veth**: see `fwd/generator.rs` — otherwise
//! each run waits for an RCU grace period while the dispatcher is rewritten.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use vrhost_lab::{Netns, Side};
use vrhost_traffic::clock::monotonic_ns;
use vrhost_traffic::rate::MAX_GRANT;
use vrhost_traffic::{Pacer, Rate};

#[cfg(test)]
use super::frames::Template;
use super::frames::{
    self, HEAD_LEN, IP_CSUM_AT, IP_DST_AT, SEQ_AT, Size, TEMPLATE_DELTA_AT, TEMPLATE_DST_AT,
    TEMPLATE_FLOWS_AT, TEMPLATE_IP_SUM_AT, TEMPLATE_VALUE, TIME_AT, UDP_CSUM_AT,
};
use super::wheel::{self, MAX_SLOTS};
use crate::fwd::bpf::{self, Alu, Cond, Insn, Link, Map, Program};

/// The spare veth pair in the side-A namespace holding the program attached.
const KEEP_IF: (&str, &str) = ("vrblive0", "vrblive1");
/// The shortest burst interval.
const MIN_INTERVAL: Duration = Duration::from_micros(40);
/// Cost of a run here (2-core KVM guest, busy): about `RUN_FIXED_NS` plus `RUN_PER_FRAME_NS`
/// per frame (measured: 1 frame 6 µs, 80 frames ~30 µs, 256 frames 28–55 µs).
const RUN_FIXED_NS: f64 = 8_000.0;
const RUN_PER_FRAME_NS: f64 = 200.0;
/// The share of the generator's CPU that runs may take, the rest left for sleeping and
/// for what else runs on the core.
const RUN_DUTY: f64 = 0.5;
/// Waits longer than this sleep (the rest is spun): spinning counts against the kernel's
/// real-time budget (95 % of a CPU), and a thread that exceeds it is stopped for 50 ms.
pub(crate) const SLEEP_ABOVE_NS: u64 = 8_000;
/// A sleep ends this long before the burst is due; the rest is spun.
pub(crate) const SLEEP_EARLY_NS: u64 = 4_000;
/// The generator thread's nice value when it cannot be real-time.
const GEN_NICE: libc::c_int = -15;

/// The burst interval for `pps`: bursts of at least `pps` × 40 µs frames, and large enough
/// that runs take at most [`RUN_DUTY`] of the CPU — `N ≥ fixed·R / (duty − per_frame·R)`
/// — up to 256 frames (one vector; the DUT's ring) at high rates.
pub(crate) fn auto_interval(pps: f64) -> Duration {
    let r = pps / 1e9; // frames per ns
    let budget = RUN_DUTY - RUN_PER_FRAME_NS * r;
    let n = if budget <= 0.0 {
        MAX_GRANT as f64
    } else {
        (RUN_FIXED_NS * r / budget).ceil()
    };
    let n = n
        .max(pps * MIN_INTERVAL.as_secs_f64())
        .clamp(1.0, MAX_GRANT as f64);
    Duration::from_nanos((n / r).round() as u64)
}

/// Make the calling thread `SCHED_FIFO` (priority 1, the lowest), else nice −15.
///
/// Why: on a shared 2-core host a compiler on the generator's core otherwise takes it off
/// the CPU for whole time slices (ms) — thousands of frames at 1 Mpps, more than the bucket
/// holds — and the trial is under-offered (measured: −5 to −35 % at 0.5–4 Mpps with nice
/// −15, within 0.01 % with SCHED_FIFO). The thread sleeps between bursts and its runs take
/// at most [`RUN_DUTY`] of the core, so CFS tasks there still get the rest (and the
/// kernel's RT throttling keeps 5 % for them in any case).
pub(crate) fn realtime() {
    if vrhost_io::sched::set_policy(vrhost_io::sched::Policy::Fifo(1)).is_err() {
        // SAFETY: setpriority on this thread's own id; no memory is passed.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, GEN_NICE);
        }
    }
}
/// From this rate on (and unpaced), the generator sends in long runs paced by the program
/// ([`Generator::long_runs`]); below it, in one short run per burst, sleeping between them.
/// At low rates a fresh page per frame costs little, and spinning through a run between
/// frames far apart would hold the generator's core for nothing.
///
/// Not understood yet: through the kernel with its NAPI thread pinned to the other core,
/// some trials lose a few frames — 0.1–1.2 % at 0.1–0.2 Mpps (long runs) in about 2 runs of
/// 5, and once 14 of 49,990 at 50 kpps (short runs) in a fresh lab (2026-11-27, Linux
/// 6.18) — and `a0` counts exactly those frames as `xdp_xmit_errors`: `p0`'s 256-entry ring
/// was full, its NAPI thread held off for over 1 ms. A bucket of 128 instead of 256 frames
/// did not help (3 runs of 6 lost); `--rx-napi inline` lost nothing in the same runs. So
/// it is the DUT's loss, as the trial reports it; the tests through this path allow a little.
pub(crate) const LONG_RUNS_FROM_PPS: f64 = 100_000.0;
/// The time one long run aims at (at most).
const LONG_RUN_NS: f64 = 2_000_000.0;
/// After a paced long run the thread sleeps this share of the run's time…
const LONG_RUN_REST: f64 = 0.08;
/// …and runs are kept short enough that no more than this many frames fall due in a rest
/// (the burst the next run then sends at once: half the DUT's 256-entry ring).
const LONG_RUN_REST_FRAMES: f64 = 128.0;

/// Frames per live-frames flush inside a run, and the size of the run's page pool.
pub(crate) const DEFAULT_FLUSH: u32 = 64;

/// The loaded generator: program, maps, and the streams' templates.
#[derive(Debug)]
pub(crate) struct Generator {
    prog: Program,
    state: Map,
    wheel: Map,
    templates: Map,
    seqs: Map,
    streams: u32,
    frame: Vec<u8>,
    size: Size,
    weights: Vec<f64>,
    /// Every stream's destinations: `flows` consecutive addresses from the first (`None`:
    /// one flow, to the VR's side-B host).
    flows: Option<(std::net::Ipv4Addr, u32)>,
    _keep: Option<Link>,
}

/// What one paced run did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sent {
    /// Frames per stream (the program's own counters: exact).
    pub(crate) per_stream: Vec<u64>,
    /// From the first run's start to the last one's end.
    pub(crate) elapsed: Duration,
    /// Tokens the pacer discarded because the generator was behind (0 when it kept up).
    pub(crate) missed: u64,
    /// `BPF_PROG_RUN` calls made (the AF_PACKET generator: `sendmmsg` bursts).
    pub(crate) calls: u64,
    /// Frames the generator's own port refused, not sent (the AF_PACKET generator: the
    /// kernel's queue on `a0` was full; always 0 here, `XDP_TX` always takes the frame).
    pub(crate) tx_full: u64,
}

impl Sent {
    /// Frames of every stream.
    pub(crate) fn total(&self) -> u64 {
        self.per_stream.iter().sum()
    }
}

/// Size classes per stream in the templates map (IMIX has 3).
const MAX_CLASSES: u32 = 3;
/// `bpf_xdp_adjust_tail(ctx, delta)`.
const FUNC_XDP_ADJUST_TAIL: i32 = 65;

/// The `state` map's one entry: the wheel's position and length, then the in-program pacer
/// of a long run ([`Generator::run`]): every field a native-endian u64 at its offset.
mod st {
    /// u32: the wheel slot of the next frame.
    pub(super) const POS: usize = 0;
    /// u32: slots in the wheel.
    pub(super) const LEN: usize = 4;
    /// Frames per second the program releases (0: every call of the program sends).
    pub(super) const PPS: usize = 8;
    /// CLOCK_MONOTONIC ns the pacer counts from.
    pub(super) const START: usize = 16;
    /// From this CLOCK_MONOTONIC ns on, every frame is dropped (0: no end).
    pub(super) const END: usize = 24;
    /// Frames released so far, sent or missed: the token bucket's debit.
    pub(super) const BASE: usize = 32;
    /// Frames the bucket may hold (a burst after the thread was held off).
    pub(super) const DEPTH: usize = 40;
    /// Frames the bucket overflowed by: due, never sent.
    pub(super) const MISSED: usize = 48;
    /// The entry's size.
    pub(super) const SIZE: usize = 56;
}

/// The program. Maps: `state` [1] (see [`st`]); `wheel` [MAX_SLOTS] {u32 stream, u32
/// template}; `templates` [streams × 3] of [`TEMPLATE_VALUE`] bytes; `seqs` [streams] u64.
///
/// With a pacer set (`PPS` > 0) the program first asks it whether this frame is due: the
/// frames due by now are `(now − START) × PPS / 10⁹`; when `BASE` has reached that, the frame
/// is dropped (`XDP_DROP`: live mode puts the page straight back in the run's pool) and the
/// run goes on to the next call — so one long run spins through drops between due frames
/// and sends each as it falls due. A bucket more than `DEPTH` behind forgets the excess and
/// counts it in `MISSED`.
pub(crate) fn program(state: &Map, wheel: &Map, templates: &Map, seqs: &Map) -> Vec<Insn> {
    use bpf::Size::{Dw, H, W};
    let mut p: Vec<Insn> = Vec::with_capacity(128);
    // Jumps to the abort label are patched at the end (`fix`).
    let mut aborts = Vec::new();
    let lookup = |p: &mut Vec<Insn>, aborts: &mut Vec<usize>, map: &Map| {
        p.extend(Insn::load_map(1, map));
        p.push(Insn::alu_reg(Alu::Mov, 2, 10));
        p.push(Insn::alu_imm(Alu::Add, 2, -4));
        p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM));
        aborts.push(p.len());
        p.push(Insn::jump_imm(Cond::Eq, 0, 0, 0));
    };
    p.push(Insn::alu_reg(Alu::Mov, 6, 1)); // r6 = ctx
    p.push(Insn::call(bpf::FUNC_KTIME_GET_NS));
    p.push(Insn::store(Dw, 10, -16, 0)); // ts on the stack
    p.push(Insn::store_imm(W, 10, -4, 0)); // key = 0
    lookup(&mut p, &mut aborts, state);
    pacer(&mut p, &mut aborts);
    p.push(Insn::load(W, 1, 0, 0)); // r1 = pos
    p.push(Insn::load(W, 2, 0, 4)); // r2 = len
    p.push(Insn::alu_reg(Alu::Mov, 3, 1)); // next = pos + 1 < len ? pos + 1 : 0
    p.push(Insn::alu_imm(Alu::Add, 3, 1));
    p.push(Insn::jump_reg(Cond::Lt, 3, 2, 1));
    p.push(Insn::alu_imm(Alu::Mov, 3, 0));
    p.push(Insn::store(W, 0, 0, 3));
    p.push(Insn::store(W, 10, -4, 1)); // key = pos
    lookup(&mut p, &mut aborts, wheel);
    p.push(Insn::load(W, 7, 0, 0)); // r7 = stream
    p.push(Insn::load(W, 1, 0, 4)); // key = template
    p.push(Insn::store(W, 10, -4, 1));
    lookup(&mut p, &mut aborts, templates);
    p.push(Insn::alu_reg(Alu::Mov, 8, 0)); // r8 = &templates[template]
    p.push(Insn::store(W, 10, -4, 7)); // key = stream
    lookup(&mut p, &mut aborts, seqs);
    p.push(Insn::alu_reg(Alu::Mov, 9, 0)); // r9 = &seqs[stream]
    // Frames shorter than the run's input (IMIX): shrink this one.
    p.push(Insn::load(W, 2, 8, TEMPLATE_DELTA_AT as i16));
    p.push(Insn::jump_imm(Cond::Eq, 2, 0, 3));
    p.push(Insn::alu_reg(Alu::Mov, 1, 6));
    p.push(Insn::call(FUNC_XDP_ADJUST_TAIL));
    aborts.push(p.len());
    p.push(Insn::jump_imm(Cond::Ne, 0, 0, 0));
    p.push(Insn::load(W, 2, 6, 0)); // r2 = data
    p.push(Insn::load(W, 3, 6, 4)); // r3 = data_end
    p.push(Insn::alu_reg(Alu::Mov, 4, 2));
    p.push(Insn::alu_imm(Alu::Add, 4, frames::MIN_BUF as i32));
    aborts.push(p.len());
    p.push(Insn::jump_reg(Cond::Gt, 4, 3, 0));
    for w in 0..(HEAD_LEN / 8) as i16 {
        p.push(Insn::load(Dw, 1, 8, 8 * w));
        p.push(Insn::store(Dw, 2, 8 * w, 1));
    }
    p.push(Insn::load(Dw, 1, 9, 0)); // r1 = seq; seqs[stream] = seq + 1
    p.push(Insn::alu_reg(Alu::Mov, 4, 1));
    p.push(Insn::alu_imm(Alu::Add, 4, 1));
    p.push(Insn::store(Dw, 9, 0, 4));
    p.push(Insn::load(Dw, 5, 10, -16)); // r5 = ts
    // 48-bit big-endian: the high 16 bits, then the low 32.
    for (reg, at) in [(1u8, SEQ_AT), (5, TIME_AT)] {
        p.push(Insn::alu_reg(Alu::Mov, 4, reg));
        p.push(Insn::alu_imm(Alu::Rsh, 4, 32));
        p.push(Insn::to_be(4, 16));
        p.push(Insn::store(H, 2, at as i16, 4));
        p.push(Insn::alu_reg(Alu::Mov, 4, reg));
        p.push(Insn::to_be(4, 32));
        p.push(Insn::store(W, 2, at as i16 + 2, 4));
    }
    // The flow: r3 = dst + seq mod flows, stored; the IPv4 checksum ~fold(ip_sum +
    // words(r3)) (see `frames.rs`, "Flows").
    p.push(Insn::load(W, 4, 8, TEMPLATE_FLOWS_AT as i16));
    p.push(Insn::alu_reg(Alu::Mov, 3, 1));
    p.push(Insn::alu_reg(Alu::Mod, 3, 4));
    p.push(Insn::load(W, 4, 8, TEMPLATE_DST_AT as i16));
    p.push(Insn::alu_reg(Alu::Add, 3, 4));
    p.push(Insn::alu_reg(Alu::Mov, 4, 3));
    p.push(Insn::to_be(4, 32));
    p.push(Insn::store(W, 2, IP_DST_AT as i16, 4));
    p.push(Insn::load(W, 0, 8, TEMPLATE_IP_SUM_AT as i16));
    for shift in [0, 16] {
        p.push(Insn::alu_reg(Alu::Mov, 4, 3));
        if shift > 0 {
            p.push(Insn::alu_imm(Alu::Rsh, 4, shift));
        }
        p.push(Insn::alu_imm(Alu::And, 4, 0xffff));
        p.push(Insn::alu_reg(Alu::Add, 0, 4));
    }
    for _ in 0..2 {
        p.push(Insn::alu_reg(Alu::Mov, 4, 0));
        p.push(Insn::alu_imm(Alu::Rsh, 4, 16));
        p.push(Insn::alu_imm(Alu::And, 0, 0xffff));
        p.push(Insn::alu_reg(Alu::Add, 0, 4));
    }
    p.push(Insn::alu_imm(Alu::Xor, 0, 0xffff));
    p.push(Insn::to_be(0, 16));
    p.push(Insn::store(H, 2, IP_CSUM_AT as i16, 0));
    // UDP checksum: ~fold(udp_sum + words(seq) + words(ts) + words(dst)), 0 sent as 0xffff.
    p.push(Insn::load(W, 0, 8, HEAD_LEN as i16)); // r0 = udp_sum
    for reg in [1u8, 5, 3] {
        for shift in [0, 16, 32] {
            p.push(Insn::alu_reg(Alu::Mov, 4, reg));
            if shift > 0 {
                p.push(Insn::alu_imm(Alu::Rsh, 4, shift));
            }
            p.push(Insn::alu_imm(Alu::And, 4, 0xffff));
            p.push(Insn::alu_reg(Alu::Add, 0, 4));
        }
    }
    for _ in 0..2 {
        p.push(Insn::alu_reg(Alu::Mov, 4, 0));
        p.push(Insn::alu_imm(Alu::Rsh, 4, 16));
        p.push(Insn::alu_imm(Alu::And, 0, 0xffff));
        p.push(Insn::alu_reg(Alu::Add, 0, 4));
    }
    p.push(Insn::alu_imm(Alu::Xor, 0, 0xffff));
    p.push(Insn::jump_imm(Cond::Ne, 0, 0, 1));
    p.push(Insn::alu_imm(Alu::Mov, 0, 0xffff));
    p.push(Insn::to_be(0, 16));
    p.push(Insn::store(H, 2, UDP_CSUM_AT as i16, 0));
    p.push(Insn::alu_imm(Alu::Mov, 0, bpf::XDP_TX));
    p.push(Insn::exit());
    let abort = p.len();
    p.push(Insn::alu_imm(Alu::Mov, 0, bpf::XDP_DROP));
    p.push(Insn::exit());
    for at in aborts {
        let mut j = p[at];
        j.set_off((abort - at - 1) as i16);
        p[at] = j;
    }
    p
}

/// The in-program pacer's settings (see [`st`]); the default is off: every frame sent.
#[derive(Debug, Clone, Copy, Default)]
struct Pacing {
    pps: u64,
    start: u64,
    end: u64,
    depth: u64,
}

/// The in-program pacer (see [`program`]): entered with r0 = &state and the time at
/// r10 − 16; leaves r0 = &state, or jumps to an abort (drop) for a frame not due.
fn pacer(p: &mut Vec<Insn>, aborts: &mut Vec<usize>) {
    use bpf::Size::Dw;
    let off = |f: usize| f as i16;
    p.push(Insn::alu_reg(Alu::Mov, 7, 0)); // r7 = &state
    p.push(Insn::load(Dw, 1, 7, off(st::END)));
    p.push(Insn::jump_imm(Cond::Eq, 1, 0, 2));
    p.push(Insn::load(Dw, 2, 10, -16));
    aborts.push(p.len());
    p.push(Insn::jump_reg(Cond::Ge, 2, 1, 0)); // past the end: drop
    p.push(Insn::load(Dw, 1, 7, off(st::PPS)));
    let unpaced = p.len();
    p.push(Insn::jump_imm(Cond::Eq, 1, 0, 0));
    p.push(Insn::load(Dw, 2, 10, -16));
    p.push(Insn::load(Dw, 3, 7, off(st::START)));
    p.push(Insn::alu_reg(Alu::Sub, 2, 3));
    p.push(Insn::alu_reg(Alu::Mul, 2, 1));
    p.push(Insn::alu_imm(Alu::Div, 2, 1_000_000_000)); // r2 = frames due by now
    p.push(Insn::load(Dw, 3, 7, off(st::BASE)));
    p.push(Insn::load(Dw, 4, 7, off(st::DEPTH)));
    p.push(Insn::alu_reg(Alu::Mov, 5, 3));
    p.push(Insn::alu_reg(Alu::Add, 5, 4)); // r5 = base + depth
    p.push(Insn::jump_reg(Cond::Le, 2, 5, 6));
    p.push(Insn::load(Dw, 1, 7, off(st::MISSED))); // missed += due − (base + depth)
    p.push(Insn::alu_reg(Alu::Add, 1, 2));
    p.push(Insn::alu_reg(Alu::Sub, 1, 5));
    p.push(Insn::store(Dw, 7, off(st::MISSED), 1));
    p.push(Insn::alu_reg(Alu::Mov, 3, 2)); // base = due − depth
    p.push(Insn::alu_reg(Alu::Sub, 3, 4));
    aborts.push(p.len());
    p.push(Insn::jump_reg(Cond::Ge, 3, 2, 0)); // nothing due: drop
    p.push(Insn::alu_imm(Alu::Add, 3, 1));
    p.push(Insn::store(Dw, 7, off(st::BASE), 3));
    let done = p.len();
    let mut j = p[unpaced];
    j.set_off((done - unpaced - 1) as i16);
    p[unpaced] = j;
    p.push(Insn::alu_reg(Alu::Mov, 0, 7));
}

impl Generator {
    /// Load the generator for streams `0..streams` (stream `i` carries VR `i`'s traffic) in
    /// frames of `size` bytes on the wire. With `side_a` (the lab's `<P>-a`), also attach it
    /// to a spare veth made there (see the module docs); without, it can only be test-run.
    pub(crate) fn load(side_a: Option<&Netns>, streams: u32, size: Size) -> anyhow::Result<Self> {
        size.check().map_err(anyhow::Error::msg)?;
        if streams == 0 || streams > MAX_SLOTS {
            bail!("{streams} streams: the generator takes 1 to {MAX_SLOTS}");
        }
        let state = Map::array(bpf::MAP_ARRAY, st::SIZE as u32, 1, "vrb_live_st")?;
        let wheel = Map::array(bpf::MAP_ARRAY, 8, MAX_SLOTS, "vrb_live_wh")?;
        let templates = Map::array(
            bpf::MAP_ARRAY,
            TEMPLATE_VALUE as u32,
            streams * MAX_CLASSES,
            "vrb_live_tp",
        )?;
        let seqs = Map::array(bpf::MAP_ARRAY, 8, streams, "vrb_live_sq")?;
        let prog = Program::load_xdp(&program(&state, &wheel, &templates, &seqs), "vrb_live_gen")
            .context("loading the generator program")?;
        let keep = match side_a {
            Some(ns) => {
                ns.ip(&[
                    "link", "add", KEEP_IF.0, "type", "veth", "peer", "name", KEEP_IF.1,
                ])?;
                Some(ns.run(|| Link::attach_xdp(&prog, bpf::ifindex(KEEP_IF.0)?, false))??)
            }
            None => None,
        };
        let mut g = Generator {
            prog,
            state,
            wheel,
            templates,
            seqs,
            streams,
            frame: Vec::new(),
            size,
            weights: vec![1.0; streams as usize],
            flows: None,
            _keep: keep,
        };
        g.set_size(size)?;
        Ok(g)
    }

    /// Frame size on the wire now.
    pub(crate) fn size(&self) -> Size {
        self.size
    }

    /// Send frames of `size` from now on (the input frame is the largest size; smaller ones
    /// are shrunk per frame by the program).
    pub(crate) fn set_size(&mut self, size: Size) -> anyhow::Result<()> {
        size.check().map_err(anyhow::Error::msg)?;
        let max = size.max();
        let run_len = usize::from(max) - 4;
        for s in 0..self.streams {
            for (c, &bytes) in size.classes().iter().enumerate() {
                let t = match self.flows {
                    None => frames::template(s, s, bytes),
                    Some((dst, n)) => frames::template_flows(s, s, bytes, dst, n),
                };
                self.templates
                    .set(s * MAX_CLASSES + c as u32, &t.to_value(run_len))?;
            }
        }
        self.frame = frames::run_frame(&frames::template(0, 0, max), max);
        self.size = size;
        let weights = self.weights.clone();
        self.set_weights(&weights)
    }

    /// Sweep every stream's destination over `flows` consecutive addresses from `dst` (the
    /// lab must route them; see `LiveLab::up`) from now on; `None`: one flow per stream, to
    /// its VR's side-B host.
    pub(crate) fn set_flows(
        &mut self,
        flows: Option<(std::net::Ipv4Addr, u32)>,
    ) -> anyhow::Result<()> {
        if let Some((dst, n)) = flows
            && (n == 0 || u32::from(dst).checked_add(n - 1).is_none())
        {
            bail!("{n} flows from {dst}: need 1 or more, without wrapping the address space");
        }
        self.flows = flows;
        self.set_size(self.size)
    }

    /// Share the aggregate rate among the streams by `weights` (one per stream) from now on.
    pub(crate) fn set_weights(&mut self, weights: &[f64]) -> anyhow::Result<()> {
        wheel::check_weights(weights, self.streams as usize).map_err(anyhow::Error::msg)?;
        let w = wheel::sized_wheel(weights, self.size.pattern());
        for (i, &(s, c)) in w.iter().enumerate() {
            let mut v = [0u8; 8];
            v[..4].copy_from_slice(&s.to_ne_bytes());
            v[4..].copy_from_slice(&(s * MAX_CLASSES + u32::from(c)).to_ne_bytes());
            self.wheel.set(i as u32, &v)?;
        }
        self.weights = weights.to_vec();
        let mut v = [0u8; st::SIZE];
        v[st::LEN..st::LEN + 4].copy_from_slice(&(w.len() as u32).to_ne_bytes());
        self.state.set(0, &v)?;
        Ok(())
    }

    /// Zero every stream's sequence number (and so its sent count): the start of a trial.
    /// Only while no run is in progress.
    pub(crate) fn reset(&self) -> anyhow::Result<()> {
        for s in 0..self.streams {
            self.seqs.set(s, &[0; 8])?;
        }
        let mut v = self.state.get(0)?;
        v[st::POS..st::POS + 4].fill(0);
        self.state.set(0, &v)?;
        Ok(())
    }

    /// Frames sent per stream since the last [`Self::reset`].
    pub(crate) fn sent(&self) -> anyhow::Result<Vec<u64>> {
        (0..self.streams)
            .map(|s| {
                let v = self.seqs.get(s)?;
                Ok(u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
            })
            .collect()
    }

    /// Send at `rate` (aggregate, or as fast as it can) for `duration` from a thread
    /// pinned to `core` in `side_a`, out of `a0`; stops early if `stop` is set.
    pub(crate) fn run(
        &self,
        side_a: &Netns,
        core: usize,
        rate: Rate,
        (interval, flush): (Duration, u32),
        duration: Duration,
        stop: &AtomicBool,
    ) -> anyhow::Result<Sent> {
        let before = self.sent()?;
        let (elapsed, missed, calls) = std::thread::scope(|s| {
            s.spawn(|| self.thread(side_a, core, rate, (interval, flush), duration, stop))
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
        })?;
        let after = self.sent()?;
        Ok(Sent {
            per_stream: after.iter().zip(&before).map(|(a, b)| a - b).collect(),
            elapsed,
            missed,
            calls,
            tx_full: 0,
        })
    }

    fn thread(
        &self,
        side_a: &Netns,
        core: usize,
        rate: Rate,
        (interval, flush): (Duration, u32),
        duration: Duration,
        stop: &AtomicBool,
    ) -> anyhow::Result<(Duration, u64, u64)> {
        side_a.enter_current_thread()?;
        if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
            bail!("cannot pin the generator thread to core {core}");
        }
        let ifindex = bpf::ifindex(Side::A.side_ifname())?;
        if rate.pps().is_none_or(|r| r >= LONG_RUNS_FROM_PPS) {
            return self.long_runs(ifindex, rate, flush, duration, stop);
        }
        let start = monotonic_ns();
        let end = start + duration.as_nanos() as u64;
        let pacer = Pacer::new(rate, interval.as_nanos() as u64, start)?;
        // A bucket of at least one vector: catching up after a preemption of a few ms on a
        // busy host costs at most one 256-frame run, which the DUT's 256-entry ring takes.
        let depth = (MAX_GRANT as u64).div_ceil(pacer.burst() as u64).max(4);
        let mut pacer = pacer.with_depth(depth);
        realtime();
        // Sleeps end when asked, not up to 50 µs later (the default timer slack).
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        let mut calls = 0u64;
        let mut now = start;
        while now < end && !stop.load(Ordering::Relaxed) {
            let n = pacer.grant(now);
            if n > 0 {
                match self.prog.run_live(&self.frame, ifindex, 0, n as u32, flush) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(e).context("BPF_PROG_RUN (live frames) on a0"),
                }
                calls += 1;
            } else {
                let wait = pacer.ns_until_burst(now).min(end - now);
                if wait > SLEEP_ABOVE_NS {
                    std::thread::sleep(Duration::from_nanos(wait - SLEEP_EARLY_NS));
                } else {
                    std::hint::spin_loop();
                }
            }
            now = monotonic_ns();
        }
        // Held off across the end, the loop never saw its last frames fall due; stopped
        // early (Ctrl-C), the run ends where it stopped.
        pacer.finish(now.min(end));
        Ok((Duration::from_nanos(now - start), pacer.missed(), calls))
    }

    /// Send at `rate` until `duration` is over in runs of a few ms each, the program pacing
    /// every frame (see [`program`]), from the calling thread (pinned, in the namespace).
    ///
    /// Why: a run makes a fresh page pool, and a frame's page comes back to it only if the
    /// frame is freed while the run lasts. Short runs (one per burst) were fine while the
    /// DUT forwarded inline on the generator's core, within the run; with the DUT on the
    /// other core (the kernel's NAPI pinned there) nearly every frame took a fresh page,
    /// and initialising it was 75 % of the generator's time (`perf`): 0.41–0.47 Mpps where
    /// 1 Mpps was asked. In a run of thousands of frames the pool's pages go round.
    ///
    /// Between runs the thread sleeps for [`LONG_RUN_REST`] of the run's time: a real-time
    /// thread that sleeps less than 5 % is stopped by the kernel for 50 ms of every second.
    /// Runs are short enough (down to ~0.5 ms at 3 Mpps) that the frames falling due in a
    /// rest stay under [`LONG_RUN_REST_FRAMES`], the burst the next run sends at once.
    /// Unpaced, it never sleeps: the generator's maximum is what it makes then.
    fn long_runs(
        &self,
        ifindex: u32,
        rate: Rate,
        flush: u32,
        duration: Duration,
        stop: &AtomicBool,
    ) -> anyhow::Result<(Duration, u64, u64)> {
        let pps = rate.pps().map_or(0, |r| r.round().max(1.0) as u64);
        if pps
            .checked_mul(duration.as_nanos() as u64 + 1_000_000_000)
            .is_none()
        {
            bail!("{pps} pps for {duration:?}: the in-program pacer's product would overflow");
        }
        realtime();
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        let start = monotonic_ns();
        let end = start + duration.as_nanos() as u64;
        self.set_pacing(Pacing {
            pps,
            start,
            end,
            depth: MAX_GRANT as u64,
        })?;
        // Paced, a run is short enough that its rest (a share of it) stays within the
        // bucket's refill, so the rest is always taken in full.
        let run_ns = if pps > 0 {
            LONG_RUN_NS.min(LONG_RUN_REST_FRAMES * 1e9 / pps as f64 / LONG_RUN_REST)
        } else {
            LONG_RUN_NS
        };
        let run = (|| {
            let mut calls = 0u64;
            let mut ns_per_call = 50.0; // a guess; measured from the first run on
            let mut now = start;
            while now < end && !stop.load(Ordering::Relaxed) {
                let left = (end - now) as f64;
                let repeat = (run_ns.min(left) / ns_per_call).ceil() + 64.0;
                let repeat = repeat.min(f64::from(1u32 << 22)) as u32;
                match self.prog.run_live(&self.frame, ifindex, 0, repeat, flush) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(e).context("BPF_PROG_RUN (live frames) on a0"),
                }
                calls += 1;
                let t = monotonic_ns();
                let took = (t - now) as f64;
                ns_per_call = (took / f64::from(repeat)).max(1.0);
                now = t;
                if pps > 0 {
                    let rest = (took * LONG_RUN_REST).min((end.saturating_sub(now)) as f64);
                    if rest > SLEEP_ABOVE_NS as f64 {
                        std::thread::sleep(Duration::from_nanos(rest as u64));
                        now = monotonic_ns();
                    }
                }
            }
            Ok((Duration::from_nanos(now.min(end) - start), calls))
        })();
        let missed = self.pacing_missed()?;
        // Back to unpaced for whatever runs the program next (bursts, tests).
        self.set_pacing(Pacing::default())?;
        let (elapsed, calls) = run?;
        Ok((elapsed, missed, calls))
    }

    /// Set the in-program pacer (and zero what it released and missed).
    fn set_pacing(&self, p: Pacing) -> anyhow::Result<()> {
        let mut v = self.state.get(0)?;
        for (at, x) in [
            (st::PPS, p.pps),
            (st::START, p.start),
            (st::END, p.end),
            (st::BASE, 0),
            (st::DEPTH, p.depth),
            (st::MISSED, 0),
        ] {
            v[at..at + 8].copy_from_slice(&x.to_ne_bytes());
        }
        self.state.set(0, &v)?;
        Ok(())
    }

    /// Frames the in-program pacer's bucket overflowed by since it was set.
    fn pacing_missed(&self) -> anyhow::Result<u64> {
        let v = self.state.get(0)?;
        Ok(u64::from_ne_bytes(
            v[st::MISSED..st::MISSED + 8].try_into()?,
        ))
    }

    /// Run the program once on `frame` without sending (tests): returns the verdict and the
    /// frame as the program left it.
    #[cfg(test)]
    pub(crate) fn test_run(&self, frame: &[u8]) -> anyhow::Result<(u32, Vec<u8>)> {
        Ok(self.prog.test_run_out(frame)?)
    }
}

/// The template stream `s` of a generator of frames of `size` bytes uses (tests).
#[cfg(test)]
pub(crate) fn template_of(s: u32, size: u16) -> Template {
    frames::template(s, s, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run the real program (no lab, no sending: `BPF_PROG_RUN` returns the frame) and check
    /// each frame against the Rust reference: stream rotation by the wheel, sequence
    /// numbers per stream from 0, a fresh timestamp, a valid checksum.
    #[test]
    fn the_program_stamps_like_the_reference() {
        let _alone = crate::cores_alone();
        if !vrhost_lab::require_root("generator program test run") {
            return;
        }
        let mut g = Generator::load(None, 3, Size::Fixed(64)).unwrap();
        g.set_weights(&[2.0, 1.0, 1.0]).unwrap();
        let order = wheel::wheel(&[2.0, 1.0, 1.0]);
        let mut next_seq = [0u64; 3];
        for i in 0..12 {
            let t0 = monotonic_ns();
            let (verdict, out) = g.test_run(&g.frame).unwrap();
            let t1 = monotonic_ns();
            assert_eq!(verdict, bpf::XDP_TX as u32);
            let sig = vrhost_traffic::signature::parse(&out).expect("signed");
            let s = order[i % order.len()];
            assert_eq!(sig.stream, s, "frame {i}");
            assert_eq!(sig.seq, next_seq[s as usize], "frame {i}");
            next_seq[s as usize] += 1;
            assert!(
                (t0..=t1).contains(&sig.tx_ns),
                "time {} not in [{t0}, {t1}]",
                sig.tx_ns
            );
            let mut want = out.clone();
            frames::stamp(&template_of(s, 64), &mut want, sig.seq, sig.tx_ns);
            assert_eq!(out, want, "frame {i}");
        }
        assert_eq!(g.sent().unwrap(), [6, 3, 3]);
        g.reset().unwrap();
        assert_eq!(g.sent().unwrap(), [0, 0, 0]);
    }

    /// The in-program pacer: with 10 frames due and a bucket of 4, it forgets 6 (counted as
    /// missed), sends 4 and then drops until the next is due; past the end it drops even
    /// unpaced; switched off, it sends every frame again.
    #[test]
    fn the_program_paces_frames_as_they_fall_due() {
        let _alone = crate::cores_alone();
        if !vrhost_lab::require_root("generator program test run") {
            return;
        }
        let g = Generator::load(None, 1, Size::Fixed(64)).unwrap();
        let now = monotonic_ns();
        g.set_pacing(Pacing {
            pps: 1,
            start: now - 10_500_000_000,
            end: now + 60_000_000_000,
            depth: 4,
        })
        .unwrap();
        let verdicts: Vec<u32> = (0..7).map(|_| g.test_run(&g.frame).unwrap().0).collect();
        let (tx, drop) = (bpf::XDP_TX as u32, bpf::XDP_DROP as u32);
        assert_eq!(verdicts, [tx, tx, tx, tx, drop, drop, drop]);
        assert_eq!(g.pacing_missed().unwrap(), 6);
        assert_eq!(g.sent().unwrap(), [4]);
        g.set_pacing(Pacing {
            end: monotonic_ns() - 1,
            ..Pacing::default()
        })
        .unwrap();
        assert_eq!(g.test_run(&g.frame).unwrap().0, drop);
        g.set_pacing(Pacing::default()).unwrap();
        assert_eq!(g.test_run(&g.frame).unwrap().0, tx);
        assert_eq!(g.sent().unwrap(), [5]);
    }

    /// Flows: the program sweeps each stream's destination (`dst + seq mod flows`) and
    /// rewrites both checksums exactly as the reference does, across a carry in the
    /// address's low word.
    #[test]
    fn the_program_sweeps_destinations_like_the_reference() {
        let _alone = crate::cores_alone();
        if !vrhost_lab::require_root("generator program test run") {
            return;
        }
        let mut g = Generator::load(None, 2, Size::Fixed(64)).unwrap();
        let base = std::net::Ipv4Addr::new(100, 64, 255, 254);
        g.set_flows(Some((base, 5))).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..20u64 {
            let (verdict, out) = g.test_run(&g.frame).unwrap();
            assert_eq!(verdict, bpf::XDP_TX as u32);
            let sig = vrhost_traffic::signature::parse(&out).expect("signed");
            assert_eq!((sig.stream, sig.seq), ((i % 2) as u32, i / 2), "frame {i}");
            let t = frames::template_flows(sig.stream, sig.stream, 64, base, 5);
            let mut want = out.clone();
            frames::stamp(&t, &mut want, sig.seq, sig.tx_ns);
            assert_eq!(out, want, "frame {i}");
            seen.insert(<[u8; 4]>::try_from(&out[30..34]).unwrap());
        }
        assert_eq!(seen.len(), 5, "{seen:?}");
        assert!(
            g.set_flows(Some((std::net::Ipv4Addr::BROADCAST, 2)))
                .is_err()
        );
    }

    /// IMIX: the program shrinks each frame to its size class (`bpf_xdp_adjust_tail`), in
    /// the 7:4:1 order per stream, every frame signed with a valid checksum.
    #[test]
    fn imix_frames_come_in_their_sizes_and_order() {
        let _alone = crate::cores_alone();
        if !vrhost_lab::require_root("generator program test run") {
            return;
        }
        let mut g = Generator::load(None, 2, Size::Imix).unwrap();
        g.set_weights(&[1.0, 1.0]).unwrap();
        let order = wheel::sized_wheel(&[1.0, 1.0], Size::Imix.pattern());
        let sizes = Size::Imix.classes();
        assert_eq!(g.frame.len(), 1514);
        let mut counts = [0usize; 3];
        for (i, &(s, c)) in order.iter().enumerate() {
            let (verdict, out) = g.test_run(&g.frame).unwrap();
            assert_eq!(verdict, bpf::XDP_TX as u32);
            let size = sizes[usize::from(c)];
            assert_eq!(out.len(), usize::from(size) - 4, "frame {i}");
            let sig = vrhost_traffic::signature::parse(&out).expect("signed");
            assert_eq!(sig.stream, s);
            let mut want = out.clone();
            frames::stamp(&template_of(s, size), &mut want, sig.seq, sig.tx_ns);
            assert_eq!(out, want, "frame {i}");
            counts[usize::from(c)] += 1;
        }
        assert_eq!(counts, [14, 8, 2]);
    }
}
