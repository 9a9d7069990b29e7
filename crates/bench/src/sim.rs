//! Simulated DUTs with known loss curves, to test the searches against known answers.
//!
//! A search is only as trustworthy as its tests, and a real DUT has no known answer. Each model
//! here is a loss ratio as a function of offered load (a [`LossCurve`]); [`SimDut`] turns it into
//! a [`Measurer`] that counts frames the way a real trial does (`sent = round(load × duration)`,
//! `lost = ⌈sent × loss⌉`, so any loss at all costs at least one frame — a zero-loss search sees
//! it however short the trial). No clock and no sleep: a 60 s trial costs nothing.
//!
//! The models:
//! * [`Ideal`]: forwards everything up to capacity `C`, above it carries exactly `C`:
//!   `loss(L) = max(0, (L − C) / L)`. RFC 2544 throughput, NDR and PDR (`C / (1 − 0.005)`) are
//!   known exactly.
//! * [`Noisy`]: an ideal DUT whose capacity jitters from trial to trial (Gaussian, relative σ)
//!   and that now and then loses a burst of frames at any load (a "spike", e.g. an interrupt
//!   storm on a shared host). Seeded, so every run of a test sees the same noise.
//! * [`NonMonotonic`]: Batalla et al. Fig. 6 c–d (Xen): carried load is not a monotonic function
//!   of offered load. Loss appears in a window of loads below capacity and disappears above
//!   it; above capacity the DUT may also collapse (carry less than `C`, a non-work-conserving
//!   scheduler). The fastest loss-free rate is `C`, but a search that probes the window may
//!   legitimately stop below it — see the searches' docs for what each reports.

use std::convert::Infallible;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::trial::{Measurer, Trial};

/// A DUT's loss ratio as a function of offered load; `&mut self` so models may draw noise.
pub trait LossCurve {
    /// Loss ratio in `[0, 1]` of one trial at `load` frames/s lasting `duration`.
    fn loss_ratio(&mut self, load: f64, duration: Duration) -> f64;
}

/// A simulated DUT: a [`LossCurve`] behind the [`Measurer`] interface, counting its trials.
#[derive(Debug, Clone)]
pub struct SimDut<C> {
    /// The loss model.
    pub curve: C,
    /// Trials run so far.
    pub trials: usize,
    /// Sum of the trials' durations (what the search would have cost on a real lab).
    pub traffic_time: Duration,
}

impl<C: LossCurve> SimDut<C> {
    /// Wrap a loss model.
    pub fn new(curve: C) -> Self {
        Self {
            curve,
            trials: 0,
            traffic_time: Duration::ZERO,
        }
    }
}

impl SimDut<Ideal> {
    /// An [`Ideal`] DUT of `capacity` frames/s.
    pub fn ideal(capacity: f64) -> Self {
        Self::new(Ideal { capacity })
    }
}

impl<C: LossCurve> Measurer for SimDut<C> {
    type Error = Infallible;

    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, Infallible> {
        self.trials += 1;
        self.traffic_time += duration;
        let sent = (load * duration.as_secs_f64()).round().max(0.0) as u64;
        let loss = self.curve.loss_ratio(load, duration).clamp(0.0, 1.0);
        let lost = if loss > 0.0 {
            ((sent as f64 * loss).ceil() as u64).min(sent)
        } else {
            0
        };
        Ok(Trial::new(load, duration, sent, sent - lost))
    }
}

/// Forwards everything up to `capacity`, carries exactly `capacity` above it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ideal {
    /// Frames per second the DUT can forward.
    pub capacity: f64,
}

impl LossCurve for Ideal {
    fn loss_ratio(&mut self, load: f64, _: Duration) -> f64 {
        overload_loss(load, self.capacity)
    }
}

/// `max(0, (L − C) / L)`: the loss of a DUT that carries `C` when offered `L`.
pub fn overload_loss(load: f64, capacity: f64) -> f64 {
    if load <= capacity {
        0.0
    } else {
        (load - capacity) / load
    }
}

/// An ideal DUT with a per-trial Gaussian capacity jitter and random loss spikes. Seeded.
#[derive(Debug, Clone)]
pub struct Noisy {
    /// Median capacity (frames/s).
    pub capacity: f64,
    /// Relative standard deviation of the per-trial capacity (e.g. `0.002`).
    pub jitter: f64,
    /// Probability that a trial suffers a loss spike.
    pub spike_probability: f64,
    /// Loss ratio a spike adds to the trial.
    pub spike_loss: f64,
    rng: Xoshiro256PlusPlus,
}

impl Noisy {
    /// A noisy DUT; the same `seed` gives the same noise.
    pub fn new(
        capacity: f64,
        jitter: f64,
        spike_probability: f64,
        spike_loss: f64,
        seed: u64,
    ) -> Self {
        Self {
            capacity,
            jitter,
            spike_probability,
            spike_loss,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }
}

impl LossCurve for Noisy {
    fn loss_ratio(&mut self, load: f64, _: Duration) -> f64 {
        let factor = if self.jitter > 0.0 {
            // Normal::new fails only for a negative or NaN σ; jitter > 0 here.
            Normal::new(1.0, self.jitter).map_or(1.0, |n| n.sample(&mut self.rng))
        } else {
            1.0
        };
        let mut loss = overload_loss(load, self.capacity * factor);
        if self.spike_probability > 0.0 && self.rng.gen_bool(self.spike_probability.min(1.0)) {
            loss += self.spike_loss;
        }
        loss.min(1.0)
    }
}

/// Batalla Fig. 6 c–d: loss in a window of loads below capacity, none between the window and
/// capacity, and above capacity a DUT that carries `overload_carried × capacity`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonMonotonic {
    /// Highest loss-free load above the window (frames/s).
    pub capacity: f64,
    /// Loads in `[window_start, window_end]` lose `window_loss` of their frames.
    pub window_start: f64,
    /// End of the lossy window (inclusive).
    pub window_end: f64,
    /// Loss ratio inside the window.
    pub window_loss: f64,
    /// Carried load above capacity as a fraction of capacity (1.0 = carries `capacity`; less
    /// is a collapse under overload).
    pub overload_carried: f64,
}

impl LossCurve for NonMonotonic {
    fn loss_ratio(&mut self, load: f64, _: Duration) -> f64 {
        if load > self.capacity {
            overload_loss(load, self.capacity * self.overload_carried)
        } else if load >= self.window_start && load <= self.window_end {
            self.window_loss
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn ideal_counts() {
        let mut d = SimDut::ideal(1_000_000.0);
        let t = d.trial(800_000.0, 2 * S).unwrap();
        assert_eq!((t.sent, t.received), (1_600_000, 1_600_000));
        let t = d.trial(2_000_000.0, S).unwrap();
        assert_eq!((t.sent, t.received), (2_000_000, 1_000_000));
        assert_eq!(t.carried_rate(), 1_000_000.0);
        // Any overload loses at least one frame.
        let t = d.trial(1_000_000.5, S).unwrap();
        assert_eq!(t.lost(), 1);
        assert_eq!(d.trials, 3);
        assert_eq!(d.traffic_time, 4 * S);
    }

    #[test]
    fn noisy_is_reproducible_and_noisy() {
        let run = |seed| {
            let mut d = SimDut::new(Noisy::new(1e6, 0.01, 0.3, 0.01, seed));
            (0..50)
                .map(|_| d.trial(1e6, S).unwrap().received)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let r = run(7);
        assert!(r.contains(&1_000_000), "some trials lossless");
        assert!(r.iter().any(|&x| x < 990_000), "some trials spiked");
    }

    #[test]
    fn non_monotonic_curve() {
        let mut c = NonMonotonic {
            capacity: 1e6,
            window_start: 7e5,
            window_end: 8e5,
            window_loss: 0.05,
            overload_carried: 0.5,
        };
        assert_eq!(c.loss_ratio(6e5, S), 0.0);
        assert_eq!(c.loss_ratio(7.5e5, S), 0.05);
        assert_eq!(c.loss_ratio(9e5, S), 0.0);
        assert_eq!(c.loss_ratio(1e6, S), 0.0);
        // Collapse: offered 2 Mfps, carried 0.5 Mfps.
        assert_eq!(c.loss_ratio(2e6, S), 0.75);
    }
}
