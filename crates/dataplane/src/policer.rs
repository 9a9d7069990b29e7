//! Per-VR ingress policers: packets/s and bits/s, applied at demux.
//!
//! Why at demux: it is the cheapest place to drop (DESIGN.md, "drop early") — a policed
//! packet costs the receive burst and the demux lookup, never an ingress-ring slot or a
//! forwarding pass — and the drop is charged to the VR as `vr-policed`.
//!
//! Why GCRA (the virtual-scheduling form of a token bucket) on shared atomics: a VR's
//! traffic may be received by any worker (one queue of every port each), so per-worker
//! buckets would have to split the rate between workers and get it wrong whenever a VR's
//! traffic lands on one queue. A GCRA meter is one number, the *theoretical arrival time*
//! (TAT): a packet conforms if, after adding its cost to `max(TAT, now)`, the TAT is no more
//! than the burst tolerance ahead of now. So a whole burst of one VR is decided with plain
//! arithmetic and committed with one compare-and-swap, retried only if another worker
//! policed the same VR at the same moment — one atomic per (VR, burst) for VRs that have a
//! policer, none for those that do not. The two meters are chained: a packet must conform
//! to the packet meter and then to the bit meter (a packet the bit meter refuses has used a
//! packet token, as with chained policers anywhere).
//!
//! Units: time in ticks of 1/256 ns (wrapping; compared by signed difference, so a meter
//! idle for a year still compares right); a packet costs `256e9 / pps` ticks; a byte costs
//! `256e9 × 8 / bps` ticks, kept with 8 more fractional bits (0.02 % at 400 Gbit/s). The
//! burst tolerance is [`BURST_NS`] of the rate (at least one packet, or one largest frame).

use core::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::pool::MAX_FRAME;
use crate::sched::before;
use crate::vector::VECTOR;

/// Burst tolerance: this much of the rate may arrive back to back.
pub(crate) const BURST_NS: u64 = 10_000_000;

const TICKS_PER_NS: u64 = 256;

#[derive(Debug, Default)]
struct Meter {
    /// Ticks per unit (packet; or byte × 256), 0 = off.
    t: AtomicU64,
    /// Burst tolerance in ticks.
    tau: AtomicU64,
    /// Theoretical arrival time, ticks.
    tat: CachePadded<AtomicU64>,
}

impl Meter {
    fn set(&self, t: u64, tau: u64) {
        self.t.store(t, Ordering::Relaxed);
        self.tau.store(tau, Ordering::Relaxed);
    }

    /// Decide the packets of `v` not yet refused (`refused` bits clear), in order, and set
    /// the bit of each one that does not conform. `cost(i)` is packet `i`'s cost in ticks.
    fn police(&self, now: u64, n: usize, refused: &mut [u64; 4], cost: impl Fn(usize) -> u64) {
        let t = self.t.load(Ordering::Relaxed);
        if t == 0 {
            return;
        }
        let tau = self.tau.load(Ordering::Relaxed);
        let entry = *refused;
        let mut tat0 = self.tat.load(Ordering::Relaxed);
        loop {
            *refused = entry;
            let mut tat = tat0;
            for i in 0..n {
                if refused[i / 64] >> (i % 64) & 1 != 0 {
                    continue;
                }
                let base = if before(tat, now) { now } else { tat };
                let next = base.wrapping_add(cost(i));
                if next.wrapping_sub(now) <= tau {
                    tat = next;
                } else {
                    refused[i / 64] |= 1 << (i % 64);
                }
            }
            if tat == tat0 {
                return;
            }
            // Relaxed: the TAT orders nothing else; only its own value matters.
            match self
                .tat
                .compare_exchange_weak(tat0, tat, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(cur) => tat0 = cur,
            }
        }
    }
}

/// A VR's ingress policer (both meters off until configured).
#[derive(Debug, Default)]
pub(crate) struct Policer {
    pkt: Meter,
    bit: Meter,
}

impl Policer {
    /// Set the limits (`None` = no limit of that kind). Takes effect with the next burst.
    pub(crate) fn set(&self, pps: Option<u64>, bps: Option<u64>) {
        match pps {
            Some(r) if r > 0 => {
                let t = (256_000_000_000 / r).max(1);
                let burst = (r.saturating_mul(BURST_NS) / 1_000_000_000).max(1);
                self.pkt.set(t, t.saturating_mul(burst));
            }
            _ => self.pkt.set(0, 0),
        }
        match bps {
            Some(r) if r > 0 => {
                let tb = ((256_000_000_000u128 * 8 * 256) / u128::from(r)).max(1);
                let tb = u64::try_from(tb).unwrap_or(u64::MAX);
                let frame_ticks = byte_ticks(tb, MAX_FRAME);
                let tau = (BURST_NS * TICKS_PER_NS).max(frame_ticks);
                self.bit.set(tb, tau);
            }
            _ => self.bit.set(0, 0),
        }
    }

    /// Whether either limit is set.
    #[inline(always)]
    pub(crate) fn active(&self) -> bool {
        self.pkt.t.load(Ordering::Relaxed) | self.bit.t.load(Ordering::Relaxed) != 0
    }

    /// Police `n` packets (at most [`VECTOR`]) arriving at `now_ns`, in order; `len(i)` is
    /// the `i`th one's length. Returns the bitmap of those refused (bit `i` of word `i / 64`).
    pub(crate) fn police(&self, now_ns: u64, n: usize, len: impl Fn(usize) -> usize) -> [u64; 4] {
        assert!(n <= VECTOR, "policing {n} packets at once");
        let now = now_ns.wrapping_mul(TICKS_PER_NS);
        let mut refused = [0u64; 4];
        let t = self.pkt.t.load(Ordering::Relaxed);
        self.pkt.police(now, n, &mut refused, |_| t);
        let tb = self.bit.t.load(Ordering::Relaxed);
        self.bit
            .police(now, n, &mut refused, |i| byte_ticks(tb, len(i)));
        refused
    }
}

/// Ticks of `len` bytes at `tb` (ticks per byte × 256).
#[inline(always)]
fn byte_ticks(tb: u64, len: usize) -> u64 {
    let x = (u128::from(tb) * len as u128) >> 8;
    u64::try_from(x).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Pool;
    use crate::vector::PktVec;

    /// Police a vector, freeing what is refused; returns (packets, bytes) refused.
    fn police_vec(p: &Policer, pool: &Pool, now: u64, v: &mut PktVec) -> (u64, u64) {
        let refused = p.police(now, v.len(), |i| usize::from(pool.meta(&v[i]).len));
        let (mut pkts, mut bytes) = (0, 0);
        let mut keep = PktVec::new();
        for (i, q) in v.drain(..).enumerate() {
            if refused[i / 64] >> (i % 64) & 1 != 0 {
                pkts += 1;
                bytes += u64::from(pool.meta(&q).len);
                pool.free(q);
            } else {
                keep.push(q);
            }
        }
        *v = keep;
        (pkts, bytes)
    }

    fn vec_of(pool: &Pool, n: usize, len: usize) -> PktVec {
        let mut v = PktVec::new();
        for _ in 0..n {
            v.push(pool.alloc_frame(&vec![0u8; len]).unwrap());
        }
        v
    }

    #[test]
    fn packet_rate_allows_the_burst_then_the_rate() {
        let pool = Pool::new(1024);
        let p = Policer::default();
        // 10,000 packets/s: a burst of 100 (10 ms), then one per 100 µs.
        p.set(Some(10_000), None);
        let t0 = 5_000_000_000;
        let mut v = vec_of(&pool, 256, 60);
        assert_eq!(police_vec(&p, &pool, t0, &mut v), (156, 156 * 60));
        assert_eq!(v.len(), 100);
        pool.free_all(&mut v);
        // 1 ms later: 10 more.
        let mut v = vec_of(&pool, 50, 60);
        assert_eq!(police_vec(&p, &pool, t0 + 1_000_000, &mut v).0, 40);
        pool.free_all(&mut v);
        // Over a second of steady offers, the rate.
        let mut admitted = 0;
        for ms in 2..1002u64 {
            let mut v = vec_of(&pool, 20, 60);
            police_vec(&p, &pool, t0 + ms * 1_000_000, &mut v);
            admitted += v.len();
            pool.free_all(&mut v);
        }
        assert_eq!(admitted, 10_000);
        assert_eq!(pool.available(), 1024);
    }

    #[test]
    fn bit_rate_counts_bytes_and_small_packets_pass_where_big_ones_do_not() {
        let pool = Pool::new(1024);
        let p = Policer::default();
        // 8 Mbit/s = 1 MB/s: 10 ms burst = 10,000 bytes.
        p.set(None, Some(8_000_000));
        let t0 = 1_000_000_000;
        let mut v = vec_of(&pool, 10, 1500);
        assert_eq!(
            police_vec(&p, &pool, t0, &mut v).0,
            4,
            "6 × 1500 fit in 10,000"
        );
        pool.free_all(&mut v);
        // 1,000 bytes left: a 1500-byte frame is refused, a 64-byte one still passes.
        let mut v = vec_of(&pool, 1, 1500);
        v.push(pool.alloc_frame(&[0u8; 64]).unwrap());
        assert_eq!(police_vec(&p, &pool, t0, &mut v), (1, 1500));
        assert_eq!(pool.meta(&v[0]).len, 64);
        pool.free_all(&mut v);
        // A second later, 1 MB more at most.
        let mut bytes = 0;
        for ms in 1..=1000u64 {
            let mut v = vec_of(&pool, 2, 1500);
            police_vec(&p, &pool, t0 + ms * 1_000_000, &mut v);
            bytes += v.len() * 1500;
            pool.free_all(&mut v);
        }
        assert!((990_000..=1_010_000).contains(&bytes), "{bytes}");
    }

    #[test]
    fn both_limits_and_off() {
        let pool = Pool::new(1024);
        let p = Policer::default();
        assert!(!p.active());
        let mut v = vec_of(&pool, 256, 1000);
        assert_eq!(police_vec(&p, &pool, 0, &mut v), (0, 0));
        pool.free_all(&mut v);
        // 1000 packets/s (burst 10) and 80 kbit/s (burst 1,000 bytes ⇒ at least one
        // largest frame): the bit meter binds.
        p.set(Some(1000), Some(80_000));
        assert!(p.active());
        let mut v = vec_of(&pool, 20, 500);
        police_vec(&p, &pool, 1 << 40, &mut v);
        assert!(v.len() < 10, "{}", v.len());
        pool.free_all(&mut v);
        p.set(None, None);
        assert!(!p.active());
    }
}
