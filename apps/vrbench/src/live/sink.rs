//! The stream sink: a BPF program at `b0`'s tc ingress that reads every frame's signature
//! and counts, per stream, what arrived, what was duplicated or reordered, and the latency
//! `bpf_ktime_get_ns()` − stamped time in a [histogram](super::histogram) — then drops the
//! frame. With the generator's exact sent counts this gives loss per stream.
//!
//! Why in BPF and not the user-space `vrhost_traffic::Sink` over AF_XDP (XDP.md's first
//! plan): counting where the frame arrives costs a few dozen instructions and no copy, and
//! the frame never reaches the side-B hosts (which would answer each with an ICMP error).
//! Why tc ingress and not XDP: see `fwd/sink.rs` — XDP on a veth makes the sink's cost
//! depend on how the DUT built its skbs.
//!
//! Per frame (program in [`program`]): check Ethernet/IPv4 (IHL 5)/UDP and the magic
//! (else count `unsigned`); stream id < streams (else `unknown`); then on the stream's state
//! (a plain array entry, [`StateField`]):
//!
//! * `received += 1`; latency into min/max/sum and the histogram bucket;
//! * **in order** (`seq ≥ next`, `next` = highest seen + 1): `next = seq + 1`;
//! * **duplicated**: `seq < next` and its bit is set in the window;
//! * **reordered**: `seq < next`, not seen before (its bit is then set);
//! * **too old**: `seq` is the window or more behind the highest (or its slot already
//!   holds a later word) — counted as reordered and
//!   `too_old` (whether it is also a duplicate cannot be told), like `vrhost_traffic::Sink`.
//!
//! **The window** is [`WINDOW_WORDS`] 64-bit words per stream (65 536 sequence numbers),
//! word `w = seq / 64` in slot `w mod WINDOW_WORDS`, each slot tagged with `w + 1`. A slot
//! whose tag is older than `w` holds a word that was skipped or long passed: it is reset
//! lazily when `w` first touches it — so a jump forward (loss) costs nothing, and no loop
//! clears skipped bits (the verifier would have to prove its bound). A tag newer than `w`
//! means `seq` is more than the window behind: too old.
//!
//! **Concurrency.** Counters and histogram buckets are updated with atomic adds, so counts
//! are exact even if two CPUs deliver frames of one stream at once. `next`, min/max and the
//! window are plain loads and stores: their classification (in order / reordered /
//! duplicate) is exact when a stream's frames reach `b0` from one CPU at a time — true in
//! the trial runner's single-queue lab, where `p1` transmits from one CPU (the kernel's
//! forwarding CPU or vrhost's one worker). With several forwarding CPUs per stream the
//! counts of received frames stay exact, the reorder/duplicate split may not.
//!
//! Counters are read only after the generator stopped and a drain delay passed (the trial
//! runner's job), and [`Sink::reset`] zeroes them between trials.

use anyhow::Context;
use vrhost_lab::{Netns, Side};

use super::frames::{SEQ_AT, SIG_AT, TIME_AT};
use super::histogram::{BUCKETS, LINEAR, Latencies, MAX_NS, SUB_BITS};
use crate::fwd::bpf::{self, Alu, Cond, Insn, Link, Map, Program, Size};

/// Words of the duplicate window per stream (a power of two).
pub(crate) const WINDOW_WORDS: u32 = 1024;
/// Sequence numbers the window covers.
pub(crate) const WINDOW: u64 = WINDOW_WORDS as u64 * 64;

/// The `u64` fields of a stream's state, in order.
#[derive(Debug, Clone, Copy)]
#[repr(i16)]
pub(crate) enum StateField {
    Received = 0,
    Duplicated = 8,
    Reordered = 16,
    TooOld = 24,
    /// Highest sequence number seen + 1 (0: none yet).
    Next = 32,
    LatMin = 40,
    LatMax = 48,
    LatSum = 56,
}
const STATE_LEN: u32 = 64;

/// One stream's counts, read after a trial.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StreamCounts {
    /// Frames of the stream, duplicates included.
    pub(crate) received: u64,
    /// Frames whose sequence number had been seen before.
    pub(crate) duplicated: u64,
    /// Frames that arrived after a later one.
    pub(crate) reordered: u64,
    /// Of the reordered, those too far behind to check for duplication.
    pub(crate) too_old: u64,
    /// Highest sequence number received, if any.
    pub(crate) highest: Option<u64>,
    /// Latencies.
    pub(crate) latency: Latencies,
}

impl StreamCounts {
    /// Distinct frames received.
    pub(crate) fn unique(&self) -> u64 {
        self.received - self.duplicated
    }

    /// Frames lost of `sent`.
    pub(crate) fn lost(&self, sent: u64) -> u64 {
        sent.saturating_sub(self.unique())
    }
}

/// Everything the sink counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Counts {
    /// Per stream.
    pub(crate) streams: Vec<StreamCounts>,
    /// Frames without a signature (e.g. the DUT's own IPv6 control traffic).
    pub(crate) unsigned: u64,
    /// Signed frames of a stream id beyond the sink's streams.
    pub(crate) unknown: u64,
}

/// The sink program (tc `sched_cls`). Maps: `state` [streams] × 64 bytes, `hist` [streams]
/// × `BUCKETS` u64, `window` [streams] × `WINDOW_WORDS` × {tag, bits}, per-CPU `other` [2].
/// `bpf_skb_pull_data(skb, len)`.
const FUNC_SKB_PULL_DATA: i32 = 39;

pub(crate) fn program(
    state: &Map,
    hist: &Map,
    window: &Map,
    other: &Map,
    streams: u32,
) -> Vec<Insn> {
    use Size::{B, Dw, H, W};
    use StateField as F;
    let mut p: Vec<Insn> = Vec::with_capacity(192);
    // Forward jumps to labels, patched at the end: (instruction, label).
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum L {
        Unsigned,
        Unknown,
        Drop,
        Seq,
        InOrder,
        Check,
        Dup,
        TooOld,
        Reordered,
        SetBit,
    }
    let mut fix: Vec<(usize, L)> = Vec::new();
    let mut at: Vec<(L, usize)> = Vec::new();
    let jmp = |p: &mut Vec<Insn>, fix: &mut Vec<(usize, L)>, i: Insn, l: L| {
        fix.push((p.len(), l));
        p.push(i);
    };
    let one = |p: &mut Vec<Insn>, field: F| {
        p.push(Insn::alu_imm(Alu::Mov, 1, 1));
        p.push(Insn::atomic_add64(6, field as i16, 1));
    };
    let (data, data_end) = (76, 80); // struct __sk_buff
    // A frame whose first MIN_BUF bytes are not all in the skb's linear part is pulled
    // first: AF_PACKET's TPACKET transmit (DPDK's af_packet PMD, the dpdk-testpmd profile)
    // puts only the Ethernet header there and the rest in page fragments, which direct
    // packet access cannot see. Packet pointers are reloaded after the call.
    p.push(Insn::alu_reg(Alu::Mov, 6, 1)); // r6 = ctx
    p.push(Insn::load(W, 2, 1, data));
    p.push(Insn::load(W, 3, 1, data_end));
    p.push(Insn::alu_reg(Alu::Mov, 4, 2));
    p.push(Insn::alu_imm(Alu::Add, 4, super::frames::MIN_BUF as i32));
    p.push(Insn::jump_reg(Cond::Le, 4, 3, 3));
    p.push(Insn::alu_reg(Alu::Mov, 1, 6));
    p.push(Insn::alu_imm(Alu::Mov, 2, super::frames::MIN_BUF as i32));
    p.push(Insn::call(FUNC_SKB_PULL_DATA));
    p.push(Insn::alu_reg(Alu::Mov, 1, 6));
    p.push(Insn::load(W, 2, 1, data));
    p.push(Insn::load(W, 3, 1, data_end));
    p.push(Insn::alu_reg(Alu::Mov, 4, 2));
    p.push(Insn::alu_imm(Alu::Add, 4, super::frames::MIN_BUF as i32));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_reg(Cond::Gt, 4, 3, 0),
        L::Unsigned,
    );
    // Little-endian loads of big-endian fields compare against swapped constants.
    let le16 = |v: u16| i32::from(u16::from_le_bytes(v.to_be_bytes()));
    p.push(Insn::load(H, 4, 2, 12));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Ne, 4, le16(0x0800), 0),
        L::Unsigned,
    );
    p.push(Insn::load(B, 4, 2, 14));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Ne, 4, 0x45, 0),
        L::Unsigned,
    );
    p.push(Insn::load(B, 4, 2, 23));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Ne, 4, 17, 0),
        L::Unsigned,
    );
    p.push(Insn::load(H, 4, 2, SIG_AT as i16));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Ne, 4, le16(vrhost_traffic::signature::MAGIC), 0),
        L::Unsigned,
    );
    p.push(Insn::load(W, 7, 2, SIG_AT as i16 + 2)); // r7 = stream id
    p.push(Insn::to_be(7, 32));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Ge, 7, streams as i32, 0),
        L::Unknown,
    );
    // r8 = seq, r9 = tx time (48 bits each).
    for (reg, off) in [(8u8, SEQ_AT), (9, TIME_AT)] {
        p.push(Insn::load(H, reg, 2, off as i16));
        p.push(Insn::to_be(reg, 16));
        p.push(Insn::alu_imm(Alu::Lsh, reg, 32));
        p.push(Insn::load(W, 4, 2, off as i16 + 2));
        p.push(Insn::to_be(4, 32));
        p.push(Insn::alu_reg(Alu::Or, reg, 4));
    }
    p.push(Insn::call(bpf::FUNC_KTIME_GET_NS));
    p.push(Insn::alu_reg(Alu::Sub, 0, 9));
    p.extend(Insn::load_imm64(1, vrhost_traffic::signature::MASK48));
    p.push(Insn::alu_reg(Alu::And, 0, 1));
    p.push(Insn::store(Dw, 10, -16, 0)); // latency
    p.push(Insn::store(W, 10, -4, 7)); // key = stream
    p.extend(Insn::load_map(1, state));
    p.push(Insn::alu_reg(Alu::Mov, 2, 10));
    p.push(Insn::alu_imm(Alu::Add, 2, -4));
    p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM));
    jmp(&mut p, &mut fix, Insn::jump_imm(Cond::Eq, 0, 0, 0), L::Drop);
    p.push(Insn::alu_reg(Alu::Mov, 6, 0)); // r6 = &state[stream]
    one(&mut p, F::Received);
    p.push(Insn::load(Dw, 1, 10, -16)); // r1 = latency
    p.push(Insn::atomic_add64(6, F::LatSum as i16, 1));
    p.push(Insn::load(Dw, 2, 6, F::LatMin as i16));
    p.push(Insn::jump_reg(Cond::Ge, 1, 2, 1));
    p.push(Insn::store(Dw, 6, F::LatMin as i16, 1));
    p.push(Insn::load(Dw, 2, 6, F::LatMax as i16));
    p.push(Insn::jump_reg(Cond::Le, 1, 2, 1));
    p.push(Insn::store(Dw, 6, F::LatMax as i16, 1));
    // Bucket of r1 (see histogram.rs) into r3. Clamp to MAX_NS.
    p.extend(Insn::load_imm64(2, MAX_NS));
    p.push(Insn::jump_reg(Cond::Le, 1, 2, 1));
    p.push(Insn::alu_reg(Alu::Mov, 1, 2));
    p.push(Insn::alu_reg(Alu::Mov, 3, 1)); // bucket = v if v < LINEAR
    p.push(Insn::jump_imm(Cond::Lt, 1, LINEAR as i32, 2 + 5 * 6 + 8));
    // e = floor(log2 v) in r5 by binary search over r4.
    p.push(Insn::alu_reg(Alu::Mov, 4, 1));
    p.push(Insn::alu_imm(Alu::Mov, 5, 0));
    for k in [32, 16, 8, 4, 2, 1] {
        p.push(Insn::alu_reg(Alu::Mov, 2, 4));
        p.push(Insn::alu_imm(Alu::Rsh, 2, k));
        p.push(Insn::jump_imm(Cond::Eq, 2, 0, 2));
        p.push(Insn::alu_reg(Alu::Mov, 4, 2));
        p.push(Insn::alu_imm(Alu::Add, 5, k));
    }
    // bucket = 256 + (e − 8)·128 + (v >> (e − 7)) − 128
    p.push(Insn::alu_imm(Alu::Add, 5, -(SUB_BITS as i32))); // r5 = e − 7
    p.push(Insn::alu_reg(Alu::Mov, 3, 1));
    p.push(Insn::alu_reg(Alu::Rsh, 3, 5)); // r3 = v >> (e − 7)
    p.push(Insn::alu_imm(Alu::Add, 3, -(1 << SUB_BITS)));
    p.push(Insn::alu_imm(Alu::Add, 5, -1)); // e − 8
    p.push(Insn::alu_imm(Alu::Lsh, 5, SUB_BITS as i32));
    p.push(Insn::alu_reg(Alu::Add, 3, 5));
    p.push(Insn::alu_imm(Alu::Add, 3, LINEAR as i32));
    p.push(Insn::store(Dw, 10, -24, 3)); // bucket
    p.extend(Insn::load_map(1, hist));
    p.push(Insn::alu_reg(Alu::Mov, 2, 10));
    p.push(Insn::alu_imm(Alu::Add, 2, -4));
    p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM));
    jmp(&mut p, &mut fix, Insn::jump_imm(Cond::Eq, 0, 0, 0), L::Seq);
    p.push(Insn::load(Dw, 3, 10, -24));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Ge, 3, BUCKETS as i32, 0),
        L::Seq,
    );
    p.push(Insn::alu_imm(Alu::Lsh, 3, 3));
    p.push(Insn::alu_reg(Alu::Add, 0, 3));
    p.push(Insn::alu_imm(Alu::Mov, 1, 1));
    p.push(Insn::atomic_add64(0, 0, 1));
    // Sequence: window slot of word w = seq / 64, tagged w + 1.
    at.push((L::Seq, p.len()));
    p.extend(Insn::load_map(1, window));
    p.push(Insn::alu_reg(Alu::Mov, 2, 10));
    p.push(Insn::alu_imm(Alu::Add, 2, -4));
    p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM));
    jmp(&mut p, &mut fix, Insn::jump_imm(Cond::Eq, 0, 0, 0), L::Drop);
    p.push(Insn::alu_reg(Alu::Mov, 2, 8));
    p.push(Insn::alu_imm(Alu::Rsh, 2, 6));
    p.push(Insn::alu_reg(Alu::Mov, 3, 2));
    p.push(Insn::alu_imm(Alu::Add, 2, 1)); // r2 = tag = w + 1
    p.push(Insn::alu_imm(Alu::And, 3, WINDOW_WORDS as i32 - 1));
    p.push(Insn::alu_imm(Alu::Lsh, 3, 4));
    p.push(Insn::alu_reg(Alu::Add, 0, 3)); // r0 = &slot {tag, bits}
    p.push(Insn::alu_reg(Alu::Mov, 5, 8));
    p.push(Insn::alu_imm(Alu::And, 5, 63));
    p.push(Insn::alu_imm(Alu::Mov, 4, 1));
    p.push(Insn::alu_reg(Alu::Lsh, 4, 5)); // r4 = bit
    p.push(Insn::load(Dw, 5, 6, F::Next as i16));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_reg(Cond::Ge, 8, 5, 0),
        L::InOrder,
    );
    // Behind: more than the window behind the highest is too old.
    p.push(Insn::alu_reg(Alu::Sub, 5, 8));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Gt, 5, WINDOW as i32, 0),
        L::TooOld,
    );
    p.push(Insn::load(Dw, 3, 0, 0)); // r3 = slot tag
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_reg(Cond::Gt, 3, 2, 0),
        L::TooOld,
    );
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_reg(Cond::Eq, 3, 2, 0),
        L::Check,
    );
    p.push(Insn::store(Dw, 0, 0, 2)); // a stale slot: nothing of word w seen
    p.push(Insn::store(Dw, 0, 8, 4));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Always, 0, 0, 0),
        L::Reordered,
    );
    at.push((L::Check, p.len()));
    p.push(Insn::load(Dw, 3, 0, 8));
    p.push(Insn::alu_reg(Alu::Mov, 5, 3));
    p.push(Insn::alu_reg(Alu::And, 5, 4));
    jmp(&mut p, &mut fix, Insn::jump_imm(Cond::Ne, 5, 0, 0), L::Dup);
    p.push(Insn::alu_reg(Alu::Or, 3, 4));
    p.push(Insn::store(Dw, 0, 8, 3));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Always, 0, 0, 0),
        L::Reordered,
    );
    at.push((L::Dup, p.len()));
    one(&mut p, F::Duplicated);
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Always, 0, 0, 0),
        L::Drop,
    );
    at.push((L::TooOld, p.len()));
    one(&mut p, F::TooOld);
    at.push((L::Reordered, p.len()));
    one(&mut p, F::Reordered);
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Always, 0, 0, 0),
        L::Drop,
    );
    at.push((L::InOrder, p.len()));
    p.push(Insn::alu_reg(Alu::Mov, 5, 8));
    p.push(Insn::alu_imm(Alu::Add, 5, 1));
    p.push(Insn::store(Dw, 6, F::Next as i16, 5));
    p.push(Insn::load(Dw, 3, 0, 0));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_reg(Cond::Eq, 3, 2, 0),
        L::SetBit,
    );
    p.push(Insn::store(Dw, 0, 0, 2));
    p.push(Insn::store(Dw, 0, 8, 4));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Always, 0, 0, 0),
        L::Drop,
    );
    at.push((L::SetBit, p.len()));
    p.push(Insn::load(Dw, 3, 0, 8));
    p.push(Insn::alu_reg(Alu::Or, 3, 4));
    p.push(Insn::store(Dw, 0, 8, 3));
    jmp(
        &mut p,
        &mut fix,
        Insn::jump_imm(Cond::Always, 0, 0, 0),
        L::Drop,
    );
    // Other frames: per-CPU slot 0 (unsigned) or 1 (unknown stream).
    at.push((L::Unknown, p.len()));
    p.push(Insn::store_imm(W, 10, -4, 1));
    p.push(Insn::jump_imm(Cond::Always, 0, 0, 1));
    at.push((L::Unsigned, p.len()));
    p.push(Insn::store_imm(W, 10, -4, 0));
    p.extend(Insn::load_map(1, other));
    p.push(Insn::alu_reg(Alu::Mov, 2, 10));
    p.push(Insn::alu_imm(Alu::Add, 2, -4));
    p.push(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM));
    jmp(&mut p, &mut fix, Insn::jump_imm(Cond::Eq, 0, 0, 0), L::Drop);
    p.push(Insn::load(Dw, 1, 0, 0));
    p.push(Insn::alu_imm(Alu::Add, 1, 1));
    p.push(Insn::store(Dw, 0, 0, 1));
    at.push((L::Drop, p.len()));
    p.push(Insn::alu_imm(Alu::Mov, 0, bpf::TC_ACT_SHOT));
    p.push(Insn::exit());
    for (i, l) in fix {
        let target = at.iter().find(|(m, _)| *m == l).expect("label placed").1;
        p[i].set_off((target - i - 1) as i16);
    }
    p
}

/// The loaded (and, in a lab, attached) sink.
#[derive(Debug)]
pub(crate) struct Sink {
    /// Kept loaded (the link refers to it; the tests run it).
    _prog: Program,
    state: Map,
    hist: Map,
    window: Map,
    other: Map,
    streams: u32,
    cpus: usize,
    _link: Option<Link>,
}

impl Sink {
    /// Load the sink for streams `0..streams`; with `side_b` (the lab's `<P>-b`), attach it
    /// to `b0`'s tc ingress there.
    pub(crate) fn load(side_b: Option<&Netns>, streams: u32) -> anyhow::Result<Sink> {
        let state = Map::array(bpf::MAP_ARRAY, STATE_LEN, streams, "vrb_sink_st")?;
        let hist = Map::array(bpf::MAP_ARRAY, (BUCKETS * 8) as u32, streams, "vrb_sink_hi")?;
        let window = Map::array(bpf::MAP_ARRAY, WINDOW_WORDS * 16, streams, "vrb_sink_wn")?;
        let other = Map::array(bpf::MAP_PERCPU_ARRAY, 8, 2, "vrb_sink_ot")?;
        let insns = program(&state, &hist, &window, &other, streams);
        let prog = Program::load_tcx_ingress(&insns, "vrb_live_sink")
            .context("loading the sink program")?;
        let link =
            match side_b {
                Some(ns) => Some(ns.run(|| {
                    Link::attach_tcx_ingress(&prog, bpf::ifindex(Side::B.side_ifname())?)
                })??),
                None => None,
            };
        let s = Sink {
            _prog: prog,
            state,
            hist,
            window,
            other,
            streams,
            cpus: bpf::possible_cpus()?,
            _link: link,
        };
        s.reset()?;
        Ok(s)
    }

    /// Zero every stream's counters, window and histogram (between trials, with no traffic
    /// in flight). The `other` counters are cumulative; [`Counts`] are deltas of them.
    pub(crate) fn reset(&self) -> anyhow::Result<()> {
        let mut st = vec![0u8; STATE_LEN as usize];
        st[StateField::LatMin as usize..][..8].copy_from_slice(&u64::MAX.to_ne_bytes());
        let zh = vec![0u8; self.hist.value_size() as usize];
        let zw = vec![0u8; self.window.value_size() as usize];
        for s in 0..self.streams {
            self.state.set(s, &st)?;
            self.hist.set(s, &zh)?;
            self.window.set(s, &zw)?;
        }
        Ok(())
    }

    /// The `other` counters (unsigned, unknown) now, cumulative.
    pub(crate) fn other(&self) -> anyhow::Result<(u64, u64)> {
        Ok((
            self.other.percpu_sum_u64(0, self.cpus)?,
            self.other.percpu_sum_u64(1, self.cpus)?,
        ))
    }

    /// The counters since the last [`Self::reset`] (`other` since `other_before`). Read
    /// only after the traffic stopped and the DUT drained.
    pub(crate) fn read(&self, other_before: (u64, u64)) -> anyhow::Result<Counts> {
        let mut streams = Vec::with_capacity(self.streams as usize);
        for s in 0..self.streams {
            let st = self.state.get(s)?;
            let f = |field: StateField| {
                u64::from_ne_bytes(st[field as usize..][..8].try_into().expect("8 bytes"))
            };
            let h = self.hist.get(s)?;
            let buckets = h
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect();
            let next = f(StateField::Next);
            streams.push(StreamCounts {
                received: f(StateField::Received),
                duplicated: f(StateField::Duplicated),
                reordered: f(StateField::Reordered),
                too_old: f(StateField::TooOld),
                highest: next.checked_sub(1),
                latency: Latencies {
                    buckets,
                    min: f(StateField::LatMin),
                    max: f(StateField::LatMax),
                    sum: f(StateField::LatSum),
                },
            });
        }
        let (u, k) = self.other()?;
        Ok(Counts {
            streams,
            unsigned: u - other_before.0,
            unknown: k - other_before.1,
        })
    }

    /// Run the program on one frame as if it arrived (tests): returns its verdict.
    #[cfg(test)]
    pub(crate) fn test_run(&self, frame: &[u8]) -> anyhow::Result<u32> {
        Ok(self._prog.test_run_out(frame)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::frames;
    use super::*;

    fn frame(stream: u32, seq: u64, ts: u64) -> Vec<u8> {
        let t = frames::template(stream, stream, 64);
        let mut f = frames::run_frame(&t, 64);
        frames::stamp(&t, &mut f, seq, ts);
        f
    }

    /// Crafted frames through the real program (`BPF_PROG_RUN`, no lab): in-order,
    /// lost, reordered, duplicated, too-old and foreign frames are each counted exactly.
    #[test]
    fn the_sink_counts_loss_reordering_and_duplicates_exactly() {
        let _alone = crate::cores_alone();
        if !vrhost_lab::require_root("sink program test run") {
            return;
        }
        let sink = Sink::load(None, 2).unwrap();
        let other0 = sink.other().unwrap();
        let now = vrhost_traffic::clock::monotonic_ns();
        let ts = now - 5_000; // 5 µs ago
        // Stream 0: 0..10, then 12 (11 lost), 11 arrives late (reordered), 5 again (dup),
        // 12 again (dup), then a jump far ahead and one frame more than a window behind it.
        let mut seqs: Vec<u64> = (0..10).collect();
        seqs.extend([12, 11, 5, 12, 13, 20, 15]);
        let far = 20 + WINDOW + 100;
        seqs.extend([far, 30]);
        for &s in &seqs {
            let v = sink.test_run(&frame(0, s, ts)).unwrap();
            assert_eq!(v, bpf::TC_ACT_SHOT as u32);
        }
        // Stream 1: 3 frames in order; one unsigned frame; one of an unknown stream.
        for s in 0..3 {
            sink.test_run(&frame(1, s, ts)).unwrap();
        }
        let mut junk = frame(1, 0, ts);
        junk[SIG_AT] ^= 0xff;
        sink.test_run(&junk).unwrap();
        sink.test_run(&frame(7, 0, ts)).unwrap();

        let c = sink.read(other0).unwrap();
        let s0 = &c.streams[0];
        assert_eq!(s0.received, seqs.len() as u64);
        assert_eq!(s0.duplicated, 2, "5 and 12 again");
        // 11 (late), 15 (after 20), 30 (too old): 3 reordered, one of them too old.
        assert_eq!((s0.reordered, s0.too_old), (3, 1));
        assert_eq!(s0.highest, Some(far));
        // Sent 0..=far except the numbers never sent: unique = received − dup.
        assert_eq!(s0.unique(), seqs.len() as u64 - 2);
        let s1 = &c.streams[1];
        assert_eq!((s1.received, s1.duplicated, s1.reordered), (3, 0, 0));
        assert_eq!(s1.lost(3), 0);
        assert_eq!((c.unsigned, c.unknown), (1, 1));
        // Latency: at least the 5 µs stamped, well below 100 ms; every frame measured.
        let l = &s0.latency;
        assert_eq!(l.count(), s0.received);
        assert!(l.min >= 5_000 && l.max < 100_000_000, "{} {}", l.min, l.max);
        let sum = l.summary().unwrap();
        assert!(sum.at(50.0).unwrap() >= l.min && sum.at(99.9).unwrap() <= l.max);

        // A reset starts a new trial.
        sink.reset().unwrap();
        sink.test_run(&frame(0, 0, ts)).unwrap();
        let c = sink.read(sink.other().unwrap()).unwrap();
        assert_eq!((c.streams[0].received, c.streams[0].duplicated), (1, 0));
        assert_eq!(c.streams[0].highest, Some(0));
    }

    /// The program's bucket for crafted latencies matches `histogram::bucket_of`.
    #[test]
    fn the_program_buckets_like_the_reference() {
        let _alone = crate::cores_alone();
        if !vrhost_lab::require_root("sink program test run") {
            return;
        }
        let sink = Sink::load(None, 1).unwrap();
        for lat in [300_000u64, 12_345_678, 1_500_000_000] {
            sink.reset().unwrap();
            let ts = vrhost_traffic::clock::monotonic_ns() - lat;
            sink.test_run(&frame(0, 0, ts)).unwrap();
            let c = sink.read(sink.other().unwrap()).unwrap();
            let l = &c.streams[0].latency;
            let b = l.buckets.iter().position(|&n| n == 1).expect("one bucket");
            // The measured latency is lat plus the few µs until the program ran.
            assert_eq!(b, super::super::histogram::bucket_of(l.max));
            assert!(l.max >= lat && l.max < lat + 50_000_000);
        }
    }
}
