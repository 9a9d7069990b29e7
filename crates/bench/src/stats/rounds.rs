//! A table of repeated measurements, one value per DUT per round, and the ratios between DUTs.
//!
//! The comparison a report states is the **median of per-round ratios** `a[r] / b[r]`: both
//! values of a round were measured close together (see [`super::Interleave`]), so whatever the
//! host did to both cancels. The ratio of the two medians is kept beside it; when the two
//! disagree much, the host changed speed during the run and the report should say so.

use serde::{Deserialize, Serialize};

use super::summary::{StatsError, Summary, per_round_ratios};

/// Values per DUT per round; a missing value (a failed or skipped trial) stays `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    names: Vec<String>,
    /// `values[dut][round]`.
    values: Vec<Vec<Option<f64>>>,
}

/// How DUT `a` compares to DUT `b` over the rounds both were measured in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatioSummary {
    /// `a / b` per round (rounds where either is missing are left out).
    pub per_round: Vec<f64>,
    /// Median, quartiles and extremes of `per_round`: `summary.median` is the figure to quote.
    pub summary: Summary,
    /// `median(a) / median(b)` over the same rounds.
    pub ratio_of_medians: f64,
}

impl Rounds {
    /// An empty table for DUTs `names` and `rounds` rounds.
    pub fn new(names: Vec<String>, rounds: usize) -> Self {
        let values = vec![vec![None; rounds]; names.len()];
        Self { names, values }
    }

    /// The DUTs' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Record DUT `dut`'s value in round `round`. Out-of-range indexes are ignored and reported
    /// as `false`.
    pub fn record(&mut self, round: usize, dut: usize, value: f64) -> bool {
        match self.values.get_mut(dut).and_then(|v| v.get_mut(round)) {
            Some(slot) => {
                *slot = Some(value);
                true
            }
            None => false,
        }
    }

    /// DUT `dut`'s recorded values, by round (missing rounds skipped).
    pub fn values(&self, dut: usize) -> Vec<f64> {
        self.values
            .get(dut)
            .map(|v| v.iter().flatten().copied().collect())
            .unwrap_or_default()
    }

    /// Median and spread of DUT `dut`'s values.
    pub fn summary(&self, dut: usize) -> Result<Summary, StatsError> {
        Summary::of(&self.values(dut))
    }

    /// DUT `a` relative to DUT `b`.
    pub fn ratio(&self, a: usize, b: usize) -> Result<RatioSummary, StatsError> {
        let empty = Vec::new();
        let (va, vb) = (
            self.values.get(a).unwrap_or(&empty),
            self.values.get(b).unwrap_or(&empty),
        );
        let (xa, xb): (Vec<f64>, Vec<f64>) = va
            .iter()
            .zip(vb)
            .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
            .unzip();
        let per_round = per_round_ratios(&xa, &xb)?;
        let summary = Summary::of(&per_round)?;
        let ratio_of_medians = Summary::of(&xa)?.median / Summary::of(&xb)?.median;
        Ok(RatioSummary {
            per_round,
            summary,
            ratio_of_medians,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_round_ratio_cancels_host_drift() {
        // The host slows down 2× over the run; A is always 1.5× B within a round.
        let mut t = Rounds::new(vec!["vrhost".into(), "kernel".into()], 4);
        for (r, speed) in [1.0, 0.8, 0.6, 0.5].into_iter().enumerate() {
            assert!(t.record(r, 0, 1.5e6 * speed));
            assert!(t.record(r, 1, 1.0e6 * speed));
        }
        let ratio = t.ratio(0, 1).unwrap();
        assert_eq!(ratio.per_round.len(), 4);
        assert!(ratio.per_round.iter().all(|x| (x - 1.5).abs() < 1e-12));
        assert!((ratio.summary.median - 1.5).abs() < 1e-12);
        assert_eq!(ratio.summary.spread(), Some(0.0));
        assert!((ratio.ratio_of_medians - 1.5).abs() < 1e-12);
        let s = t.summary(1).unwrap();
        assert_eq!((s.min, s.max, s.median), (0.5e6, 1.0e6, 0.7e6));
        assert_eq!(t.names()[1], "kernel");
    }

    #[test]
    fn missing_rounds_are_left_out() {
        let mut t = Rounds::new(vec!["a".into(), "b".into()], 3);
        t.record(0, 0, 2.0);
        t.record(0, 1, 1.0);
        t.record(1, 0, 9.0); // b failed in round 1
        t.record(2, 0, 3.0);
        t.record(2, 1, 1.0);
        assert!(!t.record(3, 0, 1.0) && !t.record(0, 2, 1.0));
        let r = t.ratio(0, 1).unwrap();
        assert_eq!(r.per_round, vec![2.0, 3.0]);
        assert_eq!(r.summary.median, 2.5);
        assert_eq!(r.ratio_of_medians, 2.5);
        assert_eq!(t.values(0), vec![2.0, 9.0, 3.0]);
        assert_eq!(
            Rounds::new(vec!["a".into()], 2).summary(0),
            Err(StatsError::Empty)
        );
    }
}
