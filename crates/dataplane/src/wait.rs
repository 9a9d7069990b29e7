//! How long packets wait in a VR's ingress ring: a histogram per VR per worker.
//!
//! Why: under pressure a VR with a short backlog is held back so that it runs fuller vectors
//! (`crate::deferral`), which trades its packets' queueing delay for throughput. The operator
//! bounds that trade (`Dataplane::set_max_deferral`), but the bound is turned into polls at
//! the poll length a worker measured, so it is an estimate: this shows the wait itself.
//!
//! What is measured: a sample of one packet per round trip of the ring's wait probe
//! (`crate::ring`'s module doc), about one per vector a VR runs, from the poll in which
//! demux published it to the poll in which its VR took it, on the data plane's clock. Both
//! ends are read at the start of their polls, so a wait is known to within a poll's length,
//! and a packet taken in the poll it came in counts as 0. When a VR's runs empty its ring,
//! the marked packet is the first to come after the last run: the oldest of the next
//! vector, the one that waited longest. So the histogram leans to the long waits, the ones
//! a bound is about.
//!
//! Buckets: under 1,024 ns, then four per power of two up to 2^27 ns (134 ms, above the
//! longest deferral allowed), then one for the rest: a quantile read from them is within
//! 25 % (HdrHistogram's layout with two significant bits, as counters a worker adds to
//! without a lock and any thread reads). The per-worker blocks are summed on read like the
//! other counters; the largest wait is kept exactly.

use core::time::Duration;

use crate::counters::Counter;

/// log2 of the first bucket's upper bound (1,024 ns).
const FIRST_SHIFT: u32 = 10;
/// log2 of the bound above which every wait shares the last bucket (2^27 ns, 134 ms).
const LAST_SHIFT: u32 = 27;
/// Buckets per power of two.
const SUB: usize = 4;
/// Number of buckets: the first, four per power of two in between, the last.
pub const N_WAIT_BUCKETS: usize = 2 + (LAST_SHIFT - FIRST_SHIFT) as usize * SUB;

/// The bucket a wait of `ns` falls in.
#[inline]
pub fn bucket(ns: u64) -> usize {
    if ns < 1 << FIRST_SHIFT {
        return 0;
    }
    let e = 63 - ns.leading_zeros();
    if e >= LAST_SHIFT {
        return N_WAIT_BUCKETS - 1;
    }
    let sub = (ns >> (e - 2)) as usize & (SUB - 1);
    1 + (e - FIRST_SHIFT) as usize * SUB + sub
}

/// The waits bucket `i` holds: `[lower, upper)` in ns (`upper` is `u64::MAX` for the last).
pub fn bounds(i: usize) -> (u64, u64) {
    match i {
        0 => (0, 1 << FIRST_SHIFT),
        _ if i >= N_WAIT_BUCKETS - 1 => (1 << LAST_SHIFT, u64::MAX),
        _ => {
            let e = FIRST_SHIFT + ((i - 1) / SUB) as u32;
            let sub = ((i - 1) % SUB) as u64;
            ((4 + sub) << (e - 2), (5 + sub) << (e - 2))
        }
    }
}

/// One worker's wait histogram for one VR (single writer, see `crate::counters`).
///
/// `repr(C)`, sum and longest first: they are written with every sample, and
/// `VrCounters` puts them on the line its vector counters share.
#[derive(Debug)]
#[repr(C)]
pub struct WaitCounters {
    pub(crate) sum_ns: Counter,
    pub(crate) max_ns: Counter,
    buckets: [Counter; N_WAIT_BUCKETS],
}

impl Default for WaitCounters {
    fn default() -> Self {
        WaitCounters {
            buckets: core::array::from_fn(|_| Counter::default()),
            sum_ns: Counter::default(),
            max_ns: Counter::default(),
        }
    }
}

impl WaitCounters {
    /// Count one packet's wait. Only the owning worker may call this.
    #[inline]
    pub fn record(&self, ns: u64) {
        self.buckets[bucket(ns)].add(1);
        self.sum_ns.add(ns);
        if ns > self.max_ns.get() {
            self.max_ns.set(ns);
        }
    }
}

/// Summed snapshot of [`WaitCounters`]: what readers get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitStats {
    /// Waits per bucket (see [`bounds`]).
    pub buckets: [u64; N_WAIT_BUCKETS],
    /// Sum of the waits, in ns.
    pub sum_ns: u64,
    /// The longest wait, in ns (see [`WaitStats::since`] for a difference).
    pub max_ns: u64,
}

impl Default for WaitStats {
    fn default() -> Self {
        WaitStats {
            buckets: [0; N_WAIT_BUCKETS],
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

impl WaitStats {
    /// Add one worker's block.
    pub(crate) fn add(&mut self, c: &WaitCounters) {
        for (a, b) in self.buckets.iter_mut().zip(&c.buckets) {
            *a += b.get();
        }
        self.sum_ns += c.sum_ns.get();
        self.max_ns = self.max_ns.max(c.max_ns.get());
    }

    /// Add another snapshot (another VR's, for a total over VRs).
    pub fn merge(&mut self, o: &WaitStats) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.sum_ns += o.sum_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// Waits sampled.
    pub fn samples(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Mean wait, or `None` without samples.
    pub fn mean(&self) -> Option<Duration> {
        let n = self.samples();
        (n > 0).then(|| Duration::from_nanos(self.sum_ns / n))
    }

    /// The wait that a fraction `q` (0..=1) of the samples did not exceed, as the upper
    /// bound of its bucket (at most the longest wait): an overestimate by at most 25 %. `None`
    /// without samples.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.samples();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let upper = bounds(i).1.saturating_sub(1);
                return Some(Duration::from_nanos(upper.min(self.max_ns)));
            }
        }
        unreachable!("rank {rank} is at most the {n} samples")
    }

    /// Samples that surely waited `d` or longer: those in the buckets that start at `d` or
    /// above. (A bucket that holds `d` is left out, so this undercounts by at most that
    /// bucket, a quarter of a power of two wide.) What a bound on the wait is checked with.
    pub fn at_least(&self, d: Duration) -> u64 {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        (self.buckets.iter().enumerate())
            .filter(|(i, _)| bounds(*i).0 >= ns)
            .map(|(_, c)| c)
            .sum()
    }

    /// The waits counted after `earlier` (a snapshot of the same counters). The longest
    /// wait is not kept per span: it is the all-time one, capped by the upper bound of the
    /// span's highest nonempty bucket.
    pub fn since(&self, earlier: &WaitStats) -> WaitStats {
        let mut d = WaitStats {
            buckets: core::array::from_fn(|i| self.buckets[i] - earlier.buckets[i]),
            sum_ns: self.sum_ns - earlier.sum_ns,
            max_ns: 0,
        };
        if let Some(top) = d.buckets.iter().rposition(|&c| c > 0) {
            d.max_ns = self.max_ns.min(bounds(top).1 - 1);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_waits_in_quarters_of_each_power_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1023), 0);
        assert_eq!(bucket(1024), 1);
        assert_eq!(bucket(1279), 1);
        assert_eq!(bucket(1280), 2);
        assert_eq!(bucket(2047), 4);
        assert_eq!(bucket(2048), 5);
        assert_eq!(bucket((1 << 27) - 1), N_WAIT_BUCKETS - 2);
        assert_eq!(bucket(1 << 27), N_WAIT_BUCKETS - 1);
        assert_eq!(bucket(u64::MAX), N_WAIT_BUCKETS - 1);
        // Each bucket's bounds hold exactly the waits that fall in it, edge to edge.
        let mut next = 0;
        for i in 0..N_WAIT_BUCKETS {
            let (lo, hi) = bounds(i);
            assert_eq!(lo, next, "bucket {i} starts where the one before ended");
            assert_eq!(bucket(lo), i);
            assert_eq!(bucket(hi - 1), i);
            // Within a quarter of a power of two (a fifth of the upper bound).
            if i > 0 && i < N_WAIT_BUCKETS - 1 {
                assert!((hi - lo) * 4 <= lo, "bucket {i}: {lo}..{hi}");
            }
            next = hi;
        }
        assert_eq!(next, u64::MAX);
    }

    #[test]
    fn quantiles_are_bucket_bounds_capped_by_the_longest_wait() {
        let c = WaitCounters::default();
        let mut s = WaitStats::default();
        assert_eq!((s.quantile(0.5), s.mean()), (None, None));
        // 90 waits of 0, 9 of 300 µs, one of 9 ms.
        for _ in 0..90 {
            c.record(0);
        }
        for _ in 0..9 {
            c.record(300_000);
        }
        c.record(9_000_000);
        s.add(&c);
        assert_eq!(s.samples(), 100);
        assert_eq!(s.max_ns, 9_000_000);
        assert_eq!(s.mean(), Some(Duration::from_nanos(117_000)));
        // Half the waits were under the first bucket's bound.
        assert_eq!(s.quantile(0.5), Some(Duration::from_nanos(1_023)));
        // 300 µs lies in [262,144, 327,680).
        assert_eq!(s.quantile(0.99), Some(Duration::from_nanos(327_679)));
        assert_eq!(s.quantile(1.0), Some(Duration::from_nanos(9_000_000)));
        // Waits surely at least a bound: 300 µs's bucket starts at 262,144 ns.
        assert_eq!(s.at_least(Duration::from_micros(200)), 10);
        assert_eq!(s.at_least(Duration::from_nanos(262_144)), 10);
        assert_eq!(
            s.at_least(Duration::from_nanos(262_145)),
            1,
            "its bucket is left out"
        );
        assert_eq!(s.at_least(Duration::from_millis(9)), 0, "as is 9 ms's");
        assert_eq!(s.at_least(Duration::ZERO), 100);
        assert_eq!(s.at_least(Duration::MAX), 0);
    }

    #[test]
    fn a_span_counts_only_its_own_waits() {
        let c = WaitCounters::default();
        c.record(50_000_000);
        let mut before = WaitStats::default();
        before.add(&c);
        c.record(2_000);
        c.record(3_000);
        let mut after = WaitStats::default();
        after.add(&c);
        let d = after.since(&before);
        assert_eq!(d.samples(), 2);
        assert_eq!(d.sum_ns, 5_000);
        // The all-time 50 ms is not this span's: capped at 3,000's bucket, [2,560, 3,072).
        assert_eq!(d.max_ns, 3_071);
        assert_eq!(WaitStats::default().since(&WaitStats::default()).max_ns, 0);
        // Two workers' blocks: counts add, the longest is the longer.
        let other = WaitCounters::default();
        other.record(70_000_000);
        after.add(&other);
        assert_eq!((after.samples(), after.max_ns), (4, 70_000_000));
    }
}
