//! The sink's latency histogram: log-linear buckets a BPF program can index without loops
//! or floating point, and the percentiles computed from them in user space.
//!
//! Buckets (like an HDR histogram with 128 sub-buckets per power of two): latencies below
//! 256 ns have a bucket per nanosecond; a latency `v ≥ 256` with `e = ⌊log₂ v⌋` falls in
//! bucket `256 + (e − 8)·128 + (v >> (e − 7)) − 128`, i.e. 128 buckets per doubling, each
//! 1/128 of its lower bound wide — every latency is known to within 0.8 %, better than the
//! "two significant digits" a report prints. Latencies are clamped to 2³⁶ − 1 ns (68.7 s):
//! [`BUCKETS`] = 3840 buckets, 30 KiB per stream.
//!
//! Why not the `hdrhistogram` crate's layout: its index needs a count-leading-zeros, which
//! eBPF lacks; the program finds `e` by a 6-step binary search instead (see `sink.rs`), and
//! [`bucket_of`] here is the same computation in Rust, tested against the program.
//!
//! A percentile is reported as the *upper* bound of the bucket it falls in (what
//! `hdrhistogram` calls the highest equivalent value), capped by the exact maximum: never
//! below the true value.

use vrhost_bench::latency::{LatencySummary, Percentile, STANDARD_PERCENTILES};

/// Latencies below this have a bucket per ns.
pub(crate) const LINEAR: u64 = 256;
/// Sub-buckets per doubling above [`LINEAR`] (log₂ = [`SUB_BITS`]).
pub(crate) const SUB_BITS: u32 = 7;
/// Largest latency told apart (ns); larger ones count as this.
pub(crate) const MAX_NS: u64 = (1 << 36) - 1;
/// Buckets per stream.
pub(crate) const BUCKETS: usize = 256 + (35 - 8 + 1) * 128;

/// The bucket of latency `v` ns (the program's computation, in Rust, for the tests).
#[cfg(test)]
pub(crate) fn bucket_of(v: u64) -> usize {
    let v = v.min(MAX_NS);
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let m = (v >> (e - SUB_BITS)) - (1 << SUB_BITS);
    (256 + (e - 8) * (1 << SUB_BITS)) as usize + m as usize
}

/// The latencies bucket `i` holds: `(lowest, highest)`.
pub(crate) fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < LINEAR {
        return (i, i);
    }
    let k = i - LINEAR;
    let e = 8 + k / (1 << SUB_BITS);
    let m = (1 << SUB_BITS) + k % (1 << SUB_BITS);
    let shift = e - u64::from(SUB_BITS);
    (m << shift, ((m + 1) << shift) - 1)
}

/// What the sink measured for one stream, ready to summarise.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Latencies {
    /// Frames per bucket.
    pub(crate) buckets: Vec<u64>,
    /// Exact minimum and maximum (ns), and the sum for the mean.
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) sum: u64,
}

impl Latencies {
    /// An empty histogram.
    pub(crate) fn new() -> Latencies {
        Latencies {
            buckets: vec![0; BUCKETS],
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Frames measured.
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Add another stream's latencies (for an aggregate over streams).
    pub(crate) fn merge(&mut self, o: &Latencies) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum += o.sum;
    }

    /// Record one latency (tests; the program records in the kernel).
    #[cfg(test)]
    pub(crate) fn record(&mut self, v: u64) {
        self.buckets[bucket_of(v)] += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v;
    }

    /// The latency at `percent` (0–100]: the upper bound of the bucket holding the frame of
    /// that rank, capped by the maximum.
    pub(crate) fn percentile(&self, percent: f64) -> u64 {
        let n = self.count();
        let rank = ((percent / 100.0 * n as f64).ceil() as u64).clamp(1, n.max(1));
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bounds(i).1.min(self.max).max(self.min);
            }
        }
        self.max
    }

    /// The summary `vrhost_bench` keeps with a trial (`None` if nothing was measured).
    pub(crate) fn summary(&self) -> Option<LatencySummary> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        Some(LatencySummary {
            samples: n,
            min_ns: self.min,
            mean_ns: self.sum as f64 / n as f64,
            max_ns: self.max,
            percentiles: STANDARD_PERCENTILES
                .iter()
                .map(|&percent| Percentile {
                    percent,
                    ns: self.percentile(percent),
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_latency_once_within_0_8_percent() {
        let _alone = crate::cores_alone();
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(255), 255);
        assert_eq!(bucket_of(256), 256);
        assert_eq!(bucket_of(257), 256);
        assert_eq!(bucket_of(258), 257);
        assert_eq!(bucket_of(MAX_NS), BUCKETS - 1);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        // Buckets tile the range: each starts right after the previous one ends.
        let mut next = 0;
        for i in 0..BUCKETS {
            let (lo, hi) = bounds(i);
            assert_eq!(lo, next, "bucket {i}");
            assert!(hi >= lo);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
            assert!((hi - lo) as f64 <= lo as f64 / 128.0, "bucket {i} too wide");
            next = hi + 1;
        }
        assert_eq!(next, MAX_NS + 1);
    }

    #[test]
    fn percentiles_of_a_uniform_distribution() {
        let _alone = crate::cores_alone();
        let mut l = Latencies::new();
        for v in 1..=10_000u64 {
            l.record(v * 100);
        }
        let s = l.summary().unwrap();
        assert_eq!((s.samples, s.min_ns, s.max_ns), (10_000, 100, 1_000_000));
        for (p, want) in [
            (50.0, 500_000.0),
            (90.0, 900_000.0),
            (99.0, 990_000.0),
            (99.9, 999_000.0),
        ] {
            let got = s.at(p).unwrap() as f64;
            assert!(got >= want && got <= want * 1.008, "p{p}: {got}");
        }
        assert!((s.mean_ns - 500_050.0).abs() < 1e-6);
        assert_eq!(Latencies::new().summary(), None);
    }
}
