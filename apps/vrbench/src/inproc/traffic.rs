//! Generator and sink as port backends that run inside the worker's own poll.
//!
//! Why not a generator thread: the machines have two cores, and a worker is pinned to one. A
//! generator thread per worker would take the other core (or share the worker's), and its
//! frames would reach the worker through the cache of another core — the cost measured would
//! be the machine's core-to-core traffic, not the data plane. So the generator is a
//! [`RxQueue`] ([`GenRx`]) and the sink a [`TxQueue`] ([`SinkTx`]): the worker calls them like
//! any port, on its own core, and their cost shows up in the data plane's own `port-rx` and
//! `port-tx` node counters, where it can be read and subtracted.
//!
//! **Frames.** Each VR has a template (Ethernet to the VR's ingress MAC, IPv4 or IPv6, UDP,
//! zero payload, `--frame-size` less the 4-byte FCS). Per packet the generator copies the
//! template's headers into a slot, writes the destination from a precomputed sequence (each
//! entry also names the VR) and fixes the checksum incrementally from a precomputed partial
//! sum: no per-packet randomness, no full checksum.
//!
//! **Buffers.** The sink does not free forwarded frames to the pool (an atomic
//! compare-and-swap per packet on the worker's core); it hands them back to the generator
//! through a worker-local SPSC ring ([`vrhost_dataplane::ring`]; both ends live on the same
//! thread, so its atomics are plain loads and stores, and both ends are `Send` as `Worker`
//! requires). Invariant: a slot in a recycle ring holds a frame this generator wrote, where
//! the pool places it (`Pool::place`) and of the generated length, changed by forwarding at
//! most in its first 64 bytes (L2 rewrite, TTL, checksum); so only those bytes are
//! rewritten. The sink checks offset and length and frees anything else to the pool; slots
//! from the pool get the whole template. The ring is primed with `--rx-ring` slots, so the
//! frames in circulation are about what a NIC with that many rx descriptors would cycle
//! through.
//!
//! **Offered load** ([`Offer`], switchable between measurement windows through [`GenCtl`]).
//! Unlimited, every `rx_burst` is a full vector: the worker is offered exactly what it takes,
//! which is its peak. At a rate (`--rate`) the generator models a NIC's rx ring in virtual
//! time: packets arrive at the rate by the TSC, wait in a ring of `--rx-ring`
//! slots and overflow it as `rx-ring-full` drops, costing the worker nothing — as a real NIC
//! drops at its ring without the CPU seeing the frame. (A same-thread generator that actually
//! produced 3× the frames would charge the worker for building frames no NIC makes it build;
//! to push excess *through* the data plane, to be shed at the VR's ingress ring, give the
//! worker several generator queues with `--gen-queues`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use vrhost_dataplane::counters::Counter;
use vrhost_dataplane::port::{RxQueue, TxQueue};
use vrhost_dataplane::ring::{Consumer, Producer};
use vrhost_dataplane::{Meta, Pkt, PktVec, Pool};

use super::tsc;

/// Bytes of a recycled frame that forwarding may have changed, and that are rewritten.
pub(crate) const HDR: usize = 64;

/// One generator queue's counters (single writer: the worker that polls it).
#[derive(Debug, Default)]
pub(crate) struct GenStats {
    /// Packets offered: generated, plus modelled arrivals that overflowed the rx ring.
    pub(crate) offered: Counter,
    /// Packets handed to the data plane.
    pub(crate) generated: Counter,
    /// Modelled arrivals dropped because the rx ring was full (`--rate` only).
    pub(crate) ring_full: Counter,
    /// Packets not generated because the pool was empty.
    pub(crate) no_buffer: Counter,
}

/// One worker's sink counters for one port.
#[derive(Debug, Default)]
pub(crate) struct SinkStats {
    /// Frames that reached the sink.
    pub(crate) packets: Counter,
    /// Their bytes (without FCS).
    pub(crate) bytes: Counter,
    /// Frames whose order was checked ([`OrderCheck`]).
    pub(crate) checked: Counter,
}

/// Checks, at the sinks, that each VR's frames leave in the order its generator queue made
/// them (with `--queue-per-vr`, each queue stamps a sequence number into the UDP payload).
/// Shared by the sinks of all workers: a VR's frames pass one worker at a time, and a move
/// between workers goes through a mutex, which orders one sink's stores before the next
/// one's loads.
#[derive(Debug)]
pub(crate) struct OrderCheck {
    /// Per VR: the last sequence number seen + 1 (0: none yet); a cache line each, so two
    /// workers' sinks never share one.
    last: Box<[Padded]>,
    /// Frames that arrived with a sequence number not above the last one seen (rare: the
    /// only write two sinks may share).
    pub(crate) reordered: AtomicU64,
}

/// An atomic alone on its cache lines (two, against the adjacent-line prefetcher).
#[derive(Debug)]
#[repr(align(128))]
struct Padded(AtomicU64);

/// Where the stamp sits: the first bytes of the UDP payload (IPv4).
pub(crate) const STAMP_AT: usize = 14 + 20 + 8;

impl OrderCheck {
    pub(crate) fn new(vrs: usize) -> Arc<OrderCheck> {
        Arc::new(OrderCheck {
            last: (0..vrs).map(|_| Padded(AtomicU64::new(0))).collect(),
            reordered: AtomicU64::new(0),
        })
    }

    fn see(&self, frame: &[u8]) {
        // The egress VIF's MAC (02:76:72:01:hi:lo) names the VR.
        let vr = usize::from(u16::from_be_bytes([frame[10], frame[11]]));
        let seq = u64::from(u32::from_be_bytes(
            frame[STAMP_AT..STAMP_AT + 4].try_into().expect("4 bytes"),
        ));
        let Some(Padded(last)) = self.last.get(vr) else {
            return;
        };
        let prev = last.load(Ordering::Relaxed);
        if prev != 0 && seq < prev {
            self.reordered.fetch_add(1, Ordering::Relaxed);
        }
        last.store(seq + 1, Ordering::Relaxed);
    }
}

/// One IPv4 destination of the sequence: the address and the index of the VR's template.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dst4 {
    pub(crate) addr: u32,
    pub(crate) vr: u32,
}

/// One IPv6 destination of the sequence.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dst6 {
    pub(crate) addr: [u8; 16],
    pub(crate) vr: u32,
}

/// A worker's destination sequence, cycled through (length a power of two).
#[derive(Debug)]
pub(crate) enum Seq {
    V4(Box<[Dst4]>),
    V6(Box<[Dst6]>),
}

impl Seq {
    pub(crate) fn len(&self) -> usize {
        match self {
            Seq::V4(s) => s.len(),
            Seq::V6(s) => s.len(),
        }
    }
}

/// One VR's frame: bytes with a zero destination address and zero checksum, and the
/// one's-complement sum of everything the checksum covers except the destination.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub(crate) bytes: Box<[u8]>,
    /// The first [`HDR`] bytes (zero-padded).
    pub(crate) head: [u8; HDR],
    pub(crate) partial: u32,
}

impl Template {
    pub(crate) fn new(bytes: Vec<u8>, partial: u32) -> Template {
        let mut head = [0; HDR];
        let n = bytes.len().min(HDR);
        head[..n].copy_from_slice(&bytes[..n]);
        Template {
            bytes: bytes.into(),
            head,
            partial,
        }
    }
}

/// What a worker's generator queues offer, set from outside between (or during) windows and
/// read by each queue once per burst: relaxed loads of a line nothing else writes.
///
/// The second word counts [`GenCtl::restart`]s: each measurement window restarts the offer,
/// so the modelled ring starts empty and arrivals count from the window's first poll. Without
/// it an unchanged rate carried over from the last window would "arrive" for all the time the
/// workers were parked in between (seconds, in `vrbench fair app`), overflow the ring at once
/// and be counted as offered and lost in the next window.
#[derive(Debug)]
pub(crate) struct GenCtl(AtomicU64, AtomicU64);

/// An offered load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Offer {
    /// Nothing: the worker idles.
    Off,
    /// A full vector every poll.
    Unlimited,
    /// Packets per second for the worker (split evenly over its queues), through the modelled
    /// NIC ring.
    Rate(f64),
}

impl GenCtl {
    pub(crate) fn new(o: Offer) -> Arc<GenCtl> {
        let c = Arc::new(GenCtl(AtomicU64::new(0), AtomicU64::new(0)));
        c.set(o);
        c
    }

    pub(crate) fn set(&self, o: Offer) {
        let v = match o {
            Offer::Off => 0,
            Offer::Unlimited => u64::MAX,
            // A positive finite f64's bits are neither 0 nor all ones.
            Offer::Rate(r) => r.to_bits(),
        };
        self.0.store(v, Ordering::Relaxed);
    }

    /// Set `o` as a fresh start, even if it is the offer already set (see the type's doc).
    pub(crate) fn restart(&self, o: Offer) {
        self.set(o);
        self.1.fetch_add(1, Ordering::Relaxed);
    }

    fn decode(bits: u64) -> Offer {
        match bits {
            0 => Offer::Off,
            u64::MAX => Offer::Unlimited,
            b => Offer::Rate(f64::from_bits(b)),
        }
    }
}

/// Virtual-time NIC rx ring (see the module doc).
#[derive(Debug)]
struct Pace {
    per_cycle: f64,
    ring: u64,
    backlog: u64,
    frac: f64,
    last: u64,
}

/// The generator: a receive queue that makes its frames.
pub(crate) struct GenRx {
    stats: Arc<GenStats>,
    templates: Box<[Template]>,
    seq: Arc<Seq>,
    pos: usize,
    len: usize,
    recycle: Consumer,
    ctl: Arc<GenCtl>,
    /// The control word last seen, and what it meant.
    seen: u64,
    /// The restart count last seen.
    seen_epoch: u64,
    offer: Offer,
    pace: Pace,
    /// Queues of this worker sharing its offered rate.
    share: f64,
    tsc_hz: f64,
    /// The next sequence number to stamp into each frame (IPv4 only), if stamping.
    stamp: Option<u32>,
}

impl core::fmt::Debug for GenRx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GenRx")
            .field("vrs", &self.templates.len())
            .field("seq", &self.seq.len())
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// How a generator queue is built.
#[derive(Debug)]
pub(crate) struct GenConfig {
    /// Templates of the VRs this worker owns (`Dst*::vr` indexes this).
    pub(crate) templates: Box<[Template]>,
    /// The destination sequence.
    pub(crate) seq: Arc<Seq>,
    /// Where in the sequence to start (queues of one worker start apart).
    pub(crate) start: usize,
    /// The worker's offered load.
    pub(crate) ctl: Arc<GenCtl>,
    /// Generator queues of the worker (its rate is split between them).
    pub(crate) queues: usize,
    /// TSC ticks per second.
    pub(crate) tsc_hz: f64,
    /// Modelled rx ring size, and slots primed into the recycle ring.
    pub(crate) rx_ring: usize,
    /// Stamp a sequence number into every frame (for [`OrderCheck`]; IPv4).
    pub(crate) stamp: bool,
}

impl GenRx {
    /// A generator fed back by `recycle`, primed with `rx_ring` slots from `pool` (fewer if
    /// the pool runs short).
    pub(crate) fn new(
        c: GenConfig,
        pool: &Pool,
        recycle: Consumer,
        prime: &mut Producer,
    ) -> (GenRx, Arc<GenStats>) {
        let len = c.templates[0].bytes.len();
        let stats = Arc::new(GenStats::default());
        let mut primed = PktVec::new();
        let mut left = c.rx_ring;
        while left > 0 {
            while !primed.is_full() && left > 0 {
                let Some(mut p) = pool.alloc() else {
                    left = 0;
                    break;
                };
                pool.set_frame(&mut p, &c.templates[0].bytes);
                primed.push(p);
                left -= 1;
            }
            prime.push_burst(&mut primed);
            // What the ring refused goes back to the pool.
            pool.free_all(&mut primed);
        }
        let pace = Pace {
            per_cycle: 0.0,
            ring: c.rx_ring as u64,
            backlog: 0,
            frac: 0.0,
            last: 0,
        };
        let g = GenRx {
            stats: stats.clone(),
            pos: c.start % c.seq.len(),
            templates: c.templates,
            seq: c.seq,
            len,
            recycle,
            seen: u64::MAX - 1,
            seen_epoch: 0,
            offer: Offer::Off,
            ctl: c.ctl,
            pace,
            share: c.queues as f64,
            tsc_hz: c.tsc_hz,
            stamp: c.stamp.then_some(0),
        };
        (g, stats)
    }

    /// How many packets to deliver now, counting offered load and ring overflow.
    #[inline]
    fn due(&mut self, want: usize) -> usize {
        let bits = self.ctl.0.load(Ordering::Relaxed);
        let epoch = self.ctl.1.load(Ordering::Relaxed);
        if bits != self.seen || epoch != self.seen_epoch {
            // A new offer: the modelled ring starts empty, arrivals from now on.
            self.seen = bits;
            self.seen_epoch = epoch;
            self.offer = GenCtl::decode(bits);
            let p = &mut self.pace;
            if let Offer::Rate(r) = self.offer {
                p.per_cycle = r / self.share / self.tsc_hz;
            }
            (p.backlog, p.frac, p.last) = (0, 0.0, tsc());
        }
        match self.offer {
            Offer::Off => 0,
            Offer::Unlimited => {
                self.stats.offered.add(want as u64);
                want
            }
            Offer::Rate(_) => {
                let p = &mut self.pace;
                let now = tsc();
                let arrived = now.wrapping_sub(p.last) as f64 * p.per_cycle + p.frac;
                p.last = now;
                let k = arrived as u64;
                p.frac = arrived - k as f64;
                self.stats.offered.add(k);
                p.backlog += k;
                if p.backlog > p.ring {
                    self.stats.ring_full.add(p.backlog - p.ring);
                    p.backlog = p.ring;
                }
                let n = (p.backlog as usize).min(want);
                p.backlog -= n as u64;
                n
            }
        }
    }
}

/// Write the next IPv4 frame of the sequence into `p` (`full`: the whole template; else only
/// the first [`HDR`] bytes, a fixed-size copy).
#[inline(always)]
fn write4(pool: &Pool, p: &mut Pkt, full: bool, t: &[Template], len: usize, d: Dst4) {
    let t = &t[d.vr as usize];
    let h = head(pool, p, full, t, len);
    h[14 + 16..14 + 20].copy_from_slice(&d.addr.to_be_bytes());
    let s = t.partial + (d.addr >> 16) + (d.addr & 0xffff);
    h[14 + 10..14 + 12].copy_from_slice(&(!fold(s)).to_be_bytes());
}

/// Write the next IPv6 frame of the sequence into `p`.
#[inline(always)]
fn write6(pool: &Pool, p: &mut Pkt, full: bool, t: &[Template], len: usize, d: &Dst6) {
    let t = &t[d.vr as usize];
    let h = head(pool, p, full, t, len);
    h[14 + 24..14 + 40].copy_from_slice(&d.addr);
    let mut s = t.partial;
    for w in d.addr.chunks_exact(2) {
        s += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    // UDP: a computed 0 is sent as all ones (RFC 8200 §8.1).
    let c = match !fold(s) {
        0 => 0xffff,
        c => c,
    };
    h[14 + 40 + 6..14 + 40 + 8].copy_from_slice(&c.to_be_bytes());
}

/// Reset the slot's metadata to a fresh frame of `len` bytes where the pool places it, copy
/// the template (all of it if `full`, else its first [`HDR`] bytes), and return those bytes.
#[inline(always)]
fn head<'a>(
    pool: &'a Pool,
    p: &'a mut Pkt,
    full: bool,
    t: &Template,
    len: usize,
) -> &'a mut [u8; HDR] {
    // A recycled slot's frame is where the pool placed it (the sink checked). Reading its
    // offset back costs fewer instructions than placing it again (11 per packet, callgrind,
    // session 36), though with 100 VRs the read misses L1 for most recycled slots.
    let at = if full {
        pool.place(p, len)
    } else {
        usize::from(pool.meta(p).off)
    };
    let (m, slot) = pool.slot_mut(p);
    *m = Meta {
        off: at as u16,
        len: len as u16,
        ..Meta::default()
    };
    if full {
        slot[at..at + len].copy_from_slice(&t.bytes[..len]);
    }
    let h: &mut [u8; HDR] = (&mut slot[at..at + HDR]).try_into().expect("HDR bytes");
    // Past a short frame's end this writes zeros into the slot's unused room: harmless.
    h.copy_from_slice(&t.head);
    h
}

/// Fold a 32-bit one's-complement sum to 16 bits.
#[inline(always)]
pub(crate) fn fold(mut s: u32) -> u16 {
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    s as u16
}

impl RxQueue for GenRx {
    fn rx_burst(&mut self, pool: &Pool, out: &mut PktVec, max: usize) -> usize {
        let want = max.min(out.remaining_capacity());
        let n = self.due(want);
        if n == 0 {
            return 0;
        }
        let start = out.len();
        self.recycle.pop_burst(out, n);
        let recycled = out.len() - start;
        while out.len() < start + n {
            match pool.alloc() {
                Some(p) => out.push(p),
                None => break,
            }
        }
        let got = out.len() - start;
        if got < n {
            self.stats.no_buffer.add((n - got) as u64);
        }
        let GenRx {
            templates,
            seq,
            pos,
            len,
            ..
        } = self;
        let fresh = out[start..].iter_mut().enumerate();
        match &**seq {
            Seq::V4(s) => {
                let mask = s.len() - 1;
                for (i, p) in fresh {
                    write4(pool, p, i >= recycled, templates, *len, s[*pos]);
                    *pos = (*pos + 1) & mask;
                }
            }
            Seq::V6(s) => {
                let mask = s.len() - 1;
                for (i, p) in fresh {
                    write6(pool, p, i >= recycled, templates, *len, &s[*pos]);
                    *pos = (*pos + 1) & mask;
                }
            }
        }
        if let Some(seq) = self.stamp.as_mut() {
            for p in out[start..].iter_mut() {
                pool.frame_mut(p)[STAMP_AT..STAMP_AT + 4].copy_from_slice(&seq.to_be_bytes());
                *seq = seq.wrapping_add(1);
            }
        }
        self.stats.generated.add(got as u64);
        got
    }
}

/// The sink: a transmit queue that counts frames and gives their slots back to the
/// generators.
pub(crate) struct SinkTx {
    stats: Arc<SinkStats>,
    /// Recycle rings of this worker's generator queues, fed in turn; empty = free to the pool.
    recycle: Vec<Producer>,
    next: usize,
    len: u16,
    order: Option<Arc<OrderCheck>>,
}

impl core::fmt::Debug for SinkTx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SinkTx")
            .field("recycle", &self.recycle.len())
            .finish_non_exhaustive()
    }
}

impl SinkTx {
    /// A sink returning slots through `recycle` (frames of `len` bytes only).
    pub(crate) fn new(recycle: Vec<Producer>, len: usize) -> (SinkTx, Arc<SinkStats>) {
        let stats = Arc::new(SinkStats::default());
        let s = SinkTx {
            stats: stats.clone(),
            recycle,
            next: 0,
            len: len as u16,
            order: None,
        };
        (s, stats)
    }

    /// Check the order of the frames that reach this sink.
    pub(crate) fn check_order(&mut self, o: Arc<OrderCheck>) {
        self.order = Some(o);
    }
}

impl TxQueue for SinkTx {
    fn tx_burst(&mut self, pool: &Pool, pkts: &mut PktVec) -> usize {
        let n = pkts.len();
        let mut bytes = 0u64;
        let mut ours = true;
        let len = usize::from(self.len);
        for p in pkts.iter() {
            let m = pool.meta(p);
            bytes += u64::from(m.len);
            ours &= m.len == self.len && usize::from(m.off) == pool.place(p, len);
        }
        if let Some(o) = &self.order {
            let mut k = 0;
            for p in pkts.iter() {
                let f = pool.frame(p);
                if f.len() >= STAMP_AT + 4 {
                    o.see(f);
                    k += 1;
                }
            }
            self.stats.checked.add(k);
        }
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(bytes);
        if ours && !self.recycle.is_empty() {
            let i = self.next;
            let k = self.recycle.len();
            self.next = (i + 1) % k;
            // Rings in turn, the next one if a ring is full: a generator queue the worker
            // does not poll (held back, or moved to another worker) stops taking slots, and
            // they must not all go back through the pool.
            for j in 0..k {
                self.recycle[(i + j) % k].push_burst(pkts);
                if pkts.is_empty() {
                    break;
                }
            }
        }
        // Not ours (an ICMP error, a resized frame), or every ring was full.
        pool.free_all(pkts);
        n
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use vrhost_dataplane::ring::ring;
    use vrhost_wire::{EthernetAddress, ipv4, ipv6, udp};

    use super::*;
    use crate::inproc::topo::{template4, template6};

    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

    /// A generator over `seq` with one template, and its recycle ring's producer.
    fn generator(
        pool: &Pool,
        t: Template,
        seq: Seq,
        offer: Offer,
        rx_ring: usize,
    ) -> (GenRx, Producer) {
        let (mut prod, cons) = ring(1024);
        let (g, _) = GenRx::new(
            GenConfig {
                templates: vec![t].into(),
                seq: Arc::new(seq),
                start: 0,
                ctl: GenCtl::new(offer),
                queues: 1,
                tsc_hz: 1e9,
                rx_ring,
                stamp: false,
            },
            pool,
            cons,
            &mut prod,
        );
        (g, prod)
    }

    #[test]
    fn ipv4_frames_carry_the_sequence_with_valid_checksums() {
        let _alone = crate::cores_alone();
        let pool = Pool::new(1024);
        let dsts = [0x0102_0304u32, 0xc633_6401, 0xffff_fffe, 0x0000_0001];
        let seq = Seq::V4(dsts.iter().map(|&addr| Dst4 { addr, vr: 0 }).collect());
        let (mut g, prod) = generator(&pool, template4(MAC, 60), seq, Offer::Unlimited, 6);
        let mut v = PktVec::new();
        // The first burst takes the six primed (whole-template) slots; the second gets the
        // same slots back through the sink, scribbled on, and rewrites only their headers.
        assert_eq!(g.rx_burst(&pool, &mut v, 6), 6);
        let first: Vec<Vec<u8>> = v.iter().map(|p| pool.frame(p).to_vec()).collect();
        let (mut sink, stats) = SinkTx::new(vec![prod], 60);
        for p in v.iter_mut() {
            pool.frame_mut(p)[0..34].fill(0xee); // what forwarding may scribble on
        }
        assert_eq!(sink.tx_burst(&pool, &mut v), 6);
        assert_eq!(stats.packets.get(), 6);
        assert!(v.is_empty());
        assert_eq!(g.rx_burst(&pool, &mut v, 6), 6);
        assert_eq!(
            pool.available(),
            1024 - 6,
            "recycled, not taken from the pool"
        );
        for (i, p) in v.iter().enumerate() {
            let f = pool.frame(p);
            assert_eq!(f.len(), 60);
            let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
            assert!(ip.verify_checksum(), "frame {i}");
            assert_eq!(ip.dst_addr(), Ipv4Addr::from_bits(dsts[(6 + i) % 4]));
            assert_eq!(ip.total_len(), 46);
            assert_eq!(&f[0..6], &MAC.0);
            assert_eq!(f[14 + 20..], first[(i + 2) % 4][14 + 20..]);
        }
        pool.free_all(&mut v);
    }

    #[test]
    fn ipv6_frames_have_valid_udp_checksums() {
        let _alone = crate::cores_alone();
        let pool = Pool::new(1024);
        let a: Ipv6Addr = "2001:db8:ff::9".parse().unwrap();
        let b: Ipv6Addr = "2a00:1:2:3:4:5:6:ffff".parse().unwrap();
        let seq = Seq::V6(
            [a, b]
                .iter()
                .map(|x| Dst6 {
                    addr: x.octets(),
                    vr: 0,
                })
                .collect(),
        );
        let (mut g, _prod) = generator(&pool, template6(MAC, 74), seq, Offer::Unlimited, 256);
        let mut v = PktVec::new();
        assert_eq!(g.rx_burst(&pool, &mut v, 2), 2);
        for (p, dst) in v.iter().zip([a, b]) {
            let f = pool.frame(p);
            let ip = ipv6::Packet::new_checked(&f[14..]).unwrap();
            assert_eq!(ip.dst_addr(), dst);
            let u = udp::Packet::new_checked(&f[54..]).unwrap();
            assert!(u.verify_checksum_v6(ip.src_addr(), dst));
        }
        pool.free_all(&mut v);
    }

    #[test]
    fn paced_generator_offers_the_rate_and_counts_overflow() {
        let _alone = crate::cores_alone();
        let pool = Pool::new(4096);
        let seq = Seq::V4(vec![Dst4 { addr: 1, vr: 0 }; 4].into());
        let hz = crate::inproc::tsc_hz(std::time::Duration::from_millis(20));
        // 1 M packets/s for 50 ms: 50,000 offered; the 256-slot ring overflows because
        // nothing polls in between.
        let (mut g, _prod) = generator(&pool, template4(MAC, 60), seq, Offer::Rate(1e6), 256);
        g.tsc_hz = hz;
        let mut v = PktVec::new();
        assert_eq!(g.rx_burst(&pool, &mut v, 256), 0, "nothing has arrived yet");
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(g.rx_burst(&pool, &mut v, 256), 256);
        let s = &g.stats;
        let offered = s.offered.get();
        assert!((45_000..80_000).contains(&offered), "{offered}");
        assert_eq!(s.ring_full.get(), offered - 256);
        pool.free_all(&mut v);
        // Switched off: nothing more, however long.
        g.ctl.set(Offer::Off);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(g.rx_burst(&pool, &mut v, 256), 0);
        assert_eq!(g.stats.offered.get(), offered);
    }

    #[test]
    fn a_restarted_offer_counts_nothing_from_before_the_restart() {
        let _alone = crate::cores_alone();
        let pool = Pool::new(4096);
        let seq = Seq::V4(vec![Dst4 { addr: 1, vr: 0 }; 4].into());
        let (mut g, _prod) = generator(&pool, template4(MAC, 60), seq, Offer::Rate(1e6), 256);
        g.tsc_hz = crate::inproc::tsc_hz(std::time::Duration::from_millis(20));
        let mut v = PktVec::new();
        assert_eq!(g.rx_burst(&pool, &mut v, 256), 0);
        // Parked for 50 ms between windows, then the same rate restarted: the time parked
        // is neither offered nor lost.
        std::thread::sleep(std::time::Duration::from_millis(50));
        g.ctl.restart(Offer::Rate(1e6));
        let n = g.rx_burst(&pool, &mut v, 256);
        assert!(
            n < 64,
            "{n} frames arrived in the instant after the restart"
        );
        assert_eq!(g.stats.ring_full.get(), 0);
        assert!(g.stats.offered.get() < 64, "{}", g.stats.offered.get());
        pool.free_all(&mut v);
    }
}
