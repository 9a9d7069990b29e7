//! Latency summaries: the few percentiles a report shows, kept with a trial.
//!
//! Why a summary and not the histogram: a run record keeps every raw trial, and an HDR histogram
//! per trial would make the JSON large and tie its format to one crate's serialization. What
//! readers compare (the p50, p90, p99, p99.9 and max, RFC 2544 §26.2's latency) fits in a
//! handful of numbers; the sink keeps the full histogram while the trial runs and the caller
//! summarises it here ([`LatencySummary::from_histogram`]). A CDF for plots can be drawn from
//! the histogram ([`crate::report::plot::LatencyCdf::from_histogram`]) or, when only the summary
//! survived, from its percentiles ([`crate::report::plot::LatencyCdf::from_summary`]).
//!
//! All latencies are in nanoseconds.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The percentiles [`LatencySummary::from_histogram`] records, in percent.
pub const STANDARD_PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

/// One percentile of a latency distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// Percent of frames at or below `ns`, e.g. `99.9`.
    pub percent: f64,
    /// Latency in nanoseconds.
    pub ns: u64,
}

/// A latency distribution reduced to what reports show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Frames whose latency was measured.
    pub samples: u64,
    /// Smallest latency seen (ns).
    pub min_ns: u64,
    /// Mean latency (ns).
    pub mean_ns: f64,
    /// Largest latency seen (ns).
    pub max_ns: u64,
    /// Percentiles in increasing order of `percent`.
    pub percentiles: Vec<Percentile>,
}

impl LatencySummary {
    /// Summarise an HDR histogram of latencies in nanoseconds at [`STANDARD_PERCENTILES`].
    /// Returns `None` for an empty histogram (no frame carried a timestamp back).
    pub fn from_histogram(h: &Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        Some(Self {
            samples: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            max_ns: h.max(),
            percentiles: STANDARD_PERCENTILES
                .iter()
                .map(|&percent| Percentile {
                    percent,
                    ns: h.value_at_quantile(percent / 100.0),
                })
                .collect(),
        })
    }

    /// The latency at `percent` if this summary holds it (exact match on the percent).
    pub fn at(&self, percent: f64) -> Option<u64> {
        self.percentiles
            .iter()
            .find(|p| p.percent == percent)
            .map(|p| p.ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_uniform_histogram() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3).unwrap();
        for ns in 1..=1000u64 {
            h.record(ns * 1000).unwrap();
        }
        let s = LatencySummary::from_histogram(&h).unwrap();
        assert_eq!(s.samples, 1000);
        assert_eq!(s.min_ns, h.min());
        // 3 significant digits: values are exact to within 0.1 %.
        let p50 = s.at(50.0).unwrap() as f64;
        assert!((p50 - 500_000.0).abs() <= 500.0, "p50 {p50}");
        let p99 = s.at(99.0).unwrap() as f64;
        assert!((p99 - 990_000.0).abs() <= 990.0, "p99 {p99}");
        assert!(
            s.max_ns >= 1_000_000 && s.max_ns <= 1_001_000,
            "max {}",
            s.max_ns
        );
        assert!(s.at(42.0).is_none());
    }

    #[test]
    fn empty_histogram_has_no_summary() {
        let h = Histogram::<u64>::new(3).unwrap();
        assert!(LatencySummary::from_histogram(&h).is_none());
    }
}
