//! Search goals (RFC 9971 §"Search Goal") and the phases derived from them.
//!
//! A goal says what "throughput" means: the loss ratio tolerated in a trial, the share of trial
//! time that may exceed it, how long trials must be, how much trial time decides a load, and how
//! close the bounds must get. NDR and PDR are two goals of one search.
//!
//! # Phases
//!
//! Searching with full-length trials from the start wastes time far from the answer. As FD.io
//! CSIT does, each goal is preceded by `preceding_targets` coarser *targets* (phases): each
//! phase is twice as wide as the next and has a duration sum shrinking geometrically from the
//! goal's sum down to one `initial_trial_duration`, with trials no longer than that sum. The first phase thus classifies a load from a single short
//! trial and narrows the interval cheaply; later phases re-measure the bounds the earlier one
//! found with longer trials and more of them. Only the last target is the goal itself, and only
//! it decides the result. (RFC 9971 leaves the choice of trial durations and loads to the
//! implementation; load classification alone fixes the result.)

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::classify::Criterion;

/// One search goal (RFC 9971 §"Search Goal"), plus this implementation's phase count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchGoal {
    /// Name in results and reports, e.g. "NDR".
    pub name: String,
    /// Goal Loss Ratio: a trial losing a larger share of its frames is high-loss.
    pub loss_ratio: f64,
    /// Goal Exceed Ratio: share of trial time allowed to be high-loss at a lower bound.
    pub exceed_ratio: f64,
    /// Goal Width, relative: stop when `(upper − lower) / upper ≤` this.
    pub relative_width: f64,
    /// Goal Initial Trial Duration: trial length of the first phase.
    #[serde(rename = "initial_trial_duration_s", with = "crate::secs")]
    pub initial_trial_duration: Duration,
    /// Goal Final Trial Duration: trials shorter than this are "short".
    #[serde(rename = "final_trial_duration_s", with = "crate::secs")]
    pub final_trial_duration: Duration,
    /// Goal Duration Sum: full-length trial time that certainly classifies a load.
    #[serde(rename = "duration_sum_s", with = "crate::secs")]
    pub duration_sum: Duration,
    /// Coarser phases before the goal itself (0 = search at the goal's settings only).
    pub preceding_targets: u32,
}

impl SearchGoal {
    /// Non-drop rate: zero loss, half the trial time may exceed it (RFC 9971's recommended
    /// exceed ratio), 0.5 % width, 1 s → 5 s trials, 20 s per load, two coarser phases.
    pub fn ndr() -> Self {
        Self {
            name: "NDR".into(),
            loss_ratio: 0.0,
            exceed_ratio: 0.5,
            relative_width: 0.005,
            initial_trial_duration: Duration::from_secs(1),
            final_trial_duration: Duration::from_secs(5),
            duration_sum: Duration::from_secs(20),
            preceding_targets: 2,
        }
    }

    /// Partial drop rate: as [`Self::ndr`] with a 0.5 % loss ratio (FD.io CSIT's PDR).
    pub fn pdr() -> Self {
        Self {
            name: "PDR".into(),
            loss_ratio: 0.005,
            ..Self::ndr()
        }
    }

    /// The same goal with every duration scaled to `final_trial_duration = d` (initial and sum
    /// keep their ratios to it); for short "quick" runs.
    pub fn with_final_trial_duration(mut self, d: Duration) -> Self {
        let k = d.as_secs_f64() / self.final_trial_duration.as_secs_f64();
        self.initial_trial_duration = self.initial_trial_duration.mul_f64(k).min(d);
        self.duration_sum = self.duration_sum.mul_f64(k);
        self.final_trial_duration = d;
        self
    }

    /// The goal's own criterion (its final target).
    pub fn criterion(&self) -> Criterion {
        Criterion {
            loss_ratio: self.loss_ratio,
            exceed_ratio: self.exceed_ratio,
            final_trial_duration: self.final_trial_duration,
            duration_sum: self.duration_sum,
        }
    }

    /// Check the goal; the error names the field and its value.
    pub fn check(&self) -> Result<(), GoalError> {
        let bad = |field, value: String, reason| {
            Err(GoalError {
                goal: self.name.clone(),
                field,
                value,
                reason,
            })
        };
        if !(0.0..1.0).contains(&self.loss_ratio) {
            return bad(
                "loss_ratio",
                self.loss_ratio.to_string(),
                "must be in [0, 1)",
            );
        }
        if !(0.0..1.0).contains(&self.exceed_ratio) {
            return bad(
                "exceed_ratio",
                self.exceed_ratio.to_string(),
                "must be in [0, 1)",
            );
        }
        if !(self.relative_width > 0.0 && self.relative_width < 1.0) {
            return bad(
                "relative_width",
                self.relative_width.to_string(),
                "must be in (0, 1)",
            );
        }
        if self.initial_trial_duration.is_zero() {
            return bad(
                "initial_trial_duration",
                format!("{:?}", self.initial_trial_duration),
                "must be longer than zero",
            );
        }
        if self.final_trial_duration < self.initial_trial_duration {
            return bad(
                "final_trial_duration",
                format!("{:?}", self.final_trial_duration),
                "must be at least initial_trial_duration",
            );
        }
        if self.duration_sum < self.final_trial_duration {
            return bad(
                "duration_sum",
                format!("{:?}", self.duration_sum),
                "must be at least final_trial_duration",
            );
        }
        if self.preceding_targets > 16 {
            return bad(
                "preceding_targets",
                self.preceding_targets.to_string(),
                "must be at most 16",
            );
        }
        Ok(())
    }

    /// The phases of this goal, coarsest first; the last is the goal itself.
    pub(crate) fn targets(&self) -> Vec<Target> {
        let n = self.preceding_targets;
        let sum = self.duration_sum.as_secs_f64();
        let initial = self.initial_trial_duration.as_secs_f64();
        let multiplier = if n > 0 {
            (initial / sum).powf(1.0 / f64::from(n))
        } else {
            1.0
        };
        let mut targets: Vec<Target> = (0..=n)
            .map(|i| {
                // i = 0 is the goal; i = n the coarsest phase, whose sum is one initial trial.
                let (trial_duration, duration_sum) = if i == 0 {
                    (self.final_trial_duration, self.duration_sum)
                } else {
                    let s = if i == n {
                        self.initial_trial_duration
                    } else {
                        Duration::from_secs_f64(sum * multiplier.powi(i as i32))
                    };
                    (self.final_trial_duration.min(s), s)
                };
                Target {
                    criterion: Criterion {
                        loss_ratio: self.loss_ratio,
                        exceed_ratio: self.exceed_ratio,
                        final_trial_duration: trial_duration,
                        duration_sum,
                    },
                    width: (self.relative_width * f64::from(1u32 << i)).min(0.5),
                }
            })
            .collect();
        targets.reverse();
        targets
    }
}

/// A goal setting out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("search goal {goal:?}: `{field}` = {value}: {reason}")]
pub struct GoalError {
    /// The goal's name.
    pub goal: String,
    /// The offending field.
    pub field: &'static str,
    /// Its value.
    pub value: String,
    /// What it must be.
    pub reason: &'static str,
}

/// One phase of a goal: a criterion (whose final trial duration is the phase's trial length)
/// and the relative width at which the phase is done.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Target {
    pub(crate) criterion: Criterion,
    pub(crate) width: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_go_from_short_and_coarse_to_the_goal() {
        let t = SearchGoal::ndr().targets();
        assert_eq!(t.len(), 3);
        // Coarsest: one 1 s trial decides, width 4 × 0.5 %.
        assert_eq!(t[0].criterion.final_trial_duration, Duration::from_secs(1));
        assert_eq!(t[0].criterion.duration_sum, Duration::from_secs(1));
        assert!((t[0].width - 0.02).abs() < 1e-12);
        // Middle: sum √(1 × 20) ≈ 4.47 s, one trial of that length, width 1 %.
        let mid = t[1].criterion.duration_sum.as_secs_f64();
        assert!((mid - 20f64.sqrt()).abs() < 1e-6, "{mid}");
        assert_eq!(
            t[1].criterion.final_trial_duration,
            t[1].criterion.duration_sum
        );
        assert!((t[1].width - 0.01).abs() < 1e-12);
        // The goal itself.
        assert_eq!(t[2].criterion, SearchGoal::ndr().criterion());
        assert_eq!(t[2].width, 0.005);
    }

    #[test]
    fn no_preceding_targets_is_the_goal_alone() {
        let g = SearchGoal {
            preceding_targets: 0,
            ..SearchGoal::pdr()
        };
        let t = g.targets();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].criterion, g.criterion());
    }

    #[test]
    fn scaling_durations_for_quick_runs() {
        let g = SearchGoal::ndr().with_final_trial_duration(Duration::from_secs(1));
        assert_eq!(g.final_trial_duration, Duration::from_secs(1));
        assert_eq!(g.initial_trial_duration, Duration::from_millis(200));
        assert_eq!(g.duration_sum, Duration::from_secs(4));
        assert!(g.check().is_ok());
    }

    #[test]
    fn checks_name_goal_field_and_value() {
        let e = SearchGoal {
            loss_ratio: 1.5,
            ..SearchGoal::pdr()
        }
        .check()
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "search goal \"PDR\": `loss_ratio` = 1.5: must be in [0, 1)"
        );
        let e = SearchGoal {
            duration_sum: Duration::from_secs(1),
            ..SearchGoal::ndr()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.field, "duration_sum");
        let e = SearchGoal {
            relative_width: 0.0,
            ..SearchGoal::ndr()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.field, "relative_width");
        assert!(SearchGoal::ndr().check().is_ok() && SearchGoal::pdr().check().is_ok());
    }
}
