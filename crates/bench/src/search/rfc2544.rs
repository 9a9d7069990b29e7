//! RFC 2544 §26.1 throughput: the largest offered rate at which the DUT loses no frame.
//!
//! # Procedure
//!
//! RFC 2544 sends frames at a rate, counts them back, and "if fewer frames are received than
//! were transmitted, the rate of the offered stream is reduced and the test is rerun"; the
//! throughput is "the fastest rate at which the count of test frames transmitted by the DUT is
//! equal to the number of test frames sent to it". It leaves the choice of rates open; the
//! binary search used here is the common one (and the one RFC 9971 §"Binary Search" describes):
//!
//! 1. one trial at `max_load`; if it loses nothing, the throughput is `max_load`;
//! 2. otherwise bisect (arithmetic midpoint) between the highest loss-free rate so far
//!    (initially `min_load`, not yet measured) and the lowest lossy rate so far;
//! 3. stop when the two are within [`Resolution`]; if `min_load` was never measured, measure it
//!    last — loss there means the throughput is below `min_load` (no answer).
//!
//! Every trial lasts `trial_duration`, 60 s by default as the RFC asks (§24: "the duration of
//! the test portion of each trial SHOULD be at least 60 seconds"). Shorter trials are allowed
//! but are recorded in the settings, so a report can say the RFC's duration was not used.
//! Zero loss is strict: one frame lost fails the trial.
//!
//! # Non-monotonic loss
//!
//! Binary search assumes loss grows with load. By construction every loss-free trial it runs
//! is below every lossy one, so it cannot see a non-monotonic curve: when a lossy window lies
//! below a loss-free region (Batalla Fig. 6 c–d, [`crate::sim::NonMonotonic`]) it converges on
//! whichever loss-free/lossy edge its midpoints happen to straddle. What it returns is then
//! exactly what this procedure defines — a rate measured loss-free with a lossy rate within
//! the resolution above it — which may be the lower edge of the window rather than the
//! fastest loss-free rate of the RFC's definition. Finding the latter needs a sweep (the
//! overload curve) or the tolerant search of [`super::mlr`]; reports should show the overload
//! curve next to this number.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Resolution, SearchError, check_duration, check_loads, check_shortfall, run_trial};
use crate::trial::{Measurer, Trial};

/// RFC 2544's trial duration.
pub const RFC_TRIAL_DURATION: Duration = Duration::from_secs(60);

/// Settings of an RFC 2544 throughput search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rfc2544Settings {
    /// Lowest rate to consider (frames/s, > 0).
    pub min_load: f64,
    /// Highest rate, tried first (frames/s): the medium's maximum frame rate or the
    /// generator's, whichever is lower.
    pub max_load: f64,
    /// Duration of every trial; [`RFC_TRIAL_DURATION`] unless asked otherwise.
    #[serde(rename = "trial_duration_s", with = "crate::secs")]
    pub trial_duration: Duration,
    /// When to stop bisecting.
    pub resolution: Resolution,
    /// Give up after this many trials (the result then says so).
    pub max_trials: usize,
    /// Largest generator shortfall accepted (see [`Trial::shortfall`]); `None` accepts any.
    pub max_shortfall: Option<f64>,
}

impl Rfc2544Settings {
    /// Defaults: 60 s trials, 0.5 % relative resolution, at most 30 trials, 1 % shortfall.
    pub fn new(min_load: f64, max_load: f64) -> Self {
        Self {
            min_load,
            max_load,
            trial_duration: RFC_TRIAL_DURATION,
            resolution: Resolution::Relative(0.005),
            max_trials: 30,
            max_shortfall: Some(0.01),
        }
    }

    /// True if trials are shorter than RFC 2544 asks (a report must say so).
    pub fn is_shortened(&self) -> bool {
        self.trial_duration < RFC_TRIAL_DURATION
    }

    fn check<E: std::error::Error + 'static>(&self) -> Result<(), SearchError<E>> {
        check_loads(self.min_load, self.max_load)?;
        check_duration("trial_duration", self.trial_duration)?;
        self.resolution.check()?;
        check_shortfall(self.max_shortfall)?;
        if self.max_trials == 0 {
            return Err(SearchError::setting(
                "max_trials",
                0,
                "must allow at least one trial",
            ));
        }
        Ok(())
    }
}

/// How an RFC 2544 search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rfc2544Outcome {
    /// Bounds within the resolution: `throughput` is the answer.
    Converged,
    /// `max_load` lost nothing: the DUT's throughput is at least `max_load`.
    MaxLoadLossless,
    /// `min_load` lost frames: the throughput is below `min_load`.
    MinLoadLossy,
    /// `max_trials` ran out before the resolution was reached.
    TrialLimit,
}

/// The answer of an RFC 2544 search, with every trial it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rfc2544Result {
    /// Largest rate measured loss-free (frames/s); `None` if no trial was loss-free.
    pub throughput: Option<f64>,
    /// Smallest rate measured lossy; `None` if no trial lost frames.
    pub lossy: Option<f64>,
    /// How the search ended.
    pub outcome: Rfc2544Outcome,
    /// The settings used.
    pub settings: Rfc2544Settings,
    /// Every trial, in the order run.
    pub trials: Vec<Trial>,
}

impl Rfc2544Result {
    /// Sum of the trials' durations (what the search cost in traffic time).
    pub fn traffic_time(&self) -> Duration {
        self.trials.iter().map(|t| t.duration).sum()
    }
}

/// Run RFC 2544 §26.1's throughput search against `m`.
pub fn search<M: Measurer + ?Sized>(
    m: &mut M,
    settings: &Rfc2544Settings,
) -> Result<Rfc2544Result, SearchError<M::Error>> {
    settings.check()?;
    let s = settings;
    let mut trials = Vec::new();
    let mut measure = |load: f64, trials: &mut Vec<Trial>| -> Result<bool, SearchError<M::Error>> {
        let t = run_trial(m, load, s.trial_duration, s.max_shortfall)?;
        let ok = t.is_lossless();
        trials.push(t);
        Ok(ok)
    };
    let done = |throughput, lossy, outcome, trials| Rfc2544Result {
        throughput,
        lossy,
        outcome,
        settings: s.clone(),
        trials,
    };

    if measure(s.max_load, &mut trials)? {
        return Ok(done(
            Some(s.max_load),
            None,
            Rfc2544Outcome::MaxLoadLossless,
            trials,
        ));
    }
    let mut hi = s.max_load;
    // Highest loss-free rate measured; `None` while min_load is only assumed.
    let mut lo: Option<f64> = None;
    loop {
        let floor = lo.unwrap_or(s.min_load);
        if s.resolution.reached(floor, hi) {
            if lo.is_some() {
                return Ok(done(lo, Some(hi), Rfc2544Outcome::Converged, trials));
            }
            if trials.len() >= s.max_trials {
                return Ok(done(None, Some(hi), Rfc2544Outcome::TrialLimit, trials));
            }
            return Ok(if measure(s.min_load, &mut trials)? {
                done(
                    Some(s.min_load),
                    Some(hi),
                    Rfc2544Outcome::Converged,
                    trials,
                )
            } else {
                done(None, Some(s.min_load), Rfc2544Outcome::MinLoadLossy, trials)
            });
        }
        if trials.len() >= s.max_trials {
            return Ok(done(lo, Some(hi), Rfc2544Outcome::TrialLimit, trials));
        }
        let mid = (floor + hi) / 2.0;
        if measure(mid, &mut trials)? {
            lo = Some(mid);
        } else {
            hi = mid;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Noisy, NonMonotonic, SimDut};

    const C: f64 = 1_000_000.0;

    fn settings(min: f64, max: f64) -> Rfc2544Settings {
        Rfc2544Settings {
            trial_duration: Duration::from_secs(1),
            ..Rfc2544Settings::new(min, max)
        }
    }

    #[test]
    fn ideal_dut_throughput_is_its_capacity() {
        for max in [1.5 * C, 2.0 * C, 14_880_952.0] {
            let mut dut = SimDut::ideal(C);
            let r = search(&mut dut, &settings(1000.0, max)).unwrap();
            assert_eq!(r.outcome, Rfc2544Outcome::Converged);
            let t = r.throughput.unwrap();
            let hi = r.lossy.unwrap();
            assert!(t <= C && hi > C, "bounds {t}..{hi} straddle {C}");
            assert!(hi - t <= 0.005 * hi, "within resolution: {t}..{hi}");
            assert!(C - t <= 0.005 * C);
            assert_eq!(dut.trials, r.trials.len());
            // First trial at max load, all trials 1 s.
            assert_eq!(r.trials[0].offered_load, max);
            assert!(
                r.trials
                    .iter()
                    .all(|t| t.duration == Duration::from_secs(1))
            );
        }
    }

    #[test]
    fn absolute_resolution() {
        let mut dut = SimDut::ideal(C);
        let s = Rfc2544Settings {
            resolution: Resolution::Absolute(1000.0),
            ..settings(1.0, 2.0 * C)
        };
        let r = search(&mut dut, &s).unwrap();
        let (t, hi) = (r.throughput.unwrap(), r.lossy.unwrap());
        assert!(hi - t <= 1000.0 && t <= C && hi > C, "{t}..{hi}");
    }

    #[test]
    fn max_load_lossless_is_one_trial() {
        let mut dut = SimDut::ideal(C);
        let r = search(&mut dut, &settings(1.0, 0.5 * C)).unwrap();
        assert_eq!(r.outcome, Rfc2544Outcome::MaxLoadLossless);
        assert_eq!(r.throughput, Some(0.5 * C));
        assert_eq!(r.trials.len(), 1);
    }

    #[test]
    fn min_load_lossy_has_no_throughput() {
        let mut dut = SimDut::ideal(C);
        let r = search(&mut dut, &settings(1.2 * C, 2.0 * C)).unwrap();
        assert_eq!(r.outcome, Rfc2544Outcome::MinLoadLossy);
        assert_eq!(r.throughput, None);
        assert_eq!(r.lossy, Some(1.2 * C));
        assert_eq!(r.trials.last().unwrap().offered_load, 1.2 * C);
    }

    #[test]
    fn min_load_measured_when_bisection_never_passed() {
        // Capacity just above min: every midpoint loses, min is measured last and passes.
        let mut dut = SimDut::ideal(C);
        let r = search(&mut dut, &settings(0.999 * C, 2.0 * C)).unwrap();
        assert_eq!(r.outcome, Rfc2544Outcome::Converged);
        assert_eq!(r.throughput, Some(0.999 * C));
    }

    #[test]
    fn trial_limit_is_reported() {
        let mut dut = SimDut::ideal(C);
        let s = Rfc2544Settings {
            max_trials: 3,
            ..settings(1.0, 2.0 * C)
        };
        let r = search(&mut dut, &s).unwrap();
        assert_eq!(r.outcome, Rfc2544Outcome::TrialLimit);
        assert_eq!(r.trials.len(), 3);
        // 2C lossy, (1 + 2C) / 2 just above capacity lossy, half of that lossless.
        assert_eq!(r.lossy, Some(1_000_000.5));
        assert_eq!(r.throughput, Some(500_000.75));
    }

    #[test]
    fn default_duration_is_the_rfcs_60_s() {
        let s = Rfc2544Settings::new(1.0, 2.0);
        assert_eq!(s.trial_duration, Duration::from_secs(60));
        assert!(!s.is_shortened());
        assert!(settings(1.0, 2.0).is_shortened());
        let mut dut = SimDut::ideal(C);
        let r = search(&mut dut, &Rfc2544Settings::new(1000.0, 2.0 * C)).unwrap();
        assert!(r.trials.iter().all(|t| t.duration == RFC_TRIAL_DURATION));
        assert_eq!(r.traffic_time(), RFC_TRIAL_DURATION * r.trials.len() as u32);
    }

    #[test]
    fn noisy_dut_within_resolution_plus_jitter() {
        // Capacity jitters by σ = 0.05 %; no spikes (one lost frame fails RFC 2544 outright).
        for seed in 0..10 {
            let mut dut = SimDut::new(Noisy::new(C, 0.0005, 0.0, 0.0, seed));
            let r = search(&mut dut, &settings(1000.0, 2.0 * C)).unwrap();
            let t = r.throughput.unwrap();
            assert!(
                (t - C).abs() <= 0.005 * C + 4.0 * 0.0005 * C,
                "seed {seed}: {t}"
            );
        }
    }

    #[test]
    fn non_monotonic_dut_gives_the_edge_bisection_finds() {
        // Loss-free up to C, except a lossy window [0.8 C, 0.95 C].
        let dut = |overload_carried| {
            SimDut::new(NonMonotonic {
                capacity: C,
                window_start: 0.8 * C,
                window_end: 0.95 * C,
                window_loss: 0.01,
                overload_carried,
            })
        };
        // [0.5C, 1.5C]: the first midpoint (C) is loss-free, bisection stays above the window
        // and finds the capacity.
        let r = search(&mut dut(1.0), &settings(0.5 * C, 1.5 * C)).unwrap();
        let t = r.throughput.unwrap();
        assert!(t <= C && C - t <= 0.005 * C, "{t}");
        // max = 1.2C: 0.6C passes, 0.9C falls in the window and fails; bisection then closes
        // in on the window's lower edge, 0.8C — the procedure's answer, though 0.96C..C
        // would be loss-free too.
        let r = search(&mut dut(1.0), &settings(1000.0, 1.2 * C)).unwrap();
        let first: Vec<(f64, bool)> = r
            .trials
            .iter()
            .take(3)
            .map(|t| (t.offered_load, t.is_lossless()))
            .collect();
        assert_eq!(
            first,
            [(1.2 * C, false), (600_500.0, true), (900_250.0, false)]
        );
        let (t, hi) = (r.throughput.unwrap(), r.lossy.unwrap());
        assert!(
            t < 0.8 * C && hi >= 0.8 * C && hi - t <= 0.005 * hi,
            "{t}..{hi}"
        );
        // Every loss-free trial is below every lossy one: the search cannot see the window.
        let max_ok = r
            .trials
            .iter()
            .filter(|t| t.is_lossless())
            .map(|t| t.offered_load)
            .fold(0.0, f64::max);
        let min_bad = r
            .trials
            .iter()
            .filter(|t| !t.is_lossless())
            .map(|t| t.offered_load)
            .fold(f64::MAX, f64::min);
        assert!(max_ok < min_bad);
    }

    #[test]
    fn bad_settings_are_rejected_before_any_trial() {
        let mut dut = SimDut::ideal(C);
        let e = search(
            &mut dut,
            &Rfc2544Settings {
                trial_duration: Duration::ZERO,
                ..settings(1.0, 2.0)
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("`trial_duration`"), "{e}");
        let e = search(
            &mut dut,
            &Rfc2544Settings {
                max_trials: 0,
                ..settings(1.0, 2.0)
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("`max_trials` = 0"), "{e}");
        let e = search(
            &mut dut,
            &Rfc2544Settings {
                max_shortfall: Some(1.5),
                ..settings(1.0, 2.0)
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("`max_shortfall` = 1.5"), "{e}");
        assert_eq!(dut.trials, 0);
    }

    #[test]
    fn generator_shortfall_stops_the_search() {
        // A generator that tops out at 1.5 Mfps asked for 2 Mfps.
        let mut m = crate::trial::from_fn(|load: f64, d: Duration| {
            let sent = (load.min(1.5e6) * d.as_secs_f64()) as u64;
            Ok::<_, std::io::Error>(Trial::new(load, d, sent, sent))
        });
        let e = search(&mut m, &settings(1.0, 2e6)).unwrap_err();
        assert!(
            matches!(
                e,
                SearchError::Trial(crate::trial::TrialError::Shortfall { .. })
            ),
            "{e}"
        );
        assert!(e.to_string().contains("1500000 frames/s"), "{e}");
    }

    #[test]
    fn measurer_errors_carry_the_load() {
        let mut m = crate::trial::from_fn(|_: f64, _: Duration| -> Result<Trial, std::io::Error> {
            Err(std::io::Error::other("lab is down"))
        });
        let e = search(&mut m, &settings(1.0, 2e6)).unwrap_err();
        assert_eq!(e.to_string(), "trial at 2000000 frames/s for 1s failed");
        assert_eq!(
            std::error::Error::source(&e).unwrap().to_string(),
            "lab is down"
        );
    }
}
