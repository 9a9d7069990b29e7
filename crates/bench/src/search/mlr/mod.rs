//! RFC 9971 MLRsearch: NDR and PDR (and any other loss-ratio goals) in one search.
//!
//! Why not RFC 2544's binary search twice: one lost frame in one 60 s trial decides a load for
//! good, so on a noisy host (these machines swing up to 2×) the answer is a draw from the noise,
//! and a second search for PDR repeats most of the first. MLRsearch shares trials between goals,
//! uses short trials far from the answer, sums trials per load, and lets a goal tolerate a share
//! of bad trial time (the exceed ratio) — what FD.io CSIT measures VPP with.
//!
//! # What is standard and what is ours
//!
//! The result is fixed by RFC 9971's definitions, implemented in [`classify`] and tested against
//! the RFC's worked example: how trials at one load classify it as a Lower Bound, an Upper Bound
//! or Undecided for a goal; the **relevant upper bound** (smallest Upper Bound), the **relevant
//! lower bound** (largest Lower Bound below it) and the **conditional throughput** (the
//! forwarding rate of the trial at the exceed-ratio quantile at the relevant lower bound).
//! Which loads to measure, and for how long, is left to implementations; this controller does:
//!
//! 1. **Seed from the forwarding rate.** The first trial is at `max_load` (first phase's trial
//!    duration). If it loses more than the first goal allows, the next load is its forwarding
//!    rate (corrected for that goal's loss ratio, `FR / (1 − loss)`); if that loses too, once
//!    more at *its* forwarding rate. On a DUT that carries its capacity under overload this puts
//!    the second trial right at the capacity.
//! 2. **Goals in order, phases short to long.** For each goal (NDR, then PDR by default) its
//!    phases run coarsest first ([`SearchGoal`]). In a phase: keep measuring the load in focus until
//!    it is classified; re-measure the previous phase's relevant bounds at this phase's trial
//!    length (lower first: bounds found at smaller loads are less likely to be invalidated);
//!    then with both bounds, stop if within the phase's width, else bisect (geometric mean, or
//!    `upper × (1 − width)` when within twice the width, so one more trial can end the phase);
//!    with one bound, step outward by a width that grows 4× per step (clamped to the limits).
//! 3. **Final check.** Trials made for later goals can change an earlier goal's bounds, so the
//!    goals' own (last) phases are re-run until a pass measures nothing.
//!
//! # Non-monotonic loss curves
//!
//! A DUT whose loss is not monotonic in load (Batalla Fig. 6 c–d, [`crate::sim::NonMonotonic`])
//! can produce a Lower Bound above an Upper Bound ("loss inversion"). RFC 9971 is conservative
//! and so is this search: the **smallest** Upper Bound is the relevant one, and the result is
//! the largest Lower Bound **below** it — the start of the lossy window, if any trial landed in
//! it, not the higher loss-free region beyond. Lower Bounds found above the relevant upper bound
//! are not hidden: [`GoalResult::inverted_lower_bounds`] lists them, and a report should say
//! the curve is non-monotonic when it is not empty. A window that no trial lands in cannot be
//! seen by any search; the overload curve (a sweep) is the tool for that.

pub mod classify;
mod goal;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::classify::{Bound, Criterion};
use self::goal::Target;
pub use self::goal::{GoalError, SearchGoal};
use super::{SearchError, check_loads, check_shortfall, run_trial};
use crate::trial::{Measurer, Trial};

/// Settings of an MLRsearch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlrSettings {
    /// Lowest load the search may use (frames/s, > 0).
    pub min_load: f64,
    /// Highest load, tried first (frames/s).
    pub max_load: f64,
    /// The goals; the first one seeds the search. Usually NDR then PDR.
    pub goals: Vec<SearchGoal>,
    /// Stop (with an incomplete result) after this many trials.
    pub max_trials: usize,
    /// Stop (with an incomplete result) once the trials' effective durations add up to this.
    #[serde(rename = "max_traffic_time_s", with = "crate::secs::option", default)]
    pub max_traffic_time: Option<Duration>,
    /// Largest generator shortfall accepted (see [`Trial::shortfall`]); `None` accepts any.
    pub max_shortfall: Option<f64>,
}

impl MlrSettings {
    /// NDR and PDR with [`SearchGoal::ndr`] / [`SearchGoal::pdr`], at most 1000 trials, no time
    /// limit, 1 % generator shortfall accepted.
    pub fn ndr_pdr(min_load: f64, max_load: f64) -> Self {
        Self {
            min_load,
            max_load,
            goals: vec![SearchGoal::ndr(), SearchGoal::pdr()],
            max_trials: 1000,
            max_traffic_time: None,
            max_shortfall: Some(0.01),
        }
    }

    fn check<E: std::error::Error + 'static>(&self) -> Result<(), SearchError<E>> {
        check_loads(self.min_load, self.max_load)?;
        check_shortfall(self.max_shortfall)?;
        if self.goals.is_empty() {
            return Err(SearchError::setting(
                "goals",
                "[]",
                "need at least one goal",
            ));
        }
        for g in &self.goals {
            g.check().map_err(|e| SearchError::Setting {
                field: "goals",
                value: e.to_string(),
                reason: "invalid goal",
            })?;
        }
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

/// Why the search stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MlrStop {
    /// Every goal reached its width (or a load limit).
    Done,
    /// `max_trials` ran out.
    TrialLimit,
    /// `max_traffic_time` ran out.
    TrafficTimeLimit,
}

/// Why a goal's result is irregular (RFC 9971 §"Irregular Goal Result").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Irregular {
    /// `max_load` is a Lower Bound: the DUT meets the goal at least up to `max_load`; the
    /// lower bound reported is `max_load` (an "effective" one, with no upper bound).
    MaxLoadIsLowerBound,
    /// `min_load` is an Upper Bound: the goal is not met even at `min_load`.
    MinLoadIsUpperBound,
    /// The bounds are not within the goal's width: the search stopped at a trial or time
    /// limit (see [`MlrResult::stop`]).
    Incomplete,
}

/// The result for one goal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    /// The goal's name ("NDR", "PDR").
    pub name: String,
    /// The goal's loss ratio.
    pub loss_ratio: f64,
    /// Relevant Lower Bound (frames/s): the throughput as an intended load.
    pub lower_bound: Option<f64>,
    /// Relevant Upper Bound (frames/s).
    pub upper_bound: Option<f64>,
    /// Conditional Throughput at the lower bound (frames/s forwarded): the figure to compare.
    pub conditional_throughput: Option<f64>,
    /// `None` for a regular result (both bounds, within the goal's width).
    pub irregular: Option<Irregular>,
    /// Loads classified as Lower Bounds *above* the relevant upper bound (loss inversion: the
    /// loss curve is not monotonic, or the DUT is noisy). Empty normally.
    pub inverted_lower_bounds: Vec<f64>,
}

impl GoalResult {
    /// True for a regular result (RFC 9971 §"Regular Goal Result").
    pub fn is_regular(&self) -> bool {
        self.irregular.is_none()
    }

    /// `(upper − lower) / upper`, when both bounds exist.
    pub fn relative_width(&self) -> Option<f64> {
        Some((self.upper_bound? - self.lower_bound?) / self.upper_bound?)
    }
}

/// The result of an MLRsearch: one [`GoalResult`] per goal, and every trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlrResult {
    /// Results in the order of `settings.goals`.
    pub goals: Vec<GoalResult>,
    /// Why the search stopped.
    pub stop: MlrStop,
    /// The settings used.
    pub settings: MlrSettings,
    /// Every trial, in the order run.
    pub trials: Vec<Trial>,
}

impl MlrResult {
    /// The result of the goal named `name`.
    pub fn goal(&self, name: &str) -> Option<&GoalResult> {
        self.goals.iter().find(|g| g.name == name)
    }

    /// Sum of the trials' effective durations (what the search cost in traffic time).
    pub fn traffic_time(&self) -> Duration {
        self.trials.iter().map(Trial::effective_duration).sum()
    }
}

/// Run MLRsearch against `m` for `settings.goals`.
pub fn search<M: Measurer + ?Sized>(
    m: &mut M,
    settings: &MlrSettings,
) -> Result<MlrResult, SearchError<M::Error>> {
    settings.check()?;
    let mut st = State {
        m,
        s: settings,
        trials: Vec::new(),
        by_load: BTreeMap::new(),
        traffic: Duration::ZERO,
    };
    let stop = st.run()?;
    let goals = settings.goals.iter().map(|g| st.goal_result(g)).collect();
    Ok(MlrResult {
        goals,
        stop,
        settings: settings.clone(),
        trials: st.trials,
    })
}

/// Relevant bounds for one criterion.
#[derive(Debug, Default)]
struct Bounds {
    lo: Option<f64>,
    hi: Option<f64>,
    inverted: Vec<f64>,
}

struct State<'a, M: ?Sized> {
    m: &'a mut M,
    s: &'a MlrSettings,
    trials: Vec<Trial>,
    /// Trial indexes per intended load, keyed by the load's bits (loads are positive and
    /// finite, and for those the bit patterns sort like the numbers).
    by_load: BTreeMap<u64, Vec<usize>>,
    traffic: Duration,
}

/// Relative slack on width comparisons, so that `hi × (1 − w)` computed in floating point
/// counts as within `w` of `hi`.
const WIDTH_SLACK: f64 = 1e-9;

/// `Ok(Some(stop))` when a limit ended the search.
type Step<E> = Result<Option<MlrStop>, SearchError<E>>;

impl<M: Measurer + ?Sized> State<'_, M> {
    fn run(&mut self) -> Result<MlrStop, SearchError<M::Error>> {
        if let Some(stop) = self.seed()? {
            return Ok(stop);
        }
        let chains: Vec<Vec<Target>> = self.s.goals.iter().map(SearchGoal::targets).collect();
        for chain in &chains {
            for (i, t) in chain.iter().enumerate() {
                if let Some(stop) = self.run_target(t, i.checked_sub(1).map(|p| &chain[p]))? {
                    return Ok(stop);
                }
            }
        }
        loop {
            let before = self.trials.len();
            for chain in &chains {
                let last = chain.len() - 1;
                if let Some(stop) =
                    self.run_target(&chain[last], last.checked_sub(1).map(|p| &chain[p]))?
                {
                    return Ok(stop);
                }
            }
            if self.trials.len() == before {
                return Ok(MlrStop::Done);
            }
        }
    }

    /// Step 1: max load, then its forwarding rate (twice at most).
    fn seed(&mut self) -> Step<M::Error> {
        let goal = &self.s.goals[0];
        let first = goal.targets()[0];
        let d = first.criterion.final_trial_duration;
        let mut load = self.s.max_load;
        for _ in 0..3 {
            if let Some(stop) = self.measure(load, d)? {
                return Ok(Some(stop));
            }
            let t = &self.trials[self.trials.len() - 1];
            if t.loss_ratio() <= goal.loss_ratio {
                break;
            }
            let next = (t.forwarding_rate() / (1.0 - goal.loss_ratio))
                .clamp(self.s.min_load, self.s.max_load);
            if next >= load * (1.0 - first.width) {
                break;
            }
            load = next;
        }
        Ok(None)
    }

    /// Step 2: one phase of one goal, until its bounds are within its width or hit a limit.
    fn run_target(&mut self, t: &Target, prev: Option<&Target>) -> Step<M::Error> {
        let (min, max) = (self.s.min_load, self.s.max_load);
        let c = &t.criterion;
        let mut focus: Option<f64> = None;
        let mut steps_out = 0;
        loop {
            if let Some(f) = focus
                && self.classify(f, c) == Bound::Undecided
            {
                if let Some(stop) = self.measure(f, c.final_trial_duration)? {
                    return Ok(Some(stop));
                }
                continue;
            }
            let b = self.bounds(c);
            if let Some(p) = prev {
                let pb = self.bounds(&p.criterion);
                let inside = |x: f64| b.lo.is_none_or(|lo| x > lo) && b.hi.is_none_or(|hi| x < hi);
                let refine = [pb.lo, pb.hi]
                    .into_iter()
                    .flatten()
                    .find(|&x| inside(x) && self.classify(x, c) == Bound::Undecided);
                if refine.is_some() {
                    focus = refine;
                    continue;
                }
            }
            let widen = |steps: i32| (t.width * 4f64.powi(steps)).min(0.5);
            let next = match (b.lo, b.hi) {
                (_, Some(hi)) if hi <= min => return Ok(None),
                (Some(lo), None) if lo >= max => return Ok(None),
                (None, None) => max,
                (Some(lo), None) => {
                    let x = lo / (1.0 - widen(steps_out));
                    steps_out += 1;
                    if x >= max * (1.0 - t.width) { max } else { x }
                }
                (None, Some(hi)) => {
                    let x = hi * (1.0 - widen(steps_out));
                    steps_out += 1;
                    if x * (1.0 - t.width) <= min { min } else { x }
                }
                (Some(lo), Some(hi)) => {
                    steps_out = 0;
                    let w = (hi - lo) / hi;
                    if w <= t.width * (1.0 + WIDTH_SLACK) {
                        return Ok(None);
                    }
                    if w <= 2.0 * t.width {
                        hi * (1.0 - t.width)
                    } else {
                        (lo * hi).sqrt()
                    }
                }
            };
            // Every branch above picks a load no trial has classified yet (see `bounds`); if
            // rounding ever broke that, stop rather than spin: the goal's result then says
            // `Incomplete` if its width was not reached.
            if self.classify(next, c) != Bound::Undecided {
                return Ok(None);
            }
            focus = Some(next);
        }
    }

    fn measure(&mut self, load: f64, d: Duration) -> Step<M::Error> {
        if self.trials.len() >= self.s.max_trials {
            return Ok(Some(MlrStop::TrialLimit));
        }
        if self
            .s
            .max_traffic_time
            .is_some_and(|max| self.traffic >= max)
        {
            return Ok(Some(MlrStop::TrafficTimeLimit));
        }
        let t = run_trial(self.m, load, d, self.s.max_shortfall)?;
        self.traffic += t.effective_duration();
        self.by_load
            .entry(load.to_bits())
            .or_default()
            .push(self.trials.len());
        self.trials.push(t);
        Ok(None)
    }

    fn at(&self, load: f64) -> impl Iterator<Item = &Trial> {
        self.by_load
            .get(&load.to_bits())
            .into_iter()
            .flatten()
            .map(|&i| &self.trials[i])
    }

    fn classify(&self, load: f64, c: &Criterion) -> Bound {
        classify::classify(&classify::DurationSums::of(self.at(load), c), c).bound
    }

    /// Relevant bounds for `c`. Why the controller's next load is always unclassified: the
    /// upper bound is the smallest Upper Bound and the lower bound the largest Lower Bound
    /// below it, so any load strictly between them is Undecided; stepping up from a lower
    /// bound with no upper bound lands above the largest Lower Bound; stepping down from an
    /// upper bound with no lower bound lands below the smallest Upper Bound and below every
    /// Lower Bound's absence; and `max_load`/`min_load` are only chosen when they are not
    /// classified (else they would be the bound that ends the phase).
    fn bounds(&self, c: &Criterion) -> Bounds {
        let mut b = Bounds::default();
        for &bits in self.by_load.keys() {
            let load = f64::from_bits(bits);
            match self.classify(load, c) {
                Bound::Upper if b.hi.is_none() => b.hi = Some(load),
                Bound::Lower if b.hi.is_none() => b.lo = Some(load),
                Bound::Lower => b.inverted.push(load),
                _ => {}
            }
        }
        b
    }

    fn goal_result(&self, g: &SearchGoal) -> GoalResult {
        let c = g.criterion();
        let b = self.bounds(&c);
        let irregular = match (b.lo, b.hi) {
            (Some(lo), Some(hi)) if (hi - lo) / hi <= g.relative_width * (1.0 + WIDTH_SLACK) => {
                None
            }
            (Some(lo), None) if lo >= self.s.max_load => Some(Irregular::MaxLoadIsLowerBound),
            (None, Some(hi)) if hi <= self.s.min_load => Some(Irregular::MinLoadIsUpperBound),
            _ => Some(Irregular::Incomplete),
        };
        GoalResult {
            name: g.name.clone(),
            loss_ratio: g.loss_ratio,
            lower_bound: b.lo,
            upper_bound: b.hi,
            conditional_throughput: b
                .lo
                .and_then(|lo| classify::conditional_throughput(lo, self.at(lo), &c)),
            irregular,
            inverted_lower_bounds: b.inverted,
        }
    }
}

#[cfg(test)]
mod tests;
