//! A progress bar for long runs: current stage and trial, traffic time done, ETA.
//!
//! A full run (60 s RFC 2544 trials, N work points, several DUTs) takes hours; a silent terminal
//! for that long looks hung. The bar counts *traffic time* (the sum of trial durations), not
//! trials, because trials differ in length (MLRsearch's first phases use 1 s trials, its last
//! 5 s ones) and time is what the ETA is about. Searches do not know in advance how many trials
//! they need, so the length is an estimate the caller gives ([`rfc2544_estimate`] and
//! [`mlr_estimate`] help) and the bar grows it when a search runs over.
//!
//! The bar draws on stderr only when stderr is a terminal ([`ProgressMode::Auto`]) — so logs,
//! CI and `2> file` stay clean — or never ([`ProgressMode::Hidden`], for `--quiet`). Messages
//! printed through [`Progress::println`] do not garble the bar.
//!
//! Wiring: wrap the measurer, `search(&mut progress.wrap(&mut measurer), &settings)`; every
//! trial then updates the bar (see [`Tracked`]).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::table::si;
use crate::search::mlr::MlrSettings;
use crate::search::rfc2544::Rfc2544Settings;
use crate::trial::{Measurer, Trial};

/// When to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// Draw on stderr if it is a terminal.
    Auto,
    /// Never draw (e.g. `--quiet`).
    Hidden,
}

impl ProgressMode {
    /// Whether to draw, given whether stderr is a terminal.
    pub fn draws(self, stderr_is_terminal: bool) -> bool {
        match self {
            ProgressMode::Auto => stderr_is_terminal,
            ProgressMode::Hidden => false,
        }
    }
}

/// The progress of a run, counted in milliseconds of traffic time.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    hidden: bool,
    trials: AtomicU64,
}

impl Progress {
    /// A bar expecting about `estimate` of traffic time.
    pub fn new(mode: ProgressMode, estimate: Duration) -> Self {
        let hidden = !mode.draws(std::io::stderr().is_terminal());
        let target = if hidden {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(Some(millis(estimate).max(1)), target);
        // The template is a constant; should it ever fail to parse, keep indicatif's default.
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:.bold} [{elapsed_precise}] {wide_bar} {percent:>3}% ETA {eta} {msg}",
        ) {
            bar.set_style(style);
        }
        Self {
            bar,
            hidden,
            trials: AtomicU64::new(0),
        }
    }

    /// True if nothing is drawn.
    pub fn is_hidden(&self) -> bool {
        self.hidden
    }

    /// What is being measured now, e.g. "vrhost-afxdp 64B NDR/PDR".
    pub fn set_stage(&self, stage: &str) {
        self.bar.set_prefix(stage.to_string());
    }

    /// Add `more` to the expected traffic time (a new stage was planned).
    pub fn add_estimate(&self, more: Duration) {
        self.bar.inc_length(millis(more));
    }

    /// A trial at `load` for `duration` starts.
    pub fn trial_started(&self, load: f64, duration: Duration) {
        let n = self.trials.load(Ordering::Relaxed) + 1;
        self.bar.set_message(format!(
            "trial {n}: {}fps for {duration:.1?}",
            si_prefixed(load)
        ));
        // A search that runs over its estimate grows the bar instead of sitting at 100 %.
        let need = self.bar.position() + millis(duration);
        if self.bar.length().is_some_and(|len| len < need) {
            self.bar.set_length(need);
        }
    }

    /// A trial finished.
    pub fn trial_finished(&self, t: &Trial) {
        let n = self.trials.fetch_add(1, Ordering::Relaxed) + 1;
        self.bar.inc(millis(t.duration));
        self.bar.set_message(format!(
            "trial {n}: {}fps → loss {:.4} %",
            si_prefixed(t.offered_load),
            t.loss_ratio() * 100.0
        ));
    }

    /// Trials finished so far.
    pub fn trials(&self) -> u64 {
        self.trials.load(Ordering::Relaxed)
    }

    /// Traffic time accounted so far.
    pub fn done(&self) -> Duration {
        Duration::from_millis(self.bar.position())
    }

    /// Print a line above the bar (or plainly to stderr when hidden and `Auto` chose so).
    pub fn println(&self, msg: &str) {
        if self.hidden {
            eprintln!("{msg}");
        } else {
            self.bar.println(msg);
        }
    }

    /// Finish and leave the bar on screen.
    pub fn finish(&self) {
        self.bar.finish();
    }

    /// A measurer that reports every trial to this bar.
    pub fn wrap<M: Measurer>(&self, inner: M) -> Tracked<'_, M> {
        Tracked {
            inner,
            progress: self,
        }
    }
}

/// A [`Measurer`] that updates a [`Progress`] around every trial.
#[derive(Debug)]
pub struct Tracked<'a, M> {
    inner: M,
    progress: &'a Progress,
}

impl<M: Measurer> Measurer for Tracked<'_, M> {
    type Error = M::Error;

    fn trial(&mut self, load: f64, duration: Duration) -> Result<Trial, M::Error> {
        self.progress.trial_started(load, duration);
        let t = self.inner.trial(load, duration)?;
        self.progress.trial_finished(&t);
        Ok(t)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn si_prefixed(v: f64) -> String {
    // "1.234 M" → "1.234 M"; plain numbers get a space so "fps" reads well.
    let s = si(v);
    if s.ends_with(|c: char| c.is_ascii_alphabetic()) {
        s
    } else {
        format!("{s} ")
    }
}

/// Rough traffic time of an RFC 2544 search: bisection steps to the resolution, plus the
/// trials at max and min load.
pub fn rfc2544_estimate(s: &Rfc2544Settings) -> Duration {
    let width = match s.resolution {
        crate::search::Resolution::Relative(r) => r * s.max_load,
        crate::search::Resolution::Absolute(a) => a,
    };
    let steps = ((s.max_load - s.min_load) / width.max(f64::MIN_POSITIVE))
        .log2()
        .ceil()
        .max(0.0) as u32
        + 2;
    s.trial_duration * steps.min(s.max_trials as u32)
}

/// Rough traffic time of an MLRsearch: per goal, about four loads classified at the final
/// duration sum (half of it each on average) plus the shorter phases.
pub fn mlr_estimate(s: &MlrSettings) -> Duration {
    s.goals
        .iter()
        .map(|g| g.duration_sum * 2 + g.initial_trial_duration * 8)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{mlr, rfc2544};
    use crate::sim::SimDut;

    #[test]
    fn modes() {
        assert!(ProgressMode::Auto.draws(true));
        assert!(!ProgressMode::Auto.draws(false));
        assert!(!ProgressMode::Hidden.draws(true));
        assert!(Progress::new(ProgressMode::Hidden, Duration::from_secs(10)).is_hidden());
    }

    #[test]
    fn counts_every_trial_of_a_search() {
        let p = Progress::new(ProgressMode::Hidden, Duration::from_secs(10));
        p.set_stage("sim 64B");
        let mut dut = SimDut::ideal(1e6);
        let s = rfc2544::Rfc2544Settings {
            trial_duration: Duration::from_secs(2),
            ..rfc2544::Rfc2544Settings::new(1e3, 2e6)
        };
        let r = rfc2544::search(&mut p.wrap(&mut dut), &s).unwrap();
        assert_eq!(p.trials() as usize, r.trials.len());
        assert_eq!(p.trials() as usize, dut.trials);
        assert_eq!(p.done(), r.traffic_time());
        // The search ran over the 10 s estimate; the bar grew rather than overflowed.
        assert!(r.traffic_time() > Duration::from_secs(10));
        assert!(p.bar.length().unwrap() >= p.bar.position());
        p.finish();
    }

    #[test]
    fn estimates_are_in_the_right_ballpark() {
        let s = rfc2544::Rfc2544Settings::new(1e3, 2e6);
        let est = rfc2544_estimate(&s);
        let real = rfc2544::search(&mut SimDut::ideal(1e6), &s)
            .unwrap()
            .traffic_time();
        assert!(est >= real / 2 && est <= real * 2, "{est:?} vs {real:?}");
        let s = mlr::MlrSettings::ndr_pdr(1e3, 2e6);
        let est = mlr_estimate(&s);
        let real = mlr::search(&mut SimDut::ideal(1e6), &s)
            .unwrap()
            .traffic_time();
        assert!(est >= real / 3 && est <= real * 3, "{est:?} vs {real:?}");
    }
}
