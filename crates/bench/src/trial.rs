//! One trial: offer a load for a duration, count what came back.
//!
//! Every search in this crate is written against [`Measurer`], the one call that touches the
//! outside world: "offer `load` frames per second for `duration`, then tell me how many frames
//! were sent and how many the DUT forwarded". vrbench implements it with its generator, the
//! DUT and its sink; the tests implement it with the simulated DUTs of [`crate::sim`]. Keeping
//! the searches pure (no clock, no threads, no I/O) is what lets them be tested exactly.
//!
//! # The counting contract
//!
//! A [`Trial`]'s `sent` and `received` must be read **after the generator has stopped and the
//! DUT has drained** (every frame still queued inside the DUT either forwarded or dropped).
//! Reading the sink while frames are in flight counts them as lost and makes a lossless DUT look
//! lossy at high rates — the mistake the issue names TRex for. Implementations therefore: stop
//! sending, wait a drain time (or until the DUT's queues are empty), then read both counters.
//! `sent` is what the generator actually put on the wire (not what it was asked to), so a
//! generator that could not keep up shows as a shortfall ([`Trial::shortfall`]) rather than as
//! DUT loss; the searches reject trials whose shortfall exceeds their tolerance.
//!
//! The loss ratio is RFC 9971's Trial Loss Ratio, `1 − received / sent`, clamped to `[0, 1]`
//! (duplicates can make `received > sent`; they are the sink's business, not loss).
//!
//! `offered_load` and `duration` are the *intended* values the search asked for (RFC 9971's
//! Trial Input); searches check the measurer echoed them, because every search decision is
//! keyed on the intended load.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::latency::LatencySummary;

/// The result of one trial (RFC 9971's Trial Result: input and output together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// Intended offered load, frames per second (aggregate over all streams).
    pub offered_load: f64,
    /// Intended trial duration (traffic time, not counting warm-up or drain).
    #[serde(rename = "duration_s", with = "crate::secs")]
    pub duration: Duration,
    /// Frames the generator sent.
    pub sent: u64,
    /// Frames the sink received, i.e. the DUT forwarded.
    pub received: u64,
    /// RFC 9971's Trial Effective Duration: the time the search should account for this trial
    /// (e.g. including warm-up and drain). `None` means `duration`.
    #[serde(
        rename = "effective_duration_s",
        with = "crate::secs::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub effective_duration: Option<Duration>,
    /// Latency of the forwarded frames, when the sink measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
}

impl Trial {
    /// A trial without latency and with the effective duration equal to `duration`.
    pub fn new(offered_load: f64, duration: Duration, sent: u64, received: u64) -> Self {
        Self {
            offered_load,
            duration,
            sent,
            received,
            effective_duration: None,
            latency: None,
        }
    }

    /// Frames sent but not received (0 if the sink saw more than was sent).
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    /// RFC 9971 Trial Loss Ratio: `lost / sent`, in `[0, 1]`. A trial that sent nothing has
    /// ratio 1 (nothing was forwarded); the searches reject such trials before asking.
    pub fn loss_ratio(&self) -> f64 {
        if self.sent == 0 {
            return 1.0;
        }
        self.lost() as f64 / self.sent as f64
    }

    /// RFC 9971 Trial Forwarding Ratio: `1 − loss_ratio`, computed as `min(received, sent) /
    /// sent` (0 if nothing was sent) so that exact counts give exact rates.
    pub fn forwarding_ratio(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        self.received.min(self.sent) as f64 / self.sent as f64
    }

    /// RFC 9971 Trial Forwarding Rate: intended load × forwarding ratio (frames/s).
    pub fn forwarding_rate(&self) -> f64 {
        self.offered_load * self.forwarding_ratio()
    }

    /// Frames received per second of trial time: the carried load of an overload curve.
    pub fn carried_rate(&self) -> f64 {
        self.received as f64 / self.duration.as_secs_f64()
    }

    /// Frames sent per second of trial time: the load the generator achieved.
    pub fn achieved_load(&self) -> f64 {
        self.sent as f64 / self.duration.as_secs_f64()
    }

    /// True if no frame was lost (RFC 2544's pass criterion).
    pub fn is_lossless(&self) -> bool {
        self.received >= self.sent
    }

    /// How far the generator fell short of the intended frame count, as a fraction of it:
    /// `max(0, 1 − sent / (offered_load × duration))`.
    pub fn shortfall(&self) -> f64 {
        let intended = self.offered_load * self.duration.as_secs_f64();
        if intended <= 0.0 {
            return 0.0;
        }
        (1.0 - self.sent as f64 / intended).max(0.0)
    }

    /// The duration searches account for: `effective_duration`, else `duration`.
    pub fn effective_duration(&self) -> Duration {
        self.effective_duration.unwrap_or(self.duration)
    }

    /// Check the trial answers the question asked: the measurer echoed `load` and `duration`,
    /// sent something, and the generator's shortfall is within `max_shortfall` (if given).
    pub fn validate(
        &self,
        load: f64,
        duration: Duration,
        max_shortfall: Option<f64>,
    ) -> Result<(), TrialError> {
        let tol = 1e-9 * load.abs().max(1.0);
        if (self.offered_load - load).abs() > tol || self.duration != duration {
            return Err(TrialError::NotAsked {
                asked_load: load,
                asked_duration: duration,
                load: self.offered_load,
                duration: self.duration,
            });
        }
        if self.sent == 0 {
            return Err(TrialError::NothingSent { load, duration });
        }
        if let Some(max) = max_shortfall {
            let shortfall = self.shortfall();
            if shortfall > max {
                return Err(TrialError::Shortfall {
                    load,
                    duration,
                    sent: self.sent,
                    achieved: self.achieved_load(),
                    shortfall,
                    max,
                });
            }
        }
        Ok(())
    }
}

/// A trial that cannot be used by a search.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrialError {
    /// The measurer returned a trial for a different load or duration than asked.
    #[error(
        "measurer was asked for {asked_load} frames/s for {asked_duration:?} but returned a trial \
         of {load} frames/s for {duration:?}"
    )]
    NotAsked {
        asked_load: f64,
        asked_duration: Duration,
        load: f64,
        duration: Duration,
    },
    /// The generator sent no frame at all.
    #[error("generator sent no frame at {load} frames/s for {duration:?}")]
    NothingSent { load: f64, duration: Duration },
    /// The generator could not produce the asked rate.
    #[error(
        "generator sent {sent} frames ({achieved:.0} frames/s) when asked for {load} frames/s for \
         {duration:?}: {:.2} % short, more than the allowed {:.2} %; lower the maximum load or \
         use a faster generator",
        shortfall * 100.0,
        max * 100.0
    )]
    Shortfall {
        load: f64,
        duration: Duration,
        sent: u64,
        achieved: f64,
        shortfall: f64,
        max: f64,
    },
}

/// Runs one trial. Implemented by vrbench (generator + DUT + sink) and by [`crate::sim`].
///
/// `trial` must offer `load` frames per second (aggregate) for `duration`, stop, let the DUT
/// drain, and only then read the counters (see the module docs). It returns the trial with
/// `offered_load == load` and `duration == duration`.
pub trait Measurer {
    /// What can go wrong in the measurer (lab down, interrupted, …).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Offer `load` frames/s for `duration`; return the counts read after traffic stopped and
    /// the DUT drained.
    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, Self::Error>;
}

impl<M: Measurer + ?Sized> Measurer for &mut M {
    type Error = M::Error;
    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, Self::Error> {
        (**self).trial(load, duration)
    }
}

/// A [`Measurer`] from a closure; see [`from_fn`].
#[derive(Debug, Clone)]
pub struct FnMeasurer<F>(F);

/// Make a [`Measurer`] from a closure `FnMut(load, duration) -> Result<Trial, E>`.
pub fn from_fn<F, E>(f: F) -> FnMeasurer<F>
where
    F: FnMut(f64, Duration) -> Result<Trial, E>,
    E: std::error::Error + Send + Sync + 'static,
{
    FnMeasurer(f)
}

impl<F, E> Measurer for FnMeasurer<F>
where
    F: FnMut(f64, Duration) -> Result<Trial, E>,
    E: std::error::Error + Send + Sync + 'static,
{
    type Error = E;
    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, E> {
        (self.0)(load, duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn ratios_and_rates() {
        let t = Trial::new(1_000_000.0, Duration::from_secs(2), 2_000_000, 1_500_000);
        assert_eq!(t.lost(), 500_000);
        assert_eq!(t.loss_ratio(), 0.25);
        assert_eq!(t.forwarding_ratio(), 0.75);
        assert_eq!(t.forwarding_rate(), 750_000.0);
        assert_eq!(t.carried_rate(), 750_000.0);
        assert_eq!(t.achieved_load(), 1_000_000.0);
        assert_eq!(t.shortfall(), 0.0);
        assert!(!t.is_lossless());
    }

    #[test]
    fn duplicates_are_not_negative_loss() {
        let t = Trial::new(100.0, S, 100, 103);
        assert_eq!(t.lost(), 0);
        assert_eq!(t.loss_ratio(), 0.0);
        assert!(t.is_lossless());
    }

    #[test]
    fn nothing_sent_is_total_loss_and_invalid() {
        let t = Trial::new(100.0, S, 0, 0);
        assert_eq!(t.loss_ratio(), 1.0);
        assert_eq!(
            t.validate(100.0, S, None),
            Err(TrialError::NothingSent {
                load: 100.0,
                duration: S
            })
        );
    }

    #[test]
    fn validate_checks_echo_and_shortfall() {
        let t = Trial::new(1000.0, S, 980, 980);
        assert!((t.shortfall() - 0.02).abs() < 1e-12);
        assert!(t.validate(1000.0, S, None).is_ok());
        assert!(t.validate(1000.0, S, Some(0.05)).is_ok());
        let e = t.validate(1000.0, S, Some(0.01)).unwrap_err();
        assert!(matches!(e, TrialError::Shortfall { sent: 980, .. }), "{e}");
        assert!(e.to_string().contains("980 frames"), "{e}");
        let e = t.validate(2000.0, S, None).unwrap_err();
        assert!(
            matches!(
                e,
                TrialError::NotAsked {
                    asked_load: 2000.0,
                    ..
                }
            ),
            "{e}"
        );
        assert!(t.validate(1000.0, 2 * S, None).is_err());
    }

    #[test]
    fn effective_duration_defaults_to_duration() {
        let mut t = Trial::new(1.0, S, 1, 1);
        assert_eq!(t.effective_duration(), S);
        t.effective_duration = Some(3 * S);
        assert_eq!(t.effective_duration(), 3 * S);
    }

    #[test]
    fn json_uses_seconds() {
        let mut t = Trial::new(1e6, Duration::from_millis(1500), 1_500_000, 1_499_000);
        let j = serde_json::to_value(&t).unwrap();
        assert_eq!(j["duration_s"], 1.5);
        assert!(j.get("effective_duration_s").is_none());
        assert!(j.get("latency").is_none());
        t.effective_duration = Some(Duration::from_secs(2));
        let back: Trial = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        let bad = r#"{"offered_load":1,"duration_s":-1,"sent":1,"received":1}"#;
        let e = serde_json::from_str::<Trial>(bad).unwrap_err();
        assert!(e.to_string().contains("-1"), "{e}");
    }

    #[test]
    fn closures_are_measurers() {
        let mut calls = 0;
        {
            let mut m = from_fn(|load: f64, d: Duration| {
                calls += 1;
                let sent = (load * d.as_secs_f64()) as u64;
                Ok::<_, std::io::Error>(Trial::new(load, d, sent, sent))
            });
            assert_eq!(m.trial(10.0, S).unwrap().sent, 10);
            // A `&mut` measurer is a measurer too (searches take `&mut M`).
            fn run(mut m: impl Measurer) -> u64 {
                m.trial(20.0, S).unwrap().sent
            }
            assert_eq!(run(&mut m), 20);
        }
        assert_eq!(calls, 2);
    }
}
