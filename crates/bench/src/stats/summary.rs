//! Order statistics of a handful of repeated measurements.
//!
//! Medians and quantiles, not means and standard deviations: with 3–10 repeats on a shared host
//! one disturbed trial moves a mean far and a median not at all, and nothing here is normally
//! distributed. Quantiles interpolate linearly between order statistics (the common "type 7"
//! definition, as numpy's default), so the median of an even count is the mean of the middle two.

use serde::{Deserialize, Serialize};

/// Input a statistic cannot be computed from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// No values.
    #[error("no values to summarise")]
    Empty,
    /// A value is NaN or infinite.
    #[error("value {index} is {value}: values must be finite")]
    NotFinite { index: usize, value: f64 },
    /// A quantile outside [0, 1].
    #[error("quantile {q}: must be in [0, 1]")]
    BadQuantile { q: f64 },
    /// Two series of different lengths.
    #[error(
        "per-round ratio of {a} values to {b} values: the series must have one value per round each"
    )]
    LengthMismatch { a: usize, b: usize },
    /// A zero denominator.
    #[error("round {round}: denominator is zero")]
    ZeroDenominator { round: usize },
}

fn sorted(values: &[f64]) -> Result<Vec<f64>, StatsError> {
    if values.is_empty() {
        return Err(StatsError::Empty);
    }
    if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(StatsError::NotFinite { index, value });
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Ok(v)
}

fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    if i + 1 < v.len() {
        v[i] + frac * (v[i + 1] - v[i])
    } else {
        v[i]
    }
}

/// The `q` quantile (0 = min, 0.5 = median, 1 = max), linear interpolation.
pub fn quantile(values: &[f64], q: f64) -> Result<f64, StatsError> {
    if !(0.0..=1.0).contains(&q) {
        return Err(StatsError::BadQuantile { q });
    }
    Ok(quantile_sorted(&sorted(values)?, q))
}

/// The median.
pub fn median(values: &[f64]) -> Result<f64, StatsError> {
    quantile(values, 0.5)
}

/// `a[i] / b[i]` for every round `i`.
pub fn per_round_ratios(a: &[f64], b: &[f64]) -> Result<Vec<f64>, StatsError> {
    if a.len() != b.len() {
        return Err(StatsError::LengthMismatch {
            a: a.len(),
            b: b.len(),
        });
    }
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(round, (x, y))| {
            if *y == 0.0 {
                Err(StatsError::ZeroDenominator { round })
            } else {
                Ok(x / y)
            }
        })
        .collect()
}

/// Median, extremes and spread of repeated measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// First quartile.
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
    /// Arithmetic mean (for reference; the median is the figure to quote).
    pub mean: f64,
}

impl Summary {
    /// Summarise `values` (finite, at least one).
    pub fn of(values: &[f64]) -> Result<Self, StatsError> {
        let v = sorted(values)?;
        Ok(Self {
            n: v.len(),
            median: quantile_sorted(&v, 0.5),
            min: v[0],
            max: v[v.len() - 1],
            q1: quantile_sorted(&v, 0.25),
            q3: quantile_sorted(&v, 0.75),
            mean: v.iter().sum::<f64>() / v.len() as f64,
        })
    }

    /// `(max − min) / median`: how far apart the extremes are, relative to the figure quoted
    /// (0.10 = the runs spanned 10 % of the median). `None` if the median is 0.
    pub fn spread(&self) -> Option<f64> {
        (self.median != 0.0).then(|| (self.max - self.min) / self.median.abs())
    }

    /// Interquartile range `q3 − q1`.
    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }

    /// `iqr / median`, `None` if the median is 0.
    pub fn relative_iqr(&self) -> Option<f64> {
        (self.median != 0.0).then(|| self.iqr() / self.median.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_quantiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]).unwrap(), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]).unwrap(), 2.5);
        assert_eq!(median(&[7.0]).unwrap(), 7.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.25).unwrap(), 2.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.25).unwrap(), 1.75);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.0).unwrap(), 1.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 1.0).unwrap(), 4.0);
        assert_eq!(median(&[]), Err(StatsError::Empty));
        assert_eq!(
            quantile(&[1.0], 1.5),
            Err(StatsError::BadQuantile { q: 1.5 })
        );
        let e = median(&[1.0, f64::NAN]).unwrap_err();
        assert!(matches!(e, StatsError::NotFinite { index: 1, .. }), "{e}");
    }

    #[test]
    fn summary_and_spread() {
        // One disturbed run (5.0) barely moves the median.
        let s = Summary::of(&[10.0, 11.0, 9.0, 10.5, 5.0]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (5, 10.0, 5.0, 11.0));
        assert_eq!((s.q1, s.q3), (9.0, 10.5));
        assert_eq!(s.iqr(), 1.5);
        assert_eq!(s.spread(), Some(0.6));
        assert_eq!(s.relative_iqr(), Some(0.15));
        assert_eq!(s.mean, 9.1);
        assert_eq!(Summary::of(&[0.0, 0.0]).unwrap().spread(), None);
    }

    #[test]
    fn ratios_per_round() {
        assert_eq!(
            per_round_ratios(&[2.0, 3.0], &[1.0, 2.0]).unwrap(),
            vec![2.0, 1.5]
        );
        assert_eq!(
            per_round_ratios(&[1.0], &[1.0, 2.0]),
            Err(StatsError::LengthMismatch { a: 1, b: 2 })
        );
        assert_eq!(
            per_round_ratios(&[1.0, 1.0], &[1.0, 0.0]),
            Err(StatsError::ZeroDenominator { round: 1 })
        );
    }
}
