//! Throughput searches: which loads to try, and what the trials say about them.
//!
//! Two searches, both driving a [`Measurer`] and returning every trial they ran:
//! * [`rfc2544`]: RFC 2544 §26.1 throughput, the largest rate at which no frame was lost, by
//!   binary search with one full-length (default 60 s) trial per rate. What every router
//!   datasheet and the papers behind vrhost report.
//! * [`mlr`]: RFC 9971 MLRsearch: NDR (zero loss) and PDR (0.5 % loss) in one search, short
//!   trials first, results summed per load, tolerant of the occasional bad trial. What FD.io
//!   CSIT reports, and what a noisy shared host needs.
//!
//! Neither search reads a clock or sleeps; time is what the measurer spends. Both validate
//! their settings before the first trial (an error names the setting and its value) and every
//! trial before using it ([`Trial::validate`]): a generator that cannot reach the asked rate
//! stops the search with a message instead of being mistaken for DUT loss.

pub mod mlr;
pub mod rfc2544;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::trial::{Measurer, Trial, TrialError};

/// Why a search could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum SearchError<E: std::error::Error + 'static> {
    /// A setting is out of range; nothing was measured.
    #[error("search setting `{field}` = {value}: {reason}")]
    Setting {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    /// The measurer failed.
    #[error("trial at {load} frames/s for {duration:?} failed")]
    Measurer {
        load: f64,
        duration: Duration,
        #[source]
        source: E,
    },
    /// The measurer returned a trial the search cannot use.
    #[error(transparent)]
    Trial(#[from] TrialError),
}

impl<E: std::error::Error + 'static> SearchError<E> {
    pub(crate) fn setting(
        field: &'static str,
        value: impl std::fmt::Display,
        reason: &'static str,
    ) -> Self {
        Self::Setting {
            field,
            value: value.to_string(),
            reason,
        }
    }
}

/// How close the bounds of a binary search must get before it stops.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Stop when `upper − lower ≤ fraction × upper`.
    Relative(f64),
    /// Stop when `upper − lower ≤` this many frames/s.
    Absolute(f64),
}

impl Resolution {
    /// True when `lower` and `upper` are close enough.
    pub fn reached(&self, lower: f64, upper: f64) -> bool {
        match *self {
            Resolution::Relative(r) => upper - lower <= r * upper,
            Resolution::Absolute(a) => upper - lower <= a,
        }
    }

    fn check<E: std::error::Error + 'static>(&self) -> Result<(), SearchError<E>> {
        match *self {
            Resolution::Relative(r) if !(r > 0.0 && r < 1.0) => Err(SearchError::setting(
                "resolution",
                format!("relative {r}"),
                "must be in (0, 1)",
            )),
            Resolution::Absolute(a) if !(a > 0.0 && a.is_finite()) => Err(SearchError::setting(
                "resolution",
                format!("absolute {a}"),
                "must be a positive number of frames/s",
            )),
            _ => Ok(()),
        }
    }
}

/// Check a `[min_load, max_load]` range (frames/s) before any trial.
fn check_loads<E: std::error::Error + 'static>(
    min_load: f64,
    max_load: f64,
) -> Result<(), SearchError<E>> {
    if !(min_load > 0.0 && min_load.is_finite()) {
        return Err(SearchError::setting(
            "min_load",
            min_load,
            "must be a positive number of frames/s",
        ));
    }
    if !(max_load.is_finite() && max_load > min_load) {
        return Err(SearchError::setting(
            "max_load",
            max_load,
            "must be finite and above min_load",
        ));
    }
    Ok(())
}

fn check_duration<E: std::error::Error + 'static>(
    field: &'static str,
    d: Duration,
) -> Result<(), SearchError<E>> {
    if d.is_zero() {
        return Err(SearchError::setting(
            field,
            format!("{d:?}"),
            "must be longer than zero",
        ));
    }
    Ok(())
}

fn check_shortfall<E: std::error::Error + 'static>(s: Option<f64>) -> Result<(), SearchError<E>> {
    match s {
        Some(s) if !(0.0..1.0).contains(&s) => Err(SearchError::setting(
            "max_shortfall",
            s,
            "must be in [0, 1)",
        )),
        _ => Ok(()),
    }
}

/// Times a trial whose generator fell short is run again before the search gives up.
pub const SHORTFALL_RETRIES: u32 = 2;

/// Run one trial and check it answers the question asked. A trial whose generator fell
/// short of the load (the OS took its core for a moment: on a shared host that happens
/// now and then, and says nothing about the DUT) is run again, up to
/// [`SHORTFALL_RETRIES`] times; a generator that keeps falling short stops the search.
fn run_trial<M: Measurer + ?Sized>(
    m: &mut M,
    load: f64,
    duration: Duration,
    max_shortfall: Option<f64>,
) -> Result<Trial, SearchError<M::Error>> {
    let mut tries = 0;
    loop {
        let t = m
            .trial(load, duration)
            .map_err(|source| SearchError::Measurer {
                load,
                duration,
                source,
            })?;
        match t.validate(load, duration, max_shortfall) {
            Ok(()) => return Ok(t),
            Err(crate::trial::TrialError::Shortfall { .. }) if tries < SHORTFALL_RETRIES => {
                tries += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Falls short of the load on its first `short` trials, then sends it all.
    struct Starved {
        short: u32,
        trials: u32,
    }

    impl Measurer for Starved {
        type Error = std::io::Error;
        fn trial(&mut self, load: f64, d: Duration) -> Result<Trial, Self::Error> {
            self.trials += 1;
            let full = (load * d.as_secs_f64()) as u64;
            let sent = if self.trials <= self.short {
                full / 2
            } else {
                full
            };
            Ok(Trial::new(load, d, sent, sent))
        }
    }

    #[test]
    fn a_starved_trial_is_run_again_and_a_generator_that_stays_short_stops_the_search() {
        let d = Duration::from_secs(1);
        let mut m = Starved {
            short: 2,
            trials: 0,
        };
        let t = run_trial(&mut m, 1000.0, d, Some(0.01)).unwrap();
        assert_eq!((t.sent, m.trials), (1000, 3));
        let mut m = Starved {
            short: 3,
            trials: 0,
        };
        let e = run_trial(&mut m, 1000.0, d, Some(0.01)).unwrap_err();
        assert!(e.to_string().contains("500 frames"), "{e}");
        assert_eq!(m.trials, 1 + SHORTFALL_RETRIES);
    }

    #[test]
    fn resolution() {
        assert!(Resolution::Relative(0.01).reached(99.0, 100.0));
        assert!(!Resolution::Relative(0.01).reached(98.9, 100.0));
        assert!(Resolution::Absolute(5.0).reached(95.0, 100.0));
        assert!(!Resolution::Absolute(5.0).reached(94.0, 100.0));
        assert!(Resolution::Relative(0.0).check::<std::io::Error>().is_err());
        assert!(
            Resolution::Absolute(f64::NAN)
                .check::<std::io::Error>()
                .is_err()
        );
    }

    #[test]
    fn load_checks_name_the_setting() {
        let e = check_loads::<std::io::Error>(0.0, 1.0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "search setting `min_load` = 0: must be a positive number of frames/s"
        );
        let e = check_loads::<std::io::Error>(10.0, 5.0).unwrap_err();
        assert!(e.to_string().contains("`max_load` = 5"), "{e}");
        assert!(check_loads::<std::io::Error>(1.0, 2.0).is_ok());
    }
}
