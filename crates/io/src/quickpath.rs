//! The quickpath: established IPv4 and IPv6 flows forwarded by the AF_XDP ports' own XDP program,
//! without reaching the sockets, the workers or an skb (Tanyingyong's Quickpath, seed 003;
//! the data plane's side of it is `vrhost_dataplane::fastpath`, which says what is offered
//! and how generations keep it correct).
//!
//! Why: on copy-mode AF_XDP (veth, NICs without zero-copy) every frame is copied into the
//! UMEM, handed to a worker and copied out again by the kernel's transmit: the perf evidence
//! in `docs/perf.md` ("What limits each path") puts the ceiling of that path below what the
//! issue asks of vrhost. A frame the XDP program itself forwards with `bpf_redirect_map` to
//! the egress device costs neither copy. The workers stay the full path: a flow's first
//! frames, everything that is not plain forwarding (ARP, ND, ICMP errors, punts, options and
//! extension headers, fragmentation, VLANs, ECMP), and every flow whose entry is missing or
//! stale.
//!
//! **Tables**, shared by every port of the data plane:
//! - `flows`: a direct-mapped table of [`SLOTS`] 64-byte entries in a mmapable BPF array.
//!   Workers write it from user space with no system call — an offer costs a hash and a
//!   cache line — and the program reads it. Each entry is guarded by a sequence number
//!   (odd while written, 0 = empty): a writer takes an entry by compare-and-swap from even
//!   to odd and leaves it even; the program reads the number, the entry, then the number
//!   again and uses the entry only if both reads are the same even number. (x86 keeps
//!   loads in order and stores in order, so the sequence-lock needs no fences in the
//!   program.)
//! - `gens`: each VR's published fast generation (mmapable; raised with `fetch_max`). An
//!   entry is used only while its generation equals its VR's.
//! - `egress`: per data-plane port, whether frames may be redirected to it now: only while
//!   its queues transmit by XDP (a veth takes redirected frames only while its peer runs a
//!   NAPI, the same condition). [`FastPath::tick`] mirrors each port's transmit path.
//! - `devs`: the devmap (`DEVMAP_HASH`, ifindex → ifindex) the program redirects through.
//! - `stats`: per-CPU packets and bytes per VR.
//!
//! **The program** (assembled here like the plain steering program) checks, in order: a
//! unicast destination MAC; for IPv4, a 20-byte header, TTL above 1, an ordinary unicast
//! source (as `ip4-input`'s first screen), a valid header checksum and a total length
//! between 20 and the frame's; for IPv6, version 6, a TCP, UDP or ICMPv6 payload right after
//! the header (extension headers take the full path, which checks their chain), hop limit
//! above 1, a source that is not multicast, link-local or in ::/96, a destination that is
//! not multicast, and a payload length within the frame. Then it looks the flow up by
//! (ingress ifindex, destination MAC, family, destination address), checks the entry's
//! sequence, key, MTU, generation and egress, redirects, rewrites the MACs, decrements the
//! TTL with the incremental checksum update (as the kernel's `ip_decrease_ttl`) or the hop
//! limit, and counts. Any failed check sends the frame to its queue's socket as before — to
//! the workers, who validate, count and drop or forward it — so the quickpath can only
//! forward what the full path would have forwarded the same way.

use std::io;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use vrhost_dataplane::VrId;
use vrhost_dataplane::fastpath::{FastFlow, FastPath};
use vrhost_dataplane::port::PortId;

use crate::bpf::{self, Alu, Cond, Insn, Map, MmapArray, Op, Size, assemble};
use crate::txpath::TxPathState;

/// log2 of the entries in the flow table.
pub const SLOT_BITS: u32 = 14;
/// Entries in the flow table (64 bytes each: 1 MiB).
pub const SLOTS: u32 = 1 << SLOT_BITS;
/// VRs the quickpath serves (ids `0..MAX_VRS`; VRs above take the full path).
pub const MAX_VRS: u32 = 4096;
/// Data-plane ports it serves (ids `0..MAX_PORTS`).
pub const MAX_PORTS: u32 = 256;
const ENTRY: usize = 64;

// Entry layout (bytes), as the program reads it.
const E_SEQ: i16 = 0;
const E_IN_IF: i16 = 4;
/// The destination: four words as loaded from the frame (an IPv4 one in the first, the
/// rest 0).
const E_DST: i16 = 8;
const E_MAC_LO: i16 = 24;
const E_MAC_HI: i16 = 28;
const E_VR: i16 = 30;
const E_OUT_IF: i16 = 32;
const E_L2: i16 = 36;
const E_MTU: i16 = 48;
const E_OUT_PORT: i16 = 50;
/// 4 or 6.
const E_FAMILY: i16 = 52;
const E_GEN: i16 = 56;

/// The flow table's hash, over the fields as the program loads them (little-endian loads of
/// the frame's bytes; `dst` the destination's words, an IPv4 one first and the rest 0).
fn slot(in_if: u32, dst: [u32; 4], mac_lo: u32, mac_hi: u32) -> u32 {
    let h = dst[0] ^ dst[1] ^ dst[2] ^ dst[3] ^ mac_lo ^ (mac_hi << 16) ^ (in_if << 8);
    h.wrapping_mul(0x9E37_79B1) >> (32 - SLOT_BITS)
}

/// A destination as the program's words.
fn dst_words(dst: std::net::IpAddr) -> ([u32; 4], u32) {
    match dst {
        std::net::IpAddr::V4(a) => ([u32::from_ne_bytes(a.octets()), 0, 0, 0], 4),
        std::net::IpAddr::V6(a) => {
            let o = a.octets();
            let w = |i: usize| u32::from_ne_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
            ([w(0), w(4), w(8), w(12)], 6)
        }
    }
}

/// The quickpath's tables and what it knows of the ports (see the module docs).
pub struct Quickpath {
    flows: MmapArray,
    gens: MmapArray,
    egress: MmapArray,
    devs: Map,
    stats: Map,
    cpus: usize,
    /// Per data-plane port: its ifindex if frames it receives go through the quickpath
    /// program (0: not).
    ingress: Box<[AtomicU32]>,
    /// Per data-plane port: its ifindex if frames may be redirected to it (0: not).
    out_if: Box<[AtomicU32]>,
    /// The transmit paths of the egress ports, mirrored into `egress` by `tick`.
    tx: Mutex<Vec<(PortId, Arc<TxPathState>)>>,
    /// Offers taken (entries written).
    pub written: AtomicU64,
}

// SAFETY: the mapped tables are shared memory reached only through atomics (the flow
// entries' words, the generations, the egress flags) or bpf(2) calls; the maps' descriptors
// are plain file descriptors.
unsafe impl Sync for Quickpath {}
// SAFETY: as above; nothing in it is tied to a thread.
unsafe impl Send for Quickpath {}

impl core::fmt::Debug for Quickpath {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Quickpath")
            .field("written", &self.written.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Quickpath {
    /// Create the tables.
    pub fn new() -> io::Result<Quickpath> {
        Ok(Quickpath {
            flows: MmapArray::new(ENTRY as u32, SLOTS, "vrhost_qp_flows")?,
            gens: MmapArray::new(8, MAX_VRS, "vrhost_qp_gens")?,
            egress: MmapArray::new(4, MAX_PORTS, "vrhost_qp_egress")?,
            devs: Map::create(bpf::MAP_DEVMAP_HASH, 4, MAX_PORTS, "vrhost_qp_devs")?,
            stats: Map::create(bpf::MAP_PERCPU_ARRAY, 16, MAX_VRS, "vrhost_qp_stats")?,
            cpus: bpf::possible_cpus()?,
            ingress: (0..MAX_PORTS).map(|_| AtomicU32::new(0)).collect(),
            out_if: (0..MAX_PORTS).map(|_| AtomicU32::new(0)).collect(),
            tx: Mutex::new(Vec::new()),
            written: AtomicU64::new(0),
        })
    }

    /// Frames received on data-plane port `port` (interface `ifindex`) go through the
    /// quickpath program (its AF_XDP port loaded [`Quickpath::program`]).
    pub fn add_ingress(&self, port: PortId, ifindex: u32) {
        if let Some(a) = self.ingress.get(usize::from(port)) {
            a.store(ifindex, Ordering::Release);
        }
    }

    /// Frames may be redirected to data-plane port `port` (interface `ifindex`) while its
    /// transmit path `tx` sends by XDP.
    pub fn add_egress(&self, port: PortId, ifindex: u32, tx: Arc<TxPathState>) -> io::Result<()> {
        if u32::from(port) >= MAX_PORTS {
            return Ok(());
        }
        self.devs.set(ifindex, &ifindex.to_ne_bytes())?;
        self.out_if[usize::from(port)].store(ifindex, Ordering::Release);
        self.tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((port, tx));
        self.tick();
        Ok(())
    }

    fn word(&self, slot: u32, byte: i16) -> &AtomicU32 {
        let (base, stride) = self.flows.raw();
        debug_assert!(slot < SLOTS && (byte as usize) < ENTRY);
        // SAFETY: inside the mapping (slot < SLOTS, byte < 64 = the stride), 4-byte aligned
        // (page-aligned base, 64-byte stride, word offsets); the memory lives as long as
        // `self`, and every access from this process is atomic.
        unsafe {
            &*base
                .add(slot as usize * stride + byte as usize)
                .cast::<AtomicU32>()
        }
    }

    fn gen_cell(&self, vr: VrId) -> &AtomicU64 {
        let (base, stride) = self.gens.raw();
        // SAFETY: as `word`: in bounds (vr < MAX_VRS, checked by callers), 8-byte aligned,
        // accessed atomically.
        unsafe { &*base.add(usize::from(vr) * stride).cast::<AtomicU64>() }
    }

    fn egress_cell(&self, port: usize) -> &AtomicU32 {
        let (base, stride) = self.egress.raw();
        // SAFETY: as `word`: port < MAX_PORTS (callers), aligned, accessed atomically.
        unsafe { &*base.add(port * stride).cast::<AtomicU32>() }
    }

    /// The program for a port whose sockets are in `xsks`: the quickpath, then (for every
    /// frame it does not forward) the plain steering to the queue's socket.
    pub(crate) fn program(&self, xsks: &Map) -> Vec<Insn> {
        program(self, xsks)
    }

    /// Entries currently valid-looking (sequence even and non-zero): for tests and status.
    pub fn entries(&self) -> usize {
        (0..SLOTS)
            .filter(|&s| {
                let q = self.word(s, E_SEQ).load(Ordering::Relaxed);
                q != 0 && q & 1 == 0
            })
            .count()
    }
}

impl FastPath for Quickpath {
    fn offer(&self, f: &FastFlow) {
        if u32::from(f.vr) >= MAX_VRS {
            return;
        }
        let (Some(in_if), Some(out_if)) = (
            self.ingress.get(usize::from(f.in_port)),
            self.out_if.get(usize::from(f.out_port)),
        ) else {
            return;
        };
        let (in_if, out_if) = (
            in_if.load(Ordering::Relaxed),
            out_if.load(Ordering::Relaxed),
        );
        if in_if == 0 || out_if == 0 {
            return;
        }
        let (dst, family) = dst_words(f.dst);
        let mac_lo = u32::from_le_bytes([f.in_mac[0], f.in_mac[1], f.in_mac[2], f.in_mac[3]]);
        let mac_hi = u32::from(u16::from_le_bytes([f.in_mac[4], f.in_mac[5]]));
        let s = slot(in_if, dst, mac_lo, mac_hi);
        let seq = self.word(s, E_SEQ);
        let q = seq.load(Ordering::Acquire);
        if q & 1 == 1 {
            return; // another worker is writing it
        }
        let w = |b: i16| self.word(s, b).load(Ordering::Relaxed);
        let gen_lo = f.generation as u32;
        let gen_hi = (f.generation >> 32) as u32;
        if q != 0
            && w(E_IN_IF) == in_if
            && (0..4).all(|k| w(E_DST + 4 * k) == dst[k as usize])
            && w(E_FAMILY) == family
            && w(E_MAC_LO) == mac_lo
            && w(E_MAC_HI) & 0xffff == mac_hi
            && w(E_GEN) == gen_lo
            && w(E_GEN + 4) == gen_hi
        {
            return; // the same decision is there (one generation, one answer)
        }
        if seq
            .compare_exchange(q, q | 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        std::sync::atomic::fence(Ordering::Release);
        let put = |b: i16, v: u32| self.word(s, b).store(v, Ordering::Relaxed);
        let l2 = {
            let mut b = [0u8; 12];
            b[..6].copy_from_slice(&f.dst_mac);
            b[6..].copy_from_slice(&f.src_mac);
            b
        };
        put(E_IN_IF, in_if);
        for (k, d) in dst.iter().enumerate() {
            put(E_DST + 4 * k as i16, *d);
        }
        put(E_FAMILY, family);
        put(E_MAC_LO, mac_lo);
        put(E_MAC_HI, mac_hi | u32::from(f.vr) << 16);
        put(E_OUT_IF, out_if);
        for k in 0..3 {
            let c = &l2[k * 4..k * 4 + 4];
            put(
                E_L2 + 4 * k as i16,
                u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            );
        }
        put(E_MTU, u32::from(f.mtu) | u32::from(f.out_port) << 16);
        put(E_GEN, gen_lo);
        put(E_GEN + 4, gen_hi);
        // Even again, and never 0.
        seq.store((q | 1).wrapping_add(1).max(2), Ordering::Release);
        self.written.fetch_add(1, Ordering::Relaxed);
    }

    fn publish(&self, vr: VrId, generation: u64) {
        if u32::from(vr) < MAX_VRS {
            self.gen_cell(vr).fetch_max(generation, Ordering::AcqRel);
        }
    }

    fn counts(&self, vr: VrId) -> (u64, u64) {
        if u32::from(vr) >= MAX_VRS {
            return (0, 0);
        }
        match self.stats.percpu_sum_words(u32::from(vr), self.cpus) {
            Ok(w) => (w[0], w[1]),
            Err(_) => (0, 0),
        }
    }

    fn tick(&self) {
        let Ok(tx) = self.tx.try_lock() else { return };
        for (port, st) in tx.iter() {
            let ok = u32::from(st.xdp.load(Ordering::Relaxed));
            let cell = self.egress_cell(usize::from(*port));
            if cell.load(Ordering::Relaxed) != ok {
                cell.store(ok, Ordering::Release);
            }
        }
    }
}

/// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_INGRESS_IFINDEX: i16 = 12;
const MD_RX_QUEUE_INDEX: i16 = 16;

// Stack slots (offsets from r10).
const S_TOT_LEN: i16 = -8;
const S_KEY: i16 = -12;
const S_SEQ: i16 = -16;
const S_VR: i16 = -20;
const S_PORT: i16 = -24;
const S_OUT_IF: i16 = -28;
const S_L2: i16 = -40;
const S_LEN: i16 = -44;
const S_GEN: i16 = -56;
/// The family (4 or 6), spilled as a 64-bit constant so the verifier follows each
/// family's path on its own.
const S_FAM: i16 = -64;

/// IPv6 next headers the quickpath forwards: TCP, UDP, ICMPv6 (extension headers, whose
/// chain the full path checks, take the full path).
const NEXT_HEADERS: [i32; 3] = [6, 17, 58];

fn program(qp: &Quickpath, xsks: &Map) -> Vec<Insn> {
    use Cond::{Always, Eq, Ge, Gt, Le, Lt, Ne};
    use Op::{I, Jump, JumpReg, Label};
    let ld = |s, d, r, o| I(Insn::load(s, d, r, o));
    let st = |s, r, o, v| I(Insn::store(s, r, o, v));
    let mov = |d, v| I(Insn::alu_imm(Alu::Mov, d, v));
    let movr = |d, s| I(Insn::alu_reg(Alu::Mov, d, s));
    let alu = |op, d, v| I(Insn::alu_imm(op, d, v));
    let alur = |op, d, s| I(Insn::alu_reg(op, d, s));
    let map = |ops: &mut Vec<Op>, r, m: &Map| ops.extend(Insn::load_map(r, m).map(I));
    // r2 = r10 + off (a key on the stack)
    let key = |off: i16| [movr(2, 10), alu(Alu::Add, 2, i32::from(off))];

    let mut o = vec![
        movr(6, 1), // r6 = ctx
        ld(Size::W, 7, 6, MD_DATA),
        ld(Size::W, 8, 6, MD_DATA_END),
        movr(2, 7),
        alu(Alu::Add, 2, 14),
        JumpReg(Gt, 2, 8, "xsk"),
        ld(Size::B, 2, 7, 0),
        alu(Alu::And, 2, 1),
        Jump(Ne, 2, 0, "xsk"), // a group address
        // The frame's length (a scalar: packet pointers cannot be subtracted here).
        movr(1, 6),
        I(Insn::call(bpf::FUNC_XDP_GET_BUFF_LEN)),
        st(Size::W, 10, S_LEN, 0),
        ld(Size::H, 2, 7, 12),
        Jump(Eq, 2, 0xdd86, "v6"), // ethertypes as little-endian loads
        Jump(Ne, 2, 0x0008, "xsk"),
        // ---- IPv4: Ethernet II + a 20-byte header.
        movr(2, 7),
        alu(Alu::Add, 2, 34),
        JumpReg(Gt, 2, 8, "xsk"),
        ld(Size::B, 2, 7, 14),
        Jump(Ne, 2, 0x45, "xsk"),
        ld(Size::B, 2, 7, 22),
        Jump(Le, 2, 1, "xsk"), // TTL expires here: the full path sends the ICMP error
        // The source: what `ip4-input` lets by without a closer look (not 0/8, 127/8,
        // 169/8 or 224/3); it drops the martians among the rest (169.254/16 is link-local,
        // never forwarded).
        ld(Size::B, 2, 7, 26),
        Jump(Eq, 2, 0, "xsk"),
        Jump(Eq, 2, 127, "xsk"),
        Jump(Eq, 2, 169, "xsk"),
        Jump(Ge, 2, 224, "xsk"),
        // Header checksum: the ones' complement sum of the ten words must be 0xffff (the
        // sum of byte-swapped words is the byte-swapped sum, and 0xffff is its own swap).
        ld(Size::H, 3, 7, 14),
    ];
    for off in (16..34).step_by(2) {
        o.push(ld(Size::H, 2, 7, off));
        o.push(alur(Alu::Add, 3, 2));
    }
    for _ in 0..2 {
        o.extend([
            movr(2, 3),
            alu(Alu::Rsh, 2, 16),
            alu(Alu::And, 3, 0xffff),
            alur(Alu::Add, 3, 2),
        ]);
    }
    o.extend([
        Jump(Ne, 3, 0xffff, "xsk"),
        // The total length, within the frame.
        ld(Size::H, 4, 7, 16),
        I(Insn::to_be(4, 16)),
        Jump(Lt, 4, 20, "xsk"),
        ld(Size::W, 2, 10, S_LEN),
        alu(Alu::Sub, 2, 14),
        JumpReg(Gt, 4, 2, "xsk"),
        st(Size::Dw, 10, S_TOT_LEN, 4),
        mov(2, 4),
        st(Size::Dw, 10, S_FAM, 2),
        ld(Size::W, 1, 7, 30), // the destination's one word
        Jump(Always, 0, 0, "hash"),
        // ---- IPv6: Ethernet II + the 40-byte header.
        Label("v6"),
        movr(2, 7),
        alu(Alu::Add, 2, 54),
        JumpReg(Gt, 2, 8, "xsk"),
        ld(Size::B, 2, 7, 14),
        alu(Alu::Rsh, 2, 4),
        Jump(Ne, 2, 6, "xsk"),
        ld(Size::B, 2, 7, 20),
    ]);
    for nh in NEXT_HEADERS {
        o.push(Jump(Eq, 2, nh, "nh"));
    }
    o.extend([
        Jump(Always, 0, 0, "xsk"),
        Label("nh"),
        ld(Size::B, 2, 7, 21),
        Jump(Le, 2, 1, "xsk"), // hop limit: the full path sends the ICMPv6 error
        // The source: not multicast, not link-local (fe80::/10, which must not leave its
        // link), not ::, ::1 or anything else in ::/96; the destination not multicast.
        ld(Size::B, 2, 7, 22),
        Jump(Eq, 2, 0xff, "xsk"),
        ld(Size::H, 2, 7, 22),
        alu(Alu::And, 2, 0xc0ff),
        Jump(Eq, 2, 0x80fe, "xsk"),
        ld(Size::W, 2, 7, 22),
        ld(Size::W, 3, 7, 26),
        alur(Alu::Or, 2, 3),
        ld(Size::W, 3, 7, 30),
        alur(Alu::Or, 2, 3),
        Jump(Eq, 2, 0, "xsk"),
        ld(Size::B, 2, 7, 38),
        Jump(Eq, 2, 0xff, "xsk"),
        // The packet (header + payload), within the frame.
        ld(Size::H, 4, 7, 18),
        I(Insn::to_be(4, 16)),
        alu(Alu::Add, 4, 40),
        ld(Size::W, 2, 10, S_LEN),
        alu(Alu::Sub, 2, 14),
        JumpReg(Gt, 4, 2, "xsk"),
        st(Size::Dw, 10, S_TOT_LEN, 4),
        mov(2, 6),
        st(Size::Dw, 10, S_FAM, 2),
        ld(Size::W, 1, 7, 38), // the destination's four words, folded
        ld(Size::W, 2, 7, 42),
        alur(Alu::Xor, 1, 2),
        ld(Size::W, 2, 7, 46),
        alur(Alu::Xor, 1, 2),
        ld(Size::W, 2, 7, 50),
        alur(Alu::Xor, 1, 2),
        // ---- Both: the slot (see `slot`).
        Label("hash"),
        ld(Size::W, 2, 7, 0),
        alur(Alu::Xor, 1, 2),
        ld(Size::H, 2, 7, 4),
        alu(Alu::Lsh, 2, 16),
        alur(Alu::Xor, 1, 2),
        ld(Size::W, 2, 6, MD_INGRESS_IFINDEX),
        alu(Alu::Lsh, 2, 8),
        alur(Alu::Xor, 1, 2),
        alu(Alu::Lsh, 1, 32),
        alu(Alu::Rsh, 1, 32),
    ]);
    o.extend(Insn::load_imm64(2, 0x9E37_79B1).map(I));
    o.extend([
        alur(Alu::Mul, 1, 2),
        alu(Alu::Lsh, 1, 32),
        alu(Alu::Rsh, 1, 32),
        alu(Alu::Rsh, 1, (32 - SLOT_BITS) as i32),
        st(Size::W, 10, S_KEY, 1),
    ]);
    map(&mut o, 1, qp.flows.map());
    o.extend(key(S_KEY));
    o.extend([
        I(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)),
        Jump(Eq, 0, 0, "xsk"),
        movr(9, 0), // r9 = the entry
        ld(Size::W, 5, 9, E_SEQ),
        Jump(Eq, 5, 0, "xsk"),
        movr(2, 5),
        alu(Alu::And, 2, 1),
        Jump(Ne, 2, 0, "xsk"),
        st(Size::W, 10, S_SEQ, 5),
        // The key.
        ld(Size::W, 2, 9, E_IN_IF),
        ld(Size::W, 3, 6, MD_INGRESS_IFINDEX),
        JumpReg(Ne, 2, 3, "xsk"),
        ld(Size::W, 2, 9, E_MAC_LO),
        ld(Size::W, 3, 7, 0),
        JumpReg(Ne, 2, 3, "xsk"),
        ld(Size::H, 2, 9, E_MAC_HI),
        ld(Size::H, 3, 7, 4),
        JumpReg(Ne, 2, 3, "xsk"),
        ld(Size::W, 2, 9, E_FAMILY),
        ld(Size::Dw, 3, 10, S_FAM),
        JumpReg(Ne, 2, 3, "xsk"),
        Jump(Eq, 3, 6, "cmp6"),
        ld(Size::W, 2, 9, E_DST),
        ld(Size::W, 3, 7, 30),
        JumpReg(Ne, 2, 3, "xsk"),
        Jump(Always, 0, 0, "cmp_done"),
        Label("cmp6"),
    ]);
    for k in 0..4 {
        o.extend([
            ld(Size::W, 2, 9, E_DST + 4 * k),
            ld(Size::W, 3, 7, 38 + 4 * k),
            JumpReg(Ne, 2, 3, "xsk"),
        ]);
    }
    o.extend([
        Label("cmp_done"),
        // Within the egress MTU.
        ld(Size::H, 2, 9, E_MTU),
        ld(Size::Dw, 3, 10, S_TOT_LEN),
        JumpReg(Gt, 3, 2, "xsk"),
        // The decision, copied out before the sequence is checked again.
        ld(Size::H, 2, 9, E_VR),
        st(Size::W, 10, S_VR, 2),
        ld(Size::H, 2, 9, E_OUT_PORT),
        st(Size::W, 10, S_PORT, 2),
        ld(Size::W, 2, 9, E_OUT_IF),
        st(Size::W, 10, S_OUT_IF, 2),
        ld(Size::W, 2, 9, E_L2),
        st(Size::W, 10, S_L2, 2),
        ld(Size::W, 2, 9, E_L2 + 4),
        st(Size::W, 10, S_L2 + 4, 2),
        ld(Size::W, 2, 9, E_L2 + 8),
        st(Size::W, 10, S_L2 + 8, 2),
        ld(Size::Dw, 2, 9, E_GEN),
        st(Size::Dw, 10, S_GEN, 2),
        ld(Size::W, 2, 9, E_SEQ),
        ld(Size::W, 3, 10, S_SEQ),
        JumpReg(Ne, 2, 3, "xsk"),
    ]);
    // The VR's generation.
    map(&mut o, 1, qp.gens.map());
    o.extend(key(S_VR));
    o.extend([
        I(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)),
        Jump(Eq, 0, 0, "xsk"),
        ld(Size::Dw, 2, 0, 0),
        ld(Size::Dw, 3, 10, S_GEN),
        JumpReg(Ne, 2, 3, "xsk"),
    ]);
    // The egress takes redirected frames now.
    map(&mut o, 1, qp.egress.map());
    o.extend(key(S_PORT));
    o.extend([
        I(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)),
        Jump(Eq, 0, 0, "xsk"),
        ld(Size::W, 2, 0, 0),
        Jump(Eq, 2, 0, "xsk"),
    ]);
    map(&mut o, 1, &qp.devs);
    o.extend([
        ld(Size::W, 2, 10, S_OUT_IF),
        mov(3, 0),
        I(Insn::call(bpf::FUNC_REDIRECT_MAP)),
        Jump(Ne, 0, bpf::XDP_REDIRECT, "xsk"),
        // Rewrite: the MACs, then TTL − 1 and the checksum (+ htons(0x0100), end-around
        // carry, as `ip_decrease_ttl`) or the hop limit − 1.
        ld(Size::W, 2, 10, S_L2),
        st(Size::W, 7, 0, 2),
        ld(Size::W, 2, 10, S_L2 + 4),
        st(Size::W, 7, 4, 2),
        ld(Size::W, 2, 10, S_L2 + 8),
        st(Size::W, 7, 8, 2),
        ld(Size::Dw, 3, 10, S_FAM),
        Jump(Eq, 3, 6, "rw6"),
        ld(Size::B, 2, 7, 22),
        alu(Alu::Sub, 2, 1),
        st(Size::B, 7, 22, 2),
        ld(Size::H, 2, 7, 24),
        alu(Alu::Add, 2, 1),
        Jump(Lt, 2, 0xffff, "csum"),
        alu(Alu::Add, 2, 1),
        Label("csum"),
        st(Size::H, 7, 24, 2),
        Jump(Always, 0, 0, "count"),
        Label("rw6"),
        ld(Size::B, 2, 7, 21),
        alu(Alu::Sub, 2, 1),
        st(Size::B, 7, 21, 2),
        Label("count"),
    ]);
    map(&mut o, 1, &qp.stats);
    o.extend(key(S_VR));
    o.extend([
        I(Insn::call(bpf::FUNC_MAP_LOOKUP_ELEM)),
        Jump(Eq, 0, 0, "done"),
        ld(Size::Dw, 2, 0, 0),
        alu(Alu::Add, 2, 1),
        st(Size::Dw, 0, 0, 2),
        ld(Size::Dw, 2, 0, 8),
        ld(Size::W, 3, 10, S_LEN),
        alur(Alu::Add, 2, 3),
        st(Size::Dw, 0, 8, 2),
        Label("done"),
        mov(0, bpf::XDP_REDIRECT),
        I(Insn::exit()),
        Label("xsk"),
        ld(Size::W, 2, 6, MD_RX_QUEUE_INDEX),
    ]);
    map(&mut o, 1, xsks);
    o.extend([
        mov(3, bpf::XDP_PASS),
        I(Insn::call(bpf::FUNC_REDIRECT_MAP)),
        I(Insn::exit()),
    ]);
    assemble(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    use crate::afxdp::bpf::{XskMap, load_quickpath};
    use crate::bpf::Program;
    use vrhost_wire::checksum;

    const IN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
    const NBR: [u8; 6] = [0x02, 0, 0, 0, 0xbb, 0x02];
    const OUT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
    const DST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 9);
    /// The loopback: the one interface every namespace has (the test run's ingress).
    const LO: u32 = 1;

    /// Ethernet + IPv4 (20-byte header, valid checksum) + UDP with 18 bytes of payload.
    fn frame(dst_mac: [u8; 6], ttl: u8) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst_mac);
        f.extend_from_slice(&[0x02, 0, 0, 0, 0xaa, 0x01]);
        f.extend_from_slice(&[0x08, 0x00]);
        let total = 20 + 8 + 18u16;
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[6] = 0x40;
        ip[8] = ttl;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 2]);
        ip[16..20].copy_from_slice(&DST.octets());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x03, 0xe8, 0x07, 0xd0, 0, 26, 0, 0]);
        f.extend((0..18).map(|i| i as u8));
        refill_checksum(&mut f);
        f
    }

    /// Make the IPv4 header checksum of frame `f` right again.
    fn refill_checksum(f: &mut [u8]) {
        f[24..26].fill(0);
        let c = !checksum::data(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }

    fn flow(generation: u64) -> FastFlow {
        FastFlow {
            vr: 3,
            generation,
            in_port: 0,
            in_mac: IN_MAC,
            dst: DST.into(),
            out_port: 1,
            dst_mac: NBR,
            src_mac: OUT_MAC,
            mtu: 1500,
        }
    }

    struct Setup {
        qp: Quickpath,
        prog: Program,
        tx: Arc<TxPathState>,
        _xsks: XskMap,
    }

    fn setup() -> Option<Setup> {
        if !vrhost_lab::require_root("quickpath program test run") {
            return None;
        }
        let qp = Quickpath::new().unwrap();
        let xsks = XskMap::create(4).unwrap();
        let prog = load_quickpath(&xsks, &qp).unwrap_or_else(|e| panic!("{e}"));
        qp.add_ingress(0, LO);
        let tx = Arc::new(TxPathState::default());
        tx.xdp.store(true, Ordering::Relaxed);
        qp.add_egress(1, LO, tx.clone()).unwrap();
        Some(Setup {
            qp,
            prog,
            tx,
            _xsks: xsks,
        })
    }

    fn run(s: &Setup, f: &[u8]) -> (u32, Vec<u8>) {
        s.prog.test_run_ctx_out(f, LO, 0).unwrap()
    }

    const PASS: u32 = bpf::XDP_PASS as u32;
    const REDIRECT: u32 = bpf::XDP_REDIRECT as u32;

    #[test]
    fn an_offered_flow_is_forwarded_with_the_full_paths_rewrite() {
        let Some(s) = setup() else { return };
        let f = frame(IN_MAC, 64);
        // Unknown flow: to the socket (none in the map here: the stack).
        assert_eq!(run(&s, &f), (PASS, f.clone()));
        s.qp.publish(3, 10);
        s.qp.offer(&flow(10));
        assert_eq!(s.qp.entries(), 1);
        let (rc, out) = run(&s, &f);
        assert_eq!(rc, REDIRECT);
        assert_eq!(out.len(), f.len());
        assert_eq!(&out[..6], &NBR, "destination: the next hop");
        assert_eq!(&out[6..12], &OUT_MAC, "source: the egress VIF");
        assert_eq!(out[14 + 8], 63, "TTL − 1");
        assert_eq!(
            checksum::data(&out[14..34]),
            0xffff,
            "header checksum still valid"
        );
        let mut want = f.clone();
        want[..6].copy_from_slice(&NBR);
        want[6..12].copy_from_slice(&OUT_MAC);
        want[22] = 63;
        want[24..26].copy_from_slice(&out[24..26]);
        assert_eq!(out, want, "nothing else changed");
        assert_eq!(s.qp.counts(3), (1, f.len() as u64));
        // Offering the same decision again writes nothing.
        s.qp.offer(&flow(10));
        assert_eq!(s.qp.written.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn checksum_update_matches_a_full_recompute_for_every_ttl() {
        let Some(s) = setup() else { return };
        s.qp.publish(3, 10);
        s.qp.offer(&flow(10));
        for ttl in 2..=255u8 {
            let (rc, out) = run(&s, &frame(IN_MAC, ttl));
            assert_eq!(rc, REDIRECT);
            let mut ip: [u8; 20] = out[14..34].try_into().unwrap();
            let got = u16::from_be_bytes([ip[10], ip[11]]);
            ip[10] = 0;
            ip[11] = 0;
            assert_eq!(checksum::data(&out[14..34]), 0xffff, "ttl {ttl}");
            assert_eq!(got, !checksum::data(&ip), "ttl {ttl}");
        }
    }

    #[test]
    fn what_the_full_path_must_see_goes_to_the_socket() {
        let Some(s) = setup() else { return };
        s.qp.publish(3, 10);
        s.qp.offer(&flow(10));
        let good = frame(IN_MAC, 64);
        assert_eq!(run(&s, &good).0, REDIRECT);
        let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
        cases.push(("TTL 1", frame(IN_MAC, 1)));
        let mut f = good.clone();
        f[14 + 12] ^= 1; // source address: the checksum no longer holds
        cases.push(("bad checksum", f));
        let mut f = good.clone();
        f[14] = 0x46;
        cases.push(("options", f));
        for (what, first) in [
            ("source 0/8", 0u8),
            ("source 127/8", 127),
            ("source 169/8 (169.254/16 is link-local)", 169),
            ("source 224/3", 240),
        ] {
            let mut f = good.clone();
            f[14 + 12] = first;
            refill_checksum(&mut f); // only the source is wrong
            cases.push((what, f));
        }
        let mut f = good.clone();
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        cases.push(("not IPv4", f));
        cases.push(("other MAC", frame([0x02, 0, 0, 0, 0, 0x07], 64)));
        cases.push(("broadcast MAC", frame([0xff; 6], 64)));
        let mut f = good.clone();
        f.truncate(40);
        cases.push(("total length beyond the frame", f));
        cases.push(("truncated header", good[..30].to_vec()));
        for (what, f) in &cases {
            assert_eq!(run(&s, f), (PASS, f.clone()), "{what}");
        }
        // Over the MTU (a changed MTU comes with a new generation).
        let mut small = flow(11);
        small.mtu = 40;
        s.qp.publish(3, 11);
        s.qp.offer(&small);
        assert_eq!(run(&s, &good).0, PASS, "over the MTU");
        s.qp.publish(3, 12);
        s.qp.offer(&flow(12));
        assert_eq!(run(&s, &good).0, REDIRECT);
        // Stale: the VR moved on.
        s.qp.publish(3, 13);
        assert_eq!(run(&s, &good).0, PASS, "stale generation");
        // An older generation published late changes nothing.
        s.qp.publish(3, 12);
        assert_eq!(run(&s, &good).0, PASS, "generations only grow");
        s.qp.offer(&flow(13));
        assert_eq!(run(&s, &good).0, REDIRECT);
        // The egress stops taking XDP transmit.
        s.tx.xdp.store(false, Ordering::Relaxed);
        s.qp.tick();
        assert_eq!(run(&s, &good).0, PASS, "egress off");
        s.tx.xdp.store(true, Ordering::Relaxed);
        s.qp.tick();
        assert_eq!(run(&s, &good).0, REDIRECT);
        // Only the forwarded frames were counted.
        assert_eq!(s.qp.counts(3).0, 4);
    }

    /// Its last three words XOR to 0, so its slot is the one of the IPv4 address in its
    /// first word: only the family tells the two apart.
    const DST6: std::net::Ipv6Addr = std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 9, 0, 9, 0, 0);

    /// Ethernet + IPv6 (UDP, 18 bytes of payload) from 2001:db8::2.
    fn frame6(dst_mac: [u8; 6], hop: u8) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst_mac);
        f.extend_from_slice(&[0x02, 0, 0, 0, 0xaa, 0x01]);
        f.extend_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 26, 17, hop]);
        f.extend_from_slice(&std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).octets());
        f.extend_from_slice(&DST6.octets());
        f.extend_from_slice(&[0x03, 0xe8, 0x07, 0xd0, 0, 26, 0, 0]);
        f.extend((0..18).map(|i| i as u8));
        f
    }

    #[test]
    fn an_ipv6_flow_is_forwarded_with_the_hop_limit_decremented() {
        let Some(s) = setup() else { return };
        let f = frame6(IN_MAC, 64);
        assert_eq!(run(&s, &f), (PASS, f.clone()));
        s.qp.publish(3, 10);
        s.qp.offer(&FastFlow {
            dst: DST6.into(),
            ..flow(10)
        });
        let (rc, out) = run(&s, &f);
        assert_eq!(rc, REDIRECT);
        let mut want = f.clone();
        want[..6].copy_from_slice(&NBR);
        want[6..12].copy_from_slice(&OUT_MAC);
        want[14 + 7] = 63;
        assert_eq!(out, want);
        // An IPv4 frame to the address in its first word looks up the same slot and
        // matches every IPv4 field of the entry, but is another flow.
        let mut v4 = frame(IN_MAC, 64);
        v4[30..34].copy_from_slice(&DST6.octets()[..4]);
        refill_checksum(&mut v4);
        let w = |i: usize| u32::from_ne_bytes(v4[i..i + 4].try_into().unwrap());
        assert_eq!(
            slot(
                LO,
                [w(30), 0, 0, 0],
                w(0),
                u32::from(u16::from_ne_bytes([v4[4], v4[5]]))
            ),
            slot(
                LO,
                dst_words(DST6.into()).0,
                w(0),
                u32::from(u16::from_ne_bytes([v4[4], v4[5]]))
            ),
        );
        assert_eq!(run(&s, &v4).0, PASS, "families never match each other");
        // What the full path must see.
        let good = f;
        let mut cases: Vec<(&str, Vec<u8>)> = vec![("hop limit 1", frame6(IN_MAC, 1))];
        let mut f = good.clone();
        f[14 + 6] = 0; // hop-by-hop options
        cases.push(("extension header", f));
        let mut f = good.clone();
        f[22..24].copy_from_slice(&[0xfe, 0x80]);
        cases.push(("link-local source", f));
        let mut f = good.clone();
        f[22] = 0xff;
        cases.push(("multicast source", f));
        let mut f = good.clone();
        f[22..38].copy_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        cases.push(("loopback source", f));
        let mut f = good.clone();
        f[19] = 200; // payload length beyond the frame
        cases.push(("length", f));
        cases.push(("truncated", good[..50].to_vec()));
        let mut f = good.clone();
        f[14] = 0x40;
        cases.push(("version", f));
        for (what, f) in &cases {
            assert_eq!(run(&s, f), (PASS, f.clone()), "{what}");
        }
        let mut small = FastFlow {
            dst: DST6.into(),
            ..flow(11)
        };
        small.mtu = 60;
        s.qp.publish(3, 11);
        s.qp.offer(&small);
        assert_eq!(run(&s, &good).0, PASS, "over the MTU (66 bytes of packet)");
        assert_eq!(s.qp.counts(3).0, 1);
    }

    #[test]
    fn the_slot_hash_spreads_destinations() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000u32 {
            let dst = u32::from_ne_bytes(Ipv4Addr::from(0xc633_6400 + i).octets());
            seen.insert(slot(5, [dst, 0, 0, 0], 0x0000_0002, 0x0100));
        }
        assert!(seen.len() > 950, "{} distinct slots of 1000", seen.len());
        assert!(seen.iter().all(|&s| s < SLOTS));
    }
}
