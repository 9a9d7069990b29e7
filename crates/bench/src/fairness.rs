//! Work points for N virtual routers (Batalla et al., seed 001): how the offered load is split
//! between VRs, how fair that split is, and the throughput at the worst split.
//!
//! Why: a host of N VRs has no single throughput. The same total load split evenly or piled on
//! one VR gives different results (LXC is worst at an even split, Xen at a one-sided one), so
//! comparing platforms at one split can rank them backwards. Batalla's method measures RFC 2544
//! throughput at N *work points* and reports the worst:
//!
//! * work point `k` (1..=N): `k` VRs heavily loaded, `N − k` lightly loaded with a share `q` of
//!   the total (`q = 0.01` suggested: enough to keep light VRs alive, little enough not to
//!   disturb the heavy ones). Eq. 2–3: `O_h = (1 − q)·O_tot / k`, `O_l = q·O_tot / (N − k)`;
//!   for `k = N` every VR gets `O_tot / N`.
//! * Jain's fairness index (eq. 1) `J = O_tot² / (N · Σ O_i²)` of the split, in `[1/N, 1]`; for
//!   work point `k` it has the closed form eq. 4 `J(k) = k(N−k) / (N[N(1−q)² − k(1−2q)])`,
//!   `J(N) = 1`, tending to `k / N` as `q → 0` (eq. 5).
//! * the conditional throughput `T|J(k)` is the largest total load forwarded without loss at
//!   work point `k`, and `T^N = min_k T|J(k)` (eq. 6) the device's throughput with N VRs, at its
//!   worst work point — named, so a report can say *which* split is worst.
//!
//! This module is arithmetic only: [`WorkPoint::rates`] turns a total load into per-VR rates for
//! the generator, and [`sweep`] runs the caller's search (RFC 2544 or MLRsearch) at every work
//! point and reduces the results to `T^N`.

use serde::{Deserialize, Serialize};

/// Batalla's suggested share of the load given to the lightly loaded VRs.
pub const Q_DEFAULT: f64 = 0.01;

/// Bad input to the work-point arithmetic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FairnessError {
    /// Jain's index of no shares.
    #[error("Jain's index needs at least one share")]
    NoShares,
    /// A share is negative or not a number.
    #[error("share {index} is {value}: shares must be finite and non-negative")]
    BadShare { index: usize, value: f64 },
    /// Every share is zero: fairness is undefined.
    #[error("all {n} shares are zero: Jain's index is undefined")]
    AllZero { n: usize },
    /// A work point outside `1 ≤ k ≤ N`.
    #[error("work point k = {k} with N = {n} VRs: k must be in 1..=N")]
    BadK { k: usize, n: usize },
    /// A light-load share outside `[0, 1)`.
    #[error("light-load share q = {q}: must be in [0, 1)")]
    BadQ { q: f64 },
    /// A total load that is negative or not a number.
    #[error("total load {load}: must be finite and non-negative")]
    BadLoad { load: f64 },
    /// Reducing an empty sweep.
    #[error("no work point results to take the minimum of")]
    NoResults,
}

/// Jain's fairness index (Batalla eq. 1): `(Σx)² / (N · Σx²)`, in `[1/N, 1]`.
pub fn jain_index(shares: &[f64]) -> Result<f64, FairnessError> {
    if shares.is_empty() {
        return Err(FairnessError::NoShares);
    }
    if let Some((index, &value)) = shares
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
    {
        return Err(FairnessError::BadShare { index, value });
    }
    let sum: f64 = shares.iter().sum();
    let sum_sq: f64 = shares.iter().map(|x| x * x).sum();
    if sum_sq == 0.0 {
        return Err(FairnessError::AllZero { n: shares.len() });
    }
    Ok(sum * sum / (shares.len() as f64 * sum_sq))
}

/// One work point: `k` of `n` VRs heavily loaded, the others sharing `q` of the load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkPoint {
    /// Number of VRs (N).
    pub n: usize,
    /// Heavily loaded VRs (k, 1..=N).
    pub k: usize,
    /// Share of the total load given to the lightly loaded VRs together.
    pub q: f64,
}

impl WorkPoint {
    /// Check and build a work point.
    pub fn new(n: usize, k: usize, q: f64) -> Result<Self, FairnessError> {
        if k == 0 || k > n {
            return Err(FairnessError::BadK { k, n });
        }
        if !(0.0..1.0).contains(&q) {
            return Err(FairnessError::BadQ { q });
        }
        Ok(Self { n, k, q })
    }

    /// All N work points `k = 1..=N` for `n` VRs.
    pub fn all(n: usize, q: f64) -> Result<Vec<Self>, FairnessError> {
        if n == 0 {
            return Err(FairnessError::BadK { k: 1, n });
        }
        (1..=n).map(|k| Self::new(n, k, q)).collect()
    }

    /// Share of the total offered to each heavily loaded VR (eq. 2 divided by `O_tot`).
    pub fn heavy_share(&self) -> f64 {
        if self.k == self.n {
            1.0 / self.n as f64
        } else {
            (1.0 - self.q) / self.k as f64
        }
    }

    /// Share of the total offered to each lightly loaded VR (eq. 3 divided by `O_tot`).
    pub fn light_share(&self) -> f64 {
        if self.k == self.n {
            0.0
        } else {
            self.q / (self.n - self.k) as f64
        }
    }

    /// Per-VR offered rates for a total of `total` frames/s: the first `k` VRs heavy, the rest
    /// light (eq. 2–3). They add up to `total`.
    pub fn rates(&self, total: f64) -> Result<Vec<f64>, FairnessError> {
        if !(total.is_finite() && total >= 0.0) {
            return Err(FairnessError::BadLoad { load: total });
        }
        let (h, l) = (self.heavy_share() * total, self.light_share() * total);
        Ok((0..self.n)
            .map(|i| if i < self.k { h } else { l })
            .collect())
    }

    /// J(k) from the closed form, Batalla eq. 4.
    pub fn jain_formula(&self) -> f64 {
        let (n, k, q) = (self.n as f64, self.k as f64, self.q);
        if self.k == self.n {
            return 1.0;
        }
        k * (n - k) / (n * (n * (1.0 - q).powi(2) - k * (1.0 - 2.0 * q)))
    }

    /// J(k) from the allocation vector, eq. 1 (agrees with [`Self::jain_formula`]).
    pub fn jain_from_allocation(&self) -> f64 {
        // Shares of a unit total: never empty, never negative, never all zero.
        self.rates(1.0)
            .and_then(|r| jain_index(&r))
            .unwrap_or(f64::NAN)
    }
}

/// Per-VR offered rates for an aggregate rate at work point (N, k, q); see [`WorkPoint::rates`].
pub fn per_vr_rates(total: f64, n: usize, k: usize, q: f64) -> Result<Vec<f64>, FairnessError> {
    WorkPoint::new(n, k, q)?.rates(total)
}

/// The throughput measured at one work point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkPointResult {
    /// The work point.
    pub point: WorkPoint,
    /// Its fairness index J(k).
    pub jain: f64,
    /// Conditional throughput `T|J(k)`: total frames/s forwarded without loss.
    pub throughput: f64,
}

/// Throughput of N VRs at the worst work point (eq. 6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorstWorkPoint {
    /// `T^N`, frames/s.
    pub throughput: f64,
    /// The k at which it occurs (the first such k if several tie).
    pub k: usize,
    /// J(k) there.
    pub jain: f64,
}

/// `T^N = min_k T|J(k)` (eq. 6), naming the worst work point.
pub fn worst(results: &[WorkPointResult]) -> Result<WorstWorkPoint, FairnessError> {
    results
        .iter()
        .min_by(|a, b| a.throughput.total_cmp(&b.throughput))
        .map(|r| WorstWorkPoint {
            throughput: r.throughput,
            k: r.point.k,
            jain: r.jain,
        })
        .ok_or(FairnessError::NoResults)
}

/// All work points of one N, measured, with `T^N`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// One result per k = 1..=N.
    pub points: Vec<WorkPointResult>,
    /// The worst of them.
    pub worst: WorstWorkPoint,
}

/// Measure every work point of `n` VRs with light share `q`: `measure(point)` must return the
/// throughput at that split (e.g. an RFC 2544 search whose measurer offers
/// `point.rates(load)` to the VRs). Stops at the first error.
pub fn sweep<E>(
    n: usize,
    q: f64,
    mut measure: impl FnMut(&WorkPoint) -> Result<f64, E>,
) -> Result<Sweep, SweepError<E>> {
    let points = WorkPoint::all(n, q)?;
    let mut results = Vec::with_capacity(n);
    for p in points {
        let throughput = measure(&p).map_err(|source| SweepError::Measure { k: p.k, source })?;
        results.push(WorkPointResult {
            point: p,
            jain: p.jain_formula(),
            throughput,
        });
    }
    let worst = worst(&results)?;
    Ok(Sweep {
        points: results,
        worst,
    })
}

/// A work-point sweep that could not finish.
#[derive(Debug, thiserror::Error)]
pub enum SweepError<E> {
    /// Bad N or q.
    #[error(transparent)]
    Fairness(#[from] FairnessError),
    /// The caller's measurement failed at work point k.
    #[error("measuring work point k = {k} failed")]
    Measure {
        k: usize,
        #[source]
        source: E,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn jain_index_of_simple_splits() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0, 5.0]).unwrap(), 1.0);
        assert_eq!(jain_index(&[1.0, 0.0, 0.0, 0.0]).unwrap(), 0.25);
        // (1+2+3)² / (3·14) = 36/42
        assert!(close(
            jain_index(&[1.0, 2.0, 3.0]).unwrap(),
            36.0 / 42.0,
            1e-15
        ));
        // Scale-free.
        assert_eq!(
            jain_index(&[2.0, 4.0, 6.0]).unwrap(),
            jain_index(&[1.0, 2.0, 3.0]).unwrap()
        );
    }

    #[test]
    fn jain_index_rejects_bad_shares() {
        assert_eq!(jain_index(&[]), Err(FairnessError::NoShares));
        assert_eq!(
            jain_index(&[0.0, 0.0]),
            Err(FairnessError::AllZero { n: 2 })
        );
        let e = jain_index(&[1.0, -2.0]).unwrap_err();
        assert_eq!(
            e,
            FairnessError::BadShare {
                index: 1,
                value: -2.0
            }
        );
        assert_eq!(
            e.to_string(),
            "share 1 is -2: shares must be finite and non-negative"
        );
        assert!(jain_index(&[f64::NAN]).is_err());
    }

    #[test]
    fn eq4_agrees_with_eq1_on_the_allocation() {
        for n in 1..=16 {
            for q in [0.0, 0.001, Q_DEFAULT, 0.1, 0.3] {
                for p in WorkPoint::all(n, q).unwrap() {
                    let (f, a) = (p.jain_formula(), p.jain_from_allocation());
                    assert!(
                        close(f, a, 1e-12),
                        "N={n} k={} q={q}: eq.4 {f} vs eq.1 {a}",
                        p.k
                    );
                    assert!(
                        f >= 1.0 / n as f64 - 1e-12 && f <= 1.0 + 1e-12,
                        "J in [1/N, 1]"
                    );
                }
            }
        }
    }

    #[test]
    fn paper_values() {
        // J(N) = 1 (even split).
        for n in [1, 6, 12] {
            assert_eq!(WorkPoint::new(n, n, Q_DEFAULT).unwrap().jain_formula(), 1.0);
        }
        // q → 0: J(k) → k / N (eq. 5).
        for k in 1..12 {
            let j = WorkPoint::new(12, k, 1e-9).unwrap().jain_formula();
            assert!(close(j, k as f64 / 12.0, 1e-8), "k={k}: {j}");
        }
        // The paper's 12-VR Xen testbed, J(1) ≈ 1/N: 11 / (12 · (12 · 0.99² − 0.98)) = 0.08502.
        let j1 = WorkPoint::new(12, 1, Q_DEFAULT).unwrap().jain_formula();
        assert!(
            close(j1, 11.0 / 129.3744, 1e-12) && close(j1, 0.08502, 1e-5),
            "{j1}"
        );
        assert!(j1 > 1.0 / 12.0);
        // J grows with k for fixed N, q.
        let js: Vec<f64> = WorkPoint::all(12, Q_DEFAULT)
            .unwrap()
            .iter()
            .map(WorkPoint::jain_formula)
            .collect();
        assert!(js.windows(2).all(|w| w[0] < w[1]), "{js:?}");
    }

    #[test]
    fn rates_follow_eq2_eq3_and_add_up() {
        let r = per_vr_rates(1_000_000.0, 4, 1, 0.01).unwrap();
        assert_eq!(
            r,
            vec![990_000.0, 10_000.0 / 3.0, 10_000.0 / 3.0, 10_000.0 / 3.0]
        );
        let r = per_vr_rates(1_000_000.0, 4, 3, 0.01).unwrap();
        assert_eq!(r, vec![330_000.0, 330_000.0, 330_000.0, 10_000.0]);
        let r = per_vr_rates(1_000_000.0, 4, 4, 0.01).unwrap();
        assert_eq!(r, vec![250_000.0; 4]);
        for n in 1..=12 {
            for k in 1..=n {
                let sum: f64 = per_vr_rates(3e6, n, k, 0.01).unwrap().iter().sum();
                assert!(close(sum, 3e6, 1e-6), "N={n} k={k}: {sum}");
            }
        }
        assert_eq!(
            per_vr_rates(1.0, 4, 0, 0.01),
            Err(FairnessError::BadK { k: 0, n: 4 })
        );
        assert_eq!(
            per_vr_rates(1.0, 4, 5, 0.01),
            Err(FairnessError::BadK { k: 5, n: 4 })
        );
        assert_eq!(
            per_vr_rates(1.0, 4, 1, 1.0),
            Err(FairnessError::BadQ { q: 1.0 })
        );
        assert_eq!(
            per_vr_rates(-1.0, 4, 1, 0.01),
            Err(FairnessError::BadLoad { load: -1.0 })
        );
    }

    #[test]
    fn sweep_names_the_worst_work_point() {
        // A Xen-like host: worse the more one-sided the split (throughput ∝ J here).
        let s = sweep(4, Q_DEFAULT, |p| {
            Ok::<_, std::io::Error>(1e6 * p.jain_formula())
        })
        .unwrap();
        assert_eq!(s.points.len(), 4);
        assert_eq!(s.worst.k, 1);
        assert_eq!(s.worst.throughput, s.points[0].throughput);
        // An LXC-like host: worst at the even split.
        let s = sweep(4, Q_DEFAULT, |p| {
            Ok::<_, std::io::Error>(2e6 - 1e6 * p.jain_formula())
        })
        .unwrap();
        assert_eq!(s.worst.k, 4);
        assert_eq!(s.worst.jain, 1.0);
        assert_eq!(s.worst.throughput, 1e6);
        // Errors name the work point.
        let e = sweep(4, Q_DEFAULT, |p| {
            if p.k == 3 {
                Err(std::io::Error::other("boom"))
            } else {
                Ok(1.0)
            }
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "measuring work point k = 3 failed");
        assert!(matches!(
            sweep(0, Q_DEFAULT, |_| Ok::<_, std::io::Error>(1.0)),
            Err(SweepError::Fairness(_))
        ));
        assert_eq!(worst(&[]), Err(FairnessError::NoResults));
    }
}
